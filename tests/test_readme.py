"""The README's two commands exist, CI runs the test one verbatim, and its first examples run."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_says_where_its_first_command_writes_before_it_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    before = readme[: readme.index("```sh")]
    assert "~/.relay/sessions" in before and "rollout.enabled=false" in before


def test_ci_runs_the_readme_test_command() -> None:
    blocks = re.findall(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    run_command, test_command = blocks[0], blocks[1]
    assert "relay run examples/hello.jsonl" in run_command
    assert "pytest" in test_command
    assert test_command in (ROOT / ".ci" / "run").read_text()


def test_the_first_examples_of_the_readme_answer(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    program = re.findall(r"```python\n(.*?)```", readme, re.S)[0]
    assert "session.ask(" in program
    ran = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "RELAY_HOME": str(tmp_path)},  # its rollout goes there
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    commands = re.findall(r"```sh\n(.*?)\n```", readme, re.S)
    exec_command = commands[2]
    assert exec_command.startswith(".venv/bin/relay exec ")
    args = shlex.split(exec_command)[1:]
    shell = subprocess.run(
        [sys.executable, "-m", "relay", *args, "-c", "rollout.enabled=false"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout == ran.stdout != ""


def test_the_op_scripts_wait_for_example_waits_for_its_own_turn(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Op scripts", 1)[1].split("\n## ", 1)[0]
    assert "from the start of the session" in section and '"count"' in section
    (script,) = [b for b in re.findall(r"```jsonl\n(.*?)```", section, re.S) if "turn_id" in b]
    (tmp_path / "ops.jsonl").write_text(script, encoding="utf-8")
    # The second turn streams slowly: the interrupt must reach it, not come before it started.
    model = '{"responses": [{"text": "hi"}, {"text": "a long story", "delay_ms": 60000}]}'
    (tmp_path / "model.json").write_text(model, encoding="utf-8")
    ran = subprocess.run(
        [sys.executable, "-m", "relay", "run", "ops.jsonl", "--model-script", "model.json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "RELAY_HOME": str(tmp_path)},
        timeout=60,
        check=False,
    )
    ended = [
        (event["id"], event["msg"]["type"], event["msg"].get("reason"))
        for event in map(json.loads, ran.stdout.splitlines())
        if event["msg"]["type"] in {"turn_complete", "turn_aborted"}
    ]
    assert ended == [("t1", "turn_complete", None), ("t2", "turn_aborted", "interrupted")]
