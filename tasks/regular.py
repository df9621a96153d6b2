"""The regular turn: sample the model, run the tools it asks for, repeat (SPEC §5.1, §5.6)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

import relay
from relay.lowlevel import NEW_CONTEXT_WINDOW, SessionTask, TaskContext, TaskKind

from .compaction import (
    BACKENDS,
    CompactionBackend,
    CompactionOutcome,
    CompactionRequest,
    Injection,
    run_compaction,
)
from .compaction.background import after_final_answer, auto_compaction, install_waiting


@attrs.frozen
class RegularTurn(SessionTask):
    """A user turn: record the input, then sample and run tools until the model is done.

    Auto-compaction runs inline, under this turn's id: before anything of the turn is recorded
    (pre-turn, or model downshift), and between two sampling steps when the model needs a
    follow-up and usage reached the limit (mid-turn). A failed auto-compaction ends the turn.
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
        if not await _compact_before_turn(ctx, self.backends):
            return None
        ctx.record_context()
        await ctx.record_user_input(self.items)
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
            calls = result.tool_calls
            for call in calls:
                await ctx.run_tool_call(call)
            if ctx.config.features.token_budget and any(
                call.name == NEW_CONTEXT_WINDOW for call in calls
            ):
                request = CompactionRequest(
                    relay.CompactionTrigger.MODEL_REQUESTED, Injection.BEFORE_LAST_USER_MESSAGE
                )
                if not (await run_compaction(ctx, request, self.backends)).proceed:
                    return last
                continue
            if not calls and not ctx.has_pending():
                await after_final_answer(ctx, self.backends)
                return last
            limit = ctx.auto_compact_limit()
            if limit is not None and ctx.usage_tokens >= limit:
                request = CompactionRequest(
                    relay.CompactionTrigger.MID_TURN, Injection.BEFORE_LAST_USER_MESSAGE
                )
                outcome = await auto_compaction(ctx, request, self.backends)
                if not outcome.proceed:
                    return last
                # Input steered during a tool follow-up waits one more step, so that the
                # next request answers the tool outputs first.
                drain = not calls or outcome is not CompactionOutcome.INSTALLED


async def _compact_before_turn(ctx: TaskContext, backends: Sequence[CompactionBackend]) -> bool:
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
            return (await run_compaction(ctx, request, backends)).proceed
    limit = ctx.auto_compact_limit()
    if (limit is not None and ctx.usage_tokens >= limit) or install_waiting(ctx):
        request = CompactionRequest(relay.CompactionTrigger.PRE_TURN, Injection.DO_NOT_INJECT)
        return (await auto_compaction(ctx, request, backends)).proceed
    return True
