"""The rollout: a session's append-only JSONL record (docs/rollout.md), writing side.

Each line is ``{"timestamp", "type", "payload"}``. Lines are written as they happen and the file
is flushed to the operating system before every terminal event (``turn_complete``,
``turn_aborted``, ``shutdown_complete``), so a crash of the process loses at most what the turn
in flight wrote after its last flush. Files are created 0600 in directories created 0700.

A writer holds an exclusive lock (``flock``) on its file from open to close, so two sessions,
in one process or two, never append to the same rollout: the second gets
:class:`RolloutLockedError`. The lock goes with the file's last descriptor, so a process that
dies in any way releases it.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from ._errors import RolloutError, RolloutLockedError

RolloutType = str
"""One of ``session_meta``, ``response_item``, ``event_msg``, ``turn_context``,
``world_state``, ``compacted``."""


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def rfc3339_ms(moment: datetime) -> str:
    """``2026-11-29T11:14:35.123Z``."""
    moment = moment.astimezone(UTC)
    return _second_prefix(moment.replace(microsecond=0)) + f"{moment.microsecond // 1000:03d}Z"


@functools.lru_cache(maxsize=4)
def _second_prefix(second: datetime) -> str:
    # Lines come many per second: format the part up to the second once.
    return second.strftime("%Y-%m-%dT%H:%M:%S.")


def rollout_path(root: Path, session_id: str, created: datetime) -> Path:
    """``root/YYYY/MM/DD/rollout-<timestamp>-<session id>.jsonl``."""
    created = created.astimezone(UTC)
    stamp = created.strftime("%Y-%m-%dT%H-%M-%S")
    return root / created.strftime("%Y/%m/%d") / f"rollout-{stamp}-{session_id}.jsonl"


def _make_private_dirs(directory: Path) -> None:
    # mkdir(parents=True) gives the parents the default mode; every level we create is 0700.
    missing: list[Path] = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for level in reversed(missing):
        try:
            level.mkdir(mode=0o700)
        except FileExistsError:
            continue


def _lock(fd: int, path: Path) -> None:
    """Take the exclusive lock on ``fd`` or close it and raise."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise RolloutLockedError(
                f"rollout file {path} is in use by another session; resume it once that"
                " session has ended"
            ) from exc
        raise RolloutError(f"cannot lock rollout file {path}: {exc.strerror}") from exc


class RolloutWriter:
    """Appends rollout lines to one file."""

    def __init__(self, path: Path, file: IO[str]) -> None:
        self.path = path
        self._file = file

    @classmethod
    def create(cls, root: Path, session_id: str, created: datetime) -> RolloutWriter:
        """Create a new rollout file (0600) under ``root`` (directories 0700)."""
        path = rollout_path(root, session_id, created)
        try:
            _make_private_dirs(path.parent)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        except OSError as exc:
            raise RolloutError(f"cannot create rollout file {path}: {exc.strerror}") from exc
        _lock(fd, path)
        return cls(path, os.fdopen(fd, "a", encoding="utf-8"))

    @classmethod
    def append_to(cls, path: Path) -> RolloutWriter:
        """Open an existing rollout file to append to it (used by resume).

        Raises:
            RolloutLockedError: another session is appending to it.
            RolloutError: it cannot be opened.
        """
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            raise RolloutError(f"cannot open rollout file {path}: {exc.strerror}") from exc
        _lock(fd, path)
        file = os.fdopen(fd, "a", encoding="utf-8")
        writer = cls(path, file)
        writer._end_partial_line()
        return writer

    def _end_partial_line(self) -> None:
        # A crash mid-write leaves a line without its newline; start on a fresh line so the
        # next record is not glued to the broken one.
        with self.path.open("rb") as existing:
            existing.seek(0, os.SEEK_END)
            if existing.tell() == 0:
                return
            existing.seek(-1, os.SEEK_END)
            if existing.read(1) != b"\n":
                self._file.write("\n")

    def write(self, kind: RolloutType, payload: Any) -> None:
        """Append one line (buffered until :meth:`flush`)."""
        stamp = rfc3339_ms(datetime.now(UTC))
        body = _ENCODER.encode(payload)
        self._file.write(
            f'{{"timestamp":"{stamp}","type":{_ENCODER.encode(kind)},"payload":{body}}}\n'
        )

    def flush(self) -> None:
        """Hand everything written so far to the operating system."""
        self._file.flush()

    def close(self) -> None:
        """Flush and close the file."""
        if not self._file.closed:
            self._file.flush()
            self._file.close()
