"""The Responses wire through the real openai SDK, against an in-process transport.

Every test runs the SDK's own request and stream code; only the socket is replaced by an
``httpx2.MockTransport``. Time is virtual wherever the wire waits.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx2
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from relay._base import _protocol as p
from relay._base._config import ProviderConfig
from relay._base._errors import (
    ConfigError,
    ContextWindowExceeded,
    ErrorCode,
    ModelError,
    StreamError,
)
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
from relay._models._mock_transport import SSE_HEADERS, ScriptedTransport, sse_frame
from relay._models._responses import compact_request_body, request_body
from relay._models._script import parse_model_script
from relay._wire import ResponsesClient, ServerSentEvent, SseDecoder, open_http_client
from tests.model_scripts import numbered

API_KEY = "sk-test-0123456789abcdef"
IDLE_MS = 30_000
PROVIDER = ProviderConfig(
    name="test",
    base_url="http://model.test/v1",
    env_key="TEST_KEY",
    stream_idle_timeout_ms=IDLE_MS,
    request_max_retries=2,
)
PROMPT = Prompt(model="gpt-test", instructions="Be brief.", input=(p.user_message("hi"),))

Handler = Callable[[httpx2.Request], Coroutine[None, None, httpx2.Response]]


@asynccontextmanager
async def open_client(
    server: Handler | ScriptedTransport, provider: ProviderConfig = PROVIDER
) -> AsyncIterator[ModelClient]:
    transport = server if isinstance(server, ScriptedTransport) else httpx2.MockTransport(server)
    http = httpx2.AsyncClient(transport=transport)
    async with open_http_client(provider, api_key=API_KEY, http_client=http) as client:
        yield client


async def collect(client: ModelClient, prompt: Prompt = PROMPT) -> list[ModelEvent]:
    async with client.stream(prompt) as events:
        return [event async for event in events]


async def collect_until_error(
    client: ModelClient, prompt: Prompt = PROMPT
) -> tuple[list[ModelEvent], ModelError]:
    seen: list[ModelEvent] = []
    with pytest.raises(ModelError) as caught:
        async with client.stream(prompt) as events:
            async for event in events:
                seen.append(event)
    return seen, caught.value


def sse(*events: Mapping[str, Any] | bytes) -> Handler:
    """A handler that answers with these SSE frames (dicts are rendered, bytes sent as is)."""
    body = b"".join(event if isinstance(event, bytes) else sse_frame(event) for event in events)

    async def handle(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers=list(SSE_HEADERS), content=body)

    return handle


def answer(status: int, body: Any, headers: Sequence[tuple[str, str]] = ()) -> Handler:
    """A handler that answers with an HTTP status and a JSON (or text) body."""
    content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    kind = "text/plain" if isinstance(body, str) else "application/json"

    async def handle(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers=[("content-type", kind), *headers], content=content)

    return handle


CREATED = {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}


def completed(usage: Mapping[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"id": "resp_1", "status": "completed", "output": []}
    if usage is not None:
        response["usage"] = dict(usage)
    return {"type": "response.completed", "response": response}


# ----------------------------------------------------------------------------- success


async def test_text_reply_streams_deltas_then_item_then_usage() -> None:
    script = {
        "responses": [
            {
                "text": "Hello there",
                "usage": {
                    "input_tokens": 10,
                    "input_tokens_details": {"cached_tokens": 4},
                    "output_tokens": 3,
                    "output_tokens_details": {"reasoning_tokens": 1},
                    "total_tokens": 13,
                },
            }
        ]
    }
    async with open_client(ScriptedTransport(numbered(script))) as client:
        events = await collect(client)
    message = p.assistant_message("Hello there", id="resp-1-msg-0")
    assert events == [
        OutputTextDelta("resp-1-msg-0", "Hello "),
        OutputTextDelta("resp-1-msg-0", "there"),
        OutputItemDone(message),
        Completed("resp-1", p.TokenUsage(10, 4, 3, 1, 13)),
    ]


async def test_function_call_reply() -> None:
    script = {
        "responses": [
            {
                "function_call": {
                    "name": "read_file",
                    "arguments": {"path": "a.txt"},
                    "call_id": "call_7",
                },
                "total_tokens": 99,
            }
        ]
    }
    async with open_client(ScriptedTransport(numbered(script))) as client:
        events = await collect(client)
    assert events == [
        OutputItemDone(p.FunctionCall("read_file", '{"path": "a.txt"}', "call_7")),
        Completed("resp-1", p.TokenUsage(total_tokens=99)),
    ]


async def test_unknown_output_item_types_are_kept_as_other() -> None:
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    script = {
        "responses": [
            {
                "output": [
                    search,
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "found"}],
                    },
                ],
                "total_tokens": 5,
            }
        ]
    }
    async with open_client(ScriptedTransport(numbered(script))) as client:
        events = await collect(client)
    items = [event.item for event in events if isinstance(event, OutputItemDone)]
    assert items[0] == p.Other(raw=search)
    assert isinstance(items[1], p.Message) and items[1].text() == "found"
    assert events[-1] == Completed("resp-1", p.TokenUsage(total_tokens=5))


async def test_completed_without_usage_reports_none() -> None:
    async with open_client(sse(CREATED, completed())) as client:
        assert await collect(client) == [Completed("resp_1", None)]


async def test_events_after_the_terminal_event_are_ignored() -> None:
    late = {"type": "response.output_text.delta", "item_id": "x", "delta": "late"}
    async with open_client(sse(CREATED, completed(), late)) as client:
        assert await collect(client) == [Completed("resp_1", None)]


# ----------------------------------------------------------------------------- request


async def test_request_body_and_headers_are_sent_as_built() -> None:
    seen: list[httpx2.Request] = []
    provider = attrs.evolve(
        PROVIDER, http_headers={"x-team": "relay"}, query_params={"api-version": "2025-01"}
    )

    async def handle(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return await sse(CREATED, completed())(request)

    tool = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}})
    prompt = Prompt(
        model="gpt-test",
        instructions="Be brief.",
        input=(
            p.user_message("hi", metadata={"harness": True}),
            p.FunctionCall("read_file", '{"path":"a"}', "call_1"),
            p.FunctionCallOutput("call_1", "contents"),
        ),
        tools=(tool,),
        parallel_tool_calls=True,
        prompt_cache_key="session-42",
        effort="high",
        trailing_input=({"type": "compaction_trigger"},),
        purpose="compact",
    )
    async with open_client(handle, provider) as client:
        await collect(client, prompt)

    [request] = seen
    assert request.method == "POST"
    assert request.url.path == "/v1/responses"
    assert dict(request.url.params) == {"api-version": "2025-01"}
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.headers["x-relay-request"] == "compact"
    assert request.headers["x-team"] == "relay"
    assert request.headers["x-stainless-retry-count"] == "0"
    body = json.loads(request.content)
    assert body == request_body(prompt)
    assert body["model"] == "gpt-test"
    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {
            "type": "function_call",
            "name": "read_file",
            "arguments": '{"path":"a"}',
            "call_id": "call_1",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "contents"},
        {"type": "compaction_trigger"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
        }
    ]
    assert body["tool_choice"] == "auto"
    assert body["parallel_tool_calls"] is True
    assert body["store"] is False
    assert body["stream"] is True
    assert body["prompt_cache_key"] == "session-42"
    assert body["reasoning"] == {"effort": "high"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert set(body) == {
        "model",
        "instructions",
        "input",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "store",
        "stream",
        "prompt_cache_key",
        "reasoning",
        "include",
    }


async def test_no_api_key_sends_no_real_secret() -> None:
    seen: list[httpx2.Request] = []

    async def handle(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return await sse(CREATED, completed())(request)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handle))
    async with open_http_client(PROVIDER, api_key=None, http_client=http) as client:
        await collect(client)
    assert seen[0].headers["authorization"] == "Bearer unused"


async def test_a_provider_without_base_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no base_url"):
        async with open_http_client(ProviderConfig(name="bare"), api_key=None):
            pass  # pragma: no cover


def test_the_scripted_path_does_not_import_the_sdk() -> None:
    code = (
        "import sys, relay._models._scripted, relay._models._responses, relay._models._script\n"
        "print(sorted(m for m in ('openai', 'httpx2', 'relay._wire') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


# ----------------------------------------------------------------------------- HTTP errors


@attrs.frozen
class Expected:
    kind: type[ModelError]
    code: ErrorCode
    retryable: bool
    message: str | None = None
    retry_after: float | None = None


def check(error: ModelError, expected: Expected) -> None:
    assert type(error) is expected.kind
    assert error.code is expected.code
    assert error.retryable is expected.retryable
    assert error.retry_after == expected.retry_after
    if expected.message is not None:
        assert error.message == expected.message
    assert API_KEY not in str(error)


HTTP_ERRORS: dict[str, tuple[Handler, Expected]] = {
    "400 context_length_exceeded": (
        answer(
            400,
            {
                "error": {
                    "message": "Your input exceeds the context window of this model.",
                    "type": "invalid_request_error",
                    "param": "input",
                    "code": "context_length_exceeded",
                }
            },
        ),
        Expected(
            ContextWindowExceeded,
            ErrorCode.CONTEXT_WINDOW_EXCEEDED,
            False,
            "Your input exceeds the context window of this model.",
        ),
    ),
    "400 llama.cpp exceed_context_size_error": (
        answer(
            400,
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 5000,
                    "n_ctx": 4096,
                }
            },
        ),
        Expected(
            ContextWindowExceeded,
            ErrorCode.CONTEXT_WINDOW_EXCEEDED,
            False,
            "the request exceeds the available context size, try increasing it",
        ),
    ),
    "400 vLLM maximum context length (flat)": (
        answer(
            400,
            {
                "object": "error",
                "message": "This model's maximum context length is "
                "4096 tokens. However, you requested 5000 tokens.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            },
        ),
        Expected(
            ContextWindowExceeded,
            ErrorCode.CONTEXT_WINDOW_EXCEEDED,
            False,
            "This model's maximum context length is 4096 tokens. However, you "
            "requested 5000 tokens.",
        ),
    ),
    "400 vLLM maximum context length (nested)": (
        answer(
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 8192 tokens.",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                }
            },
        ),
        Expected(ContextWindowExceeded, ErrorCode.CONTEXT_WINDOW_EXCEEDED, False),
    ),
    "400 other": (
        answer(
            400,
            {
                "error": {
                    "message": "Unknown parameter: 'frobnicate'.",
                    "type": "invalid_request_error",
                    "code": "unknown_parameter",
                }
            },
        ),
        Expected(ModelError, ErrorCode.BAD_REQUEST, False, "Unknown parameter: 'frobnicate'."),
    ),
    "401": (
        answer(
            401,
            {
                "error": {
                    "message": f"Incorrect API key provided: {API_KEY}.",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
        ),
        Expected(
            ModelError, ErrorCode.UNAUTHORIZED, False, "Incorrect API key provided: [redacted]."
        ),
    ),
    "403": (
        answer(
            403, {"error": {"message": "Project does not have access.", "type": None, "code": None}}
        ),
        Expected(ModelError, ErrorCode.UNAUTHORIZED, False),
    ),
    "429 insufficient_quota": (
        answer(
            429,
            {
                "error": {
                    "message": "You exceeded your current quota.",
                    "type": "insufficient_quota",
                    "code": "insufficient_quota",
                }
            },
        ),
        Expected(ModelError, ErrorCode.QUOTA_EXCEEDED, False, "You exceeded your current quota."),
    ),
    "429 rate limit, retry-after seconds": (
        answer(
            429,
            {
                "error": {
                    "message": "Rate limit reached.",
                    "type": "requests",
                    "code": "rate_limit_exceeded",
                }
            },
            [("retry-after", "2")],
        ),
        Expected(ModelError, ErrorCode.SERVER_ERROR, True, "Rate limit reached.", 2.0),
    ),
    "429 rate limit, retry-after-ms wins": (
        answer(
            429,
            {"error": {"message": "Rate limit reached.", "code": "rate_limit_exceeded"}},
            [("retry-after", "2"), ("retry-after-ms", "1500")],
        ),
        Expected(ModelError, ErrorCode.SERVER_ERROR, True, retry_after=1.5),
    ),
    "429 rate limit, hint in the message": (
        answer(
            429,
            {
                "error": {
                    "message": "Rate limit reached. Please try again in 250ms.",
                    "code": "rate_limit_exceeded",
                }
            },
        ),
        Expected(ModelError, ErrorCode.SERVER_ERROR, True, retry_after=0.25),
    ),
    "500": (
        answer(
            500,
            {
                "error": {
                    "message": "The server had an error.",
                    "type": "server_error",
                    "code": None,
                }
            },
        ),
        Expected(ModelError, ErrorCode.SERVER_ERROR, True, "The server had an error."),
    ),
    "503 text body": (
        answer(503, "upstream unavailable"),
        Expected(ModelError, ErrorCode.SERVER_ERROR, True, "upstream unavailable"),
    ),
    "502 empty body": (
        answer(502, ""),
        Expected(ModelError, ErrorCode.SERVER_ERROR, True, "HTTP 502"),
    ),
}


@pytest.mark.parametrize("case", list(HTTP_ERRORS))
async def test_http_errors_are_classified(case: str) -> None:
    handler, expected = HTTP_ERRORS[case]
    async with open_client(handler) as client:
        seen, error = await collect_until_error(client)
    assert seen == []
    check(error, expected)
    assert isinstance(error.__cause__, Exception)


async def test_scripted_http_error_carries_retry_after() -> None:
    script = {
        "responses": [
            {
                "http_error": {
                    "status": 429,
                    "code": "rate_limit_exceeded",
                    "message": "slow down",
                    "retry_after": 1.5,
                }
            }
        ]
    }
    async with open_client(ScriptedTransport(numbered(script))) as client:
        _, error = await collect_until_error(client)
    check(error, Expected(ModelError, ErrorCode.SERVER_ERROR, True, "slow down", 1.5))


async def test_connection_refused_is_a_stream_error() -> None:
    async def handle(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("[Errno 111] Connection refused", request=request)

    async with open_client(handle) as client:
        _, error = await collect_until_error(client)
    check(error, Expected(StreamError, ErrorCode.STREAM, True))
    assert error.message == (
        "connection to the model server failed: ConnectError: [Errno 111] Connection refused"
    )


# ----------------------------------------------------------------------------- stream errors

STREAM_ERRORS: dict[str, tuple[Handler, Expected]] = {
    "nested error event, context window": (
        sse(
            CREATED,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                    "message": "Too long.",
                    "param": None,
                },
            },
        ),
        Expected(ContextWindowExceeded, ErrorCode.CONTEXT_WINDOW_EXCEEDED, False, "Too long."),
    ),
    "nested error event, rate limit with hint": (
        sse(
            CREATED,
            {
                "type": "error",
                "error": {"code": "rate_limit_exceeded", "message": "Please try again in 1.5s."},
            },
        ),
        Expected(ModelError, ErrorCode.SERVER_ERROR, True, "Please try again in 1.5s.", 1.5),
    ),
    "nested error event, quota": (
        sse({"type": "error", "error": {"code": "insufficient_quota", "message": "No quota."}}),
        Expected(ModelError, ErrorCode.QUOTA_EXCEEDED, False, "No quota."),
    ),
    "flat error event": (
        sse(
            CREATED,
            {
                "type": "error",
                "code": "server_error",
                "message": "boom",
                "param": None,
                "sequence_number": 2,
            },
        ),
        Expected(StreamError, ErrorCode.STREAM, True, "boom"),
    ),
    "flat error event, context window": (
        sse(CREATED, {"type": "error", "code": "context_length_exceeded", "message": "big"}),
        Expected(ContextWindowExceeded, ErrorCode.CONTEXT_WINDOW_EXCEEDED, False, "big"),
    ),
    "error event without code": (
        sse(CREATED, {"type": "error", "error": {"message": "something broke"}}),
        Expected(StreamError, ErrorCode.STREAM, True, "something broke"),
    ),
    "error event without anything": (
        sse(CREATED, {"type": "error"}),
        Expected(StreamError, ErrorCode.STREAM, True, "the model reported an error"),
    ),
    "response.failed with code": (
        sse(
            CREATED,
            {
                "type": "response.failed",
                "response": {
                    "id": "resp_1",
                    "status": "failed",
                    "error": {"code": "context_length_exceeded", "message": "Input too long."},
                },
            },
        ),
        Expected(
            ContextWindowExceeded, ErrorCode.CONTEXT_WINDOW_EXCEEDED, False, "Input too long."
        ),
    ),
    "response.failed without code": (
        sse(
            CREATED,
            {
                "type": "response.failed",
                "response": {
                    "id": "resp_1",
                    "status": "failed",
                    "error": {"message": "The model crashed."},
                },
            },
        ),
        Expected(StreamError, ErrorCode.STREAM, True, "The model crashed."),
    ),
    "response.failed without error": (
        sse(CREATED, {"type": "response.failed", "response": {"id": "resp_1"}}),
        Expected(StreamError, ErrorCode.STREAM, True, "the response failed"),
    ),
    "response.incomplete": (
        sse(
            CREATED,
            {
                "type": "response.incomplete",
                "response": {
                    "id": "resp_1",
                    "status": "incomplete",
                    "incomplete_details": {"reason": "content_filter"},
                },
            },
        ),
        Expected(StreamError, ErrorCode.STREAM, True, "incomplete response: content_filter"),
    ),
    "stream ended without terminal event": (
        sse(CREATED),
        Expected(StreamError, ErrorCode.STREAM, True, "stream closed before response.completed"),
    ),
    "empty stream": (
        sse(),
        Expected(StreamError, ErrorCode.STREAM, True, "stream closed before response.completed"),
    ),
    "malformed SSE JSON": (
        sse(CREATED, b'event: response.output_text.delta\ndata: {"type": "response.out\n\n'),
        Expected(StreamError, ErrorCode.STREAM, True),
    ),
    "SSE data that is not an object": (
        sse(CREATED, b"event: odd\ndata: [1, 2]\n\n"),
        Expected(
            StreamError,
            ErrorCode.STREAM,
            True,
            "malformed event from the model server: expected a JSON object, got list",
        ),
    ),
    "malformed output item": (
        sse(CREATED, {"type": "response.output_item.done", "item": {"type": "function_call"}}),
        Expected(StreamError, ErrorCode.STREAM, True),
    ),
}


@pytest.mark.parametrize("case", list(STREAM_ERRORS))
async def test_stream_errors_are_classified(case: str) -> None:
    handler, expected = STREAM_ERRORS[case]
    async with open_client(handler) as client:
        _, error = await collect_until_error(client)
    check(error, expected)


async def test_malformed_json_names_the_problem() -> None:
    async with open_client(STREAM_ERRORS["malformed SSE JSON"][0]) as client:
        _, error = await collect_until_error(client)
    assert error.message.startswith("malformed event from the model server (invalid JSON): ")


async def test_events_before_a_failure_are_delivered() -> None:
    delta = {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Hel"}
    async with open_client(sse(CREATED, delta)) as client:
        seen, error = await collect_until_error(client)
    assert seen == [OutputTextDelta("msg_1", "Hel")]
    assert error.message == "stream closed before response.completed"


async def test_the_secret_is_kept_out_of_in_stream_errors() -> None:
    failed = {"type": "error", "error": {"message": f"bad key {API_KEY}", "code": "x"}}
    async with open_client(sse(failed)) as client:
        _, error = await collect_until_error(client)
    check(error, Expected(StreamError, ErrorCode.STREAM, True, "bad key [redacted]"))


async def test_connection_cut_mid_stream() -> None:
    script = {"responses": [{"text": "Hello there", "cut_after_events": 3}]}
    async with open_client(ScriptedTransport(numbered(script))) as client:
        seen, error = await collect_until_error(client)
    assert seen == [OutputTextDelta("resp-1-msg-0", "Hello ")]
    check(error, Expected(StreamError, ErrorCode.STREAM, True))
    assert error.message == (
        "connection to the model server failed: RemoteProtocolError: peer closed connection "
        "without sending complete message body"
    )


# ----------------------------------------------------------------------------- time


async def test_idle_stream_fails_at_exactly_the_idle_timeout(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def handle(request: httpx2.Request) -> httpx2.Response:
        async def body() -> AsyncIterator[bytes]:
            await trio.sleep(5)
            yield sse_frame(CREATED)
            await trio.sleep_forever()

        return httpx2.Response(200, headers=list(SSE_HEADERS), content=body())

    async with open_client(handle) as client:
        start = trio.current_time()
        _, error = await collect_until_error(client)
        assert trio.current_time() - start == pytest.approx(5 + IDLE_MS / 1000)
    check(
        error,
        Expected(
            StreamError,
            ErrorCode.STREAM,
            True,
            "idle timeout: no event from the model server for 30000 ms",
        ),
    )


async def test_the_idle_timeout_restarts_with_every_event(
    autojump_clock: trio.abc.Clock,
) -> None:
    # Five events, 29 s apart: never idle for 30 s, although the stream takes two minutes.
    script = {"responses": [{"text": "slow but alive", "stall_ms": 29_000, "total_tokens": 1}]}
    async with open_client(ScriptedTransport(numbered(script))) as client:
        start = trio.current_time()
        events = await collect(client)
        assert trio.current_time() - start == pytest.approx(5 * 29)
    assert events[-1] == Completed("resp-1", p.TokenUsage(total_tokens=1))


async def test_delay_before_the_answer_is_waited_for(autojump_clock: trio.abc.Clock) -> None:
    script = {"responses": [{"text": "late", "delay_ms": 2_500}]}
    async with open_client(ScriptedTransport(numbered(script))) as client:
        start = trio.current_time()
        events = await collect(client)
        assert trio.current_time() - start == pytest.approx(2.5)
    assert isinstance(events[-1], Completed)


async def test_a_request_moves_no_virtual_clock(
    autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client starts no worker thread for a request. The SDK would, at its first request,
    to find the platform it reports: under a virtual clock the thread's real duration lets
    the clock jump to the next deadline, here the guard's (a request's own deadlines would
    expire at once). The probe is made slow here, as it is the first time in a process."""

    def slow_probe() -> str:
        time.sleep(0.05)
        return "Linux"

    monkeypatch.setattr("openai._base_client.get_platform", slow_probe)
    with trio.fail_after(60):
        async with open_client(sse(CREATED, completed())) as client:
            start = trio.current_time()
            assert await collect(client) == [Completed("resp_1", None)]
            assert trio.current_time() == start


async def test_leaving_early_closes_the_response() -> None:
    answers: list[httpx2.Response] = []

    async def handle(request: httpx2.Request) -> httpx2.Response:
        async def body() -> AsyncIterator[bytes]:
            yield sse_frame(CREATED)
            yield sse_frame({"type": "response.output_text.delta", "item_id": "m", "delta": "a"})
            await trio.sleep_forever()

        answers.append(httpx2.Response(200, headers=list(SSE_HEADERS), content=body()))
        return answers[-1]

    async with open_client(handle) as client:
        async with client.stream(PROMPT) as events:
            async for event in events:
                assert event == OutputTextDelta("m", "a")
                break
            assert not answers[0].is_closed
        assert answers[0].is_closed


async def test_cancelling_a_stream_closes_the_response(autojump_clock: trio.abc.Clock) -> None:
    answers: list[httpx2.Response] = []

    async def handle(request: httpx2.Request) -> httpx2.Response:
        async def body() -> AsyncIterator[bytes]:
            yield sse_frame(CREATED)
            await trio.sleep_forever()

        answers.append(httpx2.Response(200, headers=list(SSE_HEADERS), content=body()))
        return answers[-1]

    async with open_client(handle) as client:
        with trio.move_on_after(3) as scope:
            await collect(client)
        assert scope.cancelled_caught
        assert answers[0].is_closed


# ----------------------------------------------------------------------------- compaction

COMPACT = CompactRequest(
    model="gpt-test",
    instructions="Be brief.",
    input=(p.user_message("hi"), p.assistant_message("hello")),
    tools=(ToolSpec("sleep", "Sleep.", {"type": "object"}),),
    parallel_tool_calls=True,
    effort="low",
)


async def test_compact_posts_the_request_and_returns_the_body() -> None:
    output = [{"type": "compaction", "encrypted_content": "opaque"}]
    transport = ScriptedTransport(numbered({"compact": [{"output": output}]}))
    async with open_client(transport) as client:
        answer_body = await client.compact(COMPACT)
    assert answer_body == {"output": output}
    [logged] = transport.requests
    assert logged["path"] == "/v1/responses/compact"
    assert logged["headers"]["x-relay-request"] == "compact"
    assert "authorization" not in logged["headers"]
    body = logged["body"]
    assert body == compact_request_body(COMPACT)
    assert body["model"] == "gpt-test"
    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "hello"}],
        },
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "sleep",
            "description": "Sleep.",
            "parameters": {"type": "object"},
            "strict": False,
        }
    ]
    assert body["parallel_tool_calls"] is True
    assert body["reasoning"] == {"effort": "low"}
    assert set(body) == {
        "model",
        "instructions",
        "input",
        "tools",
        "parallel_tool_calls",
        "reasoning",
    }


async def test_compact_without_effort_sends_no_reasoning() -> None:
    request = attrs.evolve(COMPACT, effort=None)
    assert "reasoning" not in compact_request_body(request)


def failing_then(failures: list[Handler], final: Handler) -> tuple[Handler, list[float]]:
    times: list[float] = []
    pending = list(failures)

    async def handle(request: httpx2.Request) -> httpx2.Response:
        times.append(trio.current_time())
        if pending:
            return await pending.pop(0)(request)
        return await final(request)

    return handle, times


async def refuse(request: httpx2.Request) -> httpx2.Response:
    raise httpx2.ConnectError("connection refused", request=request)


async def test_compact_is_one_attempt_and_translates_failures(
    autojump_clock: trio.abc.Clock,
) -> None:
    # Retries belong to the session (TaskContext.remote_compact); the client tries once.
    limited = answer(
        429,
        {"error": {"message": "slow", "code": "rate_limit_exceeded"}},
        [("retry-after-ms", "1500")],
    )
    for handler, expected in [
        (answer(503, "busy"), Expected(ModelError, ErrorCode.SERVER_ERROR, True, None)),
        (refuse, Expected(StreamError, ErrorCode.STREAM, True, None)),
        (
            answer(500, {"error": {"message": "down"}}),
            Expected(ModelError, ErrorCode.SERVER_ERROR, True, "down"),
        ),
    ]:
        handle, times = failing_then([], handler)
        async with open_client(handle) as client:
            with pytest.raises(ModelError) as caught:
                await client.compact(COMPACT)
        check(caught.value, expected)
        assert len(times) == 1
    handle, times = failing_then([], limited)
    async with open_client(handle) as client:
        with pytest.raises(ModelError) as caught:
            await client.compact(COMPACT)
    assert caught.value.retry_after == pytest.approx(1.5)


@pytest.mark.parametrize(
    ("status", "body", "kind", "code"),
    [
        (
            400,
            {"error": {"message": "bad", "code": "invalid_value"}},
            ModelError,
            ErrorCode.BAD_REQUEST,
        ),
        (
            400,
            {"error": {"message": "too long", "code": "context_length_exceeded"}},
            ContextWindowExceeded,
            ErrorCode.CONTEXT_WINDOW_EXCEEDED,
        ),
        (401, {"error": {"message": "who are you"}}, ModelError, ErrorCode.UNAUTHORIZED),
    ],
)
async def test_compact_does_not_retry_what_cannot_succeed(
    status: int, body: Any, kind: type[ModelError], code: ErrorCode
) -> None:
    handle, times = failing_then([], answer(status, body))
    async with open_client(handle) as client:
        with pytest.raises(kind) as caught:
            await client.compact(COMPACT)
    assert caught.value.code is code
    assert len(times) == 1


async def test_compact_returns_malformed_bodies_unchecked() -> None:
    transport = ScriptedTransport(numbered({"compact": [{"raw": {"surprise": [1, 2]}}]}))
    async with open_client(transport) as client:
        assert await client.compact(COMPACT) == {"surprise": [1, 2]}


def test_the_client_satisfies_the_model_client_interface() -> None:
    client: ModelClient = ResponsesClient.__new__(ResponsesClient)
    assert callable(client.stream) and callable(client.compact)


def test_model_script_error_body_round_trips() -> None:
    # The transport answers errors in the same shape the SDK unwraps.
    script = parse_model_script(
        {"responses": [{"http_error": {"status": 400, "code": "c", "message": "m"}}]}
    )
    plan = script.plan({"input": []})
    assert plan.http_error is not None
    assert plan.http_error.body() == {
        "error": {"message": "m", "type": None, "code": "c", "param": None}
    }


# ----------------------------------------------------------------------------- SSE framing

SSE_TEXT = (
    b": keep-alive\r\n"
    b"event: response.created\r\n"
    b'data: {"type": "response.created"}\r\n'
    b"\r\n"
    b"event: multi\n"
    b"data: line one\n"
    b"data:line two\n"
    b"id: 7\n"
    b"retry: 100\n"
    b"\n"
    b"event: no-data\r"
    b"\r"
    b"data: caf\xc3\xa9\r"
    b"\r"
    b"data: cut off at the end"
)

SSE_EVENTS = [
    ServerSentEvent("response.created", '{"type": "response.created"}'),
    ServerSentEvent("multi", "line one\nline two"),
    ServerSentEvent(None, "café"),
]


def test_sse_decoder_reads_every_line_ending() -> None:
    assert SseDecoder().feed(SSE_TEXT) == SSE_EVENTS


@given(st.lists(st.integers(min_value=0, max_value=len(SSE_TEXT)), max_size=12))
def test_sse_decoder_does_not_depend_on_chunking(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(SSE_TEXT)]
    decoder = SseDecoder()
    events: list[ServerSentEvent] = []
    for start, end in itertools.pairwise(bounds):
        events += decoder.feed(SSE_TEXT[start:end])
    assert events == SSE_EVENTS


async def test_the_sse_event_name_stands_in_for_a_missing_type() -> None:
    frames = (
        b'event: response.created\ndata: {"response": {"id": "r"}}\n\n'
        b'event: response.completed\ndata: {"response": {"id": "r"}}\n\n'
    )
    async with open_client(sse(frames)) as client:
        assert await collect(client) == [Completed("r", None)]


async def test_keep_alive_comments_do_not_reset_the_idle_timeout(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def handle(request: httpx2.Request) -> httpx2.Response:
        async def body() -> AsyncIterator[bytes]:
            yield sse_frame(CREATED)
            while True:
                await trio.sleep(10)
                yield b": ping\n\n"

        return httpx2.Response(200, headers=list(SSE_HEADERS), content=body())

    async with open_client(handle) as client:
        start = trio.current_time()
        _, error = await collect_until_error(client)
        assert trio.current_time() - start == pytest.approx(IDLE_MS / 1000)
    assert error.message.startswith("idle timeout")


@pytest.mark.parametrize(
    ("base_url", "proxies", "expected"),
    [
        ("http://127.0.0.1:8080/v1", {}, False),
        ("HTTP://localhost/v1", {"http": "http://proxy:3128"}, False),
        ("https://api.example.com/v1", {}, True),
        ("http://127.0.0.1:8080/v1", {"all": "https://proxy:3128"}, True),
    ],
)
def test_only_a_client_that_may_speak_tls_loads_the_ca_bundle(
    base_url: str, proxies: dict[str, str], expected: bool
) -> None:
    from relay._wire import needs_tls

    assert needs_tls(base_url, proxies) is expected
