"""The loop guard through a session: summaries that never shrink the context."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio.testing

import relay
from relay import testing
from relay.testing import turn_ended

#: A summary bigger than the limit: a compaction that installs it makes no progress.
NEVER_SHRINKS = "The summary repeats everything and more. " * 1_000
LIMIT = 5_000


def emit_tool() -> relay.Tool:
    async def emit(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
        return "data " * 6_000  # about 7,500 tokens: every step reaches the limit

    return relay.Tool("emit", "Emit data.", {"type": "object"}, emit)


CALL = {"function_call": {"name": "emit", "arguments": {}}}


async def run(config: relay.Config, script: dict[str, Any]) -> list[relay.EventMsg]:
    async with (
        relay.open_session(
            config, model=testing.ScriptedModel(script), tools=[emit_tool()]
        ) as session,
        testing.recording(session) as recorder,
    ):
        await session.submit(relay.UserTurn(items=[relay.Text("Go.")]), id="t1")
        await recorder.wait_for(turn_ended)
        await session.submit(relay.Shutdown())
        await recorder.wait_for(relay.ShutdownComplete)
    return [e.msg for e in recorder.events if e.id == "t1"]


def receipts(msgs: list[relay.EventMsg]) -> list[tuple[str, int, int]]:
    return [
        (m.item.receipt.backend, m.item.receipt.tokens_before, m.item.receipt.tokens_after)
        for m in msgs
        if isinstance(m, relay.ItemCompleted)
        and isinstance(m.item, relay.ContextCompactionItem)
        and m.item.receipt is not None
    ]


def between_compactions(msgs: list[relay.EventMsg]) -> list[int]:
    """How many model steps ended (a tool call or an answer) after each compaction, before
    the next compaction or the turn's end."""
    counts: list[int] = []
    for m in msgs:
        if (
            isinstance(m, relay.ItemCompleted)
            and isinstance(m.item, relay.ContextCompactionItem)
            and m.item.receipt is not None
        ):
            counts.append(0)
        elif counts and isinstance(m, relay.ItemCompleted) and _model_item(m.item):
            counts[-1] += 1
    return counts


def _model_item(item: object) -> bool:
    return isinstance(item, relay.AgentMessageItem | relay.ToolCallItem)


def config(**fields: Any) -> relay.Config:
    return relay.Config(
        model_auto_compact_token_limit=LIMIT, rollout=relay.RolloutConfig(enabled=False), **fields
    )


async def test_three_automatic_compactions_then_compaction_loop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Every step calls the tool; the one summary would make the context larger and is not
    # installed; the fresh windows shrink it, but the next step fills the context again.
    script = {"responses": [CALL, NEVER_SHRINKS, CALL, CALL, CALL, "never reached"]}
    msgs = await run(config(), script)
    done = receipts(msgs)
    assert [backend for backend, _, _ in done] == ["token_budget"] * 3
    assert all(after < LIMIT for _, _, after in done)
    assert between_compactions(msgs) == [1, 1, 1]
    [warning] = [m for m in msgs if isinstance(m, relay.WarningEvent)]
    assert warning.message.startswith("Nothing was changed")
    errors = [m for m in msgs if isinstance(m, relay.ErrorEvent)]
    assert len(errors) == 1 and errors[0].code is relay.ErrorCode.COMPACTION_LOOP
    assert "max_auto_compactions_per_turn = 3" in errors[0].message
    assert "summary compaction:" in errors[0].message
    assert "fresh window:" in errors[0].message
    assert isinstance(msgs[-1], relay.TurnComplete)


async def test_when_nothing_shrinks_the_turn_ends_after_the_ladder(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Developer instructions bigger than the limit: not even a fresh window fits. Each step
    # that made no progress is followed by a model's answer before the next is tried.
    cfg = config(developer_instructions="Rule. " * 4_000)
    script = {"responses": [CALL, NEVER_SHRINKS, CALL, "never reached"]}
    msgs = await run(cfg, script)
    # The summary is not installed (not smaller); the fresh window is, without progress; the
    # model answers, and at the next point nothing is left to try.
    assert [backend for backend, _, _ in receipts(msgs)] == ["token_budget"]
    assert between_compactions(msgs) == [1]
    errors = [m for m in msgs if isinstance(m, relay.ErrorEvent)]
    assert [e.code for e in errors] == [relay.ErrorCode.COMPACTION_LOOP]
    assert "nothing left to try" in errors[0].message


async def test_with_masking_the_ladder_tries_masking_before_a_fresh_window(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cfg = config(
        developer_instructions="Rule. " * 4_000,
        features=relay.Features(tool_output_masking=True),
        mask_keep_recent_tokens=0,
        max_auto_compactions_per_turn=5,
    )
    script = {"responses": [CALL, NEVER_SHRINKS, CALL, "never reached"]}
    msgs = await run(cfg, script)
    # Masking first (not enough), the summary (not installed: not smaller), masking has
    # nothing left, a fresh window (no progress); after the model's answer the turn ends.
    done = [backend for backend, _, _ in receipts(msgs)]
    assert done == ["masked", "token_budget"]
    assert between_compactions(msgs) == [0, 1]
    errors = [m for m in msgs if isinstance(m, relay.ErrorEvent)]
    assert [e.code for e in errors] == [relay.ErrorCode.COMPACTION_LOOP]
    assert "nothing left to try" in errors[0].message


async def test_a_configured_bound_of_one(autojump_clock: trio.testing.MockClock) -> None:
    script = {"responses": [CALL, "Summary.", CALL, "never reached"]}
    msgs = await run(config(max_auto_compactions_per_turn=1), script)
    assert [backend for backend, _, _ in receipts(msgs)] == ["local"]
    errors = [m for m in msgs if isinstance(m, relay.ErrorEvent)]
    assert [e.code for e in errors] == [relay.ErrorCode.COMPACTION_LOOP]
