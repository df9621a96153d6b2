"""Compaction: one small backend interface, one module per backend, one shared flow.

:func:`run_compaction` is what the compaction task and auto-compaction call. It picks the first
backend of its sequence that applies, runs the pre-compact hooks, reports the compaction item,
lets the backend compute the new history, places the initial context, installs the result,
reports it and runs the post-compact hooks. A backend fails by raising
:class:`CompactionFailed` or letting a :class:`relay.ModelError` through (translated here,
once); until it returns, nothing about the session has changed (docs/compaction.md).

Adding a backend is one new module and one line in :data:`BACKENDS`; a backend of another
package goes into the sequence a session's tasks are built with (:func:`relay.tasks.task_kinds`).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import anyio
import relay
from relay.lowlevel import HookTrigger, TaskContext, run_compact_hooks

from .base import (
    Backend,
    BackendResult,
    CompactionBackend,
    CompactionFailed,
    CompactionRequest,
    Injection,
    place_initial_context,
    select_backend,
)
from .local import LocalBackend
from .remote_v1 import RemoteV1Backend
from .remote_v2 import RemoteV2Backend
from .token_budget import TokenBudgetBackend

#: relay's backends, in the order they are tried; the built-in policy picks exactly one.
BACKENDS: tuple[CompactionBackend, ...] = (
    TokenBudgetBackend(),
    RemoteV2Backend(),
    RemoteV1Backend(),
    LocalBackend(),
)

CUT_SUMMARY_WARNING = (
    "The summary was cut off at the answer limit: the compacted history holds what arrived and "
    "may miss the end of the work. Raise model_max_output_tokens, or compact again."
)

ACCURACY_WARNING = (
    "This conversation has been compacted. Long sessions and repeated compactions make the "
    "model less accurate; start a new session when you can."
)


class CompactionOutcome(enum.Enum):
    """How :func:`run_compaction` ended, for the task that called it.

    The caller may go on with its work only after ``INSTALLED`` (:attr:`proceed`); in every
    other case the calling turn must end now: after ``FAILED`` it ends normally (the
    ``error`` is out), after a hook stop it ends with ``turn_aborted{hook_stopped}`` (already
    arranged through :meth:`~relay.lowlevel.TaskContext.end_aborted`).
    """

    INSTALLED = "installed"
    """The new history is installed."""
    FAILED = "failed"
    """The backend failed and an ``error`` was reported; nothing changed."""
    STOPPED = "stopped"
    """A pre-compact hook stopped it; nothing changed and no compaction item was reported."""
    INSTALLED_THEN_STOPPED = "installed_then_stopped"
    """The new history is installed, then a post-compact hook stopped the turn."""
    DEFERRED = "deferred"
    """Nothing ran: a background compaction is still working and the history still fits the
    window, so the turn goes on and its result is installed at a later point."""

    @property
    def proceed(self) -> bool:
        """Whether the calling turn may go on."""
        return self in (CompactionOutcome.INSTALLED, CompactionOutcome.DEFERRED)


def still_over_window(tokens: int, window: int, *, installed: bool) -> str:
    """The error of a compaction that leaves the context over the window."""
    done = (
        "It was compacted as far as it goes"
        if installed
        else "Nothing was changed: compacting would not make it smaller"
    )
    return (
        f"The compacted conversation, about {tokens} tokens with the instructions, tools and "
        f"initial context, still does not fit the model's context window ({window} tokens). "
        f"{done}. Use a larger window (a model with one, or a server started with one), "
        "shorten the instructions or project document, or start a new session."
    )


def hook_trigger(trigger: relay.CompactionTrigger) -> HookTrigger:
    """What hooks are told about a trigger: ``manual``, or ``auto`` for every automatic one."""
    return "manual" if trigger is relay.CompactionTrigger.MANUAL else "auto"


def choose_backend(
    backends: Sequence[CompactionBackend], config: relay.Config, provider: relay.ProviderConfig
) -> CompactionBackend | None:
    """The first of ``backends`` that applies, or None."""
    return next((backend for backend in backends if backend.applies(config, provider)), None)


async def run_compaction(
    ctx: TaskContext,
    request: CompactionRequest,
    backends: Sequence[CompactionBackend] = BACKENDS,
) -> CompactionOutcome:
    """Compact the session's history with the first of ``backends`` that applies."""
    backend = choose_backend(backends, ctx.config, ctx.provider)
    if backend is None:
        ctx.emit(
            relay.ErrorEvent(
                "no compaction backend applies to this configuration", relay.ErrorCode.INTERNAL
            )
        )
        return CompactionOutcome.FAILED
    trigger = hook_trigger(request.trigger)
    model = request.model or ctx.settings.model
    if await run_compact_hooks(ctx, "pre_compact", trigger=trigger, model=model) is not None:
        ctx.end_aborted(relay.AbortReason.HOOK_STOPPED)
        return CompactionOutcome.STOPPED
    item_id = ctx.new_item_id("compaction")
    ctx.emit(relay.ItemStarted(ctx.turn_id, relay.ContextCompactionItem(item_id)))
    started = anyio.current_time()
    tokens_before, counted_before = ctx.context_tokens()
    try:
        result = await backend.compact(ctx, request)
    except relay.ModelError as error:
        ctx.emit(relay.ErrorEvent(f"{backend.error_prefix}{error.message}", error.code))
        return CompactionOutcome.FAILED
    except CompactionFailed as failure:
        ctx.emit(relay.ErrorEvent(failure.message, failure.code))
        return CompactionOutcome.FAILED
    if result.in_place:
        history = list(result.history)
        clear_reference = False
    elif result.fresh_window:
        history = ctx.carry_work_state(result.history)
        clear_reference = False
    else:
        initial = (
            ctx.initial_context_items()
            if request.injection is Injection.BEFORE_LAST_USER_MESSAGE
            else []
        )
        history = ctx.carry_work_state(
            place_initial_context(result.history, initial, request.injection)
        )
        clear_reference = request.injection is Injection.DO_NOT_INJECT
    receipt = relay.CompactionReceipt(
        trigger=request.trigger,
        backend=backend.name,
        tokens_before=tokens_before,
        tokens_after=ctx.estimate_context(history),
        duration_ms=round((anyio.current_time() - started) * 1000),
        cut=result.cut,
        counted_before=counted_before,
    )
    window = ctx.context_window_of(model)
    # The initial context is recorded again before the next request when it was not kept.
    needed = receipt.tokens_after + (
        ctx.estimate_context(ctx.initial_context_items()) - ctx.estimate_context([])
        if clear_reference
        else 0
    )
    if window is not None and needed >= window:
        report_over_window(
            ctx,
            item_id,
            history,
            message=result.message,
            receipt=receipt,
            clear_reference=clear_reference,
            needed=needed,
            window=window,
        )
        return CompactionOutcome.FAILED
    ctx.install_compaction(
        history,
        message=result.message,
        receipt=receipt,
        clear_reference=clear_reference,
        masked_outputs=result.masked_outputs,
    )
    return await report_installed(ctx, item_id, receipt, warn=result.warn, model=model)


def report_over_window(
    ctx: TaskContext,
    item_id: str,
    history: Sequence[relay.ResponseItem],
    *,
    message: str,
    receipt: relay.CompactionReceipt,
    clear_reference: bool,
    needed: int,
    window: int,
) -> None:
    """A compaction that leaves the context at ``needed`` tokens, at or over ``window``: not a
    success. A smaller history is still installed, as far as the compaction got; a larger one
    is not."""
    shrank = receipt.tokens_after < receipt.tokens_before
    if shrank:
        ctx.install_compaction(
            history, message=message, receipt=receipt, clear_reference=clear_reference
        )
        ctx.emit(relay.ItemCompleted(ctx.turn_id, relay.ContextCompactionItem(item_id, receipt)))
    ctx.emit(
        relay.ErrorEvent(
            still_over_window(needed, window, installed=shrank),
            relay.ErrorCode.CONTEXT_WINDOW_EXCEEDED,
        )
    )


async def report_installed(
    ctx: TaskContext, item_id: str, receipt: relay.CompactionReceipt, *, warn: bool, model: str
) -> CompactionOutcome:
    """After an install: complete the compaction item, report it, run post-compact hooks."""
    ctx.emit(relay.ItemCompleted(ctx.turn_id, relay.ContextCompactionItem(item_id, receipt)))
    ctx.emit(relay.ContextCompacted())
    if receipt.cut:
        ctx.emit(relay.WarningEvent(CUT_SUMMARY_WARNING))
    if warn:
        ctx.emit(relay.WarningEvent(ACCURACY_WARNING))
    trigger = hook_trigger(receipt.trigger)
    if await run_compact_hooks(ctx, "post_compact", trigger=trigger, model=model) is not None:
        ctx.end_aborted(relay.AbortReason.HOOK_STOPPED)
        return CompactionOutcome.INSTALLED_THEN_STOPPED
    return CompactionOutcome.INSTALLED


__all__ = [
    "ACCURACY_WARNING",
    "CUT_SUMMARY_WARNING",
    "BACKENDS",
    "Backend",
    "BackendResult",
    "CompactionBackend",
    "CompactionFailed",
    "CompactionOutcome",
    "CompactionRequest",
    "Injection",
    "choose_backend",
    "hook_trigger",
    "place_initial_context",
    "report_installed",
    "report_over_window",
    "run_compaction",
    "select_backend",
]
