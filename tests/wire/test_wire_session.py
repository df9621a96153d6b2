"""Sessions over the real openai SDK: retries, error events and cancellation (docs/session.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._models._mock_transport import scripted_http_client
from relay._testing._mock_server import open_mock_server
from relay._wire import open_http_client
from tests.sessions import sdk_session as shared_sdk_session

PROVIDER = relay.ProviderConfig(
    name="mock", base_url="http://mock.invalid/v1", stream_max_retries=3
)
NO_ROLLOUT = relay.RolloutConfig(enabled=False)


@asynccontextmanager
async def sdk_session(
    script: dict[str, Any], **config: Any
) -> AsyncIterator[tuple[testing.TestSession, list[dict[str, Any]]]]:
    settings = relay.Config(  # type: ignore[arg-type]
        rollout=NO_ROLLOUT, model_provider="mock", model_providers={"mock": PROVIDER}, **config
    )
    async with shared_sdk_session(script, settings) as (t, transport):
        yield t, transport.requests


async def test_retries_with_backoff_then_success(autojump_clock: trio.testing.MockClock) -> None:
    script = {
        "responses": [
            {"http_error": {"status": 503, "message": "busy"}},
            {"http_error": {"status": 500, "message": "oops"}},
            {"text": "finally"},
        ]
    }
    async with sdk_session(script) as (t, requests):
        start = trio.current_time()
        await t.turn("hi")
        await t.wait_for(relay.TurnComplete)
        elapsed = trio.current_time() - start
    errors = t.recorder.of_type(relay.StreamErrorEvent)
    assert [e.message for e in errors] == ["Reconnecting... 1/3", "Reconnecting... 2/3"]
    assert [e.detail for e in errors] == ["busy", "oops"]
    # 200 ms then 400 ms, each with a jitter in [0.9, 1.1).
    assert 0.54 <= elapsed < 0.66
    assert len(requests) == 3
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "finally"


async def test_server_retry_after_is_honoured(autojump_clock: trio.testing.MockClock) -> None:
    script = {
        "responses": [
            {
                "http_error": {
                    "status": 429,
                    "code": "rate_limit_exceeded",
                    "message": "slow down",
                    "retry_after": 7,
                }
            },
            {"text": "ok"},
        ]
    }
    async with sdk_session(script) as (t, _):
        start = trio.current_time()
        await t.turn("hi")
        await t.wait_for(relay.TurnComplete)
        assert trio.current_time() - start == pytest.approx(7.0)


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ({"http_error": {"status": 401, "message": "no"}}, relay.ErrorCode.UNAUTHORIZED),
        (
            {"http_error": {"status": 429, "code": "insufficient_quota", "message": "pay"}},
            relay.ErrorCode.QUOTA_EXCEEDED,
        ),
        (
            {"http_error": {"status": 400, "code": "invalid_request_error", "message": "bad"}},
            relay.ErrorCode.BAD_REQUEST,
        ),
        (
            {"http_error": {"status": 400, "code": "context_length_exceeded", "message": "long"}},
            relay.ErrorCode.CONTEXT_WINDOW_EXCEEDED,
        ),
    ],
)
async def test_errors_that_are_not_retried(
    autojump_clock: trio.testing.MockClock, reply: dict[str, Any], code: relay.ErrorCode
) -> None:
    async with sdk_session({"responses": [reply]}) as (t, requests):
        await t.turn("hi", id="t1")
        await t.wait_for(relay.TurnComplete)
    assert len(requests) == 1
    assert not t.recorder.of_type(relay.StreamErrorEvent)
    assert [e.code for e in t.recorder.of_type(relay.ErrorEvent)] == [code]
    assert t.recorder.types("t1")[-1] == "turn_complete"


@pytest.mark.parametrize(
    "reply",
    [
        {"text": "cut", "cut_after_events": 3},
        {"text": "failed", "stream_error": {"code": "server_error", "message": "bad"}},
    ],
)
async def test_broken_streams_are_retried_until_exhausted(
    autojump_clock: trio.testing.MockClock, reply: dict[str, Any]
) -> None:
    async with sdk_session({"responses": [reply] * 4}) as (t, requests):
        await t.turn("hi", id="t1")
        await t.wait_for(relay.TurnComplete)
    assert len(requests) == 4
    assert [e.message for e in t.recorder.of_type(relay.StreamErrorEvent)] == [
        f"Reconnecting... {n}/3" for n in (1, 2, 3)
    ]
    error = t.recorder.of_type(relay.ErrorEvent)[0]
    assert error.code is relay.ErrorCode.STREAM
    # Every started agent message was completed before the retry (invariant 3).
    started = [
        m.item.id
        for m in t.recorder.msgs
        if isinstance(m, relay.ItemStarted) and isinstance(m.item, relay.AgentMessageItem)
    ]
    completed = [
        m.item.id
        for m in t.recorder.msgs
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.AgentMessageItem)
    ]
    assert started == completed


async def test_idle_stream_times_out_and_is_retried(autojump_clock: trio.testing.MockClock) -> None:
    provider_script = {"responses": [{"text": "stalled", "stall_ms": 60_000}, {"text": "fine"}]}
    http, _ = scripted_http_client(provider_script)
    provider = relay.ProviderConfig(
        name="mock", base_url="http://mock.invalid/v1", stream_idle_timeout_ms=5_000
    )
    async with (
        open_http_client(provider, api_key="k", http_client=http) as client,
        testing.open_test_session(model=client) as t,
    ):  # type: ignore[arg-type]
        start = trio.current_time()
        await t.turn("hi")
        await t.wait_for(relay.StreamErrorEvent)
        assert trio.current_time() - start == pytest.approx(5.0)
        await t.wait_for(relay.TurnComplete)
    assert "idle" in t.recorder.of_type(relay.StreamErrorEvent)[0].detail
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "fine"


async def test_two_turn_session_with_a_tool_call_over_loopback() -> None:
    script = {
        "responses": [
            {
                "function_call": {"name": "list_dir", "arguments": {"path": "."}, "call_id": "c1"},
                "usage": {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120},
            },
            {"text": "listed"},
            {"text": "second"},
        ]
    }
    async with open_mock_server(script) as server:
        provider = relay.ProviderConfig(name="mock", base_url=server.base_url)
        async with (
            open_http_client(provider, api_key="sk-secret-canary") as client,
            testing.open_test_session(model=client) as t,
        ):  # type: ignore[arg-type]
            await t.turn("look", id="t1")
            await t.wait_for(relay.TurnComplete)
            await t.turn("again", id="t2")
            await t.wait_for(relay.TurnComplete, 2)
    logged = server.requests
    assert [entry["path"] for entry in logged] == ["/v1/responses"] * 3
    for entry in logged:
        assert "authorization" not in entry["headers"]
        assert "sk-secret-canary" not in repr(entry)
        body = entry["body"]
        assert body["model"] == "scripted"
        assert body["store"] is False and body["stream"] is True
        assert body["tool_choice"] == "auto" and body["parallel_tool_calls"] is False
        assert body["prompt_cache_key"] == t.session.id
        assert {tool["name"] for tool in body["tools"]} == {"read_file", "list_dir", "sleep"}
        assert body["instructions"] == t.session.instructions
        assert entry["headers"]["x-relay-request"] == "turn"
    _, second, third = (entry["body"]["input"] for entry in logged)
    assert [i["type"] for i in second] == [
        "message",
        "message",
        "function_call",
        "function_call_output",
    ]
    assert second[2] == {
        "type": "function_call",
        "name": "list_dir",
        "arguments": '{"path": "."}',
        "call_id": "c1",
    }
    assert second[3]["call_id"] == "c1"
    assert third[: len(second)] == second
    assert third[-1]["content"][0]["text"] == "again"
    counts = t.recorder.of_type(relay.TokenCount)
    assert counts[0].info.last_token_usage == relay.TokenUsage(
        input_tokens=100, output_tokens=20, total_tokens=120
    )


async def test_cancelling_a_streaming_turn_closes_the_connection() -> None:
    script = {"responses": [{"text": "a very slow answer", "stall_ms": 60_000}]}
    async with open_mock_server(script) as server:
        provider = relay.ProviderConfig(name="mock", base_url=server.base_url)
        async with (
            open_http_client(provider, api_key="k") as client,
            testing.open_test_session(model=client) as t,
        ):  # type: ignore[arg-type]
            await t.turn("go", id="t1")
            await server.wait_requests(1)
            await t.submit(relay.Interrupt())
            await t.wait_for(relay.TurnAborted)
            with trio.fail_after(10):
                await server.wait_disconnects(1)
    assert server.disconnects == 1
    assert t.recorder.types("t1")[-1] == "turn_aborted"
