"""Masking old tool outputs against summary compaction, on one 100-turn coding session.

The session: 100 turns, each a request of the user, one tool call whose output is 2k–20k
approximate tokens (drawn from a fixed seed; outputs over relay's 10k-token recording cap are
truncated when recorded, as in any session), and the model's answer. The model answers by
what it is asked (a summary for a summarization request, a tool call for a new request, a
short answer after a tool output), so both runs see the same conversation however their
compactions fall. Auto-compaction limit: 100,000 tokens; summaries are local.

Measured in the same run, masking off (``features.tool_output_masking = false``) and on (the
defaults: ``mask_keep_recent_tokens = 20000``, ``mask_margin_percent = 10``): the input tokens
of every request summed (turn and summarization requests; approximate tokens of the request's
``input``), and the number of summary compactions. A third run also masks after every tool step
that leaves usage at 40,000 tokens or more (``mask_trigger_tokens``).
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import trio

import relay
from relay import testing
from relay._base._tokens import approx_tokens
from relay._core._summary import is_real_user_message
from relay._models._script import parse_model_script
from relay.lowlevel import (
    ModelEvent,
    Prompt,
)

from ._core import Figure, Options, Target

GROUP = "masking vs summary compaction"
TURNS = 100
LIMIT = 100_000
#: ``mask_trigger_tokens`` of the third run.
TRIGGER = 40_000
INPUT_TARGET = Target("≥ 40 % fewer input tokens (ratio ≤ 0.60)", 0.60)
SUMMARY_TARGET = Target("≥ 50 % fewer summary compactions (ratio ≤ 0.50)", 0.50)


def output_tokens(turn: int) -> int:
    """The size of turn ``turn``'s tool output, in approximate tokens (2k–20k)."""
    return random.Random(turn).randint(2_000, 20_000)


class CodingModel(testing.ScriptedModel):
    """Answers by what it is asked, so that two runs see the same conversation."""

    input_tokens = 0
    """The approximate tokens of every request's ``input``, summed as the requests come (the
    request log keeps only the last ones)."""

    @asynccontextmanager
    async def stream(self, prompt: Prompt) -> AsyncIterator[AsyncIterator[ModelEvent]]:
        self.script = parse_model_script({"responses": [self._reply(prompt)]})
        async with super().stream(prompt) as events:
            self.input_tokens += approx_tokens(json.dumps(list(self.requests[-1]["input"])))
            yield events

    def _reply(self, prompt: Prompt) -> Any:
        if prompt.purpose == "compact":
            return "Summary: the refactoring of the parser goes on; " * 40
        last = prompt.input[-1] if prompt.input else None
        if isinstance(last, relay.FunctionCallOutput):
            return "I read the output; on to the next step."
        turn = sum(1 for item in prompt.input if is_real_user_message(item))
        return {"function_call": {"name": "run", "arguments": {"turn": turn}}}


def run_tool() -> relay.Tool:
    async def run(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
        turn = int(args.get("turn", 0))
        line = f"turn {turn}: test output line with a file path src/module_{turn}.py:"
        words = output_tokens(turn) * 4 // (len(line) + 1) + 1
        return "\n".join(f"{line}{n}" for n in range(words))

    return relay.Tool("run", "Run the next step.", {"type": "object"}, run)


async def session_figures(
    masking: bool, turns: int, trigger: int | None = None
) -> tuple[int, int, int]:
    """(input tokens summed, summary compactions, maskings) of one run."""
    config = relay.Config(
        model_auto_compact_token_limit=LIMIT,
        features=relay.Features(tool_output_masking=masking),
        mask_trigger_tokens=trigger,
        rollout=relay.RolloutConfig(enabled=False),
    )
    model = CodingModel()
    recorder = testing.EventRecorder()
    async with (
        relay.open_session(config, model=model, tools=[run_tool()]) as session,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(recorder.consume, session)
        for turn in range(turns):
            await session.submit(relay.UserTurn(items=[relay.Text(f"Step {turn}: go on.")]))
            await recorder.wait_for(
                lambda e: isinstance(e.msg, relay.TurnComplete | relay.TurnAborted), turn + 1
            )
        await session.submit(relay.Shutdown())
        await recorder.wait_for(relay.ShutdownComplete)
    errors = [m for m in recorder.msgs if isinstance(m, relay.ErrorEvent)]
    assert not errors, errors
    backends = [
        m.item.receipt.backend
        for m in recorder.msgs
        if isinstance(m, relay.ItemCompleted)
        and isinstance(m.item, relay.ContextCompactionItem)
        and m.item.receipt is not None
    ]
    return model.input_tokens, backends.count("local"), backends.count("masked")


def run(opts: Options) -> list[Figure]:
    turns = 20 if opts.quick else TURNS
    off = trio.run(session_figures, False, turns)
    on = trio.run(session_figures, True, turns)
    early = trio.run(session_figures, True, turns, TRIGGER)
    label = f"{turns}-turn coding session"
    return [
        Figure(GROUP, f"{label}: input tokens, masking off", "tokens", [float(off[0])]),
        Figure(
            GROUP,
            f"{label}: input tokens, masking on",
            "tokens",
            [float(on[0])],
            ref_name="masking off",
            ref_value=float(off[0]),
            ratio_target=INPUT_TARGET,
        ),
        Figure(GROUP, f"{label}: summary compactions, masking off", "count", [float(off[1])]),
        Figure(
            GROUP,
            f"{label}: summary compactions, masking on",
            "count",
            [float(on[1])],
            ref_name="masking off",
            ref_value=float(off[1]) if off[1] else None,
            ratio_target=SUMMARY_TARGET,
            note=f"{on[2]} maskings",
        ),
        Figure(
            GROUP,
            f"{label}: input tokens, masking on from {TRIGGER} tokens",
            "tokens",
            [float(early[0])],
            ref_name="masking off",
            ref_value=float(off[0]),
            ratio_target=INPUT_TARGET,
        ),
        Figure(
            GROUP,
            f"{label}: summary compactions, masking on from {TRIGGER} tokens",
            "count",
            [float(early[1])],
            ref_name="masking off",
            ref_value=float(off[1]) if off[1] else None,
            ratio_target=SUMMARY_TARGET,
            note=f"{early[2]} maskings",
        ),
    ]
