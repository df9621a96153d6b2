"""The regular turn: sample the model, run the tools it asks for, repeat (docs/session.md)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import relay
from relay.lowlevel import (
    NEW_CONTEXT_WINDOW,
    SessionTask,
    TaskContext,
    TaskKind,
    cut_answer_warning,
)

from .compaction import BACKENDS, CompactionBackend, CompactionRequest, Injection
from .compaction.auto import (
    TurnCompactions,
    after_final_answer,
    auto_compact,
    mask_when_due,
    requested_compact,
)
from .compaction.background import install_waiting


@attrs.frozen
class RegularTurn(SessionTask):
    """A user turn: record the input, then sample and run tools until the model is done.

    Auto-compaction runs inline, under this turn's id: before anything of the turn is recorded
    (pre-turn, or model downshift), and between two sampling steps when the model needs a
    follow-up and usage reached the limit (mid-turn). A failed or stopped auto-compaction ends
    the turn; one before the turn ends it after the input is recorded.
    """

    items: tuple[relay.InputItem, ...]
    """The user's input."""
    backends: Sequence[CompactionBackend] = BACKENDS
    """The compaction backends auto-compaction chooses from, in order."""

    @property
    def kind(self) -> TaskKind:
        return TaskKind.REGULAR

    @property
    def steerable(self) -> bool:
        """Input steered into the turn is picked up before its next sampling request."""
        return True

    def abort(self, ctx: TaskContext, reason: relay.AbortReason) -> None:
        """Steered input the turn never picked up stays in the history."""
        del reason
        for items in ctx.drain_pending():
            ctx.record_input(items)

    async def run(self, ctx: TaskContext) -> str | None:
        ledger = TurnCompactions()
        proceed = await _compact_before_turn(ctx, self.backends, ledger)
        # The input is recorded even when the compaction before it failed or was stopped:
        # the turn ends without sampling, but what the user said is never lost.
        ctx.record_context()
        await ctx.record_user_input(self.items)
        if not proceed:
            return None
        last: str | None = None
        drain = True
        while True:
            if drain:
                for pending in ctx.drain_pending():
                    await ctx.record_user_input(pending)
            drain = True
            try:
                result = await ctx.sample(ctx.build_prompt())
            except relay.ModelError as error:
                ctx.report_model_error(error)
                return last
            last = result.last_agent_message or last
            if result.incomplete is not None:
                ctx.emit(relay.WarningEvent(cut_answer_warning(ctx.max_output_tokens)))
                return last
            calls = result.tool_calls
            for call in calls:
                await ctx.run_tool_call(call)
            if ctx.config.features.token_budget and any(
                call.name == NEW_CONTEXT_WINDOW for call in calls
            ):
                request = CompactionRequest(
                    relay.CompactionTrigger.MODEL_REQUESTED, Injection.BEFORE_LAST_USER_MESSAGE
                )
                if not await requested_compact(ctx, request, self.backends, ledger):
                    return last
                continue
            if not calls and not ctx.has_pending():
                await after_final_answer(ctx, self.backends, ledger)
                return last
            limit = ctx.auto_compact_limit()
            if limit is not None and ctx.usage_tokens >= limit:
                request = CompactionRequest(
                    relay.CompactionTrigger.MID_TURN, Injection.BEFORE_LAST_USER_MESSAGE
                )
                if not await auto_compact(ctx, request, self.backends, ledger):
                    return last
                # Input steered during a tool follow-up waits one more step, so that the
                # next request answers the tool outputs first.
                drain = not calls or ledger.deferred
            elif not await mask_when_due(ctx):
                return last


async def _compact_before_turn(
    ctx: TaskContext, backends: Sequence[CompactionBackend], ledger: TurnCompactions
) -> bool:
    """Pre-turn and model-downshift compaction; False when it failed (the turn ends)."""
    previous = ctx.last_turn_model
    if previous is not None and previous != ctx.settings.model:
        old_window = ctx.context_window_of(previous)
        new_window = ctx.model_context_window
        new_limit = ctx.auto_compact_limit()
        if (
            old_window is not None
            and new_window is not None
            and new_window < old_window
            and new_limit is not None
            and ctx.usage_tokens > new_limit
        ):
            request = CompactionRequest(
                relay.CompactionTrigger.MODEL_DOWNSHIFT, Injection.DO_NOT_INJECT, model=previous
            )
            return await auto_compact(ctx, request, backends, ledger)
    limit = ctx.auto_compact_limit()
    if (limit is not None and ctx.usage_tokens >= limit) or install_waiting(ctx):
        request = CompactionRequest(relay.CompactionTrigger.PRE_TURN, Injection.DO_NOT_INJECT)
        return await auto_compact(ctx, request, backends, ledger)
    return True
