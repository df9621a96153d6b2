"""Long sessions in one process: per-turn cost as a session grows, at a large history, with
the rollout on, and the memory a long session holds.

- Per-turn CPU against the number of turns: one session on the embedded scripted model (no
  replies written out: the ``echo`` fallback answers and the usage is estimated, as in a
  scripted ``relay run``), 10,000 turns; each turn timed from ``submit`` to its
  ``turn_complete`` (wall and CPU time of this process).
- Memory: the same session of 10,000 turns in a fresh process, its peak resident set beside
  that of a process that runs one turn.
- At a large history: sessions resumed with 100 to 100,000 history items, then 50 turns each,
  on the canned model (no model work) and on the scripted model; against 100 items.
- With the rollout on: turns of 100-turn sessions that write their rollout, against the same
  sessions with the rollout off.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

import relay
from relay import open_session
from relay._core._state import ResumedState
from relay._open._session import open_state
from relay.testing import ScriptedModel, fixed_clock

from ._core import Figure, Options, Target, ms, no_gc, percentile
from ._drive import CannedModel, TurnDriver, canned_text, config, turn_script

GROUP = "long sessions"
FLAT = Target("flat: ≤ 1.2× at 100 items", 1.2)
TURN_TARGET = Target("≤ 1 ms, flat", 1.0)
ROLLOUT_TARGET = Target("≤ 0.5 ms", 0.5)
MEMORY_TARGET = Target("≤ 50 MiB", 50.0)

#: Run in a fresh process: ``turns`` turns on the embedded scripted provider.
_MANY_TURNS = """
import random, sys, trio, relay
from relay.testing import fixed_clock

async def main(turns, folder):
    config = relay.Config(rollout=relay.RolloutConfig(enabled=True, dir=folder))
    async with relay.open_session(config, clock=fixed_clock, rng=random.Random(0)) as session:
        events = session.events()
        for index in range(turns):
            turn = await session.submit(
                relay.UserTurn(items=[relay.Text(f"Question {index}: say hello.")])
            )
            async for event in events:
                if isinstance(event.msg, relay.TurnComplete) and event.id == turn:
                    break

trio.run(main, int(sys.argv[1]), sys.argv[2])
"""


async def _growing(turns: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each turn of one session of ``turns`` turns."""
    walls: list[float] = []
    cpus: list[float] = []
    async with open_session(
        config(), model=ScriptedModel(), clock=fixed_clock, rng=random.Random(0)
    ) as session:
        driver = TurnDriver(session)
        for index in range(turns):
            wall, cpu = time.perf_counter(), time.process_time()
            await driver.turn(f"Question {index}: say hello.")
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    return walls, cpus


def _history(items: int) -> tuple[relay.ResponseItem, ...]:
    out: list[relay.ResponseItem] = []
    for index in range(items // 2):
        out.append(relay.user_message(f"Question {index}: which build backend?"))
        out.append(relay.assistant_message(f"Answer {index}: hatchling."))
    return tuple(out)


async def _at_history(items: int, canned: bool, turns: int) -> tuple[list[float], list[float]]:
    state = ResumedState(
        session_id="bench", rollout_path=None, history=_history(items), last_response_tokens=1
    )
    script = turn_script(turns + 1)
    model: relay.lowlevel.ModelClient = (
        CannedModel(
            [
                canned_text(i, r["text"], r["total_tokens"])
                for i, r in enumerate(script["responses"])
            ]
        )
        if canned
        else ScriptedModel(script)
    )
    walls: list[float] = []
    cpus: list[float] = []
    async with open_state(
        config(), state, model=model, clock=fixed_clock, rng=random.Random(0)
    ) as session:
        driver = TurnDriver(session)
        await driver.turn("warm up: the first request encodes the restored history")
        for index in range(turns):
            wall, cpu = time.perf_counter(), time.process_time()
            await driver.turn(f"Question {index}")
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    return walls, cpus


async def _rollout_turns(folder: Path | None, turns: int) -> list[float]:
    cfg = config(enabled=True, dir=str(folder)) if folder is not None else config()
    async with open_session(
        cfg, model=ScriptedModel(turn_script(turns)), clock=fixed_clock, rng=random.Random(0)
    ) as session:
        driver = TurnDriver(session)
        return [await driver.turn(f"Question {index}") for index in range(turns)]


def _growing_figures(opts: Options) -> list[Figure]:
    turns = 300 if opts.quick else 10_000
    with no_gc():
        walls, cpus = trio.run(_growing, turns)
    window = 50 if opts.quick else 200
    checkpoints = [n for n in (100, 1_000, 2_000, 5_000, 10_000, 300) if n <= turns]
    figures: list[Figure] = []
    first = statistics.median(cpus[:window])
    for upto in sorted(set(checkpoints)):
        span = cpus[max(0, upto - window) : upto]
        figures.append(
            Figure(
                GROUP,
                f"turns {max(0, upto - window) + 1:,}–{upto:,}: CPU per turn (scripted, echo)",
                "ms",
                ms(span),
                ref_name=f"the first {window}",
                ref_value=first * 1000,
                target=TURN_TARGET,
                note=f"wall {statistics.median(walls[max(0, upto - window) : upto]) * 1000:.3f}"
                f" ms; p95 {percentile(ms(span), 95):.3f}",
            )
        )
    step = max(1, turns // 100)
    opts.extra["growing"] = {
        "turn": [i + 1 for i in range(0, turns, step)],
        "cpu_ms": [statistics.median(cpus[i : i + step]) * 1000 for i in range(0, turns, step)],
    }
    return figures


def _memory_figures(opts: Options) -> list[Figure]:
    from .process import measure

    turns = 300 if opts.quick else 10_000
    figures = []
    peaks: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="relay-bench-") as folder:
        for count in (1, turns):
            argv = [sys.executable, "-c", _MANY_TURNS, str(count), folder]
            run = measure(argv, timeout=1800)
            if run.status != 0:
                opts.note(f"{count}-turn session in a fresh process failed: {run.tail}")
                return []
            peaks[count] = run.peak_mib
    figures.append(Figure(GROUP, "fresh process, 1 turn: peak RSS", "MiB", [peaks[1]]))
    figures.append(
        Figure(
            GROUP,
            f"fresh process, {turns:,} scripted turns, rollout on: peak RSS",
            "MiB",
            [peaks[turns]],
            ref_name="1 turn",
            ref_value=peaks[1],
            target=MEMORY_TARGET,
        )
    )
    return figures


def _history_figures(opts: Options) -> list[Figure]:
    sizes = (100, 1_000) if opts.quick else (100, 1_000, 10_000, 100_000)
    turns = 10 if opts.quick else 50
    figures: list[Figure] = []
    for canned in (True, False):
        model = "canned model" if canned else "scripted model"
        base: float | None = None
        for items in sizes:
            with no_gc():
                walls, cpus = trio.run(_at_history, items, canned, turns)
            cpu = statistics.median(cpus) * 1000
            base = cpu if base is None else base
            figures.append(
                Figure(
                    GROUP,
                    f"{items:,} history items, {model}: CPU per turn",
                    "ms",
                    ms(cpus),
                    ref_name="100 items",
                    ref_value=base,
                    ratio_target=FLAT if items > sizes[0] else None,
                    note=f"wall {statistics.median(walls) * 1000:.3f} ms",
                )
            )
    return figures


def _rollout_figures(opts: Options) -> list[Figure]:
    turns = 10 if opts.quick else 100
    sessions = opts.count(max(3, opts.repeat // 2), 1)
    on: list[float] = []
    off: list[float] = []
    with tempfile.TemporaryDirectory(prefix="relay-bench-") as folder:
        for _ in range(sessions):  # interleaved
            on += trio.run(_rollout_turns, Path(folder), turns)
            off += trio.run(_rollout_turns, None, turns)
    off_fig = Figure(GROUP, f"{turns}-turn sessions, rollout off: per turn", "ms", ms(off))
    return [
        off_fig,
        Figure(
            GROUP,
            f"{turns}-turn sessions, rollout on: per turn",
            "ms",
            ms(on),
            ref_name="rollout off",
            ref_value=off_fig.median,
            target=ROLLOUT_TARGET,
            note=f"p95 {percentile(ms(on), 95):.3f}",
        ),
    ]


def run(opts: Options) -> list[Figure]:
    """Long sessions: per-turn cost as they grow, memory, large histories, the rollout."""
    return [
        *_growing_figures(opts),
        *_memory_figures(opts),
        *_history_figures(opts),
        *_rollout_figures(opts),
    ]
