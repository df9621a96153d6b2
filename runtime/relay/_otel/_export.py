"""Exporting spans from the ``relay`` command (``--otel``; docs/observability.md).

The command owns its process, so it sets up the OpenTelemetry SDK itself when asked: the
console exporter (one JSON line per span, on standard error, so that standard output stays the
events or the answer), or OTLP over HTTP when the environment says so. The standard variables
decide: ``OTEL_TRACES_EXPORTER`` (``console``, ``otlp``, ``none``),
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (OTLP without naming
it), ``OTEL_SERVICE_NAME`` (default ``relay``), ``OTEL_SDK_DISABLED``, and what the SDK and
its OTLP exporter read themselves (headers, timeout, sampler, resource attributes).

Which exporter is a plain function of the environment (:func:`exporters`); nothing of the SDK
is imported until :func:`start_export`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING

from .._base._errors import ConfigError
from .._version import __version__

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

CONSOLE = "console"
OTLP = "otlp"
#: Seconds the command waits at exit for its spans to be exported.
FLUSH_SECONDS = 5.0
#: What to install for ``--otel``.
SDK_PACKAGES = "opentelemetry-sdk (pip install 'relay-runtime[otel]' opentelemetry-sdk)"
OTLP_PACKAGE = "opentelemetry-exporter-otlp-proto-http"

_OTLP_NAMES = frozenset({"otlp", "otlp_proto_http"})
_HTTP = "http/protobuf"


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def wanted(flag: bool, environ: Mapping[str, str]) -> bool:
    """Whether the command exports spans: ``--otel``, or ``OTEL_TRACES_EXPORTER`` naming an
    exporter; never with ``OTEL_SDK_DISABLED=true``."""
    if _true(environ.get("OTEL_SDK_DISABLED")):
        return False
    named = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    return flag or (bool(named) and named != "none")


def exporters(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The exporters the environment asks for (:data:`CONSOLE`, :data:`OTLP`); empty for
    ``none``. Unset: OTLP when an OTLP endpoint is set, else the console.

    Raises:
        ConfigError: an exporter relay does not have, or OTLP over another protocol than HTTP.
    """
    named = [
        name.strip().lower()
        for name in environ.get("OTEL_TRACES_EXPORTER", "").split(",")
        if name.strip()
    ]
    if not named:
        endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        named = [OTLP if endpoint else CONSOLE]
    chosen: list[str] = []
    for name in named:
        if name == "none":
            continue
        if name == CONSOLE:
            chosen.append(CONSOLE)
        elif name in _OTLP_NAMES:
            protocol = (
                environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or _HTTP
            )
            if protocol.strip() != _HTTP:
                raise ConfigError(
                    f"OTLP over {protocol.strip()!r} is not supported: relay exports OTLP over "
                    f"HTTP ({_HTTP})"
                )
            chosen.append(OTLP)
        else:
            raise ConfigError(
                f"OTEL_TRACES_EXPORTER={name!r} is not an exporter relay has: it has console, "
                "otlp (over HTTP) and none"
            )
    return tuple(dict.fromkeys(chosen))


def _one_line(span: ReadableSpan) -> str:
    text: str = span.to_json(indent=None)
    return text + "\n"


class Export:
    """The SDK set up for one command: its provider, and the bounded flush at exit."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        """The tracer provider the session's spans go to."""

    def close(self, timeout: float = FLUSH_SECONDS) -> bool:
        """Export what is left and shut the SDK down, waiting at most ``timeout`` seconds;
        whether it was done in time.

        The SDK's own flush waits for its exporter, which retries an unreachable collector
        until its own timeout: it runs on a thread of its own, which the command leaves
        behind when the time is up.
        """
        provider = self.provider

        def finish() -> None:
            provider.force_flush()
            provider.shutdown()

        worker = threading.Thread(target=finish, name="relay-otel-flush", daemon=True)
        worker.start()
        worker.join(timeout)
        return not worker.is_alive()


def start_export(chosen: Sequence[str], stream: IO[str]) -> Export:
    """Set up the SDK with the ``chosen`` exporters (console spans go to ``stream``); the SDK
    and the OTLP exporter read the rest of their settings from the environment.

    Raises:
        ConfigError: the SDK, or the OTLP exporter, is not installed (the message names what
            to install).
    """
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
        )
    except ImportError:
        raise ConfigError(f"--otel needs the OpenTelemetry SDK: install {SDK_PACKAGES}") from None
    span_exporter = None
    if OTLP in chosen:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigError(
                f"exporting OTLP needs the OTLP exporter: install {OTLP_PACKAGE}"
            ) from None
        span_exporter = OTLPSpanExporter()
    resource = Resource.create()
    named = resource.attributes
    if str(named.get("service.name", "")).startswith("unknown_service"):
        # Neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES named the service.
        resource = resource.merge(Resource({"service.name": "relay"}))
        if "service.version" not in named:
            resource = resource.merge(Resource({"service.version": __version__}))
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    if CONSOLE in chosen:
        provider.add_span_processor(
            SimpleSpanProcessor(ConsoleSpanExporter(out=stream, formatter=_one_line))
        )
    if span_exporter is not None:
        # In the background: a slow collector never holds up the session.
        provider.add_span_processor(BatchSpanProcessor(span_exporter))
    return Export(provider)


def export_for(
    flag: bool, environ: Mapping[str, str], stream: IO[str], command: str
) -> Export | None:
    """The SDK set up to export a command's spans: asked for by ``--otel`` (a problem is a
    usage error) or by ``OTEL_TRACES_EXPORTER`` (a problem is a warning on ``stream``, naming
    the ``command``, and no spans).

    Raises:
        ConfigError: with ``--otel``, the environment names no exporter relay has, or the SDK
            is not installed.
    """
    if not wanted(flag, environ):
        return None
    try:
        chosen = exporters(environ)
        return start_export(chosen, stream) if chosen else None
    except ConfigError as exc:
        if flag:
            raise
        stream.write(f"{command}: warning: no traces: {exc}\n")
        return None


def close_export(export: Export | None, stream: IO[str], command: str) -> None:
    """Export what is left, and say on ``stream`` when it could not be done in time."""
    if export is not None and not export.close():
        stream.write(
            f"{command}: warning: the spans were not all exported within {FLUSH_SECONDS:g} s; "
            "is the OTLP collector reachable?\n"
        )


__all__ = [
    "CONSOLE",
    "FLUSH_SECONDS",
    "OTLP",
    "Export",
    "close_export",
    "export_for",
    "exporters",
    "start_export",
    "wanted",
]
