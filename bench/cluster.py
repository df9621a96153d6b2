"""Cluster: sessions on a deployment's hosts against sessions in the caller's process.

One local Ray instance (2 CPUs, no dashboard, loopback) serves the whole group; callers run on
asyncio, as the cluster requires, and so does the in-process reference. Every session writes
its rollout (a session needs it to move), in a temporary directory. Measured:

- the latency of one turn (submit → ``turn_complete``) through a one-host pool, against the same
  turn in process: the difference is what the hop to the host and back costs;
- throughput, turns per second: S sessions × T turns in process (one caller), and on a
  deployment of 1, 2 and 4 hosts with as many client *processes*, the sessions shared among
  them, all started at once: each caller decodes only its own sessions' events;
- memory: the host's resident set per idle session, with many sessions open on one host,
  against the caller's resident set per idle session in process;
- failover: a host holding sessions is killed (``ray.kill``); per session, the time from the
  kill to its ``session_resumed`` event and to its next op being accepted;
- a frozen host (SIGSTOP), with a 3 s lease: the time from the freeze to ``session_resumed``.

On a shared machine the callers, the hosts and Ray's own processes compete for the same cores,
so the throughput figures are a floor, not what a cluster of real nodes gives.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import attrs

import relay

from ._core import Better, Figure, Options, Target, ms

GROUP = "cluster"


def _config(root: Path) -> relay.Config:
    return relay.Config(cwd=str(root), rollout=relay.RolloutConfig(dir=str(root / "sessions")))


def _turn(index: int) -> relay.UserTurn:
    return relay.UserTurn(items=[relay.Text(f"question {index}")])


class _Reader:
    """Takes a session's events and wakes whoever waits for one of a kind."""

    def __init__(self, events: Callable[[], Any]) -> None:
        self._events = events
        self.seen: list[relay.Event] = []
        self._changed = anyio.Event()

    async def run(self) -> None:
        async for event in self._events():
            self.seen.append(event)
            self._changed.set()
            self._changed = anyio.Event()

    async def wait_for(self, cls: type, event_id: str | None = None) -> relay.Event:
        index = 0
        while True:
            for event in self.seen[index:]:
                if isinstance(event.msg, cls) and (event_id is None or event.id == event_id):
                    return event
            index = len(self.seen)
            await self._changed.wait()


async def _turns(
    submit: Callable[[relay.Op], Awaitable[str]], reader: _Reader, count: int
) -> list[float]:
    out: list[float] = []
    for index in range(count):
        start = time.perf_counter()
        turn_id = await submit(_turn(index))
        await reader.wait_for(relay.TurnComplete, turn_id)
        out.append(time.perf_counter() - start)
    return out


async def _local_turns(root: Path, count: int) -> list[float]:
    async with relay.open_session(_config(root)) as session:
        reader = _Reader(session.events)
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader.run)
            out = await _turns(session.submit, reader, count)
            await session.submit(relay.Shutdown())
    return out


async def _pool_turns(root: Path, count: int) -> list[float]:
    from relay.cluster import open_session_pool

    async with open_session_pool(1, _config(root)) as pool, pool.open_session() as session:
        reader = _Reader(session.events)
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader.run)
            out = await _turns(session.submit, reader, count)
            await session.shutdown()
    return out


def _cpu_s(pid: int) -> float:
    """The CPU seconds (user and system) process ``pid`` has used."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@attrs.frozen
class Run:
    """One throughput run: turns per second, and the CPU seconds the callers and the hosts
    used over its wall time."""

    turns: int
    wall_s: float
    caller_cpu_s: float
    host_cpu_s: float = 0.0

    @property
    def rate(self) -> float:
        return self.turns / self.wall_s

    @property
    def busy_cores(self) -> float:
        """CPU time over wall time: how many cores the callers and hosts kept busy."""
        return (self.caller_cpu_s + self.host_cpu_s) / self.wall_s

    def cpu_ms_per_turn(self) -> float:
        return (self.caller_cpu_s + self.host_cpu_s) * 1000 / self.turns


def _host_pids(address: str, namespace: str) -> list[int]:
    from relay.cluster import connect

    async def pids() -> list[int]:
        async with connect(address, namespace=namespace) as client:
            listing = await client.listing()
        return [h["pid"] for h in listing["hosts"] if h["state"] == "serving"]

    return anyio.run(pids, backend="asyncio")


def _throughput_processes(ray: Any, root: Path, hosts: int, sessions: int, turns: int) -> Run:
    """Turns per second on a deployment of ``hosts`` hosts, the sessions shared among as many
    client processes, all started at once."""
    from relay._cluster._deploy import down, up

    namespace = f"bench-{hosts}-{uuid.uuid4().hex[:6]}"
    address = ray.bench_address
    anyio.run(
        partial(
            up,
            namespace=namespace,
            hosts=hosts,
            host_cpus=min(1.0, 2.0 / hosts),
            lease_s=10.0,
            rollout_dir=str(root / "sessions"),
        ),
        backend="asyncio",
    )
    clients: list[subprocess.Popen[str]] = []
    try:
        share = [sessions // hosts + (1 if n < sessions % hosts else 0) for n in range(hosts)]
        for count in share:
            clients.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "bench._cluster_client",
                        address,
                        namespace,
                        str(count),
                        str(turns),
                        str(root),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    cwd=Path(__file__).resolve().parent.parent,
                )
            )
        for client in clients:
            assert client.stdout is not None
            if client.stdout.readline().strip() != "ready":
                raise RuntimeError("a cluster client did not start")
        host_pids = _host_pids(address, namespace)
        host_cpu = [_cpu_s(pid) for pid in host_pids]
        for client in clients:
            assert client.stdin is not None
            client.stdin.write("go\n")
            client.stdin.flush()
        results = []
        for client in clients:
            assert client.stdout is not None
            results.append(json.loads(client.stdout.readline()))
        host_cpu = [_cpu_s(pid) - before for pid, before in zip(host_pids, host_cpu, strict=True)]
        for client in clients:
            client.wait(timeout=120)
    finally:
        for client in clients:
            if client.poll() is None:
                client.kill()
        anyio.run(partial(down, namespace=namespace), backend="asyncio")
    total = sum(r["turns"] for r in results)
    wall = max(r["end"] for r in results) - min(r["start"] for r in results)
    return Run(total, wall, sum(r["cpu"] for r in results), sum(host_cpu))


def _local_run(root: Path, sessions: int, turns: int) -> Run:
    cpu = time.process_time()
    rate = anyio.run(_local_throughput, root, sessions, turns, backend="asyncio")
    return Run(sessions * turns, sessions * turns / rate, time.process_time() - cpu)


async def _local_throughput(root: Path, sessions: int, turns: int) -> float:
    """The same load, every session in the caller's process."""

    async def one() -> None:
        async with relay.open_session(_config(root)) as session:
            reader = _Reader(session.events)
            async with anyio.create_task_group() as tg:
                tg.start_soon(reader.run)
                await _turns(session.submit, reader, turns)
                await session.submit(relay.Shutdown())

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(sessions):
            tg.start_soon(one)
    return sessions * turns / (time.perf_counter() - start)


#: Sessions the memory figures open at a time, as a service opens them over time: what stays
#: is the sessions' cost, not the peak of opening hundreds at once.
OPENING = 16


def _rss_kib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024


async def _idle_sessions(
    open_one: Callable[[], Any], sessions: int, measure: Callable[[], float]
) -> float:
    """KiB ``measure`` grows by per idle session (each has run one turn)."""
    ready = anyio.Event()
    release = anyio.Event()
    count = [0]
    grown = [0.0]

    opening = anyio.CapacityLimiter(OPENING)

    async def one() -> None:
        await opening.acquire()
        async with open_one() as session:
            reader = _Reader(session.events)
            async with anyio.create_task_group() as tg:
                tg.start_soon(reader.run)
                await _turns(session.submit, reader, 1)
                opening.release()
                count[0] += 1
                if count[0] == sessions:
                    ready.set()
                await release.wait()
                tg.cancel_scope.cancel()

    before = measure()
    async with anyio.create_task_group() as tg:
        for _ in range(sessions):
            tg.start_soon(one)
        await ready.wait()
        gc.collect()
        grown[0] = measure() - before
        release.set()
    return grown[0] / sessions


async def _host_memory(root: Path, sessions: int) -> float:
    """KiB of the host's resident set per idle session."""
    from relay.cluster import open_session_pool

    async with open_session_pool(1, _config(root)) as pool:
        (host,) = await pool.hosts()
        pid = await pool.host_pid(host)
        await _idle_sessions(pool.open_session, 3, lambda: 0.0)  # imports and caches first
        return await _idle_sessions(pool.open_session, sessions, lambda: _rss_kib(pid))


async def _local_memory(root: Path, sessions: int) -> float:
    """KiB of the caller's resident set per idle session, in process."""
    await _idle_sessions(lambda: relay.open_session(_config(root)), 3, lambda: 0.0)
    return await _idle_sessions(
        lambda: relay.open_session(_config(root)), sessions, lambda: _rss_kib(os.getpid())
    )


async def _failover(
    root: Path, sessions: int, freeze: bool = False
) -> tuple[list[float], list[float]]:
    """Per moved session: loss → ``session_resumed``, and loss → next op accepted. The loss is
    a kill, or with ``freeze`` a SIGSTOP of the host's process (a 3 s lease)."""
    from relay import SessionResumed
    from relay.cluster import open_session_pool

    resumed: list[float] = []
    accepted: list[float] = []
    lease = 3.0 if freeze else 10.0
    async with open_session_pool(2, _config(root), lease_s=lease) as pool:
        opened: list[Any] = []
        readers: list[_Reader] = []
        async with anyio.create_task_group() as tg:

            async def one(ready: Any) -> None:
                async with pool.open_session() as session:
                    reader = _Reader(session.events)
                    opened.append(session)
                    readers.append(reader)
                    async with anyio.create_task_group() as inner:
                        inner.start_soon(reader.run)
                        turn_id = await session.submit(_turn(0))
                        await reader.wait_for(relay.TurnComplete, turn_id)
                        ready()
                        await reader.wait_for(relay.ShutdownComplete)

            ready = anyio.Event()
            count = [0]

            def one_ready() -> None:
                count[0] += 1
                if count[0] == 2 * sessions:
                    ready.set()

            for _ in range(2 * sessions):
                tg.start_soon(one, one_ready)
            await ready.wait()
            victim = opened[0].host
            moved = [i for i, s in enumerate(opened) if s.host == victim]
            pid = await pool.host_pid(victim)
            lost_at = time.perf_counter()
            if freeze:
                os.kill(pid, signal.SIGSTOP)
            else:
                await pool.kill_host(victim)

            async def back(index: int) -> None:
                await readers[index].wait_for(SessionResumed)
                resumed.append(time.perf_counter() - lost_at)
                await opened[index].submit(_turn(1))
                accepted.append(time.perf_counter() - lost_at)

            async with anyio.create_task_group() as waits:
                for index in moved:
                    waits.start_soon(back, index)
            if freeze:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass  # ended while frozen, as it should be
            for session in opened:
                await session.shutdown()
    return resumed, accepted


def _start_ray() -> Any:
    # Read when Ray is imported: loopback only, no usage report, no token for a local run.
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    context = ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    ray.bench_address = context.address_info["gcs_address"]
    return ray


#: A hosted session's cost in the host's memory, at most (KiB).
SESSION_KIB = Target("≤ 64 KiB", 64.0)
#: 4 hosts with 4 callers against 1 host with 1 caller, on a machine with the cores for it.
SCALING = Target("≥ 3× 1 host (with the cores)", 3.0, Better.HIGHER)


def run(opts: Options) -> list[Figure]:
    """The cluster figures (needs the ``ray`` extra)."""
    try:
        ray = _start_ray()
    except ImportError:
        opts.note("Ray is not installed (pip install 'relay-runtime[ray]'); cluster skipped.")
        return []
    figures: list[Figure] = []
    turns = opts.count(50, 5)
    sessions = opts.count(100, 8)
    per_session = opts.count(5, 2)
    moved = opts.count(50, 3)
    repeat = min(opts.repeat, 3)
    try:
        with tempfile.TemporaryDirectory(prefix="relay-bench-cluster-") as tmp:
            root = Path(tmp)
            anyio.run(_local_turns, root, 3, backend="asyncio")  # warm-up
            local = anyio.run(_local_turns, root, turns, backend="asyncio")
            pooled = anyio.run(_pool_turns, root, turns, backend="asyncio")
            local_ms = statistics.median(ms(local))
            figures.append(
                Figure(GROUP, "one turn in process (submit → turn_complete)", "ms", ms(local))
            )
            figures.append(
                Figure(
                    GROUP,
                    "one turn through a 1-host pool (submit → turn_complete)",
                    "ms",
                    ms(pooled),
                    ref_name="in process",
                    ref_value=local_ms,
                )
            )
            load = f"{sessions} sessions × {per_session} turns"
            local_runs = [_local_run(root, sessions, per_session) for _ in range(repeat)]
            in_process = [one.rate for one in local_runs]
            figures.append(Figure(GROUP, f"{load}, in process (1 caller)", "turns/s", in_process))
            runs: dict[int, list[Run]] = {}
            for hosts in (1, 2, 4):
                runs[hosts] = [
                    _throughput_processes(ray, root, hosts, sessions, per_session)
                    for _ in range(repeat)
                ]
            one_host = statistics.median(one.rate for one in runs[1])
            for hosts in (1, 2, 4):
                figures.append(
                    Figure(
                        GROUP,
                        f"{load}, {hosts} host(s), {hosts} client process(es)",
                        "turns/s",
                        [one.rate for one in runs[hosts]],
                        ref_name="1 host, 1 caller" if hosts > 1 else "in process",
                        ref_value=one_host if hosts > 1 else statistics.median(in_process),
                        ratio_target=SCALING if hosts == 4 else None,
                        note=f"{os.cpu_count()} cores: see docs/cluster.md" if hosts == 4 else "",
                    )
                )
            # CPU time beside wall time: how many cores each run kept busy, and what a turn
            # cost in CPU (callers and hosts; Ray's own processes are not counted).
            labelled = [("in process", local_runs)] + [
                (f"{hosts} host(s), {hosts} caller(s)", runs[hosts]) for hosts in (1, 2, 4)
            ]
            for label, measured in labelled:
                figures.append(
                    Figure(
                        GROUP,
                        f"{load}, {label}: CPU time ÷ wall time",
                        "cores",
                        [one.busy_cores for one in measured],
                    )
                )
                figures.append(
                    Figure(
                        GROUP,
                        f"{load}, {label}: CPU time per turn",
                        "ms",
                        [one.cpu_ms_per_turn() for one in measured],
                    )
                )
            idle = opts.count(500, 10)
            local_kib = anyio.run(_local_memory, root, idle, backend="asyncio")
            figures.append(
                Figure(
                    GROUP,
                    f"{idle} idle sessions in process: resident set per session",
                    "KiB",
                    [local_kib],
                )
            )
            figures.append(
                Figure(
                    GROUP,
                    f"{idle} idle sessions on one host: host resident set per session",
                    "KiB",
                    [anyio.run(_host_memory, root, idle, backend="asyncio")],
                    ref_name="in process",
                    ref_value=local_kib,
                    target=SESSION_KIB,
                )
            )
            for freeze in (False, True):
                resumed: list[float] = []
                accepted: list[float] = []
                for _ in range(opts.count(3, 1)):
                    got_resumed, got_accepted = anyio.run(
                        _failover, root, moved, freeze, backend="asyncio"
                    )
                    resumed += got_resumed
                    accepted += got_accepted
                how = "frozen (SIGSTOP, 3 s lease)" if freeze else "killed"
                figures.append(
                    Figure(
                        GROUP,
                        f"host {how} with {moved} sessions: loss → session_resumed",
                        "ms",
                        ms(resumed),
                    )
                )
                figures.append(
                    Figure(
                        GROUP,
                        f"host {how} with {moved} sessions: loss → next op accepted",
                        "ms",
                        ms(accepted),
                    )
                )
    finally:
        ray.shutdown()
    return figures
