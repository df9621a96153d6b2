"""The task context: everything a task may see of, and do to, its session.

A task touches its session only through its :class:`TaskContext`. Every write goes through the
context's guard: once the task is detached (its terminal event is out), whatever it still emits
or records is dropped, so nothing carries the turn id after its terminal event.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from .._base import _protocol as p
from .._base._config import Config, ProviderConfig
from .._base._errors import ContextWindowExceeded, ErrorCode, ModelError
from .._base._model import CompactRequest, Prompt
from .._base._tokens import approx_tokens, calibrated, items_tokens, tools_tokens, truncate_text
from ._background import BackgroundJob
from ._compact import answer_room, auto_compact_limit
from ._context import TurnSettings, WorldState, context_changes, initial_context, read_project_doc
from ._history import normalize_for_prompt
from ._input import resolve_image, user_message_of
from ._sampling import SampleResult, reconnecting_message, stream_response, with_retries
from ._task import SessionTask, TaskHandle, TaskKind
from ._tools import RECALL_TOOL, ToolContext
from ._work_state import WorkEntry, carry_work_state, work_state_budget

if TYPE_CHECKING:
    from ._session import Session

#: Tool outputs are truncated to this many approximate tokens when recorded.
TOOL_OUTPUT_TOKENS = 10_000


class TaskContext:
    """What a task sees of its session. Writes are dropped once the task is detached."""

    def __init__(self, session: Session, handle: TaskHandle) -> None:
        self.session = session
        """The session (for the runtime's own helpers; tasks use the context's methods)."""
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
    def provider(self) -> ProviderConfig:
        """The provider the session's model client talks to (its limits and capabilities)."""
        return self.session.provider

    @property
    def history(self) -> Sequence[p.ResponseItem]:
        """The history (read-only)."""
        return self.session.state.history.items

    @property
    def last_turn_model(self) -> str | None:
        """The model of the last regular turn that recorded its context, if any."""
        return self.session.state.last_turn_model

    @property
    def detached(self) -> bool:
        """True once the task's terminal event is out: nothing it does is reported any more."""
        return self._handle.detached

    def emit(self, msg: p.EventMsg) -> None:
        """Report an event of this turn."""
        if not self.detached:
            self.session._emit(self._handle.turn_id, msg)

    def record(self, item: p.ResponseItem, *, from_model: bool = False) -> None:
        """Append an item to the history."""
        if not self.detached:
            self.session._record(item, from_model=from_model)

    def new_item_id(self, prefix: str = "item") -> str:
        """A fresh item id, unique in the session."""
        return self.session._new_item_id(prefix)

    # -- input

    def drain_pending(self) -> list[tuple[p.InputItem, ...]]:
        """Steered input waiting to be picked up, oldest first; the queue is emptied."""
        pending = list(self._handle.pending_input)
        self._handle.pending_input.clear()
        return pending

    def end_aborted(self, reason: p.AbortReason) -> None:
        """End this task with ``turn_aborted{reason}`` instead of ``turn_complete`` when it
        returns (a hook stopped it)."""
        self._handle.ends_aborted = reason

    def record_input(self, items: tuple[p.InputItem, ...]) -> None:
        """Record input as a user message in the history only, without reporting it (what an
        aborted turn does with steered input it never picked up)."""
        self.record(user_message_of(items))

    def has_pending(self) -> bool:
        """Whether steered input is waiting."""
        return bool(self._handle.pending_input)

    def record_context(self) -> None:
        """Record the initial context, or what changed since the reference context."""
        session = self.session
        state = session.state
        world = session._world(self.settings.cwd)
        if state.reference_world is None:
            for message in self.initial_context_items(world):
                self.record(message)
            if not self.detached:
                session._recorder.world_state(world)
        else:
            for message in context_changes(state.reference_world, world):
                self.record(message)
        if self.detached:
            return
        state.reference_world = world
        state.last_turn_model = self.settings.model
        session._recorder.turn_context(self.settings, session.instructions, world)

    async def record_user_input(self, items: tuple[p.InputItem, ...]) -> None:
        """Record user input as a user message, with its item and legacy events."""
        resolved = tuple([await resolve_image(item, self.settings.cwd) for item in items])
        if not self.detached:
            self.session._record_user_input(self.turn_id, resolved)

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
        history = self.session.state.history
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
            max_output_tokens=self.max_output_tokens,
            purpose="compact" if purpose == "compact" else "turn",
        )

    @property
    def max_output_tokens(self) -> int | None:
        """The answer limit of this session's requests, if one is set."""
        return self.session.config.max_output_tokens(self.provider)

    @property
    def model_context_window(self) -> int | None:
        """The context window of this turn's model."""
        return self.session.model_context_window(self.settings.model)

    def context_window_of(self, model: str) -> int | None:
        """The context window of ``model``."""
        return self.session.model_context_window(model)

    def auto_compact_limit(self, model: str | None = None) -> int | None:
        """The auto-compaction threshold for ``model`` (default: this turn's), or None."""
        return auto_compact_limit(
            self.session.config.model_auto_compact_token_limit,
            self.session.model_context_window(model or self.settings.model),
            reserved_output=self.max_output_tokens,
        )

    @property
    def usage_tokens(self) -> int:
        """The usage compared with the auto-compaction limit: the server's total of the last
        response plus the calibrated estimate of what was recorded after it (docs/session.md)."""
        state = self.session.state
        history = state.history
        return history.last_response_tokens + calibrated(
            history.tokens_since_model, state.token_ratio
        )

    def estimated_tokens(self) -> int:
        """The approximate size of the whole history, item by item."""
        return self.session.state.history.estimated_tokens()

    def context_tokens(self) -> tuple[int, bool]:
        """The size of the context as it stands, and whether it rests on a server's count.

        With a response since the last compaction, it is that response's total as the server
        counted it plus the calibrated estimate of what came after (counted); else the
        calibrated estimate of a request over the history (instructions and tools included).
        """
        history = self.session.state.history
        if history.last_response_tokens:
            return self.usage_tokens, True
        return self.estimate_context(history.items), False

    @property
    def token_ratio(self) -> float:
        """Server tokens per estimated token, from the last request a server counted."""
        return self.session.state.token_ratio

    def room_after_compaction(
        self, alongside: Sequence[p.ResponseItem], model: str | None = None
    ) -> int | None:
        """Tokens (as a server counts them) that the messages a compaction keeps may take.

        What is left of the window of ``model`` (default: this turn's) once the rest of the new
        context — ``alongside`` (the summary or compaction item), the initial context, the
        instructions and tools, the work-state record when it is on — and room for an answer
        are taken, and no more than keeps the context under the auto-compaction limit. None
        when the window is unknown.
        """
        model = model or self.settings.model
        window = self.context_window_of(model)
        if window is None:
            return None
        ceiling = window - answer_room(window, self.max_output_tokens)
        limit = self.auto_compact_limit(model)
        if limit is not None:
            ceiling = min(ceiling, limit)
        if self.config.features.work_state:
            # The record is placed after the kept messages are chosen: keep its room.
            ratio = self.session.state.token_ratio
            ceiling -= calibrated(self.work_state_budget(model), ratio)
        return ceiling - self.estimate_context([*alongside, *self.initial_context_items()])

    def estimate_context(self, items: Sequence[p.ResponseItem]) -> int:
        """The calibrated estimate of a request over ``items``: what a server would count."""
        estimate = (
            approx_tokens(self.session.instructions)
            + tools_tokens(self.session.tools.specs())
            + items_tokens(items)
        )
        return calibrated(estimate, self.session.state.token_ratio)

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
        limit = self.provider.stream_max_retries if max_retries is None else max_retries

        def reconnecting(attempt: int, error: ModelError) -> None:
            detail = error.message
            if error.retry_after is not None:
                # The wait the server asked for (capped by the wire): say it, it can be long.
                detail = f"{detail}; retrying in {max(0.0, error.retry_after):g} s"
            self.emit(p.StreamErrorEvent(reconnecting_message(attempt, limit), detail))

        return await with_retries(
            lambda: stream_response(self, prompt, record=record, report=report),
            max_retries=limit,
            rng=self.session.rng,
            before_retry=reconnecting,
        )

    async def remote_compact(self, request: CompactRequest) -> Any:
        """``POST /responses/compact`` with retries: transport failures, 5xx and rate limits
        are retried up to the provider's ``request_max_retries``, after the
        server's retry-after or the same jittered backoff as sampling."""
        return await with_retries(
            lambda: self.session.model.compact(request),
            max_retries=self.provider.request_max_retries,
            rng=self.session.rng,
        )

    def report_usage(self, usage: p.TokenUsage) -> None:
        """Add a response's usage to the session total and emit ``token_count``."""
        if self.detached:
            return
        state = self.session.state
        state.add_usage(usage)
        self.emit(state.token_count(usage, self.model_context_window))

    def report_model_error(self, error: ModelError) -> None:
        """Report a failed sampling step (docs/session.md)."""
        if isinstance(error, ContextWindowExceeded):
            self.report_window_full(error)
            self.emit(
                p.ErrorEvent(
                    overflow_advice(error, self.auto_compact_limit() is not None),
                    ErrorCode.CONTEXT_WINDOW_EXCEEDED,
                )
            )
            return
        self.emit(p.ErrorEvent(error.message, error.code))

    # -- compaction

    def initial_context_items(self, world: WorldState | None = None) -> list[p.ResponseItem]:
        """The full initial context for this turn's world, as recorded at a window start."""
        cwd = self.settings.cwd
        config = self.session.config
        return list(
            initial_context(
                world or self.session._world(cwd),
                developer_instructions=config.developer_instructions,
                project_doc=read_project_doc(
                    cwd, config.project_doc, warn=lambda text: self.emit(p.WarningEvent(text))
                ),
                context_window=self.model_context_window if config.features.token_budget else None,
            )
        )

    def report_window_full(self, error: ContextWindowExceeded | None = None) -> None:
        """Count the history as filling the context window and emit a ``token_count`` that
        shows it: the next turn then compacts before it sends anything."""
        if self.detached:
            return
        window = self.model_context_window
        state = self.session.state
        counted = (error.prompt_tokens if error is not None else None) or 0
        full = window or max(state.history.usage_tokens, counted)
        # The server's count, when it is more than the window, is the better figure to compact
        # from; what is shown is the window, full.
        state.history.response_completed(max(full, counted))
        self.emit(state.token_count(p.TokenUsage(total_tokens=full), window))

    def install_compaction(
        self,
        items: Sequence[p.ResponseItem],
        *,
        message: str,
        receipt: p.CompactionReceipt,
        clear_reference: bool,
        masked_outputs: Mapping[str, str] | None = None,
    ) -> None:
        """Install a compacted history in one step (docs/compaction.md).

        Replaces the history (and the reference context), starts a new window, persists
        ``compacted`` (with the work-state record and the originals of ``masked_outputs``),
        ``world_state`` and ``turn_context`` (when there is a reference context), recomputes
        usage and emits ``token_count``.
        """
        if self.detached:
            return
        session = self.session
        state = session.state
        state.history.replace(items)
        state.outputs.update(masked_outputs or {})
        state.start_window()
        world = session._world(self.settings.cwd)
        state.reference_world = None if clear_reference else world
        recorder = session._recorder
        recorder.compacted(
            items,
            message=message,
            receipt=receipt,
            window_number=state.window_number,
            first_window_id=state.first_window_id,
            previous_window_id=state.previous_window_id,
            window_id=state.window_id,
            work_state=None if state.work_state.is_empty() else state.work_state,
            masked_outputs=masked_outputs,
        )
        recorder.world_state(world)
        if state.reference_world is not None:
            recorder.turn_context(self.settings, session.instructions, world)
        # Nothing counted the new history yet: the figure is the receipt's estimate.
        usage = p.TokenUsage(total_tokens=receipt.tokens_after)
        self.emit(state.token_count(usage, self.model_context_window, estimated=True))

    # -- the work-state record and masking

    def note(self, entry: WorkEntry) -> None:
        """Add ``entry`` to the work-state record and report it (when ``features.work_state``
        is on; else nothing happens)."""
        if self.detached or not self.config.features.work_state:
            return
        self.session.state.work_state.add(entry)
        self.emit(p.WorkStateNoted(entry.kind, entry.text, entry.key))

    def carry_work_state(self, history: Sequence[p.ResponseItem]) -> list[p.ResponseItem]:
        """``history`` with the pinned user messages and (when ``features.work_state`` is on)
        the rendered work-state record placed in it; unchanged when there is neither."""
        return carry_work_state(
            history,
            self.session.state.work_state,
            self.work_state_budget(),
            include_entries=self.config.features.work_state,
        )

    def work_state_budget(self, model: str | None = None) -> int:
        """The token budget of the rendered work-state record (estimate units):
        ``work_state_token_budget``, at most a tenth of the window of ``model`` (default:
        this turn's)."""
        window = self.context_window_of(model or self.settings.model)
        return work_state_budget(
            self.config.work_state_token_budget, window, self.session.state.token_ratio
        )

    # -- background compaction

    @property
    def window_id(self) -> str:
        """The id of the current compaction window."""
        return self.session.state.window_id

    @property
    def background(self) -> BackgroundJob | None:
        """The session's background compaction, if one was started and not yet taken."""
        return self.session._background

    def start_background(
        self, work: Callable[[TaskContext], Awaitable[Any]]
    ) -> BackgroundJob | None:
        """Start ``work`` as the session's background compaction, over a snapshot of the
        history taken now; None when one is already there (at most one at a time).

        ``work`` runs in the session's task group with a context whose history is the
        snapshot and which neither reports nor records anything; what it returns (or the
        message of what it raised) is kept on the job until :meth:`take_background`.
        """
        if self.detached:
            return None
        return self.session._start_background(self.settings, work)

    def take_background(self) -> BackgroundJob | None:
        """Take the session's background job away from it (cancelling it if it still runs),
        so that a new one may start."""
        if self.detached:
            return None
        return self.session._take_background()

    def drop_background(self, job: BackgroundJob, reason: str) -> None:
        """Report and record that ``job``'s result will not be installed, and why."""
        if self.detached:
            return
        message = p.BackgroundEvent(
            f"Dropped the background compaction of a snapshot taken "
            f"{job.age_ms(anyio.current_time())} ms ago: {reason}."
        )
        self.session._recorder.note(message)
        self.emit(message)

    # -- tools

    async def run_tool_call(self, call: p.ToolCall) -> str:
        """Run a tool call, record its output and report it as a ``tool_call`` item."""
        arguments = call.arguments if isinstance(call, p.FunctionCall) else call.input
        item = p.ToolCallItem(call.call_id, call.name, arguments)
        self.emit(p.ItemStarted(self.turn_id, item))
        secret = self.provider.env_key
        tool_ctx = ToolContext(
            self.turn_id,
            self.settings.cwd,
            self.emit,
            hidden_env=frozenset([secret]) if secret else frozenset(),
            tokens_used=self.usage_tokens,
            context_window=self.model_context_window,
            note=self.note,
        )
        if isinstance(call, p.FunctionCall):
            output = await self.session.tools.call(call, tool_ctx)
        else:
            output = f"unsupported call: {call.name}"
        if not (call.name == RECALL_TOOL and self.config.features.tool_output_masking):
            # A recalled output was truncated when first recorded; it comes back as it was.
            output = truncate_text(output, TOOL_OUTPUT_TOKENS)
        if isinstance(call, p.FunctionCall):
            self.record(p.FunctionCallOutput(call.call_id, output))
        else:
            self.record(p.CustomToolCallOutput(call.call_id, output))

        self.emit(p.ItemCompleted(self.turn_id, attrs.evolve(item, output=output)))
        return output


class _BackgroundWork(SessionTask):
    """What the handle of a background context says it runs; it is never run as a task."""

    @property
    def kind(self) -> TaskKind:
        return TaskKind.COMPACT

    async def run(self, ctx: TaskContext) -> str | None:
        raise RuntimeError("background work runs through Session._run_background")


class BackgroundContext(TaskContext):
    """The context of background work: the history is the job's snapshot, and nothing it does
    is reported, recorded or installed (its result waits on the job)."""

    def __init__(self, session: Session, job: BackgroundJob) -> None:
        handle = TaskHandle(
            f"background-{job.number}", _BackgroundWork(), job.settings, job.snapshot.taken_at
        )
        super().__init__(session, handle)
        self.job = job
        """The job this context works for."""

    @property
    def history(self) -> Sequence[p.ResponseItem]:
        """The snapshot."""
        return self.job.snapshot.items

    def emit(self, msg: p.EventMsg) -> None:
        """Nothing is reported until the result is installed."""
        del msg

    def record(self, item: p.ResponseItem, *, from_model: bool = False) -> None:
        """Background work never writes to the history."""
        del item, from_model

    def build_prompt(
        self,
        input: Iterable[p.ResponseItem] | None = None,
        *,
        tools: bool = True,
        purpose: str = "turn",
        model: str | None = None,
    ) -> Prompt:
        """A request over ``input`` (default: the snapshot)."""
        return super().build_prompt(
            self.history if input is None else input, tools=tools, purpose=purpose, model=model
        )

    def estimated_tokens(self) -> int:
        """The approximate size of the snapshot."""
        return items_tokens(self.history)

    def install_compaction(
        self,
        items: Sequence[p.ResponseItem],
        *,
        message: str,
        receipt: p.CompactionReceipt,
        clear_reference: bool,
        masked_outputs: Mapping[str, str] | None = None,
    ) -> None:
        """Refused: a background result is installed by the turn that finds it current."""
        raise RuntimeError("background work cannot install a compaction")


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


__all__ = ["TOOL_OUTPUT_TOKENS", "BackgroundContext", "TaskContext"]
