"""Usage when a server reports none: estimated from what each response added (docs/session.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

import relay
from relay import testing
from relay._base._tokens import ApproxEstimator, approx_tokens, items_tokens


class NoUsageModel:
    """Answers every request with one text and no usage."""

    def __init__(self) -> None:
        self.prompts: list[relay.lowlevel.Prompt] = []

    @asynccontextmanager
    async def stream(
        self, prompt: relay.lowlevel.Prompt
    ) -> AsyncIterator[AsyncIterator[relay.lowlevel.ModelEvent]]:
        self.prompts.append(prompt)

        async def events() -> AsyncIterator[relay.lowlevel.ModelEvent]:
            yield relay.lowlevel.OutputItemDone(
                relay.assistant_message(f"answer {len(self.prompts)}")
            )
            yield relay.lowlevel.Completed("r", None)

        yield events()

    async def compact(self, request: relay.lowlevel.CompactRequest) -> Any:
        raise NotImplementedError


class CountingEstimator(ApproxEstimator):
    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return approx_tokens(text)


async def session_with(estimator: relay.TokenEstimator | None) -> Any:
    return relay.open_session(
        relay.Config(rollout=relay.RolloutConfig(enabled=False)),
        model=NoUsageModel(),
        clock=testing.fixed_clock,
        estimator=estimator,
    )


async def run_turns(session: relay.Session, n: int) -> list[relay.TokenCount]:
    recorder = testing.EventRecorder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(recorder.consume, session)
        for i in range(1, n + 1):
            await session.submit(relay.UserTurn(items=[relay.Text(f"question {i}")]))
            await recorder.wait_for(relay.TurnComplete, i)
        await session.submit(relay.Shutdown())
    return recorder.of_type(relay.TokenCount)


async def test_first_and_later_responses_without_usage(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with await session_with(ApproxEstimator()) as session:
        counts = await run_turns(session, 2)
        items = list(session.history.items)
    first, second = (c.info.last_token_usage for c in counts)
    # First response: instructions + everything recorded before it, plus its output.
    before_first = items[:2]  # environment context, first question
    assert first.input_tokens == approx_tokens(session.instructions) + items_tokens(before_first)
    assert first.output_tokens == items_tokens(items[2:3])
    # Second: the first total + what was added since the last model item, plus the output.
    assert second.input_tokens == first.total_tokens + items_tokens(items[3:4])
    assert second.output_tokens == items_tokens(items[4:5])
    assert counts[-1].info.total_token_usage.total_tokens == (
        first.total_tokens + second.total_tokens
    )


async def test_counting_work_per_turn_does_not_grow_with_history(
    autojump_clock: trio.testing.MockClock,
) -> None:
    estimator = CountingEstimator()
    calls_per_turn: list[int] = []
    async with await session_with(estimator) as session:
        recorder = testing.EventRecorder()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(recorder.consume, session)
            for i in range(1, 31):
                before = estimator.calls
                await session.submit(relay.UserTurn(items=[relay.Text(f"q{i}")]))
                await recorder.wait_for(relay.TurnComplete, i)
                calls_per_turn.append(estimator.calls - before)
            await session.submit(relay.Shutdown())
    # Each later turn counts exactly one new user message and one output.
    assert set(calls_per_turn[1:]) == {0}  # approximate counting goes through the cache


async def test_default_estimator_is_tiktoken_offline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with await session_with(None) as session:
        estimator = await session.usage_estimator()
        counts = await run_turns(session, 1)
    assert estimator.name == "tiktoken"
    assert estimator.count("hello world") == 2
    assert counts[0].info.last_token_usage.total_tokens > 0
