"""Background compaction as plain data: the snapshot, when work starts, when a result installs.

A background compaction computes a compacted history from a *snapshot* of the history while
the session goes on. Its result may be installed only while the live history still begins with
the snapshot, in the same window: then nothing of the snapshot changed and everything recorded
since is exactly the tail after it. :func:`still_current` is that rule and
:func:`installed_history` what an install puts in place; both are pure and tested without an
event loop. :class:`BackgroundJob` is what the session keeps of the one job it may run, and
:class:`BackgroundContext` what a backend sees while it works for one: a sibling of a turn's
compaction support over the snapshot, which reports and records nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import anyio.abc
import attrs

from .._base import _protocol as p
from .._base._errors import ContextWindowExceeded
from .._base._model import CompactRequest, Prompt
from . import _sampling
from ._budget import TokenBudget
from ._context import TurnSettings
from ._sampling import SampleResult
from ._services import Services
from ._turn import Silent
from ._view import TaskView


@attrs.frozen
class Snapshot:
    """The history a background compaction works from."""

    items: tuple[p.ResponseItem, ...]
    """The history when the work started."""
    window_id: str
    """The window it belongs to."""
    taken_at: float
    """``anyio.current_time()`` when it was taken."""


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


class BackgroundContext:
    """What a backend sees while it compacts a background snapshot (a
    :class:`~relay.lowlevel.BackendContext`): the history is the snapshot, and nothing it
    does is reported or recorded; its result waits on the job."""

    def __init__(self, services: Services, job: BackgroundJob) -> None:
        self._services = services
        self._writer = Silent(f"background-{job.number}")
        self.job = job
        """The job this context works for."""

    @property
    def view(self) -> TaskView:
        services, job = self._services, self.job
        state = services.state
        return TaskView(
            turn_id=self._writer.turn_id,
            kind="compact",
            settings=job.settings,
            config=services.config,
            provider=services.provider,
            history=job.snapshot.items,
            budget=services.budget(job.settings.model),
            instructions=services.instructions,
            work_state=state.work_state,
            window_id=job.snapshot.window_id,
            last_turn_model=state.last_turn_model,
            steered=0,
        )

    def emit(self, msg: p.EventMsg) -> None:
        """Nothing is reported until the result is installed."""
        del msg

    def prompt(
        self,
        input: Sequence[p.ResponseItem] | None = None,
        *,
        tools: bool = True,
        model: str | None = None,
        purpose: str = "compact",
    ) -> Prompt:
        """A request over ``input`` (default: the snapshot)."""
        items = self.job.snapshot.items if input is None else input
        return _sampling.build_prompt(
            self._services, self.job.settings, items, tools=tools, model=model, purpose=purpose
        )

    async def sample(self, prompt: Prompt, *, max_retries: int | None = None) -> SampleResult:
        return await _sampling.sample(
            self._services,
            self._writer,
            prompt,
            record=False,
            report=False,
            max_retries=max_retries,
        )

    async def remote_compact(self, request: CompactRequest) -> Any:
        return await _sampling.remote_compact(self._services, request)

    def initial_context(self) -> list[p.ResponseItem]:
        return _sampling.initial_context_items(self._services, self.job.settings, self.emit)

    def budget(self, model: str | None = None) -> TokenBudget:
        return self._services.budget(model or self.job.settings.model)

    def room_after(
        self, alongside: Sequence[p.ResponseItem], model: str | None = None
    ) -> int | None:
        return _sampling.room_after(
            self._services, self.budget(model), alongside, self.initial_context()
        )

    def window_full(self, error: ContextWindowExceeded | None = None) -> None:
        """The live history is not the snapshot: nothing is counted."""
        del error


BackgroundWork = Callable[[BackgroundContext], Awaitable[Any]]
"""What a background compaction runs: it returns its result, which waits on its job."""


class Backgrounds:
    """The session's one background compaction: started in the session's task group, taken
    by the turn that installs or drops it, cancelled at shutdown."""

    def __init__(self, services: Services, task_group: anyio.abc.TaskGroup) -> None:
        self._services = services
        self._tg = task_group
        self._count = 0
        self.job: BackgroundJob | None = None
        """The job, if one was started and not yet taken."""
        self.closed = False
        """Set at shutdown: no job starts any more."""

    def start(self, settings: TurnSettings, work: BackgroundWork) -> BackgroundJob | None:
        """Start ``work`` over a snapshot of the history taken now; None when a job is already
        there (at most one at a time) or the session is shutting down."""
        if self.job is not None or self.closed:
            return None
        self._count += 1
        state = self._services.state
        snapshot = Snapshot(tuple(state.history.items), state.window_id, anyio.current_time())
        job = BackgroundJob(self._count, snapshot, settings)
        self.job = job
        self._tg.start_soon(self._run, job, work, name=f"relay background compaction {job.number}")
        return job

    async def _run(self, job: BackgroundJob, work: BackgroundWork) -> None:
        ctx = BackgroundContext(self._services, job)
        try:
            with job.scope:
                try:
                    job.result = await work(ctx)
                    job.state = JobState.READY
                except Exception as exc:
                    # A failed background compaction costs nothing: the foreground compaction
                    # runs as it would have without it.
                    message = getattr(exc, "message", None)
                    job.failure = message if isinstance(message, str) else repr(exc)
                    job.state = JobState.FAILED
        finally:
            if job.state is JobState.RUNNING:
                job.state = JobState.FAILED
                job.failure = "cancelled"
            job.duration_ms = round((anyio.current_time() - job.snapshot.taken_at) * 1000)
            job.finished.set()

    def take(self) -> BackgroundJob | None:
        """Take the job away (cancelling it if it still runs), so that a new one may start."""
        job = self.job
        self.job = None
        if job is not None:
            job.scope.cancel("relay: background result taken")
        return job

    async def stop(self) -> None:
        """Start no more jobs; cancel the job and wait for it (it holds no shielded section)."""
        self.closed = True
        job = self.take()
        if job is not None:
            await job.finished.wait()


__all__ = [
    "BackgroundContext",
    "BackgroundWork",
    "Backgrounds",
    "BackgroundJob",
    "JobState",
    "Snapshot",
    "installed_history",
    "still_current",
]
