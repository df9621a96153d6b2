"""Rollout: write throughput with the flush discipline, and resume time.

Writing: the lines of real turns (``turn_started``, the user message as item and event, the
answer as item and event, ``token_count``, ``turn_complete``), appended through
:class:`relay._core._writer.RolloutWriter` and flushed before every ``turn_complete``, as the
session does; against the floor of writing the same text, already encoded, with the same
flushes.

Resume: rollouts of 10k, 100k and 1M lines are made from the lines of a real session (text
turns and tool turns, no compaction, so that every line counts toward the restored history:
the worst case), and :func:`relay.resume_session` is timed from the call to a session ready
for its first op: in a fresh process (wall and CPU time, and the process's peak resident set
against the file's size) and, interleaved with it, in this process after other work with a
large heap besides (where each run of the cyclic collector walks that heap); against the
floor of reading and JSON-decoding every line.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import anyio
import trio

import relay
from relay._core._writer import RolloutWriter
from relay.testing import ScriptedModel

from ._core import Figure, Options, Target, no_gc
from ._drive import QUESTIONS, TurnDriver, config, lookup_tool, open_bench_session
from .process import measure

GROUP = "rollout"
RESUME_TARGETS = {
    100_000: Target("≤ 1 s", 1.0),
    1_000_000: Target("≤ 8 s", 8.0),
}
PEAK_TARGET = Target("≤ 3× the file", 3.0)


def _turn_payloads(index: int) -> list[tuple[str, object]]:
    user = relay.user_message(f"{QUESTIONS[index % len(QUESTIONS)]} ({index})")
    answer = relay.assistant_message(f"Answer {index}: the build uses hatchling.")
    turn = f"sub-{index}"
    usage = relay.TokenUsage(total_tokens=1000 + index)
    return [
        ("event_msg", relay.lowlevel.to_json(relay.TurnStarted(turn, 200_000, 0.0))),
        ("response_item", relay.lowlevel.to_json(user)),
        ("event_msg", relay.lowlevel.to_json(relay.UserMessage(user.text()))),
        ("response_item", relay.lowlevel.to_json(answer)),
        ("event_msg", relay.lowlevel.to_json(relay.AgentMessage(answer.text()))),
        (
            "event_msg",
            relay.lowlevel.to_json(relay.TokenCount(relay.TokenUsageInfo(usage, usage, 200_000))),
        ),
        ("event_msg", relay.lowlevel.to_json(relay.TurnComplete(turn, answer.text(), 3))),
    ]


def _write_figures(opts: Options, tmp: Path) -> list[Figure]:
    figures = []
    for lines in opts.rollout_lines:
        turns = [_turn_payloads(i) for i in range(64)]
        writer_rates = []
        floor_rates = []
        for attempt in range(max(3, opts.repeat // 2)):
            writer = RolloutWriter.create(tmp / "write", f"w{lines}-{attempt}", datetime.now(UTC))
            with no_gc():
                start = time.perf_counter()
                written = 0
                while written < lines:
                    for kind, payload in turns[written % 64]:
                        writer.write(kind, payload)
                    writer.flush()
                    written += 7
                writer.close()
                writer_rates.append(written / (time.perf_counter() - start))
            encoded = [
                [
                    json.dumps(
                        {"timestamp": "2026-01-02T03:04:05.000Z", "type": k, "payload": v},
                        ensure_ascii=False,
                        separators=(",", ":"),
                    )
                    + "\n"
                    for k, v in turn
                ]
                for turn in turns
            ]
            path = tmp / f"floor-{lines}-{attempt}.jsonl"
            with no_gc(), path.open("a", encoding="utf-8") as file:
                start = time.perf_counter()
                written = 0
                while written < lines:
                    for line in encoded[written % 64]:
                        file.write(line)
                    file.flush()
                    written += 7
                floor_rates.append(written / (time.perf_counter() - start))
        floor = Figure(
            GROUP, f"write floor, {lines:,} lines (pre-encoded text)", "lines/s", floor_rates
        )
        figures.append(floor)
        figures.append(
            Figure(
                GROUP,
                f"write, {lines:,} lines, flush per turn",
                "lines/s",
                writer_rates,
                ref_name="the write floor",
                ref_value=floor.median,
            )
        )
    return figures


async def _record_session(root: Path, turns: int) -> Path:
    """A real session's rollout: text turns and tool turns, no compaction."""
    replies: list[dict[str, object]] = []
    for index in range(turns):
        if index % 2:
            replies.append(
                {
                    "function_call": {
                        "name": "lookup",
                        "arguments": {"key": f"k{index}"},
                        "call_id": f"call-{index}",
                    },
                    "total_tokens": 500 + index,
                }
            )
        replies.append(
            {"text": f"Answer {index}: the build uses hatchling.", "total_tokens": 600 + index}
        )
    cfg = config(enabled=True, dir=str(root))
    async with open_bench_session(
        ScriptedModel({"responses": replies}), tools=[lookup_tool()], cfg=cfg
    ) as session:
        driver = TurnDriver(session)
        for index in range(turns):
            await driver.turn(f"{QUESTIONS[index % len(QUESTIONS)]} ({index})")
        assert session.rollout is not None
        path = session.rollout.path
    return path


def _make_rollout(source: Path, lines: int, target: Path) -> None:
    """A rollout of ``lines`` lines: the recorded session, its turns repeated."""
    recorded = source.read_text(encoding="utf-8").splitlines(keepends=True)
    starts = [i for i, line in enumerate(recorded) if '"turn_started"' in line]
    head, cycle = recorded[: starts[1]], recorded[starts[1] : -1]  # without shutdown_complete
    out = list(head)
    while len(out) < lines:
        out.extend(cycle[: lines - len(out)])
    target.write_text("".join(out), encoding="utf-8")


#: Run in a fresh process: resume the rollout given, print wall and CPU seconds from the call
#: to a session ready for its first op, and the number of history items.
_RESUME = """
import sys, time, anyio, relay
from relay.testing import ScriptedModel

async def main(path):
    config = relay.Config(rollout=relay.RolloutConfig(enabled=True))
    wall, cpu = time.perf_counter(), time.process_time()
    async with relay.resume_session(path, config, model=ScriptedModel()) as session:
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(wall, cpu, len(session.history))

anyio.run(main, sys.argv[1], backend="trio")
"""


async def _resume_once(path: Path) -> tuple[float, float, int]:
    wall, cpu = time.perf_counter(), time.process_time()
    async with relay.resume_session(
        path, config(enabled=True), model=ScriptedModel({"responses": []})
    ) as session:
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        items = len(session.history)
    return wall, cpu, items


def _parse_floor(path: Path) -> float:
    start = time.perf_counter()
    with path.open("rb") as file:
        for line in file:
            json.loads(line)
    return time.perf_counter() - start


@dataclass
class _Sizes:
    lines: int
    mib: float
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    peak: list[float] = field(default_factory=list)
    items: int = 0


def _fresh(path: Path, sizes: _Sizes) -> None:
    run = measure([sys.executable, "-c", _RESUME, str(path)], timeout=600, keep_stdout=True)
    if run.status != 0:
        raise RuntimeError(f"resume of {path.name} failed: {run.tail}")
    wall, cpu, items = run.stdout.split()
    sizes.wall.append(float(wall))
    sizes.cpu.append(float(cpu))
    sizes.peak.append(run.peak_mib)
    sizes.items = int(items)


def _resume_figures(opts: Options, tmp: Path) -> list[Figure]:
    source = trio.run(_record_session, tmp / "recorded", 40)
    figures: list[Figure] = []
    line_counts = [*opts.rollout_lines, *(() if opts.quick else (1_000_000,))]
    series: list[_Sizes] = []
    for lines in line_counts:
        original = tmp / f"resume-{lines}.jsonl"
        _make_rollout(source, lines, original)
        sizes = _Sizes(lines, original.stat().st_size / 2**20)
        series.append(sizes)
        floor = [_parse_floor(original) for _ in range(opts.count(3, 1) if lines < 10**6 else 1)]
        floor_fig = Figure(
            GROUP, f"floor: read + json.loads, {lines:,} lines ({sizes.mib:.0f} MiB)", "s", floor
        )
        figures.append(floor_fig)
        repeat = 1 if lines >= 10**6 else opts.count(max(3, opts.repeat // 2), 1)
        after_other_work: list[float] = []
        for attempt in range(repeat):  # interleaved: a fresh process, then this one
            copy = tmp / f"resume-{lines}-{attempt}.jsonl"
            shutil.copyfile(original, copy)
            _fresh(copy, sizes)
            if lines < 10**6:
                shutil.copyfile(original, copy)
                # This process has run other benchmarks and holds a large heap besides.
                ballast = [{"n": [n]} for n in range(opts.count(1_000_000, 10_000))]
                wall, _, _ = anyio.run(_resume_once, copy, backend="trio")
                after_other_work.append(wall)
                del ballast
            copy.unlink()
        target = RESUME_TARGETS.get(lines)
        name = f"resume_session, {lines:,} lines → {sizes.items:,} items"
        figures.append(
            Figure(
                GROUP,
                f"{name}, fresh process: wall",
                "s",
                sizes.wall,
                ref_name="the parse floor",
                ref_value=floor_fig.median,
                target=target,
                note=f"CPU {statistics.median(sizes.cpu):.2f} s",
            )
        )
        if after_other_work:
            figures.append(
                Figure(
                    GROUP,
                    f"{name}, after other work (large heap): wall",
                    "s",
                    after_other_work,
                    ref_name="fresh process",
                    ref_value=statistics.median(sizes.wall),
                    target=target,
                )
            )
        figures.append(
            Figure(
                GROUP,
                f"{name}, fresh process: peak RSS",
                "MiB",
                sizes.peak,
                ref_name="the file",
                ref_value=sizes.mib,
                ratio_target=PEAK_TARGET if lines >= 10**6 else None,
            )
        )
    opts.extra["resume"] = {
        "lines": [s.lines for s in series],
        "mib": [s.mib for s in series],
        "wall_s": [statistics.median(s.wall) for s in series],
        "cpu_s": [statistics.median(s.cpu) for s in series],
        "peak_mib": [statistics.median(s.peak) for s in series],
    }
    return figures


def run(opts: Options) -> list[Figure]:
    """Rollout writing and resume."""
    with tempfile.TemporaryDirectory(prefix="relay-bench-") as name:
        tmp = Path(name)
        return [*_write_figures(opts, tmp), *_resume_figures(opts, tmp)]
