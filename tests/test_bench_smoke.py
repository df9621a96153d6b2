"""The benchmark suite runs end to end at tiny sizes and prints its table.

The suite itself (``python -m bench``) is not part of the test run; this only checks that it
still works. Groups whose optional dependencies are missing print a note instead of figures.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def test_quick_bench_prints_the_table(tmp_path: Path) -> None:
    markdown = tmp_path / "bench.md"
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--markdown", str(markdown)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("relay bench (quick): ")
    for group in (
        "== turn overhead",
        "== ask() without a reader",
        "== replacement latency",
        "== compaction bookkeeping",
        "== background compaction",
        "== token accounting",
        "== masking vs summary compaction",
        "== rollout",
        "== long sessions",
        "== scale",
        "== whole process",
        "== import time, relay run over HTTP",
        "== relay run, many scripted turns",
    ):
        assert group in out, f"{group!r} missing from:\n{out}"
    if shutil.which("bwrap"):
        assert "== sandbox" in out and "added by the sandbox, workspace-write" in out
    header = next(line for line in out.splitlines() if line.startswith("figure"))
    assert header.split() == ["figure", "median", "p10–p90", "n", "ratio", "target", "met"]
    assert "submit → turn_complete" in out
    assert "figures in" in out
    assert markdown.read_text(encoding="utf-8").startswith("Machine: ")


def test_a_group_runs_in_turn_against_another_commit(tmp_path: Path) -> None:
    markdown = tmp_path / "against.md"
    command = ["bench.against", "HEAD", "--quick", "--rounds", "2", "--markdown", str(markdown)]
    result = subprocess.run(
        [sys.executable, "-m", *command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("round")] == [
        "round 1: ref ...",
        "round 1: this ...",
        "round 2: this ...",
        "round 2: ref ...",
    ]
    header = result.stdout.splitlines()[0].split("  ")
    assert [cell.strip() for cell in header if cell.strip()][3:] == [
        "ratio",
        "range over the rounds",
    ]
    figures = [line.split("|")[1].strip() for line in markdown.read_text().splitlines()[2:]]
    assert "10 sessions: first-event latency, p99 of each run" in figures
    assert figures[-2:] == [
        "the whole bench process (scale): wall",
        "the whole bench process (scale): CPU",
    ]
