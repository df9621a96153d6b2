"""The bounded buffers between a hosted session and its callers: plain data, no Ray.

- :class:`Ring`: a host keeps each session's latest events, so that a caller attaching (or one
  following the session to its new host) gets them exactly; older ones come from the rollout.
- :class:`Outbox`: the events of one session waiting for one caller's stream on the host.
- :class:`ReaderQueue`: the events of one session waiting for the caller's reader, in its own
  process.

Each is bounded. A buffer that overflows drops its oldest events and says so: the run of
dropped events becomes one ``warning`` event with the id :data:`DROPPED_EVENT_ID`, numbered as
the last event it stands for, so that ``seq`` still never goes back and never repeats.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

import attrs

from .._base import _protocol as p
from .._core._event_stream import DROPPED_EVENT_ID

#: A host keeps at most this many of a session's latest events, and this many bytes of them.
RING_EVENTS = 64
RING_BYTES = 16 * 1024
#: One caller's events of one session waiting on the host for its stream.
OUTBOX_EVENTS = 512
OUTBOX_BYTES = 256 * 1024
#: Events of one session waiting for the caller's reader.
READER_EVENTS = 10_000


@attrs.frozen
class Dropped:
    """A run of events a buffer dropped: ``first`` to ``last`` (by ``seq``), ``count`` of
    them."""

    first: int
    last: int
    count: int

    def join(self, later: Dropped) -> Dropped:
        """This run and the one right after it, as one."""
        return Dropped(self.first, later.last, self.count + later.count)

    def event(self) -> p.Event:
        """The warning a reader gets in place of the events."""
        return p.Event(
            DROPPED_EVENT_ID,
            self.last,
            p.WarningEvent(
                f"{self.count} event(s), seq {self.first} to {self.last}, were dropped because "
                f"the reader did not keep up; those the rollout records can be read again from "
                f"seq {self.first - 1} (relay cluster attach --from {self.first - 1})"
            ),
        )


class Ring:
    """A session's latest events as ``(seq, JSON text)``, bounded in count and in bytes."""

    def __init__(self, max_events: int = RING_EVENTS, max_bytes: int = RING_BYTES) -> None:
        self._events: deque[tuple[int, str]] = deque()
        self._bytes = 0
        self._max_events = max_events
        self._max_bytes = max_bytes

    def add(self, seq: int, text: str) -> None:
        """Keep an event; the oldest go when the ring is full (the newest always stays)."""
        events = self._events
        events.append((seq, text))
        self._bytes += len(text)
        while len(events) > 1 and (len(events) > self._max_events or self._bytes > self._max_bytes):
            old_seq, old_text = events.popleft()
            self._bytes -= len(old_text)
            self._evicted(old_seq)

    def _evicted(self, seq: int) -> None:
        """An event that made room for a newer one (a ring keeps no account of it)."""

    @property
    def first_seq(self) -> int | None:
        """The ``seq`` of the oldest event kept (None when empty)."""
        return self._events[0][0] if self._events else None

    def after(self, seq: int) -> list[tuple[int, str]]:
        """The events kept whose ``seq`` is above ``seq``, in order."""
        return [(s, text) for s, text in self._events if s > seq]

    def __len__(self) -> int:
        return len(self._events)


class Outbox(Ring):
    """One caller's events of one session, waiting for that caller's stream on the host.

    Bounded in count and bytes: when full, its oldest events are dropped and counted, and the
    next :meth:`take` says which.
    """

    def __init__(self, max_events: int = OUTBOX_EVENTS, max_bytes: int = OUTBOX_BYTES) -> None:
        super().__init__(max_events, max_bytes)
        self._dropped: Dropped | None = None

    def _evicted(self, seq: int) -> None:
        run = Dropped(seq, seq, 1)
        self._dropped = run if self._dropped is None else self._dropped.join(run)

    def __bool__(self) -> bool:
        return bool(self._events) or self._dropped is not None

    def take(self) -> tuple[Dropped | None, list[str]]:
        """What was dropped since the last take (before the events), and the events."""
        dropped, self._dropped = self._dropped, None
        texts = [text for _, text in self._events]
        self._events.clear()
        self._bytes = 0
        return dropped, texts


class ReaderQueue:
    """Events of one session waiting for the caller's reader, in order, bounded.

    When more than ``max_items`` wait, the oldest are merged into one :class:`Dropped` run,
    which the reader gets as a warning in their place.
    """

    def __init__(self, max_items: int = READER_EVENTS) -> None:
        if max_items < 2:
            raise ValueError("a reader queue holds at least two items")
        self._items: deque[p.Event | Dropped] = deque()
        self._max = max_items

    def push(self, event: p.Event) -> None:
        """Queue an event for the reader."""
        self._items.append(event)
        self._trim()

    def push_dropped(self, run: Dropped) -> None:
        """Queue the mark of events dropped before they reached this process."""
        items = self._items
        if items and isinstance(items[-1], Dropped):
            items[-1] = items[-1].join(run)
        else:
            items.append(run)
        self._trim()

    def _trim(self) -> None:
        items = self._items
        while len(items) > self._max:
            run = _as_run(items.popleft()).join(_as_run(items.popleft()))
            items.appendleft(run)

    def pop(self) -> p.Event | None:
        """The next event for the reader (a dropped run as its warning), or None."""
        if not self._items:
            return None
        item = self._items.popleft()
        return item.event() if isinstance(item, Dropped) else item

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[p.Event | Dropped]:
        return iter(self._items)


def _as_run(item: p.Event | Dropped) -> Dropped:
    return item if isinstance(item, Dropped) else Dropped(item.seq, item.seq, 1)


__all__ = [
    "DROPPED_EVENT_ID",
    "OUTBOX_BYTES",
    "OUTBOX_EVENTS",
    "READER_EVENTS",
    "RING_BYTES",
    "RING_EVENTS",
    "Dropped",
    "Outbox",
    "ReaderQueue",
    "Ring",
]
