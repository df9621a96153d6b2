"""The remote compaction backends and backend selection, through a session
(docs/compaction.md): over the embedded scripted model, through the openai SDK on an in-process
transport, and over the loopback mock server."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._wire import open_http_client
from relay.tasks.compaction._history import REMOTE_V2_USER_MESSAGE_BUDGET, TRUNCATED_OUTPUT_NOTE
from relay.testing import turn_ended
from tests.sessions import codex_compacted_history

NO_ROLLOUT = relay.RolloutConfig(enabled=False)
API_KEY = "sk-test-remote-compaction"
TRIGGER = {"type": "compaction_trigger"}


def provider(remote: str, **fields: Any) -> relay.ProviderConfig:
    return relay.ProviderConfig(name="scripted", remote_compaction=remote, **fields)  # type: ignore[arg-type]


def config(
    remote: str = "v1",
    *,
    v2: bool = False,
    token_budget: bool = False,
    provider_fields: dict[str, Any] | None = None,
    **fields: Any,
) -> relay.Config:
    """A provider offering ``remote`` compaction, and compactions that make Codex's history."""
    fields.setdefault("rollout", NO_ROLLOUT)
    return codex_compacted_history(
        relay.Config(
            model_provider="scripted",
            model_providers={"scripted": provider(remote, **(provider_fields or {}))},
            features=relay.Features(token_budget=token_budget, remote_compaction_v2=v2),
            **fields,
        )
    )


def wire(item: relay.ResponseItem) -> dict[str, Any]:
    return relay.lowlevel.encode_response_item(item)


def user(text: str) -> relay.Message:
    return relay.user_message(text)


@attrs.define
class Running:
    """A session under test, its recorder and the transport or scripted model behind it."""

    session: relay.Session
    recorder: testing.EventRecorder

    async def run(self, *ops: relay.Op) -> None:
        """Submit ops one at a time, each after the turn before it ended."""
        done = sum(turn_ended(e) for e in self.recorder.events)
        for op in ops:
            await self.session.submit(op)
            done += 1
            await self.recorder.wait_for(turn_ended, done)

    def turn_msgs(self, turn_id: str) -> list[relay.EventMsg]:
        return [e.msg for e in self.recorder.events if e.id == turn_id]

    def turn_types(self, turn_id: str) -> list[str]:
        return self.recorder.types(turn_id)


def turn(text: str, **fields: Any) -> relay.UserTurn:
    return relay.UserTurn(items=[relay.Text(text)], **fields)


@asynccontextmanager
async def running(session: relay.Session) -> AsyncIterator[Running]:
    recorder = testing.EventRecorder()
    async with anyio.create_task_group() as tg:
        tg.start_soon(recorder.consume, session)
        try:
            yield Running(session, recorder)
        finally:
            with anyio.CancelScope(shield=True):
                if not session.closed:
                    await session.submit(relay.Shutdown())
                await recorder.wait_for(relay.ShutdownComplete)


@asynccontextmanager
async def sdk_session(
    script: dict[str, Any], cfg: relay.Config
) -> AsyncIterator[tuple[Running, testing.ScriptedTransport]]:
    """A session whose model client is the HTTP client over the in-process transport."""
    http, transport = testing.scripted_http_client(script)
    http_provider = attrs.evolve(cfg.provider(), base_url="http://model.test/v1")
    async with (
        open_http_client(http_provider, api_key=API_KEY, http_client=http) as client,
        relay.open_session(
            cfg, model=client, clock=testing.fixed_clock, rng=random.Random(0)
        ) as session,
        running(session) as r,
    ):
        yield r, transport


@asynccontextmanager
async def scripted_session(
    script: dict[str, Any], cfg: relay.Config, **kwargs: Any
) -> AsyncIterator[tuple[Running, testing.ScriptedModel]]:
    model = testing.ScriptedModel(script)
    async with (
        relay.open_session(
            cfg, model=model, clock=testing.fixed_clock, rng=random.Random(0), **kwargs
        ) as session,
        running(session) as r,
    ):
        yield r, model


@asynccontextmanager
async def loopback_session(
    script: dict[str, Any], cfg: relay.Config, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Running, Any]]:
    """A session that opens its own HTTP client to the loopback mock server."""
    monkeypatch.setenv("RELAY_TEST_API_KEY", API_KEY)
    async with testing.open_mock_server(script) as server:
        cfg = attrs.evolve(
            cfg,
            model_providers={
                "scripted": attrs.evolve(
                    cfg.provider(), base_url=server.base_url, env_key="RELAY_TEST_API_KEY"
                )
            },
        )
        async with (
            relay.open_session(cfg, clock=testing.fixed_clock) as session,
            running(session) as r,
        ):
            yield r, server


def compaction_receipt(r: Running, turn_id: str) -> relay.CompactionReceipt:
    completed = [
        m
        for m in r.turn_msgs(turn_id)
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.ContextCompactionItem)
    ]
    assert len(completed) == 1
    receipt = completed[0].item.receipt  # type: ignore[union-attr]
    assert receipt is not None
    return receipt


# ----------------------------------------------------------------------------- remote V1

LISTING = {"function_call": {"name": "list_dir", "arguments": {"path": "."}, "call_id": "call-1"}}

#: A /responses/compact answer with one item of every kind the filter must sort.
V1_OUTPUT = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
    {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "sys"}]},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "<environment_context>\n</environment_context>"}
        ],
    },
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List it."}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
    {"type": "reasoning", "id": "rs-1", "summary": []},
    {"type": "function_call", "name": "list_dir", "arguments": "{}", "call_id": "c9"},
    {"type": "function_call_output", "call_id": "c9", "output": "a.txt"},
    {"type": "compaction", "encrypted_content": "ENC-V1"},
]
V1_KEPT = [relay.lowlevel.decode_response_item(V1_OUTPUT[i]) for i in (3, 4, 8)]


async def test_v1_through_the_sdk_posts_the_history_and_installs_the_filtered_output(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("a")
    script = {"responses": [LISTING, {"text": "Done."}], "compact": [{"output": V1_OUTPUT}]}
    async with sdk_session(script, config("v1", cwd=str(tmp_path))) as (r, transport):
        await r.run(turn("List it."))
        before = list(r.session.history.items)
        await r.session.submit(relay.Compact(), id="c1")
        await r.recorder.wait_for(turn_ended, 2)
        assert list(r.session.history.items) == V1_KEPT
        turn_request = transport.requests[1]["body"]
        await r.run(turn("And now?"))
    paths = [entry["path"] for entry in transport.requests]
    assert paths == ["/v1/responses", "/v1/responses", "/v1/responses/compact", "/v1/responses"]
    compact = transport.requests[2]
    assert compact["headers"]["x-relay-request"] == "compact"
    assert "authorization" not in compact["headers"]
    assert compact["body"] == {
        "model": "scripted",
        "input": [wire(item) for item in before],
        "instructions": turn_request["instructions"],
        "tools": turn_request["tools"],
        "parallel_tool_calls": False,
    }
    assert [type(item).__name__ for item in before] == [
        "Message",
        "Message",
        "FunctionCall",
        "FunctionCallOutput",
        "Message",
    ]
    assert r.turn_types("c1") == [
        "turn_started",
        "item_started",
        "token_count",
        "item_completed",
        "context_compacted",
        "turn_complete",
    ]
    assert compaction_receipt(r, "c1").backend == "remote_v1"
    # Manual compaction clears the reference context: the next turn records it in full.
    follow_up = transport.requests[3]["body"]["input"]
    assert follow_up[:3] == [wire(item) for item in V1_KEPT]
    assert follow_up[3]["content"][0]["text"].startswith("<environment_context>")
    assert follow_up[4] == wire(user("And now?"))


async def test_v1_rollout_has_compacted_with_an_empty_message_and_no_warning(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    script = {"responses": [{"text": "a1"}], "compact": [{"output": V1_OUTPUT}]}
    rollout = relay.RolloutConfig(enabled=True, dir=str(tmp_path))
    async with scripted_session(script, config("v1", rollout=rollout)) as (r, model):
        await r.run(turn("List it."), relay.Compact())
        path = r.session.rollout.path  # type: ignore[union-attr]
    assert len(model.compact_requests) == 1
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    compacted = [line["payload"] for line in lines if line["type"] == "compacted"]
    assert len(compacted) == 1
    assert compacted[0]["message"] == ""
    assert compacted[0]["replacement_history"] == [wire(item) for item in V1_KEPT]
    assert compacted[0]["window_number"] == 1
    assert not r.recorder.of_type(relay.WarningEvent)


async def test_v1_fit_to_window_counts_the_base_instructions(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def big(args: Any, ctx: relay.ToolContext) -> str:
        return "x" * 4000  # ~1,000 tokens

    tool = relay.Tool("big", "A big output.", {"type": "object"}, big)
    # After the second call, usage (1,500 + the second output) reaches the limit of 2,000 and
    # the compaction runs mid-turn, with the history ending in tool outputs.
    script = {
        "responses": [
            {
                "function_call": {"name": "big", "arguments": {}, "call_id": "b1"},
                "total_tokens": 10,
            },
            {
                "function_call": {"name": "big", "arguments": {}, "call_id": "b2"},
                "total_tokens": 1500,
            },
            {"text": "Done.", "total_tokens": 10},
        ]
    }
    sent: dict[int, list[dict[str, Any]]] = {}
    for instruction_tokens in (0, 1000):
        cfg = config(
            "v1",
            base_instructions="i" * (4 * instruction_tokens),
            model_context_window=3000,
            model_auto_compact_token_limit=2000,
            tools={"read_file": False, "list_dir": False, "sleep": False},
        )
        async with scripted_session(script, cfg, tools=[tool]) as (r, model):
            await r.run(turn("Go."))
        (request,) = model.compact_requests
        assert request["instructions"] == "i" * (4 * instruction_tokens)
        sent[instruction_tokens] = request["input"]
    outputs = {
        tokens: [i["output"] for i in items if i["type"] == "function_call_output"]
        for tokens, items in sent.items()
    }
    # The history alone (~2,100 tokens) fits the window of 3,000; with 1,000 tokens of
    # instructions it does not, and the newest output is cut, which is enough.
    assert outputs[0] == ["x" * 4000, "x" * 4000]
    assert outputs[1000] == ["x" * 4000, TRUNCATED_OUTPUT_NOTE]


INVALID_ANSWERS = [
    ({"output": "text"}, "output is not a list (it is a string)"),
    ({"output": {"type": "compaction"}}, "output is not a list (it is an object)"),
    ([1, 2], "the answer is not a JSON object (it is a list)"),
    ({"items": []}, "the answer has no output"),
    ({"output": [{"type": "message", "role": "user"}]}, "output[0] is not a valid item"),
    ({"output": ["text"]}, "output[0] is not a valid item: expected a JSON object, got str"),
]


@pytest.mark.parametrize(("answer", "problem"), INVALID_ANSWERS)
async def test_v1_invalid_answer_is_an_error_and_changes_nothing(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, answer: Any, problem: str
) -> None:
    script = {"responses": [{"text": "a1"}], "compact": [{"raw": answer}]}
    rollout = relay.RolloutConfig(enabled=True, dir=str(tmp_path))
    async with scripted_session(script, config("v1", rollout=rollout)) as (r, model):
        await r.run(turn("hi"))
        before = list(r.session.history.items)
        window = r.session.snapshot().window_number
        await r.run(relay.Compact())
        assert list(r.session.history.items) == before
        assert r.session.snapshot().window_number == window
        path = r.session.rollout.path  # type: ignore[union-attr]
    errors = r.recorder.of_type(relay.ErrorEvent)
    assert len(errors) == 1
    assert errors[0].message.startswith(f"Error running remote compact task: {problem}")
    assert errors[0].code is relay.ErrorCode.SERVER_ERROR
    assert r.turn_types("sub-2") == ["turn_started", "item_started", "error", "turn_complete"]
    assert len(model.requests) == 1
    assert "compacted" not in {json.loads(line)["type"] for line in path.read_text().splitlines()}


async def test_v1_failed_auto_compaction_ends_the_turn_without_sampling_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [{"function_call": {"name": "sleep", "arguments": {"seconds": 0}}}],
        "compact": [{"raw": {"output": "text"}}],
    }
    cfg = config("v1", model_auto_compact_token_limit=1)
    async with scripted_session(script, cfg) as (r, model):
        await r.run(turn("hi"))
    assert len(model.requests) == 1
    assert len(model.compact_requests) == 1
    assert r.turn_types("sub-1")[-2:] == ["error", "turn_complete"]
    assert not r.recorder.of_type(relay.ContextCompacted)


async def test_v1_retries_server_errors_through_the_sdk(
    autojump_clock: trio.testing.MockClock,
) -> None:
    down = {"http_error": {"status": 503, "message": "busy"}}
    script = {"responses": [{"text": "a1"}], "compact": [down, down, {"output": V1_OUTPUT}]}
    async with sdk_session(script, config("v1")) as (r, transport):
        await r.run(turn("List it."), relay.Compact())
        assert list(r.session.history.items) == V1_KEPT
    assert [e["path"] for e in transport.requests].count("/v1/responses/compact") == 3
    assert not r.recorder.of_type(relay.ErrorEvent)


async def test_v1_gives_up_after_request_max_retries(
    autojump_clock: trio.testing.MockClock,
) -> None:
    down = {"http_error": {"status": 500, "message": "down"}}
    script = {"responses": [{"text": "a1"}], "compact": [down] * 5}
    cfg = config("v1", provider_fields={"request_max_retries": 2})
    async with sdk_session(script, cfg) as (r, transport):
        await r.run(turn("hi"))
        before = list(r.session.history.items)
        await r.run(relay.Compact())
        assert list(r.session.history.items) == before
    assert [e["path"] for e in transport.requests].count("/v1/responses/compact") == 3
    (error,) = r.recorder.of_type(relay.ErrorEvent)
    assert error.message == "Error running remote compact task: down"
    assert error.code is relay.ErrorCode.SERVER_ERROR


# ----------------------------------------------------------------------------- remote V2

IMAGE = "data:image/png;base64,AAAA"


async def test_v2_through_the_sdk_streams_the_trigger_and_installs_the_compaction(
    autojump_clock: trio.testing.MockClock,
) -> None:
    compaction = {"type": "compaction", "encrypted_content": "ENC-V2"}
    reply = {"output": [{"type": "reasoning", "id": "rs-1", "summary": []}, compaction]}
    script = {"responses": [{"text": "a1"}, reply]}
    look = relay.UserTurn(items=[relay.Text("Look."), relay.Image(IMAGE)])
    async with sdk_session(script, config("v2", v2=True)) as (r, transport):
        await r.session.submit(look, id="t1")
        await r.recorder.wait_for(turn_ended)
        before = list(r.session.history.items)
        await r.session.submit(relay.Compact(), id="c1")
        await r.recorder.wait_for(turn_ended, 2)
        after = list(r.session.history.items)
    paths = [entry["path"] for entry in transport.requests]
    assert paths == ["/v1/responses", "/v1/responses"]
    request = transport.requests[1]
    assert request["headers"]["x-relay-request"] == "compact"
    body = request["body"]
    assert body["input"] == [*(wire(item) for item in before), TRIGGER]
    assert body["stream"] is True
    assert body["tools"] == transport.requests[0]["body"]["tools"]
    # The real user message of the request input (its image kept), then the compaction item.
    looked = relay.Message("user", (relay.InputText("Look."), relay.InputImage(IMAGE)))
    assert after == [looked, relay.Compaction("ENC-V2")]
    assert r.turn_types("c1") == [
        "turn_started",
        "item_started",
        "token_count",
        "item_completed",
        "context_compacted",
        "turn_complete",
    ]
    assert compaction_receipt(r, "c1").backend == "remote_v2"


async def test_v2_keeps_user_messages_within_the_budget_newest_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    long_text = "y" * (4 * (REMOTE_V2_USER_MESSAGE_BUDGET + 1000))
    script = {"responses": [{"text": "a1"}, {"text": "a2"}, {"compaction": "ENC"}]}
    async with scripted_session(script, config("v2", v2=True)) as (r, model):
        await r.run(turn(long_text), turn("short"), relay.Compact())
        after = list(r.session.history.items)
    assert model.requests[-1]["input"][-1] == TRIGGER
    first, second, last = after
    assert second == user("short") and last == relay.Compaction("ENC")
    text = first.text()  # type: ignore[union-attr]
    assert text.startswith("yyyy") and "tokens truncated" in text
    # "short" costs 2 of the budget; the older message gets the rest, plus the marker.
    marker = len("…1002 tokens truncated…".encode())
    assert len(text.encode()) == 4 * (REMOTE_V2_USER_MESSAGE_BUDGET - 2) + marker


V2_FAILURES = [
    (
        {"text": "no compaction"},
        "expected exactly one compaction item, got 0 compaction items of 1 output item",
    ),
    (
        {
            "output": [
                {"type": "compaction", "encrypted_content": "A"},
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "x"}],
                },
                {"type": "compaction", "encrypted_content": "B"},
            ]
        },
        "expected exactly one compaction item, got 2 compaction items of 3 output items",
    ),
]


@pytest.mark.parametrize(("reply", "problem"), V2_FAILURES)
async def test_v2_needs_exactly_one_compaction_item(
    autojump_clock: trio.testing.MockClock, reply: dict[str, Any], problem: str
) -> None:
    script = {"responses": [{"text": "a1"}, reply]}
    async with scripted_session(script, config("v2", v2=True)) as (r, model):
        await r.run(turn("hi"))
        before = list(r.session.history.items)
        await r.run(relay.Compact())
        assert list(r.session.history.items) == before
    (error,) = r.recorder.of_type(relay.ErrorEvent)
    assert error.message == f"Error running remote compact task: {problem}"
    assert len(model.requests) == 2
    assert r.session.snapshot().window_number == 0


@pytest.mark.parametrize(("stream_max_retries", "retries"), [(5, 2), (1, 1), (0, 0)])
async def test_v2_stream_without_completion_fails_after_at_most_two_retries(
    autojump_clock: trio.testing.MockClock, stream_max_retries: int, retries: int
) -> None:
    # The compaction item arrives, response.completed never does.
    cut = {"compaction": "ENC", "cut_after_events": 3}
    script = {"responses": [{"text": "a1"}] + [cut] * 4}
    cfg = config("v2", v2=True, provider_fields={"stream_max_retries": stream_max_retries})
    async with scripted_session(script, cfg) as (r, model):
        await r.run(turn("hi"))
        before = list(r.session.history.items)
        await r.run(relay.Compact())
        assert list(r.session.history.items) == before
    assert len(model.requests) == 1 + 1 + retries
    reconnects = [e.message for e in r.recorder.of_type(relay.StreamErrorEvent)]
    assert reconnects == [f"Reconnecting... {n}/{retries}" for n in range(1, retries + 1)]
    (error,) = r.recorder.of_type(relay.ErrorEvent)
    assert error.message.startswith("Error running remote compact task: ")
    assert "closed before response.completed" in error.message
    assert error.code is relay.ErrorCode.STREAM


async def test_v2_stream_cut_through_the_sdk_says_the_stream_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cut = {"compaction": "ENC", "cut_after_events": 3}
    script = {"responses": [{"text": "a1"}, cut, cut, cut]}
    async with sdk_session(script, config("v2", v2=True)) as (r, transport):
        await r.run(turn("hi"))
        before = list(r.session.history.items)
        await r.run(relay.Compact())
        assert list(r.session.history.items) == before
    assert len(transport.requests) == 4
    (error,) = r.recorder.of_type(relay.ErrorEvent)
    assert error.message.startswith(
        "Error running remote compact task: stream closed before response.completed: "
    )


# ----------------------------------------------------------------------------- selection


def remote_traffic(requests: list[dict[str, Any]]) -> list[str]:
    """What in a request log reached a remote compaction endpoint."""
    hits = [entry["path"] for entry in requests if entry["path"].endswith("/responses/compact")]
    hits += [
        entry["path"]
        for entry in requests
        if isinstance(entry["body"], dict) and TRIGGER in entry["body"].get("input", [])
    ]
    return hits


async def test_a_v2_provider_with_the_feature_off_uses_v1(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": "a1"}], "compact": [{"output": V1_OUTPUT}]}
    async with sdk_session(script, config("v2", v2=False)) as (r, transport):
        await r.run(turn("hi"), relay.Compact())
        assert list(r.session.history.items) == V1_KEPT
    assert [e["path"] for e in transport.requests] == ["/v1/responses", "/v1/responses/compact"]
    assert compaction_receipt(r, "sub-2").backend == "remote_v1"


@pytest.mark.parametrize("v2", [False, True])
@pytest.mark.parametrize("token_budget", [False, True])
async def test_a_provider_without_remote_compaction_never_reaches_a_remote_endpoint(
    autojump_clock: trio.testing.MockClock, v2: bool, token_budget: bool
) -> None:
    script = {"responses": [{"text": "a1"}, {"text": "summary"}]}
    cfg = config("unsupported", v2=v2, token_budget=token_budget)
    async with sdk_session(script, cfg) as (r, transport):
        await r.run(turn("hi"), relay.Compact())
    assert remote_traffic(transport.requests) == []
    expected = "token_budget" if token_budget else "local"
    assert compaction_receipt(r, "sub-2").backend == expected
    assert len(transport.requests) == (1 if token_budget else 2)


@pytest.mark.parametrize(
    ("remote", "v2", "token_budget", "backend"),
    [
        ("v2", True, True, "token_budget"),
        ("v1", True, True, "token_budget"),
        ("v2", True, False, "remote_v2"),
        ("v1", True, False, "remote_v1"),
    ],
)
async def test_selection_order_through_a_session(
    autojump_clock: trio.testing.MockClock,
    remote: str,
    v2: bool,
    token_budget: bool,
    backend: str,
) -> None:
    script = {"responses": [{"text": "a1"}, {"compaction": "ENC"}]}
    async with scripted_session(script, config(remote, v2=v2, token_budget=token_budget)) as (
        r,
        _,
    ):
        await r.run(turn("hi"), relay.Compact())
    assert compaction_receipt(r, "sub-2").backend == backend


# ----------------------------------------------------------------------------- loopback


async def test_v1_over_the_loopback_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = {"responses": [{"text": "Done."}], "compact": [{"output": V1_OUTPUT}]}
    async with loopback_session(script, config("v1"), monkeypatch) as (r, server):
        await r.run(turn("List it."))
        before = list(r.session.history.items)
        await r.run(relay.Compact())
        assert list(r.session.history.items) == V1_KEPT
    assert [e["path"] for e in server.requests] == ["/v1/responses", "/v1/responses/compact"]
    body = server.requests[1]["body"]
    assert body["input"] == [wire(item) for item in before]
    assert body["instructions"] == r.session.instructions
    assert "authorization" not in server.requests[1]["headers"]


async def test_v2_over_the_loopback_server(monkeypatch: pytest.MonkeyPatch) -> None:
    script = {"responses": [{"text": "a1"}, {"compaction": "ENC-LOOP"}]}
    async with loopback_session(script, config("v2", v2=True), monkeypatch) as (r, server):
        await r.run(turn("Remember this."))
        before = list(r.session.history.items)
        await r.run(relay.Compact())
        assert list(r.session.history.items) == [
            user("Remember this."),
            relay.Compaction("ENC-LOOP"),
        ]
    assert [e["path"] for e in server.requests] == ["/v1/responses", "/v1/responses"]
    assert server.requests[1]["body"]["input"] == [*(wire(i) for i in before), TRIGGER]


# ----------------------------------------------------------------------------- V1 retries


async def test_v1_retry_waits_follow_the_jittered_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [{"text": "Done."}],
        "compact": [
            {"http_error": {"status": 503, "message": "busy"}},
            {"http_error": {"status": 500, "message": "down"}},
            {"output": V1_OUTPUT},
        ],
    }
    async with sdk_session(script, config("v1")) as (r, transport):
        await r.run(turn("List it."))
        start = trio.current_time()
        await r.run(relay.Compact())
        elapsed = trio.current_time() - start
    posts = [e for e in transport.requests if e["path"].endswith("/responses/compact")]
    assert len(posts) == 3
    assert 0.54 <= elapsed < 0.66  # 200 ms then 400 ms, each jittered by [0.9, 1.1)
    assert list(r.session.history.items)[-1] == relay.Compaction("ENC-V1")


async def test_v1_honours_retry_after_and_does_not_retry_auth(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limited = {
        "http_error": {
            "status": 429,
            "code": "rate_limit_exceeded",
            "message": "slow",
            "retry_after": 3,
        }
    }
    auth = {"http_error": {"status": 401, "message": "who"}}
    script = {"responses": [{"text": "ok"}], "compact": [limited, {"output": V1_OUTPUT}, auth]}
    async with scripted_session(script, config("v1")) as (r, model):
        await r.run(turn("hi"))
        start = trio.current_time()
        await r.run(relay.Compact())
        assert trio.current_time() - start == pytest.approx(3.0)
        await r.run(relay.Compact())
    assert len(model.compact_requests) == 3
    errors = [m for m in r.recorder.msgs if isinstance(m, relay.ErrorEvent)]
    assert [e.code for e in errors] == [relay.ErrorCode.UNAUTHORIZED]
