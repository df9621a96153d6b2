"""Sessions hosted in Ray actors, with failover through the rollout (see ``docs/cluster.md``).

Theory of operation. A :class:`SessionPool` owns a few *hosts*: Ray async actors, each one
event loop holding many sessions opened with :func:`relay.open_session`. The caller gets a
:class:`PooledSession` per session, with the surface of a local one: submit ops, read events,
shut down. Ops travel to the host in their JSON form; events come back as they happen through
one Ray streaming generator per session, in batches of whatever the host had ready, so they
arrive in order and each once. Rollouts are written where the caller's config says, which must
be a directory every host reaches.

Placement: a new session goes to the live host holding the fewest sessions of this pool.

Failover: when a host dies, every stream it served fails. Each session's pump then asks the
least loaded live host to resume the session from its rollout (:func:`relay.resume_session`).
The rollout holds everything the caller saw, because a session flushes it before every event
that ends a turn. The new host reports, through the resumed session and before anything else:
``turn_aborted`` with reason ``host_lost`` for the turn that was running (this one is also
written to the rollout) and ``session_resumed``, naming that turn and the submissions the lost
host had accepted but no event showed handled. Nothing is submitted again: that is the
caller's decision. A submission whose acknowledgement was lost with the host raises
:class:`HostLostError` once the session runs again. The caller's stream numbers events on
across hosts (``seq`` never restarts).

Ray is imported only when a pool is opened, so ``import runtime`` never pulls it in.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import attrs

from .._base import _protocol as p
from .._base._codec import from_json, to_json
from .._base._config import Config, relay_home
from .._base._errors import ClosedSessionError, ConfigError, RelayError, RolloutLockedError

if TYPE_CHECKING:
    from .._core._session import Session

#: The id of the events a resumed session reports about its move.
RESUMED_EVENT_ID = "resume"

#: How long a session moving off a lost host waits for that host to let go of its rollout:
#: ``ray.kill`` returns before the process is gone, and its lock goes only with it.
LOCK_WAIT_S = 30.0
_LOCK_POLL_S = 0.05

T = TypeVar("T")

_MISSING_RAY = "the cluster needs Ray, which is not installed: pip install 'relay-runtime[ray]'"


class HostLostError(RelayError):
    """The host of a pooled session died before it acknowledged a submission.

    The session runs again on another host when this is raised; the op may or may not have
    been handled before the loss (the event stream tells), and it was not submitted again.
    """


class NoHostError(RelayError):
    """Every host of the pool is gone, so a session cannot be placed or resumed."""


def import_ray() -> Any:
    """The ``ray`` module, or :class:`ConfigError` naming the extra that provides it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(_MISSING_RAY) from exc
    return ray


# --------------------------------------------------------------------------- pure bookkeeping


def least_loaded(loads: dict[str, int]) -> str | None:
    """The host with the fewest sessions (the first such one in insertion order)."""
    best: str | None = None
    for host, load in loads.items():
        if best is None or load < loads[best]:
            best = host
    return best


@attrs.frozen
class Loss:
    """What a host's death cost one session, as seen by its caller."""

    aborted_turn: str | None
    """The turn that had started and not ended."""
    started_at: float | None
    """Its ``started_at`` (Unix seconds)."""
    unhandled: tuple[str, ...]
    """Accepted submissions that no event showed handled."""


@attrs.define
class Ledger:
    """What the caller of one session knows: accepted submissions and the events seen.

    A plain object, fed by the session's pump and its submit calls, read on failover.
    """

    accepted: list[str] = attrs.field(factory=list)
    handled: set[str] = attrs.field(factory=set)
    running: str | None = None
    running_since: float | None = None

    def accept(self, sub_id: str) -> None:
        """The host acknowledged submission ``sub_id``."""
        self.accepted.append(sub_id)

    def saw(self, event: p.Event) -> None:
        """An event reached the caller."""
        self.handled.add(event.id)
        match event.msg:
            case p.TurnStarted(turn_id=turn_id, started_at=started_at):
                self.running, self.running_since = turn_id, started_at
                self.handled.add(turn_id)
            case p.TurnComplete(turn_id=turn_id) | p.TurnAborted(turn_id=turn_id):
                if self.running == turn_id:
                    self.running = self.running_since = None
            case _:
                pass

    def lose(self) -> Loss:
        """What is lost with the host; the ledger starts over on the new host."""
        loss = Loss(
            aborted_turn=self.running,
            started_at=self.running_since,
            unhandled=tuple(s for s in self.accepted if s not in self.handled),
        )
        self.accepted = [s for s in self.accepted if s in self.handled]
        self.running = self.running_since = None
        return loss


# --------------------------------------------------------------------------- the host (actor)


@attrs.define(eq=False)
class _Hosted:
    """One session on a host: its events wait here until the caller's stream takes them."""

    session: Session | None = None
    ready: anyio.Event = attrs.field(factory=anyio.Event)
    failure: BaseException | None = None
    pending: list[dict[str, Any]] = attrs.field(factory=list)
    changed: anyio.Event = attrs.field(factory=anyio.Event)
    ended: bool = False

    def push(self, event: p.Event) -> None:
        self.pending.append(to_json(event))
        self.changed.set()

    def end(self) -> None:
        self.ended = True
        self.changed.set()

    async def take(self) -> list[dict[str, Any]]:
        """Every event not yet taken (waiting for one), or ``[]`` once the session ended."""
        while not self.pending and not self.ended:
            await self.changed.wait()
            self.changed = anyio.Event()
        batch, self.pending = self.pending, []
        return batch


class SessionHost:
    """One Ray actor's worth of sessions: runs on the actor's event loop (asyncio).

    Used through :class:`SessionPool`; every method takes the session's key.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._sessions: dict[str, _Hosted] = {}
        self._tasks: set[Any] = set()

    def _get(self, key: str) -> Session:
        hosted = self._sessions.get(key)
        if hosted is None or hosted.session is None:
            raise ClosedSessionError(f"no session {key} on host {self.name}")
        return hosted.session

    async def _start(self, key: str, opener: Callable[[], Any]) -> Session:
        hosted = _Hosted()
        self._sessions[key] = hosted
        task = asyncio.get_running_loop().create_task(self._run(hosted, opener))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        await hosted.ready.wait()
        if hosted.failure is not None:
            raise hosted.failure
        assert hosted.session is not None
        return hosted.session

    async def _run(self, hosted: _Hosted, opener: Callable[[], Any]) -> None:
        try:
            async with opener() as session:
                hosted.session = session
                hosted.ready.set()
                async for event in session.events():
                    hosted.push(event)
        except Exception as exc:
            hosted.failure = exc
        finally:
            # The entry stays until the stream has handed over the last events (events()).
            hosted.ready.set()
            hosted.end()

    async def open(self, key: str, config: Config) -> str | None:
        """Open a session with id ``key``; returns its rollout path."""
        from .._open import open_session

        session = await self._start(key, lambda: open_session(config, session_id=key))
        rollout = session.rollout
        return str(rollout.path) if rollout is not None else None

    async def resume(
        self,
        key: str,
        rollout_path: str,
        config: Config,
        loss: Loss,
        lost_host: str,
        noticed_at: float,
    ) -> None:
        """Resume session ``key`` from its rollout and report what its old host's loss cost."""
        from .._rollout._resume_session import resume_session

        def reported() -> list[tuple[str, p.EventMsg]]:
            """What the resumed session reports first: the turn the loss cut, and the move."""
            now = time.time()
            events: list[tuple[str, p.EventMsg]] = []
            if loss.aborted_turn is not None:
                elapsed = now - (loss.started_at or now)
                aborted = p.TurnAborted(
                    loss.aborted_turn, p.AbortReason.HOST_LOST, max(0, int(elapsed * 1000))
                )
                events.append((loss.aborted_turn, aborted))
            resumed = p.SessionResumed(
                lost_host=lost_host,
                host=self.name,
                aborted_turn=loss.aborted_turn,
                unhandled=loss.unhandled,
                downtime_ms=max(0, int((now - noticed_at) * 1000)),
            )
            events.append((RESUMED_EVENT_ID, resumed))
            return events

        await when_unlocked(
            lambda: self._start(
                key, lambda: resume_session(rollout_path, config, first_events=reported())
            ),
            wait_s=LOCK_WAIT_S,
        )

    async def submit(self, key: str, payload: Any, sub_id: str, origin: str | None) -> str:
        """Submit an op in its JSON form (decoded by the session, in order)."""
        return self._get(key).submit_json_nowait(payload, id=sub_id, origin=origin)

    async def wait_idle(self, key: str) -> int:
        """Wait until the session is idle; returns how many events it had emitted then."""
        session = self._get(key)
        await session.wait_idle()
        return session.statistics().events_emitted

    async def events(self, key: str) -> AsyncIterator[list[dict[str, Any]]]:
        """The session's events as they come, in batches; ends after ``shutdown_complete``."""
        hosted = self._sessions.get(key)
        if hosted is None:
            raise ClosedSessionError(f"no session {key} on host {self.name}")
        while batch := await hosted.take():
            yield batch
        if self._sessions.get(key) is hosted:
            del self._sessions[key]
        if hosted.failure is not None:
            raise hosted.failure

    async def load(self) -> int:
        """How many sessions this host holds."""
        return len(self._sessions)

    async def pid(self) -> int:
        """The process id of the host."""
        return os.getpid()


_REMOTE_HOST: Any = None


def _remote_host_class(ray: Any) -> Any:
    global _REMOTE_HOST
    if _REMOTE_HOST is None:
        _REMOTE_HOST = ray.remote(SessionHost)
    return _REMOTE_HOST


# --------------------------------------------------------------------------- the caller's side


class PooledSession:
    """A session hosted by a :class:`SessionPool`; get one from :meth:`SessionPool.open_session`.

    Attributes:
        id: the session id.
        rollout_path: its rollout file (None when persistence is off).
        host: the name of the host it runs on now.
    """

    def __init__(
        self, pool: SessionPool, key: str, config: Config, host: str, rollout: str | None
    ) -> None:
        self.id = key
        self.rollout_path = rollout
        self.host = host
        self._pool = pool
        self._config = config
        self._ledger = Ledger()
        self._counter = 0
        self._seq = 0
        # Which host run the session is in (one more per failover), and how many events of
        # that run the reader has taken: what wait_idle's count is compared with.
        self._incarnation = 0
        self._taken_incarnation = 0
        self._taken = 0
        self._moved = anyio.Event()
        self._closed = False
        self._finished = anyio.Event()
        self._failure: BaseException | None = None
        self._send, self._recv = anyio.create_memory_object_stream[tuple[int, p.Event]](math.inf)
        self._events_taken = False

    # ------------------------------------------------------------------ surface

    def _next_id(self, sub_id: str | None) -> str:
        if sub_id is not None:
            return sub_id
        # The session's own numbering restarts on a resumed host; this one never does.
        self._counter += 1
        return f"{self.id[:8]}-{self._counter}"

    async def submit(self, op: p.Op, *, id: str | None = None) -> str:
        """Submit ``op``; returns the submission id once the host has accepted it.

        Ops are handled in the order their submissions were accepted: await one before sending
        the next when their order matters (Ray does not order concurrent calls to an async
        actor).

        Raises:
            HostLostError: the host died before accepting it (the op was not submitted again).
            ClosedSessionError: the session has shut down.
        """
        return await self.submit_json(to_json(op), id=id)

    async def submit_json(
        self, payload: Any, *, id: str | None = None, origin: str | None = None
    ) -> str:
        """Submit an op in its JSON form; a bad one is reported as ``error{invalid_op}``."""
        return await self._submit("submit", payload, self._next_id(id), origin)

    async def _submit(self, method: str, *args: Any) -> str:
        if self._closed:
            raise ClosedSessionError("the session has shut down")
        moved = self._moved
        actor = self._pool._actor(self.host)
        try:
            sub_id: str = await getattr(actor, method).remote(self.id, *args)
        except self._pool._actor_errors as exc:
            await moved.wait()
            self._raise_failure()
            raise HostLostError(
                f"the host of session {self.id} died before accepting submission {args[1]!r}; "
                f"the session now runs on {self.host}"
            ) from exc
        self._ledger.accept(sub_id)
        return sub_id

    def events(self) -> AsyncIterator[p.Event]:
        """The event stream, across hosts; it ends after ``shutdown_complete``. One reader."""
        if self._events_taken:
            raise RuntimeError("the event stream of a session has only one reader")
        self._events_taken = True
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[p.Event]:
        async with self._recv:
            async for incarnation, event in self._recv:
                if incarnation != self._taken_incarnation:
                    self._taken_incarnation, self._taken = incarnation, 0
                self._taken += 1
                yield event
        self._raise_failure()

    async def wait_idle(self) -> int:
        """Wait until the session is idle; returns how many events its current host emitted.

        Compare with :attr:`events_from_host` to know whether the reader has taken them all.
        """
        while True:
            moved = self._moved
            self._raise_failure()
            try:
                count: int = await self._pool._actor(self.host).wait_idle.remote(self.id)
            except self._pool._actor_errors:
                await moved.wait()
                continue
            if moved is self._moved:
                return count

    @property
    def events_from_host(self) -> int:
        """Events of the current host the reader has taken (what :meth:`wait_idle` counts)."""
        return self._taken if self._taken_incarnation == self._incarnation else 0

    @property
    def closed(self) -> bool:
        """Whether the session has shut down (``shutdown_complete`` was received)."""
        return self._closed

    async def shutdown(self) -> None:
        """Submit ``shutdown`` (unless done already) and wait for ``shutdown_complete``."""
        if not self._closed and not self._finished.is_set():
            try:
                await self.submit(p.Shutdown())
            except (HostLostError, ClosedSessionError):
                pass
        await self._finished.wait()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    # ------------------------------------------------------------------ the pump

    async def _pump(self) -> None:
        try:
            while True:
                noticed = await self._forward()
                if noticed is None:
                    return
                await self._fail_over(noticed)
        except Exception as exc:
            # This session's end, not the pool's: its reader and callers get the error.
            self._failure = exc
        finally:
            self._closed = True
            self._moved.set()
            self._finished.set()
            self._send.close()
            self._pool._placed(self.host, -1)

    async def _forward(self) -> float | None:
        """Forward the current host's stream; the time its loss was noticed, or None at end."""
        actor = self._pool._actor(self.host)
        try:
            stream = actor.events.options(num_returns="streaming").remote(self.id)
            async for ref in stream:
                for data in await ref:
                    event: p.Event = from_json(data, p.Event)
                    if self._incarnation and isinstance(event.msg, p.SessionConfigured):
                        # The caller's stream announced the session once; its move is told by
                        # session_resumed (the rollout records the new host's announcement).
                        continue
                    self._seq += 1
                    event = attrs.evolve(event, seq=self._seq)
                    self._ledger.saw(event)
                    if isinstance(event.msg, p.ShutdownComplete):
                        self._closed = True
                    try:
                        self._send.send_nowait((self._incarnation, event))
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        # The reader went away; the session goes on and its rollout records.
                        pass
        except self._pool._actor_errors:
            return time.time()
        return None

    async def _fail_over(self, noticed_at: float) -> None:
        lost = self.host
        self._pool._lost(lost)
        loss = self._ledger.lose()
        if self.rollout_path is None:
            raise NoHostError(
                f"session {self.id} lost its host {lost} and has no rollout to resume from"
            )
        while True:
            host = await self._pool._choose()
            # Counted before the resume, so that the other sessions of the lost host, moving
            # at the same time, spread over the live hosts instead of all taking this one.
            self._pool._placed(host, 1)
            try:
                await self._pool._actor(host).resume.remote(
                    self.id, self.rollout_path, self._config, loss, lost, noticed_at
                )
            except self._pool._actor_errors:
                self._pool._lost(host)
                continue
            except BaseException:
                self._pool._placed(host, -1)
                raise
            break
        self.host = host
        self._incarnation += 1
        moved, self._moved = self._moved, anyio.Event()
        moved.set()


async def when_unlocked(
    attempt: Callable[[], Awaitable[T]],
    *,
    wait_s: float,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> T:
    """``attempt()``, tried again while its rollout is locked, for at most ``wait_s`` seconds.

    The lock of a killed host's process goes when the process is gone, a moment after the
    kill; any other holder still holds it after ``wait_s``, and that error is raised.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return await attempt()
        except RolloutLockedError:
            if time.monotonic() >= deadline:
                raise
        await sleep(_LOCK_POLL_S)


class SessionPool:
    """Ray actors hosting sessions; open with :func:`open_session_pool`."""

    def __init__(
        self, ray: Any, tg: anyio.abc.TaskGroup, config: Config, prefix: str, host_cpus: float
    ) -> None:
        self._ray = ray
        self._host_cpus = host_cpus
        self._tg = tg
        self.config = config
        """The default configuration of new sessions."""
        self._prefix = prefix
        self._actors: dict[str, Any] = {}
        self._loads: dict[str, int] = {}
        self._actor_errors: tuple[type[BaseException], ...] = (ray.exceptions.RayActorError,)
        self._sessions: set[PooledSession] = set()

    async def add_hosts(self, count: int = 1) -> list[str]:
        """Start ``count`` more hosts (to make up for lost ones); returns their names.

        New sessions go to them first, as they hold none; sessions already placed stay.
        """
        return await self._add_hosts(count, self._host_cpus)

    async def _add_hosts(self, count: int, num_cpus: float) -> list[str]:
        remote = _remote_host_class(self._ray)
        start = len(self._actors)  # lost hosts keep their entry: names never repeat
        names = [f"{self._prefix}-{start + i}" for i in range(count)]
        for name in names:
            self._actors[name] = remote.options(
                name=name, max_restarts=0, max_concurrency=100_000, num_cpus=num_cpus
            ).remote(name)
            self._loads[name] = 0
        # Ready when each has answered once.
        for name in names:
            await self._actors[name].load.remote()
        return names

    @property
    def hosts(self) -> list[str]:
        """The names of the live hosts."""
        return list(self._loads)

    def loads(self) -> dict[str, int]:
        """Sessions per live host."""
        return dict(self._loads)

    def host_pid(self, host: str) -> Any:
        """An awaitable of the process id of ``host``."""
        return self._actor(host).pid.remote()

    def kill_host(self, host: str) -> None:
        """Kill ``host`` as a node loss would (no restart); its sessions fail over."""
        self._ray.kill(self._actor(host), no_restart=True)

    def _actor(self, host: str) -> Any:
        return self._actors[host]

    def _placed(self, host: str, delta: int) -> None:
        if host in self._loads:
            self._loads[host] += delta

    def _lost(self, host: str) -> None:
        if self._loads.pop(host, None) is not None:
            # Make sure it is gone: a host that was only out of reach for a while must not
            # go on writing rollouts that its sessions now append to elsewhere.
            self._ray.kill(self._actors[host], no_restart=True)

    async def _choose(self) -> str:
        await anyio.lowlevel.checkpoint()
        host = least_loaded(self._loads)
        if host is None:
            raise NoHostError("every host of the pool is gone")
        return host

    @asynccontextmanager
    async def open_session(
        self, config: Config | None = None, *, session_id: str | None = None
    ) -> AsyncIterator[PooledSession]:
        """Open a session on the least loaded host; leaving the block shuts it down.

        Raises:
            NoHostError: no host is left.
            ConfigError: the configuration is invalid (reported by the host).
        """
        config = _for_hosts(config or self.config)
        key = session_id or str(uuid.uuid4())
        while True:
            host = await self._choose()
            self._placed(host, 1)
            try:
                rollout = await self._actor(host).open.remote(key, config)
            except self._actor_errors:
                self._placed(host, -1)
                self._lost(host)
                continue
            except BaseException:
                self._placed(host, -1)
                raise
            break
        session = PooledSession(self, key, config, host, rollout)
        self._sessions.add(session)
        self._tg.start_soon(session._pump)
        try:
            yield session
        finally:
            with anyio.CancelScope(shield=True):
                await session.shutdown()
            self._sessions.discard(session)


def _for_hosts(config: Config) -> Config:
    """``config`` with what the caller's process would default made explicit.

    A host's working directory and ``$RELAY_HOME`` are not the caller's; a session behaves as
    if the caller had opened it.
    """
    if config.cwd is None:
        config = attrs.evolve(config, cwd=os.getcwd())
    if config.rollout.enabled and config.rollout.dir is None:
        rollout = attrs.evolve(config.rollout, dir=str(relay_home() / "sessions"))
        config = attrs.evolve(config, rollout=rollout)
    if config.model_script is not None:
        config = attrs.evolve(config, model_script=str(Path(config.model_script).absolute()))
    return config


@asynccontextmanager
async def open_session_pool(
    hosts: int = 2,
    config: Config | None = None,
    *,
    host_cpus: float = 1.0,
    name: str | None = None,
) -> AsyncIterator[SessionPool]:
    """Start ``hosts`` Ray actors to host sessions; leaving the block ends them.

    Ray must be connected already (``ray.init(...)``), and the caller must run on asyncio,
    the event loop Ray's futures belong to.

    Args:
        hosts: how many actors to start.
        config: the default configuration of the pool's sessions.
        host_cpus: the CPUs Ray reserves for each actor (one event loop uses one at most).
        name: a prefix for the actors' names (default: a new one).

    Raises:
        ConfigError: Ray is not installed or not connected.
    """
    ray = import_ray()
    if not ray.is_initialized():
        raise ConfigError("connect to a Ray cluster first: ray.init(address=...)")
    if hosts < 1:
        raise ConfigError("a session pool needs at least one host")
    prefix = name or f"relay-{uuid.uuid4().hex[:8]}"
    async with anyio.create_task_group() as tg:
        pool = SessionPool(ray, tg, config or Config(), prefix, host_cpus)
        try:
            await pool._add_hosts(hosts, host_cpus)
            yield pool
            with anyio.CancelScope(shield=True):
                for session in list(pool._sessions):
                    await session.shutdown()
        finally:
            tg.cancel_scope.cancel()
            for actor in pool._actors.values():
                ray.kill(actor, no_restart=True)


# --------------------------------------------------------------------------- op scripts


__all__ = [
    "HostLostError",
    "Ledger",
    "Loss",
    "NoHostError",
    "PooledSession",
    "SessionHost",
    "SessionPool",
    "import_ray",
    "least_loaded",
    "open_session_pool",
]
