"""A turn cannot run for ever: ``max_steps_per_turn`` bounds its model requests, and a run of
identical tool calls with identical outputs is warned about, then ends the turn."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._base._config import config_from_dict
from relay.tasks._guard import LoopGuard


def call(name: str = "list_dir", arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"function_call": {"name": name, "arguments": dict(arguments or {"path": "."})}}


def config(**fields: Any) -> relay.Config:
    return relay.Config(rollout=relay.RolloutConfig(enabled=False), **fields)


def calls_have_outputs(history: list[relay.ResponseItem]) -> bool:
    calls = [i.call_id for i in history if isinstance(i, relay.FunctionCall)]
    outputs = [i.call_id for i in history if isinstance(i, relay.FunctionCallOutput)]
    return calls == outputs


async def test_a_server_that_always_calls_a_tool_is_stopped_at_max_steps_per_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Each call is different (a different path), so only the step limit can stop the turn.
    script = {"responses": [call("sleep", {"seconds": n % 7 / 1000}) for n in range(50)]}
    cfg = config(max_steps_per_turn=6)
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turn("go", id="t1")
        await t.wait_for(relay.TurnComplete, timeout=60)
        errors = t.recorder.of_type(relay.ErrorEvent)
        assert len(t.model.requests) == 6
        assert calls_have_outputs(list(t.session.history.items))
        await t.turns("still there?")
    assert [e.code for e in errors] == [relay.ErrorCode.STEP_LIMIT]
    assert "6 model requests" in errors[0].message
    assert "max_steps_per_turn" in errors[0].message
    assert t.recorder.types("t1")[-1] == "turn_complete"
    assert len(t.recorder.of_type(relay.TurnComplete)) == 2


async def test_the_default_step_limit_ends_a_turn_that_would_never_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [call("sleep", {"seconds": n / 1000}) for n in range(400)]}
    async with testing.open_test_session(script, config=config()) as t:
        await t.turn("go", id="t1")
        await t.wait_for(relay.TurnComplete, timeout=600)
        calls = [i for i in t.session.history.items if isinstance(i, relay.FunctionCall)]
    assert len(calls) == relay.Config().max_steps_per_turn == 200
    assert [e.code for e in t.recorder.of_type(relay.ErrorEvent)] == [relay.ErrorCode.STEP_LIMIT]


async def look(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
    return "a.py b.py"


#: A tool that always gives the same output, as listing an unchanged folder does.
LOOK = relay.Tool("list_dir", "List a folder.", {"type": "object"}, look)


async def test_identical_calls_are_warned_about_then_end_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [call() for _ in range(400)]}
    cfg = config(max_identical_tool_calls=8)
    async with testing.open_test_session(script, config=cfg, tools=[LOOK]) as t:
        await t.turn("go", id="t1")
        await t.wait_for(relay.TurnComplete, timeout=60)
        history = list(t.session.history.items)
        await t.turns("and now?")  # a new turn, with a guard of its own
    first = [e.msg for e in t.recorder.events if e.id == "t1"]
    warnings = [m for m in first if isinstance(m, relay.WarningEvent)]
    errors = [m for m in first if isinstance(m, relay.ErrorEvent)]
    assert len(warnings) == 1
    assert "list_dir" in warnings[0].message and "4 times" in warnings[0].message
    assert [e.code for e in errors] == [relay.ErrorCode.TOOL_LOOP]
    assert "list_dir" in errors[0].message and "8 times" in errors[0].message
    assert "max_identical_tool_calls" in errors[0].message
    # Eight calls ran, each with its output; the ninth request was never sent.
    assert sum(isinstance(i, relay.FunctionCall) for i in history) == 8
    assert calls_have_outputs(history)
    types = t.recorder.types("t1")
    assert types.index("warning") < types.index("error") < types.index("turn_complete")


async def test_a_call_repeated_with_changing_outputs_is_not_a_loop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    counter = iter(range(1_000))

    async def poll(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
        return f"status {next(counter)}"

    tool = relay.Tool("poll", "Poll.", {"type": "object"}, poll)
    script = {"responses": [*[call("poll", {}) for _ in range(12)], "done"]}
    cfg = config(max_identical_tool_calls=4)
    async with testing.open_test_session(script, config=cfg, tools=[tool]) as t:
        await t.turn("go", id="t1")
        await t.wait_for(relay.TurnComplete, timeout=60)
    assert t.recorder.of_type(relay.ErrorEvent) == []
    assert t.recorder.of_type(relay.WarningEvent) == []
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "done"


@pytest.mark.parametrize(
    ("key", "value"), [("max_steps_per_turn", -1), ("max_identical_tool_calls", -2)]
)
def test_negative_limits_are_configuration_errors(key: str, value: int) -> None:
    with pytest.raises(relay.ConfigError, match=key):
        config_from_dict({key: value})


# ------------------------------------------------------------------ the guard, without a loop


def test_the_guard_counts_runs_of_the_same_call_and_output() -> None:
    guard = LoopGuard(max_steps=0, max_identical=6)
    seen = [guard.note_call("ls", '{"path": "."}', "a b") for _ in range(6)]
    assert seen == [None, None, "warn", None, None, "stop"]
    # Arguments that differ only in spacing or key order are the same call.
    guard = LoopGuard(max_steps=0, max_identical=2)
    assert guard.note_call("ls", '{"a": 1, "b": 2}', "x") is None
    assert guard.note_call("ls", '{"b":2,"a":1}', "x") == "stop"


def test_arguments_python_cannot_read_are_compared_as_written() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    guard = LoopGuard(max_steps=0, max_identical=2)
    assert guard.note_call("ls", deep, "x") is None
    assert guard.note_call("ls", deep, "x") == "stop"


def test_another_call_or_output_starts_a_new_run() -> None:
    guard = LoopGuard(max_steps=0, max_identical=3)
    assert guard.note_call("ls", "{}", "x") is None
    assert guard.note_call("ls", "{}", "y") is None
    assert guard.note_call("cat", "{}", "y") is None
    assert guard.note_call("cat", "{}", "y") == "warn"
    assert guard.note_call("cat", "{}", "y") == "stop"


def test_zero_turns_a_limit_off() -> None:
    guard = LoopGuard(max_steps=0, max_identical=0)
    assert {guard.note_call("ls", "{}", "x") for _ in range(1_000)} == {None}
    assert all(guard.step_allowed() for _ in range(1_000))


def test_the_step_limit_allows_exactly_max_steps() -> None:
    guard = LoopGuard(max_steps=3, max_identical=0)
    assert [guard.step_allowed() for _ in range(5)] == [True, True, True, False, False]
