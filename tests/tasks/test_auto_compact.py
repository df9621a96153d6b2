"""Auto-compaction inside the regular turn: pre-turn, mid-turn, model downshift
(docs/compaction.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
import trio.testing

import relay
from relay import testing
from relay._core._budget import auto_compact_limit
from relay._core._summary import is_summary, summary_prefix
from tests.sessions import codex_compacted_history

NO_ROLLOUT = relay.RolloutConfig(enabled=False)


#: Codex's placement: the initial context recorded anew after the compacted history.
CODEX_PLACEMENT = relay.CompactionSettings(placement="codex")


def config(**kwargs: Any) -> relay.Config:
    return relay.Config(rollout=NO_ROLLOUT, **kwargs)


def receipts(t: testing.TestSession) -> list[relay.CompactionReceipt]:
    return [
        m.item.receipt
        for m in t.recorder.msgs
        if isinstance(m, relay.ItemCompleted)
        and isinstance(m.item, relay.ContextCompactionItem)
        and m.item.receipt
    ]


def test_limit_rule() -> None:
    assert auto_compact_limit(200_000, None) == 200_000
    assert auto_compact_limit(None, 100) == 90
    assert auto_compact_limit(200, 100) == 90
    assert auto_compact_limit(50, 100) == 50
    assert auto_compact_limit(None, None) is None
    assert auto_compact_limit(0, None) is None
    assert auto_compact_limit(-5, 100) == 90


async def test_auto_compact_runs_after_token_limit_hit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {"text": "a1", "total_tokens": 70_000},
            {"text": "a2", "total_tokens": 330_000},
            {"text": "SUMMARY"},
            {"text": "a3"},
        ]
    }
    cfg = codex_compacted_history(config(model_auto_compact_token_limit=200_000))
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("one", "two", "three")
    requests = t.model.requests
    assert [testing.is_compaction_request(r) for r in requests] == [False, False, True, False]
    follow_up = [
        u for u in testing.user_texts(requests[3]) if not u.startswith("<environment_context>")
    ]
    assert follow_up == ["one", "two", relay.lowlevel.summary_text("SUMMARY"), "three"]
    # The compaction request does not contain the incoming message (pre-turn).
    assert "three" not in testing.user_texts(requests[2])
    # Auto-compaction runs under the third turn's id, after its turn_started.
    third = t.recorder.types("sub-3")
    assert third[:2] == ["turn_started", "item_started"]
    assert third.count("turn_started") == 1
    assert [r.trigger for r in receipts(t)] == [relay.CompactionTrigger.PRE_TURN]


async def test_auto_compact_clamps_config_limit_to_context_window(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A window that the compacted history (instructions and tools included) fits.
    script = {"responses": [{"text": "a1", "total_tokens": 901}, {"text": "S"}, {"text": "a2"}]}
    cfg = config(model_context_window=1000, model_auto_compact_token_limit=2000)
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("one", "two")
    assert [testing.is_compaction_request(r) for r in t.model.requests] == [False, True, False]


async def test_usage_just_under_the_limit_does_not_compact(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": "a1", "total_tokens": 89}, {"text": "a2"}]}
    cfg = config(model_context_window=100)
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("one", "two")
    assert [testing.is_compaction_request(r) for r in t.model.requests] == [False, False]


async def test_mid_turn_compaction_after_tool_call(autojump_clock: trio.testing.MockClock) -> None:
    script = {
        "responses": [
            {
                "function_call": {"name": "sleep", "arguments": {"seconds": 0}, "call_id": "c1"},
                "total_tokens": 5000,
            },
            {"text": "SUMMARY"},
            {"text": "done"},
        ]
    }
    cfg = config(model_auto_compact_token_limit=1000, developer_instructions="Dev.")
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("do it")
    _, compaction_request, follow_up = t.model.requests
    kinds = [i["type"] for i in compaction_request["input"]]
    assert kinds[-3:] == ["function_call", "function_call_output", "message"]
    assert testing.is_compaction_request(compaction_request)
    roles = [(i["role"], i["content"][0]["text"].split("\n")[0]) for i in follow_up["input"]]
    assert roles == [
        ("developer", "Dev."),
        ("user", "<environment_context>"),
        ("user", "do it"),
        ("user", summary_prefix().split("\n")[0]),
    ]
    assert [r.trigger for r in receipts(t)] == [relay.CompactionTrigger.MID_TURN]
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "done"


async def test_multiple_auto_compactions_in_one_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def call(n: int) -> dict[str, Any]:
        return {
            "function_call": {"name": "sleep", "arguments": {"seconds": 0}, "call_id": f"c{n}"},
            "total_tokens": 5000,
        }

    script = {
        "responses": [
            call(1),
            {"text": "S1"},
            call(2),
            {"text": "S2"},
            call(3),
            {"text": "S3"},
            {"text": "finished"},
        ]
    }
    cfg = config(model_auto_compact_token_limit=1000)
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("loop")
    requests = t.model.requests
    assert [testing.is_compaction_request(r) for r in requests] == [
        False,
        True,
        False,
        True,
        False,
        True,
        False,
    ]
    for index in (2, 4, 6):
        summaries = [
            u for u in testing.user_texts(requests[index]) if is_summary(relay.user_message(u))
        ]
        assert len(summaries) == 1
    assert len(receipts(t)) == 3
    assert t.recorder.types("sub-1").count("turn_started") == 1


async def test_turn_ending_over_the_limit_compacts_at_the_next_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [{"text": "big", "total_tokens": 5000}, {"text": "S"}, {"text": "small"}]
    }
    cfg = config(model_auto_compact_token_limit=1000)
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("one")
        assert len(t.model.requests) == 1
        await t.turns("two")
    assert [testing.is_compaction_request(r) for r in t.model.requests] == [False, True, False]


async def test_pre_turn_compaction_excludes_incoming_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": "a1", "total_tokens": 5000}, {"text": "S"}, {"text": "a2"}]}
    cfg = config(model_auto_compact_token_limit=1000, compaction=CODEX_PLACEMENT)
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("old message", "incoming message")
    compaction_request = t.model.requests[1]
    assert "incoming message" not in testing.user_texts(compaction_request)
    assert "old message" in testing.user_texts(compaction_request)
    follow = testing.user_texts(t.model.requests[2])
    assert follow[-2].startswith("<environment_context>") and follow[-1] == "incoming message"


def recorded_user_texts(rollout: Path) -> list[str]:
    """The texts of the real user messages of a rollout file."""
    texts = []
    for line in rollout.read_text().splitlines():
        record = json.loads(line)
        payload = record["payload"]
        if (
            record["type"] == "response_item"
            and payload.get("role") == "user"
            and not payload["content"][0]["text"].startswith("<environment_context>")
        ):
            texts.append(payload["content"][0]["text"])
    return texts


async def test_a_failed_pre_turn_compaction_ends_the_turn_with_its_input_recorded(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    failure = {"http_error": {"status": 500, "message": "down"}}
    script = {"responses": [{"text": "a1", "total_tokens": 5000}] + [failure] * 6}
    cfg = relay.Config(
        model_auto_compact_token_limit=1000,
        rollout=relay.RolloutConfig(dir=str(tmp_path)),
    )
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("one", "two")
        rollout = t.session.rollout
        assert rollout is not None
    assert len(t.model.requests) == 1 + 6
    second = [e.msg for e in t.recorder.events if e.id == "sub-2"]
    assert t.recorder.types("sub-2")[-5:] == [
        "error",
        "item_started",
        "item_completed",
        "user_message",
        "turn_complete",
    ]
    assert second[-2] == relay.UserMessage("two")
    history = [i.text() for i in t.session.history.items if isinstance(i, relay.Message)]
    assert history[-1] == "two"
    assert recorded_user_texts(rollout.path) == ["one", "two"]


async def test_a_pre_turn_compaction_stopped_by_a_hook_keeps_the_turns_input(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async def veto(info: relay.HookInput) -> relay.HookStop:
        return relay.HookStop(f"no {info.trigger} compaction now")

    script = {"responses": [{"text": "a1", "total_tokens": 5000}]}
    cfg = relay.Config(
        model_auto_compact_token_limit=1000,
        rollout=relay.RolloutConfig(dir=str(tmp_path)),
    )
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("one")
        t.session.register_hook(relay.CompactHook("pre_compact", veto))
        await t.turns("two")
        rollout = t.session.rollout
        assert rollout is not None
    assert len(t.model.requests) == 1
    assert t.recorder.types("sub-2")[-5:] == [
        "background_event",
        "item_started",
        "item_completed",
        "user_message",
        "turn_aborted",
    ]
    aborted = t.recorder.of_type(relay.TurnAborted)[-1]
    assert (aborted.turn_id, aborted.reason) == ("sub-2", relay.AbortReason.HOOK_STOPPED)
    assert recorded_user_texts(rollout.path) == ["one", "two"]


async def test_model_downshift_compacts_with_the_previous_model(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": "a1", "total_tokens": 200_000}, {"text": "S"}, {"text": "a2"}]}
    cfg = relay.Config(model="gpt-4.1", rollout=NO_ROLLOUT)
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("one")
        await t.turns("two", model="gpt-4o")
    models = [r["model"] for r in t.model.requests]
    assert models == ["gpt-4.1", "gpt-4.1", "gpt-4o"]
    assert testing.is_compaction_request(t.model.requests[1])
    assert [r.trigger for r in receipts(t)] == [relay.CompactionTrigger.MODEL_DOWNSHIFT]


async def test_switching_to_a_larger_model_does_not_compact(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": "a1", "total_tokens": 100_000}, {"text": "a2"}]}
    cfg = relay.Config(model="gpt-4o", rollout=NO_ROLLOUT)
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("one")
        await t.turns("two", model="gpt-4.1")
    assert [r["model"] for r in t.model.requests] == ["gpt-4o", "gpt-4.1"]
    assert receipts(t) == []


async def test_steered_input_waits_one_step_after_a_mid_turn_compaction(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {
                "function_call": {"name": "sleep", "arguments": {"seconds": 5}, "call_id": "c1"},
                "total_tokens": 5000,
            },
            {"text": "SUMMARY"},
            {"text": "answering the tool"},
            {"text": "answering the steer"},
        ]
    }
    cfg = config(model_auto_compact_token_limit=1000)
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turn("do it", id="t1")
        await t.wait_for(testing.tool_call_started)
        await t.turn("also this", id="s1")
        await t.wait_for(relay.TurnComplete)
    after_compaction, next_one = t.model.requests[2], t.model.requests[3]
    # The first request after the compaction answers the tool follow-up without the steered
    # input; the request after it picks the input up.
    assert "also this" not in testing.user_texts(after_compaction)
    assert testing.user_texts(next_one)[-1] == "also this"
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "answering the steer"
