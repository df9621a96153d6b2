"""The sandbox of the commands relay runs (``shell``, hook commands): docs/approvals.md.

Theory of operation. A :class:`SandboxPolicy` is what a session's ``sandbox_mode`` and
``[sandbox_workspace_write]`` say, made once when the session opens, with the paths relay
guards (``protected``, ``hidden``); ``danger-full-access`` makes none, and a command then
runs as it always did. Under a policy, a command runs in bubblewrap (``bwrap``), started by
the process guard of :mod:`relay._exec._process` like any command, so that time limits,
kills and reaping are the guard's as before:

- the whole filesystem is bound read-only, then each writable path (the turn's working
  directory, the writable roots, the temporary directories) is bound writable over it;
  ``read-only`` binds none;
- over those, read-only again: the ``.git`` at the top of each writable path (for a ``.git``
  file, also the git folder it names and that one's common folder), and the ``protected``
  paths; a ``.git`` deeper down (a nested repository) is not guarded. A ``hidden`` path is
  covered, wherever it is. The folders between a writable path and a guarded path in it are
  bound onto themselves, so that none can be renamed away (a mount point cannot be) and
  replaced on the host. Only paths that exist when the command starts are guarded;
- a fresh ``/dev`` and a fresh ``/proc``, in a PID namespace of its own: the command sees no
  process of the host (relay's environment among them), and every process it starts ends
  with it (the namespace's first process ends, the kernel kills the rest);
- no capability (relay may run as root), no new privileges, a new terminal session, its own
  System V IPC;
- in every mode, a seccomp filter that refuses the kernel's keyrings (``add_key``,
  ``request_key``, ``keyctl``) and the calls of other ABIs;
- without network access, a network namespace of its own (loopback only, none of the
  host's addresses, the host's 127.0.0.1 not among them), and the filter also refuses to
  make a socket of any family but IP and netlink, Unix sockets included (a socket file on
  the host is reached through the filesystem, which a read-only bind does not stop), and
  io_uring (which makes sockets past the filter).

A refusal reads as the system's own error (``Read-only file system``, ``Permission
denied``, ``Operation not permitted``, ``Network is unreachable``); :func:`refusal` finds the
line that shows one in a command's output, and :func:`relay._exec._command.run_command`
reports it. It is a guess from words, and its limits are these: a command that failed for
a reason of its own with the same words (a file its mode forbids, a server that is down)
counts as refused; a refusal the command reworded or kept quiet about, or that is past the
output kept, is missed; a command that succeeded, timed out or was not found is never
refused. Everything here but :func:`guarded_paths` (and :func:`bwrap_argv`, which calls it),
:func:`writable_paths`, :func:`sandbox_problem` and :func:`open_sandboxed` is a plain
function over plain data.
"""

from __future__ import annotations

import errno
import functools
import os
import platform
import re
import shutil
import struct
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import attrs

from .._base._config import Config
from .._base._errors import ConfigError
from .._base._exec_rules import ExecRules
from ._process import Command, open_command

#: How to get bubblewrap, said in every problem that it is missing.
INSTALL_HINT = "install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap)"


@attrs.frozen
class SandboxPolicy:
    """What a command relay runs may touch: a mode that confines (``read-only`` or
    ``workspace-write``), with what ``[sandbox_workspace_write]`` adds."""

    mode: Literal["read-only", "workspace-write"]
    """The confining mode."""
    bwrap: str
    """The bubblewrap program, found when the session opened."""
    writable_roots: tuple[str, ...] = ()
    """Absolute folders writable besides the working directory (``workspace-write``)."""
    network_access: bool = False
    """Whether commands reach the network (``workspace-write`` only)."""
    exclude_tmpdir_env_var: bool = False
    """Keep ``$TMPDIR`` read-only."""
    exclude_slash_tmp: bool = False
    """Keep ``/tmp`` read-only."""
    protected: tuple[str, ...] = ()
    """Absolute paths kept read-only even inside a writable folder (relay's home, the
    session's rollout file): those that exist when a command starts."""
    hidden: tuple[str, ...] = ()
    """Absolute paths no command may read (relay's grant key): each that exists when a
    command starts is covered, a file by an unreadable ``/dev/null``, a folder by an empty
    read-only one."""

    @property
    def network(self) -> bool:
        """Whether commands have the network: only ``workspace-write`` with access."""
        return self.mode == "workspace-write" and self.network_access


def sandbox_policy(config: Config, bwrap: str = "bwrap") -> SandboxPolicy | None:
    """The policy ``config`` asks for (None for ``danger-full-access``): relative writable
    roots are taken against ``config.cwd`` (else the process's working directory)."""
    return rules_sandbox(ExecRules.from_config(config), bwrap)


def rules_sandbox(rules: ExecRules, bwrap: str = "bwrap") -> SandboxPolicy | None:
    """The policy ``rules`` make (None for ``danger-full-access``)."""
    if rules.sandbox_mode == "danger-full-access":
        return None
    if rules.sandbox_mode == "read-only":
        return SandboxPolicy("read-only", bwrap)
    return SandboxPolicy(
        "workspace-write",
        bwrap,
        writable_roots=rules.writable_roots,
        network_access=rules.network_access,
        exclude_tmpdir_env_var=rules.exclude_tmpdir_env_var,
        exclude_slash_tmp=rules.exclude_slash_tmp,
    )


def writable_paths(policy: SandboxPolicy, cwd: str, env: Mapping[str, str]) -> list[str]:
    """The folders a command in ``cwd`` with the environment ``env`` may write under, each
    once, as real paths (a bind follows no symlink); those that do not exist are left out,
    since nothing could be written there. ``read-only``: none."""
    if policy.mode == "read-only":
        return []
    wanted = [cwd, *policy.writable_roots]
    tmpdir = env.get("TMPDIR")
    if tmpdir and not policy.exclude_tmpdir_env_var:
        wanted.append(tmpdir)
    if not policy.exclude_slash_tmp:
        wanted.append("/tmp")
    found: list[str] = []
    for path in wanted:
        real = os.path.realpath(path)
        if real not in found and os.path.isdir(real):
            found.append(real)
    return found


def _first_line(path: str) -> str:
    """The first line of the small text file ``path``, stripped; empty when unreadable."""
    try:
        with open(path, encoding="utf-8") as file:
            return file.readline(4096).strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _git_dirs(root: str) -> list[str]:
    """``root``'s ``.git``; when it is a file (a worktree, a submodule), the git folder it
    names and that folder's common folder (a worktree's hooks and config are there) too."""
    dot_git = os.path.join(root, ".git")
    found = [dot_git]
    pointer = _first_line(dot_git) if os.path.isfile(dot_git) else ""
    if pointer.startswith("gitdir:"):
        git_dir = os.path.join(root, pointer.removeprefix("gitdir:").strip())
        found.append(git_dir)
        common = _first_line(os.path.join(git_dir, "commondir"))
        if common:
            found.append(os.path.join(git_dir, common))
    return found


def _inside(path: str, folders: Sequence[str]) -> str | None:
    """The shortest of ``folders`` that ``path`` is in (or is), None when none."""
    holders = [f for f in folders if path == f or path.startswith(f.rstrip("/") + "/")]
    return min(holders, key=len) if holders else None


def guarded_paths(
    policy: SandboxPolicy, writable: Sequence[str]
) -> tuple[list[str], list[str], list[str]]:
    """What :func:`bwrap_argv` binds over the ``writable`` paths, as real paths, each once:
    the folders pinned (bound writable onto themselves, so that no parent of a guarded path
    can be renamed away and replaced on the host), the paths kept read-only (each writable
    path's ``.git`` and the policy's ``protected`` paths, those inside a writable path: the
    others are read-only already) and the ``hidden`` paths, wherever they are. Paths that do
    not exist are left out: a bind needs something to bind."""
    wanted = [g for root in writable for g in _git_dirs(root)] + list(policy.protected)
    read_only: list[str] = []
    for path in wanted:
        real = os.path.realpath(path)
        if real not in read_only and os.path.exists(real) and _inside(real, writable):
            read_only.append(real)
    hidden: list[str] = []
    for path in policy.hidden:
        real = os.path.realpath(path)
        if real not in hidden and os.path.exists(real):
            hidden.append(real)
    pinned: set[str] = set()
    for path in [*read_only, *hidden]:
        holder = _inside(path, writable)
        parent = os.path.dirname(path)
        while holder is not None and parent != holder and _inside(parent, [holder]):
            pinned.add(parent)
            parent = os.path.dirname(parent)
    pinned.difference_update(read_only)  # a mount point already
    return sorted(pinned, key=lambda p: (p.count("/"), p)), read_only, hidden


def bwrap_argv(
    policy: SandboxPolicy,
    argv: Sequence[str],
    *,
    cwd: str,
    writable: Sequence[str],
    seccomp_fd: int | None,
) -> list[str]:
    """The command line that runs ``argv`` in ``cwd`` under ``policy`` with ``writable``
    bound writable (:func:`writable_paths`) and what :func:`guarded_paths` finds bound over
    them, reading the seccomp filter (which every policy needs) from ``seccomp_fd``."""
    line = [policy.bwrap, "--ro-bind", "/", "/"]
    for path in writable:
        line += ["--bind", path, path]
    # bwrap mounts in order, a later mount over an earlier one: the guards come after the
    # writable binds, pins first (shallowest first), then read-only, then hidden (a hidden
    # file may be in a protected folder).
    pinned, read_only, hidden = guarded_paths(policy, writable)
    for path in pinned:
        line += ["--bind", path, path]
    for path in read_only:
        line += ["--ro-bind", path, path]
    for path in hidden:
        if os.path.isdir(path):
            line += ["--tmpfs", path, "--remount-ro", path]
        else:
            line += ["--ro-bind", "/dev/null", path]
    # After the binds, so that a writable "/" cannot bring back the host's /proc or /dev.
    line += ["--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-ipc"]
    if not policy.network:
        line.append("--unshare-net")
    line += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if seccomp_fd is not None:
        line += ["--seccomp", str(seccomp_fd)]
    return [*line, "--chdir", cwd, "--", *argv]


# ----------------------------------------------------------------------------- seccomp

_LD_W_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
#: Socket families (``AF_*``) a command without network may make: IP in its own network
#: namespace (loopback only) and netlink (``ip``, ``ss``, name lookups ask it). Unix sockets
#: are not among them (a socket file on the host is reached through the filesystem, which a
#: read-only bind does not stop), nor VSOCK, packet, crypto, Bluetooth, ....
_AF_UNIX, _AF_INET, _AF_INET6, _AF_NETLINK = 1, 2, 10, 16


@attrs.frozen
class _Arch:
    audit: int
    socket: int
    socketpair: int
    keyring: tuple[int, int, int]  # add_key, request_key, keyctl
    io_uring: tuple[int, int, int]
    x32_bit: int | None = None


#: The architectures relay has a filter for, by ``platform.machine()``.
_ARCHES: Mapping[str, _Arch] = {
    "x86_64": _Arch(0xC000003E, 41, 53, (248, 249, 250), (425, 426, 427), x32_bit=0x40000000),
    "aarch64": _Arch(0xC00000B7, 198, 199, (217, 218, 219), (425, 426, 427)),
}

#: An instruction: (code, jump if true, jump if false, k), a jump a count or a label.
_Op = tuple[int, int | str, int | str, int]


def _assemble(program: Sequence[_Op | str]) -> bytes:
    """The ``struct sock_filter`` array of ``program``: instructions ``(code, jump if true,
    jump if false, k)`` whose jumps may name a label, a string in the list that marks the
    instruction after it."""
    labels: dict[str, int] = {}
    ops: list[_Op] = []
    for item in program:
        if isinstance(item, str):
            labels[item] = len(ops)
        else:
            ops.append(item)

    def offset(at: int, jump: int | str) -> int:
        return jump if isinstance(jump, int) else labels[jump] - at - 1

    return b"".join(
        struct.pack("=HBBI", code, offset(at, jt), offset(at, jf), k)
        for at, (code, jt, jf, k) in enumerate(ops)
    )


def seccomp_filter(machine: str, *, network: bool = False) -> bytes | None:
    """The seccomp program (``struct sock_filter`` array, the form ``bwrap --seccomp``
    reads) of a confining mode on ``machine``: it refuses the kernel's keyrings (``add_key``,
    ``request_key``, ``keyctl``: a key another process of the user put there could be read)
    with ``EPERM``, and every call of another ABI (32-bit code, x32) fails with ``ENOSYS``
    (``EPERM`` for x32). Without ``network``, it also refuses io_uring (which makes sockets
    past the filter), ``socket()`` of any family but IP and netlink, and ``socketpair()`` of
    any but Unix (a pair reaches nothing outside). None for an architecture relay has no
    filter for."""
    arch = _ARCHES.get(machine)
    if arch is None:
        return None
    program: list[_Op | str] = [
        (_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ, 1, 0, arch.audit),
        (_RET, 0, 0, _ERRNO | errno.ENOSYS),
        (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if arch.x32_bit is not None:
        program.append((_JGE, "deny", 0, arch.x32_bit))
    program += [(_JEQ, "deny", 0, number) for number in arch.keyring]
    if not network:
        program += [(_JEQ, "deny", 0, number) for number in arch.io_uring]
        program += [(_JEQ, "socket", 0, arch.socket), (_JEQ, "socketpair", 0, arch.socketpair)]
    program.append((_RET, 0, 0, _ALLOW))
    if not network:
        # args[0], its low 32 bits (both ABIs are little-endian; the family is an int).
        program += ["socket", (_LD_W_ABS, 0, 0, 16)]
        program += [(_JEQ, "allow", 0, family) for family in (_AF_INET, _AF_INET6, _AF_NETLINK)]
        program += [(_RET, 0, 0, _ERRNO | errno.EPERM)]
        program += ["socketpair", (_LD_W_ABS, 0, 0, 16), (_JEQ, "allow", 0, _AF_UNIX)]
    program += ["deny", (_RET, 0, 0, _ERRNO | errno.EPERM), "allow", (_RET, 0, 0, _ALLOW)]
    return _assemble(program)


# ----------------------------------------------------------------------------- running


@asynccontextmanager
async def open_sandboxed(
    policy: SandboxPolicy | None,
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str] | None,
    root: str | None = None,
    **streams: Any,
) -> AsyncIterator[Command]:
    """:func:`~relay._exec._process.open_command` for ``argv`` under ``policy`` (None: as it
    is); ``root`` is the working directory the mode makes writable (default ``cwd``: a
    command may run in another folder than its session's), the other arguments are
    open_command's. Nothing the command started outlives the block: the guard ends bwrap, and
    bwrap's PID namespace ends with it.

    Raises:
        OSError: bwrap (or, without a policy, the command) could not be started.
    """
    if policy is None:
        async with open_command(argv, cwd=cwd, env=env, **streams) as command:
            yield command
        return
    program = seccomp_filter(platform.machine(), network=policy.network)
    if program is None:  # check_sandbox stops a session before this
        raise OSError(errno.ENOSYS, f"no seccomp filter for {platform.machine()}")
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, program)  # a few hundred bytes: the pipe holds them
    finally:
        os.close(write_end)
    try:
        writable = writable_paths(policy, root or cwd, os.environ if env is None else env)
        line = bwrap_argv(policy, argv, cwd=cwd, writable=writable, seccomp_fd=read_end)
        async with open_command(line, cwd=cwd, env=env, pass_fds=(read_end,), **streams) as command:
            yield command
    finally:
        os.close(read_end)


# ----------------------------------------------------------------------------- availability


def sandbox_problem(policy: SandboxPolicy) -> str | None:
    """What stops relay from making ``policy``'s sandbox here, worded for the user with how to
    fix it; None when a trivial command ran in it. The first success is remembered for the
    process (one run of ``true`` per bwrap program and policy shape)."""
    if seccomp_filter(platform.machine()) is None:
        return (
            f"the sandbox has no seccomp filter for this architecture ({platform.machine()}), "
            "so it cannot keep commands from Unix sockets and the kernel's keyrings: use "
            'sandbox_mode = "danger-full-access"'
        )
    if shutil.which(policy.bwrap) is None:
        return f"the sandbox needs bubblewrap, and {policy.bwrap!r} is not found: {INSTALL_HINT}"
    return _trial(policy.bwrap, policy.network)


class _TrialFailed(Exception):
    """bwrap could not run ``true``; the message is the last line it printed."""


@functools.cache
def _trial_success(bwrap: str, network: bool) -> None:
    """Runs ``true`` in a sandbox; remembered once it succeeded (a failure raises
    :class:`_TrialFailed`, and is not remembered)."""
    policy = SandboxPolicy("read-only", bwrap, network_access=network)
    program = seccomp_filter(platform.machine(), network=network)
    if program is None:
        raise _TrialFailed(f"no seccomp filter for {platform.machine()}")
    read_end, write_end = os.pipe()
    os.write(write_end, program)
    os.close(write_end)
    try:
        line = bwrap_argv(policy, ["true"], cwd="/", writable=[], seccomp_fd=read_end)
        done = subprocess.run(
            line,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            pass_fds=(read_end,),
            check=False,
        )
    finally:
        os.close(read_end)
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
        raise _TrialFailed(said[-1] if said else f"exit status {done.returncode}")


def _trial(bwrap: str, network: bool) -> str | None:
    try:
        _trial_success(bwrap, network)
    except _TrialFailed as exc:
        return (
            f"the sandbox cannot be made with {bwrap} ({exc}); it needs unprivileged user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1, or "
            "kernel.apparmor_restrict_unprivileged_userns=0) when relay is not root"
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the sandbox cannot be made with {bwrap} ({exc}): {INSTALL_HINT}"
    return None


def check_sandbox(policy: SandboxPolicy | None, *, needed_by: str) -> None:
    """Raise :class:`ConfigError` when ``policy`` confines and its sandbox cannot be made;
    ``needed_by`` says what runs commands (``"shell"``, ``"hook commands"``).

    Raises:
        ConfigError: bwrap is missing or cannot run here, or a writable root is missing.
    """
    if policy is None:
        return
    for root in policy.writable_roots:
        if not os.path.isdir(root):
            raise ConfigError(
                f"sandbox_workspace_write.writable_roots: {root} is not an existing folder"
            )
    problem = sandbox_problem(policy)
    if problem is not None:
        raise ConfigError(
            f'sandbox_mode = "{policy.mode}" with {needed_by}: {problem}. relay never runs '
            "commands unconfined in a mode that confines them"
        )


# ----------------------------------------------------------------------------- refusals

#: What a command prints when the sandbox refused it something on the filesystem or a system
#: call: the system's error texts (EROFS, EACCES, EPERM, a hard link out of a bind: EXDEV) and
#: their symbols.
_REFUSALS = re.compile(
    r"read-only file system|permission denied|operation not permitted"
    r"|invalid cross-device link|\b(?:erofs|eacces|eperm|exdev)\b",
    re.IGNORECASE,
)

#: What it prints when it was refused the network: no route, refused, no name service.
_NETWORK_REFUSALS = re.compile(
    r"network is unreachable|network unreachable"
    r"|no route to host|connection refused|failed to connect|could not connect"
    r"|couldn't connect|temporary failure in name resolution|name or service not known"
    r"|could not resolve host|\b(?:enetunreach|econnrefused)\b",
    re.IGNORECASE,
)

#: The exit status of a command that was not found: never the sandbox's doing.
_NOT_FOUND = 127

#: The most of a refusal's line that is kept.
REFUSAL_LIMIT = 200


def refusal(exit_code: int | None, output: str, *, network: bool = False) -> str | None:
    """The line of ``output`` that shows a sandboxed command that ended with ``exit_code``
    (None: it timed out) was refused by the sandbox (a write, a system call, and without
    ``network`` the network), so that running it outside could succeed: the first such
    line, stripped, at most :data:`REFUSAL_LIMIT` characters; None when it does not look
    refused. A guess from the system's words (see the module's docstring for its limits)."""
    if exit_code is None or exit_code in (0, _NOT_FOUND):
        return None
    patterns = [_REFUSALS] if network else [_REFUSALS, _NETWORK_REFUSALS]
    for line in output.splitlines():
        if any(pattern.search(line) for pattern in patterns):
            return line.strip()[:REFUSAL_LIMIT]
    return None


# ----------------------------------------------------------------------------- escalation

#: The ``shell`` tool's arguments by which the model asks to run a command outside the
#: sandbox (Codex's names); the session reads them for ``approval_policy = "on-request"``.
ESCALATION_PARAMETERS: Mapping[str, Any] = {
    "sandbox_permissions": {
        "type": "string",
        "enum": ["use_default", "require_escalated"],
        "description": 'Run in the sandbox ("use_default") or ask to run this command '
        'outside it ("require_escalated")',
        "default": "use_default",
    },
    "justification": {
        "type": "string",
        "description": "Why the command must run outside the sandbox (shown to whoever "
        "approves it)",
    },
}


def escalation_problem(args: Mapping[str, Any]) -> str | None:
    """What is wrong with the escalation arguments of a ``shell`` call (None: nothing)."""
    permissions = args.get("sandbox_permissions", "use_default")
    if permissions not in ("use_default", "require_escalated"):
        return 'sandbox_permissions must be "use_default" or "require_escalated"'
    justification = args.get("justification")
    if justification is not None and not isinstance(justification, str):
        return "justification must be a string"
    return None


__all__ = [
    "ESCALATION_PARAMETERS",
    "INSTALL_HINT",
    "REFUSAL_LIMIT",
    "SandboxPolicy",
    "bwrap_argv",
    "check_sandbox",
    "escalation_problem",
    "guarded_paths",
    "open_sandboxed",
    "refusal",
    "rules_sandbox",
    "sandbox_policy",
    "sandbox_problem",
    "seccomp_filter",
    "writable_paths",
]
