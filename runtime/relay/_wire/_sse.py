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

#: Default bounds: far above any real event, far below what exhausts memory.
MAX_LINE_BYTES = 16 * 1024 * 1024
MAX_EVENT_BYTES = 32 * 1024 * 1024


class TooLarge(ValueError):
    """A line, an event or a body exceeded its bound; the message says which and the bound."""


class SseDecoder:
    """An incremental server-sent-events decoder: bytes in, dispatched events out.

    Follows the WHATWG event-stream rules: lines end with CRLF, CR or LF; a blank line
    dispatches the event if it has data; comments and unknown fields are ignored. An event cut
    off by the end of the stream is never dispatched. A line longer than ``max_line`` bytes,
    or an event whose data lines add up to more than ``max_event``, raises :class:`TooLarge`
    as soon as it is seen, so that a server cannot make the decoder hold more.
    """

    def __init__(self, *, max_line: int = MAX_LINE_BYTES, max_event: int = MAX_EVENT_BYTES) -> None:
        self._buffer = bytearray()
        self._event: str | None = None
        self._data: list[str] = []
        self._data_size = 0
        self._max_line = max_line
        self._max_event = max_event

    def _check_line(self, size: int) -> None:
        if size > self._max_line:
            raise TooLarge(
                f"the model server sent a line longer than {self._max_line} bytes "
                "(stream_max_line_bytes)"
            )

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The events completed by ``chunk``. Raises UnicodeDecodeError for non-UTF-8 lines."""
        if b"\n" not in chunk and b"\r" not in chunk and not self._buffer.endswith(b"\r"):
            # The middle of a long line (a large item): no rescanning of what came before.
            self._buffer += chunk
            self._check_line(len(self._buffer))
            return []
        data = bytes(self._buffer + chunk)
        # A CR at the very end may be the first half of a CRLF split across chunks.
        end = len(data) - 1 if data.endswith(b"\r") else len(data)
        *lines, rest = _LINE_END.split(data[:end])
        self._buffer = bytearray(rest + data[end:])
        self._check_line(len(self._buffer))
        events: list[ServerSentEvent] = []
        for raw in lines:
            self._check_line(len(raw))
            line = raw.decode("utf-8")
            if not line:
                if self._data:
                    events.append(ServerSentEvent(self._event, "\n".join(self._data)))
                self._event = None
                self._data = []
                self._data_size = 0
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                self._event = value
            elif name == "data":
                self._data_size += len(raw) + 1
                if self._data_size > self._max_event:
                    raise TooLarge(
                        f"the model server sent an event larger than {self._max_event} bytes "
                        "(stream_max_event_bytes)"
                    )
                self._data.append(value)
        return events
