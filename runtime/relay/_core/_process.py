"""Child processes of a session (the shell tool, hook commands): each runs in a process group
of its own, and the whole group goes when its owner is done with it, or when relay goes.

Theory of operation. :func:`open_command` does not start the command directly: it starts a
small guard (this Python, isolated, running :data:`_GUARD`) as the leader of a new process
group, and the guard starts the command in that group, with the standard streams it was given.
relay and the guard share a socket pair, relay's end private to relay. The socket tells relay
whether the command started (and, if not, the ``errno``), and then serves as a lifeline: the
guard waits on it, and when relay's end closes, whether relay closed it or relay died in any
way the kernel lets it (SIGTERM, SIGHUP, SIGKILL, a crash), the guard kills its whole group.

A parent-death signal (``PR_SET_PDEATHSIG``) would reach the command only, not its children,
and it fires when the *thread* that forked ends: trio forks in worker threads that end when
idle, which would kill long commands for nothing. The lifeline has neither problem.

On every way out of :func:`open_command` (the command ended, a timeout, a cancellation, an
error) the group is killed and the guard reaped.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import IO, Any

import anyio
import anyio.abc

#: How long reaping a killed process may take before the owner stops waiting.
REAP_SECONDS = 5.0

# The guard, run as ``python -I -S -c _GUARD FD ARGV...``: -I so that nothing in the working
# directory or the environment changes what it runs; only built-in modules, so that it starts
# in milliseconds. A second process of the group (the watcher, holding none of the command's
# streams) waits on the lifeline, so the guard itself only has to wait for the command. The
# command starts with every signal at its default action: Python ignores SIGPIPE and SIGXFSZ
# for itself, which ``producer | head`` in a command must not inherit.
_GUARD = """\
import os, signal, sys
link = int(sys.argv[1])
os.set_inheritable(link, False)
try:
    command = os.posix_spawnp(
        sys.argv[2], sys.argv[2:], os.environ, setsigdef=signal.valid_signals()
    )
except OSError as exc:
    os.write(link, b"E%d" % (exc.errno or 0))
    os._exit(127)
watcher = os.fork()
if watcher == 0:
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for stream in (0, 1, 2):
            os.dup2(null, stream)
        while os.read(link, 64):
            pass
    finally:
        os.killpg(0, signal.SIGKILL)
os.write(link, b"ok")
os.close(link)
while True:
    try:
        _, status = os.waitpid(command, 0)
        break
    except InterruptedError:
        continue
os.kill(watcher, signal.SIGKILL)
os.waitpid(watcher, 0)
code = os.waitstatus_to_exitcode(status)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
os._exit(code if code >= 0 else 128 - code)
"""

_Stream = int | IO[Any] | None


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` (started with ``start_new_session=True``)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def end_process(process: anyio.abc.Process) -> None:
    """Kill the process's group, then reap the process.

    Shielded and bounded, so that it also runs, briefly, when the owner is being cancelled.
    The group goes even when its leader has exited: children it left behind (holding its
    pipes open or not) do not outlive their owner's use of it.
    """
    kill_group(process.pid)
    with anyio.move_on_after(REAP_SECONDS, shield=True):
        await process.aclose()


@asynccontextmanager
async def open_command(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str] | None = None,
    stdin: _Stream,
    stdout: _Stream,
    stderr: _Stream,
) -> AsyncIterator[anyio.abc.Process]:
    """Run ``argv`` (no shell) in a process group of its own that dies with relay.

    Yields the group's leader, whose streams are the command's and whose exit status is the
    command's (a command killed by a signal shows as killed by it). On leaving, the whole
    group is killed and the leader reaped.

    Raises:
        OSError: the command could not be started (``strerror`` says why).
    """
    ours, theirs = socket.socketpair()
    try:
        with theirs:
            guard = [sys.executable or "python3", "-I", "-S", "-c", _GUARD, str(theirs.fileno())]
            process = await anyio.open_process(
                [*guard, *argv],
                cwd=cwd,
                env=env,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                pass_fds=(theirs.fileno(),),
            )
        try:
            await _wait_started(ours)
            yield process
        finally:
            await end_process(process)
    finally:
        ours.close()


async def _wait_started(link: socket.socket) -> None:
    """Wait for the guard's word: the command started, or an ``OSError`` saying why not."""
    await anyio.wait_readable(link)
    answer = link.recv(64)
    if answer == b"ok":
        return
    number = int(answer[1:]) if answer[:1] == b"E" and answer[1:].isdigit() else errno.EIO
    raise OSError(number, os.strerror(number) if number else "the command did not start")


__all__ = ["REAP_SECONDS", "end_process", "kill_group", "open_command"]
