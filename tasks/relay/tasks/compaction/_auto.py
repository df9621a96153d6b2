"""What a task does at its compaction points: masking first, a summary when that is not enough,
and a loop guard (docs/compaction.md).

A :class:`Compactor` serves one task. At the pre-turn, mid-turn and post-turn points it
compacts only when something is due; a ``compact`` op and a model that asks for a fresh window
compact now. With ``features.tool_output_masking`` on, old tool outputs are masked first; when
that leaves usage under the limit by ``mask_margin_percent``, the summary is skipped. An
automatic compaction that leaves usage at or above the limit made no progress; the turn then
escalates (:func:`next_step`): masking, a fresh window (the token-budget compaction, which
carries the work-state record), and last ``error{compaction_loop}``. A turn never runs more than
``max_auto_compactions_per_turn`` automatic compactions of any kind.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence

import attrs

import relay
from relay.lowlevel import (
    CompactionBackend,
    CompactionContext,
    CompactionOutcome,
    CompactionRequest,
    Injection,
)

from ._background import background_point, install_waiting, start_background
from ._flow import run_compaction
from ._history import masking_suffices
from ._local import LocalBackend
from ._masking import MaskingBackend
from ._policy import (
    Backend,
    answered_since_compaction,
    downshift_due,
    fits_window,
    limit_reached,
    mask_due,
    maskable,
    post_turn_due,
    select_backend,
)
from ._remote_v1 import RemoteV1Backend
from ._remote_v2 import RemoteV2Backend
from ._token_budget import TokenBudgetBackend

#: relay's backends, by the name :func:`~relay.tasks.compaction.select_backend` gives.
BACKENDS: Mapping[str, CompactionBackend] = {
    Backend.TOKEN_BUDGET: TokenBudgetBackend(),
    Backend.REMOTE_V2: RemoteV2Backend(),
    Backend.REMOTE_V1: RemoteV1Backend(),
    Backend.LOCAL: LocalBackend(),
}


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


@attrs.define
class Compactor:
    """relay's compaction policy for one task (``open_session(compactor=...)`` takes a maker of
    such objects; ``Compactor`` itself is one)."""

    backends: Mapping[str, CompactionBackend] = BACKENDS
    """The backends, by name."""
    select: Callable[[relay.Config, relay.ProviderConfig], str] = select_backend
    """Which backend a configuration compacts with: the one decision of the policy."""
    ledger: TurnCompactions = attrs.field(factory=TurnCompactions)
    """What the task's automatic compactions did so far."""

    def backend(self, ctx: CompactionContext) -> CompactionBackend | None:
        """The backend the session's configuration selects, if this compactor has it."""
        view = ctx.backend.view
        return self.backends.get(self.select(view.config, view.provider))

    async def compact(
        self, ctx: CompactionContext, request: CompactionRequest
    ) -> CompactionOutcome:
        """What ``request.trigger`` calls for (see the module's documentation)."""
        match request.trigger:
            case relay.CompactionTrigger.MANUAL:
                return await self._now(ctx, request)
            case relay.CompactionTrigger.PRE_TURN:
                return await self._before_turn(ctx)
            case relay.CompactionTrigger.MID_TURN:
                if limit_reached(ctx.backend.view):
                    return await self._auto(ctx, request)
                return await _mask_when_due(ctx)
            case relay.CompactionTrigger.POST_TURN:
                return await self._after_turn(ctx)
            case relay.CompactionTrigger.MODEL_REQUESTED:
                return await self._requested(ctx, request)
            case _:
                return await self._auto(ctx, request)

    async def run_selected(
        self, ctx: CompactionContext, request: CompactionRequest
    ) -> CompactionOutcome:
        """Compact now with the backend the configuration selects."""
        backend = self.backend(ctx)
        if backend is None:
            ctx.backend.emit(
                relay.ErrorEvent(
                    "no compaction backend applies to this configuration",
                    relay.ErrorCode.INTERNAL,
                )
            )
            return CompactionOutcome.FAILED
        return await run_compaction(ctx, request, backend)

    async def _now(self, ctx: CompactionContext, request: CompactionRequest) -> CompactionOutcome:
        """A requested compaction: old tool outputs masked first (when masking is on), then
        the backend the configuration selects."""
        view = ctx.backend.view
        if view.config.features.tool_output_masking and maskable(view):
            outcome = await run_compaction(ctx, request, MaskingBackend())
            if not outcome.proceed:
                return outcome
        return await self.run_selected(ctx, request)

    async def _before_turn(self, ctx: CompactionContext) -> CompactionOutcome:
        """Pre-turn and model-downshift compaction, when due."""
        view = ctx.backend.view
        if downshift_due(view):
            trigger = relay.CompactionTrigger.MODEL_DOWNSHIFT
            return await self._auto(ctx, CompactionRequest(trigger, model=view.last_turn_model))
        if limit_reached(view) or install_waiting(ctx.background.job):
            return await self._auto(ctx, CompactionRequest(relay.CompactionTrigger.PRE_TURN))
        return CompactionOutcome.NOT_DUE

    async def _after_turn(self, ctx: CompactionContext) -> CompactionOutcome:
        """A turn answered: post-turn compaction when due, then background compaction when
        due."""
        outcome = CompactionOutcome.NOT_DUE
        if post_turn_due(ctx.backend.view):
            outcome = await self._auto(ctx, CompactionRequest(relay.CompactionTrigger.POST_TURN))
            if not outcome.proceed:
                return outcome
        start_background(ctx, self.backend(ctx))
        return outcome

    async def _requested(
        self, ctx: CompactionContext, request: CompactionRequest
    ) -> CompactionOutcome:
        """A fresh window the model asked for (``new_context_window``). It counts towards
        ``max_auto_compactions_per_turn``: a model that asks again and again is a compaction
        loop too."""
        ledger = self.ledger
        view = ctx.backend.view
        cap = view.config.max_auto_compactions_per_turn
        if ledger.count >= cap:
            message = loop_message(ledger, view.budget.limit or 0, cap)
            ctx.backend.emit(relay.ErrorEvent(message, relay.ErrorCode.COMPACTION_LOOP))
            return CompactionOutcome.FAILED
        before = view.budget.usage
        outcome = await self.run_selected(ctx, request)
        if outcome.installed:
            ledger.count += 1
            after = ctx.backend.view.budget.usage
            ledger.tried.append(f"fresh window asked for: {before} → {after} tokens")
        return outcome

    async def _auto(self, ctx: CompactionContext, request: CompactionRequest) -> CompactionOutcome:
        """Bring usage under the limit; an outcome that does not proceed when the turn must
        end (an ``error`` is out, or a hook stopped it).

        At a pre-turn, mid-turn or post-turn point, a background result is installed first
        when the install rule allows; it counts as one of the turn's automatic compactions.
        While it is still working and the history fits, the point is ``deferred``.
        """
        view = ctx.backend.view
        limit = view.budget.limit
        config = view.config
        cap = config.max_auto_compactions_per_turn
        ledger = self.ledger
        done = CompactionOutcome.NOT_DUE
        if limit is not None and not answered_since_compaction(view):
            # The last compaction left the context at the limit and no model has read it
            # since: the model is asked first, when the context fits its window at all.
            return self._unanswered(ctx, done)
        # A downshift compacts for the previous model, which a background result was not made
        # for; the result goes stale and is dropped where it is next looked at.
        if (
            ctx.background.job is not None
            and request.trigger is not relay.CompactionTrigger.MODEL_DOWNSHIFT
            and ledger.count < cap
        ):
            before = view.budget.usage
            outcome = await background_point(ctx, request)
            if outcome is CompactionOutcome.DEFERRED:
                return outcome
            if outcome is not None:
                if outcome.installed:
                    ledger.count += 1
                    after = ctx.backend.view.budget.usage
                    ledger.tried.append(f"background result: {before} → {after} tokens")
                if not outcome.proceed or not limit_reached(ctx.backend.view):
                    return outcome
                ledger.stalled.append(Step.SUMMARY)
                done = CompactionOutcome.INSTALLED
        masking = config.features.tool_output_masking
        while True:
            step = next_step(
                compactions=ledger.count, cap=cap, stalled=ledger.stalled, masking=masking
            )
            if limit is None:
                return done
            if step is Step.GIVE_UP:
                message = loop_message(ledger, limit, cap)
                ctx.backend.emit(relay.ErrorEvent(message, relay.ErrorCode.COMPACTION_LOOP))
                return CompactionOutcome.FAILED
            if step is Step.SUMMARY and masking and maskable(ctx.backend.view):
                outcome = await self._attempt(ctx, request, MaskingBackend(), Step.MASK)
                if not outcome.proceed:
                    return outcome
                done = CompactionOutcome.INSTALLED
                usage = ctx.backend.view.budget.usage
                if masking_suffices(usage, limit, config.mask_margin_percent):
                    return done
                if ledger.count >= cap:
                    continue
            if step is Step.MASK and not maskable(ctx.backend.view):
                ledger.stalled.append(step)
                ledger.tried.append("masking: no tool output old enough to mask")
                continue
            backend: CompactionBackend | None
            match step:
                case Step.SUMMARY:
                    backend = self.backend(ctx)
                case Step.MASK:
                    backend = MaskingBackend()
                case _:
                    backend = TokenBudgetBackend()
            outcome = await self._attempt(ctx, request, backend, step)
            if not outcome.proceed:
                return outcome
            if outcome.installed:
                done = CompactionOutcome.INSTALLED
            if not limit_reached(ctx.backend.view):
                return done
            ledger.stalled.append(step)
            if outcome.installed and step is not Step.MASK:
                # No second compaction before a model has answered: the next point escalates.
                return self._unanswered(ctx, done)

    def _unanswered(self, ctx: CompactionContext, done: CompactionOutcome) -> CompactionOutcome:
        """At the limit, with no model response since the last compaction: ``done`` (the
        turn goes on to the model) when the context fits the window, else the turn ends
        with ``compaction_loop``."""
        view = ctx.backend.view
        if fits_window(view):
            return done
        self.ledger.tried.append("another compaction before a model answered: not run")
        message = loop_message(
            self.ledger, view.budget.limit or 0, view.config.max_auto_compactions_per_turn
        )
        ctx.backend.emit(relay.ErrorEvent(message, relay.ErrorCode.COMPACTION_LOOP))
        return CompactionOutcome.FAILED

    async def _attempt(
        self,
        ctx: CompactionContext,
        request: CompactionRequest,
        backend: CompactionBackend | None,
        step: Step,
    ) -> CompactionOutcome:
        before = ctx.backend.view.budget.usage
        if backend is None:
            outcome = await self.run_selected(ctx, request)
        else:
            outcome = await run_compaction(ctx, request, backend)
        if outcome.installed:
            self.ledger.count += 1
            after = ctx.backend.view.budget.usage
            self.ledger.tried.append(f"{step.value}: {before} → {after} tokens")
        else:
            self.ledger.tried.append(f"{step.value}: not installed, it would not make it smaller")
        return outcome


async def _mask_when_due(ctx: CompactionContext) -> CompactionOutcome:
    """Mask old tool outputs when usage reached ``mask_trigger_tokens`` (below the limit).

    Such a masking is not an automatic compaction at the limit: it does not count towards
    ``max_auto_compactions_per_turn``.
    """
    view = ctx.backend.view
    if not (mask_due(view) and maskable(view)):
        return CompactionOutcome.NOT_DUE
    request = CompactionRequest(
        relay.CompactionTrigger.MID_TURN, Injection.BEFORE_LAST_USER_MESSAGE
    )
    return await run_compaction(ctx, request, MaskingBackend())


__all__ = [
    "BACKENDS",
    "Compactor",
    "Step",
    "TurnCompactions",
    "loop_message",
    "next_step",
]
