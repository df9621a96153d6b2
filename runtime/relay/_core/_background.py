"""Background compaction as plain data: the snapshot, when work starts, when a result installs.

A background compaction computes a compacted history from a *snapshot* of the history while
the session goes on. Its result may be installed only while the live history still begins with
the snapshot, in the same window: then nothing of the snapshot changed and everything recorded
since is exactly the tail after it. :func:`still_current` is that rule and
:func:`installed_history` what an install puts in place; both are pure and tested without an
event loop. :class:`BackgroundJob` is what the session keeps of the one job it may run.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import anyio
import attrs

from .._base import _protocol as p
from ._context import TurnSettings


@attrs.frozen
class Snapshot:
    """The history a background compaction works from."""

    items: tuple[p.ResponseItem, ...]
    """The history when the work started."""
    window_id: str
    """The window it belongs to."""
    taken_at: float
    """``anyio.current_time()`` when it was taken."""


def background_due(percent: int, usage: int, limit: int | None) -> bool:
    """Whether usage reached ``percent`` of ``limit`` (never when either is unset)."""
    return percent > 0 and limit is not None and usage * 100 >= limit * percent


def still_current(snapshot: Snapshot, live: Sequence[p.ResponseItem], live_window_id: str) -> bool:
    """The install rule: the live history is in the snapshot's window and begins with it."""
    size = len(snapshot.items)
    return (
        live_window_id == snapshot.window_id
        and len(live) >= size
        and tuple(live[:size]) == snapshot.items
    )


def installed_history(
    compacted: Sequence[p.ResponseItem],
    initial: Sequence[p.ResponseItem],
    snapshot: Snapshot,
    live: Sequence[p.ResponseItem],
) -> list[p.ResponseItem]:
    """``compacted + initial + everything recorded since the snapshot``.

    Only meaningful when :func:`still_current` holds.
    """
    return [*compacted, *initial, *live[len(snapshot.items) :]]


class JobState(enum.Enum):
    """Where a background job is."""

    RUNNING = "running"
    READY = "ready"
    FAILED = "failed"


@attrs.define(eq=False)
class BackgroundJob:
    """The session's one background compaction."""

    number: int
    """Its number in the session (1, 2, …)."""
    snapshot: Snapshot
    """What it compacts."""
    settings: TurnSettings
    """Model, cwd and effort of the turn that started it."""
    scope: anyio.CancelScope = attrs.field(factory=anyio.CancelScope)
    """Cancelled at shutdown, or when its result is no longer wanted."""
    finished: anyio.Event = attrs.field(factory=anyio.Event)
    """Set when the work has returned, failed or been cancelled."""
    state: JobState = JobState.RUNNING
    """Where it is."""
    result: Any = None
    """What the work returned (READY)."""
    failure: str = ""
    """Why it failed (FAILED)."""
    duration_ms: int = 0
    """How long the work took."""
    waited_for: bool = False
    """Whether the next automatic compaction point waits for its result (async compaction:
    the result is meant for the next turn)."""

    def age_ms(self, now: float) -> int:
        """Milliseconds since the snapshot was taken."""
        return round((now - self.snapshot.taken_at) * 1000)


__all__ = [
    "BackgroundJob",
    "JobState",
    "Snapshot",
    "background_due",
    "installed_history",
    "still_current",
]
