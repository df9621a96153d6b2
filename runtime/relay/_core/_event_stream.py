"""A session's event stream: unbounded for its one reader, so that emitting never waits
(docs/architecture.md, The session), and bounded while nobody reads it.

A program that only calls :meth:`Session.ask <relay.Session.ask>` never takes the stream, and
the events it does not read must not pile up. Until a reader takes the stream, it keeps the
latest :data:`UNREAD_LIMIT` events: each later one drops the oldest. A reader that takes the
stream after that first gets one ``warning`` with the id :data:`DROPPED_EVENT_ID` in place of
the run of events dropped, numbered as the last of them (so that ``seq`` still never goes back
and never repeats), then the events kept. Once taken, the stream keeps every event for its
reader: a reader that falls behind catches up.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel

from .._base import _protocol as p

#: An event message's JSON and its text.
EventJson = tuple[dict[str, Any], str]

#: The events a stream that no reader has taken keeps, the latest ones.
UNREAD_LIMIT = 1000

#: The id of the warning that stands for events dropped before a reader took the stream.
DROPPED_EVENT_ID = "dropped"


class EventStream:
    """The events of one session, from the session to its one reader.

    A reader that writes every event as JSON asks for it (:meth:`keep_json`): the session
    then sends each event with its JSON, which the reader takes (:meth:`take_json`) instead
    of encoding the event again.
    """

    def __init__(self, unread_limit: int = UNREAD_LIMIT) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[p.Event](math.inf)
        self._taken = False
        self._unread_limit = unread_limit
        self.dropped = 0
        """Events dropped because no reader had taken the stream."""
        self._last_dropped = 0
        # Each event's JSON, by seq, until the reader takes it (only when it asked).
        self._json: dict[int, EventJson] | None = None

    @property
    def unread(self) -> int:
        """Events sent and not read yet."""
        return self._receive.statistics().current_buffer_used

    def reader(self) -> AsyncIterator[p.Event]:
        """The events, in order, until the stream is closed; there is only one reader."""
        if self._taken:
            raise RuntimeError("the event stream of a session has only one reader")
        self._taken = True
        return self._read(self._dropped_event())

    def _dropped_event(self) -> p.Event | None:
        """The warning that stands for the events dropped so far, if any were."""
        count, last = self.dropped, self._last_dropped
        if not count:
            return None
        first = last - count + 1
        return p.Event(
            DROPPED_EVENT_ID,
            last,
            p.WarningEvent(
                f"{count} event(s), seq {first} to {last}, were dropped because nobody read "
                "them; those the rollout records can be read there"
            ),
        )

    async def _read(self, dropped: p.Event | None) -> AsyncIterator[p.Event]:
        # An event already waiting is taken without letting other tasks run first (each step
        # is still a cancellation point): a turn's events come in bursts, and a round of the
        # scheduler for each would cost more than the reading.
        receive = self._receive
        async with receive:
            if dropped is not None:
                await anyio.lowlevel.checkpoint_if_cancelled()
                yield dropped
            while True:
                await anyio.lowlevel.checkpoint_if_cancelled()
                try:
                    event = receive.receive_nowait()
                except anyio.WouldBlock:
                    try:
                        event = await receive.receive()
                    except anyio.EndOfStream:
                        return
                except anyio.EndOfStream:
                    return
                yield event

    @property
    def keeps_json(self) -> bool:
        """Whether the reader asked for each event's JSON."""
        return self._json is not None

    def keep_json(self) -> None:
        """Send each later event with its JSON, for the reader to take."""
        if self._json is None:
            self._json = {}

    def take_json(self, seq: int) -> EventJson | None:
        """The JSON of event ``seq`` (once only), if it was sent with it."""
        kept = self._json
        return None if kept is None else kept.pop(seq, None)

    def send(self, event: p.Event, json: EventJson | None = None) -> None:
        """Send ``event`` (and its JSON, when the reader asked for it); never waits.

        When the reader has gone away the event is dropped: the session keeps working and
        its rollout keeps recording. Before a reader takes the stream, the oldest event goes
        when more than the limit wait.
        """
        kept = self._json
        if kept is not None and json is not None:
            kept[event.seq] = json
        try:
            self._send.send_nowait(event)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            if kept is not None:
                kept.pop(event.seq, None)
            return
        if not self._taken and self.unread > self._unread_limit:
            oldest = self._receive.receive_nowait()
            self.dropped += 1
            self._last_dropped = oldest.seq
            if kept is not None:
                kept.pop(oldest.seq, None)

    def close(self) -> None:
        """End the stream: the reader gets the events sent so far, then the end."""
        self._send.close()


__all__ = ["DROPPED_EVENT_ID", "UNREAD_LIMIT", "EventJson", "EventStream"]
