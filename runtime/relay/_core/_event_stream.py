"""A session's event stream: unbounded, with one reader, so that emitting never waits
(docs/architecture.md, The session)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel

from .._base import _protocol as p

#: An event message's JSON and its text.
EventJson = tuple[dict[str, Any], str]


class EventStream:
    """The events of one session, from the session to its one reader.

    A reader that writes every event as JSON asks for it (:meth:`keep_json`): the session
    then sends each event with its JSON, which the reader takes (:meth:`take_json`) instead
    of encoding the event again.
    """

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[p.Event](math.inf)
        self._taken = False
        # Each event's JSON, by seq, until the reader takes it (only when it asked).
        self._json: dict[int, EventJson] | None = None

    def reader(self) -> AsyncIterator[p.Event]:
        """The events, in order, until the stream is closed; there is only one reader."""
        if self._taken:
            raise RuntimeError("the event stream of a session has only one reader")
        self._taken = True
        return self._read()

    async def _read(self) -> AsyncIterator[p.Event]:
        # An event already waiting is taken without letting other tasks run first (each step
        # is still a cancellation point): a turn's events come in bursts, and a round of the
        # scheduler for each would cost more than the reading.
        receive = self._receive
        async with receive:
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
        its rollout keeps recording.
        """
        kept = self._json
        if kept is not None and json is not None:
            kept[event.seq] = json
        try:
            self._send.send_nowait(event)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            if kept is not None:
                kept.pop(event.seq, None)

    def close(self) -> None:
        """End the stream: the reader gets the events sent so far, then the end."""
        self._send.close()
