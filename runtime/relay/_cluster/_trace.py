"""Traces of sessions on a deployment (``docs/observability.md``, ``docs/cluster.md``).

Two sides. **The caller's**: ``relay cluster run --otel`` makes one ``relay.cluster.run`` span
for the run and, within it, one ``relay.cluster.session`` span per script, which says the
script, the session, its host, its turns and failovers and how it ended (:class:`RunTracer`).
**The hosts'**: a session's own spans (``relay.session``, its turns, its model requests and
tool calls) are made where it runs. A client sends the context current where it opens a
session along with the open (W3C trace context, :func:`carrier`), and the host opens the
session within it (:func:`within_context`), so that its ``relay.session`` span is the child of
the caller's span: of the script's, under ``relay cluster run``. A host exports its spans when
its environment asks for it (:func:`host_export`), as the ``relay`` command does; a run whose
spans go over OTLP hands its ``OTEL_`` variables to the hosts it starts (:func:`host_variables`).

``opentelemetry`` is imported only when something is traced: without it, nothing here imports
it, a client sends no context, and a host exports nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .._base import _protocol as p
from .._base._errors import ConfigError
from .._version import __version__

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from .._otel._export import Export

# Span and attribute names of the cluster's own spans (the session's are in ``_otel/_names``).
RUN_SPAN = "relay.cluster.run"
SESSION_SPAN = "relay.cluster.session"
SCRIPTS = "relay.cluster.scripts"
"""On the run's span: how many op scripts it runs."""
DEPLOYMENT = "relay.cluster.deployment"
"""On the run's span: the namespace of the deployment whose hosts run the sessions, or
``own`` for hosts of the run's own."""
SESSIONS_FAILED = "relay.cluster.failures"
TURNS = "relay.cluster.turns"
"""On both spans: the turns started."""
FAILOVERS = "relay.cluster.failovers"
"""On both spans: the moves to another host (``session_resumed``)."""
SCRIPT = "relay.cluster.script"
"""On a session's span: the op script's name."""
HOST = "relay.cluster.host"
"""On a session's span: the host it ran on last."""
OUTCOME = "relay.cluster.outcome"
"""On a session's span: ``completed``, or ``failed`` (the failure is the span's status)."""
MOVED_EVENT = "relay.cluster.moved"
"""The event of a session's span at each move: ``relay.cluster.lost_host``, its host."""
CONVERSATION_ID = "gen_ai.conversation.id"
ERROR_TYPE = "error.type"
VERSION = "relay.version"
#: The ``error.type`` of a failed script.
SCRIPT_FAILED = "script_failed"


class SessionSpan:
    """The span of one script's session: counts what its events show, says how it ended."""

    def __init__(self, span: Span) -> None:
        self.span = span
        self.turns = 0
        self.failovers = 0
        self.failure: str | None = None

    def opened(self, session_id: str, host: str) -> None:
        """The session was opened on ``host``."""
        self.span.set_attributes({CONVERSATION_ID: session_id, HOST: host})

    def saw(self, event: p.Event) -> None:
        """An event of the session."""
        match event.msg:
            case p.TurnStarted():
                self.turns += 1
            case p.SessionResumed(lost_host=lost, host=host):
                self.failovers += 1
                self.span.set_attribute(HOST, host)
                self.span.add_event(MOVED_EVENT, {"relay.cluster.lost_host": lost, HOST: host})
            case _:
                pass

    def failed(self, message: str) -> None:
        """The script failed."""
        self.failure = message


class RunTracer:
    """The spans of one ``relay cluster run``, sent to ``tracer_provider``."""

    def __init__(self, tracer_provider: Any) -> None:
        from opentelemetry import trace

        from .._otel import SCOPE

        self._trace = trace
        self._tracer = trace.get_tracer(SCOPE, __version__, tracer_provider=tracer_provider)
        self._run: Span | None = None
        self._sessions: list[SessionSpan] = []

    @contextmanager
    def run(self, scripts: int, deployment: str) -> Iterator[None]:
        """The run's span, open for the block; its parent is the current span, if any."""
        span = self._tracer.start_span(
            RUN_SPAN, attributes={SCRIPTS: scripts, DEPLOYMENT: deployment, VERSION: __version__}
        )
        self._run, self._sessions = span, []
        try:
            yield
        finally:
            failed = sum(1 for session in self._sessions if session.failure is not None)
            span.set_attributes(
                {
                    TURNS: sum(session.turns for session in self._sessions),
                    FAILOVERS: sum(session.failovers for session in self._sessions),
                    SESSIONS_FAILED: failed,
                }
            )
            if failed:
                _fail(span, f"{failed} of {len(self._sessions)} session(s) failed")
            self._run = None
            span.end()

    @contextmanager
    def session(self, script: str) -> Iterator[SessionSpan]:
        """A script's span, current for the block: a session opened in it is its child."""
        trace = self._trace
        parent = trace.set_span_in_context(self._run) if self._run is not None else None
        span = self._tracer.start_span(SESSION_SPAN, context=parent, attributes={SCRIPT: script})
        made = SessionSpan(span)
        self._sessions.append(made)
        with trace.use_span(span, end_on_exit=True):
            try:
                yield made
            finally:
                span.set_attributes(
                    {
                        TURNS: made.turns,
                        FAILOVERS: made.failovers,
                        OUTCOME: "failed" if made.failure is not None else "completed",
                    }
                )
                if made.failure is not None:
                    _fail(span, made.failure)


def _fail(span: Span, message: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute(ERROR_TYPE, SCRIPT_FAILED)
    span.set_status(Status(StatusCode.ERROR, message))


# --------------------------------------------------------------------------- across processes


def carrier() -> dict[str, str] | None:
    """The trace context current here, to send with a session's open (None: none)."""
    try:
        from opentelemetry import propagate
    except ImportError:
        return None
    found: dict[str, str] = {}
    propagate.inject(found)
    return found or None


@contextmanager
def within_context(found: Mapping[str, str] | None) -> Iterator[None]:
    """The block runs in the trace context a caller sent (none: as it is)."""
    if not found:
        yield
        return
    try:
        from opentelemetry import context, propagate
    except ImportError:
        yield
        return
    token = context.attach(propagate.extract(dict(found)))
    try:
        yield
    finally:
        context.detach(token)


def host_export(environ: Mapping[str, str] | None = None) -> Export | None:
    """The export of a host's spans, when its environment asks for one: ``OTEL_TRACES_EXPORTER``,
    read as the ``relay`` command reads it. A problem is printed to the host's log, and the
    host exports nothing."""
    from .._otel._export import exporters, start_export, wanted

    environ = os.environ if environ is None else environ
    if not wanted(False, environ):
        return None
    try:
        chosen = exporters(environ)
        return start_export(chosen, sys.stderr) if chosen else None
    except ConfigError as exc:
        print(f"relay host: no traces: {exc}", file=sys.stderr, flush=True)
        return None


def host_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``OTEL_`` variables a traced run hands to the hosts it starts: its own, when its
    spans go over OTLP, so that the hosts send theirs to the same collector (over OTLP alone:
    a host's standard error is a log file of Ray's).

    Raises:
        ConfigError: the environment names an exporter relay does not have.
    """
    from .._otel._export import OTLP, exporters

    if OTLP not in exporters(environ):
        return {}
    found = {key: value for key, value in environ.items() if key.startswith("OTEL_")}
    found["OTEL_TRACES_EXPORTER"] = "otlp"
    return found


__all__ = [
    "RUN_SPAN",
    "SESSION_SPAN",
    "RunTracer",
    "SessionSpan",
    "carrier",
    "host_export",
    "host_variables",
    "within_context",
]
