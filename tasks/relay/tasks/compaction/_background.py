"""Compaction off the critical path: post-turn, background, and the automatic compaction point.

Every automatic compaction point of a turn (pre-turn, mid-turn, post-turn) asks
:func:`background_point` first. When the session has a background compaction, the install rule
of :func:`still_current` decides: a current, ready result is installed as
``compacted(snapshot) + fresh initial context + everything recorded since the snapshot`` (with
the work-state record placed as after any compaction); a stale or failed one is dropped
(reported and recorded) and the compaction runs now, as it would have without it; one still
working is waited for only when the history no longer fits the window (or, for
``features.async_compaction``, always: that result is meant for the next turn).

A background compaction starts when a turn ends with usage at
``background_compact_threshold_percent`` of the auto-compaction limit (or, with
``features.async_compaction``, at ``model_async_compact_threshold_percent`` of the window). Its
receipt records that point, ``post_turn``, as its trigger, and the point that installs it as
``installed_at``.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import attrs

import relay
from relay.lowlevel import (
    BackendContext,
    BackendResult,
    BackgroundJob,
    CompactionBackend,
    CompactionContext,
    CompactionOutcome,
    CompactionRequest,
    JobState,
    Placement,
    Snapshot,
)

from ._flow import context_tokens, hook_trigger, install_result, summary_check, with_record
from ._policy import async_due, background_due, limit_reached


def still_current(
    snapshot: Snapshot, live: Sequence[relay.ResponseItem], live_window_id: str
) -> bool:
    """The install rule: the live history is in the snapshot's window and begins with it."""
    size = len(snapshot.items)
    return (
        live_window_id == snapshot.window_id
        and len(live) >= size
        and tuple(live[:size]) == snapshot.items
    )


def installed_history(
    compacted: Sequence[relay.ResponseItem],
    initial: Sequence[relay.ResponseItem],
    snapshot: Snapshot,
    live: Sequence[relay.ResponseItem],
) -> list[relay.ResponseItem]:
    """``compacted + initial + everything recorded since the snapshot``.

    Only meaningful when :func:`still_current` holds.
    """
    return [*compacted, *initial, *live[len(snapshot.items) :]]


@attrs.frozen
class BackgroundResult:
    """What a background job returns: the backend's name, where it started and its result."""

    backend: str
    """The backend's name, for the receipt."""
    result: BackendResult
    """The compacted snapshot."""
    trigger: relay.CompactionTrigger = relay.CompactionTrigger.POST_TURN
    """The point it started at, which the receipt records as its trigger."""


def install_waiting(job: BackgroundJob | None) -> bool:
    """Whether a background result meant for this turn waits to be installed before it starts,
    whatever the usage (async compaction)."""
    return job is not None and job.waited_for


def start_background(ctx: CompactionContext, backend: CompactionBackend | None) -> None:
    """Start the background compaction of a snapshot of the history with ``backend``, when it
    is due."""
    view = ctx.backend.view
    waited_for = async_due(view)
    if not (waited_for or background_due(view)):
        return
    slot = ctx.background
    job = slot.job
    if job is not None:
        if still_current(job.snapshot, view.history, view.window_id):
            return
        slot.take()
        slot.drop(job, "the history changed since its snapshot")
    if backend is None:
        return
    request = CompactionRequest(relay.CompactionTrigger.POST_TURN)

    async def work(background: BackendContext) -> BackgroundResult:
        result = await backend.compact(background, request)
        return BackgroundResult(backend.name, result, request.trigger)

    started = slot.start(work)
    if started is not None:
        started.waited_for = waited_for
        ctx.backend.emit(
            relay.BackgroundEvent(
                f"Compacting the conversation in the background ({backend.name}) from a "
                f"snapshot of {len(started.snapshot.items)} items."
            )
        )


async def background_point(
    ctx: CompactionContext, request: CompactionRequest
) -> CompactionOutcome | None:
    """The background half of an automatic compaction point: install the background result
    when the rule allows (``installed`` or a hook's outcome), defer while it is still working
    and the history fits the window (``deferred``); None when the compaction must run now (no
    job, or its result was dropped)."""
    slot = ctx.background
    job = slot.job
    if job is None:
        return None
    view = ctx.backend.view
    if still_current(job.snapshot, view.history, view.window_id):
        if job.state is JobState.RUNNING:
            if not (view.budget.over_window or job.waited_for):
                return CompactionOutcome.DEFERRED
            await job.finished.wait()
        slot.take()
        view = ctx.backend.view
        current = still_current(job.snapshot, view.history, view.window_id)
        if job.state is JobState.READY and current:
            return await install_background(ctx, request, job)
        reason = (
            f"it failed ({job.failure})"
            if job.state is JobState.FAILED
            else "the history changed since its snapshot"
        )
    else:
        slot.take()
        reason = "the history changed since its snapshot"
    slot.drop(job, reason)
    if request.trigger is relay.CompactionTrigger.PRE_TURN and not limit_reached(ctx.backend.view):
        # Only an async result brought this point about; nothing else is due.
        return CompactionOutcome.DEFERRED
    return None


async def install_background(
    ctx: CompactionContext, request: CompactionRequest, job: BackgroundJob
) -> CompactionOutcome | None:
    """Install a current background result, with hooks and events as for any compaction, and
    the work-state record placed as after any compaction; None when the history changed
    while the pre-compact hooks ran (the compaction then runs now)."""
    done = job.result
    assert isinstance(done, BackgroundResult)
    support, slot = ctx.backend, ctx.background
    model = request.model or support.view.settings.model
    trigger = hook_trigger(request.trigger)
    if await ctx.run_hooks("pre_compact", trigger=trigger, model=model) is not None:
        slot.drop(job, "a pre-compact hook stopped it")
        return CompactionOutcome.STOPPED
    view = support.view
    if not still_current(job.snapshot, view.history, view.window_id):
        slot.drop(job, "the history changed since its snapshot")
        return None
    item_id = ctx.new_item_id("compaction")
    support.emit(relay.ItemStarted(view.turn_id, relay.ContextCompactionItem(item_id)))
    tokens_before, counted_before = context_tokens(support)
    initial = support.initial_context()
    compacted = _compacted_part(done.result, initial)
    refused, retried = summary_check(done.result)
    history = with_record(
        support,
        installed_history(compacted, initial, job.snapshot, support.view.history),
        refused=refused is not None,
    )
    receipt = relay.CompactionReceipt(
        trigger=done.trigger,
        backend=done.backend,
        tokens_before=tokens_before,
        tokens_after=support.estimate(history),
        duration_ms=job.duration_ms,
        cut=done.result.cut,
        model=done.result.model,
        counted_before=counted_before,
        background=True,
        snapshot_age_ms=job.age_ms(anyio.current_time()),
        installed_at=request.trigger,
        summary_refused=refused,
        summary_retried=retried,
    )
    return await install_result(
        ctx, item_id, history, done.result, receipt, clear_reference=False, model=model
    )


def _compacted_part(
    result: BackendResult, initial: Sequence[relay.ResponseItem]
) -> list[relay.ResponseItem]:
    """The part of a result that stands for the snapshot: all of it, or for a fresh window
    what it carried besides the initial context (the fresh one is placed by the install)."""
    if result.placement is not Placement.FRESH_WINDOW:
        return list(result.history)
    return [item for item in result.history if item not in initial and _is_developer(item)]


def _is_developer(item: relay.ResponseItem) -> bool:
    return isinstance(item, relay.Message) and item.role == "developer"


__all__ = [
    "BackgroundResult",
    "installed_history",
    "still_current",
    "background_point",
    "install_background",
    "install_waiting",
    "start_background",
]
