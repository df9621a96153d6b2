"""Every example runs, offline, and does what its comment says."""

from __future__ import annotations

import json
import os
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
    }


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_embedding_example_runs(program: Path) -> None:
    result = run([sys.executable, str(program)])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "an example shows what it did"


@pytest.mark.parametrize("example", TEST_EXAMPLES, ids=lambda p: p.name)
def test_testing_example_passes_under_pytest(example: Path) -> None:
    result = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(example)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed" in result.stdout
