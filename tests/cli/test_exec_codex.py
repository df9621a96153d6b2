"""``relay exec`` as Codex's ``exec``: ``--experimental-json``, Codex's flags and keys,
``resume THREAD_ID`` and ``CODEX_API_KEY``, run as real subprocesses (the model scripted, or
served by ``relay mock-server`` over real sockets)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pipes import LineReader

TIMEOUT = 60


def relay(
    *args: str, cwd: Path, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    # No key comes from the machine's environment: each test says which it has.
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("OPENAI_API_KEY", "CODEX_API_KEY")
    }
    return subprocess.run(
        [sys.executable, "-m", "relay", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**environment, **(env or {})},
        timeout=TIMEOUT,
        check=False,
    )


def lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def rollouts(root: Path) -> list[Path]:
    return sorted(root.glob("**/rollout-*.jsonl"))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A ``relay mock-server`` answering every request with an echo; its base URL and log."""
    script = tmp_path / "server.model.json"
    script.write_text("{}")
    log = tmp_path / "requests.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "relay", "mock-server", "--script", str(script), "--log", str(log)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield LineReader(process.stdout, timeout=30).readline().strip(), log
    finally:
        process.terminate()
        process.wait(timeout=30)


def requests(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line)["body"] for line in log.read_text().splitlines()]


def test_experimental_json_writes_codexs_events_and_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "model.json").write_text(
        json.dumps(
            {
                "responses": [
                    {
                        "function_call": {
                            "name": "shell",
                            "arguments": {"argv": ["sh", "-c", "echo hi"]},
                            "call_id": "c1",
                        },
                        "usage": {"input_tokens": 50, "output_tokens": 5, "total_tokens": 55},
                    },
                    {
                        "text": "It said hi.",
                        "usage": {
                            "input_tokens": 80,
                            "input_tokens_details": {"cached_tokens": 50},
                            "output_tokens": 4,
                            "total_tokens": 84,
                        },
                    },
                ]
            }
        )
    )
    result = relay(
        "exec", "--experimental-json", "--model-script", "model.json", "-c", "tools.shell=true",
        "--rollout-dir", "r", cwd=tmp_path, stdin="Run it.\n",
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (0, "")
    (rollout,) = rollouts(tmp_path / "r")
    thread_id = lines(result.stdout)[0]["thread_id"]
    assert rollout.name.endswith(f"-{thread_id}.jsonl")
    command = {"id": "item_0", "type": "command_execution", "command": "sh -c 'echo hi'"}
    answer = {"id": "item_1", "type": "agent_message", "text": "It said hi."}
    assert lines(result.stdout) == [
        {"type": "thread.started", "thread_id": thread_id},
        {"type": "turn.started"},
        {
            "type": "item.started",
            "item": {**command, "aggregated_output": "", "exit_code": None,
                     "status": "in_progress"},
        },
        {
            "type": "item.completed",
            "item": {**command, "aggregated_output": "hi\n", "exit_code": 0, "status": "completed"},
        },
        {"type": "item.completed", "item": answer},
        {
            "type": "turn.completed",
            "usage": {
                "input_tokens": 130,
                "cached_input_tokens": 50,
                "cache_write_input_tokens": 0,
                "output_tokens": 9,
                "reasoning_output_tokens": 0,
            },
        },
    ]  # fmt: skip
    assert result.stdout.startswith('{"type":"thread.started","thread_id":')


def test_a_failed_turn_is_exit_1_with_the_servers_message(tmp_path: Path) -> None:
    (tmp_path / "model.json").write_text(
        json.dumps({"responses": [{"http_error": {"status": 400, "message": "refused by policy"}}]})
    )
    result = relay(
        "exec", "--experimental-json", "--model-script", "model.json", "--rollout-dir", "r",
        cwd=tmp_path, stdin="hi",
    )  # fmt: skip
    assert result.returncode == 1
    assert lines(result.stdout)[1:] == [
        {"type": "turn.started"},
        {"type": "error", "message": "refused by policy"},
        {"type": "turn.failed", "error": {"message": "refused by policy"}},
    ]
    assert result.stderr == "relay: refused by policy\n"


@pytest.mark.slow  # two runs
def test_resume_continues_the_session_of_the_thread_id(tmp_path: Path) -> None:
    first = relay("exec", "--experimental-json", "--rollout-dir", "r", cwd=tmp_path, stdin="one")
    thread_id = lines(first.stdout)[0]["thread_id"]
    again = relay(
        "exec", "--experimental-json", "--rollout-dir", "r", "resume", thread_id,
        cwd=tmp_path, stdin="two",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert lines(again.stdout)[0] == {"type": "thread.started", "thread_id": thread_id}
    assert lines(again.stdout)[2]["item"]["text"] == "echo: two"
    (rollout,) = rollouts(tmp_path / "r")
    records = [json.loads(line) for line in rollout.read_text().splitlines()]
    assert [
        record["payload"]["message"]
        for record in records
        if record["type"] == "event_msg" and record["payload"]["type"] == "user_message"
    ] == ["one", "two"]


def test_resume_of_an_unknown_thread_is_exit_1_naming_it(tmp_path: Path) -> None:
    result = relay(
        "exec", "--experimental-json", "--rollout-dir", "r", "resume", "no-such-thread",
        cwd=tmp_path, stdin="two",
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == "relay: exec resume: no session 'no-such-thread' under r\n"


def test_codex_flags_and_keys_set_the_session_and_unknown_keys_are_warnings(
    tmp_path: Path,
) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "relay.toml").write_text("model_context_window = 5000\n")
    result = relay(
        "exec", "--events", "--config", "relay.toml", "--model", "gpt-x", "--cd", "work",
        "--skip-git-repo-check", "--config", 'web_search="live"', "--config",
        "features.work_state=true", "--thread-source", "sdk", "--rollout-dir", "r",
        cwd=tmp_path, stdin="hi",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    header = lines(result.stdout)[0]["msg"]
    assert (header["model"], header["cwd"], header["model_context_window"]) == (
        "gpt-x",
        str(tmp_path / "work"),
        5000,
    )
    assert result.stderr.splitlines()[:2] == [
        "relay: warning: config key 'web_search' has no counterpart in relay; ignored",
        "relay: warning: --thread-source sdk: relay has no such feature; ignored",
    ]


def test_a_malformed_codex_key_is_exit_2_and_relays_own_c_stays_strict(tmp_path: Path) -> None:
    bad = relay("exec", "--config", "openai_base_url=3", "hi", cwd=tmp_path)
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == "relay: --config openai_base_url: expected a string, got 3\n"
    # -c takes Codex's keys too (a warning), but a key neither relay's nor Codex's is refused.
    strict = relay("exec", "-c", "web_searhc=1", "hi", cwd=tmp_path)
    assert strict.returncode == 2
    assert "unknown config key 'web_searhc'" in strict.stderr


@pytest.mark.slow  # a server process of its own
def test_openai_base_url_and_codex_api_key_reach_the_server_with_the_turns_options(
    tmp_path: Path, server: tuple[str, Path]
) -> None:
    base_url, log = server
    image = tmp_path / "dot.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n")
    result = relay(
        "exec", "--experimental-json", "--config", f"openai_base_url={json.dumps(base_url)}",
        "--model", "gpt-test", "--config", 'model_reasoning_effort="high"', "--image",
        str(image), "--rollout-dir", "r",
        cwd=tmp_path, stdin="Look.", env={"CODEX_API_KEY": "sk-codex"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert lines(result.stdout)[-2]["item"]["text"] == "echo: Look."
    (body,) = requests(log)
    assert (body["model"], body["reasoning"]) == ("gpt-test", {"effort": "high"})
    (user,) = [item for item in body["input"] if item.get("role") == "user"][-1:]
    png = base64.b64encode(image.read_bytes()).decode()
    assert user["content"] == [
        {"type": "input_image", "image_url": f"data:image/png;base64,{png}"},
        {"type": "input_text", "text": "Look."},
    ]
    # Without a key, the openai provider says which variable it reads.
    keyless = relay(
        "exec", "--experimental-json", "--config", f"openai_base_url={json.dumps(base_url)}",
        "--model", "gpt-test", cwd=tmp_path, stdin="Look.",
    )  # fmt: skip
    assert keyless.returncode == 2
    assert "OPENAI_API_KEY" in keyless.stderr


def test_no_command_reads_the_codex_key(tmp_path: Path) -> None:
    echo = {"argv": ["sh", "-c", "echo ${CODEX_API_KEY:-none} ${OPENAI_API_KEY:-none}"]}
    (tmp_path / "model.json").write_text(
        json.dumps({"responses": [{"function_call": {"name": "shell", "arguments": echo}}, "ok"]})
    )
    result = relay(
        "exec", "--experimental-json", "--model-script", "model.json", "-c", "tools.shell=true",
        "--rollout-dir", "r", cwd=tmp_path, stdin="hi", env={"CODEX_API_KEY": "sk-codex"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert lines(result.stdout)[3]["item"]["aggregated_output"] == "none none\n"


CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


@pytest.mark.slow  # two runs each
@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"type": "objet"}', "is not a JSON Schema: 'objet' is not valid under any of the given "),
        ("[1, 2]", "is not a JSON Schema: a schema is a JSON object, not an array"),
        ("{", "is not JSON: "),
    ],
)
def test_an_output_schema_that_is_not_one_is_exit_2_before_the_session_opens(
    tmp_path: Path, text: str, why: str
) -> None:
    (tmp_path / "schema.json").write_text(text)
    result = relay(
        "exec", "--experimental-json", "--output-schema", "schema.json", "--rollout-dir", "r",
        cwd=tmp_path, stdin="hi",
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (2, "")
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"relay: --output-schema: schema.json {why}")
    assert not (tmp_path / "r").exists()
    missing = relay("exec", "--output-schema", "none.json", "hi", cwd=tmp_path)
    assert (missing.returncode, missing.stderr) == (
        2,
        "relay: --output-schema: cannot read none.json: No such file or directory\n",
    )


@pytest.mark.slow  # two runs
def test_an_output_schema_is_the_turns_and_an_answer_that_does_not_fit_fails_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "schema.json").write_text(json.dumps(CITY))
    (tmp_path / "model.json").write_text(json.dumps({"responses": [{"json": {"city": "Oslo"}}]}))
    args = ("exec", "--experimental-json", "--output-schema", "schema.json", "--model-script",
            "model.json", "--rollout-dir", "r")  # fmt: skip
    fits = relay(*args, cwd=tmp_path, stdin="Which city?")
    assert fits.returncode == 0, fits.stderr
    answer = lines(fits.stdout)[2]["item"]
    assert (answer["type"], json.loads(answer["text"])) == ("agent_message", {"city": "Oslo"})
    (tmp_path / "model.json").write_text(json.dumps({"responses": [{"json": {"town": "Oslo"}}]}))
    misfit = relay(*args, cwd=tmp_path, stdin="Which city?")
    assert misfit.returncode == 1
    message = "the answer does not fit the output schema: 'city' is a required property"
    assert lines(misfit.stdout)[-1] == {"type": "turn.failed", "error": {"message": message}}
