"""The server's standard streams: lines in from standard input, lines out to standard output.

Each stream is served by a daemon thread, so that a blocked read or write never holds the event
loop, nor the process once the server has ended (a client that neither closes its end nor
reads is not waited for past the bound of the shutdown). The threads reach the loop through
its token: the reader hands each line to a channel (and closes it at the end of input), the
writer takes what :class:`Output` holds, batch by batch.

Everything the server sends goes through one :class:`Output`, in the order it was put there:
putting never waits, so an answer goes out before the notifications of what it started. What
waits is the forwarding of events (:meth:`Output.wait_room`): a client that reads slowly holds
up the sessions' event streams, which hold up the sessions, and nothing piles up unbounded.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable
from typing import BinaryIO

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectSendStream

from ._rpc import Message, encode

#: The longest line read from the client: a longer one is answered as not JSON, and skipped.
MAX_LINE_BYTES = 64 * 1024 * 1024
#: How many lines may wait for the client before the sessions' events wait for it.
HIGH_WATER = 256


class Output:
    """The lines waiting for standard output, in order."""

    def __init__(self, high_water: int = HIGH_WATER) -> None:
        self._lines: collections.deque[bytes] = collections.deque()
        self._high_water = high_water
        self._ready = anyio.Event()
        self._room = anyio.Event()
        self._room.set()
        self._closed = False
        self.broken: OSError | None = None
        """Why standard output could not be written, once it could not."""

    def put(self, message: Message) -> None:
        """Send ``message`` after those put before it; never waits. Dropped once the output
        is broken: nobody reads it."""
        if self.broken is not None:
            return
        self._lines.append(encode(message))
        self._ready.set()
        if len(self._lines) >= self._high_water and self._room.is_set():
            self._room = anyio.Event()

    async def wait_room(self) -> None:
        """Wait until the client has read enough of what waits for it."""
        await self._room.wait()

    def close(self) -> None:
        """Nothing more will be put: the writer ends once it has written what is left."""
        self._closed = True
        self._ready.set()

    async def take(self) -> bytes | None:
        """Everything waiting, as one batch; None once closed and written out."""
        while not self._lines:
            if self._closed:
                return None
            await self._ready.wait()
            self._ready = anyio.Event()
        batch = b"".join(self._lines)
        self._lines.clear()
        self._room.set()
        return batch

    def fail(self, error: OSError) -> None:
        """Standard output cannot be written: drop what waits, and never wait for room."""
        self.broken = error
        self._lines.clear()
        self._room.set()


def start_reader(stream: BinaryIO, send: MemoryObjectSendStream[bytes]) -> None:
    """Read ``stream`` line by line in a daemon thread into ``send``; close ``send`` at the end
    of input. A line over :data:`MAX_LINE_BYTES` is handed on cut to that size, and the rest of
    it skipped (it does not parse, and is answered so)."""
    token = anyio.lowlevel.current_token()

    def pump() -> None:
        try:
            while True:
                try:
                    line = stream.readline(MAX_LINE_BYTES)
                except (OSError, ValueError):
                    line = b""
                if not line:
                    break
                if len(line) >= MAX_LINE_BYTES and not line.endswith(b"\n"):
                    while (rest := stream.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                        pass
                anyio.from_thread.run(send.send, line, token=token)
            anyio.from_thread.run_sync(send.close, token=token)
        except (RuntimeError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the server has ended, or stopped reading

    threading.Thread(target=pump, name="relay app-server stdin", daemon=True).start()


def start_writer(fd: int, output: Output, done: Callable[[], None]) -> None:
    """Write what ``output`` holds to ``fd`` in a daemon thread; call ``done`` (in the loop)
    when ``output`` is closed and written, or broken."""
    token = anyio.lowlevel.current_token()

    def write_all(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    def pump() -> None:
        try:
            while (batch := anyio.from_thread.run(output.take, token=token)) is not None:
                try:
                    write_all(batch)
                except OSError as error:
                    anyio.from_thread.run_sync(output.fail, error, token=token)
                    break
            anyio.from_thread.run_sync(done, token=token)
        except RuntimeError:
            pass  # the server has ended

    threading.Thread(target=pump, name="relay app-server stdout", daemon=True).start()


__all__ = ["HIGH_WATER", "MAX_LINE_BYTES", "Output", "start_reader", "start_writer"]
