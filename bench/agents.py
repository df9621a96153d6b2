"""Sub-agents: what a spawn costs, and how fast an interrupt quiets a tree (docs/benchmarks.md).

**A spawn.** A custom task at the root (:class:`_SpawnMany`) calls ``ctx.agents.spawn`` N
times; each child's first turn gets one scripted text reply. The floors, measured in the same
run: the same task spawning nothing (the cost of an op at the root), and N plain sessions
(``relay.open_session`` on the same scripted model and configuration, rollout off as the
children's), each given one turn. The model holds every request until the spawns (or the
openings) are done, so each is cut in two: the spawn calls (the child opened, its turn
submitted and started up to its request) and the whole, until every child has finished its
turn and waits. Per child: the whole less the empty task's, divided by N. Each round runs the
three in turn, their order rotated; CPU (``time.process_time``) is beside wall time. Memory
per idle child: the growth of the Python heap (tracemalloc, in a round of its own) and of the
resident set (in a fresh process each time), from before the op to every child idle, divided
by N; the models keep no request.

**An interrupt.** A tree root → 4 → 5 → 5 (124 descendants, 100 of them at depth 3), built by
the model's own ``spawn_agent`` calls (``features.multi_agent``, ``agents.max_depth = 3``),
every session then streaming a long reply slowly (``stall_ms``). Once every session of the tree
has a text delta out, ``relay.Interrupt`` goes to the root. Measured from that submit: the last
descendant's ``turn_aborted`` read on the root's one stream (``event.agent`` set), and "quiet"
read at the model, which routes by ``prompt_cache_key`` (the session id): the later of the
last request any session started after the interrupt and the last stream any session left.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

import relay
from relay._base._agents_config import AgentsConfig
from relay.lowlevel import OutputTextDelta
from relay.testing import ScriptedModel

from ._core import Figure, Options, Target, ms

GROUP = "agents"
_ROOT = Path(__file__).resolve().parent.parent
SPAWN_CPU_TARGET = Target("< 2 ms CPU per spawn", 2.0)
IDLE_MEMORY_TARGET = Target("< 64 KiB per idle child", 64.0)
QUIET_TARGET = Target("quiet ≤ 150 ms", 150.0)

#: The interrupted tree: children of the root, of each child, of each grandchild.
FANOUT = (4, 5, 5)
QUICK_FANOUT = (2, 2, 2)
#: Between two stream events of a streaming reply; a reply has 4 events per message.
STALL_MS = 50
STREAM_MESSAGES = 100


def _level(prompt: relay.lowlevel.Prompt) -> int:
    """The depth a session's first request names (``level D``; the root's: ``level 0``)."""
    for item in prompt.input:
        if isinstance(item, relay.Message) and item.role == "user":
            text = item.text()
            if text.startswith("level "):
                return int(text.removeprefix("level "))
    return 0


class _Router:
    """A model routing by ``prompt_cache_key``: one :class:`ScriptedModel` per session,
    its script chosen by the depth its first user message names; it logs when each request started
    and when each stream was left, and can hold every request until released."""

    def __init__(self, script_for: Callable[[int], dict[str, Any]]) -> None:
        self._script_for = script_for
        self.models: dict[str, ScriptedModel] = {}
        self.started: list[tuple[str, float]] = []
        self.left: list[tuple[str, float]] = []
        self.gate: trio.Event | None = None
        self.streaming: set[str] = set()
        self.expected = 0
        self.all_streaming = trio.Event()

    @asynccontextmanager
    async def stream(self, prompt: relay.lowlevel.Prompt) -> AsyncIterator[AsyncIterator[Any]]:
        key = prompt.prompt_cache_key
        self.started.append((key, time.perf_counter()))
        if self.gate is not None:
            await self.gate.wait()
        model = self.models.get(key)
        if model is None:
            script = self._script_for(_level(prompt))
            model = self.models[key] = ScriptedModel(script, request_log=0)
        if getattr(prompt, "agent_path", None) is not None:
            # One script per session here: the scripted model's own routing by path is not used.
            prompt = attrs.evolve(prompt, agent_path=None)
        try:
            async with model.stream(prompt) as events:
                yield self._watched(key, events)
        finally:
            self.left.append((key, time.perf_counter()))

    async def _watched(self, key: str, events: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for event in events:
            if isinstance(event, OutputTextDelta) and key not in self.streaming:
                self.streaming.add(key)
                if len(self.streaming) == self.expected:
                    self.all_streaming.set()
            yield event

    async def compact(self, request: Any) -> Any:
        raise NotImplementedError("no compaction here")


def _cpu() -> float:
    return time.process_time()


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# ----------------------------------------------------------------------------- spawn cost

_REPLY = {"text": "Done: the child looked and found nothing to change.", "total_tokens": 420}


def _spawn_config(count: int) -> relay.Config:
    return relay.Config(
        rollout=relay.RolloutConfig(enabled=False),
        agents=AgentsConfig(max_depth=1, max_threads=count + 8),
    )


@attrs.frozen(eq=False)
class _SpawnMany(relay.SessionTask):
    """Spawn ``count`` children, each with one turn to run; then release the model."""

    count: int
    router: _Router
    spent: list[tuple[float, float]]

    @property
    def kind(self) -> str:
        return "spawn_many"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        start, cpu = time.perf_counter(), _cpu()
        for _ in range(self.count):
            await ctx.agents.spawn("Look around.", None, event_id=ctx.view.turn_id)
        self.spent.append((time.perf_counter() - start, _cpu() - cpu))
        assert self.router.gate is not None
        self.router.gate.set()
        return "spawned"


@attrs.frozen
class _Measured:
    wall: float
    cpu: float
    first_wall: float = 0.0
    first_cpu: float = 0.0
    heap: float = 0.0
    rss: float = 0.0


async def _settle() -> None:
    gc.collect()
    await trio.testing.wait_all_tasks_blocked()


async def _spawn_op(count: int, trace: bool) -> _Measured:
    """One root session; an op that spawns ``count`` children, until every child waits."""
    router = _Router(lambda _: {"responses": [_REPLY]})
    router.gate = trio.Event()
    spent: list[tuple[float, float]] = []
    tasks = {"spawn_many": lambda op: _SpawnMany(count, router, spent)}
    config = _spawn_config(count)
    async with relay.open_session(config, model=router, tasks=tasks) as session:
        events = session.events()
        await _settle()
        heap0 = tracemalloc.get_traced_memory()[0] if trace else 0
        rss0 = _rss_bytes()
        start, cpu = time.perf_counter(), _cpu()
        turn_id = await session.submit(relay.CustomOp("spawn_many", {}))
        idle = 0
        root_done = False
        while idle < count or not root_done:
            event = await anext(events)
            if isinstance(event.msg, relay.TurnComplete):
                if event.agent is None and event.id == turn_id:
                    root_done = True
                elif event.agent is not None:
                    idle += 1
        wall, used = time.perf_counter() - start, _cpu() - cpu
        heap = rss = 0.0
        if count:
            await _settle()
            if trace:
                heap = (tracemalloc.get_traced_memory()[0] - heap0) / count
            rss = (_rss_bytes() - rss0) / count
        first = spent[0] if spent else (0.0, 0.0)
        return _Measured(wall, used, first[0], first[1], heap, rss)


async def _plain_sessions(count: int, trace: bool) -> _Measured:
    """``count`` plain sessions opened at once, each given one turn, until every one waits."""
    router = _Router(lambda _: {"responses": [_REPLY]})
    router.gate = trio.Event()
    config = _spawn_config(count)
    opened = idle = 0
    all_opened, all_idle, release = trio.Event(), trio.Event(), trio.Event()

    async def one() -> None:
        nonlocal opened, idle
        async with relay.open_session(config, model=router) as session:
            events = session.events()
            turn_id = await session.submit(relay.UserTurn(items=[relay.Text("Look around.")]))
            opened += 1
            if opened == count:
                all_opened.set()
            while True:
                event = await anext(events)
                if isinstance(event.msg, relay.TurnComplete) and event.id == turn_id:
                    break
            idle += 1
            if idle == count:
                all_idle.set()
            await release.wait()

    await _settle()
    heap0 = tracemalloc.get_traced_memory()[0] if trace else 0
    rss0 = _rss_bytes()
    start, cpu = time.perf_counter(), _cpu()
    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)
        await all_opened.wait()
        await trio.testing.wait_all_tasks_blocked()  # every turn has reached its request
        first_wall, first_cpu = time.perf_counter() - start, _cpu() - cpu
        router.gate.set()
        await all_idle.wait()
        wall, used = time.perf_counter() - start, _cpu() - cpu
        await _settle()
        heap = (tracemalloc.get_traced_memory()[0] - heap0) / count if trace else 0.0
        rss = (_rss_bytes() - rss0) / count
        release.set()
    return _Measured(wall, used, first_wall, first_cpu, heap, rss)


def _fresh_rss_kib(way: str, count: int) -> float:
    """Resident set growth per child (``spawn``) or per session (``plain``), in a fresh
    process after a warm-up of 2: in this one, the memory earlier rounds freed is reused and
    the growth reads 0."""
    fn = f"agents._{'spawn_op' if way == 'spawn' else 'plain_sessions'}"
    # A small warm-up first: the first session of a process loads and caches what it uses.
    code = (
        "import trio; from bench import agents; "
        f"trio.run({fn}, 2, False); print(trio.run({fn}, {count}, False).rss / 1024)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=_ROOT
    )
    return float(done.stdout.strip().splitlines()[-1])


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _spawn_figures(opts: Options) -> list[Figure]:
    count = opts.count(100, 5)
    rounds = opts.count(max(7, opts.repeat), 2)
    ways: dict[str, Callable[[bool], Any]] = {
        "empty": lambda trace: _spawn_op(0, trace),
        "spawn": lambda trace: _spawn_op(count, trace),
        "plain": lambda trace: _plain_sessions(count, trace),
    }
    got: dict[str, list[_Measured]] = {name: [] for name in ways}
    names = list(ways)
    for index in range(rounds + 1):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            measured = trio.run(ways[name], False)
            if index:  # the first round warms up
                got[name].append(measured)
    tracemalloc.start()
    try:
        traced = {name: trio.run(ways[name], True) for name in ("spawn", "plain")}
    finally:
        tracemalloc.stop()

    empty_wall = _median([m.wall for m in got["empty"]])
    empty_cpu = _median([m.cpu for m in got["empty"]])
    per = {
        name: {
            "wall": [(m.wall - (empty_wall if name == "spawn" else 0)) / count for m in got[name]],
            "cpu": [(m.cpu - (empty_cpu if name == "spawn" else 0)) / count for m in got[name]],
            "first_wall": [m.first_wall / count for m in got[name]],
            "first_cpu": [m.first_cpu / count for m in got[name]],
        }
        for name in ("spawn", "plain")
    }
    spawn, plain = per["spawn"], per["plain"]
    figures = [
        Figure(
            GROUP,
            "empty task at the root: submit → turn_complete, wall",
            "ms",
            ms([m.wall for m in got["empty"]]),
        ),
        Figure(GROUP, "empty task at the root: CPU", "ms", ms([m.cpu for m in got["empty"]])),
    ]
    for kind, label in (("first", "open, submit, up to the request"), ("", "until idle")):
        for clock in ("wall", "cpu"):
            key = f"{kind}_{clock}" if kind else clock
            name_plain = f"plain session ({label}): {'CPU' if clock == 'cpu' else 'wall'}"
            figures.append(Figure(GROUP, name_plain + ", per session", "ms", ms(plain[key])))
            spawn_name = (
                f"spawn ({'the spawn call' if kind else 'less the empty task, until idle'}): "
                f"{'CPU' if clock == 'cpu' else 'wall'}, per child"
            )
            figures.append(
                Figure(
                    GROUP,
                    spawn_name,
                    "ms",
                    ms(spawn[key]),
                    ref_name="plain session",
                    ref_value=_median(ms(plain[key])),
                    target=SPAWN_CPU_TARGET if clock == "cpu" and not kind else None,
                    note=f"N = {count}",
                )
            )
    figures.append(
        Figure(
            GROUP,
            "plain session idle: Python heap (tracemalloc), per session",
            "KiB",
            [traced["plain"].heap / 1024],
        )
    )
    figures.append(
        Figure(
            GROUP,
            "idle child: Python heap (tracemalloc), per child",
            "KiB",
            [traced["spawn"].heap / 1024],
            ref_name="plain session",
            ref_value=traced["plain"].heap / 1024,
            target=IDLE_MEMORY_TARGET,
            note=f"N = {count}",
        )
    )
    fresh = opts.count(3, 1)
    rss = {way: [_fresh_rss_kib(way, count) for _ in range(fresh)] for way in ("spawn", "plain")}
    figures.append(
        Figure(
            GROUP,
            "plain session idle: resident set growth, per session (fresh process)",
            "KiB",
            rss["plain"],
        )
    )
    figures.append(
        Figure(
            GROUP,
            "idle child: resident set growth, per child (fresh process)",
            "KiB",
            rss["spawn"],
            ref_name="plain session",
            ref_value=_median(rss["plain"]),
        )
    )
    return figures


# ----------------------------------------------------------------------------- interrupt


def _tree_script(fanout: tuple[int, ...]) -> Callable[[int], dict[str, Any]]:
    """The script of a session of the tree, by its depth."""
    text = " ".join(f"word{i}" for i in range(40))
    streaming = {
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            }
            for _ in range(STREAM_MESSAGES)
        ],
        "stall_ms": STALL_MS,
        "total_tokens": 900,
    }

    def script(depth: int) -> dict[str, Any]:
        if depth >= len(fanout):
            return {"responses": [streaming]}
        calls = [
            {
                "type": "function_call",
                "name": "spawn_agent",
                "arguments": json.dumps({"message": f"level {depth + 1}"}),
                "call_id": f"spawn-{index}",
            }
            for index in range(fanout[depth])
        ]
        return {"responses": [{"output": calls, "total_tokens": 500}, streaming]}

    return script


@attrs.frozen
class _Interrupted:
    last_aborted: float
    quiet: float
    late_requests: int
    descendants: int


async def _interrupt_once(fanout: tuple[int, ...]) -> _Interrupted:
    descendants = 0
    width = 1
    for count in fanout:
        width *= count
        descendants += width
    router = _Router(_tree_script(fanout))
    router.expected = descendants + 1
    config = relay.Config(
        rollout=relay.RolloutConfig(enabled=False),
        features=relay.Features(multi_agent=True),
        agents=AgentsConfig(max_depth=len(fanout), max_threads=descendants + 8),
    )
    aborted: dict[str, float] = {}
    async with relay.open_session(config, model=router) as session:
        events = session.events()
        await session.submit(relay.UserTurn(items=[relay.Text("level 0")]))
        done = trio.Event()

        async def read() -> None:
            async for event in events:
                if isinstance(event.msg, relay.TurnAborted) and event.agent is not None:
                    aborted.setdefault(event.agent.id, time.perf_counter())
                    if len(aborted) == descendants:
                        done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await router.all_streaming.wait()
            start = time.perf_counter()
            await session.submit(relay.Interrupt())
            with trio.move_on_after(10):
                await done.wait()
            await trio.sleep(0.3)  # anything that starts late shows in the model's log
            nursery.cancel_scope.cancel()
        late = [at for _, at in router.started if at >= start]
        last_left = max(at for _, at in router.left)
        quiet = max([*late, last_left]) - start
        last = max(aborted.values()) - start if len(aborted) == descendants else float("nan")
        return _Interrupted(last, quiet, len(late), len(aborted))


def _interrupt_figures(opts: Options) -> list[Figure]:
    fanout = QUICK_FANOUT if opts.quick else FANOUT
    rounds = opts.count(max(5, opts.repeat), 2)
    trio.run(_interrupt_once, fanout)  # warm-up
    runs = [trio.run(_interrupt_once, fanout) for _ in range(rounds)]
    shape = " → ".join(["root", *(str(n) for n in fanout)])
    count = runs[0].descendants
    late = sum(r.late_requests for r in runs)
    return [
        Figure(
            GROUP,
            f"interrupt, tree {shape} ({count} streaming): → last descendant's turn_aborted",
            "ms",
            ms([r.last_aborted for r in runs]),
        ),
        Figure(
            GROUP,
            f"interrupt, tree {shape}: → quiet at the model",
            "ms",
            ms([r.quiet for r in runs]),
            target=QUIET_TARGET,
            note=f"{late} request(s) started after the interrupt in {len(runs)} runs",
        ),
    ]


def run(opts: Options) -> list[Figure]:
    """The spawn cost and the interrupt of a streaming tree."""
    return _spawn_figures(opts) + _interrupt_figures(opts)
