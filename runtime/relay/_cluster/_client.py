"""The caller's side of a deployment: a client process, its streams from the hosts, and where
its sessions are.

Theory of operation. A :class:`ClusterClient` talks to one registry. It has, per host it follows
sessions on, one stream of event batches (``SessionHost.stream``), and one long wait on the
registry for moves. Each session it opens or attaches to (:class:`~._session.ClusterSession`)
hands it a :class:`~._session.SessionFeed`, which the client writes: the batches of the host's
stream, and what it replays from the rollout.

A session followed from ``seq`` N gets what the host still keeps after N (its latest events,
exactly), and before that what the rollout records (the host reads it). When the registry moves
a session, the client follows it to its new host from the last ``seq`` it has: what the old host
had recorded and not sent comes from the rollout, the new epoch's events from the new host. A
host that forgot this caller (it was silent for three leases) ends its stream; the client then
follows that host's sessions again, in the same way.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import attrs

from .._base._config import Config
from .._base._errors import ClosedSessionError, ConfigError
from .._base._util import single_exception
from ._ray import (
    DEFAULT_NAMESPACE,
    DEFAULT_PREFIX,
    actor_errors,
    import_ray,
    registry_name,
    stream_options,
)
from ._session import ClusterSession, NoHostError
from ._trace import carrier

#: Batches a host may send ahead of a caller that does not read them.
STREAM_AHEAD = 4
#: How long one wait on the registry for moves lasts before it is asked again.
MOVES_WAIT_S = 30.0


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
            ConfigError: the configuration is invalid, or a host cannot read a path it names
                or load one of its tasks.
        """
        config = for_hosts(config or Config())
        key = session_id or str(uuid.uuid4())
        opened = await self._registry.open.remote(key, config, carrier())
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
                if not session.detached:
                    await session.shutdown()
                self._forget(session)

    @asynccontextmanager
    async def attach(
        self, session_id: str, *, after: int | None = None
    ) -> AsyncIterator[ClusterSession]:
        """Follow a session another process opened; leaving the block lets go of it (the
        session goes on).

        ``after``: the events come from the one after this ``seq`` (None: from now on); past
        the session's last event (:attr:`ClusterSession.followed_at` says which), from the
        next one.

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

    async def check(self, config: Config) -> None:
        """Check that every serving host could run a session of ``config``: read the paths it
        names and load its tasks (what :meth:`open_session` checks first).

        Raises:
            ConfigError: a host cannot.
        """
        problem = await self._registry.problem.remote(for_hosts(config))
        if problem is not None:
            raise ConfigError(problem)

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
        feed = session.feed
        feed.hold()
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
        # Nothing up to ``since`` is for this caller (it follows from there); a ``since`` past
        # the session's last event is taken as that event, so that no later one is skipped.
        feed.skip_through(min(since, followed["last"]))
        if since + 1 < first and session.rollout_path is not None:
            stream = handle.replay.options(num_returns="streaming").remote(
                session.id, session.rollout_path, since, first
            )
            try:
                async for ref in stream:
                    chunk = await ref
                    if session.epoch != epoch:
                        return
                    feed.take(None, chunk)
            except errors:
                return
        if session.epoch != epoch:
            return
        feed.replayed()

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
                        session.feed.deliver(epoch, dropped, texts)
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
                if session.host == host and not session.feed.ended:
                    self._tg.start_soon(self._follow, session, session.feed.queued_seq)

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
            if not session.feed.ended:
                session.feed.fail(NoHostError(f"session {session.id} was lost: {problem}"))
            return
        if epoch <= session.epoch:
            return
        old = session.host
        session.feed.move(host, epoch)
        try:
            self.host_handle(old).unfollow.remote(self._id, session.id)
        except Exception:
            pass
        self._tg.start_soon(self._follow, session, session.feed.queued_seq)

    async def _start(self) -> None:
        found = await self._registry.moves.remote(2**62, 0)
        self._version = found["version"]
        settings = await self._registry.settings.remote()
        self._tg.start_soon(self._watch_moves)
        self._tg.start_soon(self._keep_places, float(settings["lease_s"]))


@asynccontextmanager
async def client_of(ray: Any, registry: Any, namespace: str | None) -> AsyncIterator[ClusterClient]:
    """A client of the deployment whose registry is ``registry`` (Ray is connected); what the
    block raises comes out as it is, not in a group."""
    try:
        async with anyio.create_task_group() as tg:
            client = ClusterClient(ray, registry, namespace, tg)
            await client._start()
            try:
                yield client
            finally:
                tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise single_exception(group) from None


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


__all__ = ["ClusterClient", "absolute", "client_of", "connect", "for_hosts"]
