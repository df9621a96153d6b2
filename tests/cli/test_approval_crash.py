"""Approvals across a crash (docs/approvals.md): ``relay run`` killed with SIGKILL while a call
waits for its decision, or while an approved command runs, then resumed. A pending approval
never survives its process, and nothing runs twice or unasked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import relay
from relay import testing
from relay._rollout._resume import INTERRUPTED_OUTPUT
from tests.pipes import LineReader

RESUMED = {"responses": [{"text": "carrying on"}]}


def shell_call(call_id: str, *argv: str) -> dict[str, Any]:
    return {
        "function_call": {"name": "shell", "arguments": {"argv": list(argv)}, "call_id": call_id}
    }


def kill_when(
    workdir: Path, ops: list[dict[str, Any]], model: dict[str, Any], stop: str, policy: str
) -> Path:
    """Run ``ops`` under ``relay run``; SIGKILL it when an event of type ``stop`` is out, or,
    when ``stop`` is a path, when something is written to that fifo."""
    (workdir / "ops.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    (workdir / "model.json").write_text(json.dumps(model))
    sessions = workdir / "sessions"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "relay",
            "run",
            "ops.jsonl",
            "--model-script",
            "model.json",
            "--rollout-dir",
            str(sessions),
            "-c",
            "tools={shell=true}",
            "-c",
            f"approval_policy={json.dumps(policy)}",
        ],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        if stop.startswith("/"):
            with open(stop) as fifo:
                assert fifo.read()
            process.send_signal(signal.SIGKILL)
        else:
            for line in LineReader(process.stdout, timeout=60):
                if json.loads(line)["msg"]["type"] == stop:
                    process.send_signal(signal.SIGKILL)
                    break
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    (path,) = sessions.rglob("rollout-*.jsonl")
    return path


def turn(turn_id: str, text: str) -> dict[str, Any]:
    return {"id": turn_id, "op": {"type": "user_turn", "items": [{"type": "text", "text": text}]}}


async def resumed_history(path: Path, workdir: Path) -> tuple[list[Any], list[str]]:
    config = relay.Config(
        tools={"shell": True}, cwd=str(workdir), approval_policy="untrusted", model="scripted"
    )
    model = relay.testing.ScriptedModel(RESUMED)
    async with (
        relay.resume_session(path, config, model=model) as session,
        testing.recording(session) as recorder,
    ):
        await session.submit(relay.UserTurn(items=[relay.Text("go on")]))
        await recorder.wait_for(testing.turn_ended)
        warnings = [w.message for w in recorder.of_type(relay.WarningEvent)]
        history = list(session.history.items)
    return history, warnings


def outputs(history: list[Any], call_id: str) -> list[str]:
    return [
        item.output
        for item in history
        if isinstance(item, relay.FunctionCallOutput) and item.call_id == call_id
    ]


async def test_a_call_waiting_for_its_decision_reads_aborted_after_a_crash(tmp_path: Path) -> None:
    ops = [
        turn("t1", "make it"),
        {"wait_for": {"type": "exec_approval_request"}},
        {"wait_for": {"type": "turn_complete"}},
    ]
    model = {"responses": [shell_call("c1", "touch", "made"), {"text": "never"}]}
    path = kill_when(tmp_path, ops, model, "exec_approval_request", "untrusted")
    history, warnings = await resumed_history(path, tmp_path)
    assert outputs(history, "c1") == ["aborted"]
    assert not (tmp_path / "made").exists()
    assert not any("c1" in w for w in warnings)


async def test_a_command_running_at_a_crash_is_interrupted_and_never_run_again(
    tmp_path: Path,
) -> None:
    # The command appends a line to a log, says so through a fifo, then waits: the kill comes
    # while it waits.
    fifo = tmp_path / "started.fifo"
    os.mkfifo(fifo)
    command = ("sh", "-c", f"echo ran >> log.txt; echo started > {fifo}; exec sleep 1000")
    ops = [turn("t1", "run it"), {"wait_for": {"type": "turn_complete"}}]
    model = {"responses": [shell_call("c1", *command), {"text": "never"}]}
    (tmp_path / "log.txt").write_text("")
    path = kill_when(tmp_path, ops, model, str(fifo), "never")
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert {"call_id": "c1"} in [line["payload"] for line in lines if line["type"] == "intent"]
    history, warnings = await resumed_history(path, tmp_path)
    assert outputs(history, "c1") == [INTERRUPTED_OUTPUT]
    assert any("c1" in w and "interrupted" in w for w in warnings)
    # It ran at most the once it was asked to run, and never again on resume.
    assert (tmp_path / "log.txt").read_text() == "ran\n"


async def test_approved_for_session_holds_after_a_crash(tmp_path: Path) -> None:
    ops = [
        turn("t1", "make it"),
        {"wait_for": {"type": "exec_approval_request"}},
        {
            "id": "a1",
            "op": {"type": "exec_approval", "id": "c1", "decision": "approved_for_session"},
        },
        {"wait_for": {"type": "turn_complete"}},
        turn("t2", "again"),
        {"wait_for": {"type": "turn_complete", "count": 2}},
    ]
    model = {
        "responses": [
            shell_call("c1", "touch", "made"),
            {"text": "made it"},
            {"text": "waiting", "delay_ms": 60_000},
        ]
    }
    path = kill_when(tmp_path, ops, model, "turn_complete", "untrusted")
    assert (tmp_path / "made").exists()
    (tmp_path / "made").unlink()
    config = relay.Config(tools={"shell": True}, cwd=str(tmp_path), approval_policy="untrusted")
    model2 = relay.testing.ScriptedModel(
        {"responses": [shell_call("c2", "touch", "made"), {"text": "again"}]}
    )
    async with (
        relay.resume_session(path, config, model=model2) as session,
        testing.recording(session) as recorder,
    ):
        await session.submit(relay.UserTurn(items=[relay.Text("once more")]))
        await recorder.wait_for(testing.turn_ended)
        assert recorder.of_type(relay.ExecApprovalRequest) == []
    assert (tmp_path / "made").exists()
