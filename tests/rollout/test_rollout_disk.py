"""The rollout on a file system that fails: no locks (ENOLCK), a full disk (ENOSPC), a file
past its size limit (EFBIG). The session goes on unlocked with a warning, or reports the
failure and shuts down in order; the file keeps whole lines only and is never left empty.

The processes that hit a real limit (RLIMIT_FSIZE, a small tmpfs) are in
``tests/reliability/test_files_and_streams.py``; here the failing call is the writer's own.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import types
from pathlib import Path
from typing import Any

import pytest
import trio

import relay
from relay import testing
from relay._base._errors import RolloutError
from relay._core import _writer
from relay._core._writer import RolloutWriter
from relay._rollout._reader import read_rollout
from relay.testing import FIXED_NOW

GUARD_S = 30
SCRIPT = {"responses": [{"text": "One. " * 200}, {"text": "Two. " * 200}, {"text": "Three."}]}


def config(tmp_path: Path) -> relay.Config:
    return relay.Config(rollout=relay.RolloutConfig(dir=str(tmp_path / "sessions")))


def rollouts(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "sessions").rglob("*.jsonl"))


def no_locks(fd: int, operation: int) -> None:
    raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))


def failing_os(budget: int, code: int = errno.ENOSPC) -> Any:
    """The ``os`` of the writer's module, whose ``write`` takes ``budget`` more bytes in all,
    the last of them in a short write as a full disk does, then fails with ``code``."""
    left = [budget]

    def write(fd: int, data: Any) -> int:
        if left[0] <= 0:
            raise OSError(code, os.strerror(code))
        n = min(len(data), left[0])
        left[0] -= n
        return os.write(fd, bytes(data[:n]))

    proxy = types.SimpleNamespace(**{name: getattr(os, name) for name in dir(os)})
    proxy.write = write
    return proxy


# ------------------------------------------------------------------------------ locks


async def test_a_file_system_without_locks_runs_unlocked_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fcntl, "flock", no_locks)
    with trio.fail_after(GUARD_S):
        async with testing.open_test_session(SCRIPT, config=config(tmp_path)) as t:
            await t.turns("hello")
        msgs = t.recorder.msgs
    assert isinstance(msgs[0], relay.SessionConfigured)
    warning = msgs[1]
    assert isinstance(warning, relay.WarningEvent)
    assert "cannot be locked" in warning.message and "No locks available" in warning.message
    assert isinstance(msgs[-1], relay.ShutdownComplete)
    (path,) = rollouts(tmp_path)
    rollout = read_rollout(path)
    assert rollout.notes == ()
    assert rollout.meta is not None
    kinds = [json.loads(line)["payload"].get("type") for line in path.read_text().splitlines()]
    assert "warning" in kinds and kinds[-1] == "shutdown_complete"


def test_a_lock_that_fails_otherwise_leaves_no_empty_rollout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(fd: int, operation: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(fcntl, "flock", broken)
    with pytest.raises(RolloutError, match="cannot lock rollout file"):
        RolloutWriter.create(tmp_path, "s-1", FIXED_NOW)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_new_rollout_that_never_got_a_line_is_removed_on_close(tmp_path: Path) -> None:
    writer = RolloutWriter.create(tmp_path, "s-1", FIXED_NOW)
    writer.close()
    assert not writer.path.exists()
    # One that got a line stays, and so does a resumed one, however empty it was.
    writer = RolloutWriter.create(tmp_path, "s-2", FIXED_NOW)
    writer.write("session_meta", {"id": "s-2"})
    writer.close()
    assert writer.path.exists()
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    RolloutWriter.append_to(empty).close()
    assert empty.exists()


# ------------------------------------------------------------------------------ full disk


@pytest.mark.parametrize(
    "code", [pytest.param(errno.ENOSPC, id="ENOSPC"), pytest.param(errno.EFBIG, id="EFBIG")]
)
def test_a_write_that_fails_keeps_whole_lines_and_writes_nothing_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    writer = RolloutWriter.create(tmp_path, "s-1", FIXED_NOW)
    writer.write("session_meta", {"id": "s-1"})
    writer.flush()
    whole = writer.path.read_bytes()
    # The disk fills up 10 bytes into the next lines.
    monkeypatch.setattr(_writer, "os", failing_os(10, code))
    writer.write("event_msg", {"type": "warning", "message": "x" * 100})
    writer.write("event_msg", {"type": "warning", "message": "y" * 100})
    writer.flush()  # no exception: the writer reports the failure instead
    assert writer.failure is not None and writer.failure.errno == code
    # The partial line is taken back: the file ends with the last whole line.
    assert writer.path.read_bytes() == whole
    writer.write("event_msg", {"type": "warning", "message": "z"})
    writer.flush()
    writer.close()
    assert writer.path.read_bytes() == whole
    assert read_rollout(writer.path).notes == ()


async def test_a_full_disk_mid_session_is_an_error_and_an_orderly_shutdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(GUARD_S):
        async with testing.open_test_session(SCRIPT, config=config(tmp_path)) as t:
            await t.turns("first")
            (path,) = rollouts(tmp_path)
            size = path.stat().st_size
            # The disk fills up part-way through the second turn's lines.
            monkeypatch.setattr(_writer, "os", failing_os(300))
            await t.turn("second", id="t2")
            await t.recorder.wait_for(relay.ShutdownComplete)
            assert t.session.closed
        msgs = t.recorder.msgs
    (error,) = t.recorder.of_type(relay.ErrorEvent)
    assert error.code == "rollout"
    assert "cannot be written" in error.message and "No space left on device" in error.message
    assert isinstance(msgs[-1], relay.ShutdownComplete)
    # The error comes before the end of its turn, attributed to it: the turn failed.
    ends = [e for e in t.recorder.events if testing.turn_ended(e)]
    assert ends[-1].id == "t2"
    error_event = next(e for e in t.recorder.events if isinstance(e.msg, relay.ErrorEvent))
    assert error_event.id == "t2" and error_event.seq < ends[-1].seq
    assert [e.seq for e in t.recorder.events] == list(range(1, len(t.recorder.events) + 1))
    # The file holds whole lines only, the first turn complete, and reads without a note.
    data = path.read_bytes()
    assert len(data) >= size and data.endswith(b"\n")
    rollout = read_rollout(path)
    assert rollout.notes == ()
    assert "turn_complete" in [
        json.loads(line)["payload"].get("type") for line in data.decode().splitlines()
    ]


async def test_a_disk_full_before_the_first_line_leaves_no_rollout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_writer, "os", failing_os(0))
    with trio.fail_after(GUARD_S):
        async with testing.open_test_session(SCRIPT, config=config(tmp_path)) as t:
            await t.recorder.wait_for(relay.ShutdownComplete)
    types_ = [type(m).__name__ for m in t.recorder.msgs]
    assert types_ == ["SessionConfigured", "ErrorEvent", "ShutdownComplete"]
    assert rollouts(tmp_path) == []
