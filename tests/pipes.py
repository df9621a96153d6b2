"""Reading a subprocess's output with a bound, so that a hung process fails a test instead of
hanging it."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import IO


class LineReader:
    """The lines of a text pipe, read by a thread; each wait for one is bounded."""

    def __init__(self, stream: IO[str], *, timeout: float) -> None:
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._timeout = timeout
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                self._lines.put(line)
        except ValueError:  # the pipe was closed under the reader
            pass
        finally:
            self._lines.put(None)

    def readline(self) -> str:
        """The next line ("" at the end of the stream).

        Raises:
            AssertionError: no line came within the timeout.
        """
        try:
            line = self._lines.get(timeout=self._timeout)
        except queue.Empty:
            raise AssertionError(f"no output within {self._timeout} s") from None
        if line is None:
            self._lines.put(None)  # stay at the end for later calls
            return ""
        return line

    def __iter__(self) -> Iterator[str]:
        while line := self.readline():
            yield line
