"""Compaction off the critical path: the pre-turn stall with background compaction on and off.

A session of user turns 3 s apart whose usage grows by 1,500 tokens with every answer crosses
its auto-compaction limit (20,000 tokens of a 100,000-token window) again and again. Every
summarization request takes 2 s at the model. With background compaction off, the turn that
crosses the limit waits for that summary before its first request; with it on (60 % of the
limit), the summary of a snapshot is computed while the user is still typing and installed
when the limit is reached.

Measured per turn: the *pre-turn stall*, from the ``user_turn`` submission to the turn's first
sampling request at the model, and over the session the share of automatic compactions served
from the background. The waits (3 s between turns, 2 s per summary) run on trio's virtual
clock, so a 200-turn session takes seconds instead of ten minutes; everything the session
itself does between two waits is added in real time, measured with ``perf_counter`` around
each turn start, so the stall figures are virtual waits plus real work.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

import relay
from relay.lowlevel import (
    Completed,
    ModelEvent,
    OutputItemDone,
    Prompt,
)

from ._core import Better, Figure, Options, Target, percentile
from ._drive import open_bench_session

GROUP = "background compaction"
STALL_TARGET = Target("≤ 50 ms median with background on", 50.0)
SHARE_TARGET = Target("≥ 90 %", 90.0, Better.HIGHER)

#: Seconds a summarization request takes at the model.
COMPACTION_SECONDS = 2.0
#: Seconds between two user turns.
TURN_GAP_SECONDS = 3.0
#: Tokens each answer adds to the usage.
TOKENS_PER_ANSWER = 1_500


class PacedModel:
    """Answers turns at once and summaries after :data:`COMPACTION_SECONDS`.

    The usage it reports grows with the answers in the request (a summary removes them), so
    the session crosses its limit again after every compaction.
    """

    def __init__(self) -> None:
        self.turn_requests: list[float] = []
        """Real time (virtual + work) at each turn request."""
        self.clock: _Clock | None = None

    @asynccontextmanager
    async def stream(self, prompt: Prompt) -> AsyncIterator[AsyncIterator[ModelEvent]]:
        if prompt.purpose == "compact":
            await trio.sleep(COMPACTION_SECONDS)
            events = _answer("A summary of the work so far.", 300)
        else:
            assert self.clock is not None
            self.turn_requests.append(self.clock.now())
            answers = sum(
                1
                for item in prompt.input
                if isinstance(item, relay.Message) and item.role == "assistant"
            )
            events = _answer("Done.", 1_000 + TOKENS_PER_ANSWER * (answers + 1))
        yield _replay(events)

    async def compact(self, request: Any) -> Any:
        raise NotImplementedError("the local backend never calls it")


def _answer(text: str, tokens: int) -> list[ModelEvent]:
    return [
        OutputItemDone(relay.assistant_message(text)),
        Completed("resp", relay.TokenUsage(total_tokens=tokens)),
    ]


async def _replay(events: list[ModelEvent]) -> AsyncIterator[ModelEvent]:
    for event in events:
        yield event


class _Clock:
    """Virtual time plus the real time the session spent between virtual jumps."""

    def __init__(self) -> None:
        self.work = 0.0
        self._since: float | None = None

    def start(self) -> None:
        self._since = time.perf_counter()

    def now(self) -> float:
        assert self._since is not None
        return trio.current_time() + self.work + (time.perf_counter() - self._since)

    def stop(self) -> float:
        assert self._since is not None
        self.work += time.perf_counter() - self._since
        self._since = None
        return self.work


async def _session(turns: int, background: int) -> tuple[list[float], list[float], int, int]:
    """Stalls (ms) of every turn and of the turns that compacted, background installs, all
    automatic compactions."""
    model = PacedModel()
    clock = _Clock()
    model.clock = clock
    config = relay.Config(
        model_context_window=100_000,
        model_auto_compact_token_limit=20_000,
        background_compact_threshold_percent=background,
        rollout=relay.RolloutConfig(enabled=False),
    )
    stalls: list[float] = []
    compacting: list[float] = []
    background_installs = 0
    automatic = 0
    async with open_bench_session(model, cfg=config) as session:
        events = session.events()
        for index in range(turns):
            clock.start()
            compacted = False
            submitted = clock.now()
            turn_id = await session.submit(relay.UserTurn(items=[relay.Text(f"step {index}")]))
            while True:
                event = await anext(events)
                msg = event.msg
                if (
                    isinstance(msg, relay.ItemCompleted)
                    and isinstance(msg.item, relay.ContextCompactionItem)
                    and msg.item.receipt is not None
                ):
                    automatic += 1
                    compacted = True
                    background_installs += msg.item.receipt.background
                if isinstance(msg, relay.TurnComplete) and event.id == turn_id:
                    break
            clock.stop()
            stalls.append((model.turn_requests[-1] - submitted) * 1000)
            if compacted:
                compacting.append(stalls[-1])
            await trio.sleep(TURN_GAP_SECONDS)
    return stalls, compacting, background_installs, automatic


def run(opts: Options) -> list[Figure]:
    """Pre-turn stall with background compaction off and on, and the share served from it."""
    turns = 40 if opts.quick else 200

    async def main() -> list[Figure]:
        off, crossing_off, _, off_auto = await _session(turns, 0)
        on, crossing_on, served, on_auto = await _session(turns, 60)
        share = 100 * served / on_auto if on_auto else 0.0
        note_off = f"{off_auto} compactions in {turns} turns"
        return [
            Figure(
                GROUP,
                "pre-turn stall, background off (every turn)",
                "ms",
                off,
                note=f"{note_off}; p95 {_p95(off):.1f} ms",
            ),
            Figure(
                GROUP,
                "pre-turn stall, background off (turns that compact)",
                "ms",
                crossing_off,
                note=f"p95 {_p95(crossing_off):.1f} ms",
            ),
            Figure(
                GROUP,
                "pre-turn stall, background on (every turn)",
                "ms",
                on,
                ref_name="off, turns that compact",
                ref_value=_median(crossing_off),
                target=STALL_TARGET,
                note=f"p95 {_p95(on):.1f} ms; max {max(on):.1f} ms",
            ),
            Figure(
                GROUP,
                "pre-turn stall, background on (turns that compact)",
                "ms",
                crossing_on,
                ref_name="off, turns that compact",
                ref_value=_median(crossing_off),
                target=STALL_TARGET,
                note=f"p95 {_p95(crossing_on):.1f} ms",
            ),
            Figure(
                GROUP,
                f"automatic compactions served from the background ({turns} turns)",
                "%",
                [share],
                target=SHARE_TARGET,
                note=f"{served} of {on_auto}",
            ),
        ]

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


def _p95(values: list[float]) -> float:
    return percentile(values, 95)
