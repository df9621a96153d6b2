"""OpenTelemetry traces of a session (docs/observability.md): an adapter the face attaches.

relay depends on ``opentelemetry-api`` only, and only when it is installed (the ``otel``
extra): without it nothing here imports it and a session has no tracer. With it, a session's
spans go to the tracer provider it is given (``open_session(tracer_provider=...)``), else to
the global one, which the embedding program configures with its SDK as usual; with no SDK
configured every span is a no-op.

The core knows nothing of this room: :class:`~._observer.SessionTracer` listens to the
session's events and :class:`~._observer.TracedModel` wraps its model client.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._base._config import Config
from .._version import __version__
from ._values import records_content

if TYPE_CHECKING:
    from ._observer import SessionTracer

#: The instrumentation scope of relay's spans.
SCOPE = "relay"


def session_tracer(
    config: Config, tracer_provider: Any = None, links: Sequence[tuple[str, str]] = ()
) -> SessionTracer | None:
    """The tracer of a new session, or None when ``opentelemetry-api`` is not installed.

    ``tracer_provider``: the provider to use (default: the global one); ``links``: the trace
    and span ids of the earlier runs of a resumed session. The session span's parent is the
    span current in the caller (none: the session's trace starts with it).
    """
    try:
        from opentelemetry import context, trace
    except ImportError:
        return None
    from ._observer import SessionTracer

    tracer = trace.get_tracer(SCOPE, __version__, tracer_provider=tracer_provider)
    return SessionTracer(
        tracer,
        provider=config.model_provider,
        content=records_content(config, os.environ),
        links=links,
        # Called where the program opens the session: the span current there is the
        # session's parent, taken now rather than wherever the first event is emitted.
        parent=context.get_current(),
    )


__all__ = ["SCOPE", "session_tracer"]
