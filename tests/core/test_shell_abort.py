"""The shell tool runs a real process group, and an abort kills the whole group."""

from __future__ import annotations

import os
from pathlib import Path

import trio

import relay
from relay import testing
from tests.escapees import escape_argv, wait_gone


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_interrupt_kills_the_shell_process_group(tmp_path: Path) -> None:
    fifo = tmp_path / "pid.fifo"
    os.mkfifo(fifo)
    # The command starts a grandchild and reports its pid through the fifo, then waits.
    argv = ["sh", "-c", f"sleep 1000 & echo $! > {fifo}; wait"]
    script = {
        "responses": [
            {"function_call": {"name": "shell", "arguments": {"argv": argv}, "call_id": "sh1"}},
            {"text": "ok"},
        ]
    }
    config = relay.Config(
        tools={"shell": True}, cwd=str(tmp_path), rollout=relay.RolloutConfig(enabled=False)
    )
    async with testing.open_test_session(script, config=config) as t:
        await t.turn("run it", id="t1")
        async with await trio.open_file(fifo) as reader:
            grandchild = int((await reader.read()).strip())
        assert alive(grandchild)
        await t.submit(relay.Interrupt())
        await t.wait_for(relay.TurnAborted)
        # The group was sent SIGKILL before turn_aborted (and the grandchild reaped by the
        # command's guard: it may be gone already); wait for its end, bounded.
        await wait_gone(grandchild)
    assert relay.FunctionCallOutput("sh1", "aborted") in t.session.history.items


async def test_interrupt_kills_a_grandchild_that_left_the_session(tmp_path: Path) -> None:
    fifo = tmp_path / "pid.fifo"
    os.mkfifo(fifo)
    argv = escape_argv(str(fifo), "wait")
    script = {
        "responses": [
            {"function_call": {"name": "shell", "arguments": {"argv": argv}, "call_id": "sh1"}},
            {"text": "ok"},
        ]
    }
    config = relay.Config(
        tools={"shell": True}, cwd=str(tmp_path), rollout=relay.RolloutConfig(enabled=False)
    )
    async with testing.open_test_session(script, config=config) as t:
        await t.turn("run it", id="t1")
        async with await trio.open_file(fifo) as reader:
            escapee = int((await reader.read()).strip())
        assert alive(escapee)
        await t.submit(relay.Interrupt())
        await t.wait_for(relay.TurnAborted)
        await wait_gone(escapee)
