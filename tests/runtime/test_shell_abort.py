"""The shell tool runs a real process group, and an abort kills the whole group."""

from __future__ import annotations

import os
from pathlib import Path

import trio

import runtime
from runtime import testing


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
    config = runtime.Config(
        tools={"shell": True}, cwd=str(tmp_path), rollout=runtime.RolloutConfig(enabled=False)
    )
    async with testing.open_test_session(script, config=config) as t:
        await t.turn("run it", id="t1")
        async with await trio.open_file(fifo) as reader:
            grandchild = int((await reader.read()).strip())
        assert alive(grandchild)
        await t.submit(runtime.Interrupt())
        await t.wait_for(runtime.TurnAborted)
        # The kill is synchronous with the abort; reaping a grandchild is its parent's (init's)
        # business, so look for a zombie or no process at all.
        status = Path(f"/proc/{grandchild}/stat")
        state = status.read_text().split(") ")[1][0] if status.exists() else "gone"
        assert state in {"Z", "gone"}
    assert runtime.FunctionCallOutput("sh1", "aborted") in t.session.history.items
