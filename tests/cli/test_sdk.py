"""Codex's TypeScript SDK (``@openai/codex-sdk`` from npm) drives ``relay exec`` in the Codex
binary's place, against ``relay mock-server`` over real sockets; and ``examples/sdk`` runs.

The SDK is the one ``examples/sdk`` pins (``npm ci --omit=optional`` there installs it). Without
node, npm or the package these tests are skipped, unless ``RELAY_SDK_REQUIRED`` is set (as in CI):
then they fail. With ``RELAY_CODEX_BIN`` naming the Codex 0.169 binary, the same scenarios run
on it too, and check what both engines do alike (docs/codex-compat.md lists what differs).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.pipes import LineReader

pytestmark = pytest.mark.slow  # node, relay and a model server per test

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "examples" / "sdk"
MODULE = SDK / "node_modules" / "@openai" / "codex-sdk" / "dist" / "index.js"
DRIVER = Path(__file__).with_name("sdk_driver.mjs")
RELAY = Path(sys.executable).with_name("relay")
TIMEOUT = 120


def _missing() -> str | None:
    for program in ("node", "npm"):
        if shutil.which(program) is None:
            return f"{program} is not on PATH"
    if not MODULE.exists():
        return "@openai/codex-sdk is not installed: run `npm ci --omit=optional` in examples/sdk"
    return None


@pytest.fixture(scope="module")
def node() -> str:
    """The node executable, or a skip (a failure when ``RELAY_SDK_REQUIRED`` is set)."""
    reason = _missing()
    if reason is not None:
        if os.environ.get("RELAY_SDK_REQUIRED"):
            pytest.fail(f"RELAY_SDK_REQUIRED is set but {reason}")
        pytest.skip(f"{reason}; set RELAY_SDK_REQUIRED=1 to make its absence a failure")
    found = shutil.which("node")
    assert found is not None
    return found


ENGINES = ["relay", "codex"]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """The executable in Codex's place: relay, or the Codex binary ``RELAY_CODEX_BIN`` names."""
    if request.param == "relay":
        return "relay"
    if not os.environ.get("RELAY_CODEX_BIN"):
        pytest.skip("RELAY_CODEX_BIN does not name the Codex 0.169 binary to compare with")
    return "codex"


@contextmanager
def serve(tmp_path: Path, responses: list[Any]) -> Iterator[tuple[str, Path]]:
    """A ``relay mock-server`` playing ``responses``; its base URL and request log."""
    script = tmp_path / "server.model.json"
    script.write_text(json.dumps({"responses": responses}))
    log = tmp_path / "requests.jsonl"
    server = subprocess.Popen(
        [sys.executable, "-m", "relay", "mock-server", "--script", str(script), "--log", str(log)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        yield LineReader(server.stdout, timeout=30).readline().strip(), log
    finally:
        server.terminate()
        server.wait(timeout=30)


def drive(
    node: str,
    engine: str,
    scenario: str,
    base_url: str,
    tmp_path: Path,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run one scenario of the driver; what the SDK returned."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "RELAY_SDK_MODULE": MODULE.as_uri(),
        "RELAY_SDK_ENGINE": str(RELAY) if engine == "relay" else os.environ["RELAY_CODEX_BIN"],
        "RELAY_SDK_BASE_URL": base_url,
        "RELAY_SDK_CWD": str(work),
        "RELAY_HOME": str(tmp_path / "relay-home"),
        "CODEX_HOME": str(tmp_path / "codex-home"),
        **(extra or {}),
    }
    (tmp_path / "codex-home").mkdir(exist_ok=True)
    result = subprocess.run(
        [node, str(DRIVER), scenario],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def requests(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line)["body"] for line in log.read_text().splitlines()]


def texts(body: dict[str, Any]) -> list[str]:
    """The texts of a request's input, in order."""
    return [
        part["text"]
        for item in body["input"]
        if item.get("type") == "message"
        for part in item["content"]
        if "text" in part
    ]


def without_warnings(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Codex reports that it has no metadata for the test's model as an error item.
    return [item for item in items if item["type"] != "error"]


def session_ids(tmp_path: Path) -> list[str]:
    rollouts = sorted((tmp_path / "relay-home" / "sessions").glob("**/rollout-*.jsonl"))
    return [json.loads(path.read_text().splitlines()[0])["payload"]["id"] for path in rollouts]


def usage(inp: int, cached: int, out: int, reasoning: int = 0) -> dict[str, int]:
    return {
        "input_tokens": inp,
        "cached_input_tokens": cached,
        "cache_write_input_tokens": 0,
        "output_tokens": out,
        "reasoning_output_tokens": reasoning,
    }


def reply(text: str, inp: int, cached: int, out: int, reasoning: int = 0) -> dict[str, Any]:
    return {
        "text": text,
        "usage": {
            "input_tokens": inp,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": inp + out,
        },
    }


def test_run_returns_the_answer_its_items_and_usage(node: str, engine: str, tmp_path: Path) -> None:
    with serve(tmp_path, [reply("Hello from the server.", 120, 100, 7, 3)]) as (url, log):
        turn = drive(node, engine, "run", url, tmp_path)
    assert turn["finalResponse"] == "Hello from the server."
    (message,) = without_warnings(turn["items"])
    assert (message["type"], message["text"]) == ("agent_message", "Hello from the server.")
    assert turn["usage"] == usage(120, 100, 7, 3)
    (body,) = requests(log)
    assert (body["model"], body["reasoning"]["effort"]) == ("gpt-sdk", "low")
    assert texts(body)[-1] == "Say hello."
    if engine == "relay":
        assert turn["items"] == [
            {"id": "item_0", "type": "agent_message", "text": "Hello from the server."}
        ]
        assert session_ids(tmp_path) == [turn["id"]]


def test_run_streamed_yields_the_events_as_they_come(
    node: str, engine: str, tmp_path: Path
) -> None:
    call = (
        {"name": "shell", "arguments": {"argv": ["sh", "-c", "echo hi"]}}
        if engine == "relay"
        else {"name": "exec_command", "arguments": {"cmd": "echo hi"}}
    )
    responses = [
        {
            "function_call": {**call, "call_id": "c1"},
            "usage": {"input_tokens": 60, "output_tokens": 2, "total_tokens": 62},
        },
        reply("It printed hi.", 90, 60, 5),
    ]
    config = json.dumps({"tools": {"shell": True}}) if engine == "relay" else "{}"
    with serve(tmp_path, responses) as (url, _):
        streamed = drive(node, engine, "streamed", url, tmp_path, {"RELAY_SDK_CONFIG": config})
    events = [
        event
        for event in streamed["events"]
        if event["type"] != "error" and event.get("item", {}).get("type") != "error"
    ]
    assert [(e["type"], e.get("item", {}).get("type")) for e in events] == [
        ("thread.started", None),
        ("turn.started", None),
        ("item.started", "command_execution"),
        ("item.completed", "command_execution"),
        ("item.completed", "agent_message"),
        ("turn.completed", None),
    ]
    started, completed = events[2]["item"], events[3]["item"]
    assert started["id"] == completed["id"]
    assert (started["status"], started["exit_code"]) == ("in_progress", None)
    assert (completed["aggregated_output"], completed["exit_code"], completed["status"]) == (
        "hi\n",
        0,
        "completed",
    )
    assert events[0]["thread_id"] == streamed["id"]
    if engine == "relay":
        assert started["command"] == "sh -c 'echo hi'"
        assert events[-1]["usage"] == usage(150, 60, 7)


@pytest.mark.parametrize("scenario", ["continued", "resumed"])
def test_a_thread_goes_on_in_its_next_turn(
    node: str, engine: str, scenario: str, tmp_path: Path
) -> None:
    responses = [reply("First answer.", 40, 0, 3), reply("Second answer.", 70, 40, 4)]
    with serve(tmp_path, responses) as (url, log):
        first, second = drive(node, engine, scenario, url, tmp_path)["turns"]
    assert (first["finalResponse"], second["finalResponse"]) == ("First answer.", "Second answer.")
    assert first["id"] == second["id"]
    later = texts(requests(log)[-1])
    assert later.index("First question.") < later.index("First answer.")
    assert later.index("First answer.") < later.index("Second question.")
    # The thread's usage so far, as Codex reports it.
    assert second["usage"] == usage(110, 40, 7)
    if engine == "relay":
        assert session_ids(tmp_path) == [first["id"]]


CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
    "additionalProperties": False,
}


def test_an_output_schema_asks_the_server_for_json_of_it(
    node: str, engine: str, tmp_path: Path
) -> None:
    oslo = {"city": "Oslo", "population": 709000}
    schema = {"RELAY_SDK_SCHEMA": json.dumps(CITY)}
    with serve(tmp_path, [{"json": oslo}]) as (url, log):
        turn = drive(node, engine, "schema", url, tmp_path, schema)
    assert json.loads(turn["finalResponse"]) == oslo
    (body,) = requests(log)
    assert body["text"]["format"] == {
        "type": "json_schema",
        "name": "codex_output_schema",
        "schema": CITY,
        "strict": True,
    }


def test_an_answer_that_does_not_fit_the_schema_rejects_naming_what(
    node: str, tmp_path: Path
) -> None:
    schema = {"RELAY_SDK_SCHEMA": json.dumps(CITY)}
    with serve(tmp_path, [{"json": {"city": "Oslo"}}]) as (url, _):
        failed = drive(node, "relay", "schema", url, tmp_path, schema)
    assert failed["error"] == (
        "the answer does not fit the output schema: 'population' is a required property"
    )


def test_a_failed_turn_rejects_with_the_servers_message(
    node: str, engine: str, tmp_path: Path
) -> None:
    refused = {"http_error": {"status": 400, "message": "refused by policy"}}
    with serve(tmp_path, [refused]) as (url, _):
        failed = drive(node, engine, "failed", url, tmp_path)
    assert failed["error"] is not None and "refused by policy" in failed["error"]
    if engine == "relay":
        assert failed["error"] == "refused by policy"


def test_the_sdk_example_runs_as_its_readme_says(node: str, tmp_path: Path) -> None:
    readme = (SDK / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```sh\n(.*?)\n```", readme, re.S)
    assert block.splitlines() == ["cd examples/sdk", "npm ci --omit=optional", "npm start"]
    assert "cd examples/sdk && npm ci --omit=optional" in (ROOT / ".ci" / "run").read_text()
    npm = shutil.which("npm")
    assert npm is not None
    result = subprocess.run(
        [npm, "start", "--silent"],
        cwd=SDK,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PATH": f"{RELAY.parent}{os.pathsep}{os.environ['PATH']}",
            "RELAY_HOME": str(tmp_path),
        },
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout.splitlines()
    thread = out[0].removeprefix("thread ")
    assert out[1:4] == [
        "  mcp_tool_call: relay/list_dir completed",
        "  agent_message: This folder holds a TypeScript program, its package files and two "
        "model scripts.",
        "answer: This folder holds a TypeScript program, its package files and two model scripts.",
    ]
    assert out[5:] == [
        "thread.started",
        "turn.started",
        "item.started mcp_tool_call: relay/read_file in_progress",
        "item.completed mcp_tool_call: relay/read_file completed",
        "item.completed agent_message: main.ts is the program: it drives relay through Codex's "
        "SDK.",
        "turn.completed",
        f"resumed thread {thread}",
    ]
