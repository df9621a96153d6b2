"""Task kinds given to a session: the task interface as the session uses it."""

from __future__ import annotations

import sys
import types
from datetime import datetime

import attrs
import pytest
import trio
import trio.testing

import runtime
import tasks
from runtime import testing


@attrs.frozen
class EchoTurn(runtime.lowlevel.SessionTask):
    """A regular turn that answers with its input, without a model."""

    items: tuple[runtime.InputItem, ...]

    @property
    def kind(self) -> runtime.lowlevel.TaskKind:
        return runtime.lowlevel.TaskKind.REGULAR

    async def run(self, ctx: runtime.lowlevel.TaskContext) -> str | None:
        text = " ".join(i.text for i in self.items if isinstance(i, runtime.Text))
        ctx.emit(runtime.AgentMessage(f"echo: {text}"))
        return text


def broken_compact(instructions: str | None) -> runtime.lowlevel.SessionTask:
    raise RuntimeError(f"no compaction today ({instructions})")


async def test_the_session_runs_the_task_kinds_it_is_given(
    autojump_clock: trio.testing.MockClock,
) -> None:
    kinds = runtime.lowlevel.TaskKinds(regular=EchoTurn, compact=tasks.TASK_KINDS.compact)
    async with testing.open_test_session({"responses": []}, task_kinds=kinds) as t:
        await t.turn("hello", id="t1")
        await t.wait_for(runtime.TurnComplete)
    assert t.recorder.msgs[:3] == [
        runtime.TurnStarted("t1", None, testing.FIXED_NOW.timestamp()),
        runtime.AgentMessage("echo: hello"),
        runtime.TurnComplete("t1", "hello", 0),
    ]
    assert t.model.requests == []


async def test_a_task_that_cannot_be_built_is_an_error_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    kinds = runtime.lowlevel.TaskKinds(regular=tasks.TASK_KINDS.regular, compact=broken_compact)
    async with testing.open_test_session({"responses": [{"text": "ok"}]}, task_kinds=kinds) as t:
        await t.submit(runtime.Compact(instructions="briefly"), id="c1")
        await t.turn("still here?", id="t1")
        await t.wait_for(runtime.TurnComplete)
    errors = [(e.id, e.msg) for e in t.recorder.events if isinstance(e.msg, runtime.ErrorEvent)]
    assert errors == [
        (
            "c1",
            runtime.ErrorEvent(
                "cannot start the task: RuntimeError('no compaction today (briefly)')",
                runtime.ErrorCode.INTERNAL,
            ),
        )
    ]
    assert t.recorder.types("c1") == ["error"]
    assert t.recorder.of_type(runtime.TurnComplete) == [runtime.TurnComplete("t1", "ok", 0)]


async def test_a_foreign_tasks_module_is_a_clear_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    impostor = types.ModuleType("tasks")
    impostor.__file__ = "/somewhere/else/tasks.py"
    monkeypatch.setitem(sys.modules, "tasks", impostor)
    with pytest.raises(runtime.ConfigError, match=r"/somewhere/else/tasks\.py is not relay's"):
        async with runtime.open_session(runtime.Config()):
            pass  # pragma: no cover


async def test_explicit_task_kinds_do_not_need_the_tasks_package(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    kinds = tasks.TASK_KINDS
    monkeypatch.setitem(sys.modules, "tasks", types.ModuleType("tasks"))
    async with testing.open_test_session({"responses": [{"text": "ok"}]}, task_kinds=kinds) as t:
        await t.turn("hi", id="t1")
        await t.wait_for(runtime.TurnComplete)
    assert t.recorder.of_type(runtime.TurnComplete) == [runtime.TurnComplete("t1", "ok", 0)]


async def test_a_crashed_loop_leaves_the_session_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    broken = False

    def clock() -> datetime:
        if broken:
            raise RuntimeError("the clock broke")
        return testing.FIXED_NOW

    config = runtime.Config(rollout=runtime.RolloutConfig(enabled=False))
    opened: list[runtime.Session] = []
    with pytest.raises(RuntimeError, match="the clock broke"):
        async with runtime.open_session(config, clock=clock) as session:
            opened.append(session)
            broken = True
            await session.submit(runtime.UserTurn(items=[runtime.Text("hi")]))
            await trio.sleep_forever()
    (session,) = opened
    assert session.closed
    with pytest.raises(runtime.ClosedSessionError):
        session.submit_nowait(runtime.Interrupt())
    assert [event async for event in session.events()] == []
