"""Task factories given to a session: the task interface as the session uses it."""

from __future__ import annotations

import sys
import types
from datetime import datetime

import attrs
import pytest
import trio
import trio.testing

import relay
from relay import tasks, testing


@attrs.frozen
class EchoTurn(relay.SessionTask):
    """A regular turn that answers with its input, without a model."""

    items: tuple[relay.InputItem, ...]

    @property
    def kind(self) -> str:
        return "echo"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        text = " ".join(i.text for i in self.items if isinstance(i, relay.Text))
        ctx.emit(relay.AgentMessage(f"echo: {text}"))
        return text


def broken_compact(op: relay.Compact) -> relay.SessionTask:
    raise RuntimeError(f"no compaction today ({op.instructions})")


async def test_the_session_runs_the_tasks_it_is_given(
    autojump_clock: trio.testing.MockClock,
) -> None:
    echo = {"user_turn": lambda op: EchoTurn(op.items)}
    async with testing.open_test_session({"responses": []}, tasks=echo) as t:
        await t.turn("hello", id="t1")
        await t.wait_for(relay.TurnComplete)
    assert t.recorder.types()[0] == "session_configured"
    assert t.recorder.types()[1:6] == [
        "turn_started",
        "item_started",
        "item_completed",
        "agent_message",
        "turn_complete",
    ]
    assert t.recorder.msgs[1] == relay.TurnStarted(
        "t1", None, testing.FIXED_NOW.timestamp(), kind="echo"
    )
    assert t.recorder.msgs[3] == relay.ItemCompleted(
        "t1", relay.AgentMessageItem(t.recorder.msgs[2].item.id, "echo: hello")
    )
    assert t.recorder.msgs[4:6] == [
        relay.AgentMessage("echo: hello"),
        relay.TurnComplete("t1", "hello", 0),
    ]
    assert t.model.requests == []


async def test_a_task_that_cannot_be_built_is_an_error_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    broken = {"compact": broken_compact}
    async with testing.open_test_session({"responses": [{"text": "ok"}]}, tasks=broken) as t:
        await t.submit(relay.Compact(instructions="briefly"), id="c1")
        await t.turn("still here?", id="t1")
        await t.wait_for(relay.TurnComplete)
    errors = [(e.id, e.msg) for e in t.recorder.events if isinstance(e.msg, relay.ErrorEvent)]
    assert errors == [
        (
            "c1",
            relay.ErrorEvent(
                "cannot start the task of 'compact': RuntimeError('no compaction today (briefly)')",
                relay.ErrorCode.INTERNAL,
            ),
        )
    ]
    assert t.recorder.types("c1") == ["error"]
    assert t.recorder.of_type(relay.TurnComplete) == [relay.TurnComplete("t1", "ok", 0)]


async def test_modules_named_tasks_and_runtime_elsewhere_are_not_relays(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    for name in ("tasks", "runtime"):
        impostor = types.ModuleType(name)
        impostor.__file__ = f"/somewhere/else/{name}.py"
        monkeypatch.setitem(sys.modules, name, impostor)
    async with testing.open_test_session({"responses": [{"text": "ok"}]}) as t:
        await t.turn("hi", id="t1")
        await t.wait_for(relay.TurnComplete)
    assert t.recorder.of_type(relay.TurnComplete) == [relay.TurnComplete("t1", "ok", 0)]


async def test_explicit_tasks_do_not_need_the_task_package(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    own = {"user_turn": tasks.regular, "user_input": tasks.regular, "compact": tasks.compact}
    compactor = relay.tasks.compaction.Compactor
    monkeypatch.setitem(sys.modules, "relay.tasks", None)  # importing it now fails
    script = {"responses": [{"text": "ok"}]}
    async with testing.open_test_session(script, tasks=own, compactor=compactor) as t:
        await t.turn("hi", id="t1")
        await t.wait_for(relay.TurnComplete)
    assert t.recorder.of_type(relay.TurnComplete) == [relay.TurnComplete("t1", "ok", 0)]


async def test_a_crashed_loop_leaves_the_session_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    broken = False

    def clock() -> datetime:
        if broken:
            raise RuntimeError("the clock broke")
        return testing.FIXED_NOW

    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))
    opened: list[relay.Session] = []
    with pytest.raises(RuntimeError, match="the clock broke"):
        async with relay.open_session(config, clock=clock) as session:
            opened.append(session)
            broken = True
            await session.submit(relay.UserTurn(items=[relay.Text("hi")]))
            await trio.sleep_forever()
    (session,) = opened
    assert session.closed
    with pytest.raises(relay.ClosedSessionError):
        session.submit_nowait(relay.Interrupt())
    # The session announced itself, then its stream ended with the loop.
    assert [type(event.msg) async for event in session.events()] == [relay.SessionConfigured]
