"""What the tests of the sandbox share: whether bwrap can run here, the policies they use, and
the processes a sandboxed command left on the host.

The tests that need bwrap skip, saying why, where it cannot make a sandbox; with
``RELAY_SANDBOX_REQUIRED=1`` (CI) they fail instead.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

import pytest

from relay._exec._sandbox import SandboxPolicy, sandbox_problem


@functools.cache
def bwrap_problem() -> str | None:
    """Why bwrap cannot make a sandbox here, or None."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap is not installed (apt-get install bubblewrap)"
    return sandbox_problem(SandboxPolicy("read-only", bwrap))


def needs_bwrap() -> str:
    """The bwrap program; skips the test where it cannot run (fails it under
    ``RELAY_SANDBOX_REQUIRED=1``)."""
    problem = bwrap_problem()
    if problem is not None:
        if os.environ.get("RELAY_SANDBOX_REQUIRED") == "1":
            pytest.fail(f"RELAY_SANDBOX_REQUIRED=1 and the sandbox cannot run: {problem}")
        pytest.skip(f"the sandbox cannot run here: {problem}")
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    return bwrap


def workspace_only(
    bwrap: str,
    *,
    writable_roots: tuple[str, ...] = (),
    network_access: bool = False,
    exclude_tmpdir_env_var: bool = True,
    exclude_slash_tmp: bool = True,
) -> SandboxPolicy:
    """``workspace-write`` with only the working directory writable by default (the tests'
    folders are under /tmp, which the mode would otherwise make writable)."""
    return SandboxPolicy(
        "workspace-write",
        bwrap,
        writable_roots=writable_roots,
        network_access=network_access,
        exclude_tmpdir_env_var=exclude_tmpdir_env_var,
        exclude_slash_tmp=exclude_slash_tmp,
    )


def processes_with(marker: str) -> list[int]:
    """The host's processes whose command line holds ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = (Path("/proc") / name / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(name))
    return found
