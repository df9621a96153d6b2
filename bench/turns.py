"""Turn overhead and replacement latency, in real time under trio.

Per turn: ``submit(user_turn)`` → its ``turn_complete``, for sessions of 1, 10 and 100 turns,
on four models: relay's in-process scripted model, a canned model that does no work at all,
the scripted model served to the openai SDK through the in-process ``httpx2`` transport, and
the same over the loopback mock server. The scripted model's own share of each turn is
measured in the same run by replaying the very prompts the session sent through a fresh
scripted model: what is left is the runtime.

Latency: a ``compact``, an ``interrupt`` or a replacing ``user_turn`` submitted while a turn
streams (its first delta is out, more are due every 50 ms) → that turn's ``turn_aborted``;
against the floor of the submission loop: ``submit`` on an idle session → ``turn_started``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

import relay
from relay.testing import ScriptedModel

from ._core import Figure, Options, Target, ms
from ._drive import QUESTIONS, CannedModel, TurnDriver, canned_text, open_bench_session, turn_script

GROUP = "turn overhead"
LATENCY = "replacement latency"
TURN_TARGET = Target("≤ 1 ms median", 1.0)
LATENCY_TARGET = Target("≤ 5 ms median", 5.0)

ModelFactory = Callable[[dict[str, Any]], Any]


async def _run_turns(model: relay.lowlevel.ModelClient, turns: int) -> list[float]:
    async with open_bench_session(model) as session:
        driver = TurnDriver(session)
        return [await driver.turn(QUESTIONS[i % len(QUESTIONS)]) for i in range(turns)]


async def _model_alone(prompts: list[relay.lowlevel.Prompt], script: dict[str, Any]) -> list[float]:
    """Seconds the scripted model takes for each prompt, without a session around it."""
    model = ScriptedModel(script)
    out: list[float] = []
    for prompt in prompts:
        start = time.perf_counter()
        async with model.stream(prompt) as events:
            async for _ in events:
                pass
        out.append(time.perf_counter() - start)
    return out


@asynccontextmanager
async def _scripted(script: dict[str, Any]) -> AsyncIterator[relay.lowlevel.ModelClient]:
    yield ScriptedModel(script, request_log=None)  # its prompts are replayed


@asynccontextmanager
async def _canned(script: dict[str, Any]) -> AsyncIterator[relay.lowlevel.ModelClient]:
    replies = [
        canned_text(i, reply["text"], reply["total_tokens"])
        for i, reply in enumerate(script["responses"])
    ]
    yield CannedModel(replies)


@asynccontextmanager
async def _transport(script: dict[str, Any]) -> AsyncIterator[relay.lowlevel.ModelClient]:
    from relay._models._mock_transport import scripted_http_client
    from relay._wire import open_http_client

    http, _ = scripted_http_client(script)
    provider = relay.ProviderConfig(name="mock", base_url="http://mock.invalid/v1")
    async with open_http_client(provider, api_key=None, http_client=http) as client:
        yield client


@asynccontextmanager
async def _loopback(script: dict[str, Any]) -> AsyncIterator[relay.lowlevel.ModelClient]:
    from relay._testing._mock_server import open_mock_server
    from relay._wire import open_http_client

    async with open_mock_server(script) as server:
        assert server.base_url is not None
        provider = relay.ProviderConfig(name="mock", base_url=server.base_url)
        async with open_http_client(provider, api_key=None) as client:
            yield client


async def _per_turn(
    opts: Options, factory: Callable[[dict[str, Any]], Any], turns: int
) -> tuple[list[float], list[float]]:
    """Per-turn seconds over ``opts.repeat`` sessions, and the model's share (scripted only)."""
    samples: list[float] = []
    model_share: list[float] = []
    for _ in range(opts.repeat):
        script = turn_script(turns)
        async with factory(script) as model:
            samples += await _run_turns(model, turns)
            if isinstance(model, ScriptedModel):
                model_share += await _model_alone(model.prompts, script)
    return samples, model_share


async def _turn_figures(opts: Options) -> list[Figure]:
    figures: list[Figure] = []
    # Warm up: the first session of a process loads the task kinds and the templates.
    async with _scripted(turn_script(3)) as model:
        await _run_turns(model, 3)
    scripted: dict[int, float] = {}
    for turns in opts.turn_counts:
        samples, share = await _per_turn(opts, _scripted, turns)
        total = Figure(
            GROUP,
            f"{turns} turn{'s' if turns > 1 else ''}, scripted model: submit → turn_complete",
            "ms",
            ms(samples),
            ref_name="the model alone",
            ref_value=ms([_median(share)])[0],
            target=TURN_TARGET,
        )
        scripted[turns] = total.median
        figures.append(total)
        overhead = [t - m for t, m in zip(samples, share, strict=True)]
        figures.append(
            Figure(
                GROUP,
                f"{turns} turn{'s' if turns > 1 else ''}, runtime share (turn − model alone)",
                "ms",
                ms(overhead),
                ref_name="the whole turn",
                ref_value=total.median,
            )
        )
    for turns in opts.turn_counts:
        samples, _ = await _per_turn(opts, _canned, turns)
        figures.append(
            Figure(
                GROUP,
                f"{turns} turn{'s' if turns > 1 else ''}, canned model (no model work)",
                "ms",
                ms(samples),
                ref_name="scripted model",
                ref_value=scripted[turns],
                target=TURN_TARGET,
            )
        )
    for label, factory in (
        ("SDK in-process transport", _transport),
        ("SDK over the loopback server", _loopback),
    ):
        for turns in opts.turn_counts:
            try:
                samples, _ = await _per_turn(opts, factory, turns)
            except (ImportError, AttributeError) as exc:
                opts.note(f"{label}: skipped ({exc}).")
                break
            figures.append(
                Figure(
                    GROUP,
                    f"{turns} turn{'s' if turns > 1 else ''}, {label}",
                    "ms",
                    ms(samples),
                    ref_name="scripted model",
                    ref_value=scripted[turns],
                )
            )
    return figures


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


STREAMING = {
    "responses": [
        {"text": "one two three four five six seven eight", "stall_ms": 50},
        {"text": "Summary: nothing yet.", "total_tokens": 50},
        {"text": "Replaced.", "total_tokens": 50},
    ]
}


async def _abort_latency(op: relay.Op) -> float:
    async with open_bench_session(ScriptedModel(STREAMING)) as session:
        driver = TurnDriver(session)
        first = await session.submit(relay.UserTurn(items=[relay.Text("stream slowly")]))
        await driver.wait_for(relay.AgentMessageDelta, first)
        start = time.perf_counter()
        await session.submit(op)
        await driver.wait_for(relay.TurnAborted, first)
        return time.perf_counter() - start


async def _idle_latency() -> float:
    async with open_bench_session(ScriptedModel(STREAMING)) as session:
        driver = TurnDriver(session)
        start = time.perf_counter()
        turn_id = await session.submit(relay.UserTurn(items=[relay.Text("hello")]))
        await driver.wait_for(relay.TurnStarted, turn_id)
        return time.perf_counter() - start


async def _latency_figures(opts: Options) -> list[Figure]:
    count = opts.count(max(5, opts.repeat * 3), 3)
    floor = [await _idle_latency() for _ in range(count)]
    floor_ms = _median(ms(floor))
    figures = [Figure(LATENCY, "floor: idle session, submit → turn_started", "ms", ms(floor))]
    ops: list[tuple[str, relay.Op]] = [
        ("compact while a turn streams → old turn_aborted", relay.Compact()),
        ("interrupt while a turn streams → turn_aborted", relay.Interrupt()),
        (
            "user_turn(on_busy=replace) while a turn streams → old turn_aborted",
            relay.UserTurn(items=[relay.Text("instead")], on_busy=relay.OnBusy.REPLACE),
        ),
    ]
    for label, op in ops:
        samples = [await _abort_latency(op) for _ in range(count)]
        figures.append(
            Figure(
                LATENCY,
                label,
                "ms",
                ms(samples),
                ref_name="the idle floor",
                ref_value=floor_ms,
                target=LATENCY_TARGET,
            )
        )
    return figures


def run(opts: Options) -> list[Figure]:
    """Turn overhead and replacement latency."""

    async def main() -> list[Figure]:
        return [*await _turn_figures(opts), *await _latency_figures(opts)]

    return trio.run(main)
