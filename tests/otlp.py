"""A loopback OTLP/HTTP receiver for the tests of ``--otel``: it takes ``POST /v1/traces`` and
keeps the bodies, which :func:`received_spans` reads back."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _Receiver(http.server.BaseHTTPRequestHandler):
    bodies: list[tuple[str, bytes]]

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        self.bodies.append((self.path, self.rfile.read(length)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    """A loopback HTTP server that takes ``POST /v1/traces`` and keeps the bodies."""
    bodies: list[tuple[str, bytes]] = []
    handler = type("Receiver", (_Receiver,), {"bodies": bodies})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()


def received_spans(bodies: list[tuple[str, bytes]]) -> list[dict[str, Any]]:
    """The spans of the bodies: name, trace, span and parent ids (hex), attributes, service."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    spans = []
    for _, body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            service = next(
                (
                    a.value.string_value
                    for a in resource_spans.resource.attributes
                    if a.key == "service.name"
                ),
                None,
            )
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(
                        {
                            "name": span.name,
                            "trace": span.trace_id.hex(),
                            "span": span.span_id.hex(),
                            "parent": span.parent_span_id.hex() or None,
                            "attributes": {
                                a.key: getattr(a.value, a.value.WhichOneof("value"))
                                for a in span.attributes
                            },
                            "service": service,
                            "scope": scope_spans.scope.name,
                        }
                    )
    return spans
