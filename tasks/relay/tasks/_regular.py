"""The regular turn: sample the model, run the tools it asks for, repeat (docs/session.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

import relay

from ._steps import TurnSteps, keep_steered


@attrs.frozen
class RegularTurn(relay.SessionTask):
    """A user turn: record the input, then sample and run tools until the model is done.

    Its steps and compaction points are :class:`~relay.tasks.TurnSteps`': before the input is
    recorded (pre-turn, or model downshift), before each follow-up request (mid-turn), after
    the final answer (post-turn, then background compaction), and when the model asks for a
    fresh window.
    """

    items: Sequence[relay.InputItem]
    """The user's input."""
    output_schema: Mapping[str, Any] | None = attrs.field(default=None, hash=False)
    """The JSON Schema the turn's final answer must fit (the op's
    ``final_output_json_schema``), or None."""

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
        keep_steered(ctx)

    async def run(self, ctx: relay.TaskContext) -> relay.TurnResult | None:
        return await TurnSteps(ctx, output_schema=self.output_schema).run(self.items)


def regular(op: relay.UserTurn | relay.UserInput) -> RegularTurn:
    """The task of a ``user_turn`` or ``user_input`` op."""
    if isinstance(op, relay.UserTurn):
        return RegularTurn(op.items, op.final_output_json_schema)
    return RegularTurn(op.items)
