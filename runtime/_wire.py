"""The HTTP wires: model clients that talk to a server through the official ``openai`` SDK.

Two wires implement :class:`~runtime._model.ModelClient` (SPEC §7.1, §7.2):

- :class:`ResponsesClient` streams ``POST /responses`` with exactly the body of
  :func:`~runtime._responses.request_body` and feeds every server-sent event, as a dict, to the
  same :class:`~runtime._responses.ResponseStreamParser` the embedded scripted model uses, so a
  failure over HTTP and a scripted one are reported alike. It also sends remote compaction
  requests (``POST /responses/compact``).
- :class:`ChatClient` speaks ``POST /chat/completions`` for OpenAI-compatible local servers:
  it maps the history to chat messages and reassembles the streamed chunks into response items.

Both are opened by :func:`open_http_client`, which owns the ``AsyncOpenAI`` client. The SDK
sends every request (base URL, headers, query, authentication) and raises its status errors;
it runs with ``max_retries=0``, because retries belong to the sampling loop, which sees the same
errors whatever the model is. For streams the SDK hands back the raw HTTP response and
:class:`SseDecoder` frames the events: the SDK's own event iterator leaves async generators
unclosed when a stream ends early, which trio reports. The SDK is imported here and nowhere
else, so the scripted path never loads it.

Failures are translated into relay's error tree in one function, :func:`_translate`; whatever
the server or the transport said, the API key never appears in an error message.

Invariant kept by both stream contexts: the response body is entered with ``async with``
before anything is yielded, so the byte iterator and the response are closed however the
caller leaves (read to the end, broke out of its loop, failed or was cancelled), and the
connection is released.
"""

from __future__ import annotations

import collections
import email.utils
import json
import math
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import attrs
import httpx2
import openai
from openai import AsyncOpenAI

from . import _protocol as p
from ._codec import DecodeError, decode_response_item
from ._config import ProviderConfig
from ._errors import (
    ConfigError,
    ContextWindowExceeded,
    ErrorCode,
    ModelError,
    StreamError,
    classify_http_error,
)
from ._model import (
    CompactRequest,
    Completed,
    ModelClient,
    ModelEvent,
    OutputItemDone,
    OutputTextDelta,
    Prompt,
    ToolSpec,
)
from ._responses import (
    PURPOSE_HEADER,
    ResponseStreamParser,
    compact_request_body,
    error_from_payload,
    request_body,
    retry_after_from_message,
)

__all__ = [
    "ChatClient",
    "ChatStreamParser",
    "ResponsesClient",
    "ServerSentEvent",
    "SseDecoder",
    "chat_request_body",
    "open_http_client",
]


#: How long the SDK may take to open a connection, at most.
_CONNECT_TIMEOUT_S = 10.0

#: How long to wait for the end of a stream after its terminal event.
_DRAIN_S = 1.0

#: Bound on closing a response, which runs shielded from cancellation.
_CLOSE_S = 0.5

#: Longest server error text kept in a message when the body is not JSON.
_MAX_BODY_TEXT = 500


# ----------------------------------------------------------------------------- the factory


@asynccontextmanager
async def open_http_client(
    provider: ProviderConfig,
    *,
    api_key: str | None,
    http_client: httpx2.AsyncClient | None = None,
) -> AsyncIterator[ModelClient]:
    """Open an HTTP model client for ``provider`` (``wire_api`` picks the wire).

    The ``AsyncOpenAI`` client lives as long as the context; closing it closes its HTTP
    connections (and ``http_client``, when one is given).

    Args:
        provider: the provider table; ``base_url`` is required.
        api_key: sent as a bearer token; None for servers that need none.
        http_client: the ``httpx2`` client to send requests with (tests pass one with an
            in-process transport); by default the SDK makes its own.

    Raises:
        ConfigError: the provider has no ``base_url``.
    """
    if not provider.base_url:
        raise ConfigError(f"provider {provider.name!r} has no base_url")
    idle_s = provider.stream_idle_timeout_ms / 1000
    sdk = AsyncOpenAI(
        base_url=provider.base_url,
        api_key=api_key or "unused",
        max_retries=0,
        # The read timeout also bounds the wait for the response headers, which the idle
        # timeout of the event loop below does not cover.
        timeout=httpx2.Timeout(idle_s, connect=min(idle_s, _CONNECT_TIMEOUT_S)),
        default_headers=dict(provider.http_headers) or None,
        default_query=dict(provider.query_params) or None,
        http_client=http_client,
    )
    async with sdk:
        secret = api_key or None
        client: ResponsesClient | ChatClient
        if provider.wire_api == "chat":
            client = ChatClient(sdk, provider, secret=secret)
        else:
            client = ResponsesClient(sdk, provider, secret=secret)
        yield client


# ----------------------------------------------------------------------------- errors

#: What the SDK and the transport raise; everything else is a bug and propagates as it is.
_FAILURES: tuple[type[BaseException], ...] = (
    openai.OpenAIError,
    httpx2.HTTPError,
    json.JSONDecodeError,
    UnicodeDecodeError,
    anyio.EndOfStream,
    anyio.BrokenResourceError,
    OSError,
)


def _translate(exc: BaseException, *, secret: str | None) -> ModelError:
    """The relay error for a failure raised by the SDK or the transport.

    This is the one place where SDK exceptions become relay errors; callers raise the result
    ``from exc``. HTTP status errors go through :func:`classify_http_error` with the server's
    code, message, type and retry-after; anything that broke the connection or the stream
    becomes a retryable :class:`StreamError`.
    """
    match exc:
        case openai.APIStatusError():
            code, message, kind = _error_fields(exc.body)
            status = exc.status_code
            text = _redact(message or _body_text(exc.body) or f"HTTP {status}", secret)
            retry_after = _retry_after(exc.response.headers)
            if retry_after is None:
                retry_after = retry_after_from_message(text)
            return classify_http_error(
                status, code=code, message=text, type_=kind, retry_after=retry_after
            )
        case openai.APITimeoutError():
            return StreamError(
                _redact(f"the model server did not answer in time: {_cause(exc)}", secret)
            )
        case openai.APIConnectionError():
            return StreamError(
                _redact(f"connection to the model server failed: {_cause(exc)}", secret)
            )
        case openai.APIError():
            # Any other SDK error that carries a server's error object.
            body = exc.body if isinstance(exc.body, Mapping) else {"message": exc.message}
            return _redact_error(error_from_payload(body, default=exc.message), secret)
        case httpx2.TimeoutException():
            # Raised by the body of a streamed response, which the SDK does not wrap.
            return StreamError(_redact(f"the model server did not answer in time: {exc}", secret))
        case httpx2.HTTPError() | anyio.EndOfStream() | anyio.BrokenResourceError() | OSError():
            return StreamError(
                _redact(f"connection to the model server failed: {_describe(exc)}", secret)
            )
        case json.JSONDecodeError() | UnicodeDecodeError():
            return StreamError(
                _redact(f"malformed event from the model server (invalid JSON): {exc}", secret)
            )
        case _:
            return StreamError(_redact(f"the model request failed: {_describe(exc)}", secret))


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return _describe(cause) if cause is not None else str(exc)


def _error_fields(body: object) -> tuple[str | None, str | None, str | None]:
    """``(code, message, type)`` of an error body, in its nested or flat form."""
    if isinstance(body, Mapping):
        nested = body.get("error")
        if isinstance(nested, Mapping):
            body = nested
        elif isinstance(nested, str) and nested:
            return None, nested, None
    if not isinstance(body, Mapping):
        return None, None, None
    code = body.get("code")
    message = body.get("message")
    kind = body.get("type")
    return (
        code if isinstance(code, str) and code else None,
        message if isinstance(message, str) and message else None,
        kind if isinstance(kind, str) and kind else None,
    )


def _body_text(body: object) -> str | None:
    if isinstance(body, str) and body.strip():
        text = body.strip()
        return text if len(text) <= _MAX_BODY_TEXT else text[:_MAX_BODY_TEXT] + "…"
    return None


def _retry_after(headers: httpx2.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000
        except ValueError:
            pass
        else:
            if math.isfinite(value) and value >= 0:
                return value
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())
    return value if math.isfinite(value) and value >= 0 else None


def _redact(text: str, secret: str | None) -> str:
    return text.replace(secret, "[redacted]") if secret and secret in text else text


def _redact_error(error: ModelError, secret: str | None) -> ModelError:
    if not secret or secret not in error.message:
        return error
    message = _redact(error.message, secret)
    if isinstance(error, ContextWindowExceeded):
        return ContextWindowExceeded(message)
    if isinstance(error, StreamError):
        return StreamError(message, retry_after=error.retry_after)
    return ModelError(message, error.code, retry_after=error.retry_after)


# ----------------------------------------------------------------------------- streams


@attrs.frozen
class ServerSentEvent:
    """One dispatched server-sent event."""

    event: str | None
    """The ``event:`` field, if the frame had one."""
    data: str
    """The ``data:`` lines, joined with newlines."""


_LINE_END = re.compile(rb"\r\n|\r|\n")


class SseDecoder:
    """An incremental server-sent-events decoder: bytes in, dispatched events out.

    Follows the WHATWG event-stream rules: lines end with CRLF, CR or LF; a blank line
    dispatches the event if it has data; comments and unknown fields are ignored. An event cut
    off by the end of the stream is never dispatched.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The events completed by ``chunk``. Raises UnicodeDecodeError for non-UTF-8 lines."""
        if b"\n" not in chunk and b"\r" not in chunk and not self._buffer.endswith(b"\r"):
            # The middle of a long line (a large item): no rescanning of what came before.
            self._buffer += chunk
            return []
        data = bytes(self._buffer + chunk)
        # A CR at the very end may be the first half of a CRLF split across chunks.
        end = len(data) - 1 if data.endswith(b"\r") else len(data)
        *lines, rest = _LINE_END.split(data[:end])
        self._buffer = bytearray(rest + data[end:])
        events: list[ServerSentEvent] = []
        for raw in lines:
            line = raw.decode("utf-8")
            if not line:
                if self._data:
                    events.append(ServerSentEvent(self._event, "\n".join(self._data)))
                self._event = None
                self._data = []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                self._event = value
            elif name == "data":
                self._data.append(value)
        return events


class _EventReader:
    """The JSON objects of a streamed response body, with an idle timeout, failures translated.

    Not an async generator on purpose: it holds no frame that would need finalising when the
    caller stops early. Chat streams end with a ``[DONE]`` frame; nothing after it is read.
    """

    def __init__(self, chunks: AsyncIterator[bytes], *, idle_s: float, secret: str | None):
        self._chunks = chunks
        self._idle_s = idle_s
        self._secret = secret
        self._decoder = SseDecoder()
        self._pending: collections.deque[ServerSentEvent] = collections.deque()
        self._ended = False

    def __aiter__(self) -> _EventReader:
        return self

    async def __anext__(self) -> Mapping[str, Any]:
        # The idle timeout runs from the previous event: keep-alive comments do not reset it.
        with anyio.move_on_after(self._idle_s) as idle:
            while not self._pending:
                if self._ended:
                    raise StopAsyncIteration
                try:
                    chunk = await self._chunks.__anext__()
                except StopAsyncIteration:
                    self._ended = True
                except _FAILURES as exc:
                    raise _translate(exc, secret=self._secret) from exc
                else:
                    try:
                        self._pending.extend(self._decoder.feed(chunk))
                    except UnicodeDecodeError as exc:
                        raise _translate(exc, secret=self._secret) from exc
        if idle.cancelled_caught:
            raise StreamError(
                f"idle timeout: no event from the model server for {self._idle_s * 1000:g} ms"
            )
        sse = self._pending.popleft()
        if sse.data == "[DONE]":
            self._ended = True
            self._pending.clear()
            raise StopAsyncIteration
        try:
            parsed: object = json.loads(sse.data)
        except json.JSONDecodeError as exc:
            raise _translate(exc, secret=self._secret) from exc
        if not isinstance(parsed, Mapping):
            raise StreamError(
                f"malformed event from the model server: expected a JSON object, "
                f"got {type(parsed).__name__}"
            )
        event: Mapping[str, Any] = parsed
        if "type" not in event and sse.event is not None:
            event = {"type": sse.event, **event}
        return event

    async def drain(self) -> None:
        """Read what follows the end of the answer, so that the connection can be reused.

        The answer is complete at this point: a failure, or a server that keeps the stream
        open, changes nothing about it, so the wait is short and errors are ignored.
        """
        with anyio.move_on_after(_DRAIN_S):
            try:
                async for _ in self._chunks:
                    pass
            except _FAILURES:
                pass


@asynccontextmanager
async def _open_body(response: httpx2.Response) -> AsyncIterator[AsyncIterator[bytes]]:
    """The body of a streamed response; on exit the byte iterator and the response are
    closed, whatever happened, so that the connection is released."""
    chunks = response.aiter_bytes()
    try:
        yield chunks
    finally:
        with anyio.move_on_after(_CLOSE_S, shield=True):
            try:
                await chunks.aclose()
            finally:
                await response.aclose()


class _Wire:
    """What both wires share: the SDK client, the provider and the secret to keep out."""

    def __init__(self, sdk: AsyncOpenAI, provider: ProviderConfig, *, secret: str | None):
        self._sdk = sdk
        self._provider = provider
        self._secret = secret

    @property
    def provider(self) -> ProviderConfig:
        """The provider this client talks to."""
        return self._provider

    @asynccontextmanager
    async def _stream(
        self,
        path: str,
        body: Mapping[str, Any],
        purpose: str,
        play: Callable[[_EventReader], AsyncGenerator[ModelEvent]],
    ) -> AsyncIterator[AsyncIterator[ModelEvent]]:
        """POST ``body`` to ``path`` as a streamed request; yields ``play``'s model events."""
        try:
            response = await self._sdk.post(
                path,
                body=dict(body),
                cast_to=httpx2.Response,
                stream=True,
                options={"headers": {PURPOSE_HEADER: purpose, "Accept": "text/event-stream"}},
            )
        except _FAILURES as exc:
            raise _translate(exc, secret=self._secret) from exc
        # The SDK hands back the raw response: its own event iterator leaves async
        # generators unclosed when a stream ends early (or at ``[DONE]``), and every layer
        # here must be closed when the caller leaves.
        async with _open_body(response) as chunks:
            reader = _EventReader(
                chunks, idle_s=self._provider.stream_idle_timeout_ms / 1000, secret=self._secret
            )
            events = play(reader)
            try:
                yield events
            finally:
                await events.aclose()

    def _checked(
        self, feed: Callable[[Mapping[str, Any]], list[ModelEvent]], event: Mapping[str, Any]
    ) -> list[ModelEvent]:
        """``feed(event)``, with the secret kept out of the errors the server reported."""
        try:
            return feed(event)
        except ModelError as exc:
            redacted = _redact_error(exc, self._secret)
            if redacted is exc:
                raise
            raise redacted from exc


class ResponsesClient(_Wire):
    """The Responses wire (SPEC §7.1): streamed ``POST /responses`` and remote compaction."""

    def stream(self, prompt: Prompt) -> AbstractAsyncContextManager[AsyncIterator[ModelEvent]]:
        """Send ``prompt``; the context yields its events (see :class:`ModelClient`)."""
        return self._stream("/responses", request_body(prompt), prompt.purpose, self._events)

    async def _events(self, reader: _EventReader) -> AsyncGenerator[ModelEvent]:
        parser = ResponseStreamParser()
        async for event in reader:
            for model_event in self._checked(parser.feed, event):
                yield model_event
            if parser.completed:
                break
        parser.finish()
        await reader.drain()

    async def compact(self, request: CompactRequest) -> Any:
        """``POST /responses/compact``, once; returns the JSON body of the answer, unchecked.

        Retries belong to the caller (:meth:`runtime.TaskContext.remote_compact`), as for
        streams.
        """
        try:
            return await self._sdk.post(
                "/responses/compact",
                body=compact_request_body(request),
                cast_to=object,
                options={"headers": {PURPOSE_HEADER: "compact"}},
            )
        except _FAILURES as exc:
            raise _translate(exc, secret=self._secret) from exc


# ----------------------------------------------------------------------------- chat wire


class ChatClient(_Wire):
    """The Chat Completions wire (SPEC §7.2), for OpenAI-compatible local servers."""

    def stream(self, prompt: Prompt) -> AbstractAsyncContextManager[AsyncIterator[ModelEvent]]:
        """Send ``prompt``; the context yields its events (see :class:`ModelClient`)."""
        body = chat_request_body(prompt)
        return self._stream("/chat/completions", body, prompt.purpose, self._events)

    async def _events(self, reader: _EventReader) -> AsyncGenerator[ModelEvent]:
        parser = ChatStreamParser()
        try:
            async for chunk in reader:
                for model_event in self._checked(parser.feed, chunk):
                    yield model_event
        except ModelError:
            # The usage chunk and ``[DONE]`` follow the finish reason; a stream that breaks
            # after the finish reason still carried the whole answer.
            if not parser.finished:
                raise
        for model_event in parser.finish():
            yield model_event
        await reader.drain()

    async def compact(self, request: CompactRequest) -> Any:
        """Chat servers have no remote compaction; always raises."""
        raise ModelError(
            f"provider {self._provider.name!r} speaks the chat wire, which has no remote "
            "compaction; use local compaction",
            ErrorCode.BAD_REQUEST,
        )


def chat_tool(tool: ToolSpec) -> dict[str, Any]:
    """A tool in the Chat Completions form."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.parameters),
        },
    }


def _chat_content(message: p.Message) -> str | list[dict[str, Any]]:
    if not any(isinstance(part, p.InputImage) for part in message.content):
        return message.text()
    parts: list[dict[str, Any]] = []
    for part in message.content:
        match part:
            case p.InputText(text=text) | p.OutputText(text=text):
                parts.append({"type": "text", "text": text})
            case p.InputImage(image_url=url):
                parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def _tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def chat_messages(instructions: str, items: Sequence[p.ResponseItem]) -> list[dict[str, Any]]:
    """The chat messages for a history (SPEC §7.2).

    ``instructions`` becomes the first system message; developer messages become system
    messages; tool calls become ``tool_calls`` of an assistant message (joined to the assistant
    message just before them, so that a text and its calls, or parallel calls, stay one
    message); tool outputs become ``tool`` messages. Reasoning, compaction items, snapshots and
    unknown items are not sent.
    """
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})

    def add_call(call: dict[str, Any]) -> None:
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "assistant":
            last.setdefault("tool_calls", []).append(call)
        else:
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})

    for item in items:
        match item:
            case p.Message(role="developer" | "system"):
                messages.append({"role": "system", "content": item.text()})
            case p.Message(role="assistant"):
                messages.append({"role": "assistant", "content": item.text()})
            case p.Message(role="user"):
                messages.append({"role": "user", "content": _chat_content(item)})
            case p.FunctionCall(name=name, arguments=arguments, call_id=call_id):
                add_call(_tool_call(call_id, name, arguments))
            case p.CustomToolCall(name=name, input=raw, call_id=call_id):
                add_call(_tool_call(call_id, name, raw))
            case (
                p.FunctionCallOutput(call_id=call_id, output=output)
                | p.CustomToolCallOutput(call_id=call_id, output=output)
            ):
                messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
            case _:
                pass
    return messages


def chat_request_body(prompt: Prompt) -> dict[str, Any]:
    """The JSON body of ``POST /chat/completions`` for ``prompt``."""
    extra: list[p.ResponseItem] = []
    for raw in prompt.trailing_input:
        try:
            extra.append(decode_response_item(raw))
        except DecodeError:
            continue
    body: dict[str, Any] = {
        "model": prompt.model,
        "messages": chat_messages(prompt.instructions, [*prompt.input, *extra]),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if prompt.tools:
        body["tools"] = [chat_tool(tool) for tool in prompt.tools]
        body["tool_choice"] = "auto"
        body["parallel_tool_calls"] = prompt.parallel_tool_calls
    if prompt.effort is not None:
        body["reasoning_effort"] = prompt.effort
    return body


@attrs.define
class _CallFragments:
    call_id: str = ""
    name: str = ""
    arguments: str = ""


def _chat_usage(data: object) -> p.TokenUsage | None:
    if not isinstance(data, Mapping):
        return None

    def number(value: object) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    prompt_details = data.get("prompt_tokens_details")
    completion_details = data.get("completion_tokens_details")
    input_tokens = number(data.get("prompt_tokens"))
    output_tokens = number(data.get("completion_tokens"))
    return p.TokenUsage(
        input_tokens=input_tokens,
        cached_input_tokens=number(prompt_details.get("cached_tokens"))
        if isinstance(prompt_details, Mapping)
        else 0,
        output_tokens=output_tokens,
        reasoning_output_tokens=number(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, Mapping)
        else 0,
        total_tokens=number(data.get("total_tokens")) or input_tokens + output_tokens,
    )


#: Finish reasons of an answer that did not end on its own; reported like
#: ``response.incomplete`` on the Responses wire.
_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


class ChatStreamParser:
    """Turns streamed chat completion chunks into :data:`ModelEvent` values.

    Text deltas are reported as they arrive. The complete items are reported by
    :meth:`finish`: the assistant message (when it has text), then one function call per
    tool-call index, then :class:`Completed` with the usage if the server sent it.
    """

    def __init__(self) -> None:
        self.response_id = ""
        self.finished = False
        self._text: list[str] = []
        self._calls: dict[int, _CallFragments] = {}
        self._usage: p.TokenUsage | None = None

    @property
    def item_id(self) -> str:
        """The item id of the assistant message (the completion's id)."""
        return self.response_id or "chatcmpl"

    def feed(self, chunk: Mapping[str, Any]) -> list[ModelEvent]:
        """The model events carried by one chunk."""
        error = chunk.get("error")
        if error is not None:
            payload = error if isinstance(error, Mapping) else {"message": str(error)}
            raise error_from_payload(payload, default="the model server reported an error")
        if chunk.get("object") == "error":
            raise error_from_payload(chunk, default="the model server reported an error")
        chunk_id = chunk.get("id")
        if isinstance(chunk_id, str) and chunk_id and not self.response_id:
            self.response_id = chunk_id
        usage = _chat_usage(chunk.get("usage"))
        if usage is not None:
            self._usage = usage
        choices = chunk.get("choices")
        events: list[ModelEvent] = []
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                content = delta.get("content")
                if isinstance(content, str) and content:
                    self._text.append(content)
                    events.append(OutputTextDelta(self.item_id, content))
                self._add_tool_calls(delta.get("tool_calls"))
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                if reason in _INCOMPLETE:
                    raise StreamError(f"incomplete response: {_INCOMPLETE[reason]}")
                self.finished = True
        return events

    def _add_tool_calls(self, fragments: object) -> None:
        if not isinstance(fragments, list):
            return
        for position, fragment in enumerate(fragments):
            if not isinstance(fragment, Mapping):
                raise StreamError("malformed tool call fragment from the model server")
            index = fragment.get("index")
            key = index if isinstance(index, int) and not isinstance(index, bool) else position
            call = self._calls.setdefault(key, _CallFragments())
            call_id = fragment.get("id")
            if isinstance(call_id, str) and call_id:
                call.call_id = call_id
            function = fragment.get("function")
            if isinstance(function, Mapping):
                name = function.get("name")
                arguments = function.get("arguments")
                if isinstance(name, str):
                    call.name += name
                if isinstance(arguments, str):
                    call.arguments += arguments

    def finish(self) -> list[ModelEvent]:
        """The complete items and :class:`Completed`; raises if the answer never finished."""
        if not self.finished:
            raise StreamError("stream closed before the chat completion finished")
        events: list[ModelEvent] = []
        text = "".join(self._text)
        if text:
            events.append(OutputItemDone(p.assistant_message(text, id=self.item_id)))
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call.name:
                raise StreamError(f"malformed tool call {index} from the model server: no name")
            events.append(
                OutputItemDone(
                    p.FunctionCall(
                        name=call.name,
                        arguments=call.arguments or "{}",
                        call_id=call.call_id or f"{self.item_id}-call-{index}",
                    )
                )
            )
        events.append(Completed(self.response_id, self._usage))
        return events
