"""A loopback model server that can answer a request with exactly the bytes a test gives.

``relay mock-server`` (:mod:`relay._testing._mock_server`) only sends well-formed answers built from
a model script. Some faults are not well-formed: a frame whose ``data`` is not JSON, an in-stream
``error`` event, a compaction answer that is not JSON at all. :class:`RawServer` serves those over a
real socket with hypercorn, like the mock server: requests listed in ``raw`` (by their 1-based
number) get the given status, headers and body chunks; every other request is answered from the
model script through the same :func:`~relay._models._mock_transport.plan_exchange` the mock server
uses.
"""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from relay._models._mock_transport import (
    SSE_HEADERS,
    plan_exchange,
    request_json,
    request_log_entry,
    script_from,
)
from relay._models._responses import PURPOSE_HEADER


@attrs.frozen
class RawAnswer:
    """An answer sent byte for byte."""

    chunks: tuple[bytes, ...]
    """The body, sent in these chunks."""
    status: int = 200
    """HTTP status."""
    headers: tuple[tuple[str, str], ...] = SSE_HEADERS
    """Response headers."""


def sse(data: str, event: str | None = None) -> bytes:
    """One server-sent-event frame with ``data`` as it is (valid JSON or not)."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data}\n\n".encode()


class RawServer:
    """Serves a model script, except for the requests that get a raw answer.

    Attributes:
        requests: the log record of every request (credentials left out), in order.
        base_url: ``http://127.0.0.1:PORT/v1`` while serving.
    """

    def __init__(self, script: Any, raw: Mapping[int, RawAnswer]) -> None:
        self.script = script_from(script)
        self.raw = dict(raw)
        self.requests: list[dict[str, Any]] = []
        self.base_url: str | None = None
        #: Requests (by number) whose answer waits until their event is set.
        self.gates: dict[int, trio.Event] = {}

    async def _app(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        query = urllib.parse.parse_qsl(scope["query_string"].decode("latin-1"))
        self.requests.append(request_log_entry(scope["path"], headers, bytes(body), query=query))
        number = len(self.requests)
        gate = self.gates.get(number)
        if gate is not None:
            await gate.wait()
        answer = self.raw.get(number)
        if answer is None:
            purpose = next((v for k, v in headers if k.lower() == PURPOSE_HEADER), "turn")
            exchange = plan_exchange(
                self.script, scope["path"], request_json(bytes(body)), purpose=purpose
            )
            chunks = exchange.frames if exchange.frames is not None else (exchange.body,)
            answer = RawAnswer(tuple(chunks), exchange.status, exchange.headers)
        await send(
            {
                "type": "http.response.start",
                "status": answer.status,
                "headers": [(k.encode(), v.encode()) for k, v in answer.headers],
            }
        )
        for chunk in answer.chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


@asynccontextmanager
async def open_raw_server(script: Any, raw: Mapping[int, RawAnswer]) -> AsyncIterator[RawServer]:
    """Run a :class:`RawServer` on a free loopback port for the duration of the context."""
    server = RawServer(script, raw)
    config = HypercornConfig()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.loglevel = "WARNING"
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(functools.partial(hypercorn_serve, server._app, config))
        server.base_url = f"{binds[0]}/v1"
        try:
            yield server
        finally:
            server.base_url = None
            nursery.cancel_scope.cancel()
