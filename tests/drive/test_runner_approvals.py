"""The op-script runner and approvals: a call that waits on the script's decision, and one a
callback decides (docs/approvals.md, "On the command line")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._base._errors import ScriptError
from relay._drive._op_script import parse_op_script
from relay._drive._runner import ScriptRunner

MODEL = {
    "responses": [
        {
            "function_call": {
                "name": "shell",
                "arguments": {"argv": ["touch", "made"]},
                "call_id": "c1",
            }
        },
        "done",
    ]
}
TURN = {"id": "t1", "op": {"type": "user_turn", "items": [{"type": "text", "text": "go"}]}}


def config(tmp_path: Path) -> relay.Config:
    return relay.Config(
        tools={"shell": True},
        cwd=str(tmp_path),
        approval_policy="untrusted",
        rollout=relay.RolloutConfig(enabled=False),
    )


def steps(*rows: dict[str, Any]) -> list[Any]:
    return parse_op_script("\n".join(json.dumps(row) for row in rows))


async def test_a_callback_that_takes_its_time_is_waited_for_when_ops_do_not_decide(
    tmp_path: Path,
) -> None:
    decided = trio.Event()

    async def slowly(request: relay.ExecApprovalRequest) -> str:
        await decided.wait()
        return "approved"

    read: list[str] = []
    async with (
        relay.open_session(
            config(tmp_path), model=testing.ScriptedModel(MODEL), on_approval=slowly
        ) as session,
        trio.open_nursery() as nursery,
    ):
        runner = ScriptRunner(
            session, lambda _, msg: read.append(msg["type"]), answers_approvals=False
        )
        nursery.start_soon(runner.run, steps(TURN))
        await trio.testing.wait_all_tasks_blocked()
        assert "exec_approval_request" in read and "turn_complete" not in read
        decided.set()
    assert read[-2:] == ["turn_complete", "shutdown_complete"]
    assert (tmp_path / "made").exists()


async def test_when_ops_decide_a_script_that_ends_with_a_call_waiting_fails(
    tmp_path: Path,
) -> None:
    # The deadline is the test's own: without the check, the script would wait forever.
    with (
        trio.fail_after(30),
        pytest.raises(ScriptError, match="the script ended while the call 'c1' waits"),
    ):
        async with relay.open_session(
            config(tmp_path), model=testing.ScriptedModel(MODEL)
        ) as session:
            await ScriptRunner(session, lambda _, __: None).run(steps(TURN))
    assert not (tmp_path / "made").exists()


async def test_a_wait_that_the_decision_ends_is_met_once_the_script_decides(
    tmp_path: Path,
) -> None:
    read: list[dict[str, Any]] = []
    async with relay.open_session(config(tmp_path), model=testing.ScriptedModel(MODEL)) as session:
        await ScriptRunner(session, lambda _, msg: read.append(msg)).run(
            steps(
                TURN,
                {"wait_for": {"type": "exec_approval_request"}},
                {"op": {"type": "exec_approval", "id": "c1", "decision": "approved"}},
                {"wait_for": {"type": "turn_complete"}},
            )
        )
    assert [m["type"] for m in read if m["type"] == "error"] == []
    assert (tmp_path / "made").exists()
