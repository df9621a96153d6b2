"""What the cluster asks of Ray, in one place: importing it, the errors that mean an actor is
gone, the names of a deployment's actors, the cluster's CPUs, and calls with a deadline.

Ray is imported only here and only when a cluster is used, so ``import relay`` never pulls it in.
Every call into Ray from the caller's side runs on asyncio, the loop Ray's futures belong to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from .._base._errors import ConfigError, RelayError

T = TypeVar("T")

MISSING_RAY = "the cluster needs Ray, which is not installed: pip install 'relay-runtime[ray]'"

#: The namespace and the name prefix of a deployment started by ``relay cluster up``.
DEFAULT_NAMESPACE = "relay"
DEFAULT_PREFIX = "relay"


def import_ray() -> Any:
    """The ``ray`` module, or :class:`ConfigError` naming the extra that provides it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(MISSING_RAY) from exc
    return ray


#: The first Ray tried whose async actors take a bound on a stream's unread items
#: (``_generator_backpressure_num_objects``); Ray 2.50 refuses it for an async actor.
STREAM_BOUND_SINCE = (2, 60)


def stream_options(version: str, ahead: int) -> dict[str, Any]:
    """The options of a host's event stream under Ray ``version``: at most ``ahead`` batches
    sent ahead of a caller that does not read them, where that Ray allows it for an async
    actor (elsewhere the caller's own queue is the bound: ``docs/cluster.md``)."""
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return {}
    if (major, minor) < STREAM_BOUND_SINCE:
        return {}
    return {"_generator_backpressure_num_objects": ahead}


def actor_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """The errors of a call whose actor died or cannot be reached."""
    return (ray.exceptions.RayActorError,)


def registry_name(prefix: str) -> str:
    """The name of a deployment's registry actor."""
    return f"{prefix}-registry"


def host_name(prefix: str, number: int) -> str:
    """The name of a deployment's host number ``number``."""
    return f"{prefix}-host-{number}"


def group_name(prefix: str, number: int) -> str:
    """The name of the placement group of a deployment's ``number``-th set of hosts."""
    return f"{prefix}-hosts-{number}"


def cpus(ray: Any) -> tuple[float, float]:
    """The cluster's CPUs: in all, and not reserved by anything (placement groups included)."""
    total = float(ray.cluster_resources().get("CPU", 0.0))
    free = float(ray.available_resources().get("CPU", 0.0))
    return total, free


def placement_problem(hosts: int, host_cpus: float, total: float, free: float) -> str:
    """Why ``hosts`` hosts of ``host_cpus`` CPUs each cannot be placed, in one line."""
    return (
        f"cannot place {hosts} host(s) of {host_cpus:g} CPU each: that asks for "
        f"{hosts * host_cpus:g} CPUs, and the cluster has {free:g} of its {total:g} CPUs "
        "available; start fewer hosts (--hosts), smaller ones (--host-cpus), or add nodes"
    )


async def within(seconds: float, call: Awaitable[T]) -> T:
    """``await call``, or :class:`TimeoutError` after ``seconds`` (the call may go on)."""
    return await asyncio.wait_for(_awaited(call), seconds)


async def _awaited(call: Awaitable[T]) -> T:
    return await call


def relay_error(exc: BaseException) -> RelayError | None:
    """The relay error an actor raised, out of Ray's wrapping (None for anything else)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, RelayError):
        return cause
    return exc if isinstance(exc, RelayError) else None


__all__ = [
    "DEFAULT_NAMESPACE",
    "DEFAULT_PREFIX",
    "MISSING_RAY",
    "STREAM_BOUND_SINCE",
    "actor_errors",
    "cpus",
    "group_name",
    "host_name",
    "import_ray",
    "placement_problem",
    "registry_name",
    "relay_error",
    "stream_options",
    "within",
]
