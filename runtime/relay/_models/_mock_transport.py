"""A model server in-process: an ``httpx2`` transport that answers from a model script.

:class:`ScriptedTransport` lets the real HTTP wire (the openai SDK included) run against a
:class:`~relay._models._script.ModelScript` without a socket, so tests of the wire run in
virtual time. :mod:`relay._testing._mock_server` serves the very same answers over a real loopback
socket: both ask :func:`plan_exchange` what to send and only differ in how they send it.

An :class:`Exchange` is plain data: a status, headers and either a whole body or a list of
server-sent-event frames, with the timing the script asked for (a delay before the status
line, a stall between frames, a cut after some frames). Routes, relative to the base URL:

- ``POST …/responses``: the next reply, as Responses stream events;
- ``POST …/responses/compact``: the next compact reply, as JSON;
- ``POST …/chat/completions``: the next reply, as streamed chat completion chunks.

A request whose response format (``text.format``, ``response_format``) OpenAI's servers would
refuse is refused in the same way, a 400 that names the field, without taking a reply.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs
import httpx2

from .._base import _protocol as p
from .._base._codec import encode_response_item
from .._base._errors import InvalidOpError
from .._base._output_schema import check_output_schema
from .._base._unicode import holds_lone_surrogate
from ._prompt_cache import PromptCache, tool_tokens, with_cached
from ._responses import AGENT_HEADER, PURPOSE_HEADER
from ._script import HttpErrorSpec, ModelScript, load_model_script, parse_model_script

__all__ = [
    "Exchange",
    "SSE_HEADERS",
    "ScriptedTransport",
    "chat_chunks_for",
    "chat_frame",
    "format_problem",
    "plan_exchange",
    "problem_exchange",
    "request_json",
    "request_log_entry",
    "responses_body_from_chat",
    "script_from",
    "scripted_http_client",
    "sse_frame",
]

#: Headers of a streamed answer.
SSE_HEADERS: tuple[tuple[str, str], ...] = (
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
)

_JSON_HEADERS: tuple[tuple[str, str], ...] = (("content-type", "application/json"),)

#: Request headers that carry credentials; they are never logged.
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key"})

CHAT_DONE_FRAME = b"data: [DONE]\n\n"


@attrs.frozen
class Exchange:
    """What to answer to one request, and when."""

    status: int
    """HTTP status."""
    headers: tuple[tuple[str, str], ...]
    """Response headers."""
    body: bytes = b""
    """The whole body, when the answer is not streamed."""
    frames: tuple[bytes, ...] | None = None
    """Server-sent-event frames of a streamed answer (None: not streamed)."""
    delay_ms: int = 0
    """Wait before the status line."""
    stall_ms: int = 0
    """Wait between two frames."""
    cut_after: int | None = None
    """Close the connection after this many frames, without ending the body."""


def _frame_json(value: Any) -> str:
    """``value`` as compact JSON. Text that UTF-8 cannot carry (a lone surrogate, which a
    script may give to play a model that sends one) is written as JSON escapes, as a server
    that escapes everything would send it."""
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if holds_lone_surrogate(data):
        return json.dumps(value, separators=(",", ":"))
    return data


def sse_frame(event: Mapping[str, Any]) -> bytes:
    """One Responses stream event as an SSE frame: an ``event:`` and a ``data:`` line."""
    return f"event: {event.get('type', 'message')}\ndata: {_frame_json(event)}\n\n".encode()


def chat_frame(chunk: Mapping[str, Any]) -> bytes:
    """One chat completion chunk as an SSE frame (chat streams carry ``data:`` only)."""
    return f"data: {_frame_json(chunk)}\n\n".encode()


def _json_exchange(status: int, body: Any, *, delay_ms: int = 0) -> Exchange:
    return Exchange(
        status=status,
        headers=_JSON_HEADERS,
        body=json.dumps(body, ensure_ascii=False).encode(),
        delay_ms=delay_ms,
    )


def _error_exchange(error: HttpErrorSpec, *, delay_ms: int = 0) -> Exchange:
    headers = list(_JSON_HEADERS)
    if error.retry_after is not None:
        headers.append(("retry-after", f"{error.retry_after:g}"))
        headers.append(("retry-after-ms", str(round(error.retry_after * 1000))))
    return Exchange(
        status=error.status,
        headers=tuple(headers),
        body=json.dumps(error.body()).encode(),
        delay_ms=delay_ms,
    )


def problem_exchange(status: int, message: str) -> Exchange:
    """An error answer in the OpenAI shape, for requests the script cannot answer."""
    return _error_exchange(
        HttpErrorSpec(status=status, message=message, type="invalid_request_error")
    )


def plan_exchange(
    script: ModelScript,
    path: str,
    body: Any,
    *,
    purpose: str = "turn",
    cache: PromptCache | None = None,
    agent: str | None = None,
) -> Exchange:
    """The answer to ``POST path`` with JSON ``body``, consuming the script's next reply (the
    script of the sub-agent at ``agent``, when a sub-agent sent it).

    ``path`` is matched on its ending, so that any base URL prefix (``/v1``) works. With a
    ``cache``, an answer's usage reports the tokens it holds of the request.
    """
    if agent is not None:
        script = script.for_agent(agent)
    if not isinstance(body, Mapping):
        return problem_exchange(400, "the request body must be a JSON object")
    route = path.rstrip("/")
    if route.endswith("/responses/compact"):
        reply = script.plan_compact(body)
        if reply.http_error is not None:
            return _error_exchange(reply.http_error, delay_ms=reply.delay_ms)
        return _json_exchange(200, reply.body, delay_ms=reply.delay_ms)
    if route.endswith("/responses"):
        text = body.get("text")
        problem = format_problem(text.get("format") if isinstance(text, Mapping) else None, "text")
        if problem is not None:
            return problem_exchange(400, problem)
        plan = script.plan(body, purpose=purpose)
        if plan.http_error is not None:
            return _error_exchange(plan.http_error, delay_ms=plan.delay_ms)
        events = plan.events
        if cache is not None:
            events = with_cached(events, cache.cached(body), tool_tokens(body))
        return Exchange(
            status=200,
            headers=SSE_HEADERS,
            frames=tuple(sse_frame(event) for event in events),
            delay_ms=plan.delay_ms,
            stall_ms=plan.stall_ms,
            cut_after=plan.cut_after_events,
        )
    if route.endswith("/chat/completions"):
        problem = format_problem(body.get("response_format"), "response_format", chat=True)
        if problem is not None:
            return problem_exchange(400, problem)
        as_responses = responses_body_from_chat(body)
        plan = script.plan(as_responses, purpose=purpose)
        if plan.http_error is not None:
            return _error_exchange(plan.http_error, delay_ms=plan.delay_ms)
        model = body.get("model")
        events = plan.events
        if cache is not None:
            keyed = {**as_responses, "prompt_cache_key": body.get("prompt_cache_key")}
            events = with_cached(events, cache.cached(keyed), tool_tokens(as_responses))
        chunks = chat_chunks_for(events, model=model if isinstance(model, str) else "")
        frames = [chat_frame(chunk) for chunk in chunks]
        if not any("error" in chunk for chunk in chunks):
            frames.append(CHAT_DONE_FRAME)
        return Exchange(
            status=200,
            headers=SSE_HEADERS,
            frames=tuple(frames),
            delay_ms=plan.delay_ms,
            stall_ms=plan.stall_ms,
            cut_after=plan.cut_after_events,
        )
    return problem_exchange(404, f"no route for POST {path}")


# ----------------------------------------------------------------------------- response formats

#: What a response format's ``name`` may be, as OpenAI's servers have it.
_FORMAT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def format_problem(format: Any, where: str, *, chat: bool = False) -> str | None:
    """Why a request's response format is refused, as OpenAI's servers refuse it (the
    message of a 400), or None when it is accepted or absent.

    ``where`` names it: the Responses API's ``text`` holds it as ``format``, with the JSON
    Schema's ``name``, ``schema`` and ``strict`` beside its ``type``; Chat Completions has it as
    ``response_format``, with them under ``json_schema``.
    """
    if format is None:
        return None
    if chat:
        path = where
    else:
        where = path = f"{where}.format"
    if not isinstance(format, Mapping):
        return f"Invalid type for '{path}': expected an object."
    kind = format.get("type")
    if kind in ("text", "json_object"):
        return None
    if kind != "json_schema":
        return f"Invalid value for '{path}.type': expected one of text, json_object, json_schema."
    if chat:
        path = f"{where}.json_schema"
        format = format.get("json_schema")
        if not isinstance(format, Mapping):
            return f"Missing required parameter: '{path}'."
    name = format.get("name")
    if name is None:
        return f"Missing required parameter: '{path}.name'."
    if not isinstance(name, str) or _FORMAT_NAME.fullmatch(name) is None:
        return f"Invalid '{path}.name': letters, digits, '_' and '-', at most 64 of them."
    strict = format.get("strict", False)
    if not isinstance(strict, bool):
        return f"Invalid type for '{path}.strict': expected a boolean."
    schema = format.get("schema")
    if schema is None:
        return f"Missing required parameter: '{path}.schema'." if not chat else None
    try:
        check_output_schema(schema)
    except InvalidOpError as exc:
        return f"Invalid schema for response_format '{name}': {exc}."
    return None


# ----------------------------------------------------------------------------- chat rendering


def _chat_usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    input_details = usage.get("input_tokens_details")
    output_details = usage.get("output_tokens_details")
    return {
        "prompt_tokens": usage.get("input_tokens", 0),
        "completion_tokens": usage.get("output_tokens", 0),
        "total_tokens": usage.get("total_tokens", 0),
        "prompt_tokens_details": {
            "cached_tokens": input_details.get("cached_tokens", 0)
            if isinstance(input_details, Mapping)
            else 0
        },
        "completion_tokens_details": {
            "reasoning_tokens": output_details.get("reasoning_tokens", 0)
            if isinstance(output_details, Mapping)
            else 0
        },
    }


def chat_chunks_for(
    events: Iterable[Mapping[str, Any]], *, model: str = ""
) -> list[dict[str, Any]]:
    """The chat completion chunks that carry the same answer as these Responses events.

    Text deltas stay deltas; each function call is sent as two fragments with the same
    ``index`` (name and the first half of the arguments, then the rest), as real servers split
    them; completion gives a finish chunk and, with usage, a usage chunk with no choices. A
    ``response.failed`` becomes an ``error`` chunk. Other items (reasoning, compaction) have no
    chat form and are left out.
    """
    completion_id = "chatcmpl-mock"
    chunks: list[dict[str, Any]] = []

    def chunk(delta: Mapping[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
        }

    calls = 0
    for event in events:
        kind = event.get("type")
        if kind == "response.created":
            response = event.get("response")
            if isinstance(response, Mapping) and isinstance(response.get("id"), str):
                completion_id = f"chatcmpl-{response['id']}"
            chunks.append(chunk({"role": "assistant", "content": ""}))
        elif kind == "response.output_text.delta":
            chunks.append(chunk({"content": event.get("delta", "")}))
        elif kind == "response.output_item.done":
            item = event.get("item")
            if isinstance(item, Mapping) and item.get("type") == "function_call":
                arguments = str(item.get("arguments", ""))
                half = len(arguments) // 2
                first = {
                    "index": calls,
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {"name": item.get("name"), "arguments": arguments[:half]},
                }
                chunks.append(chunk({"tool_calls": [first]}))
                rest = {"index": calls, "function": {"arguments": arguments[half:]}}
                chunks.append(chunk({"tool_calls": [rest]}))
                calls += 1
        elif kind == "response.completed":
            chunks.append(chunk({}, "tool_calls" if calls else "stop"))
            response = event.get("response")
            usage = response.get("usage") if isinstance(response, Mapping) else None
            if isinstance(usage, Mapping):
                chunks.append(
                    {
                        "id": completion_id,
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": model,
                        "choices": [],
                        "usage": _chat_usage(usage),
                    }
                )
        elif kind == "response.failed":
            response = event.get("response")
            error = response.get("error") if isinstance(response, Mapping) else None
            chunks.append({"error": dict(error) if isinstance(error, Mapping) else {}})
    return chunks


def _chat_parts(content: Any) -> list[p.ContentPart]:
    if isinstance(content, str):
        return [p.InputText(content)] if content else []
    parts: list[p.ContentPart] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            parts.append(p.InputText(part["text"]))
        elif part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            if isinstance(url, str):
                parts.append(p.InputImage(url))
    return parts


def responses_body_from_chat(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses request body with the conversation of a chat request.

    The script's fallback answers (echo, summaries) read a Responses body; this gives them
    one for chat requests. The first system message becomes the instructions.
    """
    instructions = ""
    items: list[p.ResponseItem] = []
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        content = message.get("content")
        if role == "system" and not instructions and not items:
            instructions = content if isinstance(content, str) else ""
        elif role in {"system", "developer"}:
            items.append(p.Message("developer", tuple(_chat_parts(content))))
        elif role == "user":
            items.append(p.Message("user", tuple(_chat_parts(content))))
        elif role == "assistant":
            if isinstance(content, str) and content:
                items.append(p.assistant_message(content))
            calls = message.get("tool_calls")
            for call in calls if isinstance(calls, list) else []:
                function = call.get("function") if isinstance(call, Mapping) else None
                if isinstance(function, Mapping):
                    items.append(
                        p.FunctionCall(
                            name=str(function.get("name", "")),
                            arguments=str(function.get("arguments", "")),
                            call_id=str(call.get("id", "")),
                        )
                    )
        elif role == "tool":
            items.append(
                p.FunctionCallOutput(
                    call_id=str(message.get("tool_call_id", "")),
                    output=content if isinstance(content, str) else json.dumps(content),
                )
            )
    return {
        "model": body.get("model", ""),
        "instructions": instructions,
        "input": [encode_response_item(item) for item in items],
    }


# ----------------------------------------------------------------------------- request log


def request_log_entry(
    path: str,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    *,
    query: Sequence[tuple[str, str]] = (),
    received_at: float | None = None,
) -> dict[str, Any]:
    """The log record of a request: path, query, headers without credentials, JSON body, and
    when it was received (``received_at``, seconds since the epoch: when its headers came,
    else now).

    A body that is not JSON is kept as text.
    """
    kept: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        if key in SECRET_HEADERS:
            continue
        kept[key] = f"{kept[key]}, {value}" if key in kept else value
    try:
        parsed: Any = json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError):
        parsed = body.decode("utf-8", "replace")
    return {
        "path": path,
        "query": dict(query),
        "headers": kept,
        "body": parsed,
        "received_at": time.time() if received_at is None else received_at,
    }


def script_from(script: ModelScript | Mapping[str, Any] | str | Path | None) -> ModelScript:
    """A model script from a parsed script, its JSON data, a file path, or nothing (echo)."""
    if script is None:
        return ModelScript()
    if isinstance(script, ModelScript):
        return script
    if isinstance(script, Mapping):
        return parse_model_script(script)
    return load_model_script(script)


def request_json(body: bytes) -> Any:
    """A request body parsed as JSON, or None when it is not JSON."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


# ----------------------------------------------------------------------------- the transport


class ScriptedTransport(httpx2.MockTransport):
    """An in-process ``httpx2`` transport that plays a model script.

    Use it as the transport of an ``httpx2.AsyncClient`` given to
    :func:`~relay._wire.open_http_client`. A cut is a transport error in the middle of the
    body, as a dropped connection is for a real transport.

    Attributes:
        script: the model script being played (shared state: it advances per request).
        requests: the log record of every request, in order (see :func:`request_log_entry`).
    """

    def __init__(self, script: ModelScript | Mapping[str, Any] | str | Path | None = None):
        self.script = script_from(script)
        self.requests: list[dict[str, Any]] = []
        super().__init__(self._handle)

    async def _handle(self, request: httpx2.Request) -> httpx2.Response:
        content = await request.aread()
        self.requests.append(
            request_log_entry(
                request.url.path,
                request.headers.multi_items(),
                content,
                query=request.url.params.multi_items(),
            )
        )
        exchange = plan_exchange(
            self.script,
            request.url.path,
            request_json(content),
            purpose=request.headers.get(PURPOSE_HEADER, "turn"),
            agent=request.headers.get(AGENT_HEADER),
        )
        if exchange.delay_ms:
            await anyio.sleep(exchange.delay_ms / 1000)
        if exchange.frames is None:
            return httpx2.Response(
                exchange.status, headers=list(exchange.headers), content=exchange.body
            )
        return httpx2.Response(
            exchange.status, headers=list(exchange.headers), content=_play(exchange)
        )


async def _play(exchange: Exchange) -> AsyncIterator[bytes]:
    for index, frame in enumerate(exchange.frames or ()):
        if exchange.cut_after is not None and index >= exchange.cut_after:
            raise httpx2.RemoteProtocolError(
                "peer closed connection without sending complete message body"
            )
        if exchange.stall_ms and index:
            await anyio.sleep(exchange.stall_ms / 1000)
        yield frame


def scripted_http_client(
    script: ModelScript | Mapping[str, Any] | str | Path | None = None,
) -> tuple[httpx2.AsyncClient, ScriptedTransport]:
    """An ``httpx2.AsyncClient`` whose requests are answered by a model script, and its
    transport (for the request log)."""
    transport = ScriptedTransport(script)
    return httpx2.AsyncClient(transport=transport), transport
