"""The process guard's own program (the theory of operation is in :mod:`relay._exec._process`).

relay runs it as ``python -I -S -c SOURCE`` with its end of the control socket as descriptor 3:
-I so that nothing in the working directory or the environment changes what it runs, only the
standard library so that it starts in milliseconds. Nothing here imports relay.

The guard waits on the control socket. Each message there is a call: the guard's end of the
call's link, then the command's standard input, output and error, then the descriptors it is
to be passed. For each the guard forks a *keeper*, first in a PID namespace of its own when
the kernel lets it, which reads the command's request from the link and runs the call to its
end (:func:`keep`). When relay's end of the control socket closes (relay is gone), the guard
stops taking calls and exits once its keepers have. Only the guard and its keepers run this
code; commands start from ``exec``.

What a keeper says on the link, one line each: ``S<pid> <how>`` (started; ``n`` in a PID
namespace, ``g`` in a process group only), with descriptors of the keeper and of the command
(pidfds) when the kernel has them; ``E<errno>`` (not started); ``X<code>`` (the command exited:
its status, or the negative number of the signal that killed it); ``T`` (the time limit
passed: the keeper now ends everything); ``D`` (the command and every process it started are
gone). The request is one line of JSON: ``argv``, ``cwd``, ``env`` (pairs), ``limit`` (seconds
of the wall clock, or null) and ``pass`` (the numbers the passed descriptors take); every text
is bytes read as Latin-1, so that no encoding stands between relay and the command.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import select
import signal
import socket
import sys
import time
from typing import Any

CONTROL = 3
"""The guard's end of the control socket, as relay starts it."""
CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
PR_SET_CHILD_SUBREAPER = 36
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_SLAVE = 0x2, 0x4, 0x8, 0x4000, 0x80000
#: unshare() errors that say PID namespaces are not to be had here at all (not permitted, not
#: built in); others (the namespace limit reached, no memory) hold for one call only.
NEVER = (errno.EPERM, errno.EINVAL, errno.ENOSYS, errno.EACCES)
#: Added to an ``errno`` when the working directory, not the command, is what failed.
CWD = 1 << 16


class Guard:
    """The guard's state: the control socket, the keepers it forked, its own PID namespace."""

    def __init__(self, namespaces: bool) -> None:
        self.libc: Any = ctypes.CDLL(None, use_errno=True)
        self.control = socket.socket(fileno=CONTROL)
        self.keepers: set[int] = set()
        try:
            self.own_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.own_ns = -1
        # A command in a namespace is known to relay by its pidfd only (its pid there is not
        # relay's): no pidfds, no namespaces.
        self.namespaces = namespaces and self.own_ns >= 0 and hasattr(os, "pidfd_open")
        self.wake, woken = os.pipe()
        os.set_blocking(woken, False)
        signal.set_wakeup_fd(woken)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        # What a keeper left behind when it was killed is re-parented here, and killed.
        self.libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    def run(self) -> None:
        """Take calls until relay is gone, then wait for the keepers."""
        poller = select.poll()
        poller.register(self.control, select.POLLIN)
        poller.register(self.wake, select.POLLIN)
        listening = True
        while listening or self.keepers:
            for fd, _ in poller.poll():
                if fd == self.wake:
                    os.read(self.wake, 512)
                    self.reap()
                elif listening and not self.take():
                    listening = False
                    poller.unregister(self.control)
                    self.control.close()

    def take(self) -> bool:
        """Start the call waiting on the control socket; False when relay's end is closed."""
        try:
            data, fds, _, _ = socket.recv_fds(self.control, 16, 64, socket.MSG_CMSG_CLOEXEC)
        except OSError:
            return False
        if not data:
            for fd in fds:
                os.close(fd)
            return False
        if len(fds) >= 4:
            self.start(fds)
        else:
            for fd in fds:
                os.close(fd)
        return True

    def start(self, fds: list[int]) -> None:
        """Fork the keeper of one call (in a new PID namespace when it can), and let go of the
        call's descriptors."""
        namespaced = False
        if self.namespaces:
            if self.libc.unshare(CLONE_NEWPID) == 0:
                namespaced = True
            elif ctypes.get_errno() in NEVER:
                self.namespaces = False
        try:
            pid = os.fork()
        except OSError as exc:
            pid = -(exc.errno or errno.EAGAIN)
        if pid == 0:
            code = 1
            try:
                code = keep(self, fds, namespaced)
            finally:
                os._exit(code)
        # Back to the guard's own namespace for the children to come: the next unshare()
        # makes a namespace below the one the guard's children go to, and must start here.
        if namespaced and self.libc.setns(self.own_ns, CLONE_NEWPID) != 0:
            os._exit(1)  # relay starts another guard; the keepers do not need this one
        if pid > 0:
            self.keepers.add(pid)
        else:
            say(fds[0], b"E%d\n" % -pid)
        for fd in fds:
            os.close(fd)

    def reap(self) -> None:
        """Reap the children that ended; kill the others that are not keepers (what a killed
        keeper left), until there are none."""
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                break
            self.keepers.discard(pid)
        for pid in children():
            if pid not in self.keepers:
                kill(pid)


def keep(guard: Guard, fds: list[int], namespaced: bool) -> int:
    """The keeper of one call, forked by the guard: start the command, tell relay, and end
    everything it started when relay's end of the link closes or the time limit passes.

    In a namespace the keeper is its init: the command and its descendants cannot signal it,
    their orphans come to it, and when it ends the kernel kills what is left there.
    """
    link = fds[0]
    guard.control.detach()  # its descriptor is closed below; relay must see the guard's end
    close_all_but(set(fds))
    # The call's descriptors are the keeper's: the command gets its streams as 0, 1 and 2
    # (and the passed ones) only, never the link or the originals of its pipes, which would
    # keep the call's output open after the command and let it talk to the keeper.
    for fd in fds:
        os.set_inheritable(fd, False)
    wake, woken = os.pipe()  # the guard's wake-up pipe is the guard's
    os.set_blocking(woken, False)
    signal.set_wakeup_fd(woken)
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(link, 65536)
        if not chunk:
            return 0  # relay gave the call up before it was asked
        line += chunk
    job = json.loads(line)
    if namespaced:
        own_proc(guard.libc)
    else:
        guard.libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    command = spawn(job, fds)
    if command < 0:
        number = -command
        say(link, b"E%d%s\n" % (number & (CWD - 1), b" cwd" if number & CWD else b""))
        return 127
    pidfds: list[int] = []
    try:
        pidfds = [os.pidfd_open(os.getpid()), os.pidfd_open(command)]
    except OSError:
        pass
    say(link, b"S%d %s\n" % (command, b"n" if namespaced else b"g"), pidfds)
    for fd in pidfds:
        os.close(fd)
    limit = job["limit"]
    deadline = None if limit is None else time.monotonic() + float(limit)
    poller = select.poll()
    poller.register(link, select.POLLIN)
    poller.register(wake, select.POLLIN)
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            say(link, b"T\n")
            break
        ready = [fd for fd, _ in poller.poll(None if left is None else max(1, int(left * 1000)))]
        if wake in ready:
            os.read(wake, 512)
        if link in ready:
            try:
                if not os.read(link, 64):
                    break
            except OSError:
                break
        reap_all(link, command, block=False)
    if namespaced and os.getpid() == 1:
        kill(-1)  # every process of the namespace but its init, the keeper
    else:
        end_group(command)
    reap_all(link, command, block=True)
    say(link, b"D\n")
    return 0


def own_proc(libc: Any) -> None:
    """Give the keeper's namespace a ``/proc`` of its own, so that the pids a command reads
    there are those it can signal, and relay's are not there to read. Mounts made in it stay
    in it (a slave of the host's, never a peer)."""
    if libc.unshare(CLONE_NEWNS) != 0:
        return
    if libc.mount(None, b"/", None, MS_REC | MS_SLAVE, None) != 0:
        return
    libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)


def spawn(job: dict[str, Any], fds: list[int]) -> int:
    """Start the command of ``job`` with ``fds[1:]`` as its descriptors 0, 1, 2 and the passed
    ones: its pid, or a negative ``errno``. It leads a process group of its own and starts with
    every signal at its default action: Python ignores SIGPIPE and SIGXFSZ for itself, which
    ``producer | head`` in a command must not inherit."""
    argv = [arg.encode("latin-1") for arg in job["argv"]]
    env = {key.encode("latin-1"): value.encode("latin-1") for key, value in job["env"]}
    targets = [0, 1, 2, *job["pass"]]
    # Above every target first, so that no move overwrites a descriptor still to be moved.
    high = max(targets) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, high) for fd in fds[1:]]
    actions = [(os.POSIX_SPAWN_DUP2, fd, target) for fd, target in zip(moved, targets, strict=True)]
    try:
        try:
            os.chdir(job["cwd"].encode("latin-1"))
        except OSError as exc:
            return -(exc.errno or errno.EIO) - CWD
        # posix_spawnp searches the PATH of the process that calls it: the command's.
        if b"PATH" in env:
            os.environb[b"PATH"] = env[b"PATH"]
        else:
            os.environb.pop(b"PATH", None)
        return os.posix_spawnp(
            argv[0],
            argv,
            env,
            file_actions=actions,
            setpgroup=0,
            setsigdef=signal.valid_signals(),
        )
    except OSError as exc:
        return -(exc.errno or errno.EIO)
    finally:
        for fd in [*moved, *fds[1:]]:
            os.close(fd)


def reap_all(link: int, command: int, *, block: bool) -> None:
    """Reap the keeper's children that ended (all of them, waiting, with ``block``), telling
    relay how the command exited."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == command:
            say(link, b"X%d\n" % os.waitstatus_to_exitcode(status))


def end_group(command: int) -> None:
    """Without a namespace: kill the command's group, then the keeper's children until none
    is left (a process that left the group comes to the keeper, a subreaper, when its parent
    goes)."""
    kill(-command)
    while True:
        left = children()
        if not left:
            return
        for pid in left:
            kill(pid)
        for pid in left:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def children() -> list[int]:
    """The pids of this process's children."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children", "rb") as listing:
            return [int(pid) for pid in listing.read().split()]
    except OSError:
        return []


def kill(pid: int) -> None:
    """SIGKILL to ``pid`` (a negative one: a process group; -1: every process there is)."""
    try:
        if pid < -1:
            os.killpg(-pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def close_all_but(keep: set[int]) -> None:
    """Close every descriptor from 3 up but those in ``keep``."""
    low = 3
    for fd in sorted(keep):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, max(os.sysconf("SC_OPEN_MAX"), low + 1))


def say(link: int, line: bytes, fds: list[int] | None = None) -> None:
    """Write ``line`` (with ``fds``) on the link; relay may be gone."""
    try:
        if not fds:
            os.write(link, line)
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fileno=link)
        try:
            socket.send_fds(sock, [line], fds)
        finally:
            sock.detach()
    except OSError:
        pass


def main() -> None:
    """The guard's program (relay starts it with ``/dev/null`` as its standard streams, and
    ``groups`` as its argument to keep it from PID namespaces, as where they are refused)."""
    Guard(namespaces=sys.argv[1:] != ["groups"]).run()
    os._exit(0)


if __name__ == "__main__":
    main()
