"""Child processes of a session (the shell tool, hook commands, MCP servers): each runs under a
keeper of its own, and everything it started goes when its owner is done with it, when its
time limit passes, or when relay goes; nothing the command does can undo that.

Theory of operation. relay starts one *process guard* per process (this Python, isolated,
running :mod:`._guard`), in a session of its own, the first time it runs a command, and again
if the guard died or relay's process was forked (the child starts its own). relay and the
guard share a socket pair, the *control* socket: relay's end is private to relay, and when it
closes (relay exits or is killed in any way, SIGKILL included) the guard stops.

For each command relay makes a socket pair, the call's *link*, and sends the guard one end of
it with the command's standard streams and ``pass_fds`` (``SCM_RIGHTS``); the request itself
(argv, working directory, environment, time limit) follows on the link. The guard forks a
*keeper* for the call, first in a new PID namespace when the kernel lets it (relay runs as
root; ``unshare(CLONE_NEWPID)``, then back to the guard's own namespace through
``/proc/self/ns/pid``, so that the next call gets a fresh one too). The keeper is that
namespace's init: it gives the namespace a ``/proc`` of its own (in a mount namespace whose
mounts are slaves of the host's), starts the command as the leader of a process group with
every signal at its default, and reports on the link: started (with pidfds of itself and of
the command, relay's hold on them), exited, the time limit passed, everything gone.

The command and whatever it starts live in that namespace: they cannot name the keeper, the
guard or relay (pids outside it do not exist there, not in its ``/proc`` either, and the
kernel drops the signals they send their init), and their orphans come to the keeper. When
the link closes (the call is over, a cancellation, relay gone) or the time limit passes (on
the wall clock, whatever clock the event loop has; see :mod:`._real_work`), the keeper kills
every process of the namespace, ``setsid`` daemons included, reaps them and says so; and
should the keeper itself die, the kernel kills all that is left in its namespace. The
command's own signals keep their meaning: it is the namespace's second process, not its init.
When relay's owner is done and the keeper has not said everything is gone within
:data:`REAP_SECONDS`, relay kills the keeper through its pidfd. A guard that dies takes no call
with it: its keepers hold the calls, and the next command starts a new guard.

Where the kernel refuses PID namespaces (no privilege, no user namespaces), the keeper runs
in relay's namespace as a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): it ends a call by
killing the command's group, then its own children until none is left, a process that left the
group (``setsid``) being its child once its parent has gone. The guard is a subreaper too and
kills whatever a killed keeper left. There a command can still find its keeper and the guard
and kill both; :attr:`Command.namespaced` says which way a command runs. Only the guard and
the keepers are subreapers: relay's own process, which may be a program that embeds relay,
keeps the semantics it had.

The command's standard streams, relay's ends of its pipes included, are :mod:`._streams`'s.

A parent-death signal (``PR_SET_PDEATHSIG``) would reach the command only, not its children,
and it fires when the *thread* that forked ends: trio forks in worker threads that end when
idle, which would kill long commands for nothing. The link has neither problem.
"""

from __future__ import annotations

import errno
import fcntl
import importlib.resources
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

import anyio
import anyio.abc
import anyio.to_thread

from ._streams import Streams, StreamSpec

#: How long ending a command may take before the owner stops waiting for its keeper.
REAP_SECONDS = 5.0
#: The most descriptors a command may be passed (the guard takes 64 with the streams).
MAX_PASS_FDS = 60

# ----------------------------------------------------------------------------- the guard


class _Guard:
    """The guard of this process: its pid, a pidfd of it, relay's end of the control socket."""

    def __init__(self, pid: int, pidfd: int, control: socket.socket) -> None:
        self.pid = pid
        self.pidfd = pidfd
        self.control = control
        self.owner = os.getpid()

    def alive(self) -> bool:
        """Whether the guard still runs (its pidfd turns readable when it ends)."""
        return not select.select([self.pidfd], [], [], 0)[0]

    def forget(self) -> None:
        """Let go of the guard (it exits once its calls are over); in the process that
        started it, it is reaped when it has."""
        if self.owner == os.getpid():
            _retired.append(self.pid)
        self.control.close()
        os.close(self.pidfd)


def _reap_retired() -> None:
    for pid in list(_retired):
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                continue
        except ChildProcessError:
            pass
        _retired.remove(pid)


_lock = threading.Lock()
_guard: _Guard | None = None
_source: str | None = None
_namespaces = True
_retired: list[int] = []  # guards let go of and not reaped yet


def _current_guard() -> _Guard:
    """The guard of this process, started (again) if there is none, it died, or the process
    is a fork of the one that started it."""
    global _guard
    with _lock:
        _reap_retired()
        guard = _guard
        if guard is not None and (guard.owner != os.getpid() or not guard.alive()):
            guard.forget()
            guard = _guard = None
        if guard is None:
            guard = _guard = _start_guard()
        return guard


def _restart_guard(*, namespaces: bool) -> None:
    """Let the guard go (it exits once its calls are over) and have the next command start
    one that uses PID namespaces or, as where they are refused, does not (for the tests)."""
    global _guard, _namespaces
    with _lock:
        if _guard is not None:
            _guard.forget()
        _guard = None
        _namespaces = namespaces


def _guard_pid() -> int | None:
    """The pid of this process's guard, if one runs (for the bench and the tests)."""
    guard = _guard
    return guard.pid if guard is not None and guard.owner == os.getpid() else None


def _start_guard() -> _Guard:
    global _source
    if _source is None:
        _source = importlib.resources.files(__package__).joinpath("_guard.py").read_text()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    # Above 3, so that the move to 3 in the child is never a no-op that keeps close-on-exec.
    high = fcntl.fcntl(theirs.fileno(), fcntl.F_DUPFD_CLOEXEC, 10)
    try:
        python = sys.executable or "python3"
        pid = os.posix_spawnp(
            python,
            [python, "-I", "-S", "-c", _source, *([] if _namespaces else ["groups"])],
            {},
            file_actions=[
                (os.POSIX_SPAWN_DUP2, null, 0),
                (os.POSIX_SPAWN_DUP2, null, 1),
                (os.POSIX_SPAWN_DUP2, null, 2),
                (os.POSIX_SPAWN_DUP2, high, 3),
            ],
            setsid=True,
            setsigdef=signal.valid_signals(),
            setsigmask=(),
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
        os.close(high)
        os.close(null)
    # A send that finds the control socket full waits this long in a worker thread.
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(REAP_SECONDS))
    return _Guard(pid, os.pidfd_open(pid), ours)


def _timeval(seconds: float) -> bytes:
    return struct.pack("@ll", int(seconds), int(seconds % 1 * 1e6))


async def _send_call(guard: _Guard, fds: list[int]) -> None:
    """Hand the guard a call's descriptors."""
    try:
        socket.send_fds(guard.control, [b"C"], fds, socket.MSG_DONTWAIT)
    except BlockingIOError:
        # The guard is behind by hundreds of calls (or stopped): wait for it off the loop.
        await anyio.to_thread.run_sync(socket.send_fds, guard.control, [b"C"], fds)


# ----------------------------------------------------------------------------- the command


class Command:
    """A command started by :func:`open_command`: its streams, its pid, and its exit."""

    def __init__(self, link: socket.socket, streams: Streams, cwd: str) -> None:
        self._link = link
        self._cwd = cwd
        self._buffer = b""
        self._received: list[int] = []
        self._pidfds: list[int] = []
        self._gone = False  # the keeper said everything the command started is gone
        self._ended = False
        self._streams = streams
        self.pid = 0
        """The command's pid, as relay sees it, which is also its process group's id (0 until
        it started)."""
        self.namespaced = False
        """Whether the command runs in a PID namespace of its own (False: the fallback, its
        process group under a subreaper; see the module's docstring)."""
        self.returncode: int | None = None
        """How the command exited, once :meth:`wait` has seen it: its exit status, or the
        negative number of the signal that killed it."""
        self.timed_out = False
        """Whether the command's time limit passed before :meth:`wait` returned, so that its
        keeper ended the command and everything it started."""

    @property
    def stdin(self) -> anyio.abc.ByteSendStream | None:
        """The command's standard input, when it was a pipe."""
        return self._streams.stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream | None:
        """The command's standard output, when it was a pipe."""
        return self._streams.stdout

    @property
    def stderr(self) -> anyio.abc.ByteReceiveStream | None:
        """The command's standard error, when it was a pipe."""
        return self._streams.stderr

    async def wait(self) -> int:
        """Wait for the command to exit; its :attr:`returncode`.

        Processes the command started may still run (until :meth:`end`).
        """
        while self.returncode is None:
            line = await self._line()
            if line is None:
                # The keeper is gone without a word (something killed it): the command is
                # counted as killed, and :meth:`end` makes sure of it.
                self.returncode = -signal.SIGKILL
            elif line == b"T":
                self.timed_out = True
            elif line[:1] == b"X" and _is_int(line[1:]):
                self.returncode = int(line[1:])
            elif line == b"D":
                self._gone = True
        # The command may have exited in time and left a process that held its output past
        # the limit: the keeper said ``T`` before it ended that process, so the word is here
        # by the time the owner saw the output end.
        self.timed_out = self.timed_out or b"T" in self._pending_lines()
        return self.returncode

    async def end(self) -> None:
        """Kill the command and every process it started, and wait (briefly) until they are
        gone.

        Shielded and bounded, so that it also runs, briefly, when the owner is being
        cancelled; idempotent. The output streams stay open: what was written can still be
        read, up to the end.
        """
        if self._ended:
            return
        self._ended = True
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(REAP_SECONDS):
                try:
                    self._link.shutdown(socket.SHUT_WR)  # the keeper's word to end it all
                except OSError:
                    pass
                while not self._gone:
                    line = await self._line()
                    if line is None:
                        break
                    self._gone = line == b"D"
            if not self._gone:
                self._kill()
        self._link.close()
        for fd in self._pidfds:
            os.close(fd)
        self._pidfds = []

    def _kill(self) -> None:
        """relay's own hold: the keeper has not said everything is gone (it died, or it is
        stuck). Killing a keeper ends its namespace; in the fallback the command's group goes
        from here, and the guard kills what the keeper left."""
        for fd in self._pidfds:
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                pass
        if not self.namespaced and self.pid > 0:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass

    async def _wait_started(self) -> bool:
        """Wait for the keeper's first word: True when the command started (its pid is
        kept), False when the link closed without a word; an ``OSError`` saying why it did
        not start."""
        line = await self._line()
        if line is None:
            return False
        if line[:1] == b"S":
            number, _, how = line[1:].partition(b" ")
            self.namespaced = how == b"n"
            self._pidfds, self._received = self._received, []
            self.pid = _host_pid(self._pidfds[1]) if len(self._pidfds) == 2 else 0
            if self.pid <= 0 and not self.namespaced and number.isdigit():
                self.pid = int(number)
            return True
        number, _, what = line[1:].partition(b" ")
        code = int(number) if line[:1] == b"E" and number.isdigit() else errno.EIO
        why = os.strerror(code) if code else "the command did not start"
        if what == b"cwd":  # as subprocess says it: the directory is the name that failed
            raise OSError(code, why, self._cwd)
        raise OSError(code, why)

    async def _send_request(self, request: bytes) -> None:
        view = memoryview(request)
        while view:
            try:
                view = view[self._link.send(view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._link)
            except OSError:
                return  # the keeper is gone: the first word says so

    def _pending_lines(self) -> list[bytes]:
        """The whole lines the keeper has written and relay not read yet, without waiting."""
        while True:
            try:
                chunk = self._receive()
            except OSError:  # nothing more now (or the link is closed)
                break
            if not chunk:
                break
            self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        return lines

    def _receive(self) -> bytes:
        data, fds, _, _ = socket.recv_fds(self._link, 256, 4, socket.MSG_CMSG_CLOEXEC)
        self._received += fds
        return data

    async def _line(self) -> bytes | None:
        """The keeper's next line, or None when its end of the link closed."""
        while b"\n" not in self._buffer:
            try:
                chunk = self._receive()
            except BlockingIOError:
                await anyio.wait_readable(self._link)
                continue
            except OSError:
                chunk = b""
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line


def _host_pid(pidfd: int) -> int:
    """The pid, in relay's namespace, of the process ``pidfd`` refers to (0: unknown)."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}", "rb") as info:
            for line in info:
                if line.startswith(b"Pid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _is_int(text: bytes) -> bool:
    return text.removeprefix(b"-").isdigit()


def _request(
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str] | None,
    time_limit: float | None,
    pass_fds: Sequence[int],
) -> bytes:
    """The request line a keeper reads (see :mod:`._guard`)."""

    def text(value: str | bytes) -> str:
        return os.fsencode(value).decode("latin-1")

    pairs = os.environb.items() if env is None else env.items()
    request = {
        "argv": [text(arg) for arg in argv],
        "cwd": text(cwd),
        "env": [[text(key), text(value)] for key, value in pairs],
        "limit": None if time_limit is None else float(time_limit),
        "pass": list(pass_fds),
    }
    return json.dumps(request).encode("ascii") + b"\n"


@asynccontextmanager
async def open_command(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str] | None = None,
    stdin: StreamSpec,
    stdout: StreamSpec,
    stderr: StreamSpec,
    time_limit: float | None = None,
    pass_fds: Sequence[int] = (),
) -> AsyncIterator[Command]:
    """Run ``argv`` (no shell) under a keeper, in a process group of its own, dying with relay.

    Yields the command. On leaving, the command and every process it started (those that left
    its group and session included) are killed, and the streams relay holds closed.
    ``time_limit`` seconds of the wall clock (whatever clock the event loop has) after the
    command started, its keeper kills them all itself, and :attr:`Command.timed_out` says so
    once :meth:`Command.wait` returns. The descriptors ``pass_fds`` are the command's too,
    under the same numbers.

    Raises:
        OSError: the command could not be started (``strerror`` says why).
    """
    if not argv:
        raise OSError(errno.ENOENT, "no command to run")
    if len(pass_fds) > MAX_PASS_FDS:
        raise OSError(errno.EMFILE, f"more than {MAX_PASS_FDS} descriptors to pass")
    request = _request(argv, cwd, env, time_limit, pass_fds)
    streams = Streams(stdin, stdout, stderr)
    command: Command | None = None
    try:
        command = await _start(request, streams, cwd, pass_fds)
        streams.let_go()
        yield command
    finally:
        streams.let_go()
        if command is not None:
            await command.end()
        streams.close_ours()


async def _start(request: bytes, streams: Streams, cwd: str, pass_fds: Sequence[int]) -> Command:
    """Hand the call to the guard and wait for the command's start: the command, or an
    ``OSError``. A guard that died between the check and the call gets one successor."""
    for attempt in range(2):
        guard = _current_guard()
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        command = Command(ours, streams, cwd)
        try:
            try:
                with theirs:
                    await _send_call(guard, [theirs.fileno(), *streams.theirs, *pass_fds])
            except OSError:
                started = False
            else:
                await command._send_request(request)
                started = await command._wait_started()
        except BaseException:
            await command.end()
            raise
        if started:
            return command
        await command.end()
        if attempt or guard.alive():
            break
    raise OSError(errno.EIO, "the process guard did not start the command")


class Starter(Protocol):
    """Start a command with the given streams (a hook's: in a session, the gate's, which
    gives the environment and the confinement)."""

    def __call__(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        stdin: int,
        stdout: int,
        stderr: int,
        time_limit: float | None,
    ) -> AbstractAsyncContextManager[Command]: ...


__all__ = ["MAX_PASS_FDS", "REAP_SECONDS", "Command", "Starter", "open_command"]
