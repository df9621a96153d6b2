"""The Chat Completions wire: history to messages, chunks to items, through the real SDK."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx2
import pytest
import trio

from relay._base import _protocol as p
from relay._base._config import ProviderConfig
from relay._base._errors import ContextWindowExceeded, ErrorCode, ModelError, StreamError
from relay._base._model import (
    CompactRequest,
    Completed,
    ModelClient,
    ModelEvent,
    OutputItemDone,
    OutputTextDelta,
    Prompt,
    ToolSpec,
)
from relay._models._mock_transport import (
    SSE_HEADERS,
    ScriptedTransport,
    chat_chunks_for,
    chat_frame,
    responses_body_from_chat,
)
from relay._models._responses import stream_events_for
from relay._wire import ChatStreamParser, chat_messages, chat_request_body, open_http_client
from tests.model_scripts import numbered

PROVIDER = ProviderConfig(
    name="local",
    base_url="http://127.0.0.1:11434/v1",
    wire_api="chat",
    stream_idle_timeout_ms=10_000,
)
PROMPT = Prompt(model="qwen", instructions="Be brief.", input=(p.user_message("hi"),))
TOOL = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}})

Handler = Callable[[httpx2.Request], Coroutine[None, None, httpx2.Response]]


@asynccontextmanager
async def open_client(server: Handler | ScriptedTransport) -> AsyncIterator[ModelClient]:
    transport = server if isinstance(server, ScriptedTransport) else httpx2.MockTransport(server)
    http = httpx2.AsyncClient(transport=transport)
    async with open_http_client(PROVIDER, api_key=None, http_client=http) as client:
        yield client


async def collect(client: ModelClient, prompt: Prompt = PROMPT) -> list[ModelEvent]:
    async with client.stream(prompt) as events:
        return [event async for event in events]


def chunk(delta: Mapping[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-9",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "qwen",
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
    }


USAGE = {
    "id": "chatcmpl-9",
    "object": "chat.completion.chunk",
    "choices": [],
    "usage": {
        "prompt_tokens": 20,
        "completion_tokens": 5,
        "total_tokens": 25,
        "prompt_tokens_details": {"cached_tokens": 8},
        "completion_tokens_details": {"reasoning_tokens": 2},
    },
}


def chat_stream(*chunks: Mapping[str, Any] | bytes, done: bool = True) -> Handler:
    body = b"".join(c if isinstance(c, bytes) else chat_frame(c) for c in chunks)
    if done:
        body += b"data: [DONE]\n\n"

    async def handle(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers=list(SSE_HEADERS), content=body)

    return handle


# ----------------------------------------------------------------------------- history → chat


def test_history_maps_to_chat_messages() -> None:
    items: list[p.ResponseItem] = [
        p.Message("developer", (p.InputText("Use tools."),)),
        p.user_message("<environment_context>cwd</environment_context>"),
        p.user_message("read a.txt and b.txt"),
        p.Reasoning(id="rs_1", summary=(p.SummaryText("thinking"),), encrypted_content="x"),
        p.assistant_message("Reading both."),
        p.FunctionCall("read_file", '{"path":"a.txt"}', "call_a"),
        p.FunctionCall("read_file", '{"path":"b.txt"}', "call_b"),
        p.FunctionCallOutput("call_a", "A"),
        p.FunctionCallOutput("call_b", "B"),
        p.Compaction(encrypted_content="opaque"),
        p.GhostSnapshot(ref="abc"),
        p.Other(raw={"type": "web_search_call"}),
        p.FunctionCall("list_dir", "{}", "call_c"),
        p.FunctionCallOutput("call_c", "[]"),
        p.CustomToolCall(call_id="call_d", name="apply_patch", input="*** patch"),
        p.CustomToolCallOutput(call_id="call_d", output="done"),
        p.Message("user", (p.InputText("and this?"), p.InputImage("data:image/png;base64,AA"))),
        p.Message("system", (p.InputText("late system note"),)),
    ]
    assert chat_messages("Be brief.", items) == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "<environment_context>cwd</environment_context>"},
        {"role": "user", "content": "read a.txt and b.txt"},
        {
            "role": "assistant",
            "content": "Reading both.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path":"a.txt"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path":"b.txt"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "A"},
        {"role": "tool", "tool_call_id": "call_b", "content": "B"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_c",
                    "type": "function",
                    "function": {"name": "list_dir", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_c", "content": "[]"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_d",
                    "type": "function",
                    "function": {"name": "apply_patch", "arguments": "*** patch"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_d", "content": "done"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "and this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
            ],
        },
        {"role": "system", "content": "late system note"},
    ]


def test_empty_instructions_send_no_system_message() -> None:
    assert chat_messages("", [p.user_message("hi")]) == [{"role": "user", "content": "hi"}]


def test_request_body() -> None:
    prompt = attrs.evolve(
        PROMPT,
        tools=(TOOL,),
        parallel_tool_calls=True,
        effort="low",
        prompt_cache_key="k",
        trailing_input=({"type": "compaction_trigger"},),
    )
    body = chat_request_body(prompt)
    assert body == {
        "model": "qwen",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "read_file",
                    "description": "Read a file.",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning_effort": "low",
    }


def test_request_body_without_tools_has_no_tool_fields() -> None:
    assert set(chat_request_body(PROMPT)) == {"model", "messages", "stream", "stream_options"}


def test_the_mock_reads_chat_requests_back_as_the_same_history() -> None:
    items = (
        p.user_message("read a.txt"),
        p.assistant_message("Reading."),
        p.FunctionCall("read_file", '{"path":"a.txt"}', "call_a"),
        p.FunctionCallOutput("call_a", "A"),
        p.assistant_message("It says A."),
    )
    body = responses_body_from_chat(chat_request_body(attrs.evolve(PROMPT, input=items)))
    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "read a.txt"}],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Reading."}],
        },
        {
            "type": "function_call",
            "name": "read_file",
            "arguments": '{"path":"a.txt"}',
            "call_id": "call_a",
        },
        {"type": "function_call_output", "call_id": "call_a", "output": "A"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "It says A."}],
        },
    ]


# ----------------------------------------------------------------------------- chunks → items


def test_chunks_map_back_to_the_same_items() -> None:
    output: list[p.ResponseItem] = [
        p.assistant_message("Let me look."),
        p.FunctionCall("read_file", '{"path":"a.txt"}', "call_1"),
        p.FunctionCall("list_dir", '{"path":"."}', "call_2"),
    ]
    usage = p.TokenUsage(11, 3, 7, 0, 18)
    parser = ChatStreamParser()
    events: list[ModelEvent] = []
    for c in chat_chunks_for(stream_events_for("r1", output, usage), model="qwen"):
        events += parser.feed(c)
    events += parser.finish()
    assert events == [
        OutputTextDelta("chatcmpl-r1", "Let me"),
        OutputTextDelta("chatcmpl-r1", " look."),
        OutputItemDone(p.assistant_message("Let me look.", id="chatcmpl-r1")),
        OutputItemDone(output[1]),
        OutputItemDone(output[2]),
        Completed("chatcmpl-r1", usage),
    ]


async def test_text_reply_through_the_sdk() -> None:
    handler = chat_stream(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk({}, "stop"),
        USAGE,
    )
    async with open_client(handler) as client:
        events = await collect(client)
    assert events == [
        OutputTextDelta("chatcmpl-9", "Hel"),
        OutputTextDelta("chatcmpl-9", "lo"),
        OutputItemDone(p.assistant_message("Hello", id="chatcmpl-9")),
        Completed("chatcmpl-9", p.TokenUsage(20, 8, 5, 2, 25)),
    ]


async def test_tool_call_fragments_are_joined_by_index() -> None:
    def call(index: int, **fields: Any) -> dict[str, Any]:
        return chunk({"tool_calls": [{"index": index, **fields}]})

    handler = chat_stream(
        chunk({"role": "assistant", "content": None}),
        call(1, id="call_b", type="function", function={"name": "list_", "arguments": ""}),
        call(0, id="call_a", type="function", function={"name": "read_file", "arguments": '{"pa'}),
        call(1, function={"name": "dir", "arguments": '{"path":'}),
        call(0, function={"arguments": 'th": "a.txt"}'}),
        call(1, function={"arguments": ' "."}'}),
        chunk({}, "tool_calls"),
    )
    async with open_client(handler) as client:
        events = await collect(client)
    assert events == [
        OutputItemDone(p.FunctionCall("read_file", '{"path": "a.txt"}', "call_a")),
        OutputItemDone(p.FunctionCall("list_dir", '{"path": "."}', "call_b")),
        Completed("chatcmpl-9", None),
    ]


async def test_calls_without_ids_get_stable_ones() -> None:
    handler = chat_stream(
        chunk({"tool_calls": [{"index": 0, "function": {"name": "sleep", "arguments": ""}}]}),
        chunk({}, "tool_calls"),
    )
    async with open_client(handler) as client:
        events = await collect(client)
    assert events[0] == OutputItemDone(p.FunctionCall("sleep", "{}", "chatcmpl-9-call-0"))


async def test_missing_usage_is_none() -> None:
    async with open_client(chat_stream(chunk({"content": "ok"}), chunk({}, "stop"))) as client:
        events = await collect(client)
    assert events[-1] == Completed("chatcmpl-9", None)


async def test_a_break_after_the_finish_reason_keeps_the_answer() -> None:
    async def handle(request: httpx2.Request) -> httpx2.Response:
        async def body() -> AsyncIterator[bytes]:
            yield chat_frame(chunk({"content": "ok"}))
            yield chat_frame(chunk({}, "stop"))
            raise httpx2.RemoteProtocolError("peer closed connection")

        return httpx2.Response(200, headers=list(SSE_HEADERS), content=body())

    async with open_client(handle) as client:
        events = await collect(client)
    assert events[-2:] == [
        OutputItemDone(p.assistant_message("ok", id="chatcmpl-9")),
        Completed("chatcmpl-9", None),
    ]


async def test_scripted_replies_over_the_chat_route() -> None:
    script = {
        "responses": [
            {"text": "Hi!", "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}},
            {"function_call": {"name": "read_file", "arguments": {"path": "x"}, "call_id": "c1"}},
        ]
    }
    transport = ScriptedTransport(numbered(script))
    async with open_client(transport) as client:
        first = await collect(client)
        second = await collect(client)
    assert first[-2:] == [
        OutputItemDone(p.assistant_message("Hi!", id="chatcmpl-resp-1")),
        Completed("chatcmpl-resp-1", p.TokenUsage(3, 0, 2, 0, 5)),
    ]
    assert second[0] == OutputItemDone(p.FunctionCall("read_file", '{"path": "x"}', "c1"))
    assert [r["path"] for r in transport.requests] == ["/v1/chat/completions"] * 2
    assert transport.requests[0]["body"] == chat_request_body(PROMPT)


async def test_echo_fallback_answers_chat_requests() -> None:
    async with open_client(ScriptedTransport(numbered({}))) as client:
        events = await collect(client)
    assert events[-2] == OutputItemDone(p.assistant_message("echo: hi", id="chatcmpl-resp-1"))


# ----------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("chunks", "kind", "code", "message"),
    [
        (
            [chunk({"content": "partial"})],
            StreamError,
            ErrorCode.STREAM,
            "stream closed before the chat completion finished",
        ),
        (
            [chunk({"content": "withheld"}, "content_filter")],
            StreamError,
            ErrorCode.STREAM,
            "incomplete response: content_filter",
        ),
        (
            [
                {
                    "error": {
                        "message": "This model's maximum context length is 2048 tokens.",
                        "type": "BadRequestError",
                        "code": 400,
                    }
                }
            ],
            ContextWindowExceeded,
            ErrorCode.CONTEXT_WINDOW_EXCEEDED,
            "This model's maximum context length is 2048 tokens.",
        ),
        (
            [{"object": "error", "message": "overloaded", "type": "ServiceUnavailable"}],
            StreamError,
            ErrorCode.STREAM,
            "overloaded",
        ),
        ([{"error": "model crashed"}], StreamError, ErrorCode.STREAM, "model crashed"),
        (
            [chunk({"tool_calls": ["nonsense"]})],
            StreamError,
            ErrorCode.STREAM,
            "malformed tool call fragment from the model server",
        ),
    ],
)
async def test_stream_failures(
    chunks: list[dict[str, Any]], kind: type[ModelError], code: ErrorCode, message: str
) -> None:
    async with open_client(chat_stream(*chunks, done=False)) as client:
        with pytest.raises(ModelError) as caught:
            await collect(client)
    assert type(caught.value) is kind
    assert caught.value.code is code
    assert caught.value.message == message


@pytest.mark.parametrize(
    ("body", "kind", "code"),
    [
        (
            {
                "object": "error",
                "message": "This model's maximum context length is 4096 tokens. "
                "However, you requested 9000 tokens.",
                "type": "BadRequestError",
                "code": 400,
            },
            ContextWindowExceeded,
            ErrorCode.CONTEXT_WINDOW_EXCEEDED,
        ),
        (
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size",
                    "type": "exceed_context_size_error",
                }
            },
            ContextWindowExceeded,
            ErrorCode.CONTEXT_WINDOW_EXCEEDED,
        ),
        (
            {"error": {"message": "model 'qwen' not found", "type": "api_error"}},
            ModelError,
            ErrorCode.BAD_REQUEST,
        ),
    ],
)
async def test_http_errors_on_the_chat_wire(
    body: dict[str, Any], kind: type[ModelError], code: ErrorCode
) -> None:
    status = 404 if "not found" in json.dumps(body) else 400

    async def handle(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, json=body)

    async with open_client(handle) as client:
        with pytest.raises(ModelError) as caught:
            await collect(client)
    assert type(caught.value) is kind
    assert caught.value.code is code


async def test_idle_chat_stream_times_out(autojump_clock: trio.abc.Clock) -> None:
    async def handle(request: httpx2.Request) -> httpx2.Response:
        async def body() -> AsyncIterator[bytes]:
            yield chat_frame(chunk({"content": "thinking"}))
            await trio.sleep_forever()

        return httpx2.Response(200, headers=list(SSE_HEADERS), content=body())

    async with open_client(handle) as client:
        start = trio.current_time()
        with pytest.raises(StreamError, match="idle timeout"):
            await collect(client)
        assert trio.current_time() - start == pytest.approx(10)


async def test_chat_has_no_remote_compaction() -> None:
    async with open_client(ScriptedTransport(numbered({}))) as client:
        with pytest.raises(ModelError) as caught:
            await client.compact(CompactRequest(model="qwen", instructions="", input=()))
    assert caught.value.code is ErrorCode.BAD_REQUEST
    assert not caught.value.retryable
    assert "no remote compaction" in caught.value.message
