"""Compaction off the critical path: post-turn, background, and the automatic compaction point.

Every automatic compaction point of a regular turn (pre-turn, mid-turn, post-turn) goes through
:func:`tasks.compaction.auto.auto_compact`, which asks :func:`background_point` first. When the
session has a background compaction, the install rule of :func:`relay.lowlevel.still_current`
decides: a current, ready result is installed as ``compacted(snapshot) + fresh initial context
+ everything recorded since the snapshot`` (with the work-state record placed as after any
compaction); a stale or failed one is dropped (reported and recorded) and the compaction runs
now, as it would have without it; one still working is waited for only when the history no
longer fits the window (or, for ``features.async_compaction``, always: that result is meant for
the next turn).

A background compaction starts when a turn ends with usage at
``background_compact_threshold_percent`` of the auto-compaction limit (or, with
``features.async_compaction``, at ``model_async_compact_threshold_percent`` of the window).
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import attrs
import relay
from relay.compaction import background_due, installed_history, still_current
from relay.lowlevel import BackgroundJob, JobState, TaskContext, run_compact_hooks

from . import CompactionOutcome, choose_backend, hook_trigger, report_installed, report_over_window
from .base import BackendResult, CompactionBackend, CompactionRequest, Injection


@attrs.frozen
class BackgroundResult:
    """What a background job returns: the backend's name and its result."""

    backend: str
    """The backend's name, for the receipt."""
    result: BackendResult
    """The compacted snapshot."""


def post_turn_due(ctx: TaskContext) -> bool:
    """Whether usage reached ``model_post_turn_compact_threshold_percent`` of the window."""
    return background_due(
        ctx.config.model_post_turn_compact_threshold_percent,
        ctx.usage_tokens,
        ctx.model_context_window,
    )


def _async_due(ctx: TaskContext) -> bool:
    config = ctx.config
    return config.features.async_compaction and background_due(
        config.model_async_compact_threshold_percent, ctx.usage_tokens, ctx.model_context_window
    )


def install_waiting(ctx: TaskContext) -> bool:
    """Whether a background result meant for this turn waits to be installed before it starts,
    whatever the usage (async compaction)."""
    job = ctx.background
    return job is not None and job.waited_for


def start_background_compaction(ctx: TaskContext, backends: Sequence[CompactionBackend]) -> None:
    """Start the background compaction of a snapshot of the history, when it is due."""
    waited_for = _async_due(ctx)
    due = waited_for or background_due(
        ctx.config.background_compact_threshold_percent,
        ctx.usage_tokens,
        ctx.auto_compact_limit(),
    )
    if not due:
        return
    job = ctx.background
    if job is not None:
        if still_current(job.snapshot, ctx.history, ctx.window_id):
            return
        ctx.take_background()
        ctx.drop_background(job, "the history changed since its snapshot")
    backend = choose_backend(backends, ctx.config, ctx.provider)
    if backend is None:
        return
    request = CompactionRequest(relay.CompactionTrigger.PRE_TURN, Injection.DO_NOT_INJECT)

    async def work(background: TaskContext) -> BackgroundResult:
        result = await backend.compact(background, request)
        return BackgroundResult(backend.name, result)

    started = ctx.start_background(work)
    if started is not None:
        started.waited_for = waited_for
        ctx.emit(
            relay.BackgroundEvent(
                f"Compacting the conversation in the background ({backend.name}) from a "
                f"snapshot of {len(started.snapshot.items)} items."
            )
        )


async def background_point(
    ctx: TaskContext,
    request: CompactionRequest,
    backends: Sequence[CompactionBackend],
) -> CompactionOutcome | None:
    """The background half of an automatic compaction point: install the background result
    when the rule allows (``INSTALLED`` or a hook's outcome), defer while it is still working
    and the history fits the window (``DEFERRED``); None when the compaction must run now (no
    job, or its result was dropped)."""
    job = ctx.background
    if job is None:
        return None
    if still_current(job.snapshot, ctx.history, ctx.window_id):
        if job.state is JobState.RUNNING:
            window = ctx.model_context_window
            over = window is not None and ctx.usage_tokens > window
            if not (over or job.waited_for):
                return CompactionOutcome.DEFERRED
            await job.finished.wait()
        ctx.take_background()
        if job.state is JobState.READY and still_current(job.snapshot, ctx.history, ctx.window_id):
            return await install_background(ctx, request, job)
        reason = (
            f"it failed ({job.failure})"
            if job.state is JobState.FAILED
            else "the history changed since its snapshot"
        )
    else:
        ctx.take_background()
        reason = "the history changed since its snapshot"
    ctx.drop_background(job, reason)
    if request.trigger is relay.CompactionTrigger.PRE_TURN and not _over_limit(ctx):
        # Only an async result brought this point about; nothing else is due.
        return CompactionOutcome.DEFERRED
    return None


def _over_limit(ctx: TaskContext) -> bool:
    limit = ctx.auto_compact_limit()
    return limit is not None and ctx.usage_tokens >= limit


async def install_background(
    ctx: TaskContext, request: CompactionRequest, job: BackgroundJob
) -> CompactionOutcome | None:
    """Install a current background result, with hooks and events as for any compaction, and
    the work-state record placed as after any compaction; None when the history changed
    while the pre-compact hooks ran (the compaction then runs now)."""
    done = job.result
    assert isinstance(done, BackgroundResult)
    model = request.model or ctx.settings.model
    trigger = hook_trigger(request.trigger)
    if await run_compact_hooks(ctx, "pre_compact", trigger=trigger, model=model) is not None:
        ctx.drop_background(job, "a pre-compact hook stopped it")
        ctx.end_aborted(relay.AbortReason.HOOK_STOPPED)
        return CompactionOutcome.STOPPED
    if not still_current(job.snapshot, ctx.history, ctx.window_id):
        ctx.drop_background(job, "the history changed since its snapshot")
        return None
    item_id = ctx.new_item_id("compaction")
    ctx.emit(relay.ItemStarted(ctx.turn_id, relay.ContextCompactionItem(item_id)))
    tokens_before, counted_before = ctx.context_tokens()
    initial = ctx.initial_context_items()
    compacted = _compacted_part(done.result, initial)
    history = ctx.carry_work_state(installed_history(compacted, initial, job.snapshot, ctx.history))
    receipt = relay.CompactionReceipt(
        trigger=request.trigger,
        backend=done.backend,
        tokens_before=tokens_before,
        tokens_after=ctx.estimate_context(history),
        duration_ms=job.duration_ms,
        cut=done.result.cut,
        counted_before=counted_before,
        background=True,
        snapshot_age_ms=job.age_ms(anyio.current_time()),
    )
    window = ctx.context_window_of(model)
    if window is not None and receipt.tokens_after >= window:
        report_over_window(
            ctx,
            item_id,
            history,
            message=done.result.message,
            receipt=receipt,
            clear_reference=False,
            needed=receipt.tokens_after,
            window=window,
        )
        return CompactionOutcome.FAILED
    ctx.install_compaction(
        history, message=done.result.message, receipt=receipt, clear_reference=False
    )
    return await report_installed(ctx, item_id, receipt, warn=done.result.warn, model=model)


def _compacted_part(
    result: BackendResult, initial: Sequence[relay.ResponseItem]
) -> list[relay.ResponseItem]:
    """The part of a result that stands for the snapshot: all of it, or for a fresh window
    what it carried besides the initial context (the fresh one is placed by the install)."""
    if not result.fresh_window:
        return list(result.history)
    return [item for item in result.history if item not in initial and _is_developer(item)]


def _is_developer(item: relay.ResponseItem) -> bool:
    return isinstance(item, relay.Message) and item.role == "developer"
