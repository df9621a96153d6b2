"""``relay resume`` continues the session it names, with the model it was recorded with, as a
real subprocess; ``session_configured`` says which session runs, on what."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pipes import LineReader

ONE_TURN = json.dumps({"op": {"type": "user_turn", "items": [{"type": "text", "text": "hi"}]}})


def relay(
    *args: str, home: Path, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    # No API key comes from the machine's environment: each test says which it has.
    environment = {name: value for name, value in os.environ.items() if name != "OPENAI_API_KEY"}
    environment.update({"RELAY_HOME": str(home), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "relay", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def configured(stdout: str) -> dict[str, Any]:
    first = events(stdout)[0]
    assert (first["id"], first["msg"]["type"]) == ("session", "session_configured")
    msg: dict[str, Any] = first["msg"]
    return msg


def rollouts(home: Path) -> list[Path]:
    return sorted((home / "sessions").glob("**/rollout-*.jsonl"))


def write_rollout(path: Path, provider: str, model: str) -> str:
    meta = {
        "id": "s-recorded",
        "created": "2026-01-02T03:04:05+00:00",
        "cwd": str(path.parent),
        "model": model,
        "model_provider": provider,
        "relay_version": "0.1.0",
    }
    line = {"timestamp": "2026-01-02T03:04:05.000Z", "type": "session_meta", "payload": meta}
    text = json.dumps(line) + "\n"
    path.write_text(text)
    return text


@pytest.fixture
def mock_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A ``relay mock-server`` process answering two turns; its base URL and request log."""
    script = tmp_path / "server.model.json"
    script.write_text(json.dumps({"responses": ["first answer", "second answer"]}))
    log = tmp_path / "requests.jsonl"
    server = subprocess.Popen(
        [sys.executable, "-m", "relay", "mock-server", "--script", str(script), "--log", str(log)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base_url = LineReader(server.stdout, timeout=30).readline().strip()
        yield base_url, log
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.slow  # processes of its own
def test_resume_goes_on_with_the_provider_and_model_the_rollout_recorded(
    tmp_path: Path, mock_server: tuple[str, Path]
) -> None:
    base_url, log = mock_server
    home = tmp_path / "home"
    home.mkdir()
    # The provider table lives in the default configuration; nothing on the command line of
    # the resume names it.
    (home / "config.toml").write_text(
        f'[model_providers.mock]\nname = "mock"\nbase_url = {json.dumps(base_url)}\n'
    )
    first = relay(
        "run", "-", "-c", "model_provider=mock", "-c", "model=mock-model", home=home,
        stdin=ONE_TURN,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    (path,) = rollouts(home)
    resumed = relay("resume", str(path), "-", home=home, stdin=ONE_TURN)
    assert resumed.returncode == 0, resumed.stderr
    header = configured(resumed.stdout)
    assert (header["model_provider"], header["model"], header["resumed"]) == (
        "mock",
        "mock-model",
        True,
    )
    completes = [e["msg"] for e in events(resumed.stdout) if e["msg"]["type"] == "turn_complete"]
    assert [c["last_agent_message"] for c in completes] == ["second answer"]
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["body"]["model"] for r in requests] == ["mock-model", "mock-model"]


@pytest.mark.parametrize(
    ("provider", "named"),
    [
        ("mine", "model_provider 'mine'"),  # a provider table no longer in the configuration
        ("openai", "OPENAI_API_KEY"),  # a built-in provider whose key is not set
    ],
)
def test_a_recorded_provider_that_cannot_be_built_is_exit_2_naming_it(
    tmp_path: Path, provider: str, named: str
) -> None:
    path = tmp_path / "rollout.jsonl"
    before = write_rollout(path, provider, "gpt-recorded")
    result = relay("resume", str(path), "-", home=tmp_path / "home", stdin=ONE_TURN)
    assert result.returncode == 2
    assert result.stdout == ""
    (message,) = result.stderr.splitlines()
    assert message.startswith(
        f"relay: the session was recorded with model_provider {provider!r}, which cannot be "
        "used now: "
    )
    assert named in message
    assert path.read_text() == before  # nothing ran


def test_the_command_line_overrides_the_recorded_provider_and_model(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    write_rollout(path, "openai", "gpt-recorded")
    script = tmp_path / "model.json"
    script.write_text(json.dumps({"responses": ["scripted on purpose"]}))
    result = relay(
        "resume", str(path), "-", "--model-script", str(script), "-c", "model=chosen",
        home=tmp_path / "home", stdin=ONE_TURN,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    header = configured(result.stdout)
    assert (header["model_provider"], header["model"]) == ("scripted", "chosen")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    contexts = [line["payload"]["model"] for line in lines if line["type"] == "turn_context"]
    assert contexts == ["chosen"]


def test_resume_keeps_the_recorded_model_under_a_config_that_sets_other_keys(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rollout.jsonl"
    write_rollout(path, "scripted", "gpt-recorded")
    config = tmp_path / "other.toml"
    config.write_text("project_doc = 'NOTES.md'\n")
    result = relay(
        "resume", str(path), "-", "--config", str(config), home=tmp_path / "home",
        stdin=ONE_TURN,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert configured(result.stdout)["model"] == "gpt-recorded"


def test_resume_last_resumes_the_newest_rollout(tmp_path: Path) -> None:
    home = tmp_path / "home"
    older = relay("run", "-", home=home, stdin=ONE_TURN)
    newer = relay("run", "-", home=home, stdin=ONE_TURN)
    assert older.returncode == newer.returncode == 0
    newest = configured(newer.stdout)
    assert configured(older.stdout)["session_id"] != newest["session_id"]
    os.utime(newest["rollout_path"], (2_000_000_000, 2_000_000_000))
    result = relay("resume", "--last", "-", home=home, stdin=ONE_TURN)
    assert result.returncode == 0, result.stderr
    header = configured(result.stdout)
    assert (header["session_id"], header["rollout_path"], header["resumed"]) == (
        newest["session_id"],
        newest["rollout_path"],
        True,
    )
    assert len(rollouts(home)) == 2


def test_resume_last_looks_under_the_rollout_dir_and_says_when_there_is_none(
    tmp_path: Path,
) -> None:
    empty = relay("resume", "--last", "-", home=tmp_path / "home", stdin=ONE_TURN)
    assert empty.returncode == 2
    assert empty.stderr == f"relay: resume --last: no rollout file under {tmp_path}/home/sessions\n"
    elsewhere = tmp_path / "elsewhere"
    run = relay("run", "-", "--rollout-dir", str(elsewhere), home=tmp_path / "home", stdin=ONE_TURN)
    assert run.returncode == 0, run.stderr
    result = relay(
        "resume", "--last", "-", "--rollout-dir", str(elsewhere), home=tmp_path / "home",
        stdin=ONE_TURN,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert configured(result.stdout)["rollout_path"] == configured(run.stdout)["rollout_path"]


def test_ids_never_repeat_across_a_run_and_two_resumes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    script = tmp_path / "model.json"
    script.write_text(
        json.dumps(
            {
                "responses": [
                    {"function_call": {"name": "list_dir", "arguments": {"path": "."}}},
                    "done",
                ]
                * 3
            }
        )
    )
    turns = "\n".join([ONE_TURN, json.dumps({"wait_for": {"type": "turn_complete"}})] * 2)
    runs = [relay("run", "-", "--model-script", str(script), home=home, stdin=turns)]
    (path,) = rollouts(home)
    for _ in range(2):
        runs.append(
            relay("resume", str(path), "-", "--model-script", str(script), home=home, stdin=turns)
        )
    turn_ids: list[str] = []
    item_ids: list[str] = []
    for run in runs:
        assert run.returncode == 0, run.stderr
        run_events = events(run.stdout)
        turn_ids += [e["msg"]["turn_id"] for e in run_events if e["msg"]["type"] == "turn_started"]
        # Tool calls carry the model's call ids, and the scripted model names its messages
        # (``resp-N-msg-0``) afresh in each process: the ids relay makes are the others.
        item_ids += [
            e["msg"]["item"]["id"]
            for e in run_events
            if e["msg"]["type"] == "item_started"
            and e["msg"]["item"]["type"] != "tool_call"
            and not e["msg"]["item"]["id"].startswith("resp-")
        ]
    assert len(turn_ids) == 6 and len(set(turn_ids)) == 6, turn_ids
    assert item_ids == [f"user-{n}" for n in range(1, 7)]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    recorded = [
        line["payload"]["turn_id"]
        for line in lines
        if line["type"] == "event_msg" and line["payload"]["type"] == "turn_started"
    ]
    assert recorded == turn_ids
