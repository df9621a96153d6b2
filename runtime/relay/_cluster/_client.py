"""The caller's side of a deployment: a client process and the sessions it opens or attaches to.

Theory of operation. A :class:`ClusterClient` talks to one registry. It has, per host it follows
sessions on, one stream of event batches (``SessionHost.stream``), and one long wait on the
registry for moves. A :class:`ClusterSession` has the face of a local session: ``submit``
returns once the host accepted the op, ``events()`` yields the session's events in order.

Every event carries the session's ``seq``, which the hosts number across epochs. A session
followed from ``seq`` N gets what the host still keeps after N (its latest events, exactly),
and before that what the rollout records (the host reads it); an event is taken once, by its
``seq``, so the two never overlap. When the registry moves a session, the client follows it to
its new host from the last ``seq`` it has: what the old host had recorded and not sent comes
from the rollout, the new epoch's events from the new host, and nothing of an older epoch is
taken after the move. The ``session_resumed`` a caller reads names the submissions of *that*
caller no event showed handled (its :class:`~._ledger.Ledger`).

Events wait for the reader in a bounded :class:`~._buffers.ReaderQueue`: a reader that does not
keep up loses its oldest events, and reads one ``warning`` in their place.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import attrs

from .._base import _protocol as p
from .._base._codec import from_json, to_json
from .._base._config import Config
from .._base._errors import ClosedSessionError, ConfigError, RelayError
from ._buffers import Dropped, ReaderQueue
from ._ledger import Ledger
from ._ray import (
    DEFAULT_NAMESPACE,
    DEFAULT_PREFIX,
    actor_errors,
    import_ray,
    registry_name,
    relay_error,
    stream_options,
)

#: Batches a host may send ahead of a caller that does not read them.
STREAM_AHEAD = 4
#: How long one wait on the registry for moves lasts before it is asked again.
MOVES_WAIT_S = 30.0


class HostLostError(RelayError):
    """The host of a session was lost before it acknowledged a submission.

    The session runs again on another host when this is raised; the op may or may not have
    been handled before the loss (the event stream tells), and it was not submitted again.
    """


class NoHostError(RelayError):
    """No host can take a session: it cannot be placed, or moved."""


def absolute(path: str | os.PathLike[str]) -> str:
    """``path`` made absolute where this process is (a host's working directory differs)."""
    return str(Path(path).absolute())


def for_hosts(config: Config, cwd: str | None = None) -> Config:
    """``config`` with every path made absolute where the caller is, and what the caller's
    process would default made explicit: a host's working directory is not the caller's."""
    here = Path(cwd or os.getcwd())
    if config.cwd is None:
        config = attrs.evolve(config, cwd=str(here))
    elif not Path(config.cwd).is_absolute():
        config = attrs.evolve(config, cwd=str(here / config.cwd))
    if config.rollout.dir is not None and not Path(config.rollout.dir).is_absolute():
        rollout = attrs.evolve(config.rollout, dir=str(here / config.rollout.dir))
        config = attrs.evolve(config, rollout=rollout)
    if config.model_script is not None and not Path(config.model_script).is_absolute():
        config = attrs.evolve(config, model_script=str(here / config.model_script))
    return config


class ClusterSession:
    """A session on a deployment's hosts; from :meth:`ClusterClient.open_session` or
    :meth:`ClusterClient.attach`.

    Attributes:
        id: the session id.
        rollout_path: its rollout file.
        host: the name of the host it runs on now.
        epoch: its epoch there (one more at each move).
    """

    def __init__(
        self,
        client: ClusterClient,
        key: str,
        host: str,
        epoch: int,
        rollout: str | None,
    ) -> None:
        self.id = key
        self.rollout_path = rollout
        self.host = host
        self.epoch = epoch
        self._client = client
        self._ledger = Ledger()
        # Ids this caller makes: its own prefix, so that two callers never make the same one.
        self._id_prefix = f"{key[:8]}-{uuid.uuid4().hex[:4]}"
        self._counter = 0
        self._queue = ReaderQueue()
        self._changed = anyio.Event()
        self._queued_seq = 0
        self._taken_seq = 0
        self._moved = anyio.Event()
        self._closed = False
        self._ended = False
        self._failure: BaseException | None = None
        self._events_taken = False
        self._detached = False
        self._replaying = False
        self._held: list[tuple[tuple[int, int, int] | None, list[str]]] = []
        self.followed_at: int | None = None
        """The ``seq`` of the session's last event when this caller began to follow it."""

    # ------------------------------------------------------------------ surface

    def _next_id(self, sub_id: str | None) -> str:
        if sub_id is not None:
            return sub_id
        self._counter += 1
        return f"{self._id_prefix}-{self._counter}"

    async def submit(self, op: p.Op, *, id: str | None = None) -> str:
        """Submit ``op``; returns the submission id once the host has accepted it.

        Ops are handled in the order their submissions were accepted: await one before sending
        the next when their order matters (Ray does not order concurrent calls to an actor).

        Raises:
            HostLostError: the host was lost before accepting it (it was not submitted again).
            ClosedSessionError: the session has shut down.
        """
        return await self.submit_json(to_json(op), id=id)

    async def submit_json(
        self, payload: Any, *, id: str | None = None, origin: str | None = None
    ) -> str:
        """Submit an op in its JSON form; a bad one is reported as ``error{invalid_op}``."""
        sub_id = self._next_id(id)
        if self._closed:
            raise ClosedSessionError("the session has shut down")
        self._raise_failure()
        moved = self._moved
        host = self._client.host_handle(self.host)
        call = host.submit.remote(self.id, self.epoch, payload, sub_id, origin)
        outcome, value = await self._until_moved(call, moved)
        if outcome == "done":
            self._ledger.accept(value)
            return str(value)
        if outcome == "failed":
            await self._after_failure(value, moved)
        self._raise_failure()
        raise HostLostError(
            f"the host of session {self.id} was lost before it accepted submission {sub_id!r}; "
            f"the session now runs on {self.host}, and the op was not submitted again"
        )

    async def _after_failure(self, exc: BaseException, moved: anyio.Event) -> None:
        """A call to the host failed: return once the session has moved, or raise."""
        if isinstance(exc, actor_errors(self._client.ray)):
            await moved.wait()  # the registry moves the sessions of a lost host
            return
        found = relay_error(exc)
        if isinstance(found, ClosedSessionError):
            # The host no longer has the session in this epoch: it moved, or it ended.
            if moved.is_set() or await self._client.relocate(self):
                return
            raise ClosedSessionError("the session has shut down") from None
        if found is not None:
            raise found from None
        raise exc

    async def _until_moved(self, call: Any, moved: anyio.Event) -> tuple[str, Any]:
        """``("done", value)``, ``("failed", error)`` or ``("moved", None)``, whichever first."""
        result: list[tuple[str, Any]] = []
        async with anyio.create_task_group() as tg:

            async def call_it() -> None:
                try:
                    result.append(("done", await call))
                except Exception as exc:
                    result.append(("failed", exc))
                tg.cancel_scope.cancel()

            async def watch() -> None:
                await moved.wait()
                result.append(("moved", None))
                tg.cancel_scope.cancel()

            tg.start_soon(call_it)
            tg.start_soon(watch)
        return result[0]

    def events(self) -> AsyncIterator[p.Event]:
        """The event stream, across hosts; it ends after ``shutdown_complete``. One reader."""
        if self._events_taken:
            raise RuntimeError("the event stream of a session has only one reader")
        self._events_taken = True
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[p.Event]:
        while True:
            event = self._queue.pop()
            if event is None:
                if self._ended:
                    break
                waiter = self._changed
                await waiter.wait()
                continue
            self._taken_seq = event.seq
            yield event
        self._raise_failure()

    async def wait_idle(self) -> int:
        """Wait until the session is idle; returns the ``seq`` of its last event then.

        Compare with :attr:`taken_seq` to know whether the reader has taken them all.
        """
        while True:
            moved = self._moved
            self._raise_failure()
            if self._closed:
                return self._queued_seq
            host = self._client.host_handle(self.host)
            outcome, value = await self._until_moved(
                host.wait_idle.remote(self.id, self.epoch), moved
            )
            if outcome == "done":
                return int(value)
            if outcome == "failed":
                await self._after_failure(value, moved)

    @property
    def taken_seq(self) -> int:
        """The ``seq`` of the last event the reader took."""
        return self._taken_seq

    @property
    def queued(self) -> int:
        """The ``seq`` of the last event that reached this process (taken or waiting for the
        reader; a dropped run counts by its last ``seq``)."""
        return self._queued_seq

    @property
    def closed(self) -> bool:
        """Whether the session has shut down (``shutdown_complete`` arrived)."""
        return self._closed

    async def shutdown(self) -> None:
        """Submit ``shutdown`` (unless done already) and wait for ``shutdown_complete``.

        A shutdown a lost host had accepted is submitted again to the session's new host."""
        while not self._ended:
            epoch = self.epoch
            try:
                await self.submit(p.Shutdown())
            except HostLostError:
                continue
            except ClosedSessionError:
                pass
            while not self._ended and self.epoch == epoch:
                waiter = self._changed
                await waiter.wait()

    def detach(self) -> None:
        """Leave the session running when this caller lets go of it."""
        self._detached = True

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    # ------------------------------------------------------------------ what arrives

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def _deliver(self, epoch: int, dropped: tuple[int, int, int] | None, texts: list[str]) -> None:
        """A batch from a host's stream: taken only from the epoch the session is in."""
        if epoch != self.epoch:
            return
        if self._replaying:
            self._held.append((dropped, texts))
            return
        self._take(dropped, texts)

    def _take(self, dropped: tuple[int, int, int] | None, texts: list[str]) -> None:
        if dropped is not None:
            first, last, count = dropped
            if last > self._queued_seq:
                self._queue.push_dropped(Dropped(max(first, self._queued_seq + 1), last, count))
                self._queued_seq = last
        for text in texts:
            data = json.loads(text)
            if data["seq"] <= self._queued_seq:
                continue  # had already (from the rollout, or the host's latest)
            event: p.Event = from_json(data, p.Event)
            self._queued_seq = event.seq
            msg = event.msg
            if isinstance(msg, p.SessionResumed):
                loss = self._ledger.lose()
                msg = attrs.evolve(
                    msg,
                    aborted_turn=msg.aborted_turn or loss.aborted_turn,
                    unhandled=loss.unhandled,
                )
                event = attrs.evolve(event, msg=msg)
            self._ledger.saw(event)
            if isinstance(msg, p.ShutdownComplete):
                self._closed = self._ended = True
            self._queue.push(event)
        self._notify()

    def _fail(self, failure: BaseException) -> None:
        self._failure = failure
        self._closed = self._ended = True
        self._moved.set()
        self._notify()

    def _move(self, host: str, epoch: int) -> None:
        self.host, self.epoch = host, epoch
        self._replaying = True
        self._held.clear()
        moved, self._moved = self._moved, anyio.Event()
        moved.set()
        self._notify()


class ClusterClient:
    """A connection to a deployment; from :func:`connect` (or a session pool)."""

    def __init__(self, ray: Any, registry: Any, namespace: str | None, tg: Any) -> None:
        self.ray = ray
        self.namespace = namespace
        self._registry = registry
        self._tg = tg
        self._id = uuid.uuid4().hex
        self._sessions: dict[str, ClusterSession] = {}
        self._handles: dict[str, Any] = {}
        self._pumps: set[str] = set()
        self._version = 0

    @property
    def registry(self) -> Any:
        """The deployment's registry actor."""
        return self._registry

    def host_handle(self, host: str) -> Any:
        """The actor of host ``host``."""
        handle = self._handles.get(host)
        if handle is None:
            handle = self.ray.get_actor(host, namespace=self.namespace)
            self._handles[host] = handle
        return handle

    @asynccontextmanager
    async def open_session(
        self, config: Config | None = None, *, session_id: str | None = None
    ) -> AsyncIterator[ClusterSession]:
        """Open a session on the least loaded host; leaving the block shuts it down (unless
        :meth:`ClusterSession.detach` was called: the session then goes on).

        Raises:
            NoHostError: no host is serving.
            ConfigError: the configuration is invalid, or a host cannot read a path it names.
        """
        config = for_hosts(config or Config())
        key = session_id or str(uuid.uuid4())
        opened = await self._registry.open.remote(key, config)
        if "no_host" in opened:
            raise NoHostError(opened["no_host"])
        if "error" in opened:
            raise ConfigError(opened["error"])
        session = ClusterSession(self, key, opened["host"], opened["epoch"], opened["rollout"])
        session.followed_at = 0  # from its first event
        self._sessions[key] = session
        try:
            await self._follow(session, 0)
            yield session
        finally:
            with anyio.CancelScope(shield=True):
                if not session._detached:
                    await session.shutdown()
                self._forget(session)

    @asynccontextmanager
    async def attach(
        self, session_id: str, *, after: int | None = None
    ) -> AsyncIterator[ClusterSession]:
        """Follow a session another process opened; leaving the block lets go of it (the
        session goes on).

        ``after``: the events come from the one after this ``seq`` (None: from now on).

        Raises:
            ConfigError: no such session in this deployment.
            ClosedSessionError: it has ended.
            NoHostError: it was lost.
        """
        if session_id in self._sessions:
            raise ConfigError(f"session {session_id} is followed by this client already")
        where = await self._registry.locate.remote(session_id)
        if where is None:
            raise ConfigError(f"no session {session_id} in this deployment")
        if where["state"] == "ended":
            raise ClosedSessionError(
                f"session {session_id} has ended; its rollout is {where['rollout']}"
            )
        if where["state"] == "lost" or where["host"] is None:
            raise NoHostError(f"session {session_id} was lost: {where['problem']}")
        session = ClusterSession(self, session_id, where["host"], where["epoch"], where["rollout"])
        session.detach()
        self._sessions[session_id] = session
        try:
            await self._follow(session, after)
            yield session
        finally:
            self._forget(session)

    async def listing(self) -> dict[str, Any]:
        """The deployment's hosts and sessions (what ``relay cluster ls`` shows)."""
        listing: dict[str, Any] = await self._registry.listing.remote()
        return listing

    async def relocate(self, session: ClusterSession) -> bool:
        """Ask the registry where ``session`` is; whether it had moved on (it follows it)."""
        where = await self._registry.locate.remote(session.id)
        if where is None or (where["epoch"] <= session.epoch and where["host"] is not None):
            return False
        self._apply(session, where["host"], where["epoch"], where["problem"])
        return True

    def _forget(self, session: ClusterSession) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]
        try:
            self.host_handle(session.host).unfollow.remote(self._id, session.id)
        except Exception:  # the host is gone: nothing to undo there
            pass

    # ------------------------------------------------------------------ following

    async def _follow(self, session: ClusterSession, after: int | None) -> None:
        """Have the session's events sent here from its host, from after ``seq`` ``after``:
        first what the rollout records that the host no longer keeps, then the rest."""
        epoch, host = session.epoch, session.host
        session._replaying = True
        errors = actor_errors(self.ray)
        try:
            handle = self.host_handle(host)
        except ValueError:
            return  # gone already; the registry will say where the session went
        self._pump_from(host)
        try:
            followed = await handle.follow.remote(self._id, session.id, epoch, after)
        except errors:
            return
        except Exception as exc:
            if isinstance(getattr(exc, "cause", None), ClosedSessionError):
                return  # it moved on meanwhile
            raise
        if session.epoch != epoch:
            return
        if session.followed_at is None:
            session.followed_at = followed["last"]
        first, since = followed["first"], followed["after"]
        # Nothing up to ``since`` is for this caller (it follows from there).
        session._queued_seq = max(session._queued_seq, since)
        if since + 1 < first and session.rollout_path is not None:
            stream = handle.replay.options(num_returns="streaming").remote(
                session.id, session.rollout_path, since, first
            )
            try:
                async for ref in stream:
                    chunk = await ref
                    if session.epoch != epoch:
                        return
                    session._take(None, chunk)
            except errors:
                return
        if session.epoch != epoch:
            return
        session._replaying = False
        held, session._held = session._held, []
        for dropped, texts in held:
            session._take(dropped, texts)
        session._notify()

    def _pump_from(self, host: str) -> None:
        if host not in self._pumps:
            self._pumps.add(host)
            self._tg.start_soon(self._pump, host)

    async def _pump(self, host: str) -> None:
        forgotten = False
        try:
            try:
                handle = self.host_handle(host)
            except ValueError:
                return  # it was gone before the stream started
            options = stream_options(self.ray.__version__, STREAM_AHEAD)
            async for ref in handle.stream.options(**options).remote(self._id):
                for key, epoch, dropped, texts in await ref:
                    session = self._sessions.get(key)
                    if session is not None:
                        session._deliver(epoch, dropped, texts)
            # The host ended the stream: it had not heard from this caller for too long.
            forgotten = True
        except actor_errors(self.ray):
            pass  # the host is gone; the registry moves its sessions
        finally:
            self._pumps.discard(host)
        if forgotten:
            # Follow its sessions there again, from the last event each has (the rest of what
            # the host no longer keeps comes from the rollout).
            for session in list(self._sessions.values()):
                if session.host == host and not session._ended:
                    self._tg.start_soon(self._follow, session, session._queued_seq)

    async def _keep_places(self, every_s: float) -> None:
        """Renew this caller's place on every host it follows sessions on (a host forgets a
        caller it has not heard from for three leases: ``_leases.caller_timeout``)."""
        errors: tuple[type[BaseException], ...] = (*actor_errors(self.ray), ValueError)

        async def keep(host: str) -> None:
            # At once on every host, each bounded: a frozen host holds up no other renewal.
            with anyio.move_on_after(every_s):
                try:
                    await self.host_handle(host).keep.remote(self._id)
                except errors:
                    pass  # gone: the registry moves its sessions

        while True:
            await anyio.sleep(every_s)
            async with anyio.create_task_group() as tg:
                for host in list(self._pumps):
                    tg.start_soon(keep, host)

    async def _watch_moves(self) -> None:
        errors = actor_errors(self.ray)
        try:
            while True:
                found = await self._registry.moves.remote(self._version, MOVES_WAIT_S)
                self._version = found["version"]
                if found["moves"] is None:
                    await self._locate_all()
                    continue
                for move in found["moves"]:
                    session = self._sessions.get(move["session"])
                    if session is not None:
                        self._apply(session, move["host"], move["epoch"], move["problem"])
        except errors:
            return  # no registry, no moves: the sessions go on where they are

    async def _locate_all(self) -> None:
        for session in list(self._sessions.values()):
            where = await self._registry.locate.remote(session.id)
            if where is not None:
                self._apply(session, where["host"], where["epoch"], where["problem"])

    def _apply(
        self, session: ClusterSession, host: str | None, epoch: int, problem: str | None
    ) -> None:
        if host is None:
            if not session._ended:
                session._fail(NoHostError(f"session {session.id} was lost: {problem}"))
            return
        if epoch <= session.epoch:
            return
        old = session.host
        session._move(host, epoch)
        try:
            self.host_handle(old).unfollow.remote(self._id, session.id)
        except Exception:
            pass
        self._tg.start_soon(self._follow, session, session._queued_seq)

    async def _start(self) -> None:
        found = await self._registry.moves.remote(2**62, 0)
        self._version = found["version"]
        settings = await self._registry.settings.remote()
        self._tg.start_soon(self._watch_moves)
        self._tg.start_soon(self._keep_places, float(settings["lease_s"]))


@asynccontextmanager
async def client_of(ray: Any, registry: Any, namespace: str | None) -> AsyncIterator[ClusterClient]:
    """A client of the deployment whose registry is ``registry`` (Ray is connected)."""
    async with anyio.create_task_group() as tg:
        client = ClusterClient(ray, registry, namespace, tg)
        await client._start()
        try:
            yield client
        finally:
            tg.cancel_scope.cancel()


@asynccontextmanager
async def connect(
    address: str | None = None,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    prefix: str = DEFAULT_PREFIX,
) -> AsyncIterator[ClusterClient]:
    """Connect to the deployment that ``relay cluster up`` started in ``namespace``.

    Connects to Ray at ``address`` (else ``$RAY_ADDRESS``) first unless this process is
    connected already; run on asyncio (Ray's futures are asyncio futures). Any number of
    processes may connect at once.

    Raises:
        ConfigError: Ray is not installed or cannot be reached, no address is given (a Ray
            instance of this process's own would hold no deployment), or no deployment runs
            there.
    """
    ray = import_ray()
    own = not ray.is_initialized()
    if own:
        address = address or os.environ.get("RAY_ADDRESS") or None
        if address is None:
            raise ConfigError(
                "connect needs the Ray cluster's address (or RAY_ADDRESS) when this process "
                "is not connected to Ray already"
            )
        try:
            ray.init(
                address=address,
                namespace=namespace,
                log_to_driver=False,
                logging_level="ERROR",
                configure_logging=False,
            )
        except Exception as exc:
            raise ConfigError(f"cannot reach Ray at {address}: {exc}") from exc
    try:
        try:
            registry = ray.get_actor(registry_name(prefix), namespace=namespace)
        except ValueError:
            raise ConfigError(
                f"no relay deployment in namespace {namespace!r}: start one with relay cluster up"
            ) from None
        async with client_of(ray, registry, namespace) as client:
            yield client
    finally:
        if own:
            ray.shutdown()


__all__ = [
    "ClusterClient",
    "ClusterSession",
    "HostLostError",
    "NoHostError",
    "client_of",
    "connect",
    "for_hosts",
]
