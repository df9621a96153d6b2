"""``relay cluster run``, as a real subprocess connected to the tests' Ray instance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.otlp import otlp_receiver, received_spans

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


ONE_TURN = (
    '{"op": {"type": "user_turn", "items": [{"type": "text", "text": "hi"}]}}\n'
    '{"wait_for": {"type": "turn_complete"}}\n'
)


def cluster_run(
    ray_address: str, tmp_path: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``relay cluster run`` of two one-turn scripts on hosts of its own, in a fresh process
    without the OTEL variables of the test's own."""
    script = tmp_path / "one.jsonl"
    script.write_text(ONE_TURN, encoding="utf-8")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "relay",
            "cluster",
            "run",
            str(script),
            str(script),
            "--address",
            ray_address,
            "--namespace",
            "traced",
            "--out",
            str(tmp_path / "events"),
            "--rollout-dir",
            str(tmp_path / "sessions"),
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**environ, **(env or {})},
        timeout=120,
        check=False,
    )


def test_cluster_run_otel_writes_a_span_for_the_run_and_one_per_session(
    ray_address: str, tmp_path: Path
) -> None:
    result = cluster_run(ray_address, tmp_path, "--otel")
    assert result.returncode == 0, result.stderr
    spans = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    # The sessions' own spans are the hosts', which print nothing here.
    assert sorted(span["name"] for span in spans) == [
        "relay.cluster.run",
        "relay.cluster.session",
        "relay.cluster.session",
    ]
    (run,) = [span for span in spans if span["name"] == "relay.cluster.run"]
    sessions = [span for span in spans if span["name"] == "relay.cluster.session"]
    assert run["attributes"]["relay.cluster.scripts"] == 2
    assert run["attributes"]["relay.cluster.turns"] == 2
    ids = set()
    for span in sessions:
        assert span["parent_id"] == run["context"]["span_id"]
        assert span["attributes"]["relay.cluster.script"] == "one.jsonl"
        assert span["attributes"]["relay.cluster.outcome"] == "completed"
        assert span["attributes"]["relay.cluster.host"].startswith("relay-")
        ids.add(span["attributes"]["gen_ai.conversation.id"])
    events = [
        json.loads(line)
        for path in (tmp_path / "events").iterdir()
        for line in path.read_text().splitlines()
    ]
    assert ids == {
        e["msg"]["session_id"] for e in events if e["msg"]["type"] == "session_configured"
    }


def test_cluster_run_otel_over_otlp_has_the_hosts_send_the_sessions_spans_in_its_trace(
    ray_address: str, tmp_path: Path
) -> None:
    with otlp_receiver() as (endpoint, bodies):
        result = cluster_run(
            ray_address,
            tmp_path,
            "--otel",
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "relay-cluster"},
        )
    assert result.returncode == 0, result.stderr
    assert "{" not in result.stderr  # nothing to the console
    spans = received_spans(bodies)
    assert sorted(span["name"] for span in spans) == sorted(
        ["relay.cluster.run"]
        + ["relay.cluster.session", "relay.session", "invoke_agent relay", "chat scripted"] * 2
    )
    assert {span["service"] for span in spans} == {"relay-cluster"}
    (run,) = [span for span in spans if span["name"] == "relay.cluster.run"]
    by_id = {span["span"]: span for span in spans}
    assert {span["trace"] for span in spans} == {run["trace"]}
    for span in spans:
        if span["name"] == "relay.session":
            # Made on a host, within the script's span of the caller.
            parent = by_id[span["parent"]]
            assert parent["name"] == "relay.cluster.session"
            assert (
                parent["attributes"]["gen_ai.conversation.id"]
                == (span["attributes"]["gen_ai.conversation.id"])
            )
