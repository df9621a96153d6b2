"""The regular turn: sample the model, run the tools it asks for, repeat (SPEC §5.1)."""

from __future__ import annotations

import attrs

import runtime
from runtime import TaskContext, TaskKind


@attrs.frozen
class RegularTurn:
    """A user turn: record the input, then sample and run tools until the model is done."""

    items: tuple[runtime.InputItem, ...]
    """The user's input."""

    @property
    def kind(self) -> TaskKind:
        return TaskKind.REGULAR

    async def run(self, ctx: TaskContext) -> str | None:
        ctx.record_context()
        await ctx.record_user_input(self.items)
        last: str | None = None
        while True:
            for pending in ctx.drain_pending():
                await ctx.record_user_input(pending)
            try:
                result = await ctx.sample(ctx.build_prompt())
            except runtime.ModelError as error:
                ctx.report_model_error(error)
                return last
            last = result.last_agent_message or last
            calls = result.tool_calls
            for call in calls:
                await ctx.run_tool_call(call)
            if not calls and not ctx.has_pending():
                return last
