"""Every example runs, offline, and does what its comment says."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
OP_SCRIPTS = sorted(p for p in EXAMPLES.glob("*.jsonl"))
PROGRAMS = sorted(p for p in EXAMPLES.glob("[0-9][0-9]_*.py") if "_test_" not in p.name)
TEST_EXAMPLES = sorted(EXAMPLES.glob("[0-9][0-9]_test_*.py"))


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        cwd=EXAMPLES,
        timeout=120,
        env={**os.environ},
        check=False,
    )


@pytest.mark.parametrize("script", OP_SCRIPTS, ids=lambda p: p.name)
def test_op_script_example_runs(script: Path) -> None:
    model = script.with_suffix(".model.json")
    args = [sys.executable, "-m", "relay", "run", str(script), "-c", "rollout.enabled=false"]
    if model.exists():
        args += ["--model-script", str(model)]
    config = script.with_suffix(".config.toml")
    if config.exists():
        args += ["--config", str(config)]
    result = run(args)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line)["msg"] for line in result.stdout.splitlines()]
    assert events[-1]["type"] == "shutdown_complete"
    assert not [e for e in events if e["type"] == "error"], "examples run without errors"
    if "compact" in script.name:
        assert "context_compacted" in {e["type"] for e in events}
    started = sum(e["type"] == "turn_started" for e in events)
    ended = sum(e["type"] in {"turn_complete", "turn_aborted"} for e in events)
    assert started == ended >= 1


def test_every_op_script_example_is_covered() -> None:
    assert {p.name for p in OP_SCRIPTS} >= {
        "auto_compact.jsonl",
        "compact_remote_v1.jsonl",
        "compact_remote_v2.jsonl",
        "compact_token_budget.jsonl",
        "hello.jsonl",
        "replace.jsonl",
        "interrupt.jsonl",
        "compact.jsonl",
        "approvals.jsonl",
    }


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_embedding_example_runs(program: Path) -> None:
    result = run([sys.executable, str(program)])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "an example shows what it did"


@pytest.mark.slow  # a pytest run of its own
@pytest.mark.parametrize("example", TEST_EXAMPLES, ids=lambda p: p.name)
def test_testing_example_passes_under_pytest(example: Path) -> None:
    result = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(example)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed" in result.stdout


def relay_run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``relay run ARGS`` in ``cwd``."""
    command = [sys.executable, "-m", "relay", "run", *args]
    return subprocess.run(
        command, capture_output=True, text=True, cwd=cwd, timeout=120, check=False
    )


TASK_EXAMPLES = sorted((EXAMPLES / "tasks").glob("*.py"))


def _documented_command(program: Path) -> list[str]:
    """The ``relay run ...`` command a task example's docstring gives."""
    text = program.read_text(encoding="utf-8")
    start = text.index("    relay run ")
    command = text[start : text.index('\n"""', start)]
    return re.sub(r"\\+\n", " ", command).split()


@pytest.mark.parametrize("program", TASK_EXAMPLES, ids=lambda p: p.name)
def test_task_example_runs_as_its_docstring_says(program: Path) -> None:
    args = _documented_command(program)
    assert args[:2] == ["relay", "run"]
    result = relay_run([*args[2:], "-c", "rollout.enabled=false"], cwd=EXAMPLES.parent)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    op_type = program.stem
    first = json.loads((EXAMPLES / "tasks" / f"{op_type}.jsonl").read_text().splitlines()[1])
    assert first["op"]["type"] == op_type
    own = [e["msg"] for e in events if e["id"] == first["id"]]
    assert own[0]["type"] == "turn_started"
    assert own[-1]["type"] == "turn_complete"
    assert own[-1]["last_agent_message"], "the task answers"
    assert not [e for e in events if e["msg"]["type"] in {"error", "warning"}]
    tools = [
        m["item"] for m in own if m["type"] == "item_completed" and m["item"]["type"] == "tool_call"
    ]
    assert tools and all(t["output"] for t in tools), "the task uses a session tool"


def test_a_hook_in_a_configuration_file_resolves_beside_it_from_any_directory(
    tmp_path: Path,
) -> None:
    script = EXAMPLES / "compact_token_budget.jsonl"
    config = EXAMPLES / "compact_token_budget.config.toml"
    result = relay_run(
        [str(script), "--config", str(config), "-c", "rollout.enabled=false"], tmp_path
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line)["msg"] for line in result.stdout.splitlines()]
    hooks = [e for e in events if e["type"] == "hook_completed"]
    assert hooks and {h["outcome"] for h in hooks} == {"continue"}
    assert not [e for e in events if e["type"] == "warning"]


def test_a_hook_that_cannot_start_is_a_warning_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        (EXAMPLES / "compact_token_budget.config.toml")
        .read_text(encoding="utf-8")
        .replace("./hook_pre_compact.py", "./no_such_hook.py")
        .replace('"python3"', '"./no-such-program"'),
        encoding="utf-8",
    )
    script = EXAMPLES / "compact_token_budget.jsonl"
    result = relay_run(
        [str(script), "--config", str(config), "-c", "rollout.enabled=false"], tmp_path
    )
    events = [json.loads(line)["msg"] for line in result.stdout.splitlines()]
    warnings = [e["message"] for e in events if e["type"] == "warning"]
    assert len(warnings) == 1
    assert "no-such-program" in warnings[0]
    assert "could not start" in warnings[0]
    assert "context_compacted" in {e["type"] for e in events}


def test_the_approvals_program_runs_as_its_docstring_says() -> None:
    program = EXAMPLES / "approvals.py"
    assert "    python examples/approvals.py\n" in program.read_text(encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "examples/approvals.py"],
        capture_output=True,
        text=True,
        cwd=EXAMPLES.parent,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    why = "(approval policy untrusted: the command is not read-only)"
    # ls is read-only: it runs unasked; the callback approves the sum and denies the write.
    assert lines[0].startswith("call-ls: ")
    assert lines[1] == f"call-sum asks: sha256sum approvals.model.json {why}"
    assert re.fullmatch(r"call-sum: [0-9a-f]{64}  approvals\.model\.json", lines[2])
    assert lines[3] == f"call-touch asks: touch summed.txt {why}"
    assert (
        lines[4] == "call-touch: denied: the user did not approve this call, and nothing of it ran"
    )
    assert lines[-1] == "summed.txt written: False"
    assert not (EXAMPLES / "summed.txt").exists()


def test_the_approvals_script_runs_as_its_comment_says() -> None:
    script = EXAMPLES / "approvals.jsonl"
    (command,) = [
        line.strip("# ").split()
        for line in script.read_text(encoding="utf-8").splitlines()
        if line.startswith("#   relay run ")
    ]
    result = relay_run(command[2:], cwd=EXAMPLES.parent)
    assert result.returncode == 0, result.stderr
    out = [json.loads(line)["msg"] for line in result.stdout.splitlines()]
    asked = [m["call_id"] for m in out if m["type"] == "exec_approval_request"]
    assert asked == ["call-sum", "call-touch"]  # ls is read-only: never asked
    done = {
        m["item"]["id"]: m["item"]["output"]
        for m in out
        if m["type"] == "item_completed" and m["item"]["type"] == "tool_call"
    }
    assert done["call-sum"].endswith("approvals.model.json\n\n[exit code 0]")
    assert done["call-touch"].startswith("denied")
    assert not [m for m in out if m["type"] in {"error", "warning"}]
    assert not (EXAMPLES / "summed.txt").exists()
