"""Compaction: one small backend interface, one module per backend, one shared flow.

:func:`run_compaction` is what the compaction task and auto-compaction call. It selects the
backend (a pure function of features and provider capability), runs the pre-compact hooks,
reports the compaction item, lets the backend compute the new history, places the initial
context, installs the result, reports it and runs the post-compact hooks. A backend raises
:class:`CompactionFailed` to fail; until it returns, nothing about the session has changed
(SPEC §6.9).

Adding a backend is one new module and one line in :data:`BACKENDS`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Protocol

import anyio
import attrs

import runtime
from runtime import HookTrigger, TaskContext, run_compact_hooks
from runtime.compaction import Backend, Injection, place_initial_context, select_backend

from .local import LocalBackend
from .remote_v1 import RemoteV1Backend
from .remote_v2 import RemoteV2Backend
from .token_budget import TokenBudgetBackend


@attrs.frozen
class CompactionRequest:
    """What a compaction is asked to do."""

    trigger: runtime.CompactionTrigger
    """Why it runs."""
    injection: Injection
    """Where the initial context goes afterwards."""
    instructions: str | None = None
    """Extra text for the summarization prompt (``compact {instructions}``)."""
    model: str | None = None
    """The model to compact with (default: the turn's)."""


@attrs.frozen
class BackendResult:
    """A backend's new history, before the initial context is placed."""

    history: Sequence[runtime.ResponseItem]
    """The new history; a summary or compaction item is last (unless ``fresh_window``)."""
    message: str = ""
    """The summary text (local backend), recorded in the rollout's ``compacted`` line."""
    warn: bool = False
    """Whether to warn that repeated compactions make the model less accurate."""
    fresh_window: bool = False
    """The history already opens with the initial context of the current world state: it is
    installed as it is and becomes the reference context (token-budget backend)."""


class CompactionFailed(Exception):
    """A backend could not produce a new history; nothing was changed."""

    def __init__(self, message: str, code: runtime.ErrorCode) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class CompactionBackend(Protocol):
    """Computes a new, shorter history for a session."""

    name: Backend

    async def compact(self, ctx: TaskContext, request: CompactionRequest) -> BackendResult:
        """The new history. Raises :class:`CompactionFailed`."""
        ...


BACKENDS: dict[Backend, CompactionBackend] = {
    Backend.LOCAL: LocalBackend(),
    Backend.REMOTE_V1: RemoteV1Backend(),
    Backend.REMOTE_V2: RemoteV2Backend(),
    Backend.TOKEN_BUDGET: TokenBudgetBackend(),
}

ACCURACY_WARNING = (
    "This conversation has been compacted. Long sessions and repeated compactions make the "
    "model less accurate; start a new session when you can."
)


class CompactionOutcome(enum.Enum):
    """How :func:`run_compaction` ended, for the task that called it.

    The caller may go on with its work only after ``INSTALLED`` (:attr:`proceed`); in every
    other case the calling turn must end now: after ``FAILED`` it ends normally (the
    ``error`` is out), after a hook stop it ends with ``turn_aborted{hook_stopped}`` (already
    arranged through :meth:`~runtime.TaskContext.end_aborted`).
    """

    INSTALLED = "installed"
    """The new history is installed."""
    FAILED = "failed"
    """The backend failed and an ``error`` was reported; nothing changed."""
    STOPPED = "stopped"
    """A pre-compact hook stopped it; nothing changed and no compaction item was reported."""
    INSTALLED_THEN_STOPPED = "installed_then_stopped"
    """The new history is installed, then a post-compact hook stopped the turn."""

    @property
    def installed(self) -> bool:
        """Whether the new history is installed."""
        return self in {CompactionOutcome.INSTALLED, CompactionOutcome.INSTALLED_THEN_STOPPED}

    @property
    def proceed(self) -> bool:
        """Whether the calling turn may go on."""
        return self is CompactionOutcome.INSTALLED


def hook_trigger(trigger: runtime.CompactionTrigger) -> HookTrigger:
    """What hooks are told about a trigger: ``manual``, or ``auto`` for every automatic one."""
    return "manual" if trigger is runtime.CompactionTrigger.MANUAL else "auto"


async def run_compaction(ctx: TaskContext, request: CompactionRequest) -> CompactionOutcome:
    """Compact the session's history with the backend the configuration selects."""
    kind = select_backend(ctx.config, ctx.provider)
    backend = BACKENDS.get(kind)
    if backend is None:
        ctx.emit(
            runtime.ErrorEvent(
                f"compaction backend {kind.value!r} is not available", runtime.ErrorCode.INTERNAL
            )
        )
        return CompactionOutcome.FAILED
    trigger = hook_trigger(request.trigger)
    model = request.model or ctx.settings.model
    if await run_compact_hooks(ctx, "pre_compact", trigger=trigger, model=model) is not None:
        ctx.end_aborted(runtime.AbortReason.HOOK_STOPPED)
        return CompactionOutcome.STOPPED
    item_id = ctx.new_item_id("compaction")
    ctx.emit(runtime.ItemStarted(ctx.turn_id, runtime.ContextCompactionItem(item_id)))
    started = anyio.current_time()
    tokens_before = ctx.estimated_tokens()
    try:
        result = await backend.compact(ctx, request)
    except CompactionFailed as failure:
        ctx.emit(runtime.ErrorEvent(failure.message, failure.code))
        return CompactionOutcome.FAILED
    if result.fresh_window:
        history = list(result.history)
        clear_reference = False
    else:
        initial = (
            ctx.initial_context_items()
            if request.injection is Injection.BEFORE_LAST_USER_MESSAGE
            else []
        )
        history = place_initial_context(result.history, initial, request.injection)
        clear_reference = request.injection is Injection.DO_NOT_INJECT
    receipt = runtime.CompactionReceipt(
        trigger=request.trigger,
        backend=kind.value,
        tokens_before=tokens_before,
        tokens_after=runtime.compaction.estimate_tokens(history),
        duration_ms=round((anyio.current_time() - started) * 1000),
    )
    ctx.install_compaction(
        history, message=result.message, receipt=receipt, clear_reference=clear_reference
    )
    ctx.emit(runtime.ItemCompleted(ctx.turn_id, runtime.ContextCompactionItem(item_id, receipt)))
    ctx.emit(runtime.ContextCompacted())
    if result.warn:
        ctx.emit(runtime.WarningEvent(ACCURACY_WARNING))
    if await run_compact_hooks(ctx, "post_compact", trigger=trigger, model=model) is not None:
        ctx.end_aborted(runtime.AbortReason.HOOK_STOPPED)
        return CompactionOutcome.INSTALLED_THEN_STOPPED
    return CompactionOutcome.INSTALLED
