"""MCP servers of a ``relay run``: configured in a file (paths relative to it), listed by
``session_configured``, and never left behind when relay is stopped by a signal or killed."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from relay._base import _protocol as p
from relay._cli._pretty import session_header
from tests.cli.test_cli_lifecycle import (
    TIMEOUT,
    USER_TURN,
    Lines,
    processes,  # noqa: F401  (the fixture)
    spawn,
    write_json,
    write_jsonl,
)
from tests.escapees import alive

SERVER = Path(__file__).resolve().parent.parent / "mcp" / "mcp_server.py"


def wait_until(check: Callable[[], bool], what: str) -> None:
    """Wait until ``check()`` holds: what another process does, read from outside it."""
    deadline = time.monotonic() + TIMEOUT
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {TIMEOUT} s for {what}")
        time.sleep(0.02)


def server_setup(tmp_path: Path) -> tuple[Path, Path]:
    """A configuration file that starts the test server by paths relative to the file, and
    the server's log; the server is copied next to the file."""
    home = tmp_path / "project"
    (home / "servers").mkdir(parents=True)
    shutil.copy(SERVER, home / "servers" / "mcp_server.py")
    config = home / "relay.toml"
    config.write_text(
        "[rollout]\nenabled = false\n\n"
        "[mcp_servers.test]\n"
        f"command = {json.dumps(sys.executable)}\n"
        'args = ["./servers/mcp_server.py", "--log", "./server.log",'
        ' "--lock", "./server.log.lock"]\n'
        'cwd = "servers"\n',
        encoding="utf-8",
    )
    return config, home / "server.log"


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGKILL, -9)])
def test_no_server_outlives_relay(
    processes: list[subprocess.Popen[bytes]],  # noqa: F811
    tmp_path: Path,
    signum: int,
    status: int,
) -> None:
    config, log = server_setup(tmp_path)
    model = write_json(
        tmp_path / "model.json",
        {
            "responses": [
                {
                    "function_call": {
                        "name": "mcp__test__slow",
                        "arguments": {"seconds": 3600, "tag": "s1"},
                    }
                }
            ]
        },
    )
    script = write_jsonl(
        tmp_path / "s.jsonl",
        {"id": "t1", "op": USER_TURN},
        {"wait_for": {"type": "item_started", "match": {"item.type": "tool_call"}}},
        {"sleep_ms": 3_600_000},
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = spawn(
        processes,
        "run",
        str(script),
        "--config",
        str(config),
        "--model-script",
        str(model),
        "--json",
        cwd=elsewhere,
    )
    assert proc.stdout is not None
    out = Lines(proc.stdout)
    first = json.loads(out.until("session_configured"))
    assert first["msg"]["mcp_servers"] == {"test": 13}
    out.until('"type":"tool_call"')
    wait_until(lambda: log.exists() and "slow s1 started" in log.read_text(), "the call")
    # The server holds the lock of its log while it lives (its pid is its namespace's).
    assert alive(log)
    proc.send_signal(signum)
    assert proc.wait(timeout=TIMEOUT) == status
    # Killed, relay cannot stop its servers itself: their guard does, at once.
    wait_until(lambda: not alive(log), "the server to be gone")


def test_the_transcript_header_lists_the_servers() -> None:
    msg = p.SessionConfigured(
        "s-1", "m", "scripted", None, "/w", None, "1.0", mcp_servers={"docs": 4, "one": 1}
    )
    assert session_header(msg).endswith(" · relay 1.0 · MCP docs (4 tools) · MCP one (1 tool)")
