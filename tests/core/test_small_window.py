"""A small window and a small model, as llama-server serves them (``tests/runtime/captured.py``):
answer limits, cut answers, overflows only the server can count, slow prompt reading."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._base._tokens import (
    MAX_TOKEN_RATIO,
    approx_tokens,
    calibrated,
    items_tokens,
    token_ratio,
    tools_tokens,
)
from relay._core._budget import answer_room, auto_compact_limit
from relay._wire import open_http_client
from relay.tasks.compaction._history import kept_message_budget
from tests.core.captured import (
    Answer,
    CapturedServer,
    chat_answer,
    overflow_answer,
    responses_answer,
)
from tests.reliability._raw_server import RawAnswer, open_raw_server
from tests.sessions import codex_compacted_history

WIRES = ("chat", "responses")
WINDOW = 2048


def provider(wire: str, **fields: Any) -> relay.ProviderConfig:
    table: dict[str, Any] = {
        "name": "llama",
        "base_url": "http://llama.invalid/v1",
        "wire_api": wire,
        "stream_max_retries": 3,
        **fields,
    }
    return relay.ProviderConfig(**table)


def answer(wire: str, pieces: Sequence[str], *, prompt_tokens: int = 149, **kw: Any) -> Answer:
    if wire == "chat":
        return chat_answer(
            pieces, finish=kw.pop("finish", "stop"), prompt_tokens=prompt_tokens, **kw
        )
    kw.pop("finish", None)
    return responses_answer(pieces, prompt_tokens=prompt_tokens, **kw)


@asynccontextmanager
async def llama_session(
    wire: str,
    answers: Sequence[Any],
    *,
    provider_fields: dict[str, Any] | None = None,
    codex_history: bool = False,
    **config: Any,
) -> AsyncIterator[tuple[testing.TestSession, CapturedServer]]:
    server = CapturedServer(answers)
    table = provider(wire, **(provider_fields or {}))
    settings: dict[str, Any] = {
        "model": "smollm2",
        "model_provider": "llama",
        "model_providers": {"llama": table},
        "model_context_window": WINDOW,
        "rollout": relay.RolloutConfig(enabled=False),
        **config,
    }
    session_config = relay.Config(**settings)
    if codex_history:
        session_config = codex_compacted_history(session_config)
    async with (
        httpx2.AsyncClient(transport=server) as http,
        open_http_client(table, api_key=None, http_client=http) as client,
        testing.open_test_session(model=client, config=session_config) as t,  # type: ignore[arg-type]
    ):
        yield t, server


def limit_in(wire: str, body: dict[str, Any]) -> Any:
    return body.get("max_tokens" if wire == "chat" else "max_output_tokens")


# -- an answer limit


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ({}, None),
        ({"model_max_output_tokens": 64}, 64),
        ({"provider_fields": {"max_output_tokens": 32}}, 32),
        ({"model_max_output_tokens": 64, "provider_fields": {"max_output_tokens": 32}}, 32),
    ],
)
async def test_the_answer_limit_is_sent_on_both_wires(
    wire: str, where: dict[str, Any], expected: int | None, autojump_clock: trio.abc.Clock
) -> None:
    async with llama_session(wire, [answer(wire, ["Paris", "."])], **where) as (t, server):
        await t.turn("What is the capital of France?")
        await t.wait_for(relay.TurnComplete)
    (body,) = server.bodies
    assert limit_in(wire, body) == expected
    other = "max_output_tokens" if wire == "chat" else "max_tokens"
    assert other not in body
    if expected is None:
        assert "max_completion_tokens" not in body


def test_the_answer_limit_is_kept_free_when_fitting_the_window() -> None:
    limit = auto_compact_limit
    assert limit(None, 2048) == 1843
    assert limit(None, 2048, reserved_output=512) == 1536
    assert limit(None, 272_000, reserved_output=512) == 244_800
    assert limit(1000, 2048, reserved_output=512) == 1000
    assert limit(None, None, reserved_output=512) is None


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (["model_max_output_tokens=0"], "model_max_output_tokens must be positive"),
        (
            ['model_providers.l.base_url="http://x/v1"', "model_providers.l.max_output_tokens=-1"],
            "model_providers.l.max_output_tokens must be positive",
        ),
    ],
)
def test_a_bad_answer_limit_is_refused(overrides: list[str], says: str) -> None:
    with pytest.raises(relay.ConfigError, match=says):
        relay.load_config(overrides=overrides)


# -- a cut answer

COUNTING = [f"{n}\n" for n in range(1, 9)]


def kinds(t: testing.TestSession) -> list[str]:
    return [
        type(e.msg).__name__
        for e in t.recorder.events
        if not isinstance(e.msg, relay.AgentMessageDelta | relay.ItemStarted | relay.ItemCompleted)
    ]


@pytest.mark.parametrize(
    ("wire", "config"),
    [
        # llama-server's own -n cut it: chat says "length".
        ("chat", {}),
        ("chat", {"model_max_output_tokens": 8}),
        # llama-server says "completed": the cut shows only as the whole limit used.
        ("responses", {"model_max_output_tokens": 8}),
    ],
)
async def test_a_cut_answer_is_recorded_with_a_warning_and_not_retried(
    wire: str, config: dict[str, Any], autojump_clock: trio.abc.Clock
) -> None:
    cut = answer(wire, COUNTING, finish="length", prompt_tokens=45)
    async with llama_session(wire, [cut, answer(wire, ["Fine."])], **config) as (t, server):
        await t.turn("Count from 1 to 300, one number per line.")
        await t.wait_for(relay.TurnComplete)
        await t.turn("Thanks")
        await t.wait_for(relay.TurnComplete, 2)
    assert len(server.bodies) == 2
    first = kinds(t)[: kinds(t).index("TurnComplete") + 1]
    assert first == [
        "SessionConfigured",
        "TurnStarted",
        "UserMessage",
        "AgentMessage",
        "TokenCount",
        "WorkStateNoted",
        "WarningEvent",
        "TurnComplete",
    ]
    (warning,) = t.recorder.of_type(relay.WarningEvent)
    assert "cut off" in warning.message
    text = "".join(COUNTING)
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == text
    assert t.recorder.of_type(relay.TokenCount)[0].info.last_token_usage.output_tokens == 8  # type: ignore[union-attr]
    # The cut answer is in the history the next request carries.
    sent = json.dumps(server.bodies[1])
    assert json.dumps(text)[1:-1] in sent


async def test_a_response_incomplete_at_the_limit_keeps_what_streamed(
    autojump_clock: trio.abc.Clock,
) -> None:
    # The Responses API's own form: deltas, then response.incomplete without the item.
    def incomplete(body: dict[str, Any]) -> Answer:
        del body
        frames = [
            b"event: response.created\n"
            b'data: {"type":"response.created","response":{"id":"r1"}}\n\n',
            b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
            b'"item_id":"m1","delta":"The first half"}\n\n',
            b'event: response.incomplete\ndata: {"type":"response.incomplete","response":{"id":'
            b'"r1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},'
            b'"usage":{"input_tokens":40,"output_tokens":16,"total_tokens":56}}}\n\n',
        ]
        return Answer(200, (("content-type", "text/event-stream"),), tuple(frames))

    async with llama_session("responses", [incomplete]) as (t, server):
        await t.turn("Write a long story.")
        await t.wait_for(relay.TurnComplete)
    assert len(server.bodies) == 1
    assert not t.recorder.of_type(relay.StreamErrorEvent)
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "The first half"
    assert t.session.history.items[-1] == relay.assistant_message("The first half", id="m1")
    (warning,) = t.recorder.of_type(relay.WarningEvent)
    assert "answer limit" in warning.message


async def test_the_tool_calls_of_a_cut_answer_are_not_run(autojump_clock: trio.abc.Clock) -> None:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m"}

    def frame(choice: dict[str, Any]) -> bytes:
        return f"data: {json.dumps({'choices': [choice], **base})}\n\n".encode()

    call = {"index": 0, "id": "call-1", "function": {"name": "shell", "arguments": '{"comm'}}
    frames = (
        frame({"index": 0, "delta": {"content": "Running it"}, "finish_reason": None}),
        frame({"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}),
        frame({"index": 0, "delta": {}, "finish_reason": "length"}),
        b"data: [DONE]\n\n",
    )
    cut = Answer(200, (("content-type", "text/event-stream"),), frames)
    async with llama_session("chat", [cut]) as (t, server):
        await t.turn("List the files")
        await t.wait_for(relay.TurnComplete)
    assert len(server.bodies) == 1
    assert not [
        e for e in t.recorder.of_type(relay.ItemStarted) if isinstance(e.item, relay.ToolCallItem)
    ]
    assert not any(isinstance(item, relay.FunctionCall) for item in t.session.history.items)
    assert t.session.history.items[-1] == relay.assistant_message("Running it", id="chatcmpl-1")


@pytest.mark.parametrize("wire", WIRES)
async def test_a_window_that_fills_up_during_the_answer_is_a_context_window_error(
    wire: str, autojump_clock: trio.abc.Clock
) -> None:
    # The prompt fitted (2,015 of 2,048 tokens); the server stopped when the window was full.
    pieces = ["1"] * 33
    full = answer(wire, pieces, finish="length", prompt_tokens=WINDOW - 33)
    async with llama_session(wire, [full]) as (t, server):
        await t.turn("Repeat these digits: 0123456789")
        await t.wait_for(relay.TurnComplete)
    assert len(server.bodies) == 1
    assert not t.recorder.of_type(relay.StreamErrorEvent)
    assert not t.recorder.of_type(relay.WarningEvent)
    (error,) = t.recorder.of_type(relay.ErrorEvent)
    assert error.code is relay.ErrorCode.CONTEXT_WINDOW_EXCEEDED
    ended = kinds(t)[: kinds(t).index("TurnComplete") + 1]
    assert ended[-3:] == ["TokenCount", "ErrorEvent", "TurnComplete"]
    # What arrived is kept.
    assert t.session.history.items[-1].text() == "1" * 33  # type: ignore[union-attr]


async def test_a_cut_summary_is_installed_and_said_so(autojump_clock: trio.abc.Clock) -> None:
    wire = "chat"
    first = answer(wire, ["Paris", "."])
    summary = answer(wire, ["We", " talked", " about"], finish="length")
    async with llama_session(wire, [first, summary], model_max_output_tokens=3) as (t, _):
        await t.turn("What is the capital of France?")
        await t.wait_for(relay.TurnComplete)
        await t.session.submit(relay.Compact(), id="c1")
        await t.wait_for(relay.TurnComplete, 2)
    (done,) = [
        e for e in t.recorder.of_type(relay.ItemCompleted)
        if isinstance(e.item, relay.ContextCompactionItem)
    ]  # fmt: skip
    assert done.item.receipt is not None and done.item.receipt.cut  # type: ignore[union-attr]
    warnings = [w.message for w in t.recorder.of_type(relay.WarningEvent)]
    assert any("summary was cut off" in w for w in warnings)
    assert t.session.history.items[-1].text().endswith("We talked about")  # type: ignore[union-attr]


# -- an overflow only the server can count


def digits(count: int) -> str:
    """``count`` digits: a token each to llama-server, a quarter of that to relay's estimate."""
    return "".join(str(n % 10) for n in range(count))


def overflow_raw() -> RawAnswer:
    refused = overflow_answer(3102, WINDOW)
    return RawAnswer(refused.chunks, refused.status, refused.headers)


@pytest.mark.parametrize("wire", WIRES)
async def test_after_an_overflow_the_next_turn_compacts_first(wire: str) -> None:
    script = {"responses": [{"text": "The user sent digits."}, {"text": "Paris."}]}
    async with open_raw_server(script, {1: overflow_raw()}) as server:
        assert server.base_url is not None
        table = provider(wire, base_url=server.base_url)
        config = relay.Config(
            model="smollm2",
            model_provider="llama",
            model_providers={"llama": table},
            model_context_window=WINDOW,
            rollout=relay.RolloutConfig(enabled=False),
        )
        async with (
            open_http_client(table, api_key=None) as client,
            testing.open_test_session(model=client, config=config) as t,  # type: ignore[arg-type]
        ):
            await t.session.submit(relay.UserTurn(items=[relay.Text(digits(3072))]), id="t1")
            with trio.fail_after(30):
                await t.wait_for(lambda e: e.id == "t1" and testing.turn_ended(e))
            refused = len(server.requests)
            await t.session.submit(
                relay.UserTurn(items=[relay.Text("Capital of France?")]), id="t2"
            )
            with trio.fail_after(30):
                await t.wait_for(lambda e: e.id == "t2" and testing.turn_ended(e))
    # One request, refused before any event; not retried.
    assert refused == 1
    first = [e.msg for e in t.recorder.events if e.id == "t1"]
    assert not [m for m in first if isinstance(m, relay.StreamErrorEvent)]
    (error,) = [m for m in first if isinstance(m, relay.ErrorEvent)]
    assert error.code is relay.ErrorCode.CONTEXT_WINDOW_EXCEEDED
    assert "3102" in error.message and "compacted before your next message" in error.message
    (shown,) = [m.info for m in first if isinstance(m, relay.TokenCount)]
    assert shown is not None and shown.last_token_usage.total_tokens == WINDOW
    second = [e.msg for e in t.recorder.events if e.id == "t2"]
    receipts = [
        m.item.receipt
        for m in second
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.ContextCompactionItem)
    ]
    assert [r.trigger for r in receipts if r] == [relay.CompactionTrigger.PRE_TURN]
    assert not [m for m in second if isinstance(m, relay.ErrorEvent)]
    assert [m.last_agent_message for m in second if isinstance(m, relay.TurnComplete)] == ["Paris."]


# -- token figures: the server's counts, and estimates that say so


def receipts(t: testing.TestSession) -> list[relay.CompactionReceipt]:
    return [
        e.item.receipt
        for e in t.recorder.of_type(relay.ItemCompleted)
        if isinstance(e.item, relay.ContextCompactionItem) and e.item.receipt is not None
    ]


@pytest.mark.parametrize("wire", WIRES)
async def test_a_compaction_starts_from_the_servers_own_count(
    wire: str, autojump_clock: trio.abc.Clock
) -> None:
    # 149 prompt tokens: relay's first turn through llama-server's chat template.
    first = answer(wire, ["Paris", "."], prompt_tokens=149)
    summary = answer(wire, ["The", " user", " asked", " about", " France", "."])
    async with llama_session(wire, [first, summary]) as (t, _):
        await t.turn("What is the capital of France?")
        await t.wait_for(relay.TurnComplete)
        await t.session.submit(relay.Compact(), id="c1")
        await t.wait_for(relay.TurnComplete, 2)
    (receipt,) = receipts(t)
    assert (receipt.tokens_before, receipt.counted_before) == (151, True)
    # After: an estimate, and the token_count that follows the compaction says it is one.
    shown = [m.info for m in t.recorder.of_type(relay.TokenCount) if m.info is not None]
    assert [info.estimated for info in shown] == [False, True]
    assert shown[-1].last_token_usage.total_tokens == receipt.tokens_after


def test_estimates_are_scaled_by_the_servers_last_count() -> None:
    # 3,072 digits: 768 tokens to the estimate, 3,102 to llama-server with its template.
    assert token_ratio(3102, 800) == pytest.approx(3.8775)
    assert calibrated(100, 3.8775) == 388
    # An estimate is only ever scaled up, and not without bound.
    assert token_ratio(50, 100) == 1.0
    assert calibrated(100, 1.0) == 100
    assert token_ratio(100_000, 10) == MAX_TOKEN_RATIO
    assert token_ratio(0, 10) is None and token_ratio(10, 0) is None


@pytest.mark.parametrize("wire", WIRES)
async def test_after_an_overflow_estimates_use_the_servers_count(
    wire: str, autojump_clock: trio.abc.Clock
) -> None:
    summary = answer(wire, ["Digits", "."])
    refused = overflow_answer(3102, WINDOW)
    async with llama_session(wire, [refused, summary]) as (t, _):
        await t.turn(digits(3072))
        await t.wait_for(relay.TurnComplete)
        ratio = t.session.snapshot().token_ratio
        await t.session.submit(relay.Compact(), id="c1")
        await t.wait_for(relay.TurnComplete, 2)
    # The server counted about three times the estimate of what it was sent.
    assert 2.5 < ratio < 4.0
    (receipt,) = receipts(t)
    assert (receipt.tokens_before, receipt.counted_before) == (3102, True)
    # The kept digits and the summary, scaled like the server counts them.
    assert receipt.tokens_after == calibrated(
        items_tokens(t.session.history)
        + approx_tokens(t.session.instructions)
        + tools_tokens(t.session.tools.specs()),
        ratio,
    )


# -- a compaction that fits the window


def test_kept_messages_are_budgeted_within_the_window() -> None:
    # Codex's figures stand where the window has room for them.
    assert kept_message_budget(20_000, None) == 20_000
    assert kept_message_budget(20_000, 200_000) == 20_000
    assert kept_message_budget(64_000, 200_000) == 64_000
    # A small window keeps what is left of it, in estimate units.
    assert kept_message_budget(20_000, 1_200) == 1_200
    assert kept_message_budget(20_000, 1_200, 3.0) == 400
    assert kept_message_budget(20_000, -50, 3.0) == 0
    # Room for an answer: the answer limit, else a quarter of the window up to 8,192 tokens.
    assert answer_room(2048, None) == 512
    assert answer_room(272_000, None) == 8_192
    assert answer_room(2048, 100) == 100


@pytest.mark.parametrize("wire", WIRES)
async def test_a_compaction_fits_a_small_window(wire: str, autojump_clock: trio.abc.Clock) -> None:
    # A 10 KB message in a 2,048-token window: the server refuses the turn and the first two
    # summarization requests, then summarises the prompt alone. Codex's compacted history: the
    # work-state record's room, a tenth of the window, would leave none for the message.
    answers = [
        overflow_answer(10_270, WINDOW),
        overflow_answer(10_420, WINDOW),
        overflow_answer(10_380, WINDOW),
        answer(wire, ["The", " user", " sent", " digits", "."], prompt_tokens=180),
        answer(wire, ["Paris", "."], prompt_tokens=900),
    ]
    # The room left for the message is a few tokens: the environment context (the cwd) is
    # pinned, so that where the tests run does not change it.
    pinned = {"cwd": "/tmp"}
    async with llama_session(wire, answers, codex_history=True, **pinned) as (t, server):
        await t.turn("Repeat these digits: " + digits(10_240))
        await t.wait_for(relay.TurnComplete)
        await t.session.submit(relay.Compact(), id="c1")
        await t.wait_for(relay.TurnComplete, 2)
        await t.turn("What is the capital of France?")
        await t.wait_for(relay.TurnComplete, 3)
    (receipt,) = receipts(t)
    assert receipt.tokens_after < WINDOW
    assert t.recorder.of_type(relay.ContextCompacted)
    # The message was cut to fit, not kept whole.
    kept = [i for i in t.session.history.items if "tokens truncated" in i.text()]  # type: ignore[union-attr]
    (message,) = kept
    assert message.text().startswith("Repeat these digits")  # type: ignore[union-attr]
    assert len(message.text()) < 2_000  # type: ignore[union-attr]
    # The next turn went out once, without compacting again, and was answered.
    assert len(server.bodies) == 5
    assert [m.last_agent_message for m in t.recorder.of_type(relay.TurnComplete)][-1] == "Paris."
    assert len(t.recorder.of_type(relay.ErrorEvent)) == 1


async def test_a_compaction_that_cannot_fit_the_window_says_so(
    autojump_clock: trio.abc.Clock,
) -> None:
    # Instructions alone longer than the window: no compaction can help.
    answers = [overflow_answer(2_400, WINDOW), answer("chat", ["Summary", "."])]
    config = {"base_instructions": "Answer in full sentences. " * 340}
    async with llama_session("chat", answers, **config) as (t, _):
        await t.turn("hi")
        await t.wait_for(relay.TurnComplete)
        before = list(t.session.history.items)
        await t.session.submit(relay.Compact(), id="c1")
        await t.wait_for(relay.TurnComplete, 2)
    assert not t.recorder.of_type(relay.ContextCompacted)
    assert not receipts(t)
    errors = [e for e in t.recorder.events if e.id == "c1" and isinstance(e.msg, relay.ErrorEvent)]
    (error,) = [e.msg for e in errors]
    assert error.code is relay.ErrorCode.CONTEXT_WINDOW_EXCEEDED
    assert "still does not fit the model's context window (2048 tokens)" in error.message
    assert "Nothing was changed" in error.message
    assert list(t.session.history.items) == before


# -- a server that reads the prompt before its first event


@pytest.mark.parametrize("wire", WIRES)
async def test_the_idle_timeout_does_not_cover_reading_the_prompt(
    wire: str, autojump_clock: trio.abc.Clock
) -> None:
    # Headers at once, then 40 s of silence while an 8k prompt is read: the idle timeout of
    # 5 s is for the gaps between events, not for this.
    slow = answer(wire, ["Paris", "."], prompt_tokens=8000, prompt_s=40.0)
    fields = {"stream_idle_timeout_ms": 5_000}
    async with llama_session(wire, [slow], provider_fields=fields) as (t, server):
        start = trio.current_time()
        await t.turn("What is the capital of France?")
        await t.wait_for(relay.TurnComplete)
        elapsed = trio.current_time() - start
    assert len(server.bodies) == 1
    assert not t.recorder.of_type(relay.StreamErrorEvent)
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "Paris."
    assert elapsed == pytest.approx(40.0)


@pytest.mark.parametrize("wire", WIRES)
async def test_a_first_event_past_its_timeout_is_retried(
    wire: str, autojump_clock: trio.abc.Clock
) -> None:
    too_slow = answer(wire, ["late"], prompt_s=200.0)
    fine = answer(wire, ["Paris", "."])
    fields = {"stream_first_event_timeout_ms": 120_000, "stream_idle_timeout_ms": 5_000}
    async with llama_session(wire, [too_slow, fine], provider_fields=fields) as (t, server):
        start = trio.current_time()
        await t.turn("What is the capital of France?")
        await t.wait_for(relay.StreamErrorEvent)
        waited = trio.current_time() - start
        await t.wait_for(relay.TurnComplete)
    assert waited == pytest.approx(120.0)
    (retry,) = t.recorder.of_type(relay.StreamErrorEvent)
    assert retry.detail == (
        "first-event timeout: no event from the model server within 120000 ms of the request"
    )
    assert len(server.bodies) == 2
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "Paris."


def test_the_default_timeouts_suit_a_local_server() -> None:
    table = relay.ProviderConfig(name="local")
    # llama-server read an 8k prompt in 35 to 180 s on a loaded two-core machine.
    assert table.stream_first_event_timeout_ms == 600_000
    assert table.stream_idle_timeout_ms == 300_000
    with pytest.raises(relay.ConfigError, match="stream_first_event_timeout_ms must be positive"):
        relay.load_config(
            overrides=[
                'model_providers.l.base_url="http://x/v1"',
                "model_providers.l.stream_first_event_timeout_ms=0",
            ]
        )
