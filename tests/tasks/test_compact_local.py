"""The compaction task with the local backend, through a session (docs/compaction.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import trio
import trio.testing

import relay
from relay import testing
from relay._base._tokens import approx_tokens, calibrated, items_tokens, tools_tokens
from relay._core._summary import summary_prefix
from tests.sessions import codex_compacted_history

NO_ROLLOUT = relay.RolloutConfig(enabled=False)


def texts(body: dict[str, Any]) -> list[str]:
    return [
        part["text"]
        for item in body["input"]
        if item["type"] == "message"
        for part in item["content"]
        if "text" in part
    ]


async def run_ops(t: testing.TestSession, *ops: tuple[str, Any]) -> None:
    """Run turns and compactions one after the other."""
    done = sum(isinstance(m, relay.TurnComplete | relay.TurnAborted) for m in t.recorder.msgs)
    for kind, arg in ops:
        if kind == "turn":
            await t.turn(arg)
        else:
            await t.submit(relay.Compact(instructions=arg))
        done += 1
        await t.wait_for(testing.turn_ended, done)


async def test_manual_compact_emits_context_compaction_items(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": "a1"}, {"text": "the summary"}]}
    async with testing.open_test_session(script) as t:
        await run_ops(t, ("turn", "hello"), ("compact", None))
    c1 = [e.msg for e in t.recorder.events if e.id == "sub-2"]
    assert [relay.lowlevel.to_json(m)["type"] for m in c1] == [
        "turn_started",
        "item_started",
        "token_count",
        "item_completed",
        "context_compacted",
        "warning",
        "turn_complete",
    ]
    started, completed = c1[1], c1[3]
    assert isinstance(started, relay.ItemStarted) and isinstance(completed, relay.ItemCompleted)
    assert started.item.id == completed.item.id
    assert started.item == relay.ContextCompactionItem(started.item.id)
    receipt = completed.item.receipt
    assert receipt is not None
    assert (receipt.trigger, receipt.backend) == (relay.CompactionTrigger.MANUAL, "local")
    # A request over the new history (instructions and tools count too), scaled by the
    # model's count of the first turn's request.
    assert receipt.tokens_after == calibrated(
        items_tokens(t.session.history.items)
        + approx_tokens(t.session.instructions)
        + tools_tokens(t.session.tools.specs()),
        t.session.snapshot().token_ratio,
    )
    assert receipt.counted_before
    assert receipt.tokens_before > 0
    assert "less accurate" in c1[5].message


async def test_compaction_request_and_follow_up_shape(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = codex_compacted_history(
        relay.Config(developer_instructions="Be terse.", rollout=NO_ROLLOUT)
    )
    script = {"responses": [{"text": "a1"}, {"text": "SUMMARY"}, {"text": "a2"}]}
    async with testing.open_test_session(script, config=config) as t:
        await run_ops(t, ("turn", "first"), ("compact", None), ("turn", "second"))
    turn1, compact, turn2 = t.model.requests
    # The compaction request: the whole history + the prompt as the last user message, same
    # instructions as a normal turn, no tools.
    answer = compact["input"][-2]
    assert re.fullmatch(r"resp-[0-9a-f]{8}-1-msg-0", answer["id"])
    assert compact["input"][:-1] == turn1["input"] + [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "a1"}],
            "id": answer["id"],
        }
    ]
    assert compact["input"][-1]["content"][0]["text"] == relay.lowlevel.compaction_prompt(config)
    assert compact["instructions"] == turn1["instructions"]
    assert compact["tools"] == [] and turn1["tools"] != []
    assert t.model.prompts[1].purpose == "compact"
    # The follow-up: kept user messages, the summary, the re-recorded initial context, the new
    # message; never the prompt or an assistant message from before the compaction.
    roles = [(i["role"], i["content"][0]["text"].split("\n")[0]) for i in turn2["input"]]
    assert roles == [
        ("user", "first"),
        ("user", summary_prefix().split("\n")[0]),
        ("developer", "Be terse."),
        ("user", "<environment_context>"),
        ("user", "second"),
    ]
    assert turn2["input"][1]["content"][0]["text"] == relay.lowlevel.summary_text("SUMMARY")
    assert relay.lowlevel.compaction_prompt(config) not in texts(turn2)
    assert "a1" not in texts(turn2)


async def test_manual_compact_uses_custom_prompt(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    default = relay.lowlevel.compaction_prompt(relay.Config())
    prompt_file = tmp_path / "prompt.md"
    prompt_file.write_text("Prompt from a file.")
    cases = [
        (relay.Config(compact_prompt="Custom words.", rollout=NO_ROLLOUT), "Custom words."),
        (relay.Config(compact_prompt="  ", rollout=NO_ROLLOUT), default),
        (
            relay.Config(experimental_compact_prompt_file=str(prompt_file), rollout=NO_ROLLOUT),
            "Prompt from a file.",
        ),
    ]
    for config, expected in cases:
        async with testing.open_test_session(config=config) as t:
            await run_ops(t, ("turn", "hi"), ("compact", None))
        last = t.model.requests[1]["input"][-1]["content"][0]["text"]
        assert last == expected
        if expected != default:
            assert default not in texts(t.model.requests[1])


async def test_compact_instructions_are_appended(autojump_clock: trio.testing.MockClock) -> None:
    async with testing.open_test_session() as t:
        await run_ops(t, ("turn", "hi"), ("compact", "Keep the file names."))
    last = t.model.requests[1]["input"][-1]["content"][0]["text"]
    assert last == relay.lowlevel.compaction_prompt(relay.Config()) + "\n\nKeep the file names."


async def test_manual_compact_retries_after_context_window_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    too_long = {
        "http_error": {"status": 400, "code": "context_length_exceeded", "message": "too long"}
    }
    script = {"responses": [{"text": "a1"}, {"text": "a2"}, too_long, {"text": "SUMMARY"}]}
    async with testing.open_test_session(script) as t:
        await run_ops(t, ("turn", "first"), ("turn", "second"), ("compact", None))
    failed, retried = t.model.requests[2], t.model.requests[3]
    assert len(retried["input"]) == len(failed["input"]) - 1
    assert retried["input"][0] != failed["input"][0]
    assert retried["input"] == failed["input"][1:]
    tail = [relay.lowlevel.to_json(m)["type"] for m in t.recorder.msgs][-6:]
    assert tail == [
        "token_count",
        "item_completed",
        "context_compacted",
        "warning",
        "turn_complete",
        "shutdown_complete",
    ]
    notices = t.recorder.of_type(relay.BackgroundEvent)
    assert len(notices) == 1 and notices[0].message.startswith("Trimmed 1 older item ")
    assert not t.recorder.of_type(relay.ErrorEvent)


async def test_compact_fails_when_even_the_prompt_alone_does_not_fit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    too_long = {"http_error": {"status": 400, "code": "context_length_exceeded"}}
    config = relay.Config(model_context_window=5000, rollout=NO_ROLLOUT)
    async with testing.open_test_session({"responses": [too_long] * 10}, config=config) as t:
        await run_ops(t, ("compact", None))
    assert [len(r["input"]) for r in t.model.requests] == [1]
    types = t.recorder.types("sub-1")
    assert types == ["turn_started", "item_started", "token_count", "error", "turn_complete"]
    assert t.recorder.of_type(relay.TokenCount)[0].info.last_token_usage.total_tokens == 5000
    assert t.recorder.of_type(relay.ErrorEvent)[0].code is (relay.ErrorCode.CONTEXT_WINDOW_EXCEEDED)


async def test_failed_compaction_changes_nothing(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    config = relay.Config(rollout=relay.RolloutConfig(dir=str(tmp_path)))
    failure = {"http_error": {"status": 500, "message": "down"}}
    script = {"responses": [{"text": "a1"}] + [failure] * 6}
    async with testing.open_test_session(script, config=config) as t:
        await run_ops(t, ("turn", "first"))
        history = list(t.session.history.items)
        windows = (
            t.session.snapshot().window_number,
            t.session.snapshot().window_id,
            t.session.snapshot().first_window_id,
        )
        await run_ops(t, ("compact", None))
        assert list(t.session.history.items) == history
        assert (
            t.session.snapshot().window_number,
            t.session.snapshot().window_id,
            t.session.snapshot().first_window_id,
        ) == windows
        path = t.session.rollout.path  # type: ignore[union-attr]
    types = t.recorder.types("sub-2")
    assert types == ["turn_started", "item_started"] + ["stream_error"] * 5 + [
        "error",
        "turn_complete",
    ]
    error = t.recorder.of_type(relay.ErrorEvent)[0]
    assert error.message == "Error running local compact task: down"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert "compacted" not in {line["type"] for line in lines}


async def test_compact_twice_keeps_latest_user_messages(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {"text": "a1"},
            {"text": "SUMMARY ONE"},
            {"text": "a2"},
            {"text": "SUMMARY TWO"},
            {"text": "a3"},
        ]
    }
    async with testing.open_test_session(script, config=codex_compacted_history()) as t:
        await run_ops(
            t,
            ("turn", "first"),
            ("compact", None),
            ("turn", "second"),
            ("compact", None),
            ("turn", "third"),
        )
    last = t.model.requests[-1]
    users = [u for u in testing.user_texts(last) if not u.startswith("<environment_context>")]
    assert users == ["first", "second", relay.lowlevel.summary_text("SUMMARY TWO"), "third"]
    assert sum(u.startswith(summary_prefix()) for u in testing.user_texts(last)) == 1
    # The second summarization request saw the first summary, but never as a user request.
    second_compact = t.model.requests[3]
    assert relay.lowlevel.summary_text("SUMMARY ONE") in testing.user_texts(second_compact)


async def test_compaction_replaces_a_running_turn(autojump_clock: trio.testing.MockClock) -> None:
    script = {"responses": [{"text": "streaming slowly", "stall_ms": 1000}, {"text": "S"}]}
    async with testing.open_test_session(script) as t:
        await t.turn("go", id="t1")
        await t.wait_for(relay.AgentMessageDelta)
        await t.submit(relay.Compact(), id="c1")
        await t.wait_for(relay.TurnComplete)
    lifecycle = [
        (e.id, relay.lowlevel.to_json(e.msg)["type"])
        for e in t.recorder.events
        if isinstance(e.msg, relay.TurnStarted | relay.TurnAborted | relay.TurnComplete)
    ]
    assert lifecycle == [
        ("t1", "turn_started"),
        ("t1", "turn_aborted"),
        ("c1", "turn_started"),
        ("c1", "turn_complete"),
    ]


async def test_steering_a_compaction_is_rejected(autojump_clock: trio.testing.MockClock) -> None:
    script = {"responses": [{"text": "S", "delay_ms": 1000}]}
    async with testing.open_test_session(script) as t:
        await t.submit(relay.Compact(), id="c1")
        await t.wait_for(lambda e: isinstance(e.msg, relay.ItemStarted))
        await t.turn("more input", id="s1")
        await t.wait_for(relay.TurnComplete)
    errors = [(e.id, e.msg.code) for e in t.recorder.events if isinstance(e.msg, relay.ErrorEvent)]
    assert errors == [("s1", relay.ErrorCode.ACTIVE_TURN_NOT_STEERABLE)]
    assert not any(
        isinstance(i, relay.Message) and i.text() == "more input" for i in t.session.history.items
    )


async def test_compaction_rollout_line(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    config = relay.Config(
        compaction=relay.CompactionSettings(placement="codex"),
        rollout=relay.RolloutConfig(dir=str(tmp_path)),
    )
    script = {"responses": [{"text": "a1"}, {"text": "SUMMARY"}]}
    async with testing.open_test_session(script, config=config) as t:
        first_window = t.session.snapshot().window_id
        await run_ops(t, ("turn", "first"), ("compact", None))
        path = t.session.rollout.path  # type: ignore[union-attr]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    index = next(i for i, line in enumerate(lines) if line["type"] == "compacted")
    compacted = lines[index]["payload"]
    assert compacted["message"] == relay.lowlevel.summary_text("SUMMARY")
    assert [
        relay.lowlevel.decode_response_item(i) for i in compacted["replacement_history"]
    ] == list(t.session.history.items)
    assert compacted["window_number"] == 1
    assert compacted["first_window_id"] == compacted["previous_window_id"] == first_window
    assert compacted["window_id"] == t.session.snapshot().window_id != first_window
    assert compacted["receipt"]["trigger"] == "manual"
    # The reference context was cleared: world_state follows, turn_context does not.
    assert lines[index + 1]["type"] == "world_state"
    assert lines[index + 2]["payload"]["type"] == "token_count"


async def test_fallback_summary_without_a_script(autojump_clock: trio.testing.MockClock) -> None:
    script = {
        "responses": [
            {"function_call": {"name": "read_file", "arguments": {"path": "notes.txt"}}},
            {"text": "read it"},
        ]
    }
    async with testing.open_test_session(script) as t:
        await run_ops(t, ("turn", "summarize notes.txt"), ("compact", None))
    summary = t.session.history.items[-1]
    assert isinstance(summary, relay.Message)
    text = summary.text()
    assert "- summarize notes.txt" in text and "- notes.txt" in text
    assert "Last answer: read it" in text
