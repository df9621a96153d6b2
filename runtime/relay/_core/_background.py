"""Background compaction as plain data: the snapshot a job works from, and the job itself.

A background compaction computes a compacted history from a *snapshot* of the history while
the session goes on. Its result may be installed only while the live history still begins with
the snapshot, in the same window: then nothing of the snapshot changed and everything recorded
since is exactly the tail after it (``relay.tasks.compaction.still_current``, the install
rule). :class:`BackgroundJob` is what the session keeps of the one job it may run; the job runs
in :class:`~._support.Backgrounds`, with a :class:`~._support.BackendContext` over the snapshot
that reports and records nothing.
"""

from __future__ import annotations

import enum
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
]
