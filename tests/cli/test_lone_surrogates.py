"""Text that UTF-8 cannot carry, at the command line's edges (docs/decisions.md, "Text that
UTF-8 cannot carry"): a model's lone surrogate is carried as U+FFFD and the session goes on;
an op script that holds one is refused before anything runs. Real subprocesses, the model
served by ``relay mock-server`` over real sockets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pipes import LineReader

TIMEOUT = 60


def relay(*args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("OPENAI_API_KEY", "CODEX_API_KEY")
    }
    return subprocess.run(
        [sys.executable, "-m", "relay", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        timeout=TIMEOUT,
        check=False,
    )


def lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


@pytest.fixture
def model(tmp_path: Path) -> Iterator[list[str]]:
    """``relay mock-server`` whose first reply holds a lone surrogate (its JSON stream escapes
    it, ``\\ud800``): the ``relay exec`` options that make it the model."""
    script = tmp_path / "server.model.json"
    script.write_text(json.dumps({"responses": [{"text": "bad \ud800 answer"}, "Fine."]}))
    process = subprocess.Popen(
        [sys.executable, "-m", "relay", "mock-server", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = LineReader(process.stdout, timeout=30).readline().strip()
        yield [
            "-c", "model_provider=mock",
            "-c", "model=mock-model",
            "-c", "model_providers.mock.name=mock",
            "-c", f"model_providers.mock.base_url={json.dumps(base_url)}",
        ]  # fmt: skip
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.slow  # three processes
def test_a_lone_surrogate_in_a_model_reply_is_carried_and_the_session_goes_on(
    tmp_path: Path, model: list[str]
) -> None:
    first = relay(
        "exec", "--experimental-json", *model, "--rollout-dir", "r", cwd=tmp_path, stdin="one"
    )
    assert (first.returncode, first.stderr) == (0, "")
    events = lines(first.stdout)
    answer = {"id": "item_0", "type": "agent_message", "text": "bad \ufffd answer"}
    assert events[1:] == [
        {"type": "turn.started"},
        {"type": "item.completed", "item": answer},
        {"type": "turn.completed", "usage": events[-1]["usage"]},
    ]
    # The second turn of the same session: resumed from the rollout the first one wrote.
    thread_id = events[0]["thread_id"]
    again = relay(
        "exec", "--experimental-json", *model, "--rollout-dir", "r", "resume", thread_id,
        cwd=tmp_path, stdin="two",
    )  # fmt: skip
    assert (again.returncode, again.stderr) == (0, "")
    assert lines(again.stdout)[0] == {"type": "thread.started", "thread_id": thread_id}
    assert lines(again.stdout)[2]["item"]["text"] == "Fine."
    (rollout,) = (tmp_path / "r").glob("**/rollout-*.jsonl")
    assert "bad \ufffd answer" in rollout.read_text(encoding="utf-8")


def test_an_op_script_that_holds_a_lone_surrogate_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    turn = {"op": {"type": "user_turn", "items": [{"type": "text", "text": "one"}]}}
    bad = {"op": {"type": "user_turn", "items": [{"type": "text", "text": "two \ud800"}]}}
    wait = {"wait_for": {"type": "turn_complete"}}
    script = tmp_path / "s.jsonl"
    script.write_text("".join(json.dumps(line) + "\n" for line in (turn, wait, bad, wait)))
    assert "\\ud800" in script.read_text()  # escaped, as JSON carries it
    result = relay("run", "s.jsonl", "--rollout-dir", "r", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""  # no session opened: not even the first turn ran
    assert not (tmp_path / "r").exists()
    assert result.stderr.startswith("relay: s.jsonl line 3: invalid op: ")
    assert "lone surrogate" in result.stderr and "$.items[0]" in result.stderr
