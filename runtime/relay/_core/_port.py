"""The task interface and the port a task sees its session through (docs/tasks.md).

A task (:class:`SessionTask`) touches its session only through its :class:`TaskContext`: a
frozen view, reporting and recording, its input, one call that samples the model as a regular
turn does, running a tool, and compaction. Every write goes through the task's writer, so
nothing it does is reported once its turn has ended.

Theory of operation of :meth:`TaskContext.sample` without a prompt (a *step*): before a
follow-up request (one after an earlier step of the same task), the session's compactor is
asked what is due at the mid-turn point: a compaction when usage reached the limit, masking
when it reached ``mask_trigger_tokens``. Steered input is then recorded, except right after a
mid-turn compaction that followed tool calls: the next request answers the tool outputs first.
The request is the history with the session's tools; the answer is recorded and reported. A
compaction point that cannot let the turn go on raises :class:`StopTurn`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs

from .._base import _protocol as p
from .._base._errors import ErrorCode
from .._base._model import Prompt
from .._base._tokens import truncate_text
from . import _sampling
from ._background import Backgrounds
from ._compaction import CompactionOutcome, CompactionRequest, Injection, install
from ._context import context_changes
from ._guard import LoopGuard, loop_message, loop_warning, step_limit_message
from ._input import resolve_image
from ._sampling import SampleResult
from ._services import Services
from ._support import CompactionSupport
from ._task import StopTurn, TaskHandle
from ._tools import RECALL_TOOL, ToolContext
from ._turn import TurnWriter
from ._view import TaskView
from ._work_state import WorkEntry, latest_answer

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

    async def run(self, ctx: TaskContext) -> str | None:
        """Do the work; return the turn's last agent message (None: the last one this task
        emitted, if any).

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


class Compactor(Protocol):
    """What a session does at its compaction points (one per task; ``relay.tasks`` has
    relay's own). It decides whether anything is due and does it."""

    async def compact(self, ctx: TaskContext, request: CompactionRequest) -> CompactionOutcome:
        """Handle the compaction point ``request.trigger`` for ``ctx``'s task.

        ``manual`` and ``model_requested`` compact now; ``pre_turn``, ``mid_turn`` and
        ``post_turn`` compact only when something is due (``not_due`` otherwise).
        """
        ...


class TaskContext:
    """The task port: what a task sees of, and does to, its session (docs/tasks.md).

    Stable: its members keep their meaning within a major version. A task that needs more of
    compaction asks for :attr:`compaction`.
    """

    def __init__(
        self,
        services: Services,
        handle: TaskHandle[SessionTask],
        backgrounds: Backgrounds,
        compactor: Compactor,
    ) -> None:
        self._services = services
        self._handle = handle
        self._writer = TurnWriter(services, handle)
        self._compactor = compactor
        self._support = CompactionSupport(
            services, self._writer, handle.settings, backgrounds, lambda: self.view
        )
        # Where the task is in the regular turn's order (see the module's theory).
        self._context_recorded = False
        self._stepped = False
        self._last_step_called_tools = False
        self._compacted_since_step = False
        config = services.config
        self._guard = LoopGuard(config.max_steps_per_turn, config.max_identical_tool_calls)

    @property
    def view(self) -> TaskView:
        """The session as it is now, frozen: settings, history, token budget and the rest."""
        services, handle = self._services, self._handle
        state = services.state
        return TaskView(
            turn_id=handle.turn_id,
            kind=handle.task.kind,
            settings=handle.settings,
            config=services.config,
            provider=services.provider,
            history=state.history.frozen(),
            budget=services.budget(handle.settings.model),
            instructions=services.instructions,
            work_state=state.work_state,
            window_id=state.window_id,
            last_turn_model=state.last_turn_model,
            steered=len(handle.pending_input),
        )

    def emit(self, msg: p.EventMsg) -> None:
        """Report an event of this turn: a warning, an item started or completed (a tool call
        of the task's own), or any other event message. An ``AgentMessage`` is reported as a
        regular turn reports one: its ``agent_message`` item started and completed, then the
        message."""
        if isinstance(msg, p.AgentMessage):
            turn_id = self._handle.turn_id
            item_id = self._services.new_item_id("msg")
            self._writer.emit(p.ItemStarted(turn_id, p.AgentMessageItem(item_id, "")))
            self._writer.emit(p.ItemCompleted(turn_id, p.AgentMessageItem(item_id, msg.message)))
        self._writer.emit(msg)

    def record(self, *items: p.ResponseItem) -> None:
        """Append items to the history (and the rollout)."""
        for item in items:
            self._writer.record(item)

    async def record_input(self, items: Sequence[p.InputItem]) -> None:
        """Record user input: a user message, with its item and ``user_message`` events.

        The first input of a task is preceded by what a regular turn records first: a
        compaction when one is due before the turn, then the initial context (or what changed
        since the reference context). The input is recorded even when that compaction fails or
        is stopped; the turn then ends (:class:`StopTurn`).
        """
        stop: StopTurn | None = None
        if not self._context_recorded:
            try:
                await self.compact(CompactionRequest(p.CompactionTrigger.PRE_TURN))
            except StopTurn as stopped:
                stop = stopped
            self._record_context()
        settings = self._handle.settings
        resolved = tuple([await resolve_image(item, settings.cwd) for item in items])
        if not self._writer.detached:
            self._services.record_input(self._handle.turn_id, resolved)
        if stop is not None:
            raise stop

    def take_input(self) -> list[tuple[p.InputItem, ...]]:
        """Steered input waiting to be picked up, oldest first; the queue is emptied."""
        pending = list(self._handle.pending_input)
        self._handle.pending_input.clear()
        return pending

    def prompt(
        self,
        input: Sequence[p.ResponseItem] | None = None,
        *,
        tools: bool = True,
        model: str | None = None,
        purpose: str = "turn",
        instructions: str | None = None,
    ) -> Prompt:
        """A request for this turn's model over ``input`` (default: the normalised history),
        with the base instructions (or ``instructions`` in their place) and (``tools``) the
        session's tools."""
        return _sampling.build_prompt(
            self._services,
            self._handle.settings,
            input,
            tools=tools,
            model=model,
            purpose=purpose,
            instructions=instructions,
        )

    async def sample(
        self,
        prompt: Prompt | None = None,
        *,
        record: bool = True,
        report: bool = True,
        max_retries: int | None = None,
    ) -> SampleResult:
        """Ask the model, with retries (reported as ``stream_error``).

        Without ``prompt``, this is one step of a regular turn: the mid-turn compaction point
        and masking before a follow-up request, steered input, the history with the session's
        tools, the answer recorded and reported (``record`` and ``report`` then apply to
        ``prompt`` only). With ``prompt``, exactly that request is sent. A failed request
        raises :class:`~relay.ModelError`; left uncaught, it is reported as a regular turn
        reports it.
        """
        if prompt is not None:
            return await _sampling.sample(
                self._services,
                self._writer,
                prompt,
                record=record,
                report=report,
                max_retries=max_retries,
            )
        self._check_limits()
        take_input = True
        if self._stepped and not self._compacted_since_step:
            over = self.view.budget.over_limit
            outcome = await self.compact(
                CompactionRequest(p.CompactionTrigger.MID_TURN, Injection.BEFORE_LAST_USER_MESSAGE)
            )
            if over and outcome is not CompactionOutcome.DEFERRED:
                take_input = not self._last_step_called_tools
        if not self._context_recorded:
            await self.compact(CompactionRequest(p.CompactionTrigger.PRE_TURN))
            self._record_context()
        if take_input:
            for items in self.take_input():
                await self.record_input(items)
        self._stepped = True
        self._compacted_since_step = False
        result = await _sampling.sample(
            self._services, self._writer, self.prompt(), record=True, report=True
        )
        self._last_step_called_tools = bool(result.tool_calls)
        if not result.tool_calls and result.last_agent_message:
            answer = latest_answer(result.last_agent_message)
            if answer is not None:
                self._note(answer)
        return result

    async def run_tool(self, call: p.ToolCall) -> str:
        """Run a tool call of the model: report it as a ``tool_call`` item, record its output
        (redacted of the API key, cut to the output limit) and return it.

        This is where every tool output enters the history, the events and the next request:
        the key is redacted here, whatever the tool, because a command can find it where relay
        cannot take it away (the environment of a process above relay).
        """
        services, turn_id = self._services, self._handle.turn_id
        arguments = call.arguments if isinstance(call, p.FunctionCall) else call.input
        item = p.ToolCallItem(call.call_id, call.name, arguments)
        self.emit(p.ItemStarted(turn_id, item))
        budget = self.view.budget
        tool_ctx = ToolContext(
            turn_id,
            self._handle.settings.cwd,
            self.emit,
            hidden_env=services.secrets.variables,
            tokens_used=budget.usage,
            context_window=budget.window,
            note=self._note,
        )
        if isinstance(call, p.FunctionCall):
            output = await services.tools.call(call, tool_ctx)
        else:
            output = f"unsupported call: {call.name}"
        output = services.secrets.redact(output)
        if not (call.name == RECALL_TOOL and services.config.features.tool_output_masking):
            # A recalled output was truncated when first recorded; it comes back as it was.
            output = truncate_text(output, TOOL_OUTPUT_TOKENS)
        if isinstance(call, p.FunctionCall):
            self.record(p.FunctionCallOutput(call.call_id, output))
        else:
            self.record(p.CustomToolCallOutput(call.call_id, output))
        self.emit(p.ItemCompleted(turn_id, attrs.evolve(item, output=output)))
        if self._guard.note_call(call.name, arguments, output) == "warn":
            self.emit(p.WarningEvent(loop_warning(call.name, self._guard.run)))
        return output

    def _check_limits(self) -> None:
        """End the turn before a step it may not take (see :mod:`._guard`)."""
        guard = self._guard
        if guard.looping and guard.last is not None:
            self.emit(p.ErrorEvent(loop_message(guard.last[0], guard.run), ErrorCode.TOOL_LOOP))
            raise StopTurn()
        if not guard.step_allowed():
            self.emit(p.ErrorEvent(step_limit_message(guard.max_steps), ErrorCode.STEP_LIMIT))
            raise StopTurn()

    async def compact(self, request: CompactionRequest) -> CompactionOutcome:
        """Reach a compaction point: the session's compactor does what is due (``manual``
        and ``model_requested``: compact now).

        Raises :class:`StopTurn` when the turn cannot go on: the compaction failed (its
        ``error`` is out) or a hook stopped it (the turn ends ``hook_stopped``).
        """
        outcome = await self._compactor.compact(self, request)
        if not outcome.proceed:
            stopped = outcome in (
                CompactionOutcome.STOPPED,
                CompactionOutcome.INSTALLED_THEN_STOPPED,
            )
            raise StopTurn(p.AbortReason.HOOK_STOPPED if stopped else None)
        self._compacted_since_step = True
        return outcome

    def install_compaction(
        self,
        items: Sequence[p.ResponseItem],
        *,
        message: str,
        receipt: p.CompactionReceipt,
        clear_reference: bool,
        masked_outputs: dict[str, str] | None = None,
    ) -> None:
        """Install a compacted history in one step (docs/compaction.md).

        Replaces the history (and, with ``clear_reference``, forgets the reference context so
        that the next turn records the initial context again), starts a new window, persists
        the ``compacted`` line (with the work-state record and the originals of
        ``masked_outputs``) and emits the ``token_count`` of the receipt.
        """
        install(
            self._services,
            self._writer,
            self._handle.settings,
            items,
            message=message,
            receipt=receipt,
            clear_reference=clear_reference,
            masked_outputs=masked_outputs,
        )

    @property
    def compaction(self) -> CompactionSupport:
        """What a compaction needs beyond this port: hooks, estimates, the initial context,
        the background job, and the context a backend runs with."""
        return self._support

    def _record_context(self) -> None:
        """Record the initial context, or what changed since the reference context."""
        self._context_recorded = True
        services, settings = self._services, self._handle.settings
        state = services.state
        world = services.world(settings.cwd)
        if state.reference_world is None:
            initial = _sampling.initial_context_items(services, settings, self.emit, world)
            self.record(*initial)
            if not self._writer.detached:
                services.recorder.world_state(world)
        else:
            self.record(*context_changes(state.reference_world, world))
        if self._writer.detached:
            return
        state.reference_world = world
        state.last_turn_model = settings.model
        services.recorder.turn_context(settings, services.instructions, world)

    def _note(self, entry: WorkEntry) -> None:
        """Add ``entry`` to the work-state record and report it (when the record is on)."""
        if self._writer.detached or not self._services.config.features.work_state:
            return
        # A tool notes what it saw (a command's last line of output): redacted as its output is.
        entry = attrs.evolve(entry, text=self._services.secrets.redact(entry.text))
        self._services.state.work_state.add(entry)
        self.emit(p.WorkStateNoted(entry.kind, entry.text, entry.key))


__all__ = ["TOOL_OUTPUT_TOKENS", "Compactor", "SessionTask", "TaskContext"]
