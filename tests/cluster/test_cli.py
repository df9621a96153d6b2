"""``relay cluster run``, as a real subprocess connected to the tests' Ray instance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_cluster_run_writes_each_sessions_events_and_sums_up(
    ray_address: str, tmp_path: Path
) -> None:
    stuck = tmp_path / "stuck.jsonl"
    stuck.write_text(
        '{"id": "t", "op": {"type": "user_turn", "items": [{"type": "text", "text": "hi"}]}}\n'
        '{"wait_for": {"type": "context_compacted"}}\n',
        encoding="utf-8",
    )
    out = tmp_path / "events"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "relay",
            "cluster",
            "run",
            str(EXAMPLES / "compact.jsonl"),
            str(EXAMPLES / "compact.jsonl"),
            str(stuck),
            "--address",
            ray_address,
            "--actors",
            "2",
            "--out",
            str(out),
            "--rollout-dir",
            str(tmp_path / "sessions"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ},
        timeout=120,
        check=False,
    )
    # The script whose wait can never be met is the one failure.
    assert result.returncode == 1, result.stderr
    assert "0003-stuck.jsonl: stuck.jsonl line 2: wait_for 'context_compacted'" in result.stderr
    head, row = result.stdout.splitlines()[-2:]
    assert head.split() == ["sessions", "turns", "failures", "failovers", "time"]
    assert row.split()[:4] == ["3", "7", "1", "0"], result.stderr
    files = sorted(path.name for path in out.iterdir())
    assert files == ["0001-compact.jsonl", "0002-compact.jsonl", "0003-stuck.jsonl"]
    for name in files:
        events = [json.loads(line) for line in (out / name).read_text().splitlines()]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        # A failed script's file ends where the script stopped, as `relay run`'s output does.
        last = "turn_complete" if name.endswith("stuck.jsonl") else "shutdown_complete"
        assert events[-1]["msg"]["type"] == last
    compact = [json.loads(line) for line in (out / files[0]).read_text().splitlines()]
    kinds = [e["msg"]["type"] for e in compact]
    assert kinds.count("turn_complete") == 3 and "context_compacted" in kinds
    assert len(list((tmp_path / "sessions").rglob("rollout-*.jsonl"))) == 3
