"""The ``relay`` command line, run as a real subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from relay import __version__ as relay_version

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def relay(
    *args: str, stdin: str | None = None, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "relay", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=60,
        check=False,
    )


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_hello_example_runs_offline(tmp_path: Path) -> None:
    result = relay(
        "run",
        str(EXAMPLES / "hello.jsonl"),
        "--model-script",
        str(EXAMPLES / "hello.model.json"),
        "--rollout-dir",
        str(tmp_path / "sessions"),
        cwd=EXAMPLES,
    )
    assert result.returncode == 0, result.stderr
    out = events(result.stdout)
    assert [e["seq"] for e in out] == list(range(1, len(out) + 1))
    kinds = [e["msg"]["type"] for e in out]
    assert kinds.count("turn_started") == 2 and kinds.count("turn_complete") == 2
    assert kinds[-1] == "shutdown_complete"
    tool = [
        e["msg"]["item"]
        for e in out
        if e["msg"]["type"] == "item_completed" and e["msg"]["item"]["type"] == "tool_call"
    ]
    assert tool[0]["name"] == "list_dir" and "hello.jsonl" in tool[0]["output"]
    rollouts = list((tmp_path / "sessions").rglob("rollout-*.jsonl"))
    assert len(rollouts) == 1
    assert rollouts[0].stat().st_mode & 0o777 == 0o600


def test_script_from_stdin_and_json_output(tmp_path: Path) -> None:
    script = '{"op": {"type": "user_input", "items": [{"type": "text", "text": "ping"}]}}\n'
    result = relay("run", "-", "-c", "rollout.enabled=false", stdin=script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = events(result.stdout)
    complete = [e for e in out if e["msg"]["type"] == "turn_complete"]
    assert complete[0]["id"] == "sub-1"
    assert complete[0]["msg"]["last_agent_message"] == "echo: ping"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["-c", "bogus_key=1"], "unknown config key 'bogus_key'"),
        (["-c", "features.warp=true"], "unknown config key 'features.warp'"),
        (["-c", "model_provider=openai", "-c", "model=gpt-5"], "OPENAI_API_KEY"),
        (["-c", "model_provider=nowhere"], "unknown model_provider 'nowhere'"),
        (["--config", "/nonexistent/config.toml"], "cannot read config file"),
        (["--model-script", "/nonexistent/model.json"], "cannot read model script"),
    ],
)
def test_bad_configuration_exits_2_before_running(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text('{"op": {"type": "user_input", "items": [{"type": "text", "text": "x"}]}}\n')
    result = relay("run", str(script), *args, cwd=tmp_path, env={"OPENAI_API_KEY": ""})
    assert result.returncode == 2
    assert needle in result.stderr
    assert result.stdout == ""
    assert not (Path(os.environ["RELAY_HOME"]) / "sessions").exists()


def test_unreadable_script_exits_2(tmp_path: Path) -> None:
    result = relay("run", str(tmp_path / "missing.jsonl"), cwd=tmp_path)
    assert result.returncode == 2
    assert "cannot read op script" in result.stderr and "missing.jsonl" in result.stderr
    assert result.stdout == ""


def test_malformed_wait_for_exits_2(tmp_path: Path) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text('{"wait_for": {"count": 2}}\n')
    result = relay("run", str(script), cwd=tmp_path)
    assert result.returncode == 2
    assert "line 1" in result.stderr


def test_unsatisfiable_wait_for_fails_instead_of_hanging(tmp_path: Path) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text(
        '{"op": {"type": "user_input", "items": [{"type": "text", "text": "x"}]}}\n'
        '{"wait_for": {"type": "turn_complete", "count": 2}}\n'
    )
    result = relay("run", str(script), "-c", "rollout.enabled=false", cwd=tmp_path)
    assert result.returncode == 1
    assert "s.jsonl line 2" in result.stderr and "can no longer be met" in result.stderr


def test_version_and_usage() -> None:
    version = relay("--version")
    assert version.returncode == 0 and version.stdout.startswith("relay ")
    usage = relay("run", "--no-such-flag")
    assert usage.returncode == 2 and "relay:" in usage.stderr


def test_pretty_output_reads_as_a_transcript(tmp_path: Path) -> None:
    result = relay(
        "run",
        str(EXAMPLES / "interrupt.jsonl"),
        "--model-script",
        str(EXAMPLES / "interrupt.model.json"),
        "--pretty",
        "-c",
        "rollout.enabled=false",
        cwd=EXAMPLES,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = re.fullmatch(
        r"● session [0-9a-f-]{36} · scripted via scripted \(window unknown\) · "
        rf"cwd {re.escape(str(EXAMPLES))} · no rollout · relay {re.escape(relay_version)}",
        lines[0],
    )
    assert header is not None, lines[0]
    assert lines[1] == "▶ turn nap"
    assert "✗ turn nap aborted (interrupted)" in result.stdout
    assert lines[-1] == "■ session shut down"


#: What a hostile model, tool or server can try on a terminal: set the window title, clear the
#: screen, write the clipboard (OSC 52), a one-byte CSI, a bidirectional override.
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b]52;c;ZWNobyBoaQ==\x07\x9b31m\u202eevil"


def test_show_and_pretty_render_control_characters_visibly(tmp_path: Path) -> None:
    model = {
        "responses": [
            {"text": f"model says {ESCAPES}"},
            {
                "function_call": {
                    "name": "shell",
                    "arguments": {"argv": ["printf", "tool says \\033[2J\\033]0;t\\007"]},
                    "call_id": "c1",
                }
            },
            {"text": "done"},
            {"http_error": {"status": 400, "message": f"server says {ESCAPES}"}},
        ]
    }
    (tmp_path / "model.json").write_text(json.dumps(model))
    ops = []
    for count, text in enumerate(["one", "two", "three"], start=1):
        ops.append({"op": {"type": "user_turn", "items": [{"type": "text", "text": text}]}})
        ops.append({"wait_for": {"type": "turn_complete", "count": count}})
    (tmp_path / "ops.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    common = ["--model-script", "model.json", "--rollout-dir", "sessions", "-c", "tools.shell=true"]
    pretty = relay("run", "ops.jsonl", "--pretty", *common, cwd=tmp_path)
    assert pretty.returncode == 1, pretty.stderr  # the third turn failed
    (rollout,) = (tmp_path / "sessions").rglob("rollout-*.jsonl")
    show = relay("show", str(rollout))
    assert show.returncode == 0, show.stderr
    for output in (pretty.stdout, show.stdout):
        assert [
            c for c in output if c not in "\n" and (ord(c) < 32 or 0x7F <= ord(c) <= 0x9F)
        ] == []
        assert "\u202e" not in output
        assert "model says \\x1b]0;owned\\x07\\x1b[2J" in output
        assert "\\x9b31m\\u202eevil" in output
        assert "tool says \\x1b[2J\\x1b]0;t\\x07" in output
        assert "server says \\x1b]0;owned\\x07" in output
