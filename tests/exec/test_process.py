"""Child processes die with relay: a real ``relay run`` whose shell command started a child is
ended by a signal, and neither the command nor its child outlives it."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from relay._exec import _process
from relay._exec._process import open_command
from tests.escapees import escape_argv
from tests.sandboxing import processes_with

#: Bound on every wait for another process; reached only when the behaviour is broken.
WAIT_SECONDS = 15


def ended_within(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` (not necessarily a child) ends within ``seconds``."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], seconds)
        return bool(readable)
    finally:
        os.close(fd)


def read_fifo(path: Path, seconds: float) -> str:
    """What a writer puts into the FIFO ``path``, waiting at most ``seconds`` for it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    data = b""
    try:
        while not data.endswith(b"\n"):
            readable, _, _ = select.select([fd], [], [], seconds)
            assert readable, f"nothing arrived in {path.name} within {seconds} s"
            chunk = os.read(fd, 4096)
            if not chunk and data:
                break
            data += chunk
    finally:
        os.close(fd)
    return data.decode()


@contextlib.contextmanager
def reaped(pids: list[int]) -> Iterator[None]:
    """Kill whatever of ``pids`` still runs when the test is over, so a failure leaves nothing."""
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def start_relay(tmp_path: Path, argv: list[str]) -> subprocess.Popen[bytes]:
    """``relay run`` of one turn whose model runs ``argv`` with the shell tool."""
    (tmp_path / "config.toml").write_text("[tools]\nshell = true\n")
    (tmp_path / "model.json").write_text(
        json.dumps(
            {
                "responses": [
                    {
                        "function_call": {
                            "name": "shell",
                            "arguments": {"argv": argv, "timeout_ms": 3_600_000},
                            "call_id": "sh1",
                        }
                    },
                    {"text": "done"},
                ]
            }
        )
    )
    turn = {"id": "t1", "op": {"type": "user_turn", "items": [{"type": "text", "text": "go"}]}}
    (tmp_path / "ops.jsonl").write_text(
        json.dumps(turn) + '\n{"wait_for": {"type": "turn_complete"}}\n'
    )
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "relay",
            "run",
            "ops.jsonl",
            "--config",
            "config.toml",
            "--model-script",
            "model.json",
            "--rollout-dir",
            "sessions",
        ],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # SIGHUP as a terminal sends it, whatever the test run inherited (nohup ignores it).
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )


def end_relay(relay: subprocess.Popen[bytes], signum: int) -> None:
    """Send ``signum`` to relay and wait for its end."""
    try:
        relay.send_signal(signum)
        # SIGTERM ends the session cleanly (exit 143); SIGHUP and SIGKILL end the process.
        graceful = signum == signal.SIGTERM
        assert relay.wait(timeout=WAIT_SECONDS) == (128 + signum if graceful else -signum)
    finally:
        if relay.poll() is None:
            relay.kill()
            relay.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_the_shell_command_and_its_children_die_with_relay(tmp_path: Path, signum: int) -> None:
    fifo = tmp_path / "ready.fifo"
    os.mkfifo(fifo)
    # The command starts a child, says it is ready, then waits for the child. Both carry the
    # marker: their pids, seen from the host, are not those they see in their namespace.
    marker = f"relay-child-{uuid.uuid4().hex}"
    child = f'{sys.executable} -c "import time; time.sleep(1000)" {marker}'
    relay = start_relay(tmp_path, ["sh", "-c", f"{child} & echo ready > {fifo}; wait", marker])
    pids: list[int] = []
    with reaped(pids):
        try:
            assert read_fifo(fifo, WAIT_SECONDS) == "ready\n"
            pids += processes_with(marker)
            assert len(pids) == 2  # the command and its child
            assert not any(ended_within(pid, 0) for pid in pids)
        finally:
            end_relay(relay, signum)
        for pid in pids:
            assert ended_within(pid, WAIT_SECONDS), "the command or its child outlived relay"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_grandchild_that_left_the_session_dies_with_relay(tmp_path: Path, signum: int) -> None:
    fifo = tmp_path / "pid.fifo"
    os.mkfifo(fifo)
    marker = f"relay-escapee-{uuid.uuid4().hex}"
    relay = start_relay(tmp_path, escape_argv(str(fifo), marker, "wait"))
    pids: list[int] = []
    with reaped(pids):
        try:
            read_fifo(fifo, WAIT_SECONDS)  # the grandchild has left the command's session
            pids += processes_with(marker)
            assert len(pids) == 2  # the command and the grandchild
            assert not any(ended_within(pid, 0) for pid in pids)
        finally:
            end_relay(relay, signum)
        for pid in pids:
            assert ended_within(pid, WAIT_SECONDS), "the escaped grandchild outlived relay"


async def test_a_command_killed_by_a_signal_shows_as_killed_by_it(
    tmp_path: Path, guard_mode: str
) -> None:
    async with open_command(
        ["sh", "-c", "kill -TERM $$"],
        cwd=str(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as process:
        assert await process.wait() == -signal.SIGTERM


async def test_a_command_that_cannot_start_is_an_os_error(tmp_path: Path, guard_mode: str) -> None:
    with pytest.raises(FileNotFoundError, match="No such file or directory"):
        async with open_command(
            [str(tmp_path / "missing")],
            cwd=str(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ):
            pass


async def test_a_command_starts_with_the_default_action_for_sigpipe(tmp_path: Path) -> None:
    # Python ignores SIGPIPE and SIGXFSZ for itself; a command must not inherit that, or
    # ``producer | head`` pipelines in it would fail with write errors instead of ending.
    async with open_command(
        ["grep", "SigIgn", "/proc/self/status"],
        cwd=str(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as process:
        assert process.stdout is not None
        output = b"".join([chunk async for chunk in process.stdout])
        await process.wait()
    ignored = int(output.split()[1], 16)
    for signum in (signal.SIGPIPE, signal.SIGXFSZ):
        assert not ignored & (1 << (signum - 1)), signal.Signals(signum).name


async def read_all(argv: list[str], cwd: Path, time_limit: float) -> tuple[bytes, int, bool]:
    async with open_command(
        argv,
        cwd=str(cwd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        time_limit=time_limit,
    ) as process:
        assert process.stdout is not None
        output = b"".join([chunk async for chunk in process.stdout])
        code = await process.wait()
    return output, code, process.timed_out


async def test_the_guard_ends_a_command_at_its_time_limit(tmp_path: Path, guard_mode: str) -> None:
    argv = ["sh", "-c", "echo started; exec sleep 60"]
    assert await read_all(argv, tmp_path, 0.2) == (b"started\n", -signal.SIGKILL, True)


async def test_the_time_limit_covers_a_child_that_keeps_the_output_open(
    tmp_path: Path, guard_mode: str
) -> None:
    # The command exits at once and leaves a child that writes on: the limit ends the child.
    argv = ["sh", "-c", "(echo child; exec sleep 60) & echo parent"]
    output, code, timed_out = await read_all(argv, tmp_path, 0.2)
    assert (sorted(output.splitlines()), code, timed_out) == ([b"child", b"parent"], 0, True)


async def test_a_command_that_ends_in_time_has_not_timed_out(tmp_path: Path) -> None:
    assert await read_all(["echo", "hi"], tmp_path, 60) == (b"hi\n", 0, False)


# ----------------------------------------------------------------- what a command cannot undo


@pytest.fixture(params=["namespaces", "groups"])
def guard_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each way the guard runs commands: in PID namespaces, and as where the kernel refuses
    them, in process groups under subreapers."""
    mode: str = request.param
    _process._restart_guard(namespaces=mode == "namespaces")
    try:
        yield mode
    finally:
        old = _process._guard_pid()
        _process._restart_guard(namespaces=True)
        if old is not None:
            assert ended_within(old, WAIT_SECONDS)


def guard_processes() -> list[int]:
    """This process's children that run a process guard (``python -I -S -c ...``)."""
    found = []
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            for pid in Path(f"/proc/self/task/{task}/children").read_text().split():
                with contextlib.suppress(OSError):
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    if argv[1:4] == [b"-I", b"-S", b"-c"]:
                        found.append(int(pid))
    return found


def parent_of(pid: int) -> int:
    """The parent of process ``pid``, as the host sees it."""
    return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])


@contextlib.contextmanager
def killed_after(marker: str) -> Iterator[None]:
    """Kill what still runs with ``marker`` in its command line once the test is over."""
    try:
        yield
    finally:
        for pid in processes_with(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def daemon(marker: str) -> str:
    """Shell words that start a process in a session of its own, ``marker`` in its command
    line, holding the standard streams it inherited."""
    return f'setsid {sys.executable} -c "import time; time.sleep(1000)" {marker} &'


async def test_a_command_that_kills_its_parent_leaves_nothing_behind(
    tmp_path: Path, guard_mode: str
) -> None:
    # Unconfined (danger-full-access): once started, the command kills its parent (once the
    # guard, now its keeper) and leaves a daemon holding its output. The time limit still
    # ends it all, and the output with it.
    marker = f"relay-escapee-{uuid.uuid4().hex}"
    # It says it started first, so that a loaded machine's slow start cannot run the limit out
    # before the output is written.
    argv = ["sh", "-c", f"read go; echo started; kill -9 $PPID; {daemon(marker)}"]
    with killed_after(marker):
        with anyio.fail_after(WAIT_SECONDS):  # reached only when the limit went with the guard
            async with open_command(
                argv,
                cwd=str(tmp_path),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                time_limit=1,
            ) as process:
                assert process.stdin is not None and process.stdout is not None
                await process.stdin.send(b"go\n")
                output = b"".join([chunk async for chunk in process.stdout])
                code = await process.wait()
        assert output == b"started\n"
        assert code in (0, -signal.SIGKILL)
        assert processes_with(marker) == []


async def test_a_command_cannot_signal_or_see_relay(tmp_path: Path) -> None:
    me = os.getpid()
    script = f"kill -0 {me} 2>/dev/null && echo signalled; test -e /proc/{me} && echo seen; :"
    async with open_command(
        ["sh", "-c", script],
        cwd=str(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as process:
        if not process.namespaced:
            pytest.skip("PID namespaces are not permitted here (the fallback)")
        assert process.stdout is not None
        output = b"".join([chunk async for chunk in process.stdout])
        assert await process.wait() == 0
    assert output == b""


async def test_commands_share_one_guard(tmp_path: Path) -> None:
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(3):
            await stack.enter_async_context(
                open_command(
                    ["sleep", "60"],
                    cwd=str(tmp_path),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        assert len(guard_processes()) == 1


async def test_a_guard_killed_from_outside_leaves_its_calls_bounded(
    tmp_path: Path, guard_mode: str
) -> None:
    marker = f"relay-escapee-{uuid.uuid4().hex}"
    with killed_after(marker):
        async with open_command(
            ["sh", "-c", f"{daemon(marker)} echo started; exec sleep 60"],
            cwd=str(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            time_limit=1,
        ) as first:
            assert first.stdout is not None
            assert await first.stdout.receive() == b"started\n"
            (guard,) = guard_processes()
            os.kill(guard, signal.SIGKILL)
            assert ended_within(guard, WAIT_SECONDS)
            # The next command starts (under a new guard) and ends as usual.
            assert await read_all(["echo", "hi"], tmp_path, 60) == (b"hi\n", 0, False)
            assert guard not in guard_processes()
            # The first one's time limit still holds, and so does the end of its daemon.
            with anyio.fail_after(WAIT_SECONDS):
                rest = b"".join([chunk async for chunk in first.stdout])
                assert (rest, await first.wait(), first.timed_out) == (b"", -9, True)
        assert processes_with(marker) == []


async def test_a_keeper_killed_from_outside_takes_the_call_with_it(
    tmp_path: Path, guard_mode: str
) -> None:
    marker = f"relay-escapee-{uuid.uuid4().hex}"
    with killed_after(marker):
        async with open_command(
            ["sh", "-c", f"{daemon(marker)} echo started; exec sleep 60"],
            cwd=str(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        ) as process:
            assert process.stdout is not None
            assert await process.stdout.receive() == b"started\n"
            os.kill(parent_of(process.pid), signal.SIGKILL)
            with anyio.fail_after(WAIT_SECONDS):
                assert await process.wait() == -signal.SIGKILL
                if process.namespaced:
                    # The kernel ended the namespace with its init: the output ends now.
                    assert b"".join([chunk async for chunk in process.stdout]) == b""
        # In a process group only, the guard kills what the keeper left once it is its
        # child: soon after, not before the call returns.
        left = processes_with(marker)
        assert process.namespaced is False or left == []
        assert all(ended_within(pid, WAIT_SECONDS) for pid in left)


#: Copies its input to its output, then writes ``passed`` to the descriptor named by argv[1].
COPY_AND_PASS = """\
import os, sys
sys.stdout.write(sys.stdin.read())
sys.stdout.flush()
os.write(int(sys.argv[1]), b"passed\\n")
"""


async def test_input_and_passed_descriptors_reach_the_command(
    tmp_path: Path, guard_mode: str
) -> None:
    read_end, write_end = os.pipe()
    try:
        async with open_command(
            [sys.executable, "-c", COPY_AND_PASS, str(write_end)],
            cwd=str(tmp_path),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(write_end,),
        ) as process:
            os.close(write_end)
            write_end = -1
            assert process.stdin is not None and process.stdout is not None
            await process.stdin.send(b"in\n")
            await process.stdin.aclose()
            output = b"".join([chunk async for chunk in process.stdout])
            assert await process.wait() == 0
        assert output == b"in\n"
        assert os.read(read_end, 64) == b"passed\n"
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def test_a_command_runs_under_asyncio(tmp_path: Path, guard_mode: str) -> None:
    async def main() -> tuple[bytes, int, bool]:
        return await read_all(["sh", "-c", "echo hi >&2; echo out"], tmp_path, 60)

    assert anyio.run(main, backend="asyncio") == (b"out\n", 0, False)


def test_a_forked_child_starts_its_own_guard(tmp_path: Path) -> None:
    async def run() -> bytes:
        output, _, _ = await read_all(["echo", "hi"], tmp_path, 60)
        return output

    assert anyio.run(run) == b"hi\n"
    (guard,) = guard_processes()
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            ok = anyio.run(run) == b"hi\n" and guard not in guard_processes()
            os.write(write_end, b"ok" if ok else b"no")
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        assert read_fifo_fd(read_end, WAIT_SECONDS) == b"ok"
    finally:
        os.close(read_end)
        os.waitpid(child, 0)
    assert guard_processes() == [guard]


def read_fifo_fd(fd: int, seconds: float) -> bytes:
    """What arrives on ``fd`` until its writers close it, waiting at most ``seconds``."""
    data = b""
    while True:
        readable, _, _ = select.select([fd], [], [], seconds)
        assert readable, f"nothing arrived within {seconds} s"
        chunk = os.read(fd, 64)
        if not chunk:
            return data
        data += chunk


async def test_a_command_holds_its_streams_only(tmp_path: Path, guard_mode: str) -> None:
    """The keeper's link and the originals of the call's pipes stay the keeper's: a command
    holding them could keep its call's output open after it ends, and talk to its keeper."""
    listing = "import os; print(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))"
    async with open_command(
        [sys.executable, "-c", listing],
        cwd=str(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    ) as process:
        assert process.stdout is not None
        output = b"".join([chunk async for chunk in process.stdout])
        assert await process.wait() == 0
    # 0, 1 and 2, and the descriptor listdir opened to list them.
    assert json.loads(output) == [0, 1, 2, 3]
