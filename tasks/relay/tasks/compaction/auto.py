"""Automatic compaction: masking first, a summary when that is not enough, and a loop guard.

A turn runs :func:`auto_compact` wherever usage reached the limit (pre-turn, mid-turn, model
downshift). With ``features.tool_output_masking`` on, old tool outputs are masked first; when
that leaves usage under the limit by ``mask_margin_percent``, the summary is skipped. An
automatic compaction that leaves usage at or above the limit made no progress; the turn then
escalates (:func:`next_step`): masking, a fresh window (the token-budget compaction, which
carries the work-state record), and last ``error{compaction_loop}``. A turn never runs more than
``max_auto_compactions_per_turn`` compactions of any kind.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import attrs
import relay
from relay.compaction import mask_old_outputs, masking_suffices
from relay.lowlevel import TaskContext

from . import CompactionOutcome, run_compaction
from .background import background_point, post_turn_due, start_background_compaction
from .base import CompactionBackend, CompactionRequest, Injection
from .masking import MaskingBackend
from .token_budget import FreshWindowBackend


class Step(enum.Enum):
    """One rung of the escalation."""

    SUMMARY = "summary compaction"
    """The backend the configuration selects (after masking, when that is on)."""
    MASK = "masking"
    """Mask old tool outputs."""
    FRESH_WINDOW = "fresh window"
    """The token-budget compaction, whatever the configuration selects."""
    GIVE_UP = "give up"
    """End the turn with ``error{compaction_loop}``."""


def next_step(*, compactions: int, cap: int, stalled: Sequence[Step], masking: bool) -> Step:
    """The next thing to try when usage reached the limit.

    Args:
        compactions: automatic compactions the turn has run so far.
        cap: how many it may run (``max_auto_compactions_per_turn``).
        stalled: the steps the turn tried that left usage at or above the limit, in order.
        masking: whether ``features.tool_output_masking`` is on.
    """
    if compactions >= cap:
        return Step.GIVE_UP
    if not stalled:
        return Step.SUMMARY
    ladder = [Step.MASK] if masking else []
    ladder.append(Step.FRESH_WINDOW)
    return next((step for step in ladder if step not in stalled), Step.GIVE_UP)


@attrs.define
class TurnCompactions:
    """What one turn's automatic compactions did so far."""

    count: int = 0
    """Compactions installed (masking included)."""
    stalled: list[Step] = attrs.field(factory=list)
    """Steps that made no progress, in order."""
    tried: list[str] = attrs.field(factory=list)
    """What each attempt did, for the ``compaction_loop`` message."""
    deferred: bool = False
    """The last point was deferred to a background compaction still working."""


def loop_message(ledger: TurnCompactions, limit: int, cap: int) -> str:
    """The message of ``error{compaction_loop}``: what was tried and why the turn ends."""
    if ledger.count >= cap:
        why = (
            f"this turn already ran {ledger.count} automatic compactions, the most one turn may "
            f"run (max_auto_compactions_per_turn = {cap})"
        )
    else:
        why = f"nothing left to try brings the context under the limit of {limit} tokens"
    tried = "; ".join(ledger.tried) if ledger.tried else "nothing"
    return (
        f"The turn ends: automatic compaction is not making progress, {why}. Tried: {tried}. "
        "Start a new session, or compact with instructions that keep less."
    )


async def auto_compact(
    ctx: TaskContext,
    request: CompactionRequest,
    backends: Sequence[CompactionBackend],
    ledger: TurnCompactions,
) -> bool:
    """Bring usage under the limit; False when the turn must end (an ``error`` is out, or a
    hook stopped it).

    At a pre-turn, mid-turn or post-turn point, a background result is installed first when
    the install rule allows; it counts as one of the turn's automatic compactions. While it is
    still working and the history fits, the point is deferred (True, nothing installed:
    :attr:`TurnCompactions.deferred`).
    """
    limit = ctx.auto_compact_limit()
    config = ctx.config
    cap = config.max_auto_compactions_per_turn
    ledger.deferred = False
    # A downshift compacts for the previous model, which a background result was not made for;
    # the result goes stale and is dropped where it is next looked at.
    if (
        ctx.background is not None
        and request.trigger is not relay.CompactionTrigger.MODEL_DOWNSHIFT
        and ledger.count < cap
    ):
        before = ctx.usage_tokens
        outcome = await background_point(ctx, request, backends)
        if outcome is CompactionOutcome.DEFERRED:
            ledger.deferred = True
            return True
        if outcome is not None:
            if outcome in {CompactionOutcome.INSTALLED, CompactionOutcome.INSTALLED_THEN_STOPPED}:
                ledger.count += 1
                ledger.tried.append(f"background result: {before} → {ctx.usage_tokens} tokens")
            if not outcome.proceed:
                return False
            if limit is None or ctx.usage_tokens < limit:
                return True
            ledger.stalled.append(Step.SUMMARY)
    masking = config.features.tool_output_masking
    while True:
        step = next_step(compactions=ledger.count, cap=cap, stalled=ledger.stalled, masking=masking)
        if step is Step.GIVE_UP or limit is None:
            if limit is None:
                return True
            ctx.emit(
                relay.ErrorEvent(loop_message(ledger, limit, cap), relay.ErrorCode.COMPACTION_LOOP)
            )
            return False
        if step is Step.SUMMARY and masking and _maskable(ctx):
            outcome = await _attempt(ctx, request, (MaskingBackend(),), Step.MASK, ledger)
            if not outcome.proceed:
                return False
            if masking_suffices(ctx.usage_tokens, limit, config.mask_margin_percent):
                return True
            if ledger.count >= cap:
                continue
        if step is Step.MASK and not _maskable(ctx):
            ledger.stalled.append(step)
            ledger.tried.append("masking: no tool output old enough to mask")
            continue
        chosen: Sequence[CompactionBackend] = {
            Step.SUMMARY: backends,
            Step.MASK: (MaskingBackend(),),
            Step.FRESH_WINDOW: (FreshWindowBackend(),),
        }[step]
        outcome = await _attempt(ctx, request, chosen, step, ledger)
        if not outcome.proceed:
            return False
        if ctx.usage_tokens < limit:
            return True
        ledger.stalled.append(step)


async def after_final_answer(
    ctx: TaskContext, backends: Sequence[CompactionBackend], ledger: TurnCompactions
) -> bool:
    """A regular turn answered: post-turn compaction when due, then background compaction
    when due. False when the post-turn compaction failed or a hook stopped the turn."""
    if post_turn_due(ctx):
        request = CompactionRequest(relay.CompactionTrigger.POST_TURN, Injection.DO_NOT_INJECT)
        if not await auto_compact(ctx, request, backends, ledger):
            return False
    start_background_compaction(ctx, backends)
    return True


async def requested_compact(
    ctx: TaskContext,
    request: CompactionRequest,
    backends: Sequence[CompactionBackend],
    ledger: TurnCompactions,
) -> bool:
    """A fresh window the model asked for (``new_context_window``); False when the turn must
    end. It counts towards ``max_auto_compactions_per_turn``: a model that asks again and
    again is a compaction loop too."""
    cap = ctx.config.max_auto_compactions_per_turn
    if ledger.count >= cap:
        limit = ctx.auto_compact_limit()
        ctx.emit(
            relay.ErrorEvent(loop_message(ledger, limit or 0, cap), relay.ErrorCode.COMPACTION_LOOP)
        )
        return False
    before = ctx.usage_tokens
    outcome = await run_compaction(ctx, request, backends)
    if outcome in {CompactionOutcome.INSTALLED, CompactionOutcome.INSTALLED_THEN_STOPPED}:
        ledger.count += 1
        ledger.tried.append(f"fresh window asked for: {before} → {ctx.usage_tokens} tokens")
    return outcome.proceed


async def mask_when_due(ctx: TaskContext) -> bool:
    """Mask old tool outputs when usage reached ``mask_trigger_tokens`` (below the limit);
    False when the turn must end (a hook stopped it).

    Such a masking is not an automatic compaction at the limit: it does not count towards
    ``max_auto_compactions_per_turn``.
    """
    config = ctx.config
    trigger = config.mask_trigger_tokens
    if (
        not config.features.tool_output_masking
        or trigger is None
        or ctx.usage_tokens < trigger
        or not _maskable(ctx)
    ):
        return True
    request = CompactionRequest(
        relay.CompactionTrigger.MID_TURN, Injection.BEFORE_LAST_USER_MESSAGE
    )
    return (await run_compaction(ctx, request, (MaskingBackend(),))).proceed


async def compact_now(
    ctx: TaskContext, request: CompactionRequest, backends: Sequence[CompactionBackend]
) -> CompactionOutcome:
    """A requested compaction: old tool outputs masked first (when masking is on), then the
    backend the configuration selects."""
    if ctx.config.features.tool_output_masking and _maskable(ctx):
        outcome = await run_compaction(ctx, request, (MaskingBackend(),))
        if not outcome.proceed:
            return outcome
    return await run_compaction(ctx, request, backends)


def _maskable(ctx: TaskContext) -> bool:
    return bool(mask_old_outputs(ctx.history, ctx.config.mask_keep_recent_tokens)[1])


async def _attempt(
    ctx: TaskContext,
    request: CompactionRequest,
    backends: Sequence[CompactionBackend],
    step: Step,
    ledger: TurnCompactions,
) -> CompactionOutcome:
    before = ctx.usage_tokens
    outcome = await run_compaction(ctx, request, backends)
    if outcome in {CompactionOutcome.INSTALLED, CompactionOutcome.INSTALLED_THEN_STOPPED}:
        ledger.count += 1
        ledger.tried.append(f"{step.value}: {before} → {ctx.usage_tokens} tokens")
    return outcome


__all__ = [
    "Step",
    "TurnCompactions",
    "after_final_answer",
    "auto_compact",
    "compact_now",
    "loop_message",
    "mask_when_due",
    "next_step",
    "requested_compact",
]
