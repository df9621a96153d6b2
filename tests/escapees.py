"""A grandchild that leaves its process group and session (``os.setsid``), as a daemon does,
and the wait for its end.

A command runs in a PID namespace of its own, so a pid it reports (``echo $!``,
``os.getpid()``) names nothing on the host. The processes the tests wait for hold an exclusive
``flock`` on a *lock file* instead: the lock goes only when the last process holding it has
ended (the kernel drops it as it closes a dead process's files), so a test that can take it
knows they are all gone, whatever namespace they ran in. A command's lock file is its report
path with ``.lock`` after it (:func:`lock_of`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sys

import trio

from tests.sandboxing import processes_with

#: Run as ``python -c ESCAPE REPORT [hold] [wait] [marker...]``: takes the lock of REPORT
#: (``REPORT.lock``), forks a grandchild that keeps it, calls ``setsid`` and sleeps, writes the
#: grandchild's pid (in the command's namespace) to REPORT (a file or a FIFO) once it has left,
#: then exits, or with ``wait`` sleeps too. Without ``hold`` the grandchild's standard streams
#: are ``/dev/null``; with it, it keeps those it inherited. Other words are ignored (a marker
#: for :func:`~tests.sandboxing.processes_with`). The lock is taken before the report is
#: written: once REPORT is there, the lock goes only when the command and its grandchild have
#: both ended.
ESCAPE = """\
import fcntl, os, sys, time
report, *flags = sys.argv[1:]
try:
    lock = os.open(report + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
except OSError:  # a folder the command cannot write: the test made the file
    lock = os.open(report + ".lock", os.O_RDONLY)
fcntl.flock(lock, fcntl.LOCK_EX)
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

#: Python lines that take the lock of ``sys.argv[1]`` (its path with ``.lock`` after it) in
#: ``lock``, a descriptor: a process that starts children with ``pass_fds=[lock]`` shares it
#: with them, and the lock lasts as long as the last of them.
TAKE_LOCK = (
    "import fcntl, os, sys\n"
    "lock = os.open(sys.argv[1] + '.lock', os.O_RDWR | os.O_CREAT, 0o644)\n"
    "fcntl.flock(lock, fcntl.LOCK_EX)\n"
)


def escape_argv(report: str, *flags: str) -> list[str]:
    """The argv of a command that leaves an escaped grandchild (see :data:`ESCAPE`)."""
    return [sys.executable, "-c", ESCAPE, report, *flags]


def lock_of(report: str | os.PathLike[str]) -> str:
    """The lock file of the processes that report to ``report``."""
    return f"{os.fspath(report)}.lock"


def _open_lock(report: str | os.PathLike[str]) -> int:
    try:
        return os.open(lock_of(report), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise AssertionError(
            f"{lock_of(report)} does not exist: the process never took its lock"
        ) from None


def alive(report: str | os.PathLike[str]) -> bool:
    """Whether a process still holds the lock of ``report`` (fails if none ever took it)."""
    fd = _open_lock(report)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # drops the lock, if this took it
    return False


def holders(report: str | os.PathLike[str]) -> list[int]:
    """The host's processes (other than this one) with the lock file of ``report`` open."""
    target = os.stat(lock_of(report))
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{name}/fd"):
                with contextlib.suppress(OSError):
                    seen = os.stat(f"/proc/{name}/fd/{fd}")
                    if (seen.st_dev, seen.st_ino) == (target.st_dev, target.st_ino):
                        found.append(int(name))
                        break
    return found


def _take_and_drop(fd: int) -> None:
    # Owns ``fd``: an abandoned call still closes it once it has the lock.
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    finally:
        os.close(fd)


async def wait_gone(
    report: str | os.PathLike[str], seconds: float = 10, *, marker: str | None = None
) -> None:
    """Wait until every process holding the lock of ``report`` has ended; fail, killing them
    (and those with ``marker`` in their command line), if one outlives ``seconds``.

    Under the loop's own clock (a ``MockClock`` would not move while it waits). Fails too if
    the lock file does not exist: then the wait would prove nothing.
    """
    fd = _open_lock(report)
    try:
        with trio.fail_after(seconds):
            await trio.to_thread.run_sync(_take_and_drop, fd, abandon_on_cancel=True)
    except trio.TooSlowError:
        strays = holders(report) + (processes_with(marker) if marker is not None else [])
        for pid in strays:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise AssertionError(
            f"a process holding {lock_of(report)} outlived its owner for {seconds} s "
            f"(killed {sorted(set(strays))})"
        ) from None


__all__ = [
    "ESCAPE",
    "TAKE_LOCK",
    "alive",
    "escape_argv",
    "holders",
    "lock_of",
    "wait_gone",
]
