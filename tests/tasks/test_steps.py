"""The regular turn's steps as a task of one's own composes them (relay.tasks.TurnSteps)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs
import trio.testing

import relay
from relay import testing
from relay.tasks import TurnSteps, keep_steered

KEY = re.compile(r"sk-[A-Za-z0-9]{8,}")


def redact(items: Sequence[relay.InputItem]) -> list[relay.InputItem]:
    return [
        relay.Text(KEY.sub("[key]", item.text)) if isinstance(item, relay.Text) else item
        for item in items
    ]


@attrs.frozen
class Redacting(relay.SessionTask):
    items: Sequence[relay.InputItem]

    @property
    def kind(self) -> str:
        return "regular"

    @property
    def steerable(self) -> bool:
        return True

    def abort(self, ctx: relay.TaskContext, reason: relay.AbortReason) -> None:
        del reason
        keep_steered(ctx, redact)

    async def run(self, ctx: relay.TaskContext) -> str | None:
        return await TurnSteps(ctx, prepare=redact).run(self.items)


def redacting(op: relay.UserTurn | relay.UserInput) -> Redacting:
    return Redacting(op.items)


TASKS = {"user_turn": redacting, "user_input": redacting}


def sleep_call(seconds: int) -> dict[str, object]:
    return {"function_call": {"name": "sleep", "arguments": {"seconds": seconds}}}


def texts(items: Sequence[relay.ResponseItem]) -> str:
    return "\n".join(item.text() for item in items if isinstance(item, relay.Message))


async def test_steered_input_goes_through_the_task_before_anything_records_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [sleep_call(10), {"text": "done"}]}
    async with testing.open_test_session(script, tasks=TASKS) as t:
        await t.turn("my key is sk-first0123456789", id="t1")
        await t.wait_for(testing.tool_call_started)
        await t.turn("and sk-steered0123456789 too", id="s1")  # steered into t1
        await t.wait_for(relay.TurnComplete)
    sent = str(t.model.requests)
    assert "sk-first" not in sent and "sk-steered" not in sent
    assert t.model.requests[1]["input"][-1]["content"][0]["text"] == "and [key] too"
    history = texts(t.session.history)
    assert "sk-" not in history and history.count("[key]") == 2
    messages = [m.message for m in t.recorder.of_type(relay.UserMessage)]
    assert messages == ["my key is [key]", "and [key] too"]


async def test_steered_input_an_aborted_turn_never_took_is_kept_redacted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with testing.open_test_session({"responses": [sleep_call(60)]}, tasks=TASKS) as t:
        await t.turn("first", id="t1")
        await t.wait_for(testing.tool_call_started)
        await t.turn("never mind sk-steered0123456789", id="s1")
        await t.submit(relay.Interrupt())
        await t.wait_for(relay.TurnAborted)
    assert "never mind [key]" in texts(t.session.history)
    assert "sk-steered" not in texts(t.session.history)


async def test_the_steps_of_a_task_of_ones_own_are_those_of_the_regular_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [sleep_call(1), {"text": "done"}]}
    async with testing.open_test_session(script) as regular:
        await regular.turn("hi")
        await regular.wait_for(relay.TurnComplete)
    async with testing.open_test_session(script, tasks=TASKS) as own:
        await own.turn("hi")
        await own.wait_for(relay.TurnComplete)
    assert [r["input"] for r in own.model.requests] == [r["input"] for r in regular.model.requests]
    assert [type(m) for m in own.recorder.msgs] == [type(m) for m in regular.recorder.msgs]
    # The same history, but for the ids the scripted model gives its responses.
    assert texts(own.session.history) == texts(regular.session.history)
    assert [type(i) for i in own.session.history] == [type(i) for i in regular.session.history]
