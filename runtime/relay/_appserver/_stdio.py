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
        self.failed = anyio.Event()
        """Set once standard output cannot be written: nobody reads what the server says."""

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
        self.failed.set()


class LineSplitter:
    """Lines out of the chunks a descriptor gives. A line over ``limit`` bytes is cut to that
    size: handed on once, the rest of it skipped (it does not parse, and is answered so)."""

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes, each with its line break."""
        lines = []
        buffer = self._buffer
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            if self._skipping:
                self._skipping = False
            else:
                lines.append(bytes(buffer[start : min(end + 1, start + self._limit)]))
            start = end + 1
        del buffer[:start]
        if self._skipping:
            buffer.clear()
        elif len(buffer) > self._limit:
            lines.append(bytes(buffer[: self._limit]))
            buffer.clear()
            self._skipping = True
        return lines

    def rest(self) -> bytes:
        """At the end of input: a last line without its line break (empty: none)."""
        return b"" if self._skipping else bytes(self._buffer)


def start_reader(fd: int, send: MemoryObjectSendStream[bytes]) -> None:
    """Read the descriptor ``fd`` in a daemon thread, each line into ``send``; close ``send``
    at the end of input. The thread reads the descriptor itself, holding no lock of a Python
    file object: the process may end while it waits."""
    token = anyio.lowlevel.current_token()

    def pump() -> None:
        lines = LineSplitter()
        try:
            while True:
                try:
                    chunk = os.read(fd, 1 << 16)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                for line in lines.feed(chunk):
                    anyio.from_thread.run(send.send, line, token=token)
            if last := lines.rest():
                anyio.from_thread.run(send.send, last, token=token)
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


__all__ = [
    "HIGH_WATER",
    "MAX_LINE_BYTES",
    "Output",
    "LineSplitter",
    "start_reader",
    "start_writer",
]
