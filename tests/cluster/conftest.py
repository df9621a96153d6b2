"""One local Ray instance for every cluster test (starting one takes seconds)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

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
