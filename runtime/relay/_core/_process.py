"""Child processes of a session (the shell tool, hook commands): each runs under a guard of its
own, and everything it started goes when its owner is done with it, or when relay goes.

Theory of operation. :func:`open_command` does not start the command directly: it starts a
small guard (this Python, isolated, running :data:`_GUARD`) in a session of its own, and the
guard starts the command as the leader of a new process group, with the standard streams it
was given; the guard then lets go of those streams. relay and the guard share a socket pair,
relay's end private to relay. The guard says on it whether the command started (and, if not,
the ``errno``), and later how the command ended. It is also a lifeline: the guard waits on it,
and when relay's end closes, whether relay closed it (the tool call or the hook is over, a
timeout, a cancellation) or relay died in any way the kernel lets it (SIGTERM, SIGHUP,
SIGKILL, a crash), the guard ends the command.

Ending the command means every process it started, also those that left its process group and
session (``setsid``, as a daemon does). On Linux the guard is a *child subreaper*
(``PR_SET_CHILD_SUBREAPER``): a process whose parent ends is re-parented to the guard, not to
init, so nothing the command started can get out from under it. The guard kills the command's
group, then kills its own children until it has none left: a process that left the group is a
child of the guard once its parent has gone, or the descendant of one. Only the guard is a
subreaper: relay's own process, which may be a program that embeds relay, keeps the semantics
it had.

A parent-death signal (``PR_SET_PDEATHSIG``) would reach the command only, not its children,
and it fires when the *thread* that forked ends: trio forks in worker threads that end when
idle, which would kill long commands for nothing. The lifeline has neither problem.
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

#: How long ending a command may take before the owner stops waiting for its guard.
REAP_SECONDS = 5.0

# The guard, run as ``python -I -S -c _GUARD FD LIMIT ARGV...``: -I so that nothing in the
# working directory or the environment changes what it runs; only modules of the standard
# library, so that it starts in milliseconds. LIMIT is the command's time limit in seconds of
# the wall clock, or ``-`` for none. The guard tells relay, one line each: ``S<pid>`` (started)
# or ``E<errno>`` (not), then ``X<code>`` when the command exits (a negative code: the signal
# that killed it), and ``T`` when the limit passed first: the guard then ends the command and
# everything it started, as when the link closes. The command starts with every signal at its
# default action: Python ignores SIGPIPE and SIGXFSZ for itself, which ``producer | head`` in
# a command must not inherit. The guard's exit status is 0 when it ended the command and
# everything it started.
_GUARD = """\
import os, select, signal, sys, time
link = int(sys.argv[1])
os.set_inheritable(link, False)
deadline = None if sys.argv[2] == "-" else time.monotonic() + float(sys.argv[2])
if sys.platform == "linux":
    try:
        import ctypes
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:
        pass
stop = []
wake, woken = os.pipe()
os.set_blocking(woken, False)
signal.set_wakeup_fd(woken)
signal.signal(signal.SIGCHLD, lambda *_: None)
for each in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(each, lambda *_: stop.append(True))
try:
    command = os.posix_spawnp(
        sys.argv[3], sys.argv[3:], os.environ, setpgroup=0, setsigdef=signal.valid_signals()
    )
except OSError as exc:
    os.write(link, b"E%d\\n" % (exc.errno or 0))
    os._exit(127)
null = os.open(os.devnull, os.O_RDWR)
for stream in (0, 1, 2):
    os.dup2(null, stream)
os.close(null)

def say(line):
    try:
        os.write(link, line)
    except OSError:
        pass

def reaped(pid, status):
    if pid == command:
        say(b"X%d\\n" % os.waitstatus_to_exitcode(status))

def children():
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as listing:
            return [int(pid) for pid in listing.read().split()]
    except OSError:
        pass
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return [command]
    for name in names:
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                if int(stat.read().rsplit(b")", 1)[1].split()[1]) == me:
                    found.append(int(name))
        except (OSError, ValueError, IndexError):
            pass
    return found

say(b"S%d\\n" % command)
while not stop:
    left = None if deadline is None else deadline - time.monotonic()
    if left is not None and left <= 0:
        say(b"T\\n")
        break
    ready = select.select([link, wake], [], [], left)[0]
    if wake in ready:
        os.read(wake, 512)
    if link in ready:
        try:
            if not os.read(link, 64):
                break
        except OSError:
            break
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        reaped(pid, status)
try:
    os.killpg(command, signal.SIGKILL)
except OSError:
    pass
while True:
    left = children()
    if not left:
        break
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for pid in left:
        try:
            reaped(*os.waitpid(pid, 0))
        except ChildProcessError:
            pass
os._exit(0)
"""

_Stream = int | IO[Any] | None


class Command:
    """A command started by :func:`open_command`: its streams, its pid, and its exit."""

    def __init__(self, guard: anyio.abc.Process, link: socket.socket) -> None:
        self._guard = guard
        self._link = link
        self._buffer = b""
        self._ended = False
        self.pid = 0
        """The command's pid, which is also its process group's id (0 until it started)."""
        self.returncode: int | None = None
        """How the command exited, once :meth:`wait` has seen it: its exit status, or the
        negative number of the signal that killed it."""
        self.timed_out = False
        """Whether the command's time limit passed before :meth:`wait` returned, so that the
        guard ended the command and everything it started."""

    @property
    def stdin(self) -> anyio.abc.ByteSendStream | None:
        """The command's standard input, when it was a pipe."""
        return self._guard.stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream | None:
        """The command's standard output, when it was a pipe."""
        return self._guard.stdout

    @property
    def stderr(self) -> anyio.abc.ByteReceiveStream | None:
        """The command's standard error, when it was a pipe."""
        return self._guard.stderr

    async def wait(self) -> int:
        """Wait for the command to exit; its :attr:`returncode`.

        Processes the command started may still run (until :meth:`end`).
        """
        while self.returncode is None:
            line = await self._line()
            if line is None:
                # The guard is gone without a word (something killed it): the command is
                # counted as killed, and :meth:`end` makes sure of it.
                self.returncode = -signal.SIGKILL
            elif line == b"T":
                self.timed_out = True
            elif line[:1] == b"X" and _is_int(line[1:]):
                self.returncode = int(line[1:])
        # The command may have exited in time and left a process that held its output past
        # the limit: the guard said ``T`` before it ended that process, so the word is here
        # by the time the owner saw the output end.
        self.timed_out = self.timed_out or b"T" in self._pending_lines()
        return self.returncode

    async def end(self) -> None:
        """Kill the command and every process it started, and reap the guard.

        Shielded and bounded, so that it also runs, briefly, when the owner is being
        cancelled; idempotent.
        """
        if self._ended:
            return
        self._ended = True
        self._link.close()
        guard = self._guard
        with anyio.move_on_after(REAP_SECONDS, shield=True):
            await guard.wait()
        if guard.returncode != 0 and self.pid > 0:
            # The guard did not end the command itself (something killed it, or it is stuck):
            # the command's group goes from here, and the guard if it still runs.
            _kill_group(self.pid)
        if guard.returncode is None:
            _kill_group(guard.pid)
        with anyio.move_on_after(REAP_SECONDS, shield=True):
            await guard.aclose()

    async def _wait_started(self) -> None:
        """Wait for the guard's first word: the command started (its pid is kept), or an
        ``OSError`` saying why not."""
        line = await self._line()
        if line is not None and line[:1] == b"S" and line[1:].isdigit():
            self.pid = int(line[1:])
            return
        number = errno.EIO
        if line is not None and line[:1] == b"E" and line[1:].isdigit():
            number = int(line[1:])
        raise OSError(number, os.strerror(number) if number else "the command did not start")

    def _pending_lines(self) -> list[bytes]:
        """The whole lines the guard has written and relay not read yet, without waiting."""
        while True:
            try:
                chunk = self._link.recv(256, socket.MSG_DONTWAIT)
            except OSError:  # nothing more now (or the link is closed)
                break
            if not chunk:
                break
            self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        return lines

    async def _line(self) -> bytes | None:
        """The guard's next line, or None when its end of the link closed."""
        while b"\n" not in self._buffer:
            await anyio.wait_readable(self._link)
            try:
                chunk = self._link.recv(256)
            except OSError:
                chunk = b""
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line


def _is_int(text: bytes) -> bool:
    return text.removeprefix(b"-").isdigit()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@asynccontextmanager
async def open_command(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str] | None = None,
    stdin: _Stream,
    stdout: _Stream,
    stderr: _Stream,
    time_limit: float | None = None,
    pass_fds: Sequence[int] = (),
) -> AsyncIterator[Command]:
    """Run ``argv`` (no shell) under a guard, in a process group of its own, dying with relay.

    Yields the command. On leaving, the command and every process it started (those that left
    its group and session included) are killed, and the guard reaped. ``time_limit`` seconds
    of the wall clock (whatever clock the event loop has) after the command started, the guard
    kills them all itself, and :attr:`Command.timed_out` says so once :meth:`Command.wait`
    returns. The descriptors ``pass_fds`` are the command's too, under the same numbers.

    Raises:
        OSError: the command could not be started (``strerror`` says why).
    """
    ours, theirs = socket.socketpair()
    try:
        with theirs:
            limit = "-" if time_limit is None else repr(float(time_limit))
            guard = [sys.executable or "python3", "-I", "-S", "-c", _GUARD, str(theirs.fileno())]
            guard.append(limit)
            process = await anyio.open_process(
                [*guard, *argv],
                cwd=cwd,
                env=env,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                pass_fds=(theirs.fileno(), *pass_fds),
            )
        command = Command(process, ours)
        try:
            await command._wait_started()
            yield command
        finally:
            await command.end()
    finally:
        ours.close()


__all__ = ["REAP_SECONDS", "Command", "open_command"]
