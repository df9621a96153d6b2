"""Epochs of a rollout: hosts that take a session over from one another (docs/rollout.md,
Epochs). A writer with an epoch marks its lines, refuses to write once its lease ran out or a
newer epoch wrote to the file, and may take a file over from a writer still holding its lock;
the reader ignores lines of an older epoch that come after a newer one began."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import relay
from relay._base._codec import type_tag
from relay._base._errors import RolloutLockedError
from relay._core._writer import Epoch, RolloutWriter, epoch_of_line
from relay._rollout._lines import EventMsgLine
from relay._rollout._reader import parse_rollout, read_rollout
from relay.testing import FIXED_NOW


def config(tmp_path: Path) -> relay.Config:
    return relay.Config(rollout=relay.RolloutConfig(dir=str(tmp_path / "sessions")))


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def turn(text: str) -> relay.UserTurn:
    return relay.UserTurn(items=[relay.Text(text)])


_READERS: dict[int, AsyncIterator[relay.Event]] = {}


def reader(session: relay.Session) -> AsyncIterator[relay.Event]:
    if id(session) not in _READERS:
        _READERS[id(session)] = aiter(session.events())
    return _READERS[id(session)]


async def run_turn(session: relay.Session, text: str, turn_id: str) -> list[relay.Event]:
    """Submit a turn; the events up to its end (or the stream's)."""
    seen: list[relay.Event] = []
    await session.submit(turn(text), id=turn_id)
    async for event in reader(session):
        seen.append(event)
        if isinstance(event.msg, relay.TurnComplete | relay.ShutdownComplete):
            break
    return seen


async def test_a_writer_with_an_epoch_marks_its_lines_and_numbers_events_from_its_start(
    tmp_path: Path,
) -> None:
    epoch = Epoch(3, first_seq=101)
    async with relay.open_session(config(tmp_path), epoch=epoch) as session:
        assert session.rollout is not None
        path = session.rollout.path
        events = await run_turn(session, "hello", "t1")
        # turn_started is on disk by the time a reader sees it: a host taking the session
        # over knows the turn that was running.
        started = next(e for e in events if isinstance(e.msg, relay.TurnStarted))
        assert started.seq > 101
        on_disk = [line["payload"].get("type") for line in lines_of(path)]
        assert "turn_started" in on_disk
    assert [e.seq for e in events] == list(range(101, 101 + len(events)))
    assert isinstance(events[0].msg, relay.SessionConfigured)
    lines = lines_of(path)
    assert {line["epoch"] for line in lines} == {3}
    recorded = {
        line["seq"]: line["payload"]["type"] for line in lines if line["type"] == "event_msg"
    }
    live = {e.seq: e for e in events}
    assert recorded[101] == "session_configured"
    for line in lines:
        if line["type"] == "event_msg" and line["seq"] in live:
            event = live[line["seq"]]
            assert (type_tag(type(event.msg)), event.id) == (line["payload"]["type"], line["id"])
    assert all("seq" not in line for line in lines if line["type"] != "event_msg")
    # The epoch comes before the payload, where a writer finds it without decoding the line.
    raw = path.read_bytes().splitlines()
    assert {epoch_of_line(line) for line in raw} == {3}
    rollout = read_rollout(path)
    assert (rollout.epoch, rollout.last_seq, rollout.notes) == (3, max(recorded), ())
    event_lines = [line for line in rollout.lines if isinstance(line, EventMsgLine)]
    assert [line.seq for line in event_lines] == sorted(recorded)


async def test_a_writer_whose_lease_ran_out_writes_nothing_more(tmp_path: Path) -> None:
    lease = {"holds": True}
    epoch = Epoch(1, holds=lambda: lease["holds"])
    async with relay.open_session(config(tmp_path), epoch=epoch) as session:
        assert session.rollout is not None
        path = session.rollout.path
        await run_turn(session, "one", "t1")
        size = path.stat().st_size
        lease["holds"] = False  # the host was frozen past its lease
        kinds = await run_turn(session, "two", "t2")
        async for event in reader(session):
            kinds.append(event)
    assert path.stat().st_size == size  # not a line of the second turn
    errors = [e.msg for e in kinds if isinstance(e.msg, relay.ErrorEvent)]
    assert [error.code for error in errors] == ["rollout"]
    assert "the lease of epoch 1 ran out" in errors[0].message
    assert isinstance(kinds[-1].msg, relay.ShutdownComplete)
    # The file still reads and resumes: it ends with the first turn.
    assert read_rollout(path).notes == ()


async def test_a_newer_epoch_takes_a_locked_file_over_and_fences_the_older_writer(
    tmp_path: Path,
) -> None:
    async with relay.open_session(config(tmp_path), epoch=Epoch(1)) as old:
        assert old.rollout is not None
        path = old.rollout.path
        await run_turn(old, "before the freeze", "t1")
        # The old host stops answering, its lock still held. Without the right to take over,
        # a resume is refused as before.
        with pytest.raises(RolloutLockedError):
            async with relay.resume_session(path, config(tmp_path), epoch=Epoch(2)):
                pass  # pragma: no cover
        newer = Epoch(2, first_seq=1001, take_over=True)
        async with relay.resume_session(path, config(tmp_path), epoch=newer) as new:
            resumed = await run_turn(new, "after the move", "t2")
            warnings = [e.msg for e in resumed if isinstance(e.msg, relay.WarningEvent)]
            assert any("takes it over without the lock" in w.message for w in warnings)
            assert all(e.seq >= 1001 for e in resumed)
            # The old host wakes up and finishes a turn: nothing of it reaches the file.
            size = path.stat().st_size
            late = await run_turn(old, "a late turn", "t-late")
            # The fence is found when the writer hands its lines over, which may come after the
            # turn's end; the fenced session then shuts down: read on to its last event.
            async for event in reader(old):
                late.append(event)
                if isinstance(event.msg, relay.ShutdownComplete):
                    break
            assert isinstance(late[-1].msg, relay.ShutdownComplete)
            assert path.stat().st_size == size
            assert any(
                isinstance(e.msg, relay.ErrorEvent)
                and "epoch 2 of the session began" in e.msg.message
                for e in late
            )
            await run_turn(new, "still going", "t3")
    rollout = read_rollout(path)
    ended = [
        line.msg.turn_id
        for line in rollout.lines
        if isinstance(line, EventMsgLine) and isinstance(line.msg, relay.TurnComplete)
    ]
    assert ended == ["t1", "t2", "t3"]
    assert rollout.epoch == 2


def test_the_reader_ignores_an_older_epoch_after_a_newer_one_began() -> None:
    def line(kind: str, payload: dict[str, Any], epoch: int | None, seq: int | None = None) -> str:
        record: dict[str, Any] = {"timestamp": "2026-01-02T03:04:05.000Z", "type": kind}
        if epoch is not None:
            record["epoch"] = epoch
        if seq is not None:
            record["seq"] = seq
        record["payload"] = payload
        return json.dumps(record)

    def done(turn_id: str) -> dict[str, Any]:
        return {
            "type": "turn_complete",
            "turn_id": turn_id,
            "last_agent_message": None,
            "duration_ms": 1,
        }

    text = "\n".join(
        [
            line("session_meta", {"id": "s"}, 1),
            line("event_msg", done("a"), 1, 5),
            line("event_msg", done("b"), 2, 20),
            # A host that lost the session slipped a line in after the move: ignored.
            line("event_msg", done("late"), 1, 6),
            # A line without an epoch belongs to the epoch in force.
            line("event_msg", done("c"), None),
            line("event_msg", done("d"), 2, 22),
        ]
    )
    rollout = parse_rollout(text + "\n")
    ended = [
        (line.msg.turn_id, line.seq)
        for line in rollout.lines
        if isinstance(line, EventMsgLine) and isinstance(line.msg, relay.TurnComplete)
    ]
    assert ended == [("a", 5), ("b", 20), ("c", None), ("d", 22)]
    assert [str(note) for note in rollout.notes] == [
        "line 4: written in epoch 1 after epoch 2 began (by a host that had lost the session); "
        "ignored"
    ]
    assert (rollout.epoch, rollout.last_seq, rollout.unfinished_turn) == (2, 22, None)
    # A resume reads through the same rule.
    assert parse_rollout(text + "\n", for_resume=True).notes == rollout.notes


def test_the_reader_names_the_turn_a_session_stopped_in() -> None:
    def event(payload: dict[str, Any]) -> str:
        return json.dumps({"timestamp": "t", "type": "event_msg", "payload": payload})

    started = {"type": "turn_started", "turn_id": "t2", "started_at": 12.5}
    text = "\n".join(
        [
            json.dumps({"timestamp": "t", "type": "session_meta", "payload": {"id": "s"}}),
            event({"type": "turn_started", "turn_id": "t1", "started_at": 10.0}),
            event({"type": "turn_aborted", "turn_id": "t1", "reason": "interrupted"}),
            event(started),
            event({"type": "user_message", "message": "hi"}),
        ]
    )
    assert parse_rollout(text + "\n").unfinished_turn == ("t2", 12.5)
    assert parse_rollout(text + "\n", for_resume=True).unfinished_turn == ("t2", 12.5)


def test_a_newer_writer_passes_over_a_line_an_older_one_slipped_in(tmp_path: Path) -> None:
    first = RolloutWriter.create(tmp_path, "s", FIXED_NOW, epoch=Epoch(1))
    first.write("session_meta", {"id": "s"})
    first.flush()
    second = RolloutWriter.append_to(first.path, epoch=Epoch(2, take_over=True))
    second.write_json("event_msg", '{"type":"shutdown_complete"}', seq=9)
    second.flush()
    # The older writer had passed its checks when it was frozen, and its line lands now.
    with first.path.open("ab") as raw:
        raw.write(
            b'{"timestamp":"2026-01-02T03:04:05.000Z","type":"event_msg","epoch":1,'
            b'"payload":{"type":"shutdown_complete"}}\n'
        )
    second.write_json("event_msg", '{"type":"shutdown_complete"}', seq=10)
    second.flush()
    assert second.failure is None
    first.write_json("event_msg", '{"type":"shutdown_complete"}', seq=3)
    first.flush()
    assert first.failure is not None and "epoch 2 of the session began" in str(first.failure)
    first.close()
    second.close()
    rollout = read_rollout(first.path)
    assert [line.seq for line in rollout.lines if isinstance(line, EventMsgLine)] == [9, 10]
    (note,) = rollout.notes
    assert "written in epoch 1 after epoch 2" in note.message


def test_a_rollout_with_epochs_keeps_the_line_shape_every_reader_knows(tmp_path: Path) -> None:
    # Readers that know nothing of epochs read "timestamp", "type" and "payload" and leave
    # other keys alone: the epoch and seq are keys beside them.
    writer = RolloutWriter.create(tmp_path, "s", FIXED_NOW, epoch=Epoch(4))
    writer.write("session_meta", {"id": "s"})
    writer.write_json("event_msg", '{"type":"shutdown_complete"}', seq=7)
    writer.close()
    for record in lines_of(writer.path):
        assert {"timestamp", "type", "payload"} <= set(record)
        assert set(record) - {"timestamp", "type", "payload"} <= {"epoch", "seq"}
