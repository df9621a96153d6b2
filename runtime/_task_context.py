"""The task context: everything a task may see of, and do to, its session.

A task touches its session only through its :class:`TaskContext`. Every write goes through the
context's guard: once the task is detached (its terminal event is out), whatever it still emits
or records is dropped, so nothing carries the turn id after its terminal event.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from . import _protocol as p
from ._background import BackgroundJob
from ._compact import auto_compact_limit
from ._config import Config, ProviderConfig
from ._context import (
    TurnSettings,
    WorldState,
    context_changes,
    initial_context,
    read_project_doc,
)
from ._errors import ContextWindowExceeded, ErrorCode, ModelError
from ._history import normalize_for_prompt
from ._input import resolve_image, user_message_of
from ._model import CompactRequest, Prompt
from ._sampling import SampleResult, reconnecting_message, stream_response, with_retries
from ._task import SessionTask, TaskHandle, TaskKind
from ._tokens import items_tokens, truncate_text
from ._tools import ToolContext

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
        wire: tuple[dict[str, Any], ...] | None = None
        if input is None and history.regular:
            items: Sequence[p.ResponseItem] = history.items
            wire = tuple(history.wire_items())
        else:
            items = normalize_for_prompt(history.items if input is None else input)
        return Prompt(
            model=model or self.settings.model,
            instructions=self.session.instructions,
            input=tuple(items),
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

    def context_window_of(self, model: str) -> int | None:
        """The context window of ``model``."""
        return self.session.model_context_window(model)

    def auto_compact_limit(self, model: str | None = None) -> int | None:
        """The auto-compaction threshold for ``model`` (default: this turn's), or None."""
        return auto_compact_limit(
            self.session.config.model_auto_compact_token_limit,
            self.session.model_context_window(model or self.settings.model),
        )

    @property
    def usage_tokens(self) -> int:
        """The usage compared with the auto-compaction limit (SPEC §7.5)."""
        return self.session.state.history.usage_tokens

    def estimated_tokens(self) -> int:
        """The approximate size of the whole history, item by item."""
        return self.session.state.history.estimated_tokens()

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
            self.emit(p.StreamErrorEvent(reconnecting_message(attempt, limit), error.message))

        return await with_retries(
            lambda: stream_response(self, prompt, record=record, report=report),
            max_retries=limit,
            rng=self.session.rng,
            before_retry=reconnecting,
        )

    async def remote_compact(self, request: CompactRequest) -> Any:
        """``POST /responses/compact`` with retries (SPEC §6.4): transport failures, 5xx and
        rate limits are retried up to the provider's ``request_max_retries``, after the
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

    def report_window_full(self) -> None:
        """Emit a ``token_count`` that shows the context window full."""
        window = self.model_context_window
        state = self.session.state
        full = p.TokenUsage(total_tokens=window or state.history.usage_tokens)
        self.emit(state.token_count(full, window))

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
        if self.detached:
            return
        session = self.session
        state = session.state
        state.history.replace(items)
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
        )
        recorder.world_state(world)
        if state.reference_world is not None:
            recorder.turn_context(self.settings, session.instructions, world)
        usage = p.TokenUsage(total_tokens=state.history.usage_tokens)
        self.emit(state.token_count(usage, self.model_context_window))

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
    ) -> None:
        """Refused: a background result is installed by the turn that finds it current."""
        raise RuntimeError("background work cannot install a compaction")


__all__ = ["TOOL_OUTPUT_TOKENS", "BackgroundContext", "TaskContext"]
