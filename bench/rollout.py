"""Rollout: write throughput with the flush discipline, and resume time.

Writing: the lines of real turns (``turn_started``, the user message as item and event, the
answer as item and event, ``token_count``, ``turn_complete``), appended through
:class:`relay._rollout.RolloutWriter` and flushed before every ``turn_complete``, as the
session does; against the floor of writing the same text, already encoded, with the same
flushes.

Resume: rollouts of 10k and 100k lines are made from the lines of a real session (text turns
and tool turns, no compaction, so that every line counts toward the restored history: the
worst case), and :func:`relay.resume_session` is timed from the call to a session ready for
its first op; against the floor of reading and JSON-decoding every line.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import anyio
import trio

import relay
from relay._rollout import RolloutWriter
from relay.testing import ScriptedModel

from ._core import Figure, Options, Target, no_gc
from ._drive import QUESTIONS, TurnDriver, config, lookup_tool, open_bench_session

GROUP = "rollout"
RESUME_TARGET = Target("≤ 2 s for 100k lines", 2.0)


def _turn_payloads(index: int) -> list[tuple[str, object]]:
    user = relay.user_message(f"{QUESTIONS[index % len(QUESTIONS)]} ({index})")
    answer = relay.assistant_message(f"Answer {index}: the build uses hatchling.")
    turn = f"sub-{index}"
    usage = relay.TokenUsage(total_tokens=1000 + index)
    return [
        ("event_msg", relay.to_json(relay.TurnStarted(turn, 200_000, 0.0))),
        ("response_item", relay.to_json(user)),
        ("event_msg", relay.to_json(relay.UserMessage(user.text()))),
        ("response_item", relay.to_json(answer)),
        ("event_msg", relay.to_json(relay.AgentMessage(answer.text()))),
        (
            "event_msg",
            relay.to_json(relay.TokenCount(relay.TokenUsageInfo(usage, usage, 200_000))),
        ),
        ("event_msg", relay.to_json(relay.TurnComplete(turn, answer.text(), 3))),
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


async def _resume_once(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    async with relay.resume_session(
        path, config(enabled=True), model=ScriptedModel({"responses": []})
    ) as session:
        elapsed = time.perf_counter() - start
        items = len(session.history)
    return elapsed, items


def _parse_floor(path: Path) -> float:
    start = time.perf_counter()
    with path.open("rb") as file:
        for line in file:
            json.loads(line)
    return time.perf_counter() - start


def _resume_figures(opts: Options, tmp: Path) -> list[Figure]:
    if not hasattr(relay, "resume_session"):
        opts.note("relay.resume_session is not there yet; resume was not measured.")
        return []
    source = trio.run(_record_session, tmp / "recorded", 40)
    figures = []
    for lines in opts.rollout_lines:
        original = tmp / f"resume-{lines}.jsonl"
        _make_rollout(source, lines, original)
        size_mib = original.stat().st_size / 2**20
        floor = [_parse_floor(original) for _ in range(3)]
        samples = []
        items = 0
        for attempt in range(max(3, opts.repeat // 2)):
            copy = tmp / f"resume-{lines}-{attempt}.jsonl"
            shutil.copyfile(original, copy)
            elapsed, items = anyio.run(_resume_once, copy, backend="trio")
            samples.append(elapsed)
        floor_fig = Figure(
            GROUP, f"floor: read + json.loads, {lines:,} lines ({size_mib:.0f} MiB)", "s", floor
        )
        figures.append(floor_fig)
        figures.append(
            Figure(
                GROUP,
                f"resume_session, {lines:,} lines → {items:,} history items",
                "s",
                samples,
                ref_name="the parse floor",
                ref_value=floor_fig.median,
                target=RESUME_TARGET if lines >= 100_000 else None,
            )
        )
    return figures


def run(opts: Options) -> list[Figure]:
    """Rollout writing and resume."""
    with tempfile.TemporaryDirectory(prefix="relay-bench-") as name:
        tmp = Path(name)
        return [*_write_figures(opts, tmp), *_resume_figures(opts, tmp)]
