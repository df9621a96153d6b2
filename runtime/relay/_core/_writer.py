"""The rollout: a session's append-only JSONL record (docs/rollout.md), writing side.

Each line is ``{"timestamp", "type", "payload"}``. Lines are written as they happen and the file
is flushed to the operating system before every terminal event (``turn_complete``,
``turn_aborted``, ``shutdown_complete``), so a crash of the process loses at most what the turn
in flight wrote after its last flush. Files are created 0600 in directories created 0700.

A writer holds an exclusive lock (``flock``) on its file from open to close, so two sessions,
in one process or two, never append to the same rollout: the second gets
:class:`RolloutLockedError`. The lock goes with the file's last descriptor, so a process that
dies in any way releases it. On a file system that has no locks (``ENOLCK``, an NFS mount
without its lock service) the writer goes on without one and says so in
:attr:`RolloutWriter.warning`.

A write that fails (a full disk, a file past its size limit) never raises: the writer takes
back the part of a line it had written, so that the file ends with its last whole line, writes
nothing more, and keeps the error in :attr:`RolloutWriter.failure` for the session to report.
A new file that never got a whole line is removed when the writer closes: no empty rollout is
left.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

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


def _always() -> bool:
    return True


@attrs.frozen
class Epoch:
    """One writer's turn at a session's rollout: its number, where its event numbering starts,
    and whether the lease it writes under still holds.

    A session moved to another host starts a new epoch, numbered above every earlier one. The
    rollout records each line's epoch; a writer whose epoch is no longer the newest, or whose
    lease ran out, writes nothing more, and a reader ignores lines of an older epoch that come
    after a newer one began.
    """

    number: int
    """The epoch, from 1."""
    first_seq: int = 1
    """The ``seq`` of the session's first event in this epoch."""
    holds: Callable[[], bool] = _always
    """Whether the writer may still write (its lease has not run out); checked before every
    hand-over of lines to the operating system."""
    take_over: bool = False
    """Whether a resume in this epoch goes on when an older writer still holds the file's
    lock (that writer is fenced by the epoch instead)."""


#: The start of a line a writer with an epoch writes: its epoch comes before its payload.
_EPOCH_OF_LINE = re.compile(rb'^\{"timestamp":"[^"]*","type":"[a-z_]+","epoch":(\d+)')


def epoch_of_line(line: bytes) -> int | None:
    """The epoch a rollout line says it was written in, or None (no epoch: the one in force)."""
    match = _EPOCH_OF_LINE.match(line)
    return int(match.group(1)) if match else None


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


#: Lock errors of a file system that has no locks (rather than of a file in use).
_NO_LOCKS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS})
#: Pending lines are handed to the operating system once they are this long, in bytes.
_BUFFER_BYTES = 8 * 1024


def _lock(fd: int, path: Path, take_over: Epoch | None = None) -> str | None:
    """Take the exclusive lock on ``fd``; returns a warning when the file system has no locks,
    or when ``take_over`` goes on without the lock another writer holds. Otherwise closes
    ``fd`` and raises."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _NO_LOCKS:
            return (
                f"rollout file {path} cannot be locked ({exc.strerror}): the session goes on "
                "without the lock, so nothing stops another session from appending to it"
            )
        held = exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
        if held and take_over is not None:
            return (
                f"rollout file {path} is still locked by the writer of an earlier epoch; epoch "
                f"{take_over.number} takes it over without the lock, and that writer can no "
                "longer add a line that counts"
            )
        os.close(fd)
        if held:
            raise RolloutLockedError(
                f"rollout file {path} is in use by another session; resume it once that"
                " session has ended"
            ) from exc
        raise RolloutError(f"cannot lock rollout file {path}: {exc.strerror}") from exc
    return None


class RolloutWriter:
    """Appends rollout lines to one file."""

    def __init__(
        self,
        path: Path,
        fd: int,
        *,
        created: bool = False,
        warning: str | None = None,
        epoch: Epoch | None = None,
    ) -> None:
        self.path = path
        self.warning = warning
        """Why the file is not locked, when it is not (its file system has no locks, or a
        writer of a newer epoch took it over)."""
        self.failure: OSError | None = None
        """The error that stopped the writing (a full disk, a file too large, a newer epoch),
        once one did: nothing is written after it."""
        self.epoch = epoch
        """The epoch this writer writes in, when it takes part in epochs."""
        self._epoch_json = f',"epoch":{epoch.number}' if epoch is not None else ""
        self._fd: int | None = fd
        self._created = created
        # Lines not yet handed to the operating system, encoded (so that text no file can
        # hold fails its own write, not the flush of the lines around it).
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        # The size of the file up to its last whole line.
        self._size = os.fstat(fd).st_size
        self._stamps = _Stamps()

    @classmethod
    def create(
        cls, root: Path, session_id: str, created: datetime, *, epoch: Epoch | None = None
    ) -> RolloutWriter:
        """Create a new rollout file (0600) under ``root`` (directories 0700)."""
        path = rollout_path(root, session_id, created)
        try:
            _make_private_dirs(path.parent)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        except OSError as exc:
            raise RolloutError(f"cannot create rollout file {path}: {exc.strerror}") from exc
        try:
            warning = _lock(fd, path)
        except RolloutError:
            _remove(path)  # nothing was written to it: leave no empty file behind
            raise
        return cls(path, fd, created=True, warning=warning, epoch=epoch)

    @classmethod
    def append_to(cls, path: Path, *, epoch: Epoch | None = None) -> RolloutWriter:
        """Open an existing rollout file to append to it (used by resume).

        When ``epoch`` says ``take_over``, a lock still held by another writer does not stop
        this one: the older writer is fenced by the epoch instead (see the module doc).

        Raises:
            RolloutLockedError: another session is appending to it.
            RolloutError: it cannot be opened.
        """
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            raise RolloutError(f"cannot open rollout file {path}: {exc.strerror}") from exc
        warning = _lock(fd, path, epoch if epoch is not None and epoch.take_over else None)
        writer = cls(path, fd, warning=warning, epoch=epoch)
        writer._end_partial_line()
        return writer

    def _end_partial_line(self) -> None:
        # A crash mid-write leaves a line without its newline; start on a fresh line so the
        # next record is not glued to the broken one.
        if not self._size:
            return
        with self.path.open("rb") as existing:
            existing.seek(self._size - 1)
            if existing.read(1) != b"\n":
                self._pending.append(b"\n")
                self._pending_bytes += 1

    def write(self, kind: RolloutType, payload: Any) -> None:
        """Append one line (buffered until :meth:`flush`)."""
        self.write_json(kind, _ENCODER.encode(payload))

    def write_json(
        self,
        kind: RolloutType,
        payload: str,
        *,
        seq: int | None = None,
        event_id: str | None = None,
    ) -> None:
        """Append one line whose payload is already JSON text (buffered until :meth:`flush`).

        A writer with an epoch writes it into the line, and an event's ``seq`` and id with it.
        """
        if self.failure is not None or self._fd is None:
            return
        stamp = self._stamps.now()
        marks = self._epoch_json
        if marks and seq is not None:
            marks = f'{marks},"seq":{seq}'
            if event_id is not None:
                marks = f'{marks},"id":{_ENCODER.encode(event_id)}'
        line = f'{{"timestamp":"{stamp}","type":{_type_json(kind)}{marks},"payload":{payload}}}\n'
        data = line.encode("utf-8")
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= _BUFFER_BYTES:
            self.flush()

    def flush(self) -> None:
        """Hand everything written so far to the operating system.

        A write that fails sets :attr:`failure` and takes back the part of a line it wrote.
        """
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        if self.failure is not None or self._fd is None:
            return
        fd = self._fd
        if self.epoch is not None and not self._still_writes(fd):
            return
        view = memoryview(data)
        written = 0
        try:
            while written < len(data):
                written += os.write(fd, view[written:])
        except OSError as exc:
            self.failure = exc
            # Keep the whole lines that made it; take back the part of a line that follows.
            whole = data.rfind(b"\n", 0, written) + 1
            try:
                os.ftruncate(fd, self._size + whole)
            except OSError:
                pass  # the reader drops a partial last line, with a note
            self._size += whole
            return
        self._size += written

    def _still_writes(self, fd: int) -> bool:
        """Whether this writer's epoch may still write; if not, it is fenced (:attr:`failure`).

        Lines another writer appended since this one's last are read: one of a newer epoch
        fences this writer; those of an older epoch (a fenced writer's, which the reader
        ignores) are passed over.
        """
        epoch = self.epoch
        assert epoch is not None
        if not epoch.holds():
            self._fence(f"the lease of epoch {epoch.number} ran out before it could write")
            return False
        try:
            size = os.fstat(fd).st_size
        except OSError:
            return True  # the write itself will say what is wrong
        if size == self._size:
            return True
        newest = 0
        with self.path.open("rb") as existing:
            existing.seek(self._size)
            for line in existing.read(size - self._size).splitlines():
                newest = max(newest, epoch_of_line(line) or 0)
        if newest > epoch.number:
            self._fence(f"epoch {newest} of the session began after epoch {epoch.number}")
            return False
        self._size = size
        return True

    def _fence(self, why: str) -> None:
        self.failure = OSError(
            errno.ESTALE, f"{why}: the session moved on, and this writer adds nothing more"
        )

    def close(self) -> None:
        """Flush and close the file. A new file that never got a whole line is removed."""
        if self._fd is None:
            return
        self.flush()
        fd, self._fd = self._fd, None
        if self._created and self._size == 0:
            _remove(self.path)  # while the lock is still held
        os.close(fd)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
