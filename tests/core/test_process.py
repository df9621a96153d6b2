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
from collections.abc import Iterator
from pathlib import Path

import pytest

from relay._core._process import open_command
from tests.escapees import escape_argv

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
    fifo = tmp_path / "pids.fifo"
    os.mkfifo(fifo)
    # The command starts a child and reports both pids, then waits for the child.
    relay = start_relay(tmp_path, ["sh", "-c", f'sleep 1000 & echo "$$ $!" > {fifo}; wait'])
    pids: list[int] = []
    with reaped(pids):
        try:
            pids += [int(pid) for pid in read_fifo(fifo, WAIT_SECONDS).split()]
            assert len(pids) == 2
            assert not ended_within(pids[0], 0) and not ended_within(pids[1], 0)
        finally:
            end_relay(relay, signum)
        command, child = pids
        assert ended_within(command, WAIT_SECONDS), "the shell command outlived relay"
        assert ended_within(child, WAIT_SECONDS), "the command's child outlived relay"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_grandchild_that_left_the_session_dies_with_relay(tmp_path: Path, signum: int) -> None:
    fifo = tmp_path / "pid.fifo"
    os.mkfifo(fifo)
    relay = start_relay(tmp_path, escape_argv(str(fifo), "wait"))
    pids: list[int] = []
    with reaped(pids):
        try:
            pids.append(int(read_fifo(fifo, WAIT_SECONDS)))
            assert not ended_within(pids[0], 0)
        finally:
            end_relay(relay, signum)
        assert ended_within(pids[0], WAIT_SECONDS), "the escaped grandchild outlived relay"


async def test_a_command_killed_by_a_signal_shows_as_killed_by_it(tmp_path: Path) -> None:
    async with open_command(
        ["sh", "-c", "kill -TERM $$"],
        cwd=str(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as process:
        assert await process.wait() == -signal.SIGTERM


async def test_a_command_that_cannot_start_is_an_os_error(tmp_path: Path) -> None:
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


async def test_the_guard_ends_a_command_at_its_time_limit(tmp_path: Path) -> None:
    argv = ["sh", "-c", "echo started; exec sleep 60"]
    assert await read_all(argv, tmp_path, 0.2) == (b"started\n", -signal.SIGKILL, True)


async def test_the_time_limit_covers_a_child_that_keeps_the_output_open(tmp_path: Path) -> None:
    # The command exits at once and leaves a child that writes on: the limit ends the child.
    argv = ["sh", "-c", "(echo child; exec sleep 60) & echo parent"]
    output, code, timed_out = await read_all(argv, tmp_path, 0.2)
    assert (sorted(output.splitlines()), code, timed_out) == ([b"child", b"parent"], 0, True)


async def test_a_command_that_ends_in_time_has_not_timed_out(tmp_path: Path) -> None:
    assert await read_all(["echo", "hi"], tmp_path, 60) == (b"hi\n", 0, False)
