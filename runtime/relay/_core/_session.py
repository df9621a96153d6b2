"""The session actor: a submission loop, a task slot, an event stream.

Theory of operation. :func:`run_session` owns a task group. One loop reads submissions in order
and dispatches each to a handler; handlers return quickly (at most an abort's grace period),
because work runs in tasks, one at a time, in the session's :class:`~._slot.TaskSlot`. Every op
that starts work names its task through the session's task factories, keyed by op type; the
slot gives every kind the same life (``turn_started``, replacement, abort, the terminal event).
A submission to an idle session (none waiting for the loop, no task running) but an interrupt
or a shutdown is handled where it is made: with no task to abort, that has no ``await``, and a
turn's ``turn_started`` is out before any other task runs, not behind other sessions' work.

Everything that changes goes through the session's one writer,
:class:`~._session_writer.SessionWriter` (the state, the numbering of events and ids, the
rollout, the event stream); a task's writes go through its turn's writer, which drops them once
the task is detached. What the session runs with is its frozen :class:`~._wiring.Wiring`,
chosen by whoever opens it (:func:`relay.open_session`, or a resume).
"""

from __future__ import annotations

import functools
import math
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, assert_never

import anyio
import anyio.abc
import anyio.lowlevel
import attrs

from .._base import _protocol as p
from .._base._codec import decode_op
from .._base._config import Config, ProviderConfig
from .._base._errors import ClosedSessionError, ErrorCode, InvalidOpError
from .._base._model import ModelClient
from .._base._suggest import did_you_mean
from .._base._tokens import TokenEstimator
from .._base._util import NoPublicConstructor, single_exception
from ._agent_rules import Tree
from ._agents import AgentPlace, Agents
from ._answer import Answer, AnswerCollector
from ._context import TurnSettings
from ._event_stream import EventJson
from ._history import HistoryView
from ._hooks import CompactHook
from ._input import user_message_of
from ._port import CompactionPolicy, SessionTask
from ._session_writer import SessionWriter
from ._slot import Rest, TaskFactory, TaskSlot
from ._state import SessionSnapshot, SessionStatistics
from ._task import TASK_OP_TYPES, op_type
from ._tools import ToolRegistry
from ._work_state import pin_label
from ._writer import RolloutWriter

TaskFactories = Mapping[str, Callable[[Any], SessionTask]]
"""The session's task factories: an op type to what makes the task of such an op."""


@attrs.frozen
class _RawSubmission:
    id: str
    payload: Any
    origin: str | None


@attrs.frozen
class _Failed:
    """A submission whose handling raised where it was made; the loop raises it."""

    id: str
    error: Exception


class Session(metaclass=NoPublicConstructor):
    """A running session. Get one from :func:`relay.open_session`; submit ops, read events.

    Example::

        async with relay.open_session(relay.Config()) as session:
            await session.submit(relay.UserTurn(items=[relay.Text("hello")]))
            async for event in session.events():
                if isinstance(event.msg, relay.TurnComplete):
                    break
    """

    def __init__(
        self,
        services: SessionWriter,
        tasks: TaskFactories,
        task_group: anyio.abc.TaskGroup,
        compactor: Callable[[], CompactionPolicy],
        place: AgentPlace,
    ) -> None:
        self._services = services
        self._wiring = services.wiring
        self._tasks = tasks
        self._custom_types = frozenset(tasks) - TASK_OP_TYPES
        agents = Agents(services, task_group, place)
        self._slot = TaskSlot(services, task_group, compactor, self._refresh_idle, agents)
        agents.idle = lambda: self._slot.running is None
        self._agents = agents
        self._asking: dict[str, AnswerCollector] = {}
        self._config: Config | None = None
        self._closed = False
        self._shutting_down = False
        self._finished = anyio.Event()
        self._unprocessed = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._idle_wakers: list[anyio.Event] = []
        self._sub_send, self._sub_recv = anyio.create_memory_object_stream[
            p.Submission | _RawSubmission | _Failed
        ](math.inf)
        services.on_rollout_failure = self._rollout_failed

    def _rollout_failed(self) -> None:
        # Nothing more can be recorded, so nothing more should run: the session shuts down as
        # for a shutdown op (a running task ends ``shutdown``, ``shutdown_complete`` last).
        if not (self._closed or self._shutting_down):
            self._enqueue(p.Submission("rollout", p.Shutdown()))

    # ------------------------------------------------------------------ what it is

    @property
    def id(self) -> str:
        """The session id."""
        return self._wiring.session_id

    @property
    def config(self) -> Config:
        """The configuration it runs with, with the rules in place now."""
        return self._config or self._wiring.config

    @property
    def provider(self) -> ProviderConfig:
        """The provider the model client talks to."""
        return self._wiring.provider

    @property
    def model(self) -> ModelClient:
        """The model client."""
        return self._wiring.model

    @property
    def tools(self) -> ToolRegistry:
        """The tools the model may call."""
        return self._wiring.tools

    @property
    def instructions(self) -> str:
        """The base instructions of every request."""
        return self._wiring.instructions

    def snapshot(self) -> SessionSnapshot:
        """Everything the session knows between turns, as it is now, frozen."""
        return self._services.state.snapshot()

    @property
    def history(self) -> HistoryView:
        """The conversation history as it is now: a sequence of its items with its usage
        figures, frozen (later records do not show in it)."""
        return self._services.state.history.view()

    @property
    def rollout(self) -> RolloutWriter | None:
        """The rollout writer, when persistence is on."""
        return self._services.recorder.writer

    @property
    def closed(self) -> bool:
        """Whether the session has shut down."""
        return self._closed

    @property
    def agents(self) -> Agents:
        """The sub-agents this session spawned, and its place in their tree (docs/agents.md)."""
        return self._agents

    def halt(self) -> None:
        """Stop this session's work as an ancestor's interrupt does: every descendant is
        halted, the turns queued here are dropped (their input is kept in the history) and the
        running turn is interrupted (docs/agents.md)."""
        if self._closed or self._shutting_down:
            return
        self._agents.interrupt()
        self._slot.drop_queue()
        self._enqueue(p.Submission("interrupt", p.Interrupt()))

    async def usage_estimator(self) -> TokenEstimator:
        """The counter for usage a server did not report: tiktoken when it is installed, else
        the approximate count."""
        return await self._wiring.estimators.get()

    def model_context_window(self, model: str | None = None) -> int | None:
        """The context window of ``model`` (default: the next turn's)."""
        return self._wiring.context_window(model or self._services.state.defaults.model)

    def statistics(self) -> SessionStatistics:
        """What the session is doing now."""
        waits = self._slot.waits()
        pending = tuple(waits.pending) if waits is not None else ()
        return attrs.evolve(self._slot.statistics(self._unprocessed), pending_approvals=pending)

    # ------------------------------------------------------------------ submitting

    def submit_nowait(self, op: p.Op, *, id: str | None = None) -> str:
        """Submit ``op``; returns the submission id. In an idle session ``op`` is handled before
        this returns (but an interrupt or a shutdown); else the loop handles it, in order.

        Raises:
            InvalidOpError: ``op`` is not an op.
            ClosedSessionError: the session has shut down.
        """
        if not isinstance(op, p.Op):
            raise InvalidOpError(f"not an op: {op!r}")
        if isinstance(op, p.CustomOp) and op.type not in self._custom_types:
            raise InvalidOpError(self._unknown(op.type))
        sub_id = self._next_id(id)
        self._enqueue(p.Submission(sub_id, op))
        return sub_id

    async def submit(self, op: p.Op, *, id: str | None = None) -> str:
        """Submit ``op``; returns the submission id (see :meth:`submit_nowait`). In an idle
        session a turn has started on return, and no other task ran; an op the loop handles
        lets the others run first, as any checkpoint does."""
        await anyio.lowlevel.checkpoint_if_cancelled()
        sub_id = self.submit_nowait(op, id=id)
        if self._unprocessed:  # the loop has it
            await anyio.lowlevel.cancel_shielded_checkpoint()
        return sub_id

    async def ask(
        self,
        prompt: str | Sequence[p.InputItem],
        *,
        on_busy: p.OnBusy = p.OnBusy.QUEUE,
        output_schema: Mapping[str, Any] | None = None,
    ) -> Answer:
        """Run a turn with ``prompt`` and return its answer: for a program that wants an
        answer, not an event loop. The events are still emitted, whether or not anyone reads
        them; until a reader takes the stream, the session keeps only the latest 1,000
        (:meth:`events`).

        The turn waits for a running task to end (``on_busy=queue``), or replaces it
        (``replace``); it never steers another turn. With ``output_schema``, a JSON Schema, the
        turn asks for JSON that fits it, and the answer's ``output`` is that JSON, read
        (``message`` stays the text).

        Example::

            async with relay.open_session(relay.Config()) as session:
                answer = await session.ask("hello")
                print(answer.message)

        Raises:
            TurnFailed: the turn ended with an ``error`` (carried as ``.error``;
                ``invalid_output`` for an answer that is not JSON or does not fit
                ``output_schema``), was aborted, or was refused.
            InvalidOpError: ``output_schema`` is not a JSON Schema (nothing is sent).
            ClosedSessionError: the session has shut down.
        """
        if on_busy is p.OnBusy.STEER:
            raise ValueError("ask() runs a turn of its own: on_busy must be queue or replace")
        items = [p.Text(prompt)] if isinstance(prompt, str) else list(prompt)
        op = p.UserTurn(items=items, on_busy=on_busy, final_output_json_schema=output_schema)
        # The collector knows its turn before the submission, which may be handled at once.
        collector = AnswerCollector(turn_id=self._next_id(None))
        self._services.listeners.append(collector.see)
        try:
            self._asking[collector.turn_id] = collector
            self.submit_nowait(op, id=collector.turn_id)
            await collector.done.wait()
        finally:
            self._services.listeners.remove(collector.see)
            self._asking.pop(collector.turn_id, None)
        return collector.answer()

    def _unknown(self, op_type: str) -> str:
        known = sorted({*p.BUILTIN_OP_TYPES, *self._custom_types})
        return (
            f"unknown op type {op_type!r}{did_you_mean(op_type, known)} "
            f"(registered: {', '.join(sorted(self._custom_types)) or 'none'})"
        )

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

    def _next_id(self, id: str | None) -> str:
        if id is None:
            return self._services.new_submission_id()
        if not isinstance(id, str) or not id:
            raise InvalidOpError("a submission id must be a non-empty string")
        return id

    def _enqueue(self, submission: p.Submission | _RawSubmission) -> None:
        if self._closed:
            raise ClosedSessionError("the session has shut down")
        here = self._is_idle() and not self._shutting_down
        self._unprocessed += 1
        left: p.Submission | _RawSubmission | _Failed = submission
        if here:
            # Nothing is ahead of it and no task runs, so nothing it does waits (but an
            # interrupt and a shutdown, left to the loop): the loop's next step is done here.
            try:
                decoded = self._decoded(submission)
                if decoded is None or not isinstance(decoded.op, p.Interrupt | p.Shutdown):
                    rest = None if decoded is None else self._answer(decoded)
                    assert rest is None, f"{submission!r} waits in an idle session"
                    self._handled(submission.id)
                    return
                left = decoded
            except Exception as exc:  # a bug: the loop raises it, as when it crashes
                left = _Failed(submission.id, exc)
        self._refresh_idle()
        self._sub_send.send_nowait(left)

    # ------------------------------------------------------------------ reading

    def events(self) -> AsyncIterator[p.Event]:
        """The event stream; it ends after ``shutdown_complete``. Only one reader may take it.

        Every event waits for the reader once it has taken the stream. Until then the session
        keeps only the latest 1,000 events: a reader that takes the stream after more were
        emitted first gets one ``warning`` with the id ``"dropped"``, numbered as the last
        event it stands for, in place of those dropped (docs/session.md).
        """
        return self._services.events.reader()

    def keep_event_json(self) -> None:
        """Make each later event's JSON once, for the rollout and for :meth:`event_json`
        (a reader that writes every event as JSON)."""
        self._services.events.keep_json()

    def event_json(self, seq: int) -> EventJson | None:
        """The JSON of event ``seq`` and its text (once only), when :meth:`keep_event_json`
        was asked for before it was emitted."""
        return self._services.events.take_json(seq)

    async def wait_idle(self) -> None:
        """Wait until every submission is handled, no task runs and no turn is queued."""
        while not self._is_idle():
            await self._idle.wait()

    def wake_when_idle(self, event: anyio.Event) -> None:
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

    async def wait_closed(self) -> None:
        """Wait until the session has shut down."""
        await self._finished.wait()

    def register_hook(self, hook: CompactHook) -> None:
        """Run ``hook`` at its point in every later compaction."""
        self._wiring.hooks.append(hook)

    def _is_idle(self) -> bool:
        slot = self._slot
        return self._unprocessed == 0 and slot.running is None and not slot.queue

    def _refresh_idle(self) -> None:
        if self._slot.running is None and self._agents.children:
            self._agents.deliver_notices()
        if self._is_idle():
            self._idle.set()
            if self._idle_wakers:
                for waker in self._idle_wakers:
                    waker.set()
                self._idle_wakers.clear()
        elif self._idle.is_set():
            self._idle = anyio.Event()

    # ------------------------------------------------------------------ the loop

    async def _run_loop(self) -> None:
        try:
            await self._serve()
        finally:
            # Also on a crash of the loop: the session is closed (submissions raise
            # ClosedSessionError, the event stream ends) and run_session's exit never waits.
            self._closed = True
            self._sub_send.close()
            self._services.events.close()
            self._finished.set()
            for asking in self._asking.values():
                asking.done.set()

    async def _serve(self) -> None:
        last_id = "shutdown"
        async with self._sub_recv:
            async for submission in self._sub_recv:
                last_id = submission.id
                try:
                    await self._handle(submission)
                finally:
                    self._handled(submission.id)
                if self._closed:
                    break
        if not self._closed:
            await self._shutdown(last_id)

    def _handled(self, sub_id: str) -> None:
        self._unprocessed -= 1
        self._refresh_idle()
        asking = self._asking.get(sub_id)
        if asking is not None:
            asking.handled(any(turn.id == sub_id for turn in self._slot.queue))

    async def _handle(self, submission: p.Submission | _RawSubmission | _Failed) -> None:
        if isinstance(submission, _Failed):
            raise submission.error
        decoded = self._decoded(submission)
        rest = None if decoded is None else self._answer(decoded)
        if rest is not None:
            await rest()

    def _decoded(self, submission: p.Submission | _RawSubmission) -> p.Submission | None:
        """``submission`` with its op decoded, or None after an ``error{invalid_op}``."""
        if not isinstance(submission, _RawSubmission):
            return submission
        try:
            op = decode_op(submission.payload, self._custom_types)
        except InvalidOpError as exc:
            prefix = f"{submission.origin}: " if submission.origin else ""
            self._services.emit(submission.id, p.ErrorEvent(f"{prefix}{exc}", ErrorCode.INVALID_OP))
            return None
        return p.Submission(submission.id, op)

    def _answer(self, submission: p.Submission) -> Rest | None:
        """Handle ``submission``; returns the rest that waits (an abort, the shutdown), if any."""
        services = self._services
        sub_id, op = submission.id, submission.op
        slot = self._slot
        match op:
            case p.UserTurn():
                settings = self._update_defaults(op)
                if op.pin:
                    services.pin_checked(sub_id, user_message_of(op.items).text(), settings.model)
                return slot.offer(sub_id, self._factory(op), settings, op.on_busy, op.items)
            case p.UserInput():
                defaults = services.state.defaults
                return slot.offer(sub_id, self._factory(op), defaults, p.OnBusy.STEER, op.items)
            case p.Compact():
                return slot.spawn(sub_id, services.state.defaults, self._factory(op))
            case p.Interrupt():
                self._agents.interrupt()  # the tree first: nothing of it runs in between
                return slot.interrupt
            case p.OverrideTurnContext():
                self._update_defaults(op)
                if op.changes_rules:
                    self._config = services.change_rules(sub_id, op) or self._config
            case p.Unpin(text=text):
                if text is not None and text not in services.state.work_state.pinned:
                    message = f"invalid op: unpin: no pinned message is {pin_label(text)}"
                    services.emit(sub_id, p.ErrorEvent(message, ErrorCode.INVALID_OP))
                services.unpin(sub_id, text)
            case p.ExecApproval() | p.PatchApproval():
                problem = self._decide(op)
                if problem is not None:
                    error = p.ErrorEvent(f"unknown approval: {problem}", ErrorCode.UNKNOWN_APPROVAL)
                    services.emit(sub_id, error)
            case p.Shutdown():
                return functools.partial(self._shutdown, sub_id)
            case p.CustomOp():
                services.recorder.op(sub_id, op)
                return slot.offer(sub_id, self._factory(op), services.state.defaults, op.on_busy)
            case _:
                assert_never(op)
        return None

    def _factory(self, op: p.Op) -> TaskFactory:
        kind = op_type(op)
        return TaskFactory(kind, self._tasks[kind], op)

    def _decide(self, op: p.ExecApproval | p.PatchApproval) -> str | None:
        """Decide a call of this session, else of the descendant that waits on it: the
        decision goes down the tree (docs/agents.md). What is wrong, if anything."""
        if op.agent_id in (None, self.id):
            problem = self._wiring.gate.decide(self._slot.waits(), op.id, op.decision)
            waiting = (
                s for s in self._agents.descendants() if op.id in s.statistics().pending_approvals
            )
            child = None if problem is None or op.agent_id else next(waiting, None)
        else:
            problem = f"no open agent has the id {op.agent_id!r}"
            child = self._agents.find(op.agent_id)
        if child is None:
            return problem
        try:
            child.submit_nowait(attrs.evolve(op, agent_id=None))
        except ClosedSessionError:
            return problem
        return None

    def _update_defaults(self, op: p.UserTurn | p.OverrideTurnContext) -> TurnSettings:
        """Apply the settings ``op`` carries to the defaults; returns the new defaults."""
        services = self._services
        settings = services.state.defaults.overridden(op.model, op.cwd, op.effort)
        if settings != services.state.defaults:
            services.set_defaults(settings)
        return settings

    async def _shutdown(self, sub_id: str) -> None:
        self._shutting_down = True
        self._agents.shut_all()  # the tree first: no child works on while this turn ends
        await self._slot.shut_down()
        await self._agents.close_all()  # every descendant ends before this session does
        self._closed = True
        services = self._services
        services.emit(sub_id, p.ShutdownComplete())
        services.recorder.close()
        self._sub_send.close()
        services.events.close()
        self._refresh_idle()
        self._finished.set()
        for asking in self._asking.values():
            asking.done.set()


@asynccontextmanager
async def run_session(
    config: Config,
    *,
    services: Callable[[], SessionWriter],
    tasks: TaskFactories,
    compactor: Callable[[], CompactionPolicy],
    resumed: bool,
    first: Iterable[tuple[str, p.EventMsg]] = (),
    mcp_servers: Mapping[str, int] | None = None,
    place: AgentPlace | None = None,
) -> AsyncIterator[Session]:
    """Run a session until the block exits or a ``shutdown`` op ends it.

    ``services`` makes the session's shared parts (model, tools, state, rollout writer); the
    rollout's ``session_meta`` line is written unless ``resumed``. ``session_configured`` is
    the first event (listing ``mcp_servers``, the MCP servers that started and their tool
    counts), then ``first`` (what a resume reports about its rollout, servers that did not
    start), in order. ``place`` is where it stands in a tree of agents (default: a root),
    whose children a resume opens again.
    Leaving the block shuts the session down: a running task is aborted (reason
    ``shutdown``) and ``shutdown_complete`` is the last event.
    """
    shared = services()
    place = place or AgentPlace(Tree(config.agents))
    shared.upstream = place.upstream
    defaults = shared.state.defaults
    try:
        async with anyio.create_task_group() as tg:
            session = Session._create(shared, tasks, tg, compactor, place)
            if not resumed:
                wiring = shared.wiring
                shared.recorder.session_meta(
                    wiring.session_id,
                    wiring.clock(),
                    defaults.cwd,
                    config.model,
                    config.model_provider,
                    place.link,
                )
            shared.configured(resumed=resumed, mcp_servers=mcp_servers)
            for event_id, msg in first:
                shared.emit(event_id, msg)
            # The rules it runs under, on every open: a resume keeps them (docs/approvals.md).
            shared.recorder.line(shared.wiring.gate.rules)
            tg.start_soon(session._run_loop, name=f"relay session {shared.wiring.session_id}")
            await session.agents.restore(place.records, cwd=defaults.cwd, model=defaults.model)
            try:
                yield session
            finally:
                # Leaving the block closes the submission channel; the loop shuts the
                # session down (bounded by the abort grace) and returns.
                session._shutting_down = True
                session._sub_send.close()
                with anyio.CancelScope(shield=True):
                    await session.wait_closed()
    except BaseExceptionGroup as group:
        raise single_exception(group) from None


__all__ = ["Session", "TaskFactories", "run_session"]
