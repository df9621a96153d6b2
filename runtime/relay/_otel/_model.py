"""The spans of a session's model requests (docs/observability.md).

Model requests are the one thing events do not show: :class:`TracedModel` wraps the session's
model client (the face builds it) and makes a ``chat {model}`` span of each request; the events,
the errors and every attribute of the client it wraps stay the client's. Which span is a
request's parent, and whether it is recorded at all, is the session's tracer's to say (a
:class:`RequestTracer`); what a request's span records as its response streams is
:class:`ModelRequest`'s.

Tracing never fails a model request: a failure here is logged (logger ``relay.otel``) and the
request goes on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol, TypeVar

from opentelemetry.trace import Span, Status, StatusCode

from .._base import _protocol as p
from .._base._errors import ModelError
from .._base._model import (
    CompactRequest,
    Completed,
    ModelClient,
    ModelEvent,
    OutputItemDone,
    Prompt,
)
from . import _names as n
from ._values import error_text, finish_reasons, messages_json

logger = logging.getLogger("relay.otel")

T = TypeVar("T")


class RequestTracer(Protocol):
    """What a traced model asks of the session's tracer."""

    @property
    def content(self) -> bool:
        """Whether prompts and answers are recorded."""
        ...

    def redact(self, text: str) -> str:
        """``text`` without the session's key."""
        ...

    def model_request(self, prompt: Prompt) -> ModelRequest | None:
        """The span of one streamed model request, or None when nothing is recorded."""
        ...

    def compact_request(self, request: CompactRequest) -> ModelRequest | None:
        """The span of one remote compaction request, or None when nothing is recorded."""
        ...


class ModelRequest:
    """One model request's span, filled in as its response streams."""

    def __init__(self, tracer: RequestTracer, span: Span) -> None:
        self._tracer = tracer
        self.span = span
        """The request's span."""
        self._completed: Completed | None = None
        self._output: list[p.ResponseItem] = []

    def watch(self, events: AsyncIterator[ModelEvent]) -> AsyncIterator[ModelEvent]:
        """``events``, passed through, seen on their way."""
        return _Watched(events, self)

    def see(self, event: ModelEvent) -> None:
        """One event of the response."""
        if isinstance(event, OutputItemDone):
            self._output.append(event.item)
        elif isinstance(event, Completed):
            self._completed = event

    def completed(self) -> None:
        """The request ended without an error: usage, response id, finish reasons, output."""
        span, done = self.span, self._completed
        if done is None:
            return
        attributes = _usage(done.usage) if done.usage is not None else {}
        attributes[n.GEN_AI_RESPONSE_ID] = self._tracer.redact(done.response_id)
        attributes[n.GEN_AI_RESPONSE_FINISH_REASONS] = finish_reasons(done.incomplete, self._output)
        if self._tracer.content:
            text, cut = messages_json(self._output, redact=self._tracer.redact)
            attributes[n.GEN_AI_OUTPUT_MESSAGES] = text
            if cut:
                attributes[n.RELAY_CONTENT_TRUNCATED] = True
        span.set_attributes(attributes)

    def answered(self, body: Any) -> None:
        """A remote compaction's answer: its id and usage, when the body has them."""
        if not isinstance(body, dict):
            return
        if isinstance(body.get("id"), str):
            self.span.set_attribute(n.GEN_AI_RESPONSE_ID, self._tracer.redact(body["id"]))
        usage = body.get("usage")
        if isinstance(usage, dict):
            for key, name in (
                ("input_tokens", n.GEN_AI_USAGE_INPUT_TOKENS),
                ("output_tokens", n.GEN_AI_USAGE_OUTPUT_TOKENS),
            ):
                value = usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    self.span.set_attribute(name, value)

    def failed(self, error: BaseException) -> None:
        """The request failed: a relay error code (or the exception's class) is its type."""
        kind = error.code.value if isinstance(error, ModelError) else type(error).__name__
        message = error.message if isinstance(error, ModelError) else str(error)
        self.span.set_attribute(n.GEN_AI_RESPONSE_FINISH_REASONS, ("error",))
        tracer = self._tracer
        fail(
            self.span, kind, error_text(kind, message, content=tracer.content, redact=tracer.redact)
        )

    def cancelled(self) -> None:
        """The request was cancelled (an interrupt, a replaced turn): not an error."""
        self.span.set_attribute(n.GEN_AI_RESPONSE_FINISH_REASONS, ("error",))
        self.span.set_attribute(n.RELAY_CANCELLED, True)

    def end(self) -> None:
        """End the span."""
        self.span.end()


class _Watched:
    """A model's event stream, each event shown to a :class:`ModelRequest` on its way."""

    def __init__(self, events: AsyncIterator[ModelEvent], request: ModelRequest) -> None:
        self._next = events.__anext__
        self._request = request

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> ModelEvent:
        event = await self._next()
        self._request.see(event)
        return event


class TracedModel:
    """``client``, each request traced by ``tracer``."""

    def __init__(self, client: ModelClient, tracer: RequestTracer) -> None:
        self._client = client
        self._tracer = tracer

    def __getattr__(self, name: str) -> Any:
        # The client's own attributes (its provider table, a script's request log) stay in view.
        return getattr(self._client, name)

    @property
    def client(self) -> ModelClient:
        """The client this one wraps."""
        return self._client

    def stream(self, prompt: Prompt) -> AbstractAsyncContextManager[AsyncIterator[ModelEvent]]:
        """The client's stream, within the request's span (the client's own, untouched, when
        the request is not recorded)."""
        request = _safely(self._tracer.model_request, prompt)
        if request is None:
            return self._client.stream(prompt)
        return self._traced(prompt, request)

    @asynccontextmanager
    async def _traced(
        self, prompt: Prompt, request: ModelRequest
    ) -> AsyncIterator[AsyncIterator[ModelEvent]]:
        try:
            async with self._client.stream(prompt) as events:
                yield request.watch(events)
        except Exception as error:
            request.failed(error)
            raise
        except BaseException:
            request.cancelled()
            raise
        else:
            _safely(request.completed)
        finally:
            request.end()

    async def compact(self, request: CompactRequest) -> Any:
        """The client's remote compaction, within the request's span."""
        traced = _safely(self._tracer.compact_request, request)
        if traced is None:
            return await self._client.compact(request)
        try:
            body = await self._client.compact(request)
        except Exception as error:
            traced.failed(error)
            raise
        except BaseException:
            traced.cancelled()
            raise
        else:
            _safely(traced.answered, body)
            return body
        finally:
            traced.end()


def _safely(call: Callable[..., T], *args: Any) -> T | None:
    """``call(*args)``, or None when it fails: tracing never fails a model request."""
    try:
        return call(*args)
    except Exception:
        logger.warning("tracing a model request failed", exc_info=True)
        return None


def _usage(usage: p.TokenUsage) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        n.GEN_AI_USAGE_INPUT_TOKENS: usage.input_tokens,
        n.GEN_AI_USAGE_OUTPUT_TOKENS: usage.output_tokens,
    }
    if usage.cached_input_tokens:
        attributes[n.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cached_input_tokens
    if usage.reasoning_output_tokens:
        attributes[n.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = usage.reasoning_output_tokens
    return attributes


def fail(span: Span, kind: str, message: str) -> None:
    """Mark ``span`` as failed with ``error.type`` ``kind``."""
    span.set_attribute(n.ERROR_TYPE, kind)
    span.set_status(Status(StatusCode.ERROR, message or kind))


__all__ = ["ModelRequest", "RequestTracer", "TracedModel", "fail"]
