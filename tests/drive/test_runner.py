"""The op-script runner: how much work a ``wait_for`` costs as a session grows."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import relay
import relay._drive._op_script as op_script
from relay import testing
from relay._base import _protocol as p
from relay._base._errors import ScriptError
from relay._drive._op_script import WaitFor, parse_op_script
from relay._drive._runner import ScriptRunner

TURNS = 40


async def test_waits_look_at_each_event_once(monkeypatch: pytest.MonkeyPatch) -> None:
    looked_at = 0
    real = op_script.matches

    def counting(wait: WaitFor, msg: dict[str, Any]) -> bool:
        nonlocal looked_at
        looked_at += 1
        return real(wait, msg)

    monkeypatch.setattr(op_script, "matches", counting)
    rows: list[dict[str, Any]] = []
    for n in range(TURNS):
        rows.append(
            {
                "id": f"t{n}",
                "op": {"type": "user_input", "items": [{"type": "text", "text": f"turn {n}"}]},
            }
        )
        rows.append({"wait_for": {"type": "turn_complete", "count": n + 1}})
        rows.append(
            {
                "wait_for": {
                    "type": "item_completed",
                    "count": n + 1,
                    "match": {"item.type": "user_message"},
                }
            }
        )
    steps = parse_op_script("\n".join(json.dumps(row) for row in rows))
    events: list[relay.Event] = []
    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))
    async with relay.open_session(config, model=testing.ScriptedModel(None)) as session:
        runner = ScriptRunner(session, lambda event, _: events.append(event))
        await runner.run(steps)
    completed = [e for e in events if isinstance(e.msg, p.TurnComplete)]
    items = [e for e in events if isinstance(e.msg, p.ItemCompleted)]
    assert len(completed) == TURNS
    # Each wait condition looks at each event of its type once over the whole script.
    assert looked_at <= len(completed) + len(items)


def _turns(count: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for n in range(count):
        rows.append(
            {
                "id": f"t{n}",
                "op": {"type": "user_input", "items": [{"type": "text", "text": f"turn {n}"}]},
            }
        )
        rows.append({"wait_for": {"type": "turn_complete", "count": n + 1}})
    return rows


async def test_the_runner_keeps_no_event_it_has_read() -> None:
    rows = _turns(TURNS)
    steps = parse_op_script("\n".join(json.dumps(row) for row in rows))
    read: list[dict[str, Any]] = []
    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))
    async with relay.open_session(config, model=testing.ScriptedModel(None)) as session:
        runner = ScriptRunner(session, lambda _, msg: read.append(msg))
        await runner.run(steps)
    assert runner.events_read == len(read) > TURNS
    # Each event's JSON is referred to from `read` alone, as a dict the runner never saw is:
    # the runner holds none of them, however long the script.
    unseen: list[dict[str, Any]] = [{"type": "turn_complete"}]
    assert {sys.getrefcount(msg) for msg in read} == {sys.getrefcount(msg) for msg in unseen}


async def test_a_wait_named_late_counts_from_the_first_event() -> None:
    # The first wait on item_completed comes after every turn has run: it still counts the
    # items of all of them, although the runner kept none of those events.
    rows = [
        *_turns(5),
        {
            "wait_for": {
                "type": "item_completed",
                "count": 5,
                "match": {"item.type": "user_message"},
            }
        },
    ]
    steps = parse_op_script("\n".join(json.dumps(row) for row in rows))
    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))
    async with relay.open_session(config, model=testing.ScriptedModel(None)) as session:
        runner = ScriptRunner(session, lambda _event, _msg: None)
        await runner.run(steps)
    assert runner.events_read > 5


async def test_a_released_script_is_given_back_as_it_runs() -> None:
    steps = parse_op_script("\n".join(json.dumps(row) for row in _turns(TURNS)))
    left_at_each_turn: list[int] = []

    def sink(event: relay.Event, _msg: dict[str, Any]) -> None:
        if isinstance(event.msg, p.TurnComplete):
            left_at_each_turn.append(len(steps))

    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))
    async with relay.open_session(config, model=testing.ScriptedModel(None)) as session:
        await ScriptRunner(session, sink).run(steps, release=True)
    # Each turn's op and wait are gone from the list by the time the next turn ends.
    assert len(left_at_each_turn) == TURNS
    assert all(left <= 2 * (TURNS - turn) for turn, left in enumerate(left_at_each_turn, 1))
    assert steps == []


async def test_a_wait_holds_one_idle_waker_however_often_it_wakes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every turn is submitted before the one wait: the session stays busy while the wait
    # wakes at each count, and each wake-up leaves the session one waker to set, not one more.
    rows: list[dict[str, Any]] = [
        {
            "id": f"t{n}",
            "op": {
                "type": "user_turn",
                "items": [{"type": "text", "text": f"turn {n}"}],
                "on_busy": "queue",
            },
        }
        for n in range(TURNS)
    ]
    rows.append({"wait_for": {"type": "turn_started", "count": TURNS}})
    steps = parse_op_script("\n".join(json.dumps(row) for row in rows))
    held: list[int] = []
    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))
    async with relay.open_session(config, model=testing.ScriptedModel(None)) as session:
        real = session.wake_when_idle

        def counting(event: Any) -> None:
            real(event)
            held.append(len(session._idle_wakers))

        monkeypatch.setattr(session, "wake_when_idle", counting)
        await ScriptRunner(session, lambda _event, _msg: None).run(steps)
    assert len(held) > 1
    assert max(held) == 1


async def test_a_wait_after_an_op_without_events_fails_when_the_session_is_idle() -> None:
    # override_turn_context emits nothing: only the session going idle can end the wait.
    rows = [
        {"op": {"type": "override_turn_context", "model": "other"}},
        {"wait_for": {"type": "turn_complete"}},
    ]
    steps = parse_op_script("\n".join(json.dumps(row) for row in rows))
    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))
    with pytest.raises(ScriptError, match="line 2: wait_for 'turn_complete'"):
        async with relay.open_session(config, model=testing.ScriptedModel(None)) as session:
            await ScriptRunner(session, lambda _event, _msg: None).run(steps)


async def test_with_lines_each_events_line_is_the_rollouts_json(tmp_path: Path) -> None:
    steps = parse_op_script("\n".join(json.dumps(row) for row in _turns(TURNS)))
    lines: list[str] = []
    read: list[dict[str, Any]] = []
    config = relay.Config(rollout=relay.RolloutConfig(dir=str(tmp_path)))
    async with relay.open_session(config, model=testing.ScriptedModel(None)) as session:
        runner = ScriptRunner(session, lambda _, msg: read.append(msg), lines=lines.append)
        await runner.run(steps)
        rollout = session.rollout
        assert rollout is not None
        path = rollout.path
    assert [json.loads(line)["msg"] for line in lines] == read
    assert all(line.endswith("}\n") and line.count("\n") == 1 for line in lines)
    persisted = [
        json.loads(line)["payload"]
        for line in path.read_text().splitlines()
        if json.loads(line)["type"] == "event_msg"
    ]
    assert persisted == [msg for msg in read if msg["type"] in {m["type"] for m in persisted}]
    # The rollout and the lines carry one JSON form of each event, byte for byte.
    texts = {line[line.index('"msg":') + 6 : -2] for line in lines}
    for line in path.read_text().splitlines():
        if '"type":"event_msg"' in line:
            assert line[line.index('"payload":') + 10 : -1] in texts
