"""The sandbox holds: escapes that must fail, each tried through the real ``run_command`` in
bwrap, beside the same command run unconfined to show that it would have worked
(docs/approvals.md). Skipped, saying why, where bwrap cannot run; required in CI."""

from __future__ import annotations

import fcntl
import os
import platform
import socket
import struct
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio

from relay._exec._command import CommandOutput, run_command
from relay._exec._sandbox import SandboxPolicy, refusal
from tests.escapees import alive, escape_argv, wait_gone
from tests.sandboxing import needs_bwrap, processes_with, workspace_only


@pytest.fixture
def bwrap() -> str:
    return needs_bwrap()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


async def run(
    cwd: Path, argv: list[str], policy: SandboxPolicy | None, *, timeout_ms: int = 30_000
) -> CommandOutput:
    return await run_command(
        argv, cwd=str(cwd), env=dict(os.environ), timeout_ms=timeout_ms, sandbox=policy
    )


def sh(command: str) -> list[str]:
    return ["sh", "-c", command]


def py(code: str, *args: str) -> list[str]:
    return [sys.executable, "-I", "-c", code, *args]


# ------------------------------------------------------------------ writing outside


@pytest.mark.parametrize(
    ("command", "written"),
    [
        ("echo x > ../outside/dotdot", "dotdot"),
        ("echo x > {outside}/absolute", "absolute"),
        ("ln -s {outside} link && echo x > link/symlink", "symlink"),
        ("echo x > /proc/self/cwd/../outside/proc-cwd", "proc-cwd"),
        ("mkdir -p sub && cd sub && echo x > ../../outside/nested", "nested"),
        ("mount -o remount,bind,rw / ; echo x > {outside}/remounted", "remounted"),
        ("unshare -Um sh -c 'mount -o remount,bind,rw /; echo x > {outside}/userns'", "userns"),
    ],
)
async def test_writing_outside_the_workspace_fails(
    bwrap: str, work: Path, outside: Path, command: str, written: str
) -> None:
    argv = sh(command.format(outside=outside))
    confined = await run(work, argv, workspace_only(bwrap))
    assert not (outside / written).exists()
    assert "Read-only file system" in confined.printed or "superuser" in confined.printed
    if written not in ("remounted", "userns"):  # their last command is the write
        assert confined.refused is not None
        assert confined.refused.endswith("Read-only file system")
    # The same command, unconfined, writes there: the sandbox is what stopped it.
    assert (await run(work, argv, None)).refused is None
    assert (outside / written).read_text() == "x\n"


async def test_a_hard_link_to_a_file_outside_cannot_be_made(
    bwrap: str, work: Path, outside: Path
) -> None:
    target = outside / "target"
    target.write_text("original\n")
    argv = sh(f"ln {target} hard && echo changed > hard")
    confined = await run(work, argv, workspace_only(bwrap))
    assert confined.refused is not None
    assert confined.refused.endswith("Invalid cross-device link")
    assert target.read_text() == "original\n"
    await run(work, argv, None)
    assert target.read_text() == "changed\n"


# ------------------------------------------------------------------ the network

CONNECT = """\
import socket, sys
port = int(sys.argv[1])
for host in sys.argv[2:]:
    try:
        socket.create_connection((host, port), timeout=5).close()
        print(host, "connected")
    except OSError as exc:
        print(host, exc)
"""


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("0.0.0.0", 0))
    server.listen(16)
    server.setblocking(False)
    with server:
        yield server


def accepted(server: socket.socket) -> int:
    """How many connections reached ``server`` (each is in its backlog)."""
    count = 0
    while True:
        try:
            connection, _ = server.accept()
        except BlockingIOError:
            return count
        connection.close()
        count += 1


def host_addresses() -> list[str]:
    """The host's IPv4 addresses other than loopback's."""
    found = []
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with probe:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                answer = fcntl.ioctl(probe.fileno(), 0x8915, request)  # SIOCGIFADDR
            except OSError:
                continue
            address = socket.inet_ntoa(answer[20:24])
            if not address.startswith("127."):
                found.append(address)
    return found


async def test_tcp_to_a_loopback_listener_of_the_host_fails(
    bwrap: str, work: Path, listener: socket.socket
) -> None:
    port = str(listener.getsockname()[1])
    confined = await run(work, py(CONNECT, port, "127.0.0.1"), workspace_only(bwrap))
    assert "Connection refused" in confined.printed
    assert accepted(listener) == 0
    networked = await run(
        work, py(CONNECT, port, "127.0.0.1"), workspace_only(bwrap, network_access=True)
    )
    assert networked.printed == "127.0.0.1 connected\n"
    assert accepted(listener) == 1


async def test_tcp_to_the_hosts_other_addresses_fails(
    bwrap: str, work: Path, listener: socket.socket
) -> None:
    addresses = host_addresses()
    if not addresses:
        pytest.skip("the host has no address but loopback's")
    port = str(listener.getsockname()[1])
    confined = await run(work, py(CONNECT, port, *addresses), workspace_only(bwrap))
    for address in addresses:
        assert f"{address} [Errno 101] Network is unreachable" in confined.printed
    assert confined.exit_code == 0  # the script printed its errors
    assert confined.refused is None
    assert refusal(1, confined.printed) == f"{addresses[0]} [Errno 101] Network is unreachable"
    assert accepted(listener) == 0
    networked = await run(
        work, py(CONNECT, port, *addresses), workspace_only(bwrap, network_access=True)
    )
    assert networked.printed == "".join(f"{address} connected\n" for address in addresses)
    assert accepted(listener) == len(addresses)


UNIX_CONNECT = """\
import socket, sys
try:
    client = socket.socket(socket.AF_UNIX)
    client.connect(sys.argv[1])
    client.sendall(b"reached")
    print("connected")
except OSError as exc:
    print(exc)
"""


async def test_a_unix_socket_outside_the_workspace_cannot_be_reached(
    bwrap: str, work: Path, outside: Path
) -> None:
    path = outside / "server.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen(4)
        server.setblocking(False)
        for policy in (workspace_only(bwrap), SandboxPolicy("read-only", bwrap)):
            confined = await run(work, py(UNIX_CONNECT, str(path)), policy)
            assert confined.printed == "[Errno 1] Operation not permitted\n"
            assert accepted(server) == 0
        networked = await run(
            work, py(UNIX_CONNECT, str(path)), workspace_only(bwrap, network_access=True)
        )
        assert networked.printed == "connected\n"
        assert accepted(server) == 1


# ------------------------------------------------------------------ the API key

PROBE = """\
import os, sys, trio
from relay._exec._command import run_command
from relay._exec._sandbox import SandboxPolicy
mode, bwrap, cwd = sys.argv[1:]
policy = None if mode == "none" else SandboxPolicy(mode, bwrap)
env = {k: v for k, v in os.environ.items() if k != "RELAY_PROBE_KEY"}
command = (
    f"printenv RELAY_PROBE_KEY; cat /proc/{os.getpid()}/environ; "
    "cat /proc/[0-9]*/environ; cat /proc/[0-9]*/task/*/environ"
)
done = trio.run(
    lambda: run_command(
        ["sh", "-c", command], cwd=cwd, env=env, timeout_ms=30_000, sandbox=policy
    )
)
print(done.printed)
"""


@pytest.mark.slow  # a Python that imports relay, for each mode
@pytest.mark.parametrize("mode", ["none", "read-only", "workspace-write"])
def test_the_api_key_cannot_be_read_from_the_environment_or_relays_proc(
    bwrap: str, work: Path, mode: str
) -> None:
    # Unconfined too: every command has a PID namespace of its own (the process guard's),
    # so relay's /proc is out of its sight in every mode.
    key = f"sk-probe-{uuid.uuid4().hex}"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode, bwrap, str(work)],
        env={**os.environ, "RELAY_PROBE_KEY": key},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "/environ" in done.stdout  # the command ran, and looked
    assert key not in done.stdout


# ------------------------------------------------------------------ processes left behind


async def test_a_daemon_started_in_the_sandbox_does_not_outlive_the_call(
    bwrap: str, work: Path
) -> None:
    marker = f"relay-escapee-{uuid.uuid4().hex}"
    result = await run(work, escape_argv("escapee.pid", marker), workspace_only(bwrap))
    assert (result.printed, result.exit_code) == ("", 0)
    assert (work / "escapee.pid").read_text().strip().isdigit()
    await wait_gone(work / "escapee.pid", marker=marker)
    assert processes_with(marker) == []


async def test_a_cancelled_call_leaves_nothing_of_the_sandbox(bwrap: str, work: Path) -> None:
    marker = f"relay-escapee-{uuid.uuid4().hex}"
    fifo = work / "escapee.fifo"
    os.mkfifo(fifo)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, work, escape_argv(str(fifo), marker, "wait"), workspace_only(bwrap))
        async with await trio.open_file(fifo) as reader:
            await reader.read()  # the daemon has left the command's session
        seen = processes_with(marker)
        # The command and its daemon, seen from the host (their pids there are not those
        # they see in their own PID namespace).
        assert len(seen) >= 2
        assert alive(fifo)
        nursery.cancel_scope.cancel()
    await wait_gone(fifo, marker=marker)
    assert processes_with(marker) == []


async def test_a_daemon_goes_at_the_timeout(bwrap: str, work: Path) -> None:
    marker = f"relay-escapee-{uuid.uuid4().hex}"
    argv = escape_argv("escapee.pid", marker, "wait")
    result = await run(work, argv, workspace_only(bwrap), timeout_ms=1_000)
    assert result.exit_code is None
    assert result.refused is None
    assert (work / "escapee.pid").read_text().strip().isdigit()  # it had started
    await wait_gone(work / "escapee.pid", marker=marker)


# ------------------------------------------------------------------ what each mode allows


async def test_workspace_write_writes_under_cwd_the_roots_and_the_temporary_folders(
    bwrap: str, tmp_path: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    tmpdir = tmp_path / "tmpdir"
    root.mkdir()
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    slash_tmp = Path("/tmp") / f"relay-sandbox-{uuid.uuid4().hex}"
    argv = sh(
        f'echo a > in-cwd; echo b > {root}/in-root; echo c > "$TMPDIR/in-tmpdir"; '
        f"echo d > {slash_tmp}"
    )
    try:
        everything = workspace_only(
            bwrap,
            writable_roots=(str(root),),
            exclude_tmpdir_env_var=False,
            exclude_slash_tmp=False,
        )
        result = await run(work, argv, everything)
        assert (result.printed, result.exit_code) == ("", 0)
        assert (work / "in-cwd").read_text() == "a\n"
        assert (root / "in-root").read_text() == "b\n"
        assert (tmpdir / "in-tmpdir").read_text() == "c\n"
        assert slash_tmp.read_text() == "d\n"
        for path in (work / "in-cwd", root / "in-root", tmpdir / "in-tmpdir", slash_tmp):
            path.unlink()
        excluded = await run(work, argv, workspace_only(bwrap, writable_roots=(str(root),)))
        assert excluded.printed.count("Read-only file system") == 2
        assert (work / "in-cwd").exists() and (root / "in-root").exists()
        assert not (tmpdir / "in-tmpdir").exists() and not slash_tmp.exists()
    finally:
        slash_tmp.unlink(missing_ok=True)


async def test_read_only_writes_nothing_and_reads_everything(
    bwrap: str, work: Path, outside: Path
) -> None:
    (outside / "notes").write_text("readable\n")
    argv = sh(f"cat {outside}/notes; echo x > in-cwd; echo x > /tmp/relay-read-only")
    result = await run(work, argv, SandboxPolicy("read-only", bwrap))
    assert result.printed.startswith("readable\n")
    assert result.printed.count("Read-only file system") == 2
    assert not (work / "in-cwd").exists()
    assert not Path("/tmp/relay-read-only").exists()


async def test_danger_full_access_runs_as_before(work: Path, outside: Path) -> None:
    result = await run(work, sh(f"echo x > {outside}/written; pwd -P"), None)
    assert (result.printed, result.exit_code) == (f"{work.resolve()}\n", 0)
    assert (outside / "written").read_text() == "x\n"


async def test_a_sandboxed_command_reports_its_exit_status_and_a_missing_program(
    bwrap: str, work: Path
) -> None:
    policy = workspace_only(bwrap)
    assert (await run(work, sh("exit 3"), policy)).exit_code == 3
    missing = await run(work, ["relay-no-such-program-xyz"], policy)
    assert missing.exit_code == 1
    assert "relay-no-such-program-xyz" in missing.printed


# ------------------------------------------------------------------ guarded paths


async def test_the_workspaces_git_cannot_be_written_but_the_rest_can(
    bwrap: str, work: Path
) -> None:
    (work / ".git" / "hooks").mkdir(parents=True)
    (work / ".git" / "config").write_text("[core]\n")
    argv = sh(
        "echo evil > .git/hooks/pre-commit; echo '[alias]' >> .git/config; "
        "mv .git moved; rm -rf .git; echo fine > other"
    )
    confined = await run(work, argv, workspace_only(bwrap))
    assert confined.printed.count("Read-only file system") >= 2
    assert "Device or resource busy" in confined.printed  # the move
    assert confined.exit_code == 0  # the last command wrote: the others' refusals are printed
    assert refusal(1, confined.printed) == (
        "sh: 1: cannot create .git/hooks/pre-commit: Read-only file system"
    )
    assert not (work / ".git" / "hooks" / "pre-commit").exists()
    assert (work / ".git" / "config").read_text() == "[core]\n"
    assert (work / "other").read_text() == "fine\n"
    # Unconfined, the same command writes the hook.
    await run(work, sh("echo evil > .git/hooks/pre-commit"), None)
    assert (work / ".git" / "hooks" / "pre-commit").read_text() == "evil\n"


async def test_a_worktrees_git_folder_stays_read_only_when_writable(
    bwrap: str, tmp_path: Path, work: Path
) -> None:
    main_git = tmp_path / "main" / ".git"
    (main_git / "worktrees" / "work").mkdir(parents=True)
    (main_git / "worktrees" / "work" / "commondir").write_text("../..\n")
    (work / ".git").write_text(f"gitdir: {main_git}/worktrees/work\n")
    policy = workspace_only(bwrap, writable_roots=(str(tmp_path / "main"),))
    argv = sh(
        f"echo evil > {main_git}/hooks-pre-commit; echo x > {main_git}/worktrees/work/HEAD; "
        f"echo gitdir: /elsewhere > .git; echo fine > {tmp_path}/main/other"
    )
    confined = await run(work, argv, policy)
    assert confined.printed.count("Read-only file system") == 3
    assert sorted(p.name for p in main_git.rglob("*")) == ["commondir", "work", "worktrees"]
    assert (work / ".git").read_text() == f"gitdir: {main_git}/worktrees/work\n"
    assert (tmp_path / "main" / "other").read_text() == "fine\n"


async def test_protected_paths_in_writable_folders_stay_read_only(
    bwrap: str, tmp_path: Path, work: Path
) -> None:
    # relay's home inside the workspace, a rollout file under the temporary folder (/tmp,
    # writable in the mode).
    home = work / "state" / "home"
    home.mkdir(parents=True)
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    rollout = sessions / "rollout.jsonl"
    rollout.write_text('{"line": 1}\n')
    assert Path(os.path.realpath(tmp_path)).is_relative_to("/tmp")
    policy = SandboxPolicy(
        "workspace-write", bwrap, protected=(str(home), str(rollout)), exclude_tmpdir_env_var=True
    )
    argv = sh(
        f"echo '{{}}' >> {rollout}; rm -f {rollout}; mv {sessions} {tmp_path}/moved; "
        f"echo x > {home}/config.toml; mv state moved; echo fine > other; "
        f"echo fine > {sessions}/other"
    )
    confined = await run(work, argv, policy)
    assert confined.printed.count("Read-only file system") == 2  # appending, writing
    # Removing the rollout, moving its folder or the home's parent away (then replacing
    # them on the host).
    assert confined.printed.count("Device or resource busy") == 3
    assert rollout.read_text() == '{"line": 1}\n'
    assert sessions.is_dir() and (work / "state").is_dir()
    assert list(home.iterdir()) == []
    assert (work / "other").read_text() == "fine\n"
    assert (sessions / "other").read_text() == "fine\n"
    # Without the protection, the same command appends to the rollout and writes the home.
    await run(
        work,
        sh(f"echo '{{}}' >> {rollout}; echo x > {home}/config.toml"),
        workspace_only(bwrap, exclude_slash_tmp=False),
    )
    assert rollout.read_text() == '{"line": 1}\n{}\n'
    assert (home / "config.toml").exists()


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_a_hidden_key_file_cannot_be_read(bwrap: str, work: Path, mode: str) -> None:
    home = work / ".relay"
    home.mkdir()
    key = home / "grant.key"
    secret = f"grant-{uuid.uuid4().hex}"
    key.write_text(secret)
    policy = SandboxPolicy(mode, bwrap, protected=(str(home),), hidden=(str(key),))  # type: ignore[arg-type]
    argv = sh(f"cat {key}; cat .relay/grant.key; cp {key} copy; echo x > {key}; cat copy")
    confined = await run(work, argv, policy)
    assert secret not in confined.printed
    assert "Permission denied" in confined.printed
    assert key.read_text() == secret
    # Unconfined, it reads.
    assert (await run(work, sh(f"cat {key}"), None)).printed == secret


# ------------------------------------------------------------------ the seccomp filter

ADD_KEY = {"x86_64": 248, "aarch64": 217}

KEYRING = """\
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
# add_key("user", "k", "v", 1, KEY_SPEC_SESSION_KEYRING)
done = libc.syscall(int(sys.argv[1]), b"user", b"relay-probe", b"v", 1, -3)
print("added" if done >= 0 else os.strerror(ctypes.get_errno()))
"""


@pytest.mark.parametrize(
    "policy",
    [
        lambda bwrap: SandboxPolicy("read-only", bwrap),
        lambda bwrap: workspace_only(bwrap),
        lambda bwrap: workspace_only(bwrap, network_access=True),
    ],
    ids=["read-only", "workspace-write", "network"],
)
async def test_no_mode_reaches_the_kernels_keyrings(
    bwrap: str, work: Path, policy: Callable[[str], SandboxPolicy]
) -> None:
    number = ADD_KEY.get(platform.machine())
    if number is None:
        pytest.skip(f"no add_key number for {platform.machine()}")
    confined = await run(work, py(KEYRING, str(number)), policy(bwrap))
    assert confined.printed == "Operation not permitted\n"


SOCKETS = """\
import socket
for name in ("AF_INET", "AF_INET6", "AF_NETLINK", "AF_VSOCK", "AF_PACKET", "AF_ALG"):
    kind = socket.SOCK_RAW if name == "AF_NETLINK" else socket.SOCK_STREAM
    kind = socket.SOCK_SEQPACKET if name == "AF_ALG" else kind
    kind = socket.SOCK_DGRAM if name == "AF_PACKET" else kind
    try:
        socket.socket(getattr(socket, name), kind).close()
        print(name, "made")
    except OSError as exc:
        print(name, exc.strerror)
a, b = socket.socketpair()
print("socketpair made")
"""


async def test_without_network_only_ip_and_netlink_sockets_are_made(bwrap: str, work: Path) -> None:
    confined = await run(work, py(SOCKETS), SandboxPolicy("read-only", bwrap))
    assert confined.printed.splitlines() == [
        "AF_INET made",
        "AF_INET6 made",
        "AF_NETLINK made",
        "AF_VSOCK Operation not permitted",
        "AF_PACKET Operation not permitted",
        "AF_ALG Operation not permitted",
        "socketpair made",
    ]
    networked = await run(work, py(SOCKETS), workspace_only(bwrap, network_access=True))
    assert "AF_VSOCK made" in networked.printed.splitlines()
