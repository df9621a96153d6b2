"""The spans of one session, made from its events as they are emitted (docs/observability.md).

:class:`SessionTracer` is a listener of the session's writer
(:class:`~relay._core._session_writer.SessionWriter`): it is told every event synchronously, at
emit time, and opens and closes spans from them. The core knows nothing of it. Every span has
its parent given explicitly (the session span for a turn, the turn span for its tool calls,
compactions and hooks, and for a model request the innermost of those that is open), never
through the ambient context: a listener runs in whichever task emits, which is not the task
that did the work. The one context read is the program's, where it opens the session: the
session span's parent.

Every string set on a span goes through the session's secrets first, whatever it holds: a tool
name, a call id and an error message are written by a model or a server, and a model can echo
the key. Content (prompts, answers, tool arguments and outputs) is recorded only when asked for.

Model requests are the one thing events do not show: :class:`~._model.TracedModel` wraps the
session's model client (:meth:`SessionTracer.wrap`) and asks this tracer for each request's
span, whose parent is what the running turn has open.

A listener must never break the session: a failure here is logged (logger ``relay.otel``) and
the event goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, TraceFlags

from .._base import _protocol as p
from .._base._model import (
    CompactRequest,
    ModelClient,
    Prompt,
)
from .._base._secret import FRAGMENT, NO_SECRETS, Secrets
from .._core._recorder import RolloutRecorder
from .._version import __version__
from . import _names as n
from ._model import ModelRequest, TracedModel, fail
from ._values import (
    MESSAGE_LIMIT,
    clip,
    error_text,
    instructions_json,
    mcp_server,
    messages_json,
    text_messages_json,
)

if TYPE_CHECKING:
    from .._core._session_writer import SessionWriter

logger = logging.getLogger("relay.otel")


@attrs.define(eq=False)
class _Turn:
    """A turn's span and the spans it has open."""

    span: Span
    context: Context
    """The context whose span is the turn's: the parent of what the turn does."""
    tools: dict[str, Span] = attrs.field(factory=dict)
    """Open tool calls, by item id."""
    compactions: dict[str, tuple[Span, Context]] = attrs.field(factory=dict)
    """Open compactions, by item id (in the order they started)."""
    hooks: dict[tuple[str, str], list[Span]] = attrs.field(factory=dict)
    """Open hook runs, by (hook, point)."""


class SessionTracer:
    """Turns one session's events into spans; see the module's documentation."""

    def __init__(
        self,
        tracer: trace.Tracer,
        *,
        provider: str,
        content: bool,
        links: Sequence[tuple[str, str]] = (),
        parent: Context | None = None,
    ) -> None:
        self._tracer = tracer
        self._parent = parent if parent is not None else Context()
        self._provider = provider
        self.content = content
        """Whether prompts, answers, tool arguments and outputs are recorded."""
        self._links = links
        self._secrets: Secrets = NO_SECRETS
        self._redacting = False
        self._recorder: RolloutRecorder | None = None
        self._session: Span | None = None
        self._session_context: Context | None = None
        self._conversation = ""
        self._turns: dict[str, _Turn] = {}
        # Turns whose span records nothing (no SDK, or not sampled): nothing in them is
        # traced either, and they cost one no-op span.
        self._quiet: set[str] = set()
        self._running: _Turn | None = None
        self._running_quiet = False
        self._session_hooks: dict[tuple[str, str], list[Span]] = {}
        self._handlers: Mapping[type, Callable[[p.Event, Any], None]] = {
            p.SessionConfigured: self._configured,
            p.TurnStarted: self._turn_started,
            p.TurnComplete: self._turn_complete,
            p.TurnAborted: self._turn_aborted,
            p.ItemStarted: self._item_started,
            p.ItemCompleted: self._item_completed,
            p.ErrorEvent: self._error,
            p.HookStarted: self._hook_started,
            p.HookCompleted: self._hook_completed,
            p.UserMessage: self._user_message,
            p.ShutdownComplete: self._shutdown,
        }

    # ------------------------------------------------------------------ wiring

    def attach(self, session: SessionWriter) -> None:
        """Listen to ``session``'s events; its secrets redact what the spans record and its
        rollout keeps the session span's ids."""
        self._secrets = session.wiring.secrets
        self._redacting = any(len(value) >= FRAGMENT for value in self._secrets.values)
        self._recorder = session.recorder
        self._conversation = session.wiring.session_id
        session.listeners.append(self.see)

    def wrap(self, client: ModelClient) -> TracedModel:
        """``client``, each of its requests a span of this session."""
        return TracedModel(client, self)

    def redact(self, text: str) -> str:
        """``text`` without the session's key."""
        if self._redacting and len(text) >= FRAGMENT:
            return self._secrets.redact(text)
        return text

    def see(self, event: p.Event) -> None:
        """The listener: one event, as it is emitted."""
        handler = self._handlers.get(type(event.msg))
        if handler is None:
            return
        try:
            handler(event, event.msg)
        except Exception:
            logger.warning("tracing a %s event failed", type(event.msg).__name__, exc_info=True)

    def close(self) -> None:
        """End every span still open (the session ended without ``shutdown_complete``)."""
        for turn_id in list(self._turns):
            self._end_turn(turn_id, None)
        self._end_hooks(self._session_hooks, None)
        if self._session is not None:
            self._session.end()
            self._session = None

    # ------------------------------------------------------------------ the session

    def _configured(self, event: p.Event, msg: p.SessionConfigured) -> None:
        del event
        if self._session is not None:
            return
        links = [
            Link(
                SpanContext(
                    int(trace_id, 16),
                    int(span_id, 16),
                    is_remote=True,
                    trace_flags=TraceFlags(TraceFlags.SAMPLED),
                ),
                {n.RELAY_LINK: "resumed_from"},
            )
            for trace_id, span_id in self._links
        ]
        span = self._tracer.start_span(
            n.SESSION_SPAN,
            context=self._parent,
            kind=SpanKind.INTERNAL,
            attributes={
                n.GEN_AI_AGENT_NAME: n.AGENT_NAME,
                n.GEN_AI_CONVERSATION_ID: self.redact(msg.session_id),
                n.GEN_AI_PROVIDER_NAME: self.redact(msg.model_provider),
                n.GEN_AI_REQUEST_MODEL: self.redact(msg.model),
                n.RELAY_SESSION_RESUMED: msg.resumed,
                n.RELAY_VERSION: __version__,
            },
            links=links,
        )
        self._session = span
        self._session_context = trace.set_span_in_context(span, Context())
        ids = span.get_span_context()
        if self._recorder is not None and span.is_recording() and ids.is_valid:
            self._recorder.trace(
                trace.format_trace_id(ids.trace_id), trace.format_span_id(ids.span_id)
            )

    def _shutdown(self, event: p.Event, msg: p.ShutdownComplete) -> None:
        del event, msg
        self.close()

    def _root(self) -> Context:
        return self._session_context if self._session_context is not None else Context()

    # ------------------------------------------------------------------ turns

    def _turn_started(self, event: p.Event, msg: p.TurnStarted) -> None:
        del event
        span = self._tracer.start_span(
            n.TURN_SPAN,
            context=self._root(),
            kind=SpanKind.INTERNAL,
            attributes={
                n.GEN_AI_OPERATION_NAME: n.OP_INVOKE_AGENT,
                n.GEN_AI_AGENT_NAME: n.AGENT_NAME,
                n.GEN_AI_PROVIDER_NAME: self._provider,
                n.GEN_AI_CONVERSATION_ID: self.redact(self._conversation),
                n.RELAY_TURN_ID: self.redact(msg.turn_id),
                **({n.RELAY_TASK_KIND: msg.kind} if msg.kind is not None else {}),
            },
        )
        if not span.is_recording():
            span.end()
            self._quiet.add(msg.turn_id)
            self._running, self._running_quiet = None, True
            return
        turn = _Turn(span, trace.set_span_in_context(span, Context()))
        self._turns[msg.turn_id] = turn
        self._running, self._running_quiet = turn, False

    def _turn_complete(self, event: p.Event, msg: p.TurnComplete) -> None:
        del event
        turn = self._turns.get(msg.turn_id)
        answer = msg.last_agent_message
        if turn is not None and self.content and answer is not None and turn.span.is_recording():
            text, cut = text_messages_json("assistant", answer, redact=self.redact)
            turn.span.set_attribute(n.GEN_AI_OUTPUT_MESSAGES, text)
            if cut:
                turn.span.set_attribute(n.RELAY_CONTENT_TRUNCATED, True)
        self._end_turn(msg.turn_id, None)

    def _turn_aborted(self, event: p.Event, msg: p.TurnAborted) -> None:
        del event
        self._end_turn(msg.turn_id, msg.reason.value)

    def _user_message(self, event: p.Event, msg: p.UserMessage) -> None:
        turn = self._turns.get(event.id)
        if turn is None or not self.content or not turn.span.is_recording():
            return
        text, cut = text_messages_json("user", msg.message, redact=self.redact)
        turn.span.set_attribute(n.GEN_AI_INPUT_MESSAGES, text)
        if cut:
            turn.span.set_attribute(n.RELAY_CONTENT_TRUNCATED, True)

    def _end_turn(self, turn_id: str, reason: str | None) -> None:
        """End a turn's span and whatever it left open; ``reason``: why it was aborted."""
        if turn_id in self._quiet:
            self._quiet.discard(turn_id)
            self._running_quiet = False
            return
        turn = self._turns.pop(turn_id, None)
        if turn is None:
            return
        if self._running is turn:
            self._running = None
        for span in turn.tools.values():
            _abort(span, reason)
        for span, _ in turn.compactions.values():
            if span.is_recording():
                span.set_attribute(n.RELAY_COMPACTION_INSTALLED, False)
            _abort(span, reason)
        self._end_hooks(turn.hooks, reason)
        _abort(turn.span, reason)

    def _end_hooks(self, hooks: dict[tuple[str, str], list[Span]], reason: str | None) -> None:
        for spans in hooks.values():
            for span in spans:
                _abort(span, reason)
        hooks.clear()

    # ------------------------------------------------------------------ items

    def _item_started(self, event: p.Event, msg: p.ItemStarted) -> None:
        del event
        item = msg.item
        if isinstance(item, p.ToolCallItem):
            self._tool_started(msg.turn_id, item)
        elif isinstance(item, p.ContextCompactionItem):
            turn = self._turns.get(msg.turn_id)
            if turn is None:
                return
            span = self._tracer.start_span(
                n.COMPACTION_SPAN, context=turn.context, kind=SpanKind.INTERNAL
            )
            turn.compactions[item.id] = (span, trace.set_span_in_context(span, Context()))

    def _item_completed(self, event: p.Event, msg: p.ItemCompleted) -> None:
        del event
        item = msg.item
        turn = self._turns.get(msg.turn_id)
        if turn is None:
            return
        if isinstance(item, p.ToolCallItem):
            span = turn.tools.pop(item.id, None)
            if span is None:
                return
            if self.content and item.output is not None and span.is_recording():
                output, cut = clip(item.output, redact=self.redact)
                span.set_attribute(n.GEN_AI_TOOL_CALL_RESULT, output)
                if cut:
                    span.set_attribute(n.RELAY_CONTENT_TRUNCATED, True)
            span.end()
        elif isinstance(item, p.ContextCompactionItem):
            entry = turn.compactions.pop(item.id, None)
            if entry is None:
                return
            span = entry[0]
            if span.is_recording():
                span.set_attribute(n.RELAY_COMPACTION_INSTALLED, item.receipt is not None)
                if item.receipt is not None:
                    span.set_attributes(_receipt(item.receipt))
            span.end()

    def _tool_started(self, turn_id: str, item: p.ToolCallItem) -> None:
        turn = self._turns.get(turn_id)
        if turn is None:
            return
        name = self.redact(item.name)
        attributes: dict[str, Any] = {
            n.GEN_AI_OPERATION_NAME: n.OP_EXECUTE_TOOL,
            n.GEN_AI_TOOL_NAME: name,
            n.GEN_AI_TOOL_CALL_ID: self.redact(item.id),
            n.GEN_AI_TOOL_TYPE: "function",
        }
        server = mcp_server(name)
        if server is not None:
            attributes[n.RELAY_MCP_SERVER] = server
        span = self._tracer.start_span(
            n.tool_span(name), context=turn.context, kind=SpanKind.INTERNAL, attributes=attributes
        )
        if self.content and span.is_recording():
            arguments, cut = clip(item.arguments, redact=self.redact)
            span.set_attribute(n.GEN_AI_TOOL_CALL_ARGUMENTS, arguments)
            if cut:
                span.set_attribute(n.RELAY_CONTENT_TRUNCATED, True)
        turn.tools[item.id] = span

    # ------------------------------------------------------------------ errors and hooks

    def _error(self, event: p.Event, msg: p.ErrorEvent) -> None:
        if event.id in self._quiet:
            return
        message = error_text(msg.code.value, msg.message, content=self.content, redact=self.redact)
        turn = self._turns.get(event.id)
        if turn is None:
            if self._session is not None and self._session.is_recording():
                self._session.add_event(
                    n.ERROR_EVENT, {n.ERROR_TYPE: msg.code.value, "message": message}
                )
            return
        fail(turn.span, msg.code.value, message)
        if turn.compactions:
            # A compaction's failure is its error: the newest one still open ends with it.
            item_id = next(reversed(turn.compactions))
            span, _ = turn.compactions.pop(item_id)
            if span.is_recording():
                span.set_attribute(n.RELAY_COMPACTION_INSTALLED, False)
            fail(span, msg.code.value, message)
            span.end()

    def _hook_started(self, event: p.Event, msg: p.HookStarted) -> None:
        if event.id in self._quiet:
            return
        turn = self._turns.get(event.id)
        parent = turn.context if turn is not None else self._root()
        span = self._tracer.start_span(
            n.HOOK_SPAN,
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes={n.RELAY_HOOK_NAME: self.redact(msg.hook), n.RELAY_HOOK_POINT: msg.event},
        )
        hooks = turn.hooks if turn is not None else self._session_hooks
        hooks.setdefault((msg.hook, msg.event), []).append(span)

    def _hook_completed(self, event: p.Event, msg: p.HookCompleted) -> None:
        turn = self._turns.get(event.id)
        hooks = turn.hooks if turn is not None else self._session_hooks
        spans = hooks.get((msg.hook, msg.event))
        if not spans:
            return
        span = spans.pop(0)
        if not spans:
            del hooks[(msg.hook, msg.event)]
        span.set_attribute(n.RELAY_HOOK_OUTCOME, msg.outcome)
        if msg.outcome in ("failed", "timeout"):
            fail(span, msg.outcome, f"the hook {msg.outcome}"[:MESSAGE_LIMIT])
        span.end()

    # ------------------------------------------------------------------ model requests

    def _parent_of(self, purpose: str) -> Context:
        """The parent of a model request: a summary's is the compaction open in the running
        turn; a turn's request is the running turn's; anything else (a background compaction
        between turns) is the session's."""
        turn = self._running
        if turn is None:
            return self._root()
        if purpose == "compact":
            if not turn.compactions:
                return self._root()  # a background compaction: it belongs to no turn
            return next(reversed(turn.compactions.values()))[1]
        return turn.context

    def _recording(self, purpose: str) -> bool:
        """Whether a model request for ``purpose`` may be recorded: not within a turn that
        records nothing, nor (a background compaction) in a session that records nothing."""
        if self._running_quiet and purpose != "compact":
            return False
        if self._running is None or (purpose == "compact" and not self._running.compactions):
            return self._session is not None and self._session.is_recording()
        return True

    def model_request(self, prompt: Prompt) -> ModelRequest | None:
        """The span of one streamed model request, or None when nothing is recorded."""
        if not self._recording(prompt.purpose):
            return None
        span = self._tracer.start_span(
            n.chat_span(self.redact(prompt.model)),
            context=self._parent_of(prompt.purpose),
            kind=SpanKind.CLIENT,
            attributes=self._request_attributes(prompt.model, prompt.purpose),
        )
        if not span.is_recording():
            span.end()
            return None
        if prompt.max_output_tokens is not None:
            span.set_attribute(n.GEN_AI_REQUEST_MAX_TOKENS, prompt.max_output_tokens)
        if self.content:
            instructions, cut_instructions = instructions_json(
                prompt.instructions, redact=self.redact
            )
            messages, cut_messages = messages_json(prompt.input, redact=self.redact)
            span.set_attribute(n.GEN_AI_SYSTEM_INSTRUCTIONS, instructions)
            span.set_attribute(n.GEN_AI_INPUT_MESSAGES, messages)
            if cut_instructions or cut_messages:
                span.set_attribute(n.RELAY_CONTENT_TRUNCATED, True)
        return ModelRequest(self, span)

    def compact_request(self, request: CompactRequest) -> ModelRequest | None:
        """The span of one remote compaction request, or None when nothing is recorded."""
        if not self._recording("compact"):
            return None
        span = self._tracer.start_span(
            n.chat_span(self.redact(request.model)),
            context=self._parent_of("compact"),
            kind=SpanKind.CLIENT,
            attributes={
                **self._request_attributes(request.model, "compact"),
                n.RELAY_REMOTE_COMPACTION: True,
            },
        )
        if not span.is_recording():
            span.end()
            return None
        return ModelRequest(self, span)

    def _request_attributes(self, model: str, purpose: str) -> dict[str, Any]:
        return {
            n.GEN_AI_OPERATION_NAME: n.OP_CHAT,
            n.GEN_AI_PROVIDER_NAME: self._provider,
            n.GEN_AI_SYSTEM: self._provider,
            n.GEN_AI_REQUEST_MODEL: self.redact(model),
            n.GEN_AI_CONVERSATION_ID: self.redact(self._conversation),
            n.RELAY_PURPOSE: purpose,
        }


def _receipt(receipt: p.CompactionReceipt) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        n.RELAY_COMPACTION_BACKEND: receipt.backend,
        n.RELAY_COMPACTION_TRIGGER: receipt.trigger.value,
        n.RELAY_COMPACTION_TOKENS_BEFORE: receipt.tokens_before,
        n.RELAY_COMPACTION_TOKENS_AFTER: receipt.tokens_after,
        n.RELAY_COMPACTION_COUNTED_BEFORE: receipt.counted_before,
        n.RELAY_COMPACTION_BACKGROUND: receipt.background,
        n.RELAY_COMPACTION_CUT: receipt.cut,
    }
    if receipt.snapshot_age_ms is not None:
        attributes[n.RELAY_COMPACTION_SNAPSHOT_AGE_MS] = receipt.snapshot_age_ms
    return attributes


def _abort(span: Span, reason: str | None) -> None:
    """End ``span``, with the reason of the abort that ended it, when there is one."""
    if reason is not None:
        span.set_attribute(n.RELAY_ABORT_REASON, reason)
    span.end()


__all__ = ["SessionTracer"]
