"""Compaction off the critical path: post-turn, background and async compaction."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import trio
import trio.testing

import relay
from relay import testing
from relay._core._summary import summary_prefix
from tests.sessions import codex_compacted_history

NO_ROLLOUT = relay.RolloutConfig(enabled=False)


def conversation(body: dict[str, Any]) -> list[str]:
    """The request's messages, contextual ones left out, as ``role: text``."""
    out = []
    for item in body["input"]:
        if item["type"] == "message":
            text = item["content"][0]["text"]
            if not text.startswith("<"):
                out.append(f"{item['role']}: {text.splitlines()[0]}")
        else:
            out.append(item["type"])
    return out


async def turns(t: testing.TestSession, *texts: str) -> None:
    """Run turns to their ends, letting background work run between them."""
    for text in texts:
        await t.turns(text)
        await trio.testing.wait_all_tasks_blocked()


def receipts(t: testing.TestSession) -> list[tuple[str, relay.CompactionReceipt]]:
    return [
        (e.id, e.msg.item.receipt)
        for e in t.recorder.events
        if isinstance(e.msg, relay.ItemCompleted)
        and isinstance(e.msg.item, relay.ContextCompactionItem)
        and e.msg.item.receipt
    ]


def background_events(t: testing.TestSession) -> list[str]:
    return [m.message for m in t.recorder.msgs if isinstance(m, relay.BackgroundEvent)]


# ----------------------------------------------------------------------------- post-turn


async def test_post_turn_compaction_follows_the_answer_at_once(tmp_path: Path) -> None:
    # Threshold 10 % of a 200k window: an answer with 30,000 tokens used compacts before the
    # turn completes, and the next turn starts from the compacted history.
    script = {
        "responses": [{"text": "a1", "total_tokens": 30_000}, {"text": "SUM"}, {"text": "a2"}]
    }
    config = relay.Config(
        model_context_window=200_000,
        model_post_turn_compact_threshold_percent=10,
        compaction=relay.CompactionSettings(placement="codex"),
        rollout=relay.RolloutConfig(dir=str(tmp_path)),
    )
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("one")
        assert t.session.rollout is not None
        path = t.session.rollout.path
        await t.turns("two")
    _first, compaction, second = t.model.requests
    assert testing.is_compaction_request(compaction)
    # The history, the answer, the prompt last; no tools.
    assert conversation(compaction)[:2] == ["user: one", "assistant: a1"]
    assert len(conversation(compaction)) == 3
    assert compaction["input"][-1]["content"][0]["text"] == relay.lowlevel.compaction_prompt(config)
    assert compaction.get("tools") in (None, [])
    assert conversation(second) == [
        "user: one",
        f"user: {summary_prefix().splitlines()[0]}",
        "user: two",
    ]
    [(turn, receipt)] = receipts(t)
    assert turn == "sub-1" and receipt.trigger is relay.CompactionTrigger.POST_TURN
    assert not receipt.background
    # The turn completes after its compaction.
    first_turn = t.recorder.types("sub-1")
    assert first_turn.index("item_completed", first_turn.index("item_started")) < first_turn.index(
        "turn_complete"
    )
    # A resumed session sends the same next request.
    model = testing.ScriptedModel({"responses": [{"text": "a2"}]})
    rollout = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(rollout[: _line_after_turn(rollout, "sub-1")]) + "\n")
    async with (
        relay.resume_session(
            path, config, model=model, clock=testing.fixed_clock, rng=random.Random(0)
        ) as session,
        trio.open_nursery() as nursery,
    ):
        recorder = testing.EventRecorder()
        nursery.start_soon(recorder.consume, session)
        resumed = testing.TestSession(session, model, recorder)
        await resumed.turn("two")
        await resumed.wait_for(testing.turn_ended)
        await resumed.shutdown()
    assert model.requests[0]["input"] == second["input"]


def _line_after_turn(lines: list[str], turn: str) -> int:
    for index, line in enumerate(lines):
        payload = json.loads(line)["payload"]
        if payload.get("type") == "turn_complete" and payload.get("turn_id") == turn:
            return index + 1
    raise AssertionError(f"no turn_complete of {turn}")


async def test_post_turn_compaction_is_off_by_default(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": "a1", "total_tokens": 190_000}, {"text": "a2"}]}
    config = relay.Config(model_context_window=1_000_000, rollout=NO_ROLLOUT)
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("one", "two")
    assert not any(testing.is_compaction_request(r) for r in t.model.requests)


# ----------------------------------------------------------------------------- background


def background_config(**fields: Any) -> relay.Config:
    """Background compaction at 60 % of a 1,000-token limit, making Codex's compacted history
    (the work-state record's room, 2,000 tokens, would leave none for the kept messages)."""
    defaults: dict[str, Any] = {
        "model_context_window": 100_000,
        "model_auto_compact_token_limit": 1000,
        "background_compact_threshold_percent": 60,
        "rollout": NO_ROLLOUT,
    }
    return codex_compacted_history(relay.Config(**{**defaults, **fields}))


async def test_a_ready_current_result_is_installed_at_the_next_automatic_point(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {"text": "a1", "total_tokens": 700},  # 70 % of the limit: background work starts
            {"text": "SUM", "delay_ms": 2000},  # the background summary
            {"text": "a2", "total_tokens": 1100},  # over the limit
            {"text": "a3"},
        ]
    }
    async with testing.open_test_session(script, config=background_config()) as t:
        await t.turns("one")
        await trio.sleep(3)
        await t.turns("two", "three")
    _first, summary, _second, third = t.model.requests
    assert testing.is_compaction_request(summary)
    # The snapshot ended with the first answer; the second turn is carried over whole.
    assert conversation(summary)[:-1] == ["user: one", "assistant: a1"]
    assert conversation(third) == [
        "user: one",
        f"user: {summary_prefix().splitlines()[0]}",
        "user: two",
        "assistant: a2",
        "user: three",
    ]
    [(turn, receipt)] = receipts(t)
    assert turn == "sub-3"
    # Recorded where it started, after the first turn, and where the third turn installed it.
    assert receipt.background and receipt.trigger is relay.CompactionTrigger.POST_TURN
    assert receipt.installed_at is relay.CompactionTrigger.PRE_TURN
    assert receipt.snapshot_age_ms is not None and receipt.snapshot_age_ms >= 3000
    assert [m.split(" (")[0] for m in background_events(t)] == [
        "Compacting the conversation in the background"
    ]
    third_turn = t.recorder.types("sub-3")
    assert third_turn[:3] == ["turn_started", "item_started", "token_count"]
    assert "item_completed" in third_turn


async def test_a_background_install_counts_towards_the_turns_automatic_compactions(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {"text": "a1", "total_tokens": 700},  # background work starts
            {"text": "SUM", "delay_ms": 2000},
            {"text": "a2", "total_tokens": 1100},  # over the limit: the next turn installs
            {
                "function_call": {"name": "no_such_tool", "arguments": {}, "call_id": "c1"},
                "total_tokens": 1200,
            },  # over the limit again, mid-turn
            {"text": "never sent"},
        ]
    }
    config = background_config(max_auto_compactions_per_turn=1)
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("one")
        await trio.sleep(3)
        await t.turns("two", "three")
    [(turn, receipt)] = receipts(t)
    assert turn == "sub-3" and receipt.background
    # The install used the turn's one automatic compaction: the mid-turn point may not run
    # another, and the turn ends instead of sampling again.
    assert len(t.model.requests) == 4
    [error] = [m for m in t.recorder.msgs if isinstance(m, relay.ErrorEvent)]
    assert error.code == relay.ErrorCode.COMPACTION_LOOP
    assert "already ran 1 automatic compactions" in error.message
    assert "background result: " in error.message


async def test_a_result_not_ready_does_not_stall_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {"text": "a1", "total_tokens": 1100},  # over the limit at once
            {"text": "SUM", "delay_ms": 10_000},
            {"text": "a2", "total_tokens": 1200},
            {"text": "a3"},
        ]
    }
    async with testing.open_test_session(script, config=background_config()) as t:
        await t.turns("one")
        started = trio.current_time()
        await t.turns("two")
        # The second turn did not wait for the summary.
        assert trio.current_time() - started < 1
        assert receipts(t) == []
        await trio.sleep(10)
        await t.turns("three")
    [(turn, receipt)] = receipts(t)
    assert turn == "sub-3" and receipt.background


async def test_a_turn_over_the_window_waits_for_the_background_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {"text": "a1", "total_tokens": 1100},
            {"text": "SUM", "delay_ms": 10_000},
            {"text": "a2"},
        ]
    }
    config = background_config(model_context_window=1000, model_auto_compact_token_limit=None)
    # The limit is 90 % of the window: 900; usage 1100 is over the window itself.
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("one", "two")
    [(turn, receipt)] = receipts(t)
    assert turn == "sub-2" and receipt.background
    assert len(t.model.requests) == 3


async def test_a_background_result_still_over_the_window_is_an_error_not_a_success(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {"text": "a1", "total_tokens": 1100},
            {"text": "SUM", "delay_ms": 10_000},
            {"text": "never sent"},
        ]
    }
    # Instructions of about 1,500 tokens: no compaction brings the context under the window.
    config = background_config(
        model_context_window=1000,
        model_auto_compact_token_limit=None,
        base_instructions="Keep every answer short. " * 250,
    )
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("one", "two")
    [error] = [m for m in t.recorder.msgs if isinstance(m, relay.ErrorEvent)]
    assert error.code == relay.ErrorCode.CONTEXT_WINDOW_EXCEEDED
    assert "still does not fit the model's context window (1000 tokens)" in error.message
    # Not smaller than before: nothing installed, no success reported.
    assert receipts(t) == []
    assert not [m for m in t.recorder.msgs if isinstance(m, relay.ContextCompacted)]
    assert len(t.model.requests) == 2


async def test_a_stale_result_is_dropped_and_the_compaction_runs_now(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    script = {
        "responses": [
            {"text": "a1", "total_tokens": 700},
            {"text": "BG", "delay_ms": 5000},
            {"text": "MANUAL"},
            {
                "function_call": {"name": "sleep", "arguments": {"seconds": 0}, "call_id": "c1"},
                "total_tokens": 1100,
            },
            {"text": "FG"},
            {"text": "a2"},
        ]
    }
    config = background_config(rollout=relay.RolloutConfig(dir=str(tmp_path)))
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("one")
        # A manual compaction replaces the history while the background work runs.
        await t.submit(relay.Compact())
        await t.wait_for(testing.turn_ended, 2)
        # The background work (5 s of virtual time) finishes, its result now stale.
        await trio.sleep(10)
        assert t.session.statistics().background_compaction == "ready"
        await t.turns("two")
        assert t.session.rollout is not None
        path = t.session.rollout.path
    requests = t.model.requests
    assert [testing.is_compaction_request(r) for r in requests] == [
        False,
        True,
        True,
        False,
        True,
        False,
    ]
    dropped = [m for m in background_events(t) if m.startswith("Dropped")]
    assert len(dropped) == 1 and "changed since its snapshot" in dropped[0]
    # The mid-turn compaction ran in the foreground, from the live history.
    assert [(turn, r.trigger, r.background) for turn, r in receipts(t)] == [
        ("sub-2", relay.CompactionTrigger.MANUAL, False),
        ("sub-3", relay.CompactionTrigger.MID_TURN, False),
    ]
    assert "user: two" in conversation(requests[4])
    # The drop is on record.
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert any(
        r["type"] == "event_msg"
        and r["payload"]["type"] == "background_event"
        and r["payload"]["message"].startswith("Dropped")
        for r in records
    )


async def test_a_pre_compact_hook_stop_drops_the_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {"text": "a1", "total_tokens": 1100},
            {"text": "SUM"},
            {"text": "a2"},
        ]
    }

    async def stop(info: relay.HookInput) -> relay.HookStop:
        return relay.HookStop("not now")

    async with testing.open_test_session(script, config=background_config()) as t:
        t.session.register_hook(relay.CompactHook("pre_compact", stop, name="stop"))
        await t.turns("one", "two")
    assert receipts(t) == []
    assert any(m.startswith("Dropped") and "hook" in m for m in background_events(t))
    aborted = [m for m in t.recorder.msgs if isinstance(m, relay.TurnAborted)]
    assert [m.reason for m in aborted] == [relay.AbortReason.HOOK_STOPPED]
    assert t.session.statistics().background_compaction is None


async def test_shutdown_cancels_background_work(tmp_path: Path) -> None:
    script = {
        "responses": [{"text": "a1", "total_tokens": 700}, {"text": "SUM", "delay_ms": 60_000}]
    }
    config = background_config(rollout=relay.RolloutConfig(dir=str(tmp_path)))
    with trio.fail_after(30):
        async with testing.open_test_session(script, config=config) as t:
            await t.turns("one")
            assert t.session.statistics().background_compaction == "running"
            assert t.session.rollout is not None
            path = t.session.rollout.path
    assert t.session.statistics().background_compaction is None
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert not any(r["type"] == "compacted" for r in records)


async def test_background_compaction_is_off_by_default(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": "a1", "total_tokens": 999}, {"text": "a2"}]}
    config = relay.Config(model_auto_compact_token_limit=1000, rollout=NO_ROLLOUT)
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("one", "two")
    assert len(t.model.requests) == 2 and background_events(t) == []


# ----------------------------------------------------------------------------- async


async def test_async_compaction_with_remote_v2_sends_four_requests(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Remote V2, threshold 10 %: turn 1, the background compaction, then turn 2 from the
    # installed compaction item.
    provider = relay.ProviderConfig(name="openai-like", remote_compaction="v2")
    config = relay.Config(
        model_provider="openai-like",
        model_providers={"openai-like": provider},
        model_context_window=200_000,
        model_async_compact_threshold_percent=10,
        features=relay.Features(remote_compaction_v2=True, async_compaction=True),
        rollout=NO_ROLLOUT,
    )
    script = {
        "responses": [
            {"function_call": {"name": "sleep", "arguments": {"seconds": 0}, "call_id": "c1"}},
            {"text": "a1", "total_tokens": 30_000},
            {"compaction": "ENC"},
            {"text": "a2"},
        ]
    }
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("one", "two")
    _call, answer, compaction, second = t.model.requests
    assert compaction["input"][-1] == {"type": "compaction_trigger"}
    assert conversation(compaction)[:-1] == [*conversation(answer), "assistant: a1"]
    assert conversation(second) == ["user: one", "compaction", "user: two"]
    [(turn, receipt)] = receipts(t)
    assert turn == "sub-2" and receipt.background and receipt.backend == "remote_v2"


async def test_an_async_compaction_is_recorded_where_it_started_and_where_it_installed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Started after the first turn, installed before the second: the rollout's receipt says
    # post_turn, as the point it started at, with the pre-turn point that installed it.
    config = relay.Config(
        model_context_window=200_000,
        model_async_compact_threshold_percent=10,
        features=relay.Features(async_compaction=True),
        rollout=relay.RolloutConfig(dir=str(tmp_path)),
    )
    script = {"responses": [{"text": "a1", "total_tokens": 30_000}, "SUM", "a2"]}
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("one", "two")
        assert t.session.rollout is not None
        path = t.session.rollout.path
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    [compacted] = [line["payload"] for line in lines if line["type"] == "compacted"]
    receipt = compacted["receipt"]
    assert (receipt["trigger"], receipt["background"], receipt["installed_at"]) == (
        "post_turn",
        True,
        "pre_turn",
    )
    # The compacted line is written inside the turn that installs it.
    started = [i for i, line in enumerate(lines) if line["payload"].get("type") == "turn_started"]
    assert started[1] < lines.index(next(line for line in lines if line["type"] == "compacted"))
    # The item_completed event carries the same receipt.
    [(_, event_receipt)] = receipts(t)
    assert event_receipt.trigger is relay.CompactionTrigger.POST_TURN
    assert event_receipt.installed_at is relay.CompactionTrigger.PRE_TURN


async def test_a_background_result_installed_mid_turn_names_that_point(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {"text": "a1", "total_tokens": 700},  # background work starts
            {"text": "SUM", "delay_ms": 2000},
            {
                "function_call": {"name": "sleep", "arguments": {"seconds": 0}, "call_id": "c1"},
                "total_tokens": 1100,
            },  # over the limit with a follow-up to come: the mid-turn point installs
            {"text": "a2"},
        ]
    }
    async with testing.open_test_session(script, config=background_config()) as t:
        await t.turns("one")
        await trio.sleep(3)
        await t.turns("two")
    [(turn, receipt)] = receipts(t)
    assert turn == "sub-2" and receipt.background
    assert receipt.trigger is relay.CompactionTrigger.POST_TURN
    assert receipt.installed_at is relay.CompactionTrigger.MID_TURN


async def test_a_new_background_compaction_replaces_a_stale_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {"text": "a1", "total_tokens": 700},
            {"text": "OLD"},  # the first background summary, of a snapshot made stale below
            {"text": "MANUAL"},
            {"text": "a2", "total_tokens": 1100},
            {"text": "NEW", "delay_ms": 1000},  # the second background summary
            {"text": "a3"},
        ]
    }
    async with testing.open_test_session(script, config=background_config()) as t:
        await t.turns("one")
        await t.submit(relay.Compact())
        await t.wait_for(testing.turn_ended, 2)
        await t.turns("two")
        await trio.sleep(5)
        await t.turns("three")
    dropped = [m for m in background_events(t) if m.startswith("Dropped")]
    assert len(dropped) == 1
    [_, (turn, receipt)] = receipts(t)
    assert turn == "sub-4" and receipt.background
    # Installed from the second snapshot: the manual summary, not the stale one.
    texts = testing.user_texts(t.model.requests[-1])
    assert (
        relay.lowlevel.summary_text("NEW") in texts
        and relay.lowlevel.summary_text("OLD") not in texts
    )
    assert [u for u in texts if not u.startswith("<")] == [
        "one",
        "two",
        relay.lowlevel.summary_text("NEW"),
        "three",
    ]


def test_a_checkpoint_line_says_when_a_result_came_from_the_background() -> None:
    from relay._cli._pretty import background_note

    receipt = relay.CompactionReceipt(
        relay.CompactionTrigger.POST_TURN,
        "local",
        20_000,
        6_000,
        2000,
        True,
        18_000,
        installed_at=relay.CompactionTrigger.MID_TURN,
    )
    assert background_note(receipt) == ", background, installed mid_turn, snapshot 18000 ms old"
    assert (
        background_note(relay.CompactionReceipt(relay.CompactionTrigger.MANUAL, "x", 1, 1, 1)) == ""
    )


# ----------------------------------------------------------------------------- context tools


async def test_the_model_manages_its_own_window_with_the_token_budget(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {
                "function_call": {"name": "context_window_status", "arguments": {}},
                "total_tokens": 30_000,
            },
            {"function_call": {"name": "new_context_window", "arguments": {}}},
            {"text": "Carrying on."},
        ]
    }
    config = relay.Config(
        model_context_window=200_000,
        features=relay.Features(token_budget=True),
        rollout=NO_ROLLOUT,
    )
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("one")
    first, status, fresh = t.model.requests
    # The tools are offered and the budget is stated in the initial context.
    names = {tool["name"] for tool in first["tools"]}
    assert {"context_window_status", "new_context_window"} <= names
    blocks = [u for u in testing.user_texts(first) if u.startswith("<context_window>")]
    assert len(blocks) == 1 and "200000 tokens" in blocks[0]
    outputs = [i["output"] for i in status["input"] if i["type"] == "function_call_output"]
    assert outputs == ["170000 of 200000 tokens left (30000 used, 15%)."]
    # The second call asked for a fresh window: the token-budget compaction, model_requested.
    [(turn, receipt)] = receipts(t)
    assert turn == "sub-1" and receipt.trigger is relay.CompactionTrigger.MODEL_REQUESTED
    assert receipt.backend == "token_budget"
    assert [u.split("\n")[0] for u in testing.user_texts(fresh)] == [
        "<environment_context>",
        "<context_window>",
        "one",  # the latest user message, kept verbatim by every compaction
    ]


async def test_a_model_asking_for_fresh_windows_again_and_again_meets_the_loop_guard(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ask = {"function_call": {"name": "new_context_window", "arguments": {}}}
    script = {"responses": [ask, ask, ask, {"text": "never sent"}]}
    config = relay.Config(
        model_context_window=200_000,
        max_auto_compactions_per_turn=2,
        features=relay.Features(token_budget=True),
        rollout=NO_ROLLOUT,
    )
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("one")
    assert [r.trigger for _turn, r in receipts(t)] == [relay.CompactionTrigger.MODEL_REQUESTED] * 2
    [error] = [m for m in t.recorder.msgs if isinstance(m, relay.ErrorEvent)]
    assert error.code == relay.ErrorCode.COMPACTION_LOOP
    assert "already ran 2 automatic compactions" in error.message
    assert len(t.model.requests) == 3


async def test_without_the_token_budget_there_are_no_context_tools(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = relay.Config(model_context_window=200_000, rollout=NO_ROLLOUT)
    async with testing.open_test_session({"responses": [{"text": "a"}]}, config=config) as t:
        await t.turns("one")
    [request] = t.model.requests
    names = {tool["name"] for tool in request.get("tools", [])}
    assert not names & {"context_window_status", "new_context_window"}
    assert not any(u.startswith("<context_window>") for u in testing.user_texts(request))
