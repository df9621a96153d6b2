"""The Chat Completions wire (docs/session.md), for OpenAI-compatible local servers."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs

from .._base import _protocol as p
from .._base._codec import DecodeError, decode_response_item
from .._base._errors import ErrorCode, ModelError, StreamError
from .._base._model import (
    CompactRequest,
    Completed,
    ModelEvent,
    OutputItemDone,
    OutputTextDelta,
    Prompt,
    ToolSpec,
)
from .._base._unicode import mend_json, mended_arguments
from .._models._responses import error_from_payload, json_schema_format
from .base import EventReader, WireClient


class ChatClient(WireClient):
    """The Chat Completions wire (docs/session.md), for OpenAI-compatible local servers."""

    def stream(self, prompt: Prompt) -> AbstractAsyncContextManager[AsyncIterator[ModelEvent]]:
        """Send ``prompt``; the context yields its events (see :class:`ModelClient`)."""
        body = chat_request_body(prompt)
        return self._stream(
            "/chat/completions", body, prompt.purpose, self._events, prompt.agent_path
        )

    async def _events(self, reader: EventReader) -> AsyncGenerator[ModelEvent]:
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
        reader.answered = True

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
    """The chat messages for a history (docs/session.md).

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
        body["tool_choice"] = prompt.tool_choice
        body["parallel_tool_calls"] = prompt.parallel_tool_calls
    if prompt.max_output_tokens is not None:
        # ``max_tokens``, not ``max_completion_tokens``: every OpenAI-compatible local server
        # honours it (llama-server honours both).
        body["max_tokens"] = prompt.max_output_tokens
    if prompt.effort is not None:
        body["reasoning_effort"] = prompt.effort
    if prompt.output_schema is not None:
        format = json_schema_format(prompt.output_schema)
        body["response_format"] = {"type": "json_schema", "json_schema": format}
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


#: Finish reasons of an answer the server cut short: what arrived is the answer
#: (:attr:`Completed.incomplete`), as ``response.incomplete`` is on the Responses wire.
_CUT = {"length": "max_output_tokens"}
#: Finish reasons of an answer that is no answer: a retryable failure.
_FAILED = {"content_filter": "content_filter"}


class ChatStreamParser:
    """Turns streamed chat completion chunks into :data:`ModelEvent` values.

    Text deltas are reported as they arrive. The complete items are reported by
    :meth:`finish`: the assistant message (when it has text), then one function call per
    tool-call index, then :class:`Completed` with the usage if the server sent it. Text that
    UTF-8 cannot carry (a lone surrogate) is carried with U+FFFD in its place, as
    :class:`~relay._models._responses.ResponseStreamParser` carries it.
    """

    def __init__(self) -> None:
        self.response_id = ""
        self.finished = False
        self._text: list[str] = []
        self._calls: dict[int, _CallFragments] = {}
        self._usage: p.TokenUsage | None = None
        self._incomplete: str | None = None

    @property
    def item_id(self) -> str:
        """The item id of the assistant message (the completion's id)."""
        return self.response_id or "chatcmpl"

    def feed(self, chunk: Mapping[str, Any]) -> list[ModelEvent]:
        """The model events carried by one chunk."""
        chunk = mend_json(chunk)
        error = chunk.get("error")
        if error is not None:
            payload = error if isinstance(error, Mapping) else {"message": str(error)}
            raise error_from_payload(payload, default="the model server reported an error")
        if chunk.get("object") == "error" or chunk.get("type") == "error":
            raise error_from_payload(chunk, default="the model server reported an error")
        if chunk.get("type") in ("response.failed", "response.incomplete"):
            # A server that answers in the Responses format: keep its message.
            response = chunk.get("response")
            failure = response.get("error") if isinstance(response, Mapping) else None
            raise error_from_payload(failure, default=f"the model server sent {chunk['type']}")
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
                if reason in _FAILED:
                    raise StreamError(f"incomplete response: {_FAILED[reason]}")
                self._incomplete = _CUT.get(reason)
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
                        arguments=mended_arguments(call.arguments or "{}"),
                        call_id=call.call_id or f"{self.item_id}-call-{index}",
                    )
                )
            )
        events.append(Completed(self.response_id, self._usage, self._incomplete))
        return events
