"""The registry: one Ray actor that knows a deployment's hosts, their leases, which session is
on which host and in which epoch, and that moves sessions (``docs/cluster.md``).

Theory of operation. The registry starts hosts (:meth:`Registry.add_hosts`): one placement
group of their CPUs, spread over the nodes, with a bound on the wait for room; then the
storage check (``_checks.py``), after which a host that does not see the shared rollout
directory is kept out of placement and named. It places each new session on the least loaded
serving host (:meth:`Registry.open`), after checking that every serving host can read the paths
and load the tasks the session needs (``_checks.py``). Hosts renew their lease with it
(:meth:`Registry.renew`), reporting the last event of each session that changed; the reply
extends each session's seq grant.

A host is lost when its lease runs out while the registry can hear it (it checks several
times per lease, and counts no time it was stopped: ``_leases.lost_leases``) or when its
process is gone (the registry has a call pending on every host, which fails at once then). Its
sessions then move, each to the least loaded serving host on another node when there is one,
in the next epoch, after the last number the lost host was granted; when no host serves, they
wait for one started in a lost one's place. The registry kills what is left of the lost host,
and starts a replacement in its place in the placement group, which Ray runs as soon as the
cluster has room for it. Callers learn of moves by waiting on :meth:`Registry.moves`.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import attrs

from .._base._config import Config
from ._checks import Confirmed, check_storage, session_problem
from ._host import remote_host_class
from ._leases import GRANT, MoveLog, check_every, grant, hearing_since, lock_wait, lost_leases
from ._ledger import choose_host
from ._ray import (
    actor_errors,
    cpus,
    group_name,
    host_name,
    import_ray,
    placement_problem,
    relay_error,
    within,
)

#: How long a request for hosts waits for the cluster to have room for them.
PLACEMENT_WAIT_S = 10.0
#: How long a placed host has to start (its process, its imports).
START_WAIT_S = 120.0
#: The longest pause between two tries at starting a replacement host.
REPLACE_PAUSE_S = 10.0
#: Ended sessions ``relay cluster ls`` still shows.
ENDED_KEPT = 200


@attrs.define(eq=False)
class HostRecord:
    """What the registry knows of one host."""

    name: str
    handle: Any
    group: Any
    bundle: int
    cpus: float
    state: str = "starting"
    """``starting``, ``serving``, ``no storage`` or ``lost``."""
    node: str | None = None
    pid: int | None = None
    renewed_at: float = 0.0
    problem: str | None = None
    sessions: set[str] = attrs.field(factory=set)


@attrs.define(eq=False)
class SessionRecord:
    """What the registry knows of one session."""

    id: str
    host: str | None
    epoch: int
    first_seq: int
    limit: int
    rollout: str | None
    config: Config
    state: str = "running"
    """``idle``, ``running``, ``moving``, ``ended`` or ``lost``."""
    last: tuple[int, str, float] | None = None
    problem: str | None = None


class Registry:
    """A deployment's registry; one per deployment, named ``<prefix>-registry``."""

    def __init__(
        self,
        prefix: str,
        lease_s: float,
        rollout_dir: str,
        detached: bool,
        namespace: str | None = None,
        tasks: dict[str, str] | None = None,
    ) -> None:
        self.prefix = prefix
        self.namespace = namespace
        """The Ray namespace of the deployment's named actors (None: the job's)."""
        self.tasks = tasks or {}
        """The tasks whose modules the hosts carry (op type: factory as a host names it)."""
        self.lease_s = lease_s
        self.rollout_dir = rollout_dir
        self.detached = detached
        self._ray: Any = None
        self._hosts: dict[str, HostRecord] = {}
        self._sessions: dict[str, SessionRecord] = {}
        self._ended: list[str] = []
        self._moves = MoveLog()
        self._moved = asyncio.Event()
        self._groups: list[Any] = []
        self._next_host = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._monitoring = False
        self._closing = False
        self._confirmed = Confirmed()
        self._heard_since = 0.0
        """From when the registry could hear its hosts (``_leases.hearing_since``)."""
        self._replacing = 0
        """Hosts being started in the place of lost ones."""
        self._serving = asyncio.Event()
        """Set (and made anew) whenever a host begins to serve."""

    # ------------------------------------------------------------------ plumbing

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _start_monitor(self) -> None:
        if not self._monitoring:
            self._monitoring = True
            self._ray = import_ray()
            self._spawn(self._monitor())

    async def settings(self) -> dict[str, Any]:
        """The deployment's settings."""
        return {
            "prefix": self.prefix,
            "lease_s": self.lease_s,
            "rollout_dir": self.rollout_dir,
            "detached": self.detached,
            "tasks": self.tasks,
        }

    # ------------------------------------------------------------------ hosts

    async def add_hosts(self, count: int, host_cpus: float) -> dict[str, Any]:
        """Start ``count`` hosts of ``host_cpus`` CPUs, spread over the nodes; check storage.

        Returns ``{"hosts": [...], "problems": [...]}``, or ``{"error": ...}`` when the cluster
        cannot place them (within :data:`PLACEMENT_WAIT_S`) or they do not start.
        """
        self._start_monitor()
        ray = self._ray
        from ray.util.placement_group import placement_group, remove_placement_group

        total, free = cpus(ray)
        if count * host_cpus > total:
            return {"error": placement_problem(count, host_cpus, total, free)}
        bundles = [{"CPU": host_cpus}] * count if host_cpus > 0 else [{"CPU": 0.001}] * count
        group = placement_group(
            bundles,
            strategy="SPREAD",
            name=group_name(self.prefix, len(self._groups)),
            lifetime="detached" if self.detached else None,
        )
        try:
            await asyncio.wait_for(group.ready(), PLACEMENT_WAIT_S)
        except TimeoutError:
            remove_placement_group(group)
            return {"error": placement_problem(count, host_cpus, total, free)}
        self._groups.append(group)
        records = [self._create_host(group, index, host_cpus) for index in range(count)]
        try:
            await asyncio.wait_for(
                asyncio.gather(*(self._started(record) for record in records)), START_WAIT_S
            )
        except TimeoutError:
            for record in records:
                ray.kill(record.handle, no_restart=True)
                self._hosts.pop(record.name, None)
            return {"error": f"the hosts did not start within {START_WAIT_S:g} s"}
        problems = await self._check_storage(records)
        return {"hosts": [record.name for record in records], "problems": problems}

    def _create_host(self, group: Any, bundle: int, host_cpus: float) -> HostRecord:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        name = host_name(self.prefix, self._next_host)
        self._next_host += 1
        placed = {"namespace": self.namespace} if self.namespace is not None else {}
        handle = (
            remote_host_class(self._ray)
            .options(
                **placed,
                name=name,
                lifetime="detached" if self.detached else None,
                max_restarts=0,
                max_concurrency=100_000,
                num_cpus=host_cpus,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    group, placement_group_bundle_index=bundle
                ),
            )
            .remote(name, self.lease_s)
        )
        record = HostRecord(name, handle, group, bundle, host_cpus)
        self._hosts[name] = record
        return record

    async def _started(self, record: HostRecord) -> None:
        me = self._ray.get_runtime_context().current_actor
        where = await record.handle.start.remote(me)
        record.node, record.pid = where["node"], where["pid"]
        record.renewed_at = time.monotonic()
        record.state = "checking"
        self._spawn(self._watch(record))

    async def _watch(self, record: HostRecord) -> None:
        try:
            await record.handle.watch.remote()
        except actor_errors(self._ray) as exc:
            if record.state != "lost":
                why = "its node died" if "node" in str(exc).lower() else "its process died"
                await self._lose(record, why)

    async def _check_storage(self, records: list[HostRecord]) -> list[str]:
        serving = [r for r in self._hosts.values() if r.state == "serving"]
        problems = await check_storage(self._ray, self.rollout_dir, serving, records)
        if any(record.state == "serving" for record in records):
            self._served()
        return problems

    async def renew(
        self, host: str, report: dict[str, tuple[int, str, float, bool, bool]]
    ) -> dict[str, Any]:
        """A host renews its lease and reports its sessions' last events; the reply says
        whether it lost its sessions meanwhile, and extends their seq grants."""
        record = self._hosts.get(host)
        if record is None or record.state == "lost":
            return {"lost": True, "grants": {}}
        record.renewed_at = time.monotonic()
        grants: dict[str, int] = {}
        for key, (seq, kind, at, running, ended) in report.items():
            session = self._sessions.get(key)
            if session is None or session.host != host:
                continue
            session.last = (seq, kind, at)
            session.limit = max(session.limit, grant(seq))
            grants[key] = session.limit
            if ended:
                self._end_session(session)
            elif session.state in ("idle", "running"):
                session.state = "running" if running else "idle"
        return {"lost": False, "grants": grants}

    async def grant(self, host: str, key: str, seq: int) -> int | None:
        """A host reached the limit of a session's seq grant: the new limit (None: this
        host no longer holds the session)."""
        session = self._sessions.get(key)
        record = self._hosts.get(host)
        if session is None or session.host != host or record is None or record.state == "lost":
            return None
        session.limit = max(session.limit, grant(seq))
        return session.limit

    def _end_session(self, session: SessionRecord) -> None:
        session.state = "ended"
        if session.host is not None and session.host in self._hosts:
            self._hosts[session.host].sessions.discard(session.id)
        self._ended.append(session.id)
        while len(self._ended) > ENDED_KEPT:
            self._sessions.pop(self._ended.pop(0), None)

    async def _monitor(self) -> None:
        checked = time.monotonic()
        while True:
            await asyncio.sleep(check_every(self.lease_s))
            now = time.monotonic()
            # Woken late (stopped, or held up), the registry judges no lease by the time it
            # could not hear: the renewals sent meanwhile are still unread.
            self._heard_since = hearing_since(self._heard_since, checked, now, self.lease_s)
            checked = now
            live = {
                r.name: r.renewed_at
                for r in self._hosts.values()
                if r.state in ("checking", "serving", "no storage")
            }
            for name in lost_leases(live, self.lease_s, now, self._heard_since):
                record = self._hosts[name]
                await self._lose(
                    record, f"its lease ran out ({self.lease_s:g} s without a renewal)"
                )

    async def _lose(self, record: HostRecord, why: str) -> None:
        """``record`` is lost: kill what is left of it, move its sessions, replace it."""
        if record.state == "lost":
            return
        was_serving = record.state == "serving"
        record.state = "lost"
        record.problem = why
        lease_ends = record.renewed_at + self.lease_s
        noticed_at = time.time()
        try:
            self._ray.kill(record.handle, no_restart=True)
        except Exception:  # already gone
            pass
        if was_serving or record.node is None:
            self._replacing += 1  # counted before its sessions look for a host
            self._spawn(self._replace(record))
        for key in list(record.sessions):
            self._spawn(self._move(key, record, lease_ends, noticed_at))

    async def _replace(self, lost: HostRecord) -> None:
        """A host in the lost one's place in its placement group: Ray starts it once the
        cluster has room (at once, when the lost host's node is still there). While the
        group's bundle is being placed again (its node died), a start fails: it is tried
        again, less and less often, as long as the deployment runs."""
        pause = 1.0
        try:
            while not self._closing:
                record = self._create_host(lost.group, lost.bundle, lost.cpus)
                try:
                    await self._started(record)
                except actor_errors(self._ray):
                    # Not a host that ever served: it leaves no trace in the listing.
                    self._hosts.pop(record.name, None)
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, REPLACE_PAUSE_S)
                    continue
                await self._check_storage([record])
                return
        finally:
            self._replacing -= 1
            self._served()  # sessions waiting for it look again

    async def _move(self, key: str, lost: HostRecord, lease_ends: float, noticed_at: float) -> None:
        session = self._sessions.get(key)
        lost.sessions.discard(key)
        if session is None or session.state in ("ended", "lost", "moving"):
            # A moving session is the business of the move under way: it was only being placed
            # on ``lost`` (which died taking it over), and that move places it elsewhere.
            return
        session.state = "moving"
        if session.rollout is None:
            self._lose_session(session, f"its host {lost.name} was lost and it has no rollout")
            return
        errors = actor_errors(self._ray)
        while True:
            target = self._choose(avoid_node=lost.node)
            if target is None:
                if self._closing or not self._replacing:
                    self._lose_session(
                        session, f"its host {lost.name} was lost and no host is left"
                    )
                    return
                # No host serves, and one is starting in a lost one's place: the session goes
                # on there (every host may have ended itself while the registry was stopped).
                session.problem = f"its host {lost.name} was lost; it waits for a host to serve"
                waiter = self._serving
                await waiter.wait()
                continue
            epoch = session.epoch + 1
            target.sessions.add(key)
            try:
                started = await target.handle.resume.remote(
                    key,
                    session.rollout,
                    session.config,
                    epoch,
                    session.limit,
                    lock_wait(lease_ends, time.monotonic()),
                    lost.name,
                    noticed_at,
                )
            except errors:
                target.sessions.discard(key)
                await self._lose(target, "it died while taking a session over")
                continue
            except Exception as exc:
                target.sessions.discard(key)
                found = relay_error(exc)
                self._lose_session(session, str(found) if found else f"cannot resume: {exc}")
                return
            break
        session.host, session.epoch = target.name, epoch
        session.first_seq, session.limit = started["first_seq"], started["limit"]
        session.state, session.problem = "running", None
        self._moves.add(key, target.name, epoch, session.first_seq)
        self._wake()

    def _lose_session(self, session: SessionRecord, why: str) -> None:
        session.state, session.problem, session.host = "lost", why, None
        self._moves.add(session.id, None, session.epoch, session.first_seq, why)
        self._wake()

    def _served(self) -> None:
        self._serving.set()
        self._serving = asyncio.Event()

    def _wake(self) -> None:
        self._moved.set()
        self._moved = asyncio.Event()

    def _choose(self, avoid_node: str | None = None) -> HostRecord | None:
        serving = {r.name: len(r.sessions) for r in self._hosts.values() if r.state == "serving"}
        nodes = {r.name: r.node or "" for r in self._hosts.values()}
        name = choose_host(serving, nodes, avoid_node=avoid_node)
        return self._hosts[name] if name is not None else None

    # ------------------------------------------------------------------ sessions

    async def open(
        self, key: str, config: Config, trace: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """Open session ``key`` on the least loaded serving host, in the caller's trace context
        ``trace``: ``{"host", "epoch", "first_seq", "rollout"}``, or ``{"error": ...}``
        (``{"no_host": ...}`` when none)."""
        self._start_monitor()
        if key in self._sessions and self._sessions[key].state != "ended":
            return {"error": f"session {key} is already open"}
        config = in_deployment(config, self.rollout_dir)
        problem = await self.problem(config)
        if problem is not None:
            return {"error": problem}
        errors = actor_errors(self._ray)
        while True:
            target = self._choose()
            if target is None:
                return {"no_host": "no host of this deployment is serving"}
            target.sessions.add(key)
            limit = GRANT
            try:
                opened = await target.handle.open.remote(key, config, 1, limit, trace)
            except errors:
                target.sessions.discard(key)
                await self._lose(target, "it died while opening a session")
                continue
            except Exception as exc:
                target.sessions.discard(key)
                found = relay_error(exc)
                return {"error": str(found) if found else f"cannot open the session: {exc}"}
            break
        self._sessions[key] = SessionRecord(
            key, target.name, 1, 1, limit, opened["rollout"], config, state="idle"
        )
        return {"host": target.name, "epoch": 1, "first_seq": 1, "rollout": opened["rollout"]}

    async def problem(self, config: Config) -> str | None:
        """Why a session of ``config`` could not run on every serving host, if it could not:
        a path a host cannot read, a task it cannot load."""
        self._start_monitor()
        serving = [r for r in self._hosts.values() if r.state == "serving"]
        return await session_problem(self._ray, serving, self._confirmed, config)

    async def locate(self, key: str) -> dict[str, Any] | None:
        """Where session ``key`` is now (None: unknown here)."""
        session = self._sessions.get(key)
        if session is None:
            return None
        return {
            "host": session.host,
            "epoch": session.epoch,
            "first_seq": session.first_seq,
            "rollout": session.rollout,
            "state": session.state,
            "problem": session.problem,
            "config": session.config,
        }

    async def moves(self, since: int, wait_s: float) -> dict[str, Any]:
        """The moves after ``since``, waiting up to ``wait_s`` for one; ``moves`` is None
        when some are no longer kept (the caller then locates its sessions again)."""
        if self._moves.version <= since:
            waiter = self._moved
            try:
                await asyncio.wait_for(waiter.wait(), wait_s)
            except TimeoutError:
                pass
        found = self._moves.since(since)
        return {
            "version": self._moves.version,
            "moves": None if found is None else [attrs.asdict(move) for move in found],
        }

    async def listing(self) -> dict[str, Any]:
        """The hosts and sessions, for ``relay cluster ls``."""
        now = time.monotonic()
        hosts = [
            {
                "name": r.name,
                "node": r.node,
                "pid": r.pid,
                "state": r.state,
                "sessions": len(r.sessions),
                "renewed_s_ago": round(now - r.renewed_at, 1) if r.renewed_at else None,
                "problem": r.problem,
            }
            for r in self._hosts.values()
        ]
        sessions = [
            {
                "id": s.id,
                "host": s.host,
                "epoch": s.epoch,
                "state": s.state,
                "last_seq": s.last[0] if s.last else None,
                "last_event": s.last[1] if s.last else None,
                "last_at": s.last[2] if s.last else None,
                "rollout": s.rollout,
                "problem": s.problem,
            }
            for s in self._sessions.values()
        ]
        context = self._ray.get_runtime_context() if self._ray is not None else None
        registry = {
            "node": context.get_node_id() if context is not None else None,
            "pid": os.getpid(),
        }
        return {
            "hosts": hosts,
            "sessions": sessions,
            "settings": await self.settings(),
            "registry": registry,
        }

    async def kill_host(self, name: str) -> None:
        """End host ``name`` as a node loss would: its sessions move."""
        record = self._hosts[name]
        self._ray.kill(record.handle, no_restart=True)
        await self._lose(record, "it was killed")

    async def shutdown(self, grace_s: float) -> dict[str, int]:
        """End the deployment: shut every session down, then end the hosts and free their
        placement groups. The registry itself is ended by whoever called this."""
        from ray.util.placement_group import remove_placement_group

        self._closing = True  # no replacements from here on
        live = [r for r in self._hosts.values() if r.state != "lost"]
        for record in live:
            record.state = "lost"  # no moves from here on
        counts = await asyncio.gather(
            *(within(grace_s + 5, r.handle.shutdown_all.remote(grace_s)) for r in live),
            return_exceptions=True,
        )
        ended = sum(count for count in counts if isinstance(count, int))
        for record in live:
            try:
                self._ray.kill(record.handle, no_restart=True)
            except Exception:
                pass
        for group in self._groups:
            try:
                remove_placement_group(group)
            except Exception:
                pass
        return {"hosts": len(live), "sessions": ended}


def in_deployment(config: Config, rollout_dir: str) -> Config:
    """``config`` for a session of the deployment whose shared rollout directory is
    ``rollout_dir``: a session that names no directory of its own writes there (the one the
    storage check found shared), not in its host's ``$RELAY_HOME``, which is another directory
    on every node."""
    if config.rollout.dir is not None:
        return config
    return attrs.evolve(config, rollout=attrs.evolve(config.rollout, dir=rollout_dir))


def remote_registry_class(ray: Any) -> Any:
    """The Ray actor class of registries."""
    return ray.remote(Registry)


__all__ = [
    "PLACEMENT_WAIT_S",
    "HostRecord",
    "Registry",
    "SessionRecord",
    "in_deployment",
    "remote_registry_class",
]
