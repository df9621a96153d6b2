"""Starting and ending a deployment: a registry and its hosts on a Ray cluster.

Two kinds. ``relay cluster up`` (:func:`up`) starts a *lasting* deployment: detached actors
named in a namespace, which outlive the command and serve any number of client processes until
``relay cluster down`` (:func:`down`). :func:`open_session_pool` starts a deployment for the
block of one program: its actors are the program's and end with it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs

from .._base._config import Config, relay_home
from .._base._errors import ConfigError
from ._client import ClusterClient, absolute, client_of
from ._leases import LEASE_S, check_lease
from ._ray import DEFAULT_PREFIX, import_ray, registry_name
from ._registry import remote_registry_class
from ._session import ClusterSession

#: How long ``down`` gives sessions to shut down in order before their hosts end.
DOWN_GRACE_S = 10.0


#: The resource Ray gives the head node alone.
HEAD_RESOURCE = "node:__internal_head__"


def _registry_options(
    ray: Any, prefix: str, detached: bool, namespace: str | None = None
) -> dict[str, Any]:
    """The registry runs on the head node, whose loss ends the cluster anyway, so that it adds
    no failure of its own; it reserves no CPU."""
    on_head = any(
        node.get("Alive") and HEAD_RESOURCE in node.get("Resources", {}) for node in ray.nodes()
    )
    placed = {"namespace": namespace} if namespace is not None else {}
    return {
        **placed,
        "name": registry_name(prefix),
        "lifetime": "detached" if detached else None,
        "max_restarts": 0,
        "max_concurrency": 100_000,
        "num_cpus": 0,
        "resources": {HEAD_RESOURCE: 0.001} if on_head else {},
    }


def existing_registry(ray: Any, namespace: str | None, prefix: str) -> Any | None:
    """The registry of the deployment in ``namespace``, if one runs there."""
    try:
        return ray.get_actor(registry_name(prefix), namespace=namespace)
    except ValueError:
        return None


async def up(
    *,
    namespace: str,
    hosts: int,
    host_cpus: float,
    lease_s: float,
    rollout_dir: str,
    prefix: str = DEFAULT_PREFIX,
    tasks: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Start a lasting deployment of ``hosts`` hosts in ``namespace`` (Ray is connected), or
    start the hosts the one running there lacks to have that many serving. Returns the hosts
    serving, those started, the storage problems and the deployment's settings (those of the
    running one, when there is one).

    ``tasks`` (op type: factory, as the hosts load it) are the tasks whose modules the job's
    ``runtime_env`` carries: the registry's, which every host it starts inherits.

    Raises:
        ConfigError: bad settings, or the cluster cannot place the hosts.
    """
    ray = import_ray()
    if hosts < 1:
        raise ConfigError("--hosts must be at least 1")
    if host_cpus < 0:
        raise ConfigError("--host-cpus cannot be negative")
    try:
        check_lease(lease_s)
    except ValueError as exc:
        raise ConfigError(f"--lease-seconds: {exc}") from None
    registry = existing_registry(ray, namespace, prefix)
    if registry is None:
        registry = (
            remote_registry_class(ray)
            .options(
                **_registry_options(ray, prefix, detached=True, namespace=namespace),
                get_if_exists=True,
            )
            .remote(prefix, lease_s, rollout_dir, True, namespace, tasks)
        )
    listing = await registry.listing.remote()
    running = [h["name"] for h in listing["hosts"] if h["state"] in ("serving", "checking")]
    started: list[str] = []
    problems: list[str] = []
    if len(running) < hosts:
        added = await registry.add_hosts.remote(hosts - len(running), host_cpus)
        if "error" in added:
            raise ConfigError(added["error"])
        started, problems = list(added["hosts"]), list(added["problems"])
    listing = await registry.listing.remote()
    return {
        "hosts": [h["name"] for h in listing["hosts"] if h["state"] == "serving"],
        "started": started,
        "problems": problems,
        "settings": listing["settings"],
    }


async def down(*, namespace: str, prefix: str = DEFAULT_PREFIX) -> dict[str, int]:
    """End the deployment in ``namespace``: its sessions shut down, its hosts and registry end.

    Raises:
        ConfigError: no deployment runs there.
    """
    ray = import_ray()
    registry = existing_registry(ray, namespace, prefix)
    if registry is None:
        raise ConfigError(f"no relay deployment in namespace {namespace!r}")
    ended: dict[str, int] = await registry.shutdown.remote(DOWN_GRACE_S)
    ray.kill(registry, no_restart=True)
    return ended


class SessionPool:
    """A deployment for the block of one program; open with :func:`open_session_pool`."""

    def __init__(self, client: ClusterClient, config: Config) -> None:
        self.client = client
        """The client of the pool's deployment."""
        self.config = config
        """The default configuration of new sessions."""

    def open_session(self, config: Config | None = None, *, session_id: str | None = None) -> Any:
        """Open a session on the least loaded host; leaving the block shuts it down (see
        :meth:`ClusterClient.open_session`)."""
        return self.client.open_session(config or self.config, session_id=session_id)

    async def hosts(self) -> list[str]:
        """The names of the hosts that take sessions."""
        listing = await self.client.listing()
        return [h["name"] for h in listing["hosts"] if h["state"] == "serving"]

    async def loads(self) -> dict[str, int]:
        """Sessions per host that takes sessions."""
        listing = await self.client.listing()
        return {h["name"]: h["sessions"] for h in listing["hosts"] if h["state"] == "serving"}

    async def add_hosts(self, count: int = 1, host_cpus: float = 1.0) -> list[str]:
        """Start ``count`` more hosts; new sessions go to them first (they hold none)."""
        added = await self.client.registry.add_hosts.remote(count, host_cpus)
        if "error" in added:
            raise ConfigError(added["error"])
        return list(added["hosts"])

    async def kill_host(self, host: str) -> None:
        """End ``host`` as a node loss would; its sessions move."""
        await self.client.registry.kill_host.remote(host)

    async def host_pid(self, host: str) -> int:
        """The process id of ``host``."""
        pid: int = await self.client.host_handle(host).pid.remote()
        return pid


PooledSession = ClusterSession


@asynccontextmanager
async def open_session_pool(
    hosts: int = 2,
    config: Config | None = None,
    *,
    host_cpus: float = 1.0,
    name: str | None = None,
    lease_s: float = LEASE_S,
) -> AsyncIterator[SessionPool]:
    """Start ``hosts`` hosts for the block; leaving it shuts the sessions down and ends them.

    Ray must be connected already (``ray.init(...)``), and the caller must run on asyncio.
    Rollouts go to ``config.rollout.dir``, else the caller's ``$RELAY_HOME/sessions``.

    Raises:
        ConfigError: Ray is not installed or not connected, bad settings, or the cluster
            cannot place the hosts (within 10 s).
    """
    ray = import_ray()
    if not ray.is_initialized():
        raise ConfigError("connect to a Ray cluster first: ray.init(address=...)")
    if hosts < 1:
        raise ConfigError("a session pool needs at least one host")
    config = config or Config()
    rollout_dir = absolute(config.rollout.dir or relay_home() / "sessions")
    config = attrs.evolve(config, rollout=attrs.evolve(config.rollout, dir=rollout_dir))
    prefix = name or f"relay-{uuid.uuid4().hex[:8]}"
    registry = (
        remote_registry_class(ray)
        .options(**_registry_options(ray, prefix, detached=False))
        .remote(prefix, check_lease(lease_s), rollout_dir, False)
    )
    try:
        added = await registry.add_hosts.remote(hosts, host_cpus)
        if "error" in added:
            raise ConfigError(added["error"])
        async with client_of(ray, registry, None) as client:
            yield SessionPool(client, config)
    finally:
        try:
            await registry.shutdown.remote(DOWN_GRACE_S)
        finally:
            ray.kill(registry, no_restart=True)


__all__ = [
    "DOWN_GRACE_S",
    "PooledSession",
    "SessionPool",
    "down",
    "existing_registry",
    "open_session_pool",
    "up",
]
