"""One local Ray instance for the cluster tests that need one node (starting one takes
seconds), and clusters of separate raylets in a network namespace for those of a deployment
(``netns.py``)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from .netns import LocalCluster, unavailable

# Read when Ray is imported. Loopback only: Ray binds to the machine's address unless told this
# is a one-machine run; no usage report, no token to set up.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

ray = pytest.importorskip("ray")


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """Start a local Ray instance (2 CPUs, no dashboard, offline); yield its address."""
    context: Any = ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False
    )
    try:
        yield str(context.address_info["gcs_address"])
    finally:
        ray.shutdown()


@pytest.fixture
def shared() -> Iterator[Path]:
    """The shared directory: a place every node of these clusters sees (one machine)."""
    made = Path(tempfile.mkdtemp(prefix="relay-shared-", dir="/tmp"))
    yield made
    shutil.rmtree(made, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """A head and two worker nodes (1 CPU each) in a network namespace, for a module."""
    with local_cluster(["a", "b", "c"]) as made:
        yield made


@pytest.fixture
def fresh_cluster() -> Iterator[Callable[..., LocalCluster]]:
    """Makes a cluster for one test (nodes by label; ``hidden``: nodes without the mount)."""
    with ExitStack() as stack:

        def make(labels: list[str], hidden: dict[str, Path] | None = None) -> LocalCluster:
            return stack.enter_context(local_cluster(labels, hidden or {}))

        yield make


@contextmanager
def local_cluster(
    labels: list[str], hidden: dict[str, Path] | None = None
) -> Iterator[LocalCluster]:
    reason = unavailable()
    if reason is not None:
        pytest.skip(f"a cluster of separate raylets cannot run here: {reason}")
    root = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))
    made = LocalCluster(root)
    try:
        made.create()
        for label in labels:
            made.start_node(label, hidden=(hidden or {}).get(label))
        yield made
    finally:
        made.destroy()
        shutil.rmtree(root, ignore_errors=True)
