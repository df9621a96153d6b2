"""Child processes of a session (the shell tool, hook commands): each runs in a process group
of its own, and the whole group goes when its owner is done with it."""

from __future__ import annotations

import os
import signal

import anyio
import anyio.abc

#: How long reaping a killed process may take before the owner stops waiting.
REAP_SECONDS = 5.0


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` (started with ``start_new_session=True``)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def end_process(process: anyio.abc.Process, *, kill: bool = False) -> None:
    """Kill the process's group if ``kill`` or if it still runs, then reap it.

    Shielded and bounded, so that it also runs, briefly, when the owner is being cancelled.
    Children may outlive a leader that exited and still hold its pipes open: ``kill`` takes
    them down too.
    """
    if kill or process.returncode is None:
        kill_group(process.pid)
    with anyio.move_on_after(REAP_SECONDS, shield=True):
        await process.aclose()
