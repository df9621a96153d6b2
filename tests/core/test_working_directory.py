"""The working directory: resolved once, when the session opens, and recorded absolute."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._base._config import load_config


def test_a_relative_cwd_in_a_config_file_is_relative_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "conf").mkdir()
    file = tmp_path / "conf" / "relay.toml"
    file.write_text('cwd = "../project"\n')
    monkeypatch.chdir(tmp_path / "conf")
    assert load_config(file).cwd == str(tmp_path / "conf" / ".." / "project")
    # An absolute one, or one given with -c, is left as it is until the session opens.
    assert load_config(file, ["cwd=/srv/x"]).cwd == "/srv/x"
    assert load_config(file, ["cwd=project"]).cwd == "project"


async def test_a_relative_cwd_is_recorded_absolute(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path)
    config = relay.Config(cwd="project/.", rollout=relay.RolloutConfig(enabled=False))
    async with testing.open_test_session({"responses": [{"text": "ok"}]}, config=config) as t:
        await t.turns("hi")
    absolute = str(tmp_path / "project")
    (configured,) = t.recorder.of_type(relay.SessionConfigured)
    assert configured.cwd == absolute
    assert f"<cwd>{absolute}</cwd>" in testing.user_texts(t.model.requests[0])[0]


@pytest.mark.parametrize(
    ("cwd", "problem"),
    [("missing", "does not exist"), ("a-file", "is not a directory")],
)
async def test_a_cwd_that_is_not_a_directory_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cwd: str, problem: str
) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.chdir(tmp_path)
    config = relay.Config(cwd=cwd, rollout=relay.RolloutConfig(enabled=False))
    with pytest.raises(relay.ConfigError, match=f"working directory {tmp_path / cwd} {problem}"):
        async with relay.open_session(config, model=testing.ScriptedModel(None)):
            pass


async def test_a_session_opened_with_a_relative_cwd_resumes_there_from_elsewhere(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a" / "project").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    sessions = tmp_path / "sessions"
    monkeypatch.chdir(tmp_path / "a")
    config = relay.Config(cwd="project", rollout=relay.RolloutConfig(dir=str(sessions)))
    model = testing.ScriptedModel({"responses": [{"text": "one"}, {"text": "two"}]})
    async with relay.open_session(config, model=model) as session:
        await session.ask("first")
    (rollout,) = sessions.rglob("*.jsonl")
    recorded = [json.loads(line) for line in rollout.read_text().splitlines()]
    cwds = {
        line["payload"]["cwd"]
        for line in recorded
        if line["type"] in {"session_meta", "turn_context", "world_state"}
    }
    assert cwds == {str(tmp_path / "a" / "project")}
    monkeypatch.chdir(tmp_path / "b")
    async with relay.resume_session(rollout, model=model) as resumed:
        answer = await resumed.ask("second")
    assert answer.message == "two"
    assert resumed.snapshot().defaults.cwd == str(tmp_path / "a" / "project")


def test_relay_run_with_a_missing_cwd_exits_2_naming_it(tmp_path: Path) -> None:
    script = tmp_path / "ops.jsonl"
    script.write_text('{"op": {"type": "user_input", "items": [{"type": "text", "text": "x"}]}}\n')
    result = subprocess.run(
        [sys.executable, "-m", "relay", "run", str(script), "-c", "cwd=nowhere"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert f"working directory {tmp_path / 'nowhere'} does not exist" in result.stderr
    assert result.stdout == ""


async def test_a_relative_cwd_in_an_op_is_relative_to_the_session_s(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    (tmp_path / "project" / "sub").mkdir(parents=True)
    config = relay.Config(cwd=str(tmp_path / "project"), rollout=relay.RolloutConfig(enabled=False))
    script = {"responses": [{"text": "one"}, {"text": "two"}]}
    async with testing.open_test_session(script, config=config) as t:
        await t.submit(relay.OverrideTurnContext(cwd="sub/."))
        await t.turns("first")
        assert t.session.snapshot().defaults.cwd == str(tmp_path / "project" / "sub")
        await t.turns("second", cwd="..")
        assert t.session.snapshot().defaults.cwd == str(tmp_path / "project")
