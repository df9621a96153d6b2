"""The regular turn: sample the model, run the tools it asks for, repeat (docs/session.md)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

import relay
from relay.lowlevel import (
    NEW_CONTEXT_WINDOW,
    CompactionRequest,
    Injection,
    cut_answer_warning,
    user_message_of,
)


@attrs.frozen
class RegularTurn(relay.SessionTask):
    """A user turn: record the input, then sample and run tools until the model is done.

    Its compaction points are the port's: before the input is recorded (pre-turn, or model
    downshift), before each follow-up request (mid-turn), after the final answer (post-turn,
    then background compaction), and when the model asks for a fresh window.
    """

    items: Sequence[relay.InputItem]
    """The user's input."""

    @property
    def kind(self) -> str:
        return "regular"

    @property
    def steerable(self) -> bool:
        """Input steered into the turn is picked up before its next sampling request."""
        return True

    def abort(self, ctx: relay.TaskContext, reason: relay.AbortReason) -> None:
        """Steered input the turn never picked up stays in the history."""
        del reason
        for items in ctx.take_input():
            ctx.record(user_message_of(items))

    async def run(self, ctx: relay.TaskContext) -> str | None:
        await ctx.record_input(self.items)
        token_budget = ctx.view.config.features.token_budget
        while True:
            result = await ctx.sample()
            if result.incomplete is not None:
                ctx.emit(relay.WarningEvent(cut_answer_warning(ctx.view.budget.max_output_tokens)))
                return None
            calls = result.tool_calls
            for call in calls:
                await ctx.run_tool(call)
            if token_budget and any(call.name == NEW_CONTEXT_WINDOW for call in calls):
                trigger = relay.CompactionTrigger.MODEL_REQUESTED
                await ctx.compact(CompactionRequest(trigger, Injection.BEFORE_LAST_USER_MESSAGE))
                continue
            if not calls and not ctx.view.steered:
                await ctx.compact(CompactionRequest(relay.CompactionTrigger.POST_TURN))
                return None


def regular(op: relay.UserTurn | relay.UserInput) -> RegularTurn:
    """The task of a ``user_turn`` or ``user_input`` op."""
    return RegularTurn(op.items)
