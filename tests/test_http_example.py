"""The HTTP example: `relay mock-server` and `relay run` as two processes on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipes import LineReader

HTTP = Path(__file__).resolve().parent.parent / "examples" / "http"


@pytest.mark.slow  # processes of its own
def test_session_against_the_mock_server_over_real_http(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "relay",
            "mock-server",
            "--script",
            "mock.model.json",
            "--port",
            "0",
            "--log",
            str(log),
        ],
        cwd=HTTP,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base_url = LineReader(server.stdout, timeout=30).readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "relay",
                "run",
                "session.jsonl",
                "--config",
                "relay.toml",
                "-c",
                f"model_providers.mock.base_url={json.dumps(base_url)}",
            ],
            cwd=HTTP,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line)["msg"] for line in result.stdout.splitlines()]
    completes = [e["last_agent_message"] for e in events if e["type"] == "turn_complete"]
    assert completes == ["Two files: a model script and an op script.", "Any time."]
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["path"] for r in requests] == ["/v1/responses"] * 3
    assert all(r["body"]["model"] == "mock-model" for r in requests)
    assert requests[1]["body"]["input"][-1]["type"] == "function_call_output"
