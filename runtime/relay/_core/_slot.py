"""The task slot: at most one running task, the turns queued behind it, and how a task ends.

Theory of operation. Starting a task first aborts the running one (reason ``replaced``), so its
``turn_aborted`` is emitted before the new ``turn_started``. Starting waits only for that abort:
with no task running, the task starts (``turn_started`` is out) before :meth:`TaskSlot.offer`
returns, and with one running, the abort and the start are handed back as the rest, for the
caller to await. Aborting cancels the task's scope, waits for it to finish for at most
:data:`ABORT_GRACE` seconds (it may still emit events meanwhile), then detaches it: the slot
records synthetic outputs for calls left unanswered (and, for an interrupt, the
``<turn_aborted>`` marker), lets the task leave the history consistent
(:meth:`~relay.SessionTask.abort`) and emits ``turn_aborted``. A task that returns by itself, or
raises, is completed by its runner: ``turn_complete``, or ``turn_aborted{reason}`` when it
stopped for one. The bookkeeping after a task ends or is aborted has no ``await`` in it, so no
other code of the session runs between a decision and the events that report it.

Every kind of task gets the same treatment here: ``turn_started`` and the terminal event are
emitted at this one site, whatever the task is.
"""

from __future__ import annotations

import functools
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, assert_never

import anyio
import anyio.abc
import attrs

from .._base import _protocol as p
from .._base._errors import ContextWindowExceeded, ErrorCode, ModelError
from ._agents import Agents
from ._context import TurnSettings, turn_aborted_marker
from ._exec_gate import Waits
from ._history import missing_outputs
from ._input import user_message_of
from ._port import CompactionPolicy, SessionTask, TaskContext, made_task
from ._session_writer import SessionWriter
from ._state import SessionStatistics
from ._support import Backgrounds
from ._task import StopTurn, TaskHandle, TaskStatus, TurnResult, strayed
from ._tools import ToolError
from ._turn import TurnWriter
from ._view import TaskView
from ._work_state import pins_overflow_advice

logger = logging.getLogger("relay")

#: Seconds an aborted task may take to finish before it is detached (docs/architecture.md).
ABORT_GRACE = 0.1


@attrs.frozen
class TaskFactory:
    """Makes the task an op starts (it may raise: the op is then refused with an ``error``
    naming its type)."""

    op_type: str
    """The op's type."""
    make: Callable[[Any], object]
    """The session's factory of that type."""
    op: object
    """The op."""

    def __call__(self) -> SessionTask:
        return made_task(self.op_type, self.make(self.op))


Rest = Callable[[], Awaitable[None]]
"""What is left of handling an op once it must wait (an abort); its caller awaits it."""


@attrs.frozen
class _Queued:
    id: str
    factory: TaskFactory
    settings: TurnSettings
    input: tuple[p.InputItem, ...] | None
    """The input of a queued user turn (recorded in the history if it never runs)."""


class TaskSlot:
    """Runs a session's tasks one at a time in the session's task group."""

    def __init__(
        self,
        services: SessionWriter,
        task_group: anyio.abc.TaskGroup,
        compactor: Callable[[], CompactionPolicy],
        changed: Callable[[], None],
        agents: Agents,
    ) -> None:
        self._services = services
        self._tg = task_group
        self._compactor = compactor
        self._changed = changed
        self.backgrounds = Backgrounds(services, task_group)
        """The session's one background compaction."""
        self.running: TaskHandle[SessionTask] | None = None
        """The running task, if any."""
        self._port: tuple[TaskContext, TurnWriter] | None = None
        self.queue: deque[_Queued] = deque()
        """Turns waiting for the running task to end."""
        self.closed = False
        """Set at shutdown: nothing starts any more."""
        self.agents: Agents = agents
        """The session's sub-agents (each task's port reaches them)."""
        self.lingering: list[TaskHandle[SessionTask]] = []
        """Aborted tasks whose code has not returned after their grace period (it ignores
        cancellation): detached, they hold up the session's end until they do."""

    def statistics(self, pending: int) -> SessionStatistics:
        """What the session is doing now (``pending``: submissions not handled yet)."""
        running = self.running
        job = self.backgrounds.job
        services = self._services
        return SessionStatistics(
            submissions_pending=pending,
            running_turn=running.turn_id if running else None,
            running_kind=running.task.kind if running else None,
            queued_turns=len(self.queue),
            events_emitted=services.events_emitted,
            history_items=len(services.state.history),
            background_compaction=job.state.value if job is not None else None,
            last_seq=services.last_seq,
            lingering=tuple(f"{h.task.kind} {h.turn_id}" for h in self.lingering),
            events_unread=services.events.unread,
            events_dropped=services.events.dropped,
        )

    def waits(self) -> Waits | None:
        """The calls of the running task that wait for a decision (None: nothing runs)."""
        return self._port[1].waits if self._port is not None else None

    # ------------------------------------------------------------------ starting

    def offer(
        self,
        turn_id: str,
        factory: TaskFactory,
        settings: TurnSettings,
        on_busy: p.OnBusy,
        steer: tuple[p.InputItem, ...] | None = None,
    ) -> Rest | None:
        """Start the work of an op now, or as ``on_busy`` says when a task is running; returns
        what is left when it replaces the running task (see :meth:`spawn`).

        ``steer`` is the op's input when it may join the running task.
        """
        running = self.running
        if running is not None:
            match on_busy:
                case p.OnBusy.STEER:
                    if steer is not None and running.task.steerable:
                        running.pending_input.append(steer)
                    else:
                        self._services.emit(
                            turn_id,
                            p.ErrorEvent(
                                f"the running {running.task.kind} task cannot take input; "
                                "submit the turn again when it ends, or with on_busy=queue",
                                ErrorCode.ACTIVE_TURN_NOT_STEERABLE,
                            ),
                        )
                    return None
                case p.OnBusy.QUEUE:
                    self.queue.append(_Queued(turn_id, factory, settings, steer))
                    return None
                case p.OnBusy.REPLACE:
                    pass
                case _:
                    assert_never(on_busy)
        return self.spawn(turn_id, settings, factory)

    def spawn(self, turn_id: str, settings: TurnSettings, factory: TaskFactory) -> Rest | None:
        """Build the task and start it. When a task is running, the rest waits: abort it
        (``replaced``), then start the new one; it is returned for the caller to await."""
        task = self._build(turn_id, factory)
        if task is None:
            return None
        if self.running is None:
            self._start(turn_id, task, settings)
            return None
        return functools.partial(self._replace, turn_id, task, settings)

    async def _replace(self, turn_id: str, task: SessionTask, settings: TurnSettings) -> None:
        await self.abort(p.AbortReason.REPLACED)
        self._start(turn_id, task, settings)

    def _build(self, turn_id: str, factory: TaskFactory) -> SessionTask | None:
        """The task ``factory`` makes, or None after an ``error`` event when it failed."""
        try:
            return factory()
        except BaseException as exc:
            if not isinstance(exc, Exception) and not strayed(exc):
                raise
            logger.exception("cannot build the task of %s", turn_id)
            # A factory refuses an op it cannot serve with ValueError, and one that makes no
            # task is its own error (TypeError); anything else is a bug.
            failed = isinstance(exc, ValueError | TypeError | SystemExit)
            code = ErrorCode.TASK_FAILED if failed else ErrorCode.INTERNAL
            message = f"cannot start the task of {factory.op_type!r}: {exc!r}"
            self._services.emit(turn_id, p.ErrorEvent(message, code))
            return None

    def _start(self, turn_id: str, task: SessionTask, settings: TurnSettings) -> None:
        services = self._services
        handle = TaskHandle(turn_id, task, settings, started=anyio.current_time())
        writer = TurnWriter(services, handle, self.backgrounds)
        compactor = self._compactor()
        port = TaskContext(services, handle, writer, self.backgrounds, compactor, self.agents)
        self.running, self._port = handle, (port, writer)
        self._changed()
        wiring = services.wiring
        services.emit(
            turn_id,
            p.TurnStarted(
                turn_id,
                wiring.context_window(settings.model),
                wiring.wall_time(),
                services.budget(settings.model).limit,
                task.kind,
            ),
        )
        self._tg.start_soon(self._run, handle, port, writer, name=f"relay task {turn_id}")

    def start_queued(self) -> None:
        """Start queued turns while nothing runs."""
        while self.running is None and self.queue and not self.closed:
            queued = self.queue.popleft()
            task = self._build(queued.id, queued.factory)
            if task is not None:
                self._start(queued.id, task, queued.settings)

    # ------------------------------------------------------------------ ending

    async def _run(
        self, handle: TaskHandle[SessionTask], port: TaskContext, writer: TurnWriter
    ) -> None:
        result: str | TurnResult | None = None
        try:
            with handle.scope:
                try:
                    result = await handle.task.run(port)
                except StopTurn as stop:
                    handle.ends_aborted = stop.reason
                except Exception as exc:
                    # A task that raised must not take the session down: report it and end
                    # the turn normally.
                    if not isinstance(exc, ModelError):
                        logger.exception("task %s failed", handle.turn_id)
                    report_failure(writer, port.view, handle.task.kind, exc)
                except BaseException as exc:
                    if not strayed(exc):
                        raise
                    logger.exception("task %s failed", handle.turn_id)
                    report_failure(writer, port.view, handle.task.kind, exc)
        finally:
            handle.finished.set()
            if handle in self.lingering:
                self.lingering.remove(handle)
        if handle.status is TaskStatus.RUNNING:
            self._complete(handle, result)

    def _complete(self, handle: TaskHandle[SessionTask], result: str | TurnResult | None) -> None:
        handle.status = TaskStatus.ENDED
        for items in handle.pending_input:
            self._services.record_input(handle.turn_id, items)
        handle.pending_input.clear()
        if handle.ends_aborted is p.AbortReason.INTERRUPTED:
            self.agents.interrupt()  # the turn stopped itself as an interrupt would (abort)
        if handle.ends_aborted is not None:
            end: p.EventMsg = p.TurnAborted(
                handle.turn_id, handle.ends_aborted, handle.duration_ms()
            )
        else:
            done = result if isinstance(result, TurnResult) else TurnResult(result)
            last = done.message if done.message is not None else handle.last_message
            end = p.TurnComplete(handle.turn_id, last, handle.duration_ms(), done.output)
        self._services.emit(handle.turn_id, end)
        handle.detached = True
        self.running, self._port = None, None
        self.start_queued()
        self._changed()

    async def abort(self, reason: p.AbortReason) -> None:
        """Abort the running task, if any (idempotent)."""
        handle, ported = self.running, self._port
        if handle is None or ported is None or handle.status is not TaskStatus.RUNNING:
            return
        port = ported[0]
        handle.status = TaskStatus.ABORTING
        if reason is not p.AbortReason.SHUTDOWN:
            # An interrupted or replaced turn stops the work of every descendant too.
            self.agents.interrupt()
        handle.scope.cancel(f"relay: task {reason.value}")
        with anyio.move_on_after(ABORT_GRACE):
            await handle.finished.wait()
        # No await from here on: a task that lingers in a shielded section cannot run until
        # it is detached, so the abort hook's writes are the last of its turn.
        handle.status = TaskStatus.ENDED
        if not handle.finished.is_set():
            self.lingering.append(handle)
        services = self._services
        for output in missing_outputs(services.state.history.items):
            services.record(output)
        handle.task.abort(port, reason)
        handle.detached = True
        handle.pending_input.clear()
        if reason is p.AbortReason.INTERRUPTED:
            services.record(turn_aborted_marker())
        services.emit(handle.turn_id, p.TurnAborted(handle.turn_id, reason, handle.duration_ms()))
        self.running, self._port = None, None
        self._changed()

    async def interrupt(self) -> None:
        """Abort the running task (``interrupted``), then start the turns queued behind it."""
        await self.abort(p.AbortReason.INTERRUPTED)
        self.start_queued()

    def drop_queue(self) -> None:
        """Drop the turns queued behind the running one; their input is kept in the history,
        as a shutdown keeps it."""
        queued = list(self.queue)
        self.queue.clear()
        for turn in queued:
            if turn.input is not None:
                self._services.record(user_message_of(turn.input))
        self._changed()

    async def shut_down(self) -> None:
        """Abort the running task, stop the background job, and record the input of turns
        that never started (after what the aborted turn recorded, as an aborted turn keeps
        steered input it never picked up)."""
        queued = list(self.queue)
        self.queue.clear()
        await self.abort(p.AbortReason.SHUTDOWN)
        await self.backgrounds.stop()
        for turn in queued:
            if turn.input is not None:
                self._services.record(user_message_of(turn.input))
        self.closed = True


def report_failure(writer: TurnWriter, view: TaskView, kind: str, error: BaseException) -> None:
    """Report what ended a task: a model error as a regular turn reports it, anything else as
    an ``error`` naming the kind and the exception."""
    if isinstance(error, ContextWindowExceeded):
        writer.window_full(view.settings.model, error)
        advice = overflow_advice(error, view.budget.limit is not None)
        pins = pins_overflow_advice(view.work_state.pinned, view.budget.window)
        if pins is not None:
            advice = f"{advice} {pins}"
        writer.emit(p.ErrorEvent(advice, ErrorCode.CONTEXT_WINDOW_EXCEEDED))
    elif isinstance(error, ModelError):
        writer.emit(p.ErrorEvent(error.message, error.code))
    else:
        # A task gives up on purpose with ToolError; anything else is a bug.
        code = ErrorCode.TASK_FAILED if isinstance(error, ToolError) else ErrorCode.INTERNAL
        writer.emit(p.ErrorEvent(f"the {kind} task failed: {error!r}", code))


def overflow_advice(error: ContextWindowExceeded, compacts: bool) -> str:
    """The message of a ``context_window_exceeded`` error: what happened, and what will work
    (``compacts``: whether the session knows a limit at which it compacts by itself)."""
    counted = ""
    if error.prompt_tokens is not None and error.context_window is not None:
        counted = (
            f" (the server counted {error.prompt_tokens} tokens; it holds {error.context_window})"
        )
    if compacts:
        return (
            f"The conversation no longer fits the model's context window{counted}. It is "
            "compacted before your next message is sent; submit compact to do it now."
        )
    return (
        f"The conversation no longer fits the model's context window{counted}, whose size "
        "relay does not know. Set model_context_window so that relay compacts in time, then "
        "submit compact, or start a new session."
    )


__all__ = ["ABORT_GRACE", "Rest", "TaskFactory", "TaskSlot", "overflow_advice", "report_failure"]
