"""The session actor: a submission loop, a task slot, an event stream.

Theory of operation. :func:`open_session` owns a task group. One loop reads submissions in order
and dispatches each to a handler; handlers return quickly (at most an abort's grace period),
because work runs in tasks. The *slot* holds at most one running :class:`TaskHandle`.

Starting a task first aborts the running one (reason ``replaced``), and its ``turn_aborted`` is
emitted before the new ``turn_started``. Aborting cancels the task's scope, waits for it to
finish for at most :data:`ABORT_GRACE` seconds (it may still emit events meanwhile), then
detaches it: the session records synthetic outputs for calls left unanswered (and, for an
interrupt, the ``<turn_aborted>`` marker), flushes the rollout and emits ``turn_aborted``.

Every event goes through :meth:`Session._emit`, which numbers it; a task's events and history
writes go through its :class:`~relay._core._task_context.TaskContext`, which drops them once the
task is detached. The bookkeeping after a task ends or is aborted has no ``await`` in it, so no
other code of the session runs between a decision and the events that report it.

The session's mutable state is one :class:`~relay._core._state.SessionState`; the rollout lines it
writes are :class:`~relay._core._recorder.RolloutRecorder`'s business.
"""

from __future__ import annotations

import logging
import math
import os
import random
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, assert_never

import anyio
import anyio.lowlevel
import attrs

from .._base import _protocol as p
from .._base._codec import decode_op, to_json
from .._base._config import Config, ProviderConfig, context_window_for, relay_home, resolve_api_key
from .._base._errors import ClosedSessionError, ConfigError, ErrorCode, InvalidOpError
from .._base._model import ModelClient
from .._base._templates import template
from .._base._tokens import ApproxEstimator, TokenEstimator
from .._base._util import NoPublicConstructor, single_exception
from .._models._scripted import ScriptedModel
from .._version import __version__
from ._background import BackgroundJob, JobState, Snapshot
from ._compact import compaction_prompt
from ._context import (
    TurnSettings,
    WorldState,
    check_working_directory,
    turn_aborted_marker,
    world_state,
)
from ._event_stream import EventStream
from ._history import History, missing_outputs
from ._hooks import CompactHook
from ._input import input_text, user_message_of
from ._recorder import TERMINAL_EVENTS, RolloutRecorder
from ._state import ResumedState, SessionState
from ._task import SessionTask, TaskHandle, TaskKind, TaskKinds, TaskStatus, builtin_task_kinds
from ._task_context import BackgroundContext, TaskContext
from ._tools import CONTEXT_TOOLS, Tool, ToolRegistry, builtin_registry, recall_tool
from ._writer import RolloutWriter, payload_json

logger = logging.getLogger("relay")

#: Seconds an aborted task may take to finish before it is detached (docs/architecture.md).
ABORT_GRACE = 0.1
#: The event id of ``session_configured``, which no submission caused.
SESSION_EVENT_ID = "session"


@attrs.frozen
class SessionStatistics:
    """A snapshot of what the session is doing."""

    submissions_pending: int
    """Submissions not yet handled by the loop."""
    running_turn: str | None
    """The turn id of the running task, if any."""
    running_kind: TaskKind | None
    """Its kind."""
    queued_turns: int
    """User turns waiting for the running task to end."""
    events_emitted: int
    """Events so far."""
    history_items: int
    """Items in the history."""


@attrs.frozen
class _RawSubmission:
    id: str
    payload: Any
    origin: str | None


@attrs.frozen
class _QueuedTurn:
    id: str
    items: tuple[p.InputItem, ...]
    settings: TurnSettings


class Session(metaclass=NoPublicConstructor):
    """A running session. Get one from :func:`open_session`; submit ops, read events."""

    def __init__(
        self,
        config: Config,
        *,
        model: ModelClient,
        tools: ToolRegistry,
        task_group: anyio.abc.TaskGroup,
        session_id: str,
        clock: Callable[[], datetime],
        rng: random.Random,
        rollout: RolloutWriter | None,
        state: SessionState,
        task_kinds: TaskKinds,
        estimator: TokenEstimator | None = None,
        hooks: Iterable[CompactHook] = (),
        ids: tuple[int, int] = (0, 0),
    ) -> None:
        self.id = session_id
        """The session id."""
        self.config = config
        """The configuration it runs with."""
        client_provider = getattr(model, "provider", None)
        # An HTTP client carries its provider table; its retry limits are the ones that apply.
        self.provider: ProviderConfig = (
            client_provider if isinstance(client_provider, ProviderConfig) else config.provider()
        )
        """The provider the model client talks to."""
        self.model = model
        """The model client."""
        self.tools = tools
        """The tools the model may call."""
        self.state = state
        """Everything the session knows between turns (read it; the session writes it)."""
        self.rng = rng
        """The random source of retry jitter."""
        self.compact_hooks: list[CompactHook] = list(hooks)
        """Python callables run before and after compactions (besides configured commands)."""
        self.instructions = _base_instructions(config)
        """The base instructions of every request."""
        self._recorder = RolloutRecorder(rollout, ids)
        self._task_kinds = task_kinds
        self._tg = task_group
        self._clock = clock
        self._seq = 0
        self._running: TaskHandle | None = None
        self._queue: deque[_QueuedTurn] = deque()
        self._closed = False
        self._finished = anyio.Event()
        self._unprocessed = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._idle_wakers: list[anyio.Event] = []
        # The generated ids go on from where a resumed session's left off.
        self._sub_counter, self._item_counter = ids
        self._sub_send, self._sub_recv = anyio.create_memory_object_stream[
            p.Submission | _RawSubmission
        ](math.inf)
        self._events = EventStream()
        self._estimator: TokenEstimator | None = estimator
        self._background: BackgroundJob | None = None
        self._background_count = 0

    # ------------------------------------------------------------------ public surface

    @property
    def history(self) -> History:
        """The conversation history (read it; the session writes it)."""
        return self.state.history

    @property
    def rollout(self) -> RolloutWriter | None:
        """The rollout writer, when persistence is on."""
        return self._recorder.writer

    def _next_id(self, id: str | None) -> str:
        if id is not None:
            if not isinstance(id, str) or not id:
                raise InvalidOpError("a submission id must be a non-empty string")
            return id
        self._sub_counter += 1
        return f"sub-{self._sub_counter}"

    def submit_nowait(self, op: p.Op, *, id: str | None = None) -> str:
        """Queue ``op`` for the loop; returns the submission id.

        Raises:
            InvalidOpError: ``op`` is not an op.
            ClosedSessionError: the session has shut down.
        """
        if not isinstance(
            op,
            p.UserTurn | p.UserInput | p.Compact | p.Interrupt | p.OverrideTurnContext | p.Shutdown,
        ):
            raise InvalidOpError(f"not an op: {op!r}")
        sub_id = self._next_id(id)
        self._enqueue(p.Submission(sub_id, op))
        return sub_id

    async def submit(self, op: p.Op, *, id: str | None = None) -> str:
        """Submit ``op``; returns the submission id. See :meth:`submit_nowait`."""
        await anyio.lowlevel.checkpoint()
        return self.submit_nowait(op, id=id)

    def submit_json_nowait(
        self, payload: Any, *, id: str | None = None, origin: str | None = None
    ) -> str:
        """Submit an op in its JSON form; it is decoded by the loop, in order with the others.

        An op that does not decode becomes an ``error{code: invalid_op}`` event whose message
        starts with ``origin`` (for example ``"script line 4"``); the session goes on.
        """
        sub_id = self._next_id(id)
        self._enqueue(_RawSubmission(sub_id, payload, origin))
        return sub_id

    def _enqueue(self, submission: p.Submission | _RawSubmission) -> None:
        if self._closed:
            raise ClosedSessionError("the session has shut down")
        self._unprocessed += 1
        self._refresh_idle()
        self._sub_send.send_nowait(submission)

    def events(self) -> AsyncIterator[p.Event]:
        """The event stream; it ends after ``shutdown_complete``. Only one reader may take it."""
        return self._events.reader()

    async def wait_idle(self) -> None:
        """Wait until every submission is handled, no task runs and no turn is queued."""
        while not self._is_idle():
            await self._idle.wait()

    async def wait_closed(self) -> None:
        """Wait until the session has shut down."""
        await self._finished.wait()

    def statistics(self) -> SessionStatistics:
        """What the session is doing now."""
        running = self._running
        return SessionStatistics(
            submissions_pending=self._unprocessed,
            running_turn=running.turn_id if running else None,
            running_kind=running.task.kind if running else None,
            queued_turns=len(self._queue),
            events_emitted=self._seq,
            history_items=len(self.state.history),
        )

    def register_hook(self, hook: CompactHook) -> None:
        """Run ``hook`` at its point in every later compaction."""
        self.compact_hooks.append(hook)

    @property
    def closed(self) -> bool:
        """Whether the session has shut down."""
        return self._closed

    def model_context_window(self, model: str | None = None) -> int | None:
        """The context window of ``model`` (default: the next turn's)."""
        return context_window_for(
            model or self.state.defaults.model, self.config.model_context_window
        )

    # ------------------------------------------------------------------ events & records

    def _is_idle(self) -> bool:
        return self._unprocessed == 0 and self._running is None and not self._queue

    def _refresh_idle(self) -> None:
        if self._is_idle():
            self._idle.set()
            if self._idle_wakers:
                for waker in self._idle_wakers:
                    waker.set()
                self._idle_wakers.clear()
        elif self._idle.is_set():
            self._idle = anyio.Event()

    def _wake_when_idle(self, event: anyio.Event) -> None:
        """Set ``event`` when the session is next idle (at once, if it is now).

        A waiter that also waits for something else passes the one event it waits on, rather
        than racing two tasks; an event already set when the next one comes in is dropped.
        """
        if self._is_idle():
            event.set()
            return
        wakers = self._idle_wakers
        while wakers and wakers[-1].is_set():
            wakers.pop()
        wakers.append(event)

    def _emit(self, event_id: str, msg: p.EventMsg) -> None:
        """Number ``msg``, persist it if it is a persisted kind, and send it to the reader.

        A terminal event (``turn_complete``, ``turn_aborted``, ``shutdown_complete``) is
        flushed to the rollout, with everything before it, before anyone can see it.
        """
        self._seq += 1
        if isinstance(msg, TERMINAL_EVENTS):
            self._recorder.ids(self._sub_counter, self._item_counter)
        event = p.Event(event_id, self._seq, msg)
        if self._events.keeps_json:
            data = to_json(msg)
            text = payload_json(data)
            self._recorder.event(msg, text)
            self._events.send(event, (data, text))
        else:
            self._recorder.event(msg)
            self._events.send(event)

    def _record(self, item: p.ResponseItem, *, from_model: bool = False) -> None:
        """Append an item to the history and the rollout."""
        history = self.state.history
        history.record(item, from_model=from_model)
        written = self._recorder.item(item)
        if written is not None:
            history.known_json(item, *written)

    def _new_item_id(self, prefix: str = "item") -> str:
        self._item_counter += 1
        return f"{prefix}-{self._item_counter}"

    def _world(self, cwd: str) -> WorldState:
        return world_state(cwd, self._clock, os.environ.get("SHELL"))

    def _record_user_input(self, turn_id: str, items: tuple[p.InputItem, ...]) -> None:
        item_id = self._new_item_id("user")
        started = p.UserMessageItem(item_id, items)
        self._emit(turn_id, p.ItemStarted(turn_id, started))
        self._record(user_message_of(items))
        self._emit(turn_id, p.ItemCompleted(turn_id, started))
        self._emit(turn_id, p.UserMessage(input_text(items)))

    def _pin(self, sub_id: str, items: tuple[p.InputItem, ...]) -> None:
        """Keep the text of ``items`` verbatim across compactions, from now on."""
        text = user_message_of(items).text()
        self.state.work_state.pin(text)
        self._emit(sub_id, p.WorkStateNoted("pinned", text))

    async def usage_estimator(self) -> TokenEstimator:
        """The counter for usage a server did not report: tiktoken when it is installed
        (loaded once, off the event loop), else the approximate count."""
        if self._estimator is None:
            try:
                from .._base._tiktoken import TiktokenEstimator, get_encoding
            except ImportError:
                self._estimator = ApproxEstimator()
            else:
                estimator = TiktokenEstimator("o200k_base")
                await anyio.to_thread.run_sync(get_encoding, estimator.encoding_name)
                self._estimator = estimator
        return self._estimator

    def _wall_time(self) -> float:
        return self._clock().timestamp()

    def _configured(self, *, resumed: bool) -> None:
        """Emit ``session_configured``, the first event of every session."""
        writer = self._recorder.writer
        defaults = self.state.defaults
        self._emit(
            SESSION_EVENT_ID,
            p.SessionConfigured(
                session_id=self.id,
                model=defaults.model,
                model_provider=self.config.model_provider,
                model_context_window=self.model_context_window(),
                cwd=defaults.cwd,
                rollout_path=str(writer.path) if writer is not None else None,
                relay_version=__version__,
                resumed=resumed,
            ),
        )

    # ------------------------------------------------------------------ the loop

    async def _run_loop(self) -> None:
        try:
            await self._serve()
        finally:
            # Also on a crash of the loop: the session is closed (submissions raise
            # ClosedSessionError, the event stream ends) and open_session's exit never waits.
            self._closed = True
            self._sub_send.close()
            self._events.close()
            self._finished.set()

    async def _serve(self) -> None:
        last_id = "shutdown"
        async with self._sub_recv:
            async for submission in self._sub_recv:
                last_id = submission.id
                try:
                    await self._handle(submission)
                finally:
                    self._unprocessed -= 1
                    self._refresh_idle()
                if self._closed:
                    break
        if not self._closed:
            await self._shutdown(last_id)

    async def _handle(self, submission: p.Submission | _RawSubmission) -> None:
        if isinstance(submission, _RawSubmission):
            try:
                op = decode_op(submission.payload)
            except InvalidOpError as exc:
                prefix = f"{submission.origin}: " if submission.origin else ""
                self._emit(submission.id, p.ErrorEvent(f"{prefix}{exc}", ErrorCode.INVALID_OP))
                return
            submission = p.Submission(submission.id, op)
        sub_id, op = submission.id, submission.op
        match op:
            case p.UserTurn():
                if op.pin:
                    self._pin(sub_id, op.items)
                await self._on_user_turn(sub_id, op.items, op.on_busy, self._update_defaults(op))
            case p.UserInput():
                await self._on_user_turn(sub_id, op.items, p.OnBusy.STEER, self.state.defaults)
            case p.Compact():
                kinds = self._task_kinds
                await self._spawn(
                    sub_id, self.state.defaults, lambda: kinds.compact(op.instructions)
                )
            case p.Interrupt():
                await self._abort(p.AbortReason.INTERRUPTED)
                self._start_queued()
            case p.OverrideTurnContext():
                self._update_defaults(op)
            case p.Shutdown():
                await self._shutdown(sub_id)
            case _:
                assert_never(op)

    def _update_defaults(self, op: p.UserTurn | p.OverrideTurnContext) -> TurnSettings:
        """Apply the settings ``op`` carries to the defaults; returns the new defaults."""
        changes: dict[str, Any] = {
            name: value
            for name in ("model", "cwd", "effort")
            if (value := getattr(op, name)) is not None
        }
        if changes:
            self.state.defaults = attrs.evolve(self.state.defaults, **changes)
        return self.state.defaults

    async def _on_user_turn(
        self,
        sub_id: str,
        items: tuple[p.InputItem, ...],
        on_busy: p.OnBusy,
        settings: TurnSettings,
    ) -> None:
        running = self._running
        if running is not None:
            match on_busy:
                case p.OnBusy.STEER:
                    if running.task.steerable:
                        running.pending_input.append(items)
                    else:
                        self._emit(
                            sub_id,
                            p.ErrorEvent(
                                f"the running {running.task.kind} task cannot take input; "
                                "submit the turn again when it ends, or with on_busy=queue",
                                ErrorCode.ACTIVE_TURN_NOT_STEERABLE,
                            ),
                        )
                    return
                case p.OnBusy.QUEUE:
                    self._queue.append(_QueuedTurn(sub_id, items, settings))
                    return
                case p.OnBusy.REPLACE:
                    pass
                case _:
                    assert_never(on_busy)
        kinds = self._task_kinds
        await self._spawn(sub_id, settings, lambda: kinds.regular(items))

    def _build(self, turn_id: str, factory: Callable[[], SessionTask]) -> SessionTask | None:
        """The task ``factory`` makes, or None after an ``error`` event when it failed."""
        try:
            return factory()
        except Exception as exc:
            logger.exception("cannot build the task of %s", turn_id)
            self._emit(turn_id, p.ErrorEvent(f"cannot start the task: {exc!r}", ErrorCode.INTERNAL))
            return None

    async def _spawn(
        self, turn_id: str, settings: TurnSettings, factory: Callable[[], SessionTask]
    ) -> None:
        task = self._build(turn_id, factory)
        if task is None:
            return
        await self._abort(p.AbortReason.REPLACED)
        self._start(turn_id, task, settings)

    def _start(self, turn_id: str, task: SessionTask, settings: TurnSettings) -> None:
        handle = TaskHandle(turn_id, task, settings, started=anyio.current_time())
        self._running = handle
        self._refresh_idle()
        self._emit(
            turn_id,
            p.TurnStarted(turn_id, self.model_context_window(settings.model), self._wall_time()),
        )
        self._tg.start_soon(self._run_task, handle, name=f"relay task {turn_id}")

    def _start_queued(self) -> None:
        kinds = self._task_kinds
        while self._running is None and self._queue and not self._closed:
            queued = self._queue.popleft()
            task = self._build(queued.id, partial(kinds.regular, queued.items))
            if task is not None:
                self._start(queued.id, task, queued.settings)

    async def _run_task(self, handle: TaskHandle) -> None:
        ctx = TaskContext(self, handle)
        result: str | None = None
        try:
            with handle.scope:
                try:
                    result = await handle.task.run(ctx)
                except Exception as exc:
                    # A bug in a task or a tool must not take the session down: report it and
                    # end the turn normally.
                    logger.exception("task %s failed", handle.turn_id)
                    ctx.emit(p.ErrorEvent(f"internal error: {exc!r}", ErrorCode.INTERNAL))
        finally:
            handle.finished.set()
        if handle.status is TaskStatus.RUNNING:
            self._complete(handle, result)

    # ------------------------------------------------------------------ background work

    def _start_background(
        self, settings: TurnSettings, work: Callable[[TaskContext], Awaitable[Any]]
    ) -> BackgroundJob | None:
        if self._background is not None or self._closed:
            return None
        self._background_count += 1
        state = self.state
        snapshot = Snapshot(tuple(state.history.items), state.window_id, anyio.current_time())
        job = BackgroundJob(self._background_count, snapshot, settings)
        self._background = job
        self._tg.start_soon(
            self._run_background, job, work, name=f"relay background compaction {job.number}"
        )
        return job

    async def _run_background(
        self, job: BackgroundJob, work: Callable[[TaskContext], Awaitable[Any]]
    ) -> None:
        ctx = BackgroundContext(self, job)
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

    def _take_background(self) -> BackgroundJob | None:
        job = self._background
        self._background = None
        if job is not None:
            job.scope.cancel("relay: background result taken")
        return job

    async def _stop_background(self) -> None:
        """Cancel the background job and wait for it (it holds no shielded section)."""
        job = self._take_background()
        if job is not None:
            await job.finished.wait()

    def _complete(self, handle: TaskHandle, result: str | None) -> None:
        handle.status = TaskStatus.ENDED
        for items in handle.pending_input:
            self._record_user_input(handle.turn_id, items)
        handle.pending_input.clear()
        if handle.ends_aborted is not None:
            end: p.EventMsg = p.TurnAborted(
                handle.turn_id, handle.ends_aborted, handle.duration_ms()
            )
        else:
            end = p.TurnComplete(handle.turn_id, result, handle.duration_ms())
        self._emit(handle.turn_id, end)
        handle.detached = True
        self._running = None
        self._start_queued()
        self._refresh_idle()

    async def _abort(self, reason: p.AbortReason) -> None:
        """Abort the running task, if any (idempotent)."""
        handle = self._running
        if handle is None or handle.status is not TaskStatus.RUNNING:
            return
        handle.status = TaskStatus.ABORTING
        handle.scope.cancel(f"relay: task {reason.value}")
        with anyio.move_on_after(ABORT_GRACE):
            await handle.finished.wait()
        # No await from here on: a task that lingers in a shielded section cannot run until
        # it is detached, so the abort hook's writes are the last of its turn.
        handle.status = TaskStatus.ENDED
        for output in missing_outputs(self.state.history.items):
            self._record(output)
        handle.task.abort(TaskContext(self, handle), reason)
        handle.detached = True
        handle.pending_input.clear()
        if reason is p.AbortReason.INTERRUPTED:
            self._record(turn_aborted_marker())
        self._emit(handle.turn_id, p.TurnAborted(handle.turn_id, reason, handle.duration_ms()))
        self._running = None
        self._refresh_idle()

    async def _shutdown(self, sub_id: str) -> None:
        queued = list(self._queue)
        self._queue.clear()
        await self._abort(p.AbortReason.SHUTDOWN)
        await self._stop_background()
        # Turns that never started keep their input, after what the aborted turn recorded
        # (as an aborted turn keeps steered input it never picked up).
        for turn in queued:
            self._record(user_message_of(turn.items))
        self._closed = True
        self._emit(sub_id, p.ShutdownComplete())
        self._recorder.close()
        self._sub_send.close()
        self._events.close()
        self._refresh_idle()
        self._finished.set()


def _base_instructions(config: Config) -> str:
    if config.base_instructions is not None:
        return config.base_instructions
    if config.base_instructions_file is not None:
        try:
            return Path(config.base_instructions_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read base_instructions_file {config.base_instructions_file}: "
                f"{exc.strerror}"
            ) from exc
    return template("base_instructions.md")


def _default_clock() -> datetime:
    return datetime.now().astimezone()


@asynccontextmanager
async def open_session(
    config: Config | None = None,
    *,
    model: ModelClient | None = None,
    tools: Iterable[Tool] = (),
    session_id: str | None = None,
    clock: Callable[[], datetime] | None = None,
    rng: random.Random | None = None,
    resume: ResumedState | None = None,
    estimator: TokenEstimator | None = None,
    hooks: Iterable[CompactHook] = (),
    task_kinds: TaskKinds | None = None,
) -> AsyncIterator[Session]:
    """Open a session that runs until the block exits or a ``shutdown`` op ends it.

    Leaving the block shuts the session down: a running task is aborted (reason
    ``shutdown``) and ``shutdown_complete`` is the last event.

    Args:
        config: the configuration (default: ``Config()``, the embedded scripted model).
        model: a model client to use instead of the configured provider.
        tools: tools to register besides the enabled built-ins.
        hooks: Python callables to run before or after compactions (configured hook
            commands run first).
        session_id: the session id (default: a new UUID).
        clock: the wall clock used for dates and timestamps in events.
        rng: the random source of retry jitter.
        estimator: the token counter for responses whose server reported no usage (default:
            tiktoken's ``o200k_base`` when installed, else the approximate count).
        resume: state rebuilt from a rollout; the session continues it and appends to its
            rollout file (see :func:`relay.resume_session`).
        task_kinds: the factories of the session's tasks (default: relay's regular turn and
            compaction task, from its ``tasks`` package).

    Raises:
        ConfigError: the configuration is invalid (unknown provider, missing API key, ...).
    """
    config = config or Config()
    kinds = task_kinds if task_kinds is not None else builtin_task_kinds()
    provider = config.provider()
    compaction_prompt(config)  # an unreadable prompt file is a configuration error, found now
    check_working_directory(config.cwd or os.getcwd())
    registry = builtin_registry(config.tools)
    if config.features.token_budget:
        for tool in CONTEXT_TOOLS:
            registry.register(tool)
    for tool in tools:
        registry.register(tool)
    sid = resume.session_id if resume is not None else session_id or str(uuid.uuid4())
    now = clock or _default_clock
    async with AsyncExitStack() as stack:
        if model is None:
            model = await _open_model(config, provider, stack)
        rollout: RolloutWriter | None = None
        if config.rollout.enabled:
            if resume is not None and resume.rollout_path is not None:
                rollout = RolloutWriter.append_to(resume.rollout_path)
            else:
                root = Path(config.rollout.dir) if config.rollout.dir else relay_home() / "sessions"
                rollout = RolloutWriter.create(root, sid, now())
            stack.callback(rollout.close)
        try:
            defaults = TurnSettings(model=config.model, cwd=config.cwd or os.getcwd(), effort=None)
            state = (
                SessionState.restored(resume, defaults)
                if resume is not None
                else SessionState(defaults=defaults)
            )
            if config.features.tool_output_masking:
                registry.register(recall_tool(state.outputs))
            async with anyio.create_task_group() as tg:
                session = Session._create(
                    config,
                    model=model,
                    tools=registry,
                    task_group=tg,
                    session_id=sid,
                    clock=now,
                    rng=rng or random.Random(),
                    rollout=rollout,
                    state=state,
                    task_kinds=kinds,
                    estimator=estimator,
                    hooks=hooks,
                    ids=(resume.submissions, resume.items) if resume is not None else (0, 0),
                )
                if resume is None:
                    session._recorder.session_meta(
                        sid, now(), defaults.cwd, config.model, config.model_provider
                    )
                session._configured(resumed=resume is not None)
                tg.start_soon(session._run_loop, name=f"relay session {sid}")
                try:
                    yield session
                finally:
                    # Leaving the block closes the submission channel; the loop shuts the
                    # session down (bounded by the abort grace) and returns.
                    session._sub_send.close()
                    with anyio.CancelScope(shield=True):
                        await session.wait_closed()
        except BaseExceptionGroup as group:
            raise single_exception(group) from None


async def _open_model(
    config: Config, provider: ProviderConfig, stack: AsyncExitStack
) -> ModelClient:
    if provider.base_url is None:  # the embedded scripted provider
        return ScriptedModel(config.model_script)
    api_key = resolve_api_key(provider)
    from .._wire import open_http_client  # the SDK is imported only for HTTP providers

    client: ModelClient = await stack.enter_async_context(
        open_http_client(provider, api_key=api_key)
    )
    return client


__all__ = ["ABORT_GRACE", "SESSION_EVENT_ID", "Session", "SessionStatistics", "open_session"]
