"""Ops an embedder adds, and the tasks that serve them: the same life as relay's own.

The tasks here are written against ``relay.SessionTask`` and ``relay.TaskContext`` alone, as
an embedder writes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
import trio
import trio.testing

import relay
from relay import testing

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples" / "tasks"


@attrs.frozen
class Echo(relay.SessionTask):
    text: str

    @property
    def kind(self) -> str:
        return "echo"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        ctx.emit(relay.AgentMessage(f"echo: {self.text}"))
        return None


@attrs.frozen
class Boom(relay.SessionTask):
    @property
    def kind(self) -> str:
        return "boom"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        raise ValueError("the boom task always fails")


@attrs.define
class Sleeper(relay.SessionTask):
    """Sleeps until cancelled; its abort leaves a note in the history."""

    aborted: list[relay.AbortReason] = attrs.field(factory=list)

    @property
    def kind(self) -> str:
        return "sleep"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        await anyio.sleep_forever()
        return None

    def abort(self, ctx: relay.TaskContext, reason: relay.AbortReason) -> None:
        self.aborted.append(reason)
        ctx.record(relay.user_message(f"the sleep was {reason.value}"))


def echo(op: relay.CustomOp) -> Echo:
    return Echo(str(op.fields.get("text", "")))


def tasks(**more: Any) -> dict[str, Any]:
    return {"echo": echo, "boom": lambda op: Boom(), **more}


def turn_events(t: testing.TestSession, turn_id: str) -> list[str]:
    return t.recorder.types(turn_id)


async def test_a_custom_op_runs_its_task_between_turn_started_and_turn_complete(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with testing.open_test_session({}, tasks=tasks()) as t:
        await t.submit(relay.CustomOp("echo", {"text": "hi"}), id="e1")
        await t.wait_for(relay.TurnComplete)
    assert turn_events(t, "e1") == [
        "turn_started",
        "item_started",
        "item_completed",
        "agent_message",
        "turn_complete",
    ]
    assert t.recorder.of_type(relay.TurnComplete) == [relay.TurnComplete("e1", "echo: hi", 0)]
    assert t.session.statistics().running_kind is None


async def test_a_custom_op_in_json_reaches_its_task_with_its_fields(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with testing.open_test_session({}, tasks=tasks()) as t:
        t.session.submit_json_nowait({"type": "echo", "text": "from json"}, id="j1")
        await t.wait_for(relay.TurnComplete)
    assert t.recorder.of_type(relay.AgentMessage) == [relay.AgentMessage("echo: from json")]


async def test_an_unregistered_type_is_refused_naming_the_closest(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with testing.open_test_session({}, tasks=tasks()) as t:
        with pytest.raises(relay.InvalidOpError, match=r"'ecco' \(did you mean 'echo'\?\)"):
            await t.submit(relay.CustomOp("ecco"))
        t.session.submit_json_nowait({"type": "ecco"}, id="bad")
        await t.wait_for(relay.ErrorEvent)
    (error,) = t.recorder.of_type(relay.ErrorEvent)
    assert error.code is relay.ErrorCode.INVALID_OP and "did you mean 'echo'" in error.message


async def test_an_exception_in_a_task_is_an_error_naming_the_kind_and_the_session_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with testing.open_test_session({"responses": ["fine"]}, tasks=tasks()) as t:
        await t.submit(relay.CustomOp("boom"), id="b1")
        await t.wait_for(relay.TurnComplete)
        await t.turns("still there?")
    errors = [(e.id, e.msg) for e in t.recorder.events if isinstance(e.msg, relay.ErrorEvent)]
    assert errors == [
        (
            "b1",
            relay.ErrorEvent(
                "the boom task failed: ValueError('the boom task always fails')",
                relay.ErrorCode.INTERNAL,
            ),
        )
    ]
    assert t.recorder.of_type(relay.TurnComplete)[-1].last_agent_message == "fine"


async def test_a_custom_op_replaces_the_running_turn_by_default(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": "slow", "delay_ms": 10_000}]}
    async with testing.open_test_session(script, tasks=tasks()) as t:
        await t.turn("long question", id="t1")
        await t.wait_for(relay.TurnStarted)
        await t.submit(relay.CustomOp("echo", {"text": "now"}), id="e1")
        await t.wait_for(relay.TurnComplete)
    ends = [m for m in t.recorder.msgs if isinstance(m, relay.TurnAborted | relay.TurnStarted)]
    assert [(type(m).__name__, m.turn_id) for m in ends] == [
        ("TurnStarted", "t1"),
        ("TurnAborted", "t1"),
        ("TurnStarted", "e1"),
    ]
    assert t.recorder.of_type(relay.TurnAborted)[0].reason is relay.AbortReason.REPLACED


async def test_a_queued_custom_op_waits_and_a_steered_one_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": "answer", "delay_ms": 1_000}]}
    async with testing.open_test_session(script, tasks=tasks()) as t:
        await t.turn("question", id="t1")
        await t.wait_for(relay.TurnStarted)
        await t.submit(relay.CustomOp("echo", {"text": "later"}, relay.OnBusy.QUEUE), id="q1")
        await t.submit(relay.CustomOp("echo", {"text": "in"}, relay.OnBusy.STEER), id="s1")
        await t.wait_for(relay.TurnComplete, 2)
    completes = [m.turn_id for m in t.recorder.of_type(relay.TurnComplete)]
    assert completes == ["t1", "q1"]
    (refused,) = [e for e in t.recorder.events if isinstance(e.msg, relay.ErrorEvent)]
    assert refused.id == "s1"
    assert refused.msg.code is relay.ErrorCode.ACTIVE_TURN_NOT_STEERABLE


async def test_an_interrupt_ends_a_custom_task_within_the_grace_and_runs_its_abort(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sleeper = Sleeper()
    async with testing.open_test_session({}, tasks=tasks(sleep=lambda op: sleeper)) as t:
        await t.submit(relay.CustomOp("sleep"), id="z1")
        await t.wait_for(relay.TurnStarted)
        started = trio.current_time()
        await t.submit(relay.Interrupt())
        aborted = await t.wait_for(relay.TurnAborted)
        took = trio.current_time() - started
    assert aborted.msg == relay.TurnAborted("z1", relay.AbortReason.INTERRUPTED, 0)
    assert took <= 0.1
    assert sleeper.aborted == [relay.AbortReason.INTERRUPTED]
    texts = [m.text() for m in t.session.history.items if isinstance(m, relay.Message)]
    assert texts[-2] == "the sleep was interrupted"


async def test_ask_returns_the_answer_its_items_and_its_usage(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {"function_call": {"name": "sleep", "arguments": {"seconds": 0}, "call_id": "c1"}},
            {"text": "Done.", "total_tokens": 900},
        ]
    }
    async with testing.open_test_session(script) as t:
        answer = await t.session.ask("Wait a moment.")
    assert answer.message == "Done."
    kinds = [type(item).__name__ for item in answer.items]
    assert kinds == ["UserMessageItem", "ToolCallItem", "AgentMessageItem"]
    counted = [m.info.last_token_usage for m in t.recorder.of_type(relay.TokenCount)]
    assert answer.usage.total_tokens == sum(u.total_tokens for u in counted) > 900


async def test_ask_raises_turn_failed_with_the_error_of_a_failed_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"http_error": {"status": 400, "message": "bad request"}}]}
    async with testing.open_test_session(script) as t:
        with pytest.raises(relay.TurnFailed) as caught:
            await t.session.ask("hello")
    assert caught.value.error is not None
    assert caught.value.error.code is relay.ErrorCode.BAD_REQUEST


async def test_ask_waits_for_a_running_turn_and_answers_its_own(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": "first", "delay_ms": 500}, {"text": "second"}]}
    async with testing.open_test_session(script) as t:
        await t.turn("one", id="t1")
        await t.wait_for(relay.TurnStarted)
        answer = await t.session.ask("two")
    assert answer.message == "second"
    assert [m.last_agent_message for m in t.recorder.of_type(relay.TurnComplete)] == [
        "first",
        "second",
    ]


async def test_wait_for_with_a_timeout_says_what_it_saw(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with testing.open_test_session({"responses": ["hi"]}) as t:
        await t.turns("hello")
        with pytest.raises(
            TimeoutError, match=r"waited 5 s for 1 TurnAborted event\(s\) and saw 0"
        ):
            await t.wait_for(relay.TurnAborted, timeout=5)


async def test_the_review_example_reads_through_the_tool_and_answers(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    from relay._open import load_object

    review = load_object(f"{EXAMPLES / 'review.py'}:review", what="task review")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("x = 1 / 0\n")
    script = json.loads((EXAMPLES / "review.model.json").read_text())
    config = relay.Config(cwd=str(tmp_path), rollout=relay.RolloutConfig(enabled=False))
    async with testing.open_test_session(script, config=config, tasks={"review": review}) as t:
        await t.submit(relay.CustomOp("review", {"path": "src/app.py"}), id="r1")
        await t.wait_for(relay.TurnComplete)
    request = t.model.requests[0]
    assert "x = 1 / 0" in testing.user_texts(request)[-1]
    assert request["tools"] == []
    (done,) = t.recorder.of_type(relay.TurnComplete)
    assert done.last_agent_message == script["responses"][0]["text"]
    tools = [
        m.item
        for m in t.recorder.msgs
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.ToolCallItem)
    ]
    assert [item.name for item in tools] == ["read_file"]


async def test_plan_then_act_interrupted_between_its_steps_leaves_a_whole_history(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    from relay._open import load_object

    plan_act = load_object(f"{EXAMPLES / 'plan_act.py'}:plan_act", what="task plan_act")
    script = {
        "responses": [{"text": "1. Look.\n2. Report."}, {"text": "never", "delay_ms": 60_000}]
    }
    config = relay.Config(cwd=str(tmp_path), rollout=relay.RolloutConfig(enabled=False))
    async with testing.open_test_session(script, config=config, tasks={"plan_act": plan_act}) as t:
        await t.submit(relay.CustomOp("plan_act", {"goal": "Look around."}), id="p1")
        await t.wait_for(relay.AgentMessage)
        await trio.testing.wait_all_tasks_blocked()
        await t.submit(relay.Interrupt())
        await t.wait_for(relay.TurnAborted)
    messages = [
        (m.role, m.text())
        for m in t.session.history.items
        if isinstance(m, relay.Message) and not m.text().startswith("<")
    ]
    assert messages[-3:] == [
        ("user", "Look around."),
        ("assistant", "1. Look.\n2. Report."),
        ("user", "Carry out the plan above, one step at a time, and say what you did."),
    ]
    last = t.session.history.items[-1]
    assert isinstance(last, relay.Message) and last.text().startswith("<turn_aborted>")
    calls = [i for i in t.session.history.items if isinstance(i, relay.FunctionCall)]
    assert calls == []


@attrs.frozen
class Forger(relay.SessionTask):
    """Reports what it is given, whatever it is."""

    msg: Any

    @property
    def kind(self) -> str:
        return "forge"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        ctx.emit(self.msg)
        return None


@pytest.mark.parametrize(
    ("msg", "refusal"),
    [
        (relay.ShutdownComplete(), "ValueError('a task cannot report shutdown_complete"),
        (relay.TurnComplete("t9", None, 0), "ValueError('a task cannot report turn_complete"),
        ("text", "TypeError('a task reports event messages, not str')"),
    ],
)
async def test_a_task_cannot_report_the_sessions_life_nor_what_is_no_event(
    msg: Any, refusal: str, autojump_clock: trio.testing.MockClock
) -> None:
    tasks = {"forge": lambda op: Forger(msg)}
    async with testing.open_test_session({"responses": []}, tasks=tasks) as t:
        await t.submit(relay.CustomOp("forge", {}), id="f1")
        await t.wait_for(relay.TurnComplete)
        answer = await t.session.ask("still here?")
    assert answer.message == "echo: still here?"
    of_f1 = [e.msg for e in t.recorder.events if e.id == "f1"]
    assert [type(m) for m in of_f1] == [relay.TurnStarted, relay.ErrorEvent, relay.TurnComplete]
    error = of_f1[1]
    assert isinstance(error, relay.ErrorEvent)
    assert error.message.startswith(f"the forge task failed: {refusal}")
    assert len(t.recorder.of_type(relay.ShutdownComplete)) == 1  # the real one, last
    assert isinstance(t.recorder.msgs[-1], relay.ShutdownComplete)


def test_a_task_module_that_exits_as_it_is_imported_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    from relay._open import load_object

    (tmp_path / "exits.py").write_text("import sys\nsys.exit(0)\n")
    with pytest.raises(relay.ConfigError, match=r"cannot import .*exits\.py: it exited \(0\)"):
        load_object(f"{tmp_path / 'exits.py'}:make", what="task exits")


# ------------------------------------------------------------------ failures a task means


@attrs.frozen
class GivesUp(relay.SessionTask):
    @property
    def kind(self) -> str:
        return "give_up"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        raise relay.ToolError("the file to lint is not there")


def refuses(op: relay.CustomOp) -> Echo:
    raise ValueError("a picky op needs a 'text' string")


async def test_a_factory_that_refuses_its_op_and_a_task_that_gives_up_are_task_failed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    more = {"picky": refuses, "give_up": lambda op: GivesUp()}
    async with testing.open_test_session({}, tasks=tasks(**more)) as t:
        await t.submit(relay.CustomOp("picky"), id="p1")
        await t.wait_for(relay.ErrorEvent)
        await t.submit(relay.CustomOp("give_up"), id="g1")
        await t.wait_for(relay.TurnComplete)
    errors = [(e.id, e.msg) for e in t.recorder.events if isinstance(e.msg, relay.ErrorEvent)]
    assert errors == [
        (
            "p1",
            relay.ErrorEvent(
                "cannot start the task of 'picky': "
                "ValueError(\"a picky op needs a 'text' string\")",
                relay.ErrorCode.TASK_FAILED,
            ),
        ),
        (
            "g1",
            relay.ErrorEvent(
                "the give_up task failed: ToolError('the file to lint is not there')",
                relay.ErrorCode.TASK_FAILED,
            ),
        ),
    ]


# ------------------------------------------------------------------ installed packages


async def test_two_installed_packages_claiming_one_op_type_is_a_warning_naming_both(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay._open import _tasks

    claims = (
        ("lint", "lint_a.tasks:lint", "lint-a"),
        ("lint", "lint_b.tasks:lint", "lint-b"),
        ("fmt", "lint_b.tasks:fmt", "lint-b"),
    )
    monkeypatch.setattr(_tasks, "_entry_points", lambda: claims)
    async with testing.open_test_session({}) as t:
        await t.wait_for(relay.WarningEvent)
    (warning,) = [e for e in t.recorder.events if isinstance(e.msg, relay.WarningEvent)]
    assert warning.id == "tasks"
    assert warning.msg.message == (
        "the op type 'lint' is claimed by 2 installed packages: lint-a (lint_a.tasks:lint) and "
        "lint-b (lint_b.tasks:lint); lint-b's is used. Name the one to use in [tasks], with "
        "relay --task or with open_session(tasks=...)"
    )
    # A factory given to the session settles it: no warning.
    monkeypatch.setattr(_tasks, "_entry_points", lambda: claims[:2])
    async with testing.open_test_session({}, tasks={"lint": echo}) as t:
        pass
    assert not t.recorder.of_type(relay.WarningEvent)


def _forgets(op: relay.CustomOp) -> Any:
    Echo("never returned")


async def _awaits(op: relay.CustomOp) -> relay.SessionTask:
    return Echo("too late")


def _exits(op: relay.CustomOp) -> Any:
    raise SystemExit(2)


@pytest.mark.parametrize(
    ("factory", "why"),
    [
        (_forgets, "returned None (a forgotten return?)"),
        (_awaits, "is an async function"),
        (lambda op: object(), "returned object, which is no relay.SessionTask"),
        (_exits, "SystemExit(2)"),
    ],
)
async def test_a_factory_that_makes_no_task_is_an_error_naming_the_op_type(
    factory: Any, why: str, autojump_clock: trio.testing.MockClock
) -> None:
    async with testing.open_test_session({"responses": []}, tasks={"odd": factory}) as t:
        await t.submit(relay.CustomOp("odd", {}), id="o1")
        answer = await t.session.ask("still here?")
    assert answer.message == "echo: still here?"
    (error,) = [e.msg for e in t.recorder.events if e.id == "o1"]
    assert isinstance(error, relay.ErrorEvent)
    assert error.code == relay.ErrorCode.TASK_FAILED
    assert error.message.startswith("cannot start the task of 'odd': ")
    assert why in error.message
