"""The sandbox holds: escapes that must fail, each tried through the real ``shell`` tool in
bwrap, beside the same command run unconfined to show that it would have worked
(docs/approvals.md). Skipped, saying why, where bwrap cannot run; required in CI."""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from relay._core._sandbox import SandboxPolicy, sandbox_refused
from relay._core._tools import ShellRun, ToolContext, run_shell
from tests.escapees import escape_argv, wait_gone
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
    cwd: Path,
    argv: list[str],
    policy: SandboxPolicy | None,
    *,
    confined: bool = True,
    timeout_ms: int = 30_000,
) -> ShellRun:
    ctx = ToolContext("t1", str(cwd), lambda _: None, sandbox=policy)
    return await run_shell({"argv": argv, "timeout_ms": timeout_ms}, ctx, confined=confined)


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
        assert sandbox_refused(confined.exit_code, confined.printed)
    # The same command, unconfined, writes there: the sandbox is what stopped it.
    await run(work, argv, workspace_only(bwrap), confined=False)
    assert (outside / written).read_text() == "x\n"


async def test_a_hard_link_to_a_file_outside_cannot_be_made(
    bwrap: str, work: Path, outside: Path
) -> None:
    target = outside / "target"
    target.write_text("original\n")
    argv = sh(f"ln {target} hard && echo changed > hard")
    confined = await run(work, argv, workspace_only(bwrap))
    assert "Invalid cross-device link" in confined.printed
    assert sandbox_refused(confined.exit_code, confined.printed)
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
    assert sandbox_refused(confined.exit_code or 1, confined.printed)
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
from relay._core._sandbox import SandboxPolicy
from relay._core._tools import run_shell
from relay._core._tools import ToolContext
mode, bwrap, cwd = sys.argv[1:]
policy = None if mode == "none" else SandboxPolicy(mode, bwrap)
ctx = ToolContext(
    "t1", cwd, lambda _: None, hidden_env=frozenset({"RELAY_PROBE_KEY"}), sandbox=policy
)
command = (
    f"printenv RELAY_PROBE_KEY; cat /proc/{os.getpid()}/environ; "
    "cat /proc/[0-9]*/environ; cat /proc/[0-9]*/task/*/environ"
)
print(trio.run(run_shell, {"argv": ["sh", "-c", command]}, ctx).printed)
"""


@pytest.mark.slow  # two Pythons that import relay, for each mode
@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
def test_the_api_key_cannot_be_read_from_the_environment_or_relays_proc(
    bwrap: str, work: Path, mode: str
) -> None:
    key = f"sk-probe-{uuid.uuid4().hex}"

    def probe(mode: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, mode, bwrap, str(work)],
            env={**os.environ, "RELAY_PROBE_KEY": key},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return done.stdout

    assert key not in probe(mode)
    # Unconfined, the command's own environment has no key, but relay's /proc has it.
    assert key in probe("none")


# ------------------------------------------------------------------ processes left behind


async def test_a_daemon_started_in_the_sandbox_does_not_outlive_the_call(
    bwrap: str, work: Path
) -> None:
    marker = f"relay-escapee-{uuid.uuid4().hex}"
    result = await run(work, escape_argv("escapee.pid", marker), workspace_only(bwrap))
    assert result.output == "\n[exit code 0]"
    assert (work / "escapee.pid").read_text().strip().isdigit()
    for pid in processes_with(marker):
        await wait_gone(pid)


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
        nursery.cancel_scope.cancel()
    for pid in seen:
        await wait_gone(pid)
    assert processes_with(marker) == []


async def test_a_daemon_goes_at_the_timeout(bwrap: str, work: Path) -> None:
    marker = f"relay-escapee-{uuid.uuid4().hex}"
    argv = escape_argv("escapee.pid", marker, "wait")
    result = await run(work, argv, workspace_only(bwrap), timeout_ms=1_000)
    assert result.exit_code is None
    assert result.output.endswith("[timed out after 1000 ms; process killed]")
    assert (work / "escapee.pid").read_text().strip().isdigit()  # it had started
    for pid in processes_with(marker):
        await wait_gone(pid)


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
        assert result.output == "\n[exit code 0]"
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
    assert result.output == f"{work.resolve()}\n\n[exit code 0]"
    assert (outside / "written").read_text() == "x\n"


async def test_a_sandboxed_command_reports_its_exit_status_and_a_missing_program(
    bwrap: str, work: Path
) -> None:
    policy = workspace_only(bwrap)
    assert (await run(work, sh("exit 3"), policy)).output == "\n[exit code 3]"
    missing = await run(work, ["relay-no-such-program-xyz"], policy)
    assert missing.exit_code == 1
    assert "relay-no-such-program-xyz" in missing.printed
