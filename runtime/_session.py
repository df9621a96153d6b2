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
writes go through its :class:`TaskContext`, which drops them once the task is detached. The
bookkeeping after a task ends or is aborted has no ``await`` in it, so no other code of the
session runs between a decision and the events that report it.
"""

from __future__ import annotations

import base64
import logging
import math
import mimetypes
import os
import random
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, assert_never

import anyio
import attrs

from . import _protocol as p
from ._codec import decode_op, to_json
from ._compact import auto_compact_limit, compaction_prompt
from ._config import Config, ProviderConfig, context_window_for, relay_home, resolve_api_key
from ._context import (
    TurnSettings,
    WorldState,
    context_changes,
    initial_context,
    instructions_hash,
    read_project_doc,
    turn_aborted_marker,
    world_state,
)
from ._errors import (
    ClosedSessionError,
    ConfigError,
    ContextWindowExceeded,
    ErrorCode,
    InvalidOpError,
    ModelError,
)
from ._history import History, missing_outputs, normalize_for_prompt
from ._hooks import CompactHook
from ._model import (
    CompactRequest,
    Completed,
    ModelClient,
    OutputItemDone,
    OutputTextDelta,
    Prompt,
)
from ._rollout import RolloutWriter
from ._sampling import reconnecting_message, retry_delay
from ._scripted import ScriptedModel
from ._task import SessionTask, TaskHandle, TaskKind, TaskStatus, new_task
from ._templates import template
from ._tokens import ApproxEstimator, TokenEstimator, count_items, truncate_text
from ._tools import Tool, ToolContext, ToolRegistry, builtin_registry
from ._version import __version__

logger = logging.getLogger("relay")

#: Seconds an aborted task may take to finish before it is detached (SPEC §4.3).
ABORT_GRACE = 0.1

#: Tool outputs are truncated to this many approximate tokens when recorded.
TOOL_OUTPUT_TOKENS = 10_000

#: Event types written to the rollout as ``event_msg`` lines (deltas are not).
_PERSISTED_EVENTS: tuple[type, ...] = (
    p.TurnStarted,
    p.TurnComplete,
    p.TurnAborted,
    p.UserMessage,
    p.AgentMessage,
    p.TokenCount,
    p.ContextCompacted,
    p.WarningEvent,
    p.ErrorEvent,
    p.HookCompleted,
    p.ShutdownComplete,
)
_TERMINAL_EVENTS = (p.TurnComplete, p.TurnAborted, p.ShutdownComplete)


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
class ResumedState:
    """What a session resumes from: the state rebuilt from its rollout (SPEC §8)."""

    session_id: str
    """The resumed session's id."""
    rollout_path: Path | None
    """The rollout file to append to."""
    history: tuple[p.ResponseItem, ...]
    """The history as of the last completed write."""
    reference_world: WorldState | None = None
    """The reference context, unless a later compaction cleared it."""
    defaults: TurnSettings | None = None
    """Model, cwd and effort of the latest ``turn_context``."""
    window_number: int = 0
    """Compactions so far."""
    first_window_id: str | None = None
    """Id of the session's first window."""
    previous_window_id: str | None = None
    """Id of the window before the current one."""
    window_id: str | None = None
    """Id of the current window."""
    last_response_tokens: int = 0
    """Restored usage: ``total_tokens`` of the last response."""
    tokens_since_model: int = 0
    """Restored usage: estimate of the items after the last model item."""
    items_since_model: int = 0
    """How many of the last items came after the last model item."""
    total_usage: p.TokenUsage = attrs.field(factory=p.TokenUsage)
    """Usage summed over the session so far."""


@attrs.frozen
class _RawSubmission:
    id: str
    payload: Any
    origin: str | None
    error: str | None = None


@attrs.frozen
class _Queued:
    id: str
    items: tuple[p.InputItem, ...]
    settings: TurnSettings


@attrs.frozen
class SampleResult:
    """What one completed model response gave."""

    output: tuple[p.ResponseItem, ...]
    """Its output items, recorded in the history."""
    usage: p.TokenUsage
    """Its usage (estimated when the server reported none)."""

    @property
    def last_agent_message(self) -> str | None:
        """The text of its last assistant message."""
        texts = [
            i.text() for i in self.output if isinstance(i, p.Message) and i.role == "assistant"
        ]
        return texts[-1] if texts else None

    @property
    def tool_calls(self) -> list[p.ToolCall]:
        """The calls the model asked for, in order."""
        return [i for i in self.output if isinstance(i, p.FunctionCall | p.CustomToolCall)]


class Session:
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
        estimator: TokenEstimator | None = None,
        hooks: Iterable[CompactHook] = (),
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
        self.model = model
        """The model client."""
        self.tools = tools
        """The tools the model may call."""
        self.history = History()
        """The conversation history (read it; the session writes it)."""
        self.rollout = rollout
        """The rollout writer, when persistence is on."""
        self.total_usage = p.TokenUsage()
        self.defaults = TurnSettings(model=config.model, cwd=config.cwd or os.getcwd(), effort=None)
        """Model, cwd and effort of the next turn."""
        self.reference_world: WorldState | None = None
        """The world state the history's initial context describes; None = record it in full."""
        self.last_turn_model: str | None = None
        """The model of the last regular turn (for model downshift)."""
        self.window_number = 0
        self.window_id = str(uuid.uuid4())
        self.first_window_id = self.window_id
        self.previous_window_id: str | None = None
        self._tg = task_group
        self._clock = clock
        self.rng = rng
        self._seq = 0
        self._running: TaskHandle | None = None
        self._queue: deque[_Queued] = deque()
        self._closed = False
        self._finished = anyio.Event()
        self._unprocessed = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._sub_counter = 0
        self._item_counter = 0
        self._sub_send, self._sub_recv = anyio.create_memory_object_stream[
            p.Submission | _RawSubmission
        ](math.inf)
        self._event_send, self._event_recv = anyio.create_memory_object_stream[p.Event](math.inf)
        self._events_taken = False
        self.compact_hooks: list[CompactHook] = list(hooks)
        """Python callables run before and after compactions (besides configured commands)."""
        self._estimator: TokenEstimator | None = estimator
        self.instructions = _base_instructions(config)

    def _restore(self, state: ResumedState) -> None:
        self.history.restore(
            state.history,
            last_response_tokens=state.last_response_tokens,
            tokens_since_model=state.tokens_since_model,
            items_since_model=state.items_since_model,
        )
        self.last_turn_model = state.defaults.model if state.defaults is not None else None
        self.reference_world = state.reference_world
        if state.defaults is not None:
            self.defaults = state.defaults
        self.window_number = state.window_number
        self.window_id = state.window_id or self.window_id
        self.first_window_id = state.first_window_id or self.window_id
        self.previous_window_id = state.previous_window_id
        self.total_usage = state.total_usage

    # ------------------------------------------------------------------ public surface

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

    def submit_invalid_nowait(self, message: str, *, id: str | None = None) -> str:
        """Have the loop report ``error{code: invalid_op}`` with ``message``, in order."""
        sub_id = self._next_id(id)
        self._enqueue(_RawSubmission(sub_id, None, None, error=message))
        return sub_id

    def _enqueue(self, submission: p.Submission | _RawSubmission) -> None:
        if self._closed:
            raise ClosedSessionError("the session has shut down")
        self._unprocessed += 1
        self._refresh_idle()
        self._sub_send.send_nowait(submission)

    def events(self) -> AsyncIterator[p.Event]:
        """The event stream; it ends after ``shutdown_complete``. Only one reader may take it."""
        if self._events_taken:
            raise RuntimeError("the event stream of a session has only one reader")
        self._events_taken = True
        return self._iterate_events()

    async def _iterate_events(self) -> AsyncIterator[p.Event]:
        async with self._event_recv:
            async for event in self._event_recv:
                yield event

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
            history_items=len(self.history),
        )

    def register_hook(self, hook: CompactHook) -> None:
        """Run ``hook`` at its point in every later compaction."""
        self.compact_hooks.append(hook)

    def register_tool(self, tool: Tool) -> None:
        """Add a tool (used from the next sampling request on)."""
        self.tools.register(tool)

    @property
    def closed(self) -> bool:
        """Whether the session has shut down."""
        return self._closed

    def model_context_window(self, model: str | None = None) -> int | None:
        """The context window of ``model`` (default: the next turn's)."""
        return context_window_for(model or self.defaults.model, self.config.model_context_window)

    # ------------------------------------------------------------------ events & records

    def _is_idle(self) -> bool:
        return self._unprocessed == 0 and self._running is None and not self._queue

    def _refresh_idle(self) -> None:
        if self._is_idle():
            self._idle.set()
        elif self._idle.is_set():
            self._idle = anyio.Event()

    def emit(self, event_id: str, msg: p.EventMsg) -> None:
        """Number ``msg``, persist it if it is a persisted kind, and send it to the reader.

        A terminal event (``turn_complete``, ``turn_aborted``, ``shutdown_complete``) is
        flushed to the rollout, with everything before it, before anyone can see it.
        """
        self._seq += 1
        if self.rollout is not None and isinstance(msg, _PERSISTED_EVENTS):
            self.rollout.write("event_msg", to_json(msg))
            if isinstance(msg, _TERMINAL_EVENTS):
                self.rollout.flush()
        try:
            self._event_send.send_nowait(p.Event(event_id, self._seq, msg))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            # The reader went away; the session keeps working and its rollout keeps recording.
            pass

    def record(self, item: p.ResponseItem, *, from_model: bool = False) -> None:
        """Append an item to the history and the rollout."""
        self.history.record(item, from_model=from_model)
        if self.rollout is not None:
            self.rollout.write("response_item", to_json(item))

    def new_item_id(self, prefix: str = "item") -> str:
        """A fresh item id, unique in the session."""
        self._item_counter += 1
        return f"{prefix}-{self._item_counter}"

    def world(self, cwd: str) -> WorldState:
        """The world state now, for ``cwd``."""
        return world_state(cwd, self._clock, os.environ.get("SHELL"))

    async def usage_estimator(self) -> TokenEstimator:
        """The counter for usage a server did not report: tiktoken when it is installed
        (loaded once, off the event loop), else the approximate count."""
        if self._estimator is None:
            try:
                from ._tiktoken import TiktokenEstimator, get_encoding
            except ImportError:
                self._estimator = ApproxEstimator()
            else:
                estimator = TiktokenEstimator("o200k_base")
                await anyio.to_thread.run_sync(get_encoding, estimator.encoding_name)
                self._estimator = estimator
        return self._estimator

    def wall_time(self) -> float:
        """Unix seconds from the session clock."""
        return self._clock().timestamp()

    # ------------------------------------------------------------------ the loop

    async def _run_loop(self) -> None:
        try:
            await self._serve()
        finally:
            # Also on a crash of the loop, so that open_session's exit never waits forever.
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
            if submission.error is not None:
                self.emit(submission.id, p.ErrorEvent(submission.error, ErrorCode.INVALID_OP))
                return
            try:
                op = decode_op(submission.payload)
            except InvalidOpError as exc:
                prefix = f"{submission.origin}: " if submission.origin else ""
                self.emit(submission.id, p.ErrorEvent(f"{prefix}{exc}", ErrorCode.INVALID_OP))
                return
            submission = p.Submission(submission.id, op)
        sub_id, op = submission.id, submission.op
        match op:
            case p.UserTurn():
                await self._on_user_turn(sub_id, op.items, op.on_busy, self._apply(op))
            case p.UserInput():
                await self._on_user_turn(sub_id, op.items, p.OnBusy.STEER, self.defaults)
            case p.Compact():
                await self._spawn(
                    sub_id, TaskKind.COMPACT, self.defaults, instructions=op.instructions
                )
            case p.Interrupt():
                await self._abort(p.AbortReason.INTERRUPTED)
                self._start_queued()
            case p.OverrideTurnContext():
                self._apply(op)
            case p.Shutdown():
                await self._shutdown(sub_id)
            case _:
                assert_never(op)

    def _apply(self, op: p.UserTurn | p.OverrideTurnContext) -> TurnSettings:
        changes: dict[str, Any] = {
            name: value
            for name in ("model", "cwd", "effort")
            if (value := getattr(op, name)) is not None
        }
        if changes:
            self.defaults = attrs.evolve(self.defaults, **changes)
        return self.defaults

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
                    if running.task.kind is TaskKind.REGULAR:
                        running.pending_input.append(items)
                    else:
                        self.emit(
                            sub_id,
                            p.ErrorEvent(
                                "a compaction is running and cannot take input; "
                                "submit the turn again when it ends, or with on_busy=queue",
                                ErrorCode.ACTIVE_TURN_NOT_STEERABLE,
                            ),
                        )
                    return
                case p.OnBusy.QUEUE:
                    self._queue.append(_Queued(sub_id, items, settings))
                    return
                case p.OnBusy.REPLACE:
                    pass
                case _:
                    assert_never(on_busy)
        await self._spawn(sub_id, TaskKind.REGULAR, settings, items=items)

    async def _spawn(
        self, turn_id: str, kind: TaskKind, settings: TurnSettings, **kwargs: Any
    ) -> None:
        try:
            task = new_task(kind, **kwargs)
        except LookupError as exc:
            self.emit(turn_id, p.ErrorEvent(str(exc), ErrorCode.INTERNAL))
            return
        await self._abort(p.AbortReason.REPLACED)
        self._start(turn_id, task, settings)

    def _start(self, turn_id: str, task: SessionTask, settings: TurnSettings) -> None:
        handle = TaskHandle(turn_id, task, settings, started=anyio.current_time())
        self._running = handle
        self._refresh_idle()
        self.emit(
            turn_id,
            p.TurnStarted(turn_id, self.model_context_window(settings.model), self.wall_time()),
        )
        self._tg.start_soon(self._run_task, handle, name=f"relay task {turn_id}")

    def _start_queued(self) -> None:
        if self._running is None and self._queue and not self._closed:
            queued = self._queue.popleft()
            self._start(queued.id, new_task(TaskKind.REGULAR, items=queued.items), queued.settings)

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

    def _complete(self, handle: TaskHandle, result: str | None) -> None:
        handle.status = TaskStatus.ENDED
        for items in handle.pending_input:
            self._record_user_input_now(handle.turn_id, items)
        handle.pending_input.clear()
        if handle.end_reason is not None:
            end: p.EventMsg = p.TurnAborted(handle.turn_id, handle.end_reason, handle.duration_ms())
        else:
            end = p.TurnComplete(handle.turn_id, result, handle.duration_ms())
        self.emit(handle.turn_id, end)
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
        handle.abort_reason = reason
        handle.scope.cancel(f"relay: task {reason.value}")
        with anyio.move_on_after(ABORT_GRACE):
            await handle.finished.wait()
        # From here on the task (if it still lingers in a shielded section) is detached.
        handle.detached = True
        handle.status = TaskStatus.ENDED
        for output in missing_outputs(self.history.items):
            self.record(output)
        if handle.task.kind is TaskKind.REGULAR:
            for items in handle.pending_input:
                self.record(_user_message(items))
            handle.pending_input.clear()
        if reason is p.AbortReason.INTERRUPTED:
            self.record(turn_aborted_marker())
        self.emit(handle.turn_id, p.TurnAborted(handle.turn_id, reason, handle.duration_ms()))
        self._running = None
        self._refresh_idle()

    async def _shutdown(self, sub_id: str) -> None:
        self._queue.clear()
        await self._abort(p.AbortReason.SHUTDOWN)
        self._closed = True
        self.emit(sub_id, p.ShutdownComplete())
        if self.rollout is not None:
            self.rollout.close()
        self._sub_send.close()
        self._event_send.close()
        self._refresh_idle()
        self._finished.set()

    # ------------------------------------------------------------------ work used by tasks

    def _record_user_input_now(self, turn_id: str, items: tuple[p.InputItem, ...]) -> None:
        message = _user_message(items)
        item_id = self.new_item_id("user")
        started = p.UserMessageItem(item_id, items)
        self.emit(turn_id, p.ItemStarted(turn_id, started))
        self.record(message)
        self.emit(turn_id, p.ItemCompleted(turn_id, started))
        self.emit(turn_id, p.UserMessage(_input_text(items)))


class TaskContext:
    """What a task sees of its session. Writes are dropped once the task is detached."""

    def __init__(self, session: Session, handle: TaskHandle) -> None:
        self.session = session
        self._handle = handle

    @property
    def turn_id(self) -> str:
        """The turn id."""
        return self._handle.turn_id

    @property
    def settings(self) -> TurnSettings:
        """Model, cwd and effort of this turn."""
        return self._handle.settings

    @property
    def config(self) -> Config:
        """The session's configuration."""
        return self.session.config

    @property
    def history(self) -> Sequence[p.ResponseItem]:
        """The history (read-only)."""
        return self.session.history.items

    @property
    def active(self) -> bool:
        """False once the task is detached: nothing it does is reported any more."""
        return not self._handle.detached

    def emit(self, msg: p.EventMsg) -> None:
        """Report an event of this turn."""
        if self.active:
            self.session.emit(self._handle.turn_id, msg)

    def record(self, item: p.ResponseItem, *, from_model: bool = False) -> None:
        """Append an item to the history."""
        if self.active:
            self.session.record(item, from_model=from_model)

    # -- input

    def drain_pending(self) -> list[tuple[p.InputItem, ...]]:
        """Steered input waiting to be picked up, oldest first; the queue is emptied."""
        pending = list(self._handle.pending_input)
        self._handle.pending_input.clear()
        return pending

    def end_aborted(self, reason: p.AbortReason) -> None:
        """End this task with ``turn_aborted{reason}`` instead of ``turn_complete`` when it
        returns (a hook stopped it)."""
        self._handle.end_reason = reason

    def has_pending(self) -> bool:
        """Whether steered input is waiting."""
        return bool(self._handle.pending_input)

    def record_context(self) -> None:
        """Record the initial context, or what changed since the reference context."""
        session = self.session
        world = session.world(self.settings.cwd)
        if session.reference_world is None:
            doc = read_project_doc(self.settings.cwd, session.config.project_doc)
            for message in initial_context(
                world,
                developer_instructions=session.config.developer_instructions,
                project_doc=doc,
            ):
                self.record(message)
            if self.active and session.rollout is not None:
                session.rollout.write("world_state", to_json_world(world))
        else:
            for message in context_changes(session.reference_world, world):
                self.record(message)
        if not self.active:
            return
        session.reference_world = world
        session.last_turn_model = self.settings.model
        self._write_turn_context(world)

    async def record_user_input(self, items: tuple[p.InputItem, ...]) -> None:
        """Record user input as a user message, with its item and legacy events."""
        resolved = tuple([await _resolve_image(item, self.settings.cwd) for item in items])
        if self.active:
            self.session._record_user_input_now(self.turn_id, resolved)

    # -- model

    def build_prompt(
        self,
        input: Iterable[p.ResponseItem] | None = None,
        *,
        tools: bool = True,
        purpose: str = "turn",
        model: str | None = None,
    ) -> Prompt:
        """A request for this turn's model over ``input`` (default: the normalised history)."""
        history = self.session.history
        wire: Sequence[dict[str, Any]] | None = None
        items: Sequence[p.ResponseItem]
        if input is None and history.regular:
            # Views of the history as it is now: no copy, whatever its length.
            items, wire = history.frozen(), history.frozen_wire()
        else:
            items = tuple(normalize_for_prompt(history.items if input is None else input))
        return Prompt(
            model=model or self.settings.model,
            instructions=self.session.instructions,
            input=items,
            wire_input=wire,
            tools=self.session.tools.specs() if tools else (),
            parallel_tool_calls=False,
            prompt_cache_key=self.session.id,
            effort=self.settings.effort,
            purpose="compact" if purpose == "compact" else "turn",
        )

    @property
    def model_context_window(self) -> int | None:
        """The context window of this turn's model."""
        return self.session.model_context_window(self.settings.model)

    def auto_compact_limit(self, model: str | None = None) -> int | None:
        """The auto-compaction threshold for ``model`` (default: this turn's), or None."""
        return auto_compact_limit(
            self.session.config.model_auto_compact_token_limit,
            self.session.model_context_window(model or self.settings.model),
        )

    @property
    def usage_tokens(self) -> int:
        """The usage compared with the auto-compaction limit (SPEC §7.5)."""
        return self.session.history.usage_tokens

    async def sample(
        self,
        prompt: Prompt,
        *,
        record: bool = True,
        report: bool = True,
        max_retries: int | None = None,
    ) -> SampleResult:
        """Stream one response, retrying retryable failures with ``stream_error`` events.

        The output is recorded in the history when the response completes (``record``), and a
        ``token_count`` follows. With ``report`` off (a summarization request), no item,
        delta or token events are emitted. Raises the last :class:`ModelError` when retries
        run out or the error is not retryable.
        """
        limit = self.session.provider.stream_max_retries if max_retries is None else max_retries
        attempt = 0
        while True:
            try:
                return await self._sample_once(prompt, record=record, report=report)
            except ModelError as error:
                attempt += 1
                delay = retry_delay(error, attempt, limit, self.session.rng)
                if delay is None:
                    raise
                self.emit(p.StreamErrorEvent(reconnecting_message(attempt, limit), error.message))
                await anyio.sleep(delay)

    async def _sample_once(self, prompt: Prompt, *, record: bool, report: bool) -> SampleResult:
        session = self.session
        emit = self.emit if report else _ignore
        output: list[p.ResponseItem] = []
        open_messages: dict[str, list[str]] = {}
        usage: p.TokenUsage | None = None
        try:
            async with session.model.stream(prompt) as events:
                async for event in events:
                    match event:
                        case OutputTextDelta(item_id=item_id, delta=delta):
                            if item_id not in open_messages:
                                open_messages[item_id] = []
                                emit(p.ItemStarted(self.turn_id, p.AgentMessageItem(item_id, "")))
                            open_messages[item_id].append(delta)
                            emit(p.AgentMessageDelta(self.turn_id, item_id, delta))
                        case OutputItemDone(item=item):
                            output.append(item)
                            if report:
                                self._report_output_item(item, open_messages)
                        case Completed(usage=reported):
                            usage = reported
                        case _:
                            assert_never(event)
        except ModelError:
            # Items that were started must be completed (invariant 3), with what arrived.
            for item_id, parts in open_messages.items():
                emit(p.ItemCompleted(self.turn_id, p.AgentMessageItem(item_id, "".join(parts))))
            raise
        if usage is None:
            usage = await self._estimate_usage(prompt, output)
        if record:
            for item in output:
                self.record(item, from_model=True)
            if self.active:
                session.history.response_completed(usage.total_tokens)
        if report:
            self.report_usage(usage)
        elif self.active:
            session.total_usage = session.total_usage + usage
        return SampleResult(tuple(output), usage)

    async def _estimate_usage(
        self, prompt: Prompt, output: Sequence[p.ResponseItem]
    ) -> p.TokenUsage:
        """Usage of a response whose server reported none (SPEC §7.5).

        Counts only what the response added to the previous total: the items recorded since
        the last model item (everything, plus the instructions, on the first response) and
        the output.
        """
        history = self.session.history
        estimator = await self.session.usage_estimator()
        added = list(history.items_since_model())
        input_tokens = history.last_response_tokens + count_items(estimator, added)
        if history.last_response_tokens == 0:
            input_tokens += estimator.count(prompt.instructions)
        output_tokens = count_items(estimator, output)
        return p.TokenUsage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
        )

    async def remote_compact(self, request: CompactRequest) -> Any:
        """``POST /responses/compact`` with retries (SPEC §6.4): transport failures, 5xx and
        rate limits are retried up to the provider's ``request_max_retries``, after the
        server's retry-after or the same jittered backoff as sampling."""
        limit = self.session.provider.request_max_retries
        attempt = 0
        while True:
            try:
                return await self.session.model.compact(request)
            except ModelError as error:
                attempt += 1
                delay = retry_delay(error, attempt, limit, self.session.rng)
                if delay is None:
                    raise
                await anyio.sleep(delay)

    def _report_output_item(
        self, item: p.ResponseItem, open_messages: dict[str, list[str]]
    ) -> None:
        match item:
            case p.Message(role="assistant"):
                item_id = item.id or self.session.new_item_id("msg")
                if item_id not in open_messages:
                    self.emit(p.ItemStarted(self.turn_id, p.AgentMessageItem(item_id, "")))
                open_messages.pop(item_id, None)
                text = item.text()
                self.emit(p.ItemCompleted(self.turn_id, p.AgentMessageItem(item_id, text)))
                self.emit(p.AgentMessage(text))
            case p.Reasoning(summary=summary):
                reasoning = p.ReasoningItem(item.id, tuple(part.text for part in summary))
                self.emit(p.ItemStarted(self.turn_id, reasoning))
                self.emit(p.ItemCompleted(self.turn_id, reasoning))
            case _:
                pass

    def report_usage(self, usage: p.TokenUsage) -> None:
        """Add a response's usage to the session total and emit ``token_count``."""
        if not self.active:
            return
        self.session.total_usage = self.session.total_usage + usage
        self.emit(
            p.TokenCount(
                p.TokenUsageInfo(self.session.total_usage, usage, self.model_context_window)
            )
        )

    def report_model_error(self, error: ModelError) -> None:
        """Report a failed sampling step (SPEC §5.5)."""
        if isinstance(error, ContextWindowExceeded):
            self.report_window_full()
            self.emit(
                p.ErrorEvent(
                    "The conversation no longer fits the model's context window. Start a new "
                    "session, or compact this one and try again.",
                    ErrorCode.CONTEXT_WINDOW_EXCEEDED,
                )
            )
            return
        self.emit(p.ErrorEvent(error.message, error.code))

    # -- compaction

    def initial_context_items(self) -> list[p.ResponseItem]:
        """The full initial context for this turn's world, as recorded at a window start."""
        return list(
            initial_context(
                self.session.world(self.settings.cwd),
                developer_instructions=self.session.config.developer_instructions,
                project_doc=read_project_doc(self.settings.cwd, self.session.config.project_doc),
            )
        )

    def report_window_full(self) -> None:
        """Emit a ``token_count`` that shows the context window full."""
        window = self.model_context_window
        full = p.TokenUsage(total_tokens=window or self.session.history.usage_tokens)
        self.emit(p.TokenCount(p.TokenUsageInfo(self.session.total_usage, full, window)))

    def install_compaction(
        self,
        items: Sequence[p.ResponseItem],
        *,
        message: str,
        receipt: p.CompactionReceipt,
        clear_reference: bool,
    ) -> None:
        """Install a compacted history in one step (SPEC §6.9).

        Replaces the history (and the reference context), starts a new window, persists
        ``compacted``, ``world_state`` and ``turn_context`` (when there is a reference context),
        recomputes usage and emits ``token_count``.
        """
        if not self.active:
            return
        session = self.session
        session.history.replace(items)
        session.window_number += 1
        session.previous_window_id = session.window_id
        session.window_id = str(uuid.uuid4())
        world = session.world(self.settings.cwd)
        session.reference_world = None if clear_reference else world
        if session.rollout is not None:
            session.rollout.write(
                "compacted",
                {
                    "message": message,
                    "replacement_history": [to_json(item) for item in items],
                    "window_number": session.window_number,
                    "first_window_id": session.first_window_id,
                    "previous_window_id": session.previous_window_id,
                    "window_id": session.window_id,
                    "receipt": to_json(receipt),
                },
            )
            session.rollout.write("world_state", to_json_world(world))
            if session.reference_world is not None:
                self._write_turn_context(world)
        usage = p.TokenUsage(total_tokens=session.history.usage_tokens)
        self.emit(
            p.TokenCount(p.TokenUsageInfo(session.total_usage, usage, self.model_context_window))
        )

    def _write_turn_context(self, world: WorldState) -> None:
        if self.session.rollout is not None:
            self.session.rollout.write(
                "turn_context",
                {
                    "model": self.settings.model,
                    "cwd": self.settings.cwd,
                    "effort": self.settings.effort,
                    "instructions_hash": instructions_hash(self.session.instructions),
                    "world": to_json_world(world),
                },
            )

    # -- tools

    async def run_tool_call(self, call: p.ToolCall) -> str:
        """Run a tool call, record its output and report it as a ``tool_call`` item."""
        arguments = call.arguments if isinstance(call, p.FunctionCall) else call.input
        item = p.ToolCallItem(call.call_id, call.name, arguments)
        self.emit(p.ItemStarted(self.turn_id, item))
        secret = self.session.provider.env_key
        tool_ctx = ToolContext(
            self.turn_id,
            self.settings.cwd,
            self.emit,
            hidden_env=frozenset([secret]) if secret else frozenset(),
        )
        if isinstance(call, p.FunctionCall):
            output = await self.session.tools.call(call, tool_ctx)
        else:
            output = f"unsupported call: {call.name}"
        output = truncate_text(output, TOOL_OUTPUT_TOKENS)
        if isinstance(call, p.FunctionCall):
            self.record(p.FunctionCallOutput(call.call_id, output))
        else:
            self.record(p.CustomToolCallOutput(call.call_id, output))
        self.emit(p.ItemCompleted(self.turn_id, attrs.evolve(item, output=output)))
        return output


def _ignore(msg: p.EventMsg) -> None:
    del msg


def to_json_world(world: WorldState) -> dict[str, Any]:
    """The JSON form of a world state."""
    return attrs.asdict(world)


def _input_text(items: Iterable[p.InputItem]) -> str:
    return "\n".join(item.text for item in items if isinstance(item, p.Text))


def _user_message(items: Iterable[p.InputItem]) -> p.Message:
    parts: list[p.ContentPart] = []
    for item in items:
        match item:
            case p.Text(text=text):
                parts.append(p.InputText(text))
            case p.Image(image_url=url):
                parts.append(p.InputImage(url))
            case p.LocalImage(path=path):
                parts.append(p.InputText(f"[image not loaded: {path}]"))
            case _:
                assert_never(item)
    return p.Message("user", tuple(parts))


async def _resolve_image(item: p.InputItem, cwd: str) -> p.InputItem:
    """A local image becomes a ``data:`` URL image; an unreadable one stays a local image."""
    if not isinstance(item, p.LocalImage):
        return item
    path = Path(cwd) / item.path
    try:
        data = await anyio.Path(path).read_bytes()
    except OSError:
        return item
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return p.Image(f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}")


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
            rollout file (see :func:`runtime.resume_session`).

    Raises:
        ConfigError: the configuration is invalid (unknown provider, missing API key, ...).
    """
    config = config or Config()
    provider = config.provider()
    compaction_prompt(config)  # an unreadable prompt file is a configuration error, found now
    registry = builtin_registry(config.tools)
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
            async with anyio.create_task_group() as tg:
                session = Session(
                    config,
                    model=model,
                    tools=registry,
                    task_group=tg,
                    session_id=sid,
                    clock=now,
                    rng=rng or random.Random(),
                    rollout=rollout,
                    estimator=estimator,
                    hooks=hooks,
                )
                if resume is not None:
                    session._restore(resume)
                elif rollout is not None:
                    rollout.write(
                        "session_meta",
                        {
                            "id": sid,
                            "created": now().isoformat(),
                            "cwd": session.defaults.cwd,
                            "model": config.model,
                            "model_provider": config.model_provider,
                            "relay_version": __version__,
                        },
                    )
                    rollout.flush()
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
            raise _unwrap(group) from None


def _unwrap(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The single exception of a group (recursively), or the group itself."""
    while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
        inner = group.exceptions[0]
        if not isinstance(inner, BaseExceptionGroup):
            return inner
        group = inner
    return group


async def _open_model(
    config: Config, provider: ProviderConfig, stack: AsyncExitStack
) -> ModelClient:
    if provider.base_url is None:  # the embedded scripted provider
        return ScriptedModel(config.model_script)
    api_key = resolve_api_key(provider)
    from ._wire import open_http_client  # the SDK is imported only for HTTP providers

    client: ModelClient = await stack.enter_async_context(
        open_http_client(provider, api_key=api_key)
    )
    return client


__all__ = ["Session", "SessionStatistics", "TaskContext", "open_session"]
