"""Scale: N concurrent sessions in one process, each doing 3 turns and a compaction.

All N sessions run at once under one trio loop, each on its own scripted model. Reported: the
total time, wall and CPU (against N times one session alone, measured in the same run:
concurrency on one thread cannot beat serial work, so the ratio shows what running together
costs), the latency of each turn (submit → ``turn_complete``) and of the first event of each op
(submit → ``turn_started``) pooled over all sessions, with the first event's 99th percentile
in each run held to :data:`FIRST_EVENT_TARGET`, and the memory each session holds once it is
idle:
the growth of the Python heap (tracemalloc, in a separate run) and of the process's resident
set, divided by N. The models' request logs are cleared before memory is read: they belong to
the test double, not to the session.
"""

from __future__ import annotations

import gc
import os
import time
import tracemalloc
from typing import Any

import trio
import trio.testing

import relay
from relay.testing import ScriptedModel

from ._core import Figure, Options, Target, ms, percentile
from ._drive import QUESTIONS, TurnDriver, open_bench_session, text_reply

GROUP = "scale"
MEMORY_TARGET = Target("≤ 100 KiB per idle session", 100.0)
#: A turn's first event waits for no other session's work (docs/benchmarks.md).
FIRST_EVENT_TARGET = Target("p99 ≤ 50 ms", 50.0)


def _script() -> dict[str, Any]:
    return {
        "responses": [
            text_reply(0),
            text_reply(1),
            text_reply(2),
            {"text": "Summary: three questions about the build.", "total_tokens": 300},
        ]
    }


class _Run:
    def __init__(self, count: int) -> None:
        self.count = count
        self.finished = 0
        self.all_finished = trio.Event()
        self.release = trio.Event()
        self.turns: list[float] = []
        self.first_events: list[float] = []
        self.models: list[ScriptedModel] = []

    async def session(self) -> None:
        model = ScriptedModel(_script())
        self.models.append(model)
        async with open_bench_session(model) as session:
            driver = TurnDriver(session)
            for index in range(3):
                start = time.perf_counter()
                turn_id = await session.submit(relay.UserTurn(items=[relay.Text(QUESTIONS[index])]))
                await driver.wait_for(relay.TurnStarted, turn_id)
                self.first_events.append(time.perf_counter() - start)
                await driver.wait_for(relay.TurnComplete, turn_id)
                self.turns.append(time.perf_counter() - start)
            start = time.perf_counter()
            turn_id = await session.submit(relay.Compact())
            await driver.wait_for(relay.TurnStarted, turn_id)
            self.first_events.append(time.perf_counter() - start)
            await driver.wait_for(relay.ContextCompacted, turn_id)
            await driver.wait_for(relay.TurnComplete, turn_id)
            self.finished += 1
            if self.finished == self.count:
                self.all_finished.set()
            await self.release.wait()


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def _one(count: int, trace: bool) -> tuple[float, _Run, float, float, float]:
    """Run ``count`` sessions; seconds, the run, heap bytes and RSS bytes per idle session,
    seconds of CPU."""
    run = _Run(count)
    gc.collect()
    rss_before = _rss_bytes()
    heap_before = tracemalloc.get_traced_memory()[0] if trace else 0
    start, cpu_start = time.perf_counter(), time.process_time()
    heap = rss = 0.0
    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(run.session)
        await run.all_finished.wait()
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        for model in run.models:
            model.requests.clear()
            model.prompts.clear()
        gc.collect()
        await trio.testing.wait_all_tasks_blocked()
        if trace:
            heap = (tracemalloc.get_traced_memory()[0] - heap_before) / count
        rss = (_rss_bytes() - rss_before) / count
        run.release.set()
    return elapsed, run, heap, rss, cpu


def run(opts: Options) -> list[Figure]:
    """N concurrent sessions, for each N of ``opts.session_counts``."""
    figures: list[Figure] = []
    series: dict[str, list[float]] = {"sessions": [], "heap_kib": [], "rss_kib": [], "total_s": []}
    trio.run(_one, 5, False)  # warm-up
    alone_runs = [trio.run(_one, 1, False) for _ in range(opts.count(max(5, opts.repeat)))]
    alone = [one[0] for one in alone_runs]
    alone_median = sorted(alone)[len(alone) // 2]
    alone_cpu = sorted(one[4] for one in alone_runs)[len(alone) // 2]
    figures.append(Figure(GROUP, "1 session alone: 3 turns + compact", "ms", ms(alone)))
    for count in opts.session_counts:
        totals: list[float] = []
        cpus: list[float] = []
        turns: list[float] = []
        firsts: list[float] = []
        first_p99s: list[float] = []
        rss_samples: list[float] = []
        for _ in range(min(opts.repeat, 3)):
            elapsed, done, _, rss, cpu = trio.run(_one, count, False)
            totals.append(elapsed)
            cpus.append(cpu)
            turns += done.turns
            firsts += done.first_events
            first_p99s.append(percentile(ms(done.first_events), 99))
            rss_samples.append(rss / 1024)
        tracemalloc.start()
        try:
            _, _, heap, _, _ = trio.run(_one, count, True)
        finally:
            tracemalloc.stop()
        heap_kib = heap / 1024
        figures.append(
            Figure(
                GROUP,
                f"{count:,} sessions: total time",
                "s",
                totals,
                ref_name=f"{count:,} × one session alone",
                ref_value=count * alone_median,
            )
        )
        figures.append(
            Figure(
                GROUP,
                f"{count:,} sessions: total CPU time",
                "s",
                cpus,
                ref_name=f"{count:,} × one session alone",
                ref_value=count * alone_cpu,
            )
        )
        figures.append(
            Figure(
                GROUP,
                f"{count:,} sessions: per-turn latency (submit → turn_complete)",
                "ms",
                ms(turns),
                note=f"p99 {percentile(ms(turns), 99):.1f} ms",
            )
        )
        figures.append(
            Figure(
                GROUP,
                f"{count:,} sessions: first-event latency (submit → turn_started)",
                "ms",
                ms(firsts),
                note=f"p99 {percentile(ms(firsts), 99):.1f} ms",
            )
        )
        figures.append(
            Figure(
                GROUP,
                f"{count:,} sessions: first-event latency, p99 of each run",
                "ms",
                first_p99s,
                target=FIRST_EVENT_TARGET,
            )
        )
        figures.append(
            Figure(
                GROUP,
                f"{count:,} sessions: Python heap per idle session (tracemalloc)",
                "KiB",
                [heap_kib],
                target=MEMORY_TARGET,
            )
        )
        figures.append(
            Figure(
                GROUP,
                f"{count:,} sessions: resident set growth per idle session",
                "KiB",
                rss_samples,
                ref_name="the heap figure",
                ref_value=heap_kib,
            )
        )
        series["sessions"].append(count)
        series["heap_kib"].append(heap_kib)
        series["rss_kib"].append(sorted(rss_samples)[len(rss_samples) // 2])
        series["total_s"].append(sorted(totals)[len(totals) // 2])
    opts.extra["scale"] = series
    return figures
