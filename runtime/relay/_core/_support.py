"""What a compaction works with: the one context a backend runs with, and the few means a
compactor has beyond it.

:class:`BackendContext` is one class for both places a backend runs. In the foreground it is
made over the live history and the turn's writer; over a background snapshot, with the snapshot
and the :class:`~._turn.Silent` writer, so that nothing it does is reported or recorded.

:class:`CompactionContext` is what a compactor (``relay.tasks.compaction.Compactor``) is given
at each compaction point: that backend context, the hooks, the install, the session's one
background job, and item ids.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio
import anyio.abc

from .._base import _protocol as p
from .._base._errors import ContextWindowExceeded
from .._base._model import CompactRequest, Prompt
from . import _sampling
from ._background import BackgroundJob, JobState, Snapshot
from ._budget import TokenBudget
from ._context import TurnSettings
from ._exec_gate import clear
from ._hooks import HookInput, HookPoint, HookStop, HookTrigger, compact_hooks, run_compact_hooks
from ._sampling import SampleResult
from ._session_writer import SessionWriter
from ._tools import ToolContext
from ._turn import Silent, Writer
from ._view import TaskView, prompt_of
from ._work_state import WorkEntry


class BackendContext:
    """What a backend sees while it computes a new history: the session as a view (the
    snapshot, in the background), requests that are neither recorded nor reported, and the
    size of what it makes."""

    def __init__(
        self, session: SessionWriter, writer: Writer, view: Callable[[], TaskView]
    ) -> None:
        self._session = session
        self._writer = writer
        self._view = view

    @property
    def view(self) -> TaskView:
        """The session as the backend works on it (the snapshot, in the background)."""
        return self._view()

    def emit(self, msg: p.EventMsg) -> None:
        """Report an event of the turn (dropped in the background)."""
        self._writer.emit(msg)

    def prompt(
        self,
        input: Iterable[p.ResponseItem] | None = None,
        *,
        tools: bool = True,
        model: str | None = None,
        purpose: str = "turn",
    ) -> Prompt:
        """A request over ``input`` (default: the history as the view shows it, normalised);
        ``purpose="compact"`` sends it to the compaction model."""
        wiring = self._session.wiring
        return prompt_of(
            self.view,
            input,
            tools=tools,
            model=model,
            instructions=None,
            purpose=purpose,
            provider=wiring.compact_provider if purpose == "compact" else wiring.provider,
        )

    async def sample(self, prompt: Prompt, *, max_retries: int | None = None) -> SampleResult:
        """Stream one response with retries (``stream_error`` events report them); nothing of
        the answer is recorded or reported, but its usage counts."""
        return await _sampling.sample(
            self._session, self._writer, prompt, record=False, report=False, max_retries=max_retries
        )

    async def remote_compact(self, request: CompactRequest) -> Any:
        """``POST /responses/compact`` with the provider's request retries."""
        return await _sampling.remote_compact(self._session.wiring, request)

    def initial_context(self) -> list[p.ResponseItem]:
        """The full initial context of the turn's world as it is now."""
        settings = self.view.settings
        return _sampling.initial_context_items(self._session.wiring, settings, self.emit)

    def budget(self, model: str | None = None) -> TokenBudget:
        """The token budget of ``model`` (default: the turn's)."""
        view = self.view
        return view.budget_for(model or view.settings.model)

    def estimate(self, items: Sequence[p.ResponseItem]) -> int:
        """The calibrated estimate of a request over ``items`` (with the instructions and
        tools): what a server would count."""
        return _sampling.estimate_context(self.view, items)

    def room_after(
        self, alongside: Sequence[p.ResponseItem], model: str | None = None
    ) -> int | None:
        """Tokens (as a server counts them) that the messages a compaction keeps may take
        beside ``alongside``; None when the window of ``model`` (default: the turn's) is
        unknown."""
        view = self.view
        return _sampling.room_after(view, self.budget(model), alongside, self.initial_context())

    def window_full(self, error: ContextWindowExceeded | None = None) -> None:
        """Count the history as filling the turn model's window and show it in a
        ``token_count``: the next turn compacts before it sends anything (nothing is counted
        in the background, where the history is a snapshot)."""
        self._writer.window_full(self.view.settings.model, error)


class CompactionContext:
    """A compactor's means at a compaction point of a task."""

    def __init__(
        self,
        session: SessionWriter,
        writer: Writer,
        backend: BackendContext,
        backgrounds: Backgrounds,
    ) -> None:
        self._session = session
        self._writer = writer
        self._backgrounds = backgrounds
        self.backend = backend
        """The context a backend runs with, over the live history; its view is the task's."""

    def new_item_id(self, prefix: str = "item") -> str:
        """A fresh item id, unique in the session (a compaction item's)."""
        return self._writer.new_item_id(prefix)

    async def run_hooks(
        self, point: HookPoint, *, trigger: HookTrigger, model: str
    ) -> HookStop | None:
        """Run the compaction hooks of ``point``, reporting each run; the first stop, if any."""
        session, view = self._session, self.backend.view
        wiring = session.wiring
        hooks = compact_hooks(wiring.config.hooks, wiring.hooks, point)
        if not hooks:
            return None
        rollout = session.recorder.writer
        info = HookInput(
            session_id=wiring.session_id,
            turn_id=self._writer.turn_id,
            cwd=view.settings.cwd,
            rollout_path=str(rollout.path) if rollout is not None else None,
            model=model,
            trigger=trigger,
            event=point,
        )
        return await run_compact_hooks(
            hooks, info, self._writer.emit, wiring.secrets, start=wiring.gate.open_hook
        )

    def install(
        self,
        items: Sequence[p.ResponseItem],
        *,
        message: str,
        receipt: p.CompactionReceipt,
        clear_reference: bool,
        masked_outputs: Mapping[str, str] | None = None,
    ) -> None:
        """Install a compacted history in one step (docs/compaction.md).

        Replaces the history (and, with ``clear_reference``, forgets the reference context so
        that the next turn records the initial context again), starts a new window, persists
        the ``compacted`` line (with the work-state record and the originals of
        ``masked_outputs``) and emits the ``token_count`` of the receipt.
        """
        self._writer.install(
            self.backend.view.settings,
            items,
            message=message,
            receipt=receipt,
            clear_reference=clear_reference,
            masked_outputs=masked_outputs,
        )

    def note(self, entry: WorkEntry) -> None:
        """Add ``entry`` to the work-state record and report it, whether or not
        ``features.work_state`` keeps the tools' own entries (a save-state step's output)."""
        self._writer.note_work(entry)

    async def run_tool(self, call: p.FunctionCall) -> str:
        """Run one tool call of the model without recording it in the history or reporting
        it as an item (a save-state step's): its output, redacted of the API key."""
        wiring, view = self._session.wiring, self.backend.view
        cwd = view.settings.cwd
        cleared = await clear(wiring.gate, wiring.tools, self._writer, cwd, call)
        if cleared.output is not None:
            return cleared.output
        tool_ctx = ToolContext(
            view.turn_id,
            view.settings.cwd,
            self._writer.emit,
            hidden_env=wiring.secrets.variables,
            tokens_used=view.budget.usage,
            context_window=view.budget.window,
            note=self._writer.note_work if wiring.config.features.work_state else _ignore,
            run_command=cleared.run,
        )
        return wiring.secrets.redact(await wiring.tools.call(call, tool_ctx))

    @property
    def background(self) -> BackgroundSlot:
        """The session's one background compaction."""
        return BackgroundSlot(self._backgrounds, self._writer, self.backend.view)


def _ignore(entry: WorkEntry) -> None:
    """A tool's note where the work-state record keeps no tool entries."""


BackgroundWork = Callable[[BackendContext], Awaitable[Any]]
"""What a background compaction runs: it returns its result, which waits on its job."""


class Backgrounds:
    """The session's one background compaction: started in the session's task group, taken
    by the turn that installs or drops it, cancelled at shutdown."""

    def __init__(self, session: SessionWriter, task_group: anyio.abc.TaskGroup) -> None:
        self._session = session
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
        state = self._session.state
        snapshot = Snapshot(tuple(state.history.items), state.window_id, anyio.current_time())
        job = BackgroundJob(self._count, snapshot, settings)
        self.job = job
        self._tg.start_soon(self._run, job, work, name=f"relay background compaction {job.number}")
        return job

    def context(self, job: BackgroundJob) -> BackendContext:
        """The context ``job``'s backend runs with: the snapshot, and a writer that writes
        nothing."""
        session = self._session
        turn_id = f"background-{job.number}"
        snapshot = (job.snapshot.items, job.snapshot.window_id)
        return BackendContext(
            session,
            Silent(session, turn_id),
            lambda: session.view(turn_id, "compact", job.settings, snapshot=snapshot),
        )

    async def _run(self, job: BackgroundJob, work: BackgroundWork) -> None:
        try:
            with job.scope:
                try:
                    job.result = await work(self.context(job))
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


class BackgroundSlot:
    """The session's background compaction, as a compaction point sees it."""

    def __init__(self, backgrounds: Backgrounds, writer: Writer, view: TaskView) -> None:
        self._backgrounds = backgrounds
        self._writer = writer
        self._view = view

    @property
    def job(self) -> BackgroundJob | None:
        """The job, if one was started and not yet taken."""
        return self._backgrounds.job

    def start(self, work: BackgroundWork) -> BackgroundJob | None:
        """Start ``work`` over a snapshot of the history taken now; None when a job is
        already there (at most one at a time), the session is shutting down or the turn has
        ended.

        ``work`` runs in the session's task group with a :class:`BackendContext` over the
        snapshot, which neither reports nor records anything; what it returns (or the message
        of what it raised) is kept on the job until :meth:`take`.
        """
        return self._writer.start_background(self._view.settings, work)

    def take(self) -> BackgroundJob | None:
        """Take the job away (cancelling it if it still runs), so that a new one may start;
        None when there is none or the turn has ended."""
        return self._writer.take_background()

    def drop(self, job: BackgroundJob, reason: str) -> None:
        """Report and record that ``job``'s result will not be installed, and why."""
        self._writer.note(
            p.BackgroundEvent(
                f"Dropped the background compaction of a snapshot taken "
                f"{job.age_ms(anyio.current_time())} ms ago: {reason}."
            )
        )


__all__ = [
    "BackendContext",
    "BackgroundSlot",
    "BackgroundWork",
    "Backgrounds",
    "CompactionContext",
]
