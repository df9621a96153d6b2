"""The sandbox of the commands relay runs (``shell``, hook commands): docs/approvals.md.

Theory of operation. A :class:`SandboxPolicy` is what a session's ``sandbox_mode`` and
``[sandbox_workspace_write]`` say, made once when the session opens; ``danger-full-access``
makes none, and a command then runs as it always did. Under a policy, a command runs in
bubblewrap (``bwrap``), started by the process guard of :mod:`relay._core._process` like any
command, so that time limits, kills and reaping are the guard's as before:

- the whole filesystem is bound read-only, then each writable path (the turn's working
  directory, the writable roots, the temporary directories) is bound writable over it;
  ``read-only`` binds none;
- a fresh ``/dev`` and a fresh ``/proc``, in a PID namespace of its own: the command sees no
  process of the host (relay's environment among them), and every process it starts ends
  with it (the namespace's first process ends, the kernel kills the rest);
- no capability (relay may run as root), no new privileges, a new terminal session, its own
  System V IPC;
- without network access, a network namespace of its own (loopback only, none of the
  host's addresses, the host's 127.0.0.1 not among them) and a seccomp filter that refuses
  to make a Unix socket (a socket file on the host is reached through the filesystem, which
  a read-only bind does not stop) and io_uring (which makes sockets past the filter).

A refusal reads as the system's own error (``Read-only file system``, ``Operation not
permitted``, ``Network is unreachable``); :func:`sandbox_refused` recognises one in a
command's output. Everything here but :func:`sandbox_problem` and :func:`open_sandboxed` is
a plain function over plain data.
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
from pathlib import Path
from typing import Any, Literal

import attrs

from .._base._config import Config
from .._base._errors import ConfigError
from .._base._sandbox_config import SandboxMode
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

    @property
    def network(self) -> bool:
        """Whether commands have the network: only ``workspace-write`` with access."""
        return self.mode == "workspace-write" and self.network_access


def sandbox_policy(config: Config, bwrap: str = "bwrap") -> SandboxPolicy | None:
    """The policy ``config`` asks for (None for ``danger-full-access``): relative writable
    roots are taken against ``config.cwd`` (else the process's working directory)."""
    mode: SandboxMode = config.sandbox_mode
    if mode == "danger-full-access":
        return None
    if mode == "read-only":
        return SandboxPolicy("read-only", bwrap)
    table = config.sandbox_workspace_write
    base = Path(config.cwd or os.getcwd())
    return SandboxPolicy(
        "workspace-write",
        bwrap,
        writable_roots=tuple(str(base / root) for root in table.writable_roots),
        network_access=table.network_access,
        exclude_tmpdir_env_var=table.exclude_tmpdir_env_var,
        exclude_slash_tmp=table.exclude_slash_tmp,
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


def bwrap_argv(
    policy: SandboxPolicy,
    argv: Sequence[str],
    *,
    cwd: str,
    writable: Sequence[str],
    seccomp_fd: int | None,
) -> list[str]:
    """The command line that runs ``argv`` in ``cwd`` under ``policy`` with ``writable``
    bound writable (:func:`writable_paths`), reading the seccomp filter (which the policy
    needs unless it has the network) from ``seccomp_fd``."""
    line = [policy.bwrap, "--ro-bind", "/", "/"]
    for path in writable:
        line += ["--bind", path, path]
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
_AF_UNIX = 1


@attrs.frozen
class _Arch:
    audit: int
    socket: int
    io_uring: tuple[int, int, int]
    x32_bit: int | None = None


#: The architectures relay has a filter for, by ``platform.machine()``.
_ARCHES: Mapping[str, _Arch] = {
    "x86_64": _Arch(0xC000003E, 41, (425, 426, 427), x32_bit=0x40000000),
    "aarch64": _Arch(0xC00000B7, 198, (425, 426, 427)),
}


def seccomp_filter(machine: str) -> bytes | None:
    """The seccomp program (``struct sock_filter`` array, the form ``bwrap --seccomp``
    reads) that refuses ``socket(AF_UNIX, ...)`` and io_uring with ``EPERM`` on ``machine``;
    every call of another ABI (32-bit code, x32) fails with ``ENOSYS``. None for an
    architecture relay has no filter for."""
    arch = _ARCHES.get(machine)
    if arch is None:
        return None
    deny = _ERRNO | errno.EPERM
    # (code, jump if true, jump if false, k); a jump counts the instructions it skips.
    head = [(_LD_W_ABS, 0, 0, 4), (_JEQ, 1, 0, arch.audit), (_RET, 0, 0, _ERRNO | errno.ENOSYS)]
    checks = [(_LD_W_ABS, 0, 0, 0)]
    targets: list[tuple[int, str]] = []
    if arch.x32_bit is not None:
        targets.append((arch.x32_bit, "deny-from"))
    targets.append((arch.socket, "socket"))
    targets += [(number, "deny") for number in arch.io_uring]
    # Layout after the syscall's load: one test per target, ALLOW, the socket's domain test
    # (load, test, ALLOW), DENY.
    tests = len(targets)
    socket_at = tests + 1  # relative to the first test
    deny_at = socket_at + 3
    for index, (number, kind) in enumerate(targets):
        target = socket_at if kind == "socket" else deny_at
        code = _JGE if kind == "deny-from" else _JEQ
        checks.append((code, target - index - 1, 0, number))
    checks += [
        (_RET, 0, 0, _ALLOW),
        (_LD_W_ABS, 0, 0, 16),  # args[0], its low 32 bits (both ABIs are little-endian)
        (_JEQ, 1, 0, _AF_UNIX),
        (_RET, 0, 0, _ALLOW),
        (_RET, 0, 0, deny),
    ]
    return b"".join(struct.pack("=HBBI", *op) for op in [*head, *checks])


# ----------------------------------------------------------------------------- running


@asynccontextmanager
async def open_sandboxed(
    policy: SandboxPolicy | None,
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str] | None,
    **streams: Any,
) -> AsyncIterator[Command]:
    """:func:`~relay._core._process.open_command` for ``argv`` under ``policy`` (None: as it
    is); the other arguments are open_command's. Nothing the command started outlives the
    block: the guard ends bwrap, and bwrap's PID namespace ends with it.

    Raises:
        OSError: bwrap (or, without a policy, the command) could not be started.
    """
    if policy is None:
        async with open_command(argv, cwd=cwd, env=env, **streams) as command:
            yield command
        return
    program = seccomp_filter(platform.machine()) if not policy.network else None
    read_end: int | None = None
    if program is not None:
        read_end, write_end = os.pipe()
        try:
            os.write(write_end, program)  # a few hundred bytes: the pipe holds them
        finally:
            os.close(write_end)
    try:
        writable = writable_paths(policy, cwd, os.environ if env is None else env)
        line = bwrap_argv(policy, argv, cwd=cwd, writable=writable, seccomp_fd=read_end)
        passed = () if read_end is None else (read_end,)
        async with open_command(line, cwd=cwd, env=env, pass_fds=passed, **streams) as command:
            yield command
    finally:
        if read_end is not None:
            os.close(read_end)


# ----------------------------------------------------------------------------- availability


def sandbox_problem(policy: SandboxPolicy) -> str | None:
    """What stops relay from making ``policy``'s sandbox here, worded for the user with how to
    fix it; None when a trivial command ran in it. The first success is remembered for the
    process (one run of ``true`` per bwrap program and policy shape)."""
    if seccomp_filter(platform.machine()) is None and not policy.network:
        return (
            f"the sandbox has no seccomp filter for this architecture ({platform.machine()}), "
            "so it cannot keep commands from Unix sockets: use sandbox_mode = "
            '"danger-full-access", or network_access = true in [sandbox_workspace_write]'
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
    program = None if network else seccomp_filter(platform.machine())
    read_end: int | None = None
    if program is not None:
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
            pass_fds=() if read_end is None else (read_end,),
            check=False,
        )
    finally:
        if read_end is not None:
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

#: What a command prints when the sandbox refused it something: the system's error texts
#: (writing: EROFS, EACCES, EPERM, a hard link out of a bind: EXDEV; the network: no route,
#: refused, no name service) and their symbols.
_REFUSALS = re.compile(
    r"read-only file system|permission denied|operation not permitted"
    r"|invalid cross-device link|network is unreachable|network unreachable"
    r"|no route to host|connection refused|failed to connect|could not connect"
    r"|couldn't connect|temporary failure in name resolution|name or service not known"
    r"|could not resolve host|\b(?:erofs|eacces|eperm|exdev|enetunreach|econnrefused)\b",
    re.IGNORECASE,
)

#: The exit status of a command that was not found: never the sandbox's doing.
_NOT_FOUND = 127


def sandbox_refused(exit_code: int | None, output: str) -> bool:
    """Whether a sandboxed command that ended with ``exit_code`` (None: it timed out) and
    printed ``output`` looks refused by the sandbox (a write, the network), so that running it
    outside could succeed. A guess from the words of the system's errors: a command that
    failed for reasons of its own with the same words counts too."""
    if exit_code is None or exit_code in (0, _NOT_FOUND):
        return False
    return _REFUSALS.search(output) is not None


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
    "SandboxPolicy",
    "bwrap_argv",
    "check_sandbox",
    "escalation_problem",
    "open_sandboxed",
    "sandbox_policy",
    "sandbox_problem",
    "sandbox_refused",
    "seccomp_filter",
    "writable_paths",
]
