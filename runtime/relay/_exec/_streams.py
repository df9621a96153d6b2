"""The standard streams of a command run under the process guard (:mod:`._process`): the
descriptors that go to it, and relay's ends of its pipes, read and written by the event loop.

The guard receives the command's descriptors 0, 1 and 2 over the control socket, so a stream is
always a descriptor here: a pipe relay made (``subprocess.PIPE``), ``/dev/null``
(``subprocess.DEVNULL``, or a standard stream relay itself does not have), standard output
again (``subprocess.STDOUT`` for standard error), relay's own, or one the caller gives.
"""

from __future__ import annotations

import os
import subprocess
from typing import IO, Any

import anyio
import anyio.abc
import anyio.lowlevel

#: How a standard stream of a command is given, as :mod:`subprocess` takes it.
StreamSpec = int | IO[Any] | None


class PipeReceiveStream(anyio.abc.ByteReceiveStream):
    """relay's end of a pipe the command writes to (non-blocking, waited on by the loop)."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint_if_cancelled()
        while True:
            if self._fd < 0:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            if not data:
                raise anyio.EndOfStream
            await anyio.lowlevel.cancel_shielded_checkpoint()
            return data

    def close(self) -> None:
        _close_waited(self._fd)
        self._fd = -1

    async def aclose(self) -> None:
        self.close()
        await anyio.lowlevel.checkpoint()


class PipeSendStream(anyio.abc.ByteSendStream):
    """relay's end of the pipe the command reads from."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint_if_cancelled()
        view = memoryview(item)
        while view:
            if self._fd < 0:
                raise anyio.ClosedResourceError
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
        await anyio.lowlevel.cancel_shielded_checkpoint()

    def close(self) -> None:
        _close_waited(self._fd)
        self._fd = -1

    async def aclose(self) -> None:
        self.close()
        await anyio.lowlevel.checkpoint()


def _close_waited(fd: int) -> None:
    """Close ``fd``, waking whatever task waits on it (with ``ClosedResourceError``)."""
    if fd >= 0:
        anyio.notify_closing(fd)
        os.close(fd)


class Streams:
    """The command's standard streams: the descriptors that go to it, and relay's ends."""

    def __init__(self, stdin: StreamSpec, stdout: StreamSpec, stderr: StreamSpec) -> None:
        self.theirs: list[int] = []
        self.owned: list[int] = []  # of ``theirs``: relay made them, and closes them
        self.stdin: PipeSendStream | None = None
        self.stdout: PipeReceiveStream | None = None
        self.stderr: PipeReceiveStream | None = None
        try:
            if stdin == subprocess.PIPE:
                read, written = os.pipe()
                self.owned.append(read)
                self.stdin = PipeSendStream(written)
                self.theirs.append(read)
            else:
                self.theirs.append(self._other(stdin, 0))
            for number, spec in ((1, stdout), (2, stderr)):
                if number == 2 and spec == subprocess.STDOUT:
                    self.theirs.append(self.theirs[1])
                elif spec == subprocess.PIPE:
                    read, written = os.pipe()
                    self.owned.append(written)
                    stream = PipeReceiveStream(read)
                    self.stdout, self.stderr = (
                        (stream, self.stderr) if number == 1 else (self.stdout, stream)
                    )
                    self.theirs.append(written)
                else:
                    self.theirs.append(self._other(spec, number))
        except BaseException:
            self.let_go()
            self.close_ours()
            raise

    def _other(self, spec: StreamSpec, number: int) -> int:
        """The command's descriptor ``number`` when it is not a pipe to relay."""
        if spec == subprocess.DEVNULL or (spec is None and not _is_open(number)):
            null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            self.owned.append(null)
            return null
        if spec is None:
            return number
        if isinstance(spec, int):
            return spec
        return spec.fileno()

    def let_go(self) -> None:
        """Close the descriptors relay made for the command (it has its own by now)."""
        for fd in self.owned:
            os.close(fd)
        self.owned = []

    def close_ours(self) -> None:
        """Close relay's ends of the pipes."""
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                stream.close()


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


__all__ = ["PipeReceiveStream", "PipeSendStream", "StreamSpec", "Streams"]
