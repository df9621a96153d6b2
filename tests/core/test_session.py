"""The session actor: replacement, interrupt, abort grace, on_busy, shutdown
(docs/architecture.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._core._history import normalize_for_prompt

TEXT = {"type": "text", "text": "x"}


def sleep_call(seconds: float, call_id: str = "call-sleep") -> dict[str, Any]:
    return {
        "function_call": {"name": "sleep", "arguments": {"seconds": seconds}, "call_id": call_id}
    }


def turn_events(rec: testing.EventRecorder, turn_id: str) -> list[str]:
    return rec.types(turn_id)


async def test_a_turn_reports_its_events_in_order(autojump_clock: trio.testing.MockClock) -> None:
    script = {"responses": [{"text": "hi there"}]}
    async with testing.open_test_session(script) as t:
        await t.turn("hello", id="t1")
        await t.wait_for(relay.TurnComplete)
    assert t.recorder.types() == [
        "session_configured",
        "turn_started",
        "item_started",
        "item_completed",
        "user_message",
        "item_started",
        "agent_message_delta",
        "agent_message_delta",
        "item_completed",
        "agent_message",
        "token_count",
        "work_state_noted",
        "turn_complete",
        "shutdown_complete",
    ]
    assert [e.seq for e in t.recorder.events] == list(range(1, 15))
    # The work-state record (on by default) keeps the model's latest answer.
    assert t.recorder.of_type(relay.WorkStateNoted) == [
        relay.WorkStateNoted("answer", "hi there", "latest")
    ]
    complete = t.recorder.of_type(relay.TurnComplete)[0]
    assert complete == relay.TurnComplete("t1", "hi there", 0)


async def test_the_first_event_says_which_session_runs_and_is_recorded(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    config = relay.Config(
        model="gpt-5",
        model_context_window=50_000,
        cwd=str(tmp_path),
        rollout=relay.RolloutConfig(dir=str(tmp_path / "sessions")),
    )
    async with testing.open_test_session(config=config) as t:
        rollout = t.session.rollout
        assert rollout is not None
        first = await t.wait_for(relay.SessionConfigured)
    assert (first.id, first.seq) == ("session", 1)
    assert first.msg == relay.SessionConfigured(
        session_id=t.session.id,
        model="gpt-5",
        model_provider="scripted",
        model_context_window=50_000,
        cwd=str(tmp_path),
        rollout_path=str(rollout.path),
        relay_version=relay.__version__,
        resumed=False,
    )
    lines = [json.loads(line) for line in rollout.path.read_text().splitlines()]
    assert [line["type"] for line in lines[:2]] == ["session_meta", "event_msg"]
    assert lines[1]["payload"] == relay.lowlevel.to_json(first.msg)


async def test_replacement_aborts_the_old_turn_before_the_new_one_starts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": "slow", "delay_ms": 5000}, {"text": "fast"}]}
    async with testing.open_test_session(script) as t:
        await t.turn("first", id="t1")
        await t.wait_for(relay.UserMessage)
        await t.turn("second", id="t2", on_busy="replace")
        await t.wait_for(lambda e: isinstance(e.msg, relay.TurnComplete))
        assert trio.current_time() == pytest.approx(0)
    types = [(e.id, type(e.msg).__name__) for e in t.recorder.events]
    aborted = types.index(("t1", "TurnAborted"))
    started = types.index(("t2", "TurnStarted"))
    assert aborted + 1 == started
    assert [m for m in t.recorder.msgs if isinstance(m, relay.TurnAborted)] == [
        relay.TurnAborted("t1", relay.AbortReason.REPLACED, 0)
    ]
    assert not any(e.id == "t1" for e in t.recorder.events[aborted + 1 :])
    # The replaced turn's request never finished: the second request sees both user messages.
    second = t.model.requests[1]["input"]
    texts = [
        part["text"] for item in second if item["type"] == "message" for part in item["content"]
    ]
    assert "first" in texts and "second" in texts and "slow" not in texts


async def test_interrupt_during_a_tool_call_records_marker_and_synthetic_output(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [sleep_call(60), {"text": "after"}]}
    async with testing.open_test_session(script) as t:
        await t.turn("wait a minute", id="t1")
        await t.wait_for(testing.tool_call_started)
        started = trio.current_time()
        await t.submit(relay.Interrupt(), id="int")
        await t.wait_for(relay.TurnAborted)
        assert trio.current_time() == started  # the sleep tool reacts at once
        await t.turn("and now?", id="t2")
        await t.wait_for(relay.TurnComplete)
    assert t.recorder.types("t1")[-2:] == ["item_started", "turn_aborted"]
    aborted = t.recorder.of_type(relay.TurnAborted)[0]
    assert aborted.reason is relay.AbortReason.INTERRUPTED
    next_input = t.model.requests[1]["input"]
    kinds = [item["type"] for item in next_input]
    call_at = kinds.index("function_call")
    assert next_input[call_at + 1] == {
        "type": "function_call_output",
        "call_id": "call-sleep",
        "output": "aborted",
    }
    marker = next_input[call_at + 2]
    assert marker["role"] == "user"
    text = marker["content"][0]["text"]
    assert text.startswith("<turn_aborted>\n") and text.endswith("\n</turn_aborted>")
    assert next_input[-1]["content"][0]["text"] == "and now?"


async def test_abort_is_idempotent(autojump_clock: trio.testing.MockClock) -> None:
    script = {"responses": [sleep_call(60)]}
    async with testing.open_test_session(script) as t:
        await t.submit(relay.Interrupt(), id="idle-int")  # nothing runs: nothing happens
        await t.turn("go", id="t1")
        await t.wait_for(testing.tool_call_started)
        await t.submit(relay.Interrupt())
        await t.submit(relay.Interrupt())
        await t.session.wait_idle()
        assert len(t.recorder.of_type(relay.TurnAborted)) == 1
    assert "idle-int" not in {e.id for e in t.recorder.events}
    markers = [
        i
        for i in t.session.history.items
        if isinstance(i, relay.Message) and i.text().startswith("<turn_aborted>")
    ]
    assert len(markers) == 1


def stubborn_tool(linger: float, done: anyio.Event) -> relay.Tool:
    """A tool that keeps working for ``linger`` seconds after it is cancelled, reports it, then
    sets ``done``."""

    async def handler(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(linger)
                ctx.emit(relay.BackgroundEvent(f"cleaned up after {linger}s"))
                done.set()
        return "unreachable"

    return relay.Tool("stubborn", "lingers", {"type": "object"}, handler)


@pytest.mark.parametrize(
    ("linger", "aborted_at", "cleanup_reported"), [(0.05, 0.05, True), (0.5, 0.1, False)]
)
async def test_abort_grace_lets_a_task_finish_within_100ms_then_cuts_it(
    autojump_clock: trio.testing.MockClock,
    linger: float,
    aborted_at: float,
    cleanup_reported: bool,
) -> None:
    script = {
        "responses": [{"function_call": {"name": "stubborn", "arguments": {}, "call_id": "c1"}}]
    }
    done = anyio.Event()
    async with testing.open_test_session(script, tools=[stubborn_tool(linger, done)]) as t:
        await t.turn("go", id="t1")
        await t.wait_for(testing.tool_call_started)
        start = trio.current_time()
        await t.submit(relay.Interrupt())
        await t.wait_for(relay.TurnAborted)
        assert trio.current_time() - start == pytest.approx(aborted_at)
        await done.wait()  # a lingering task has run out its shield and tried to report
    t1 = [e.msg for e in t.recorder.events if e.id == "t1"]
    backgrounds = [m for m in t1 if isinstance(m, relay.BackgroundEvent)]
    assert bool(backgrounds) is cleanup_reported
    assert isinstance(t1[-1], relay.TurnAborted)


async def test_steer_adds_input_to_the_running_turn(autojump_clock: trio.testing.MockClock) -> None:
    script = {"responses": [sleep_call(10), {"text": "done"}]}
    async with testing.open_test_session(script) as t:
        await t.turn("first", id="t1")
        await t.wait_for(testing.tool_call_started)
        await t.turn("also this", id="s1")  # default on_busy: steer
        await t.wait_for(relay.TurnComplete)
    assert len(t.recorder.of_type(relay.TurnStarted)) == 1
    assert "s1" not in {e.id for e in t.recorder.events}
    second = t.model.requests[1]["input"]
    assert second[-1]["content"][0]["text"] == "also this"
    assert second[-2]["type"] == "function_call_output"


async def test_input_steered_during_the_last_response_gets_a_follow_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": "slow", "stall_ms": 1000}]}
    async with testing.open_test_session(script) as t:
        await t.turn("first", id="t1")
        await t.wait_for(relay.AgentMessageDelta)
        await t.turn("late", id="s1")
        await t.wait_for(relay.TurnComplete)
    assert len(t.model.requests) == 2
    assert t.model.requests[1]["input"][-1]["content"][0]["text"] == "late"
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "echo: late"


async def test_steered_input_of_an_interrupted_turn_is_kept(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with testing.open_test_session({"responses": [sleep_call(60)]}) as t:
        await t.turn("first", id="t1")
        await t.wait_for(testing.tool_call_started)
        await t.turn("never mind", id="s1")
        await t.submit(relay.Interrupt())
        await t.wait_for(relay.TurnAborted)
    texts = [i.text() for i in t.session.history.items[-2:] if isinstance(i, relay.Message)]
    assert texts[0] == "never mind" and texts[1].startswith("<turn_aborted>")


async def test_queue_starts_the_next_turn_when_the_running_one_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": "one", "delay_ms": 1000}, {"text": "two"}]}
    async with testing.open_test_session(script) as t:
        await t.turn("first", id="t1")
        await t.turn("second", id="t2", on_busy="queue")
        await t.wait_for(relay.TurnComplete, 2)
        assert trio.current_time() == pytest.approx(1.0)
    lifecycle = [
        (e.id, type(e.msg).__name__)
        for e in t.recorder.events
        if isinstance(e.msg, relay.TurnStarted | relay.TurnComplete)
    ]
    assert lifecycle == [
        ("t1", "TurnStarted"),
        ("t1", "TurnComplete"),
        ("t2", "TurnStarted"),
        ("t2", "TurnComplete"),
    ]


async def test_interrupt_lets_a_queued_turn_start(autojump_clock: trio.testing.MockClock) -> None:
    script = {"responses": [sleep_call(60), {"text": "two"}]}
    async with testing.open_test_session(script) as t:
        await t.turn("first", id="t1")
        await t.turn("second", id="t2", on_busy="queue")
        await t.wait_for(testing.tool_call_started)
        await t.submit(relay.Interrupt())
        await t.wait_for(relay.TurnComplete)
    lifecycle = [
        (e.id, type(e.msg).__name__)
        for e in t.recorder.events
        if isinstance(e.msg, relay.TurnStarted | relay.TurnComplete | relay.TurnAborted)
    ]
    assert lifecycle == [
        ("t1", "TurnStarted"),
        ("t1", "TurnAborted"),
        ("t2", "TurnStarted"),
        ("t2", "TurnComplete"),
    ]


async def test_shutdown_keeps_the_input_of_turns_still_queued(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    script = {"responses": [sleep_call(60)]}
    config = relay.Config(rollout=relay.RolloutConfig(dir=str(tmp_path)))
    async with testing.open_test_session(script, config=config) as t:
        await t.turn("first", id="t1")
        await t.turn("second", id="t2", on_busy="queue")
        await t.turn("third", id="t3", on_busy="queue")
        await t.wait_for(testing.tool_call_started)
        await t.submit(relay.Shutdown(), id="bye")
        await t.wait_for(relay.ShutdownComplete)
        rollout = t.session.rollout
        assert rollout is not None
    assert t.recorder.types("t2") == t.recorder.types("t3") == []
    user = [
        i.text()
        for i in t.session.history.items
        if isinstance(i, relay.Message) and i.role == "user"
    ]
    assert user[-3:] == ["first", "second", "third"]
    # In the file, after what the aborted turn recorded, before shutdown_complete.
    lines = [json.loads(line) for line in rollout.path.read_text().splitlines()]
    tail = [(line["type"], line["payload"]) for line in lines[-4:]]
    assert tail[0][1]["type"] == "turn_aborted"
    assert [kind for kind, _ in tail[1:3]] == ["response_item", "response_item"]
    assert [payload["content"][0]["text"] for _, payload in tail[1:3]] == ["second", "third"]
    assert tail[3] == ("event_msg", {"type": "shutdown_complete"})


async def test_shutdown_during_a_turn(autojump_clock: trio.testing.MockClock) -> None:
    script = {"responses": [sleep_call(60)]}
    async with testing.open_test_session(script) as t:
        await t.turn("first", id="t1")
        await t.wait_for(testing.tool_call_started)
        await t.submit(relay.Shutdown(), id="bye")
        await t.wait_for(relay.ShutdownComplete)
        with pytest.raises(relay.ClosedSessionError):
            await t.submit(relay.Interrupt())
    tail = t.recorder.events[-2:]
    assert [(e.id, e.msg) for e in tail] == [
        ("t1", relay.TurnAborted("t1", relay.AbortReason.SHUTDOWN, 0)),
        ("bye", relay.ShutdownComplete()),
    ]
    items = t.session.history.items
    assert not any(isinstance(i, relay.Message) and "<turn_aborted>" in i.text() for i in items)
    assert items[-1] == relay.FunctionCallOutput("call-sleep", "aborted")


async def test_leaving_the_block_shuts_the_session_down(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = testing.EventRecorder()
    model = testing.ScriptedModel({"responses": [sleep_call(60)]})
    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))
    async with trio.open_nursery() as nursery, relay.open_session(config, model=model) as session:
        nursery.start_soon(recorder.consume, session)
        await session.submit(relay.UserTurn(items=[relay.Text("go")]), id="t1")
        await recorder.wait_for(testing.tool_call_started)
    assert [type(m).__name__ for m in recorder.msgs[-2:]] == ["TurnAborted", "ShutdownComplete"]
    assert recorder.msgs[-2].reason is relay.AbortReason.SHUTDOWN


async def test_reading_events_that_wait_is_still_a_cancellation_point() -> None:
    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))
    async with relay.open_session(config, model=testing.ScriptedModel(None)) as session:
        events = session.events()
        await session.submit(relay.UserTurn(items=[relay.Text("go")]), id="t1")
        await session.wait_idle()
        assert session.statistics().events_emitted > 1  # the turn's events wait to be read
        read: list[relay.Event] = []
        with anyio.CancelScope() as scope:
            scope.cancel()
            async for event in events:
                read.append(event)
        assert scope.cancelled_caught
        assert read == []


async def test_a_turn_starts_before_other_work_runs() -> None:
    # Nothing is ahead of the op, so submitting it answers it: its turn_started is out before
    # any other task runs, another session's turn waiting to run or the turn's own task.
    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))
    mine, other = testing.ScriptedModel(None), testing.ScriptedModel(None)
    async with (
        relay.open_session(config, model=mine) as session,
        relay.open_session(config, model=other) as busy,
    ):
        events = session.events()
        await trio.testing.wait_all_tasks_blocked()
        busy.submit_nowait(relay.UserTurn(items=[relay.Text("busy")]), id="b1")
        await session.submit(relay.UserTurn(items=[relay.Text("go")]), id="t1")
        first = [await anext(events), await anext(events)]
        assert [(e.id, type(e.msg).__name__) for e in first] == [
            ("session", "SessionConfigured"),
            ("t1", "TurnStarted"),
        ]
        assert (mine.requests, other.requests) == ([], [])
        await trio.testing.wait_all_tasks_blocked()
        assert (len(mine.requests), len(other.requests)) == (1, 1)


async def test_an_op_behind_one_the_loop_holds_waits_for_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The interrupt waits for the loop (it aborts a turn): the input after it must not steer
    # the turn it aborts, but start a turn of its own once it is aborted.
    script = {"responses": [sleep_call(60), {"text": "next"}]}
    async with testing.open_test_session(script) as t:
        await t.turn("wait a minute", id="t1")
        await t.wait_for(testing.tool_call_started)
        t.session.submit_nowait(relay.Interrupt(), id="stop")
        t.session.submit_nowait(relay.UserInput(items=[relay.Text("then this")]), id="t2")
        await t.wait_for(lambda e: e.id == "t2" and isinstance(e.msg, relay.TurnComplete))
    ends = [
        (e.id, type(e.msg).__name__)
        for e in t.recorder.events
        if isinstance(e.msg, relay.TurnStarted | relay.TurnComplete | relay.TurnAborted)
    ]
    assert ends == [
        ("t1", "TurnStarted"),
        ("t1", "TurnAborted"),
        ("t2", "TurnStarted"),
        ("t2", "TurnComplete"),
    ]


async def test_invalid_ops_through_the_api_raise_and_leave_the_session_usable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with pytest.raises(TypeError):
        relay.UserTurn(items="hello")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must not be empty"):
        relay.UserTurn(items=[])
    with pytest.raises(ValueError, match="not a valid OnBusy"):
        relay.UserTurn(items=[relay.Text("x")], on_busy="later")  # type: ignore[arg-type]
    async with testing.open_test_session() as t:
        with pytest.raises(relay.InvalidOpError, match="not an op"):
            await t.session.submit("hello")  # type: ignore[arg-type]
        t.session.submit_json_nowait({"type": "user_turn", "items": "nope"}, id="bad")
        t.session.submit_json_nowait({"type": "dance"}, id="bad2", origin="script line 7")
        await t.turn("still here?", id="t1")
        await t.wait_for(relay.TurnComplete)
    errors = [
        (e.id, e.msg.code, e.msg.message)
        for e in t.recorder.events
        if isinstance(e.msg, relay.ErrorEvent)
    ]
    assert [(i, c) for i, c, _ in errors] == [
        ("bad", relay.ErrorCode.INVALID_OP),
        ("bad2", relay.ErrorCode.INVALID_OP),
    ]
    assert errors[1][2].startswith("script line 7: invalid op: unknown type 'dance'")
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "echo: still here?"


async def test_override_turn_context_changes_later_turns_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with testing.open_test_session() as t:
        await t.submit(relay.OverrideTurnContext(model="gpt-5", effort="low"))
        await trio.testing.wait_all_tasks_blocked()
        assert t.recorder.types() == ["session_configured"]
        await t.turn("hi", id="t1")
        await t.wait_for(relay.TurnComplete)
    body = t.model.requests[0]
    assert body["model"] == "gpt-5" and body["reasoning"] == {"effort": "low"}
    assert t.recorder.of_type(relay.TurnStarted)[0].model_context_window == 272_000


async def test_unknown_tool_gets_unsupported_call(autojump_clock: trio.testing.MockClock) -> None:
    script = {
        "responses": [
            {"function_call": {"name": "teleport", "arguments": {}, "call_id": "c9"}},
            {"text": "ok"},
        ]
    }
    async with testing.open_test_session(script) as t:
        await t.turn("go")
        await t.wait_for(relay.TurnComplete)
    assert relay.FunctionCallOutput("c9", "unsupported call: teleport") in (t.session.history.items)


async def test_model_errors_are_retried_then_reported(
    autojump_clock: trio.testing.MockClock,
) -> None:
    failure = {"http_error": {"status": 500, "message": "boom"}}
    script = {"responses": [failure] * 6}
    async with testing.open_test_session(script) as t:
        await t.turn("go", id="t1")
        await t.wait_for(relay.TurnComplete)
    msgs = [m for m in t.recorder.msgs if isinstance(m, relay.StreamErrorEvent | relay.ErrorEvent)]
    assert [m.message for m in msgs] == [f"Reconnecting... {n}/5" for n in range(1, 6)] + ["boom"]
    assert msgs[-1].code is relay.ErrorCode.SERVER_ERROR
    assert len(t.model.requests) == 6


async def test_context_window_exceeded_is_not_retried(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {
                "http_error": {
                    "status": 400,
                    "code": "context_length_exceeded",
                    "message": "too long",
                }
            }
        ]
    }
    config = relay.Config(model_context_window=1000, rollout=relay.RolloutConfig(enabled=False))
    async with testing.open_test_session(script, config=config) as t:
        await t.turn("go", id="t1")
        await t.wait_for(relay.TurnComplete)
    assert t.recorder.types("t1")[-3:] == ["token_count", "error", "turn_complete"]
    count = t.recorder.of_type(relay.TokenCount)[-1]
    assert count.info.last_token_usage.total_tokens == 1000
    error = t.recorder.of_type(relay.ErrorEvent)[0]
    assert error.code is relay.ErrorCode.CONTEXT_WINDOW_EXCEEDED
    assert len(t.model.requests) == 1


async def test_prompt_input_is_normalised_history(autojump_clock: trio.testing.MockClock) -> None:
    async with testing.open_test_session({"responses": [{"text": "a"}]}) as t:
        await t.turn("hello")
        await t.wait_for(relay.TurnComplete)
        expected = [
            relay.lowlevel.encode_response_item(i)
            for i in normalize_for_prompt(t.session.history.items[:-1])
        ]
    assert t.model.requests[0]["input"] == expected
    kinds = [(i["role"], i["content"][0]["text"].split("\n")[0]) for i in expected]
    assert kinds == [("user", "<environment_context>"), ("user", "hello")]
