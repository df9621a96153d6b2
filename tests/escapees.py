"""A grandchild that leaves its process group and session (``os.setsid``), as a daemon does,
and the wait for its end."""

from __future__ import annotations

import contextlib
import os
import signal
import sys

import trio

#: Run as ``python -c ESCAPE REPORT [hold] [wait]``: forks a grandchild that calls ``setsid``
#: and sleeps, writes the grandchild's pid to REPORT (a file or a FIFO) once it has left, then
#: exits, or with ``wait`` sleeps too. Without ``hold`` the grandchild's standard streams are
#: ``/dev/null``; with it, it keeps those it inherited.
ESCAPE = """\
import os, sys, time
report, *flags = sys.argv[1:]
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    os.setsid()
    if "hold" not in flags:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
    os.write(w, str(os.getpid()).encode())
    os.close(w)
    time.sleep(1000)
    os._exit(0)
os.close(w)
pid = os.read(r, 64).decode()
with open(report, "w") as out:
    out.write(pid + "\\n")
if "wait" in flags:
    time.sleep(1000)
"""


def escape_argv(report: str, *flags: str) -> list[str]:
    """The argv of a command that leaves an escaped grandchild (see :data:`ESCAPE`)."""
    return [sys.executable, "-c", ESCAPE, report, *flags]


async def wait_gone(pid: int, seconds: float = 10) -> None:
    """Wait for process ``pid`` (not a child) to end; fail, killing it, if it outlives
    ``seconds``."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with trio.fail_after(seconds):
            await trio.lowlevel.wait_readable(pidfd)
    except trio.TooSlowError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"process {pid}, which left its session, outlived its owner") from None
    finally:
        os.close(pidfd)
