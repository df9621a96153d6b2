"""``relay run`` and ``relay resume`` as real processes against a real model server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import API_KEY_VARIABLE, RealServer

pytestmark = pytest.mark.real_server

#: Bound on one ``relay`` process: a few short turns and a compaction on a small model.
PROCESS_TIMEOUT_S = 300


def relay(server: RealServer, wire: str, *args: str, script: str, cwd: Path) -> list[Any]:
    """Run ``relay`` on ``server`` over ``wire``; its events, after checking it exited 0."""
    env = {**os.environ}
    if server.api_key:
        env[API_KEY_VARIABLE] = server.api_key
    result = subprocess.run(
        [sys.executable, "-m", "relay", *args, "-", *server.cli_overrides(wire)],
        input=script,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=PROCESS_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [json.loads(line)["msg"] for line in result.stdout.splitlines()]


def script(*lines: dict[str, Any]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


def turn(id: str, text: str) -> dict[str, Any]:
    return {"id": id, "op": {"type": "user_turn", "items": [{"type": "text", "text": text}]}}


def last_usage(events: list[Any], turn_id: str) -> dict[str, int]:
    """The usage of the last ``token_count`` before the end of ``turn_id``."""
    usage: dict[str, int] = {}
    current = None
    for event in events:
        if event["type"] == "turn_started":
            current = event["turn_id"]
        elif event["type"] == "token_count" and current == turn_id and event["info"]:
            usage = event["info"]["last_token_usage"]
    return usage


def test_run_then_resume_against_a_real_server_over_both_wires(
    real_server: RealServer, tmp_path: Path
) -> None:
    sessions = tmp_path / "sessions"
    first = relay(
        real_server,
        "responses",
        "run",
        "--rollout-dir",
        str(sessions),
        script=script(
            turn("t1", "What is the capital of France?"),
            {"wait_for": {"type": "turn_complete"}},
            {"id": "c1", "op": {"type": "compact"}},
            {"wait_for": {"type": "context_compacted"}},
        ),
        cwd=tmp_path,
    )
    kinds = [event["type"] for event in first]
    assert kinds.count("turn_complete") == 2
    assert "context_compacted" in kinds
    assert "error" not in kinds and "stream_error" not in kinds
    assert kinds[-1] == "shutdown_complete"
    (rollout,) = sessions.rglob("rollout-*.jsonl")

    # The same session, continued over the other wire.
    second = relay(
        real_server,
        "chat",
        "resume",
        str(rollout),
        script=script(turn("t2", "And of Italy?")),
        cwd=tmp_path,
    )
    kinds = [event["type"] for event in second]
    assert kinds.count("turn_complete") == 1
    assert "error" not in kinds and "stream_error" not in kinds
    answer = [e["last_agent_message"] for e in second if e["type"] == "turn_complete"]
    assert answer[0]
    # The resumed request carried the question of the first run and the summary.
    assert last_usage(second, "t2")["input_tokens"] > last_usage(first, "t1")["input_tokens"]
