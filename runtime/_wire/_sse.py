"""Server-sent events: an incremental decoder, bytes in, dispatched events out."""

from __future__ import annotations

import re

import attrs


@attrs.frozen
class ServerSentEvent:
    """One dispatched server-sent event."""

    event: str | None
    """The ``event:`` field, if the frame had one."""
    data: str
    """The ``data:`` lines, joined with newlines."""


_LINE_END = re.compile(rb"\r\n|\r|\n")


class SseDecoder:
    """An incremental server-sent-events decoder: bytes in, dispatched events out.

    Follows the WHATWG event-stream rules: lines end with CRLF, CR or LF; a blank line
    dispatches the event if it has data; comments and unknown fields are ignored. An event cut
    off by the end of the stream is never dispatched.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The events completed by ``chunk``. Raises UnicodeDecodeError for non-UTF-8 lines."""
        if b"\n" not in chunk and b"\r" not in chunk and not self._buffer.endswith(b"\r"):
            # The middle of a long line (a large item): no rescanning of what came before.
            self._buffer += chunk
            return []
        data = bytes(self._buffer + chunk)
        # A CR at the very end may be the first half of a CRLF split across chunks.
        end = len(data) - 1 if data.endswith(b"\r") else len(data)
        *lines, rest = _LINE_END.split(data[:end])
        self._buffer = bytearray(rest + data[end:])
        events: list[ServerSentEvent] = []
        for raw in lines:
            line = raw.decode("utf-8")
            if not line:
                if self._data:
                    events.append(ServerSentEvent(self._event, "\n".join(self._data)))
                self._event = None
                self._data = []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                self._event = value
            elif name == "data":
                self._data.append(value)
        return events
