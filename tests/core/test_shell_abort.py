"""The shell tool runs a real process group, and an abort kills the whole group."""

from __future__ import annotations

import os
from pathlib import Path

import trio

import relay
from relay import testing
from tests.escapees import alive, escape_argv, wait_gone


async def test_interrupt_kills_the_shell_process_group(tmp_path: Path) -> None:
    fifo = tmp_path / "pid.fifo"
    os.mkfifo(fifo)
    # The command starts a grandchild that takes a lock (util-linux ``flock``, then the ``sh``
    # and ``sleep`` it runs), says so through the fifo, then waits.
    argv = ["sh", "-c", f"flock {fifo}.lock sh -c 'echo held > {fifo}; exec sleep 1000' & wait"]
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
            assert await reader.read() == "held\n"
        assert alive(fifo)
        await t.submit(relay.Interrupt())
        await t.wait_for(relay.TurnAborted)
        # The group was sent SIGKILL before turn_aborted (and the grandchild reaped by the
        # command's keeper: it may be gone already); wait for its end, bounded.
        await wait_gone(fifo)
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
            assert (await reader.read()).strip().isdigit()  # it left, holding the lock
        assert alive(fifo)
        await t.submit(relay.Interrupt())
        await t.wait_for(relay.TurnAborted)
        await wait_gone(fifo)
