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
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from .._base._errors import RolloutError, RolloutLockedError

RolloutType = str
"""One of ``session_meta``, ``response_item``, ``event_msg``, ``turn_context``, ``op``,
``world_state``, ``compacted``, ``ids``, ``trace``."""


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
#: The JSON of each line type, made once.
_TYPES: dict[str, str] = {}


def _type_json(kind: RolloutType) -> str:
    text = _TYPES.get(kind)
    if text is None:
        text = _TYPES[kind] = _ENCODER.encode(kind)
    return text


def payload_json(payload: Any) -> str:
    """The JSON text of a line's payload, as :meth:`RolloutWriter.write` writes it."""
    return _ENCODER.encode(payload)


class _Stamps:
    """The time of a line, ``2026-11-29T11:14:35.123Z`` (UTC, to the millisecond).

    Lines come many per millisecond: the text is made once per millisecond, its part up to the
    second once per second.
    """

    def __init__(self) -> None:
        self._ms = -1
        self._second = -1
        self._prefix = ""
        self._text = ""

    def now(self) -> str:
        ms = time.time_ns() // 1_000_000
        if ms != self._ms:
            self._ms = ms
            second, milli = divmod(ms, 1000)
            if second != self._second:
                self._second = second
                self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second))
            self._text = f"{self._prefix}{milli:03d}Z"
        return self._text


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
        self._stamps = _Stamps()

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
        self.write_json(kind, _ENCODER.encode(payload))

    def write_json(self, kind: RolloutType, payload: str) -> None:
        """Append one line whose payload is already JSON text (buffered until :meth:`flush`)."""
        self._file.write(
            f'{{"timestamp":"{self._stamps.now()}","type":{_type_json(kind)},"payload":{payload}}}\n'
        )

    def flush(self) -> None:
        """Hand everything written so far to the operating system."""
        self._file.flush()

    def close(self) -> None:
        """Flush and close the file."""
        if not self._file.closed:
            self._file.flush()
            self._file.close()
