"""The task interface and the port a task sees its session through (docs/tasks.md).

A task (:class:`SessionTask`) touches its session only through its :class:`TaskContext`,
eleven primitives: a frozen view, reporting, recording (items, input, the initial context, a
work-state fact), the steered input, one model request, one tool call, a compaction point, and
the session's sub-agents.
None of them knows what a regular turn is: the regular turn composes them
(``relay.tasks.TurnSteps``), and so can any task. Every write goes through the task's writer,
so nothing it does is reported once its turn has ended.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Sequence
from typing import Protocol

import anyio
import attrs

from .._base import _protocol as p
from .._base._codec import type_tag
from .._base._model import Prompt
from .._base._tokens import truncate_text
from .._exec._patch import APPLY_PATCH_NAME
from . import _exec_gate, _sampling
from ._agent_tools import AGENT_TOOLS, agent_call_done, agent_call_item
from ._agents import Agents
from ._compaction import CompactionOutcome, CompactionRequest
from ._input import resolve_image
from ._sampling import SampleResult
from ._session_writer import SessionWriter
from ._support import BackendContext, Backgrounds, CompactionContext
from ._task import StopTurn, TaskHandle, TurnResult
from ._tools import RECALL_TOOL, ToolContext
from ._turn import TurnWriter
from ._view import TaskView
from ._work_state import WorkEntry

#: Tool outputs are truncated to this many approximate tokens when recorded.
TOOL_OUTPUT_TOKENS = 10_000


class SessionTask(Protocol):
    """One piece of work of a session, started by an op.

    Subclass it to inherit the defaults of :attr:`steerable` and :meth:`abort`; implement
    :attr:`kind` and :meth:`run`.

    Example::

        @attrs.frozen
        class Echo(relay.SessionTask):
            text: str

            @property
            def kind(self) -> str:
                return "echo"

            async def run(self, ctx: relay.TaskContext) -> str | None:
                ctx.emit(relay.AgentMessage(self.text))
                return self.text
    """

    @property
    def kind(self) -> str:
        """The kind of work: the op type it serves (``regular`` and ``compact`` for relay's
        own), reported in :class:`~relay.SessionStatistics` and in its errors."""
        ...

    @property
    def steerable(self) -> bool:
        """Whether input submitted with ``on_busy=steer`` joins this task while it runs.

        When it does not, such input is refused with ``error{active_turn_not_steerable}``.
        """
        return False

    async def run(self, ctx: TaskContext) -> str | TurnResult | None:
        """Do the work; return the turn's last agent message (None: the last one this task
        emitted, if any), or a :class:`~relay.TurnResult` with the turn's structured output.

        Raising :class:`~relay.lowlevel.StopTurn` ends the turn at once; a
        :class:`~relay.ModelError` is reported as a regular turn reports it, and any other
        exception as an ``error`` event naming the kind. The session goes on in every case.
        """
        ...

    def abort(self, ctx: TaskContext, reason: p.AbortReason) -> None:
        """Leave the history consistent after this task was aborted.

        Called once, after the task stopped (or its grace period ran out) and before
        ``turn_aborted`` is emitted; ``ctx`` still records and emits. It must not block: the
        session's bookkeeping around an abort has no ``await`` in it.
        """
        del ctx, reason


#: The events of a session's life: only the session reports them.
LIFECYCLE_EVENTS = (
    p.SessionConfigured,
    p.TurnStarted,
    p.TurnComplete,
    p.TurnAborted,
    p.SessionResumed,
    p.ShutdownComplete,
)


def made_task(op_type: str, made: object) -> SessionTask:
    """What a task factory made for an op of ``op_type``, checked to be a task.

    Raises:
        TypeError: naming the op type and what the factory returned instead (nothing: a
            forgotten ``return``; a coroutine: an ``async def`` factory; anything else).
    """
    if made is None:
        raise TypeError(f"the task factory of {op_type!r} returned None (a forgotten return?)")
    if inspect.iscoroutine(made):
        made.close()
        raise TypeError(
            f"the task factory of {op_type!r} is an async function: a factory returns its task "
            "at once, and the task's run is what awaits"
        )
    if not (isinstance(getattr(made, "kind", None), str) and callable(getattr(made, "run", None))):
        raise TypeError(
            f"the task factory of {op_type!r} returned {type(made).__name__}, which is no "
            "relay.SessionTask (a kind and a run method)"
        )
    return typing.cast(SessionTask, made)


def emit_refusal(msg: object) -> TypeError | ValueError | None:
    """Why a task may not report ``msg`` (None: it may)."""
    if not isinstance(msg, p.EventMsg):
        return TypeError(f"a task reports event messages, not {type(msg).__name__}")
    if isinstance(msg, LIFECYCLE_EVENTS):
        return ValueError(
            f"a task cannot report {type_tag(type(msg))}: only the session reports the events "
            "of its life"
        )
    return None


class CompactionPolicy(Protocol):
    """What a session does at its compaction points (one per task; ``relay.tasks`` has
    relay's own). It decides whether anything is due and does it."""

    async def compact(
        self, ctx: CompactionContext, request: CompactionRequest
    ) -> CompactionOutcome:
        """Handle the compaction point ``request.trigger`` of ``ctx``'s task.

        ``manual`` and ``model_requested`` compact now; ``pre_turn``, ``mid_turn`` and
        ``post_turn`` compact only when something is due (``not_due`` otherwise).
        """
        ...


class TaskContext:
    """The task port: what a task sees of, and does to, its session (docs/tasks.md).

    Stable: its eleven members keep their meaning within a major version.
    """

    def __init__(
        self,
        session: SessionWriter,
        handle: TaskHandle[SessionTask],
        writer: TurnWriter,
        backgrounds: Backgrounds,
        compactor: CompactionPolicy,
        agents: Agents,
    ) -> None:
        self._agents = agents
        self._session = session
        self._handle = handle
        self._writer = writer
        self._compaction = CompactionContext(
            session,
            self._writer,
            BackendContext(session, self._writer, lambda: self.view),
            backgrounds,
        )
        self._compactor = compactor

    @property
    def view(self) -> TaskView:
        """The session as it is now, frozen: settings, history, token budget and the rest."""
        handle = self._handle
        return self._session.view(
            handle.turn_id, handle.task.kind, handle.settings, steered=len(handle.pending_input)
        )

    @property
    def agents(self) -> Agents:
        """The session's sub-agents: spawn a child (a session in this one's nursery), give it
        input, wait for it, close it (docs/agents.md). Its calls take the turn's id as the
        ``event_id`` of the children's events."""
        return self._agents

    def emit(self, msg: p.EventMsg) -> None:
        """Report an event of this turn: a warning, an item started or completed (a tool call
        of the task's own), or any other event message. An ``AgentMessage`` is reported as a
        regular turn reports one: its ``agent_message`` item started and completed, then the
        message.

        Raises:
            TypeError: ``msg`` is not an event message.
            ValueError: ``msg`` is an event of the session's life (``session_configured``,
                ``turn_started``, ``turn_complete``, ``turn_aborted``, ``session_resumed``,
                ``shutdown_complete``), which only the session reports.
        """
        refusal = emit_refusal(msg)
        if refusal is not None:
            raise refusal
        if isinstance(msg, p.AgentMessage):
            turn_id = self._handle.turn_id
            item_id = self._writer.new_item_id("msg")
            self._writer.emit(p.ItemStarted(turn_id, p.AgentMessageItem(item_id, "")))
            self._writer.emit(p.ItemCompleted(turn_id, p.AgentMessageItem(item_id, msg.message)))
        self._writer.emit(msg)

    def record(self, *items: p.ResponseItem) -> None:
        """Append items to the history (and the rollout)."""
        for item in items:
            self._writer.record(item)

    async def record_input(self, items: Sequence[p.InputItem]) -> None:
        """Record user input as it is given: a user message, with its item and
        ``user_message`` events (a local image is read into the message)."""
        settings = self._handle.settings
        resolved = tuple([await resolve_image(item, settings.cwd) for item in items])
        self._writer.record_input(resolved)

    def take_input(self) -> list[tuple[p.InputItem, ...]]:
        """Steered input waiting to be picked up, oldest first; the queue is emptied. Nothing
        of it is recorded: the task records what it takes (:meth:`record_input`)."""
        pending = list(self._handle.pending_input)
        self._handle.pending_input.clear()
        return pending

    def record_context(self) -> None:
        """Record the initial context of the turn's world (at a window's start), or what
        changed since the reference context; the turn's settings become the turn context."""
        settings = self._handle.settings
        wiring = self._session.wiring
        world = wiring.world(settings.cwd)
        self._writer.record_context(
            settings,
            world,
            lambda: _sampling.initial_context_items(wiring, settings, self.emit, world),
        )

    def note(self, entry: WorkEntry) -> None:
        """Add ``entry`` to the work-state record and report it (when the record is on); its
        text is redacted of the API key."""
        if self._session.wiring.config.features.work_state:
            self._writer.note_work(entry)

    async def sample(self, prompt: Prompt) -> SampleResult:
        """Send ``prompt`` (made from the view: :meth:`TaskView.prompt`), with retries
        (reported as ``stream_error``); the answer is recorded and reported as it streams.

        A failed request raises :class:`~relay.ModelError`; left uncaught, it is reported as
        a regular turn reports it.
        """
        return await _sampling.sample(self._session, self._writer, prompt, record=True, report=True)

    async def run_tool(self, call: p.ToolCall) -> str:
        """Run a tool call of the model: report it as a ``tool_call`` item, record its output
        (redacted of the API key, cut to the output limit) and return it.

        The session's gate clears the call first, and runs its commands (:mod:`._exec_gate`):
        a call it holds waits for a decision; denied, it does not run and its output says
        so; ``abort`` raises :class:`StopTurn`.
        Before the call runs, its intent is in the rollout; its output is its outcome.

        This is where every tool output enters the history, the events and the next request:
        the key is redacted here, whatever the tool, because a command can find it where relay
        cannot take it away (the environment of a process above relay).
        """
        wiring, turn_id = self._session.wiring, self._handle.turn_id
        arguments = call.arguments if isinstance(call, p.FunctionCall) else call.input
        item: p.ToolCallItem | p.AgentCallItem = p.ToolCallItem(call.call_id, call.name, arguments)
        if isinstance(call, p.FunctionCall) and wiring.tools.get(call.name) is AGENT_TOOLS.get(
            call.name, False
        ):
            item = agent_call_item(call, wiring.session_id)
        self.emit(p.ItemStarted(turn_id, item))
        cwd = self._handle.settings.cwd
        cleared = await _exec_gate.clear(wiring.gate, wiring.tools, self._writer, cwd, call)
        reported: list[p.ToolResult] = []
        started = anyio.current_time()
        if cleared.output is not None:
            output = cleared.output
            reported.append(p.ToolResult(p.CallStatus.DECLINED))
        elif isinstance(call, p.FunctionCall) or call.name == APPLY_PATCH_NAME:
            # A patch may come as a free-form call, as Codex offers the tool to its models: its
            # input is the patch, the function's one argument.
            self._writer.intent(call.call_id)
            ctx = self._tool_context(cleared, call.call_id, reported.append)
            output = await wiring.tools.call(_as_function(call), ctx)
        else:
            output = f"unsupported call: {call.name}"
            reported.append(p.ToolResult(p.CallStatus.FAILED))
        output = wiring.secrets.redact(output)
        if not (call.name == RECALL_TOOL and wiring.config.features.tool_output_masking):
            # A recalled output was truncated when first recorded; it comes back as it was.
            output = truncate_text(output, TOOL_OUTPUT_TOKENS)
        if isinstance(call, p.FunctionCall):
            self.record(p.FunctionCallOutput(call.call_id, output))
        else:
            self.record(p.CustomToolCallOutput(call.call_id, output))
        result = reported[-1] if reported else p.ToolResult(p.CallStatus.COMPLETED)
        if result.status is not p.CallStatus.DECLINED:
            took = round((anyio.current_time() - started) * 1000)
            result = attrs.evolve(result, duration_ms=took)
        if isinstance(item, p.AgentCallItem):
            done: p.TurnItem = agent_call_done(item, output, result)
        else:
            done = attrs.evolve(item, output=output, result=result)
        self.emit(p.ItemCompleted(turn_id, done))
        if cleared.abort:
            raise StopTurn(p.AbortReason.INTERRUPTED)
        return output

    def _tool_context(
        self,
        cleared: _exec_gate.Clearance,
        call_id: str,
        report: Callable[[p.ToolResult], None],
    ) -> ToolContext:
        wiring, budget = self._session.wiring, self.view.budget
        return ToolContext(
            self._handle.turn_id,
            self._handle.settings.cwd,
            self.emit,
            hidden_env=wiring.secrets.variables,
            tokens_used=budget.usage,
            context_window=budget.window,
            note=self.note,
            run_command=cleared.run,
            call_id=call_id,
            check_writes=cleared.write,
            found=self._handle.found,
            report=report,
            agents=self._agents,
        )

    async def compact(self, request: CompactionRequest) -> CompactionOutcome:
        """Reach a compaction point: the session's compactor does what is due (``manual``
        and ``model_requested``: compact now).

        Raises :class:`StopTurn` when the turn cannot go on: the compaction failed (its
        ``error`` is out) or a hook stopped it (the turn ends ``hook_stopped``).
        """
        try:
            outcome = await self._compactor.compact(self._compaction, request)
        finally:
            # Every installed history is reported, whatever compactor installed it.
            for _ in range(self._writer.unreported_installs):
                self._writer.emit(p.ContextCompacted())
        if not outcome.proceed:
            stopped = outcome in (
                CompactionOutcome.STOPPED,
                CompactionOutcome.INSTALLED_THEN_STOPPED,
            )
            raise StopTurn(p.AbortReason.HOOK_STOPPED if stopped else None)
        return outcome


def _as_function(call: p.ToolCall) -> p.FunctionCall:
    if isinstance(call, p.FunctionCall):
        return call
    return p.FunctionCall(call.name, json.dumps({"input": call.input}), call.call_id)


__all__ = [
    "LIFECYCLE_EVENTS",
    "TOOL_OUTPUT_TOKENS",
    "CompactionPolicy",
    "SessionTask",
    "TaskContext",
    "emit_refusal",
    "made_task",
]
