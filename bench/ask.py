"""``Session.ask()`` without a reader: the memory of events nobody reads.

A program that only calls ``ask()`` never takes the event stream. Each run is a fresh process
that makes 10,000 ``ask()`` calls on the embedded scripted model (its echo answers, the rollout
off), with ``tracemalloc`` on, and notes the Python heap after every thousand calls and the
events left waiting at the end. The same run with a reader that reads every event is the
reference: what the history and the session hold whatever the program reads. Each repetition
runs both, in turn, so that a busy moment of the machine hits both alike.
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
from dataclasses import dataclass

from ._core import Figure, Options, Target

GROUP = "ask() without a reader"
FLAT = Target("flat: ≤ 1.1× with a reader", 1.1)
WAITING = Target("≤ 1,000", 1000.0)

#: Run in a fresh process: ``calls`` ``ask()`` calls, with a reader of every event or none;
#: prints the traced heap after every ``every`` calls, the CPU time, and the events waiting.
_ASKS = """
import gc, json, random, sys, time, tracemalloc, trio, relay
from relay.testing import ScriptedModel, fixed_clock

async def main(calls, read, every):
    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))
    heap = []
    async with (
        relay.open_session(
            config, model=ScriptedModel(), clock=fixed_clock, rng=random.Random(0)
        ) as session,
        trio.open_nursery() as nursery,
    ):
        if read:
            async def drain():
                async for _ in session.events():
                    pass
            nursery.start_soon(drain)
        cpu = time.process_time()
        for index in range(calls):
            if index % every == 0:
                gc.collect()
                heap.append(tracemalloc.get_traced_memory()[0])
            await session.ask(f"Question {index}: say hello.")
        gc.collect()
        heap.append(tracemalloc.get_traced_memory()[0])
        statistics = session.statistics()
        print(json.dumps({
            "heap": heap,
            "cpu": time.process_time() - cpu,
            "waiting": statistics.events_unread,
            "emitted": statistics.events_emitted,
        }), flush=True)
        nursery.cancel_scope.cancel()

tracemalloc.start()
trio.run(main, int(sys.argv[1]), sys.argv[2] == "read", int(sys.argv[3]))
"""


@dataclass(frozen=True)
class _Run:
    heap: list[int]
    """The traced heap before every ``every`` calls, and at the end."""
    cpu: float
    waiting: int
    emitted: int

    def growth(self, span: int, every: int) -> float:
        """Bytes per call the heap grew over span ``span`` (0: the first; -1: the last)."""
        before, after = list(itertools.pairwise(self.heap))[span]
        return (after - before) / every


def _run(calls: int, read: bool, every: int) -> _Run | None:
    from .process import measure

    run = measure(
        [sys.executable, "-c", _ASKS, str(calls), "read" if read else "none", str(every)],
        keep_stdout=True,
        timeout=1800,
    )
    if run.status != 0:
        return None
    return _Run(**json.loads(run.stdout))


def run(opts: Options) -> list[Figure]:
    """Heap growth per call of ``ask()`` without a reader, against a reader of every event."""
    calls, every = (150, 50) if opts.quick else (10_000, 1_000)
    runs: dict[bool, list[_Run]] = {False: [], True: []}
    for _ in range(opts.count(2, 1)):
        for read in (False, True):  # interleaved
            result = _run(calls, read, every)
            if result is None:
                opts.note(f"{calls:,} ask() calls in a fresh process failed")
                return []
            runs[read].append(result)

    def per_call(read: bool, span: int) -> list[float]:
        return [r.growth(span, every) for r in runs[read]]

    alone = runs[False]
    cpu = statistics.median(r.cpu for r in alone)
    return [
        Figure(
            GROUP,
            f"calls 1–{every:,}: heap growth per call",
            "B",
            per_call(False, 0),
            ref_name="with a reader",
            ref_value=statistics.median(per_call(True, 0)),
            note="the first 1,000 events are kept for a reader that may come",
        ),
        Figure(
            GROUP,
            f"calls {calls - every + 1:,}–{calls:,}: heap growth per call",
            "B",
            per_call(False, -1),
            ref_name="with a reader",
            ref_value=statistics.median(per_call(True, -1)),
            ratio_target=FLAT,
            note=f"the history's own; CPU {cpu / calls * 1000:.3f} ms per call (tracemalloc on)",
        ),
        Figure(
            GROUP,
            f"events waiting after {calls:,} calls ({alone[0].emitted:,} emitted)",
            "events",
            [float(r.waiting) for r in alone],
            target=WAITING,
        ),
    ]
