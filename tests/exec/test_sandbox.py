"""The sandbox's plain functions: the policy, bwrap's command line (with the paths it guards),
the seccomp filter, the availability check and what a refusal looks like
(docs/approvals.md)."""

from __future__ import annotations

import errno
import os
import stat
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay._base._config import Config
from relay._base._errors import ConfigError
from relay._base._sandbox_config import SandboxWorkspaceWrite
from relay._core._builtin import BUILTIN_TOOLS
from relay._exec._sandbox import (
    ESCALATION_PARAMETERS,
    SandboxPolicy,
    bwrap_argv,
    check_sandbox,
    escalation_problem,
    guarded_paths,
    refusal,
    sandbox_policy,
    sandbox_problem,
    seccomp_filter,
    writable_paths,
)

# ------------------------------------------------------------------ the policy


def test_danger_full_access_makes_no_policy() -> None:
    assert sandbox_policy(Config()) is None
    assert sandbox_policy(Config(sandbox_mode="danger-full-access")) is None


def test_read_only_ignores_the_workspace_table() -> None:
    config = Config(
        sandbox_mode="read-only",
        sandbox_workspace_write=SandboxWorkspaceWrite(writable_roots=("/x",), network_access=True),
    )
    policy = sandbox_policy(config, bwrap="/usr/bin/bwrap")
    assert policy == SandboxPolicy("read-only", "/usr/bin/bwrap")
    assert policy.network is False


def test_workspace_write_takes_the_table_and_roots_relative_to_cwd() -> None:
    config = Config(
        cwd="/work/project",
        sandbox_mode="workspace-write",
        sandbox_workspace_write=SandboxWorkspaceWrite(
            writable_roots=("cache", "/srv/out"),
            network_access=True,
            exclude_tmpdir_env_var=True,
            exclude_slash_tmp=True,
        ),
    )
    assert sandbox_policy(config) == SandboxPolicy(
        "workspace-write",
        "bwrap",
        writable_roots=("/work/project/cache", "/srv/out"),
        network_access=True,
        exclude_tmpdir_env_var=True,
        exclude_slash_tmp=True,
    )


# ------------------------------------------------------------------ what is writable


def test_read_only_has_nothing_writable(tmp_path: Path) -> None:
    policy = SandboxPolicy("read-only", "bwrap")
    assert writable_paths(policy, str(tmp_path), {"TMPDIR": str(tmp_path)}) == []


def test_workspace_write_binds_cwd_roots_and_the_temporary_folders(tmp_path: Path) -> None:
    (cwd, root, tmpdir) = (tmp_path / "cwd", tmp_path / "root", tmp_path / "tmpdir")
    for folder in (cwd, root, tmpdir):
        folder.mkdir()
    (tmp_path / "link").symlink_to(root)
    policy = SandboxPolicy(
        "workspace-write", "bwrap", writable_roots=(str(tmp_path / "link"), str(tmp_path / "no"))
    )
    env = {"TMPDIR": str(tmpdir)}
    real = os.path.realpath
    # Real paths, each once; a missing root is left out.
    assert writable_paths(policy, str(cwd), env) == [
        real(cwd),
        real(root),
        real(tmpdir),
        real("/tmp"),
    ]
    no_tmp = SandboxPolicy(
        "workspace-write", "bwrap", exclude_tmpdir_env_var=True, exclude_slash_tmp=True
    )
    assert writable_paths(no_tmp, str(cwd), env) == [real(cwd)]
    assert writable_paths(policy, str(cwd), {"TMPDIR": str(cwd)})[:2] == [real(cwd), real(root)]


# ------------------------------------------------------------------ bwrap's command line


def test_the_command_line_of_a_workspace_without_network() -> None:
    policy = SandboxPolicy("workspace-write", "/usr/bin/bwrap")
    line = bwrap_argv(policy, ["ls", "-l"], cwd="/w", writable=["/w", "/tmp"], seccomp_fd=7)
    assert line == [
        "/usr/bin/bwrap",
        "--ro-bind", "/", "/",
        "--bind", "/w", "/w",
        "--bind", "/tmp", "/tmp",
        "--dev", "/dev",
        "--proc", "/proc",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-net",
        "--die-with-parent",
        "--new-session",
        "--cap-drop", "ALL",
        "--seccomp", "7",
        "--chdir", "/w",
        "--", "ls", "-l",
    ]  # fmt: skip


def test_read_only_binds_nothing_writable_and_network_access_keeps_the_network() -> None:
    read_only = bwrap_argv(
        SandboxPolicy("read-only", "bwrap", network_access=True),
        ["true"],
        cwd="/w",
        writable=[],
        seccomp_fd=3,
    )
    assert "--bind" not in read_only
    assert "--unshare-net" in read_only
    networked = bwrap_argv(
        SandboxPolicy("workspace-write", "bwrap", network_access=True),
        ["true"],
        cwd="/w",
        writable=["/w"],
        seccomp_fd=4,
    )
    assert "--unshare-net" not in networked
    assert networked[networked.index("--seccomp") + 1] == "4"


def make_repo(tmp_path: Path) -> dict[str, Path]:
    """A workspace with a repository, a worktree of another one in it, relay's home inside
    it, a rollout file under a temporary folder, and a key file in the home."""
    work, tmp, main = tmp_path / "work", tmp_path / "tmp", tmp_path / "main"
    (work / ".git" / "hooks").mkdir(parents=True)
    (work / "tree").mkdir()
    (main / ".git" / "worktrees" / "tree").mkdir(parents=True)
    (work / "tree" / ".git").write_text(f"gitdir: {main}/.git/worktrees/tree\n")
    (main / ".git" / "worktrees" / "tree" / "commondir").write_text("../..\n")
    home = work / "deep" / "home"
    home.mkdir(parents=True)
    (home / "grant.key").write_text("k")
    (tmp / "sessions").mkdir(parents=True)
    (tmp / "sessions" / "rollout.jsonl").write_text("")
    return {"work": work, "tmp": tmp, "main": main, "home": home}


def test_git_protected_and_hidden_paths_are_bound_over_the_writable_ones(tmp_path: Path) -> None:
    paths = make_repo(tmp_path)
    work, tmp, main, home = (str(paths[k].resolve()) for k in ("work", "tmp", "main", "home"))
    tree = f"{work}/tree"
    policy = SandboxPolicy(
        "workspace-write",
        "bwrap",
        protected=(home, f"{tmp}/sessions/rollout.jsonl", f"{tmp}/gone", "/usr"),
        hidden=(f"{home}/grant.key", f"{tmp_path}/no-key"),
    )
    line = bwrap_argv(policy, ["true"], cwd=work, writable=[work, tree, tmp], seccomp_fd=3)
    binds = line[4 : line.index("--dev")]
    assert binds == [
        "--bind", work, work,
        "--bind", tree, tree,
        "--bind", tmp, tmp,
        # The folders between a writable path and what is guarded in it: no rename.
        "--bind", f"{tmp}/sessions", f"{tmp}/sessions",
        "--bind", f"{work}/deep", f"{work}/deep",
        "--bind", tree, tree,
        "--ro-bind", f"{work}/.git", f"{work}/.git",
        # A worktree's .git file, the folder it names and its common folder (outside
        # every writable path, so read-only already).
        "--ro-bind", f"{tree}/.git", f"{tree}/.git",
        "--ro-bind", home, home,
        "--ro-bind", f"{tmp}/sessions/rollout.jsonl", f"{tmp}/sessions/rollout.jsonl",
        "--ro-bind", "/dev/null", f"{home}/grant.key",
    ]  # fmt: skip
    # The worktree's git folders, once they are writable, are bound read-only too.
    pinned, read_only, hidden = guarded_paths(policy, [work, tree, tmp, main])
    gitdir = f"{main}/.git/worktrees/tree"
    assert read_only[:4] == [f"{work}/.git", f"{tree}/.git", gitdir, f"{main}/.git"]
    assert f"{main}/.git/worktrees" in pinned
    assert hidden == [f"{home}/grant.key"]


def test_read_only_binds_only_what_is_hidden(tmp_path: Path) -> None:
    paths = make_repo(tmp_path)
    home = str(paths["home"].resolve())
    policy = SandboxPolicy(
        "read-only", "bwrap", protected=(home,), hidden=(f"{home}/grant.key", home + "/..")
    )
    line = bwrap_argv(policy, ["true"], cwd=str(paths["work"]), writable=[], seccomp_fd=3)
    deep = str(Path(home).parent)
    assert line[4 : line.index("--dev")] == [
        "--ro-bind", "/dev/null", f"{home}/grant.key",
        "--tmpfs", deep, "--remount-ro", deep,
    ]  # fmt: skip


@given(st.lists(st.sampled_from(["/", "/w", "/proc", "/dev", "/tmp"]), unique=True))
def test_a_fresh_proc_and_dev_come_after_every_writable_bind(writable: list[str]) -> None:
    # A writable "/" is a recursive bind of the host's tree, its /proc included: the fresh
    # /proc must be mounted over it, never under.
    line = bwrap_argv(
        SandboxPolicy("workspace-write", "bwrap"),
        ["true"],
        cwd="/w",
        writable=writable,
        seccomp_fd=None,
    )
    binds = [i for i, arg in enumerate(line) if arg == "--bind"]
    assert all(i < line.index("--proc") and i < line.index("--dev") for i in binds)
    assert line[line.index("--") + 1 :] == ["true"]


# ------------------------------------------------------------------ the seccomp filter

_AUDIT = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_SOCKET = {"x86_64": 41, "aarch64": 198}
_ALLOW = 0x7FFF0000


def run_filter(program: bytes, arch: int, nr: int, arg0: int) -> int:
    """What the classic BPF ``program`` returns for a system call (the few instructions the
    filter uses: load a word, jump if equal / greater or equal, return)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    ops = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35):
            hit = acc == k if code == 0x15 else acc >= k
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:
            return int(k)
        else:
            raise AssertionError(f"unknown instruction {code:#x}")


_SOCKETPAIR = {"x86_64": 53, "aarch64": 199}
_KEYRING = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}
_EPERM = 0x00050000 | errno.EPERM


def expected(machine: str, network: bool, nr: int, arg0: int) -> int:
    """What the filter should answer, said plainly."""
    family = arg0 & 0xFFFFFFFF
    if (machine == "x86_64" and nr >= 0x40000000) or nr in _KEYRING[machine]:
        return _EPERM
    if network:
        return _ALLOW
    if nr in (425, 426, 427):
        return _EPERM
    if nr == _SOCKET[machine]:
        return _ALLOW if family in (2, 10, 16) else _EPERM
    if nr == _SOCKETPAIR[machine]:
        return _ALLOW if family == 1 else _EPERM
    return _ALLOW


@pytest.mark.parametrize("network", [False, True])
@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
@given(
    nr=st.one_of(st.integers(0, 500), st.integers(0x40000000 - 2, 0x40000200)),
    arg0=st.one_of(st.integers(0, 50), st.integers(0, 2**64 - 1)),
)
def test_the_filter_refuses_the_keyrings_and_without_network_sockets_and_io_uring(
    machine: str, network: bool, nr: int, arg0: int
) -> None:
    program = seccomp_filter(machine, network=network)
    assert program is not None
    assert run_filter(program, _AUDIT[machine], nr, arg0) == expected(machine, network, nr, arg0)


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_without_network_allows_ip_and_netlink_sockets_only(machine: str) -> None:
    program = seccomp_filter(machine)
    assert program is not None
    families = {
        family
        for family in range(64)
        if run_filter(program, _AUDIT[machine], _SOCKET[machine], family) == _ALLOW
    }
    assert families == {2, 10, 16}  # AF_INET, AF_INET6, AF_NETLINK
    for vsock_family in (40, 40 | 2**32):
        assert run_filter(program, _AUDIT[machine], _SOCKET[machine], vsock_family) == _EPERM
    assert run_filter(program, _AUDIT[machine], _SOCKETPAIR[machine], 1) == _ALLOW
    for number in _KEYRING[machine]:
        networked = seccomp_filter(machine, network=True)
        assert networked is not None
        assert run_filter(networked, _AUDIT[machine], number, 0) == _EPERM


def test_the_filter_refuses_the_other_abis() -> None:
    program = seccomp_filter("x86_64")
    assert program is not None
    # x32 calls carry bit 30 in their number; 32-bit calls another audit architecture.
    assert run_filter(program, _AUDIT["x86_64"], 0x40000000 + 41, 2) == 0x00050000 | errno.EPERM
    assert run_filter(program, 0x40000003, 1, 0) == 0x00050000 | errno.ENOSYS
    assert seccomp_filter("mips") is None


# ------------------------------------------------------------------ availability


def test_a_missing_bwrap_is_named_with_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    problem = sandbox_problem(SandboxPolicy("workspace-write", "bwrap"))
    assert problem is not None
    assert "'bwrap' is not found" in problem
    assert "apt-get install bubblewrap" in problem
    with pytest.raises(ConfigError) as caught:
        check_sandbox(SandboxPolicy("read-only", "bwrap"), needed_by="shell")
    message = str(caught.value)
    assert message.startswith('sandbox_mode = "read-only" with shell: the sandbox needs')
    assert "apt-get install bubblewrap" in message
    assert "never runs commands unconfined" in message


def test_an_architecture_without_a_filter_is_a_problem_in_every_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("platform.machine", lambda: "mips")
    networked = SandboxPolicy("workspace-write", "bwrap", network_access=True)
    for policy in (SandboxPolicy("read-only", "bwrap"), networked):
        problem = sandbox_problem(policy)
        assert problem is not None
        assert "no seccomp filter for this architecture (mips)" in problem


def test_a_bwrap_that_cannot_make_a_sandbox_is_a_problem(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    problem = sandbox_problem(SandboxPolicy("read-only", str(fake)))
    assert problem is not None
    assert "No permissions to create new namespace" in problem
    assert "unprivileged user namespaces" in problem


def test_no_policy_needs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    check_sandbox(None, needed_by="shell")


def test_a_missing_writable_root_stops_the_session(tmp_path: Path) -> None:
    policy = SandboxPolicy("workspace-write", "bwrap", writable_roots=(str(tmp_path / "gone"),))
    with pytest.raises(ConfigError, match=r"writable_roots: .*gone is not an existing folder"):
        check_sandbox(policy, needed_by="shell")


# ------------------------------------------------------------------ refusals

REFUSED = [
    "sh: 1: cannot create /etc/x: Read-only file system",
    "touch: cannot touch '/home/me/x': Permission denied",
    "PermissionError: [Errno 1] Operation not permitted",
    "ln: failed to create hard link 'h' => '/etc/passwd': Invalid cross-device link",
    "OSError: [Errno 101] Network is unreachable",
    "ConnectionRefusedError: [Errno 111] Connection refused",
    "curl: (7) Failed to connect to 127.0.0.1 port 8000 after 0 ms: Couldn't connect to server",
    "curl: (6) Could not resolve host: example.com",
    "ssh: Could not resolve hostname x: Temporary failure in name resolution",
    "npm ERR! code EACCES",
    "error: EROFS: read-only file system, open '/usr/lib/x'",
]

NOT_REFUSED = [
    "",
    "AssertionError: 1 != 2",
    "FAILED tests/test_x.py::test_y",
    "grep: no match",
    "fatal: not a git repository",
]


NETWORK = {4, 5, 6, 7, 8}  # the indexes of REFUSED that are the network's words


@pytest.mark.parametrize("output", REFUSED)
def test_the_systems_refusals_are_recognised_and_their_line_given(output: str) -> None:
    assert refusal(1, f"some output\n  {output}  \nmore") == output
    assert refusal(2, output.upper()) == output.upper()
    assert refusal(1, f"{'x' * 300} {output}") == "x" * 200


@pytest.mark.parametrize(("index", "output"), list(enumerate(REFUSED)))
def test_with_the_network_its_errors_are_not_the_sandboxs(index: int, output: str) -> None:
    assert (refusal(1, output, network=True) is None) == (index in NETWORK)


def test_the_first_refused_line_is_given() -> None:
    assert refusal(1, f"ok\n{REFUSED[0]}\n{REFUSED[1]}\n") == REFUSED[0]


@pytest.mark.parametrize("output", NOT_REFUSED)
def test_other_failures_are_not_refusals(output: str) -> None:
    assert refusal(1, output) is None


@given(st.text(), st.sampled_from(REFUSED))
def test_a_success_a_timeout_or_a_missing_program_is_never_a_refusal(text: str, found: str) -> None:
    for code in (0, None, 127):
        assert refusal(code, text + found) is None


@given(st.integers().filter(lambda code: code not in (0, 127)), st.text(), st.text())
def test_a_refusal_anywhere_in_a_failed_commands_output_counts(
    code: int, before: str, after: str
) -> None:
    for found in REFUSED:
        line = refusal(code, f"{before}\n{found}\n{after}")
        assert line is not None
        assert len(line) <= 200


# ------------------------------------------------------------------ escalation arguments


def test_the_shell_tool_offers_codexs_escalation_arguments() -> None:
    tool, _ = BUILTIN_TOOLS["shell"]
    properties = tool.parameters["properties"]
    assert properties["sandbox_permissions"]["enum"] == ["use_default", "require_escalated"]
    assert properties["justification"]["type"] == "string"
    assert {"sandbox_permissions", "justification"} <= set(ESCALATION_PARAMETERS)
    assert tool.parameters["required"] == ["command"]


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({}, None),
        ({"sandbox_permissions": "use_default"}, None),
        ({"sandbox_permissions": "require_escalated", "justification": "needs pip"}, None),
        ({"sandbox_permissions": "root"}, 'sandbox_permissions must be "use_default" or'),
        ({"sandbox_permissions": None}, 'sandbox_permissions must be "use_default" or'),
        ({"justification": 3}, "justification must be a string"),
    ],
)
def test_escalation_arguments_are_checked(args: dict[str, object], problem: str | None) -> None:
    found = escalation_problem(args)
    assert found == problem if problem is None else (found or "").startswith(problem)
