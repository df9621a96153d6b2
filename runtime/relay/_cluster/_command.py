"""What the ``relay cluster`` commands share: exit codes, connecting to Ray, event lines."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import Any

from .._base import _protocol as p
from .._base._codec import to_json
from .._base._errors import ConfigError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

#: CPUs of the local Ray instance a run starts when no address is given.
LOCAL_CPUS = 2


def event_line(event: p.Event) -> str:
    """An event as one JSON line (without its newline)."""
    return json.dumps(to_json(event), ensure_ascii=False, separators=(",", ":"))


def ray_address(args: argparse.Namespace) -> str | None:
    """The Ray cluster the command talks to: ``--address``, else ``$RAY_ADDRESS`` (set for a
    Ray job), else None."""
    address: str | None = args.address or os.environ.get("RAY_ADDRESS") or None
    if address == "auto":
        raise ConfigError("name the Ray cluster's address (--address HOST:PORT), not 'auto'")
    return address


#: The printer :func:`notices_to_stderr` put in Ray's place, so that it is put there once.
_moved: Callable[[dict[str, Any], bool], None] | None = None


def notices_to_stderr() -> None:
    """Send the notices Ray's driver prints about the cluster (a node marked dead, a worker
    that died) to stderr. Ray prints them to ``sys.stdout`` from a thread of its own, at any
    time, where the cluster commands write what a program reads (``list --json``, event
    lines), and ``log_to_driver=False`` does not hold them back."""
    global _moved
    try:
        from ray._private import worker
    except ImportError:
        return
    printer = getattr(worker, "print_to_stdstream", None)
    if printer is None or printer is _moved:
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        printer({**data, "is_err": True}, ignore_prefix)

    worker.print_to_stdstream = to_stderr
    _moved = to_stderr


def init_ray(
    ray: Any,
    address: str | None,
    namespace: str | None,
    runtime_env: dict[str, Any] | None = None,
) -> None:
    """Connect to the Ray cluster at ``address`` (None: start a local one on loopback), as a
    job whose processes get ``runtime_env`` (the modules of the tasks a session names)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    notices_to_stderr()
    job = {"runtime_env": runtime_env} if runtime_env else {}
    if address is None:
        # A run's own instance listens on loopback only (Ray takes the machine's address else).
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        ray.init(
            num_cpus=LOCAL_CPUS,
            include_dashboard=False,
            log_to_driver=False,
            logging_level="WARNING",
            namespace=namespace,
            **job,
        )
    else:
        ray.init(
            address=address,
            log_to_driver=False,
            logging_level="WARNING",
            namespace=namespace,
            **job,
        )


__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "LOCAL_CPUS",
    "event_line",
    "init_ray",
    "notices_to_stderr",
    "ray_address",
]
