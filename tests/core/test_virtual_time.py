"""Tasks that do real I/O, tested in virtual time.

Under trio's ``autojump_clock`` the clock jumps to the next deadline whenever every task is
blocked. A tool that waits on a worker thread (``read_file``, ``list_dir``) or a child process
(``shell``) blocks every task while real work goes on: the clock must not jump past a test's
deadline then, and the tool's own deadlines run on the wall clock.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

import relay
from relay import testing

RUNS = range(50)


@attrs.frozen
class CallTool(relay.SessionTask):
    """Run one call of a built-in tool; the answer is its output."""

    name: str
    arguments: dict[str, object]

    @property
    def kind(self) -> str:
        return "call"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        call = relay.FunctionCall(self.name, json.dumps(self.arguments), f"c-{ctx.view.turn_id}")
        ctx.record(call)
        return await ctx.run_tool(call)


def call_tool(op: relay.CustomOp) -> CallTool:
    return CallTool(str(op.fields["name"]), dict(op.fields["arguments"]))


def config(cwd: Path) -> relay.Config:
    return relay.Config(
        cwd=str(cwd), tools={"shell": True}, rollout=relay.RolloutConfig(enabled=False)
    )


async def answer(cwd: Path, name: str, arguments: dict[str, object]) -> str | None:
    async with testing.open_test_session(
        {"responses": []}, config=config(cwd), tasks={"call": call_tool}
    ) as t:
        await t.submit(relay.CustomOp("call", {"name": name, "arguments": arguments}), id="c1")
        done = await t.wait_for(relay.TurnComplete, timeout=5)
    assert isinstance(done.msg, relay.TurnComplete)
    return done.msg.last_agent_message


@pytest.mark.parametrize("run", RUNS)
async def test_a_task_that_reads_a_file_ends_within_a_virtual_timeout(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, run: int
) -> None:
    (tmp_path / "notes.txt").write_text(f"run {run}\n")
    assert await answer(tmp_path, "read_file", {"path": "notes.txt"}) == f"run {run}\n"


@pytest.mark.parametrize("run", RUNS)
async def test_a_task_that_lists_a_directory_ends_within_a_virtual_timeout(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, run: int
) -> None:
    (tmp_path / f"file{run}").write_text("")
    assert await answer(tmp_path, "list_dir", {"path": "."}) == f"file{run}"


@pytest.mark.parametrize("run", RUNS)
async def test_a_task_that_runs_a_command_ends_within_a_virtual_timeout(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, run: int
) -> None:
    argv = [sys.executable, "-c", f"import time; time.sleep(0.05); print('run {run}')"]
    assert await answer(tmp_path, "shell", {"argv": argv}) == f"run {run}\n\n[exit code 0]"


async def test_the_shell_timeout_runs_on_the_wall_clock(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    # The clock does not move while the command runs, so only a wall-clock deadline ends it.
    argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    started = trio.current_time()
    output = await answer(tmp_path, "shell", {"argv": argv, "timeout_ms": 200})
    assert output == "\n[timed out after 200 ms; process killed]"
    assert trio.current_time() - started < 5


async def test_a_test_that_does_real_io_holds_the_clock_with_real_work(
    autojump_clock: trio.testing.MockClock,
) -> None:
    started = trio.current_time()
    with trio.move_on_after(1) as deadline, testing.real_work():
        with testing.real_work():  # blocks nest
            await trio.to_thread.run_sync(time.sleep, 0.05)
        await trio.to_thread.run_sync(time.sleep, 0.05)
    assert not deadline.cancelled_caught
    assert trio.current_time() == started
    # Once the work is done, the clock jumps again.
    assert autojump_clock.autojump_threshold == 0
    await trio.sleep(3)
    assert trio.current_time() == started + 3


@pytest.mark.parametrize("run", range(10))
async def test_a_session_resumes_within_a_virtual_deadline(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, run: int
) -> None:
    sessions = tmp_path / "sessions"
    config = relay.Config(cwd=str(tmp_path), rollout=relay.RolloutConfig(dir=str(sessions)))
    model = testing.ScriptedModel({"responses": [{"text": "one"}, {"text": f"two {run}"}]})
    async with relay.open_session(config, model=model) as session:
        await session.ask("first")
    (rollout,) = sessions.rglob("*.jsonl")
    with trio.fail_after(5):
        async with relay.resume_session(rollout, config, model=model) as resumed:
            answer = await resumed.ask("second")
    assert answer.message == f"two {run}"
