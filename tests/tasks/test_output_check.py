"""A turn's final answer is checked against its output schema off the event loop, in bounded
work (tasks/relay/tasks/_steps.py, ``relay.lowlevel.read_output``): an answer over a bound
fails its turn naming the bound, and while a check runs the loop goes on serving the rest."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._base import _json, _schema_check
from relay._exec._real_work import in_thread

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"files": {"type": "array", "items": {"type": "string"}}},
    "required": ["files"],
}
#: How long a held check waits to be let go before it goes on by itself: on the event loop
#: nothing could let it go, and the test then fails instead of hanging.
GUARD_SECONDS = 20


async def _failure(answer: Any, schema: Any) -> relay.ErrorEvent:
    async with testing.open_test_session({"responses": [answer, "still here"]}) as t:
        with pytest.raises(relay.TurnFailed) as failed:
            await t.session.ask("Which files are here?", output_schema=schema)
        later = await t.session.ask("Are you there?")
    assert later.message == "still here"
    error = failed.value.error
    assert error is not None and error.code is relay.ErrorCode.INVALID_OUTPUT
    return error


async def test_an_answer_nested_past_the_bound_fails_its_turn_naming_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    deep: Any = []
    for _ in range(_schema_check.MAX_DEPTH):
        deep = [deep]
    error = await _failure({"json": {"files": deep}}, {"type": "object"})
    assert error.message == (
        "the answer is nested more than 64 levels deep, relay's bound for checking an answer"
    )


async def test_an_answer_whose_check_goes_over_the_steps_fails_its_turn_naming_the_bound(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_schema_check, "MAX_STEPS", 100)
    error = await _failure({"json": {"files": [str(n) for n in range(200)]}}, SCHEMA)
    assert error.message == (
        "checking the answer against the output schema takes more than 100 steps, relay's "
        "bound on that work"
    )


def _held(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> tuple[threading.Event, threading.Event, list[bool]]:
    """Hold the check of the answer ``text`` where it reads the answer, until let go: the
    events that say it started and that let it go, and whether it was let go in time."""
    started, go_on, in_time = threading.Event(), threading.Event(), []
    loads = _json.loads

    def held(data: str | bytes) -> Any:
        if data == text:
            started.set()
            in_time.append(go_on.wait(GUARD_SECONDS))
        return loads(data)

    monkeypatch.setattr(_json, "loads", held)
    return started, go_on, in_time


async def test_while_an_answer_is_checked_the_loop_serves_other_sessions(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, go_on, in_time = _held(monkeypatch, '{"files": ["held"]}')
    answers: list[relay.Answer] = []
    async with (
        testing.open_test_session({"responses": [{"json": {"files": ["held"]}}]}) as held,
        testing.open_test_session({"responses": ["free"]}) as other,
        trio.open_nursery() as nursery,
    ):

        async def ask() -> None:
            answers.append(await held.session.ask("Which files?", output_schema=SCHEMA))

        nursery.start_soon(ask)
        assert await in_thread(started.wait, GUARD_SECONDS)
        # The check is under way: another session's turn runs to its end meanwhile.
        assert (await other.session.ask("Anyone there?")).message == "free"
        go_on.set()
    assert in_time == [True]
    assert answers[0].output == {"files": ["held"]}


async def test_an_interrupt_ends_the_turn_without_waiting_for_its_check(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, go_on, _ = _held(monkeypatch, '{"files": ["held"]}')
    async with testing.open_test_session(
        {"responses": [{"json": {"files": ["held"]}}, "next"]}
    ) as t:
        await t.submit(
            relay.UserTurn([relay.Text("Which files?")], final_output_json_schema=SCHEMA)
        )
        assert await in_thread(started.wait, GUARD_SECONDS)
        await t.submit(relay.Interrupt())
        aborted = await t.wait_for(relay.TurnAborted)
        # The check, let go, ends in its thread; the turn is over and drops what it finds.
        go_on.set()
        assert (await t.session.ask("And now?")).message == "next"
    assert aborted.msg.reason is relay.AbortReason.INTERRUPTED
    assert t.recorder.of_type(relay.TurnComplete)[-1].last_agent_message == "next"
