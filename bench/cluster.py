"""Cluster: sessions in a pool of Ray actors against sessions in the caller's process.

One local Ray instance (2 CPUs, no dashboard, loopback) serves the whole group; the caller runs
on asyncio, as the pool requires, and so does the in-process reference. Every session writes
its rollout (a pool needs it to fail over), in a temporary directory. Measured:

- the latency of one turn (submit → ``turn_complete``) through a one-host pool, against the same
  turn in process: the difference is what the hop to the actor and back costs;
- throughput, sessions × turns per second, in process and with 1 and 2 hosts: every session
  runs its turns one after the other, all sessions at once;
- the host's resident set per idle session, with many sessions open on one host;
- failover: a host holding sessions is killed (``ray.kill``, no restart); per session, the time
  from the kill to its ``session_resumed`` event and to its next op being accepted.

On a shared machine the caller, the hosts and Ray's own processes compete for the same cores,
so the throughput figures are a floor, not what a cluster of real nodes gives.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

import relay

from ._core import Figure, Options, ms

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


async def _throughput(root: Path, hosts: int, sessions: int, turns: int) -> float:
    """Sessions × turns per second, all sessions at once, each turn after the last."""
    from relay.cluster import open_session_pool

    async with open_session_pool(hosts, _config(root)) as pool:

        async def one() -> None:
            async with pool.open_session() as session:
                reader = _Reader(session.events)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(reader.run)
                    await _turns(session.submit, reader, turns)
                    await session.shutdown()

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(sessions):
                tg.start_soon(one)
        elapsed = time.perf_counter() - start
    return sessions * turns / elapsed


async def _local_throughput(root: Path, sessions: int, turns: int) -> float:
    """The same load as :func:`_throughput`, every session in the caller's process."""

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


def _rss_kib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024


async def _host_memory(root: Path, sessions: int) -> float:
    """KiB of the host's resident set per idle session (each has run one turn)."""
    from relay.cluster import open_session_pool

    async with open_session_pool(1, _config(root)) as pool:
        pid = await pool.host_pid(pool.hosts[0])
        async with pool.open_session() as warm:  # imports and caches, before measuring
            reader = _Reader(warm.events)
            async with anyio.create_task_group() as tg:
                tg.start_soon(reader.run)
                await _turns(warm.submit, reader, 1)
                await warm.shutdown()
        before = _rss_kib(pid)
        ready = anyio.Event()
        release = anyio.Event()
        count = [0]

        async def one() -> None:
            async with pool.open_session() as session:
                reader = _Reader(session.events)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(reader.run)
                    await _turns(session.submit, reader, 1)
                    count[0] += 1
                    if count[0] == sessions:
                        ready.set()
                    await release.wait()
                    await session.shutdown()

        async with anyio.create_task_group() as tg:
            for _ in range(sessions):
                tg.start_soon(one)
            await ready.wait()
            grown = _rss_kib(pid) - before
            release.set()
    return grown / sessions


async def _failover(root: Path, sessions: int) -> tuple[list[float], list[float]]:
    """Per moved session: kill → ``session_resumed``, and kill → next op accepted."""
    from relay.cluster import SessionResumed, open_session_pool

    resumed: list[float] = []
    accepted: list[float] = []
    async with open_session_pool(2, _config(root)) as pool:
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
            killed_at = time.perf_counter()
            pool.kill_host(victim)

            async def back(index: int) -> None:
                await readers[index].wait_for(SessionResumed)
                resumed.append(time.perf_counter() - killed_at)
                await opened[index].submit(_turn(1))
                accepted.append(time.perf_counter() - killed_at)

            async with anyio.create_task_group() as waits:
                for index in moved:
                    waits.start_soon(back, index)
            for session in opened:
                await session.shutdown()
    return resumed, accepted


def _start_ray() -> Any:
    # Read when Ray is imported: loopback only, no usage report, no token for a local run.
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    return ray


def run(opts: Options) -> list[Figure]:
    """The cluster figures (needs the ``ray`` extra)."""
    try:
        ray = _start_ray()
    except ImportError:
        opts.note("Ray is not installed (pip install 'relay-runtime[ray]'); cluster skipped.")
        return []
    figures: list[Figure] = []
    turns = opts.count(50, 5)
    sessions = opts.count(100, 6)
    per_session = opts.count(5, 2)
    moved = opts.count(50, 3)
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
            rates: dict[int, list[float]] = {}
            for hosts in (1, 2):
                rates[hosts] = [
                    anyio.run(_throughput, root, hosts, sessions, per_session, backend="asyncio")
                    for _ in range(min(opts.repeat, 3))
                ]
            one_host = statistics.median(rates[1])
            in_process = [
                anyio.run(_local_throughput, root, sessions, per_session, backend="asyncio")
                for _ in range(min(opts.repeat, 3))
            ]
            figures.append(
                Figure(
                    GROUP,
                    f"{sessions} sessions × {per_session} turns, in process",
                    "turns/s",
                    in_process,
                )
            )
            for hosts in (1, 2):
                figures.append(
                    Figure(
                        GROUP,
                        f"{sessions} sessions × {per_session} turns, {hosts} host(s)",
                        "turns/s",
                        rates[hosts],
                        ref_name="1 host" if hosts == 2 else "in process",
                        ref_value=one_host if hosts == 2 else statistics.median(in_process),
                    )
                )
            idle = opts.count(500, 10)
            figures.append(
                Figure(
                    GROUP,
                    f"{idle} idle sessions on one host: host resident set per session",
                    "KiB",
                    [anyio.run(_host_memory, root, idle, backend="asyncio")],
                )
            )
            resumed: list[float] = []
            accepted: list[float] = []
            for _ in range(opts.count(3, 1)):
                got_resumed, got_accepted = anyio.run(_failover, root, moved, backend="asyncio")
                resumed += got_resumed
                accepted += got_accepted
            figures.append(
                Figure(
                    GROUP,
                    f"host killed with {moved} sessions: kill → session_resumed",
                    "ms",
                    ms(resumed),
                )
            )
            figures.append(
                Figure(
                    GROUP,
                    f"host killed with {moved} sessions: kill → next op accepted",
                    "ms",
                    ms(accepted),
                )
            )
    finally:
        ray.shutdown()
    return figures
