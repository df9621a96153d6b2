"""Codex's start-up flags on relay's commands (``-c`` with Codex's keys, ``--enable``,
``--disable``), ``exec --json`` as Codex's stream, and the checks of a configuration before a
session opens: no model for a server, rules that govern no tool (issue 45)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from relay._base._config import Config, ProviderConfig
from relay._base._errors import ConfigError
from relay._cli._checks import idle_rules_warning, missing_model
from relay._cli._codex_flags import CodexKeys, codex_keys
from tests.appserver.client import AppServer
from tests.cli.test_exec_codex import relay
from tests.pipes import LineReader

# ------------------------------------------------------------------ sorting the flags


def test_c_sorts_relays_keys_codexs_keys_and_features() -> None:
    keys = codex_keys(
        [
            'web_search="live"',
            "model_context_window=9000",
            "features.guardian_approval=true",
            "features.work_state=false",
            "sandbox_workspace_write.network_access=true",
        ],
        strict=True,
        enable=["guardian_approval", "async_compaction"],
        disable=["token_budget", "undo"],
    )
    assert keys == CodexKeys(
        overrides=(
            "model_context_window=9000",
            "features.work_state=false",
            "sandbox_workspace_write.network_access=true",
            "features.async_compaction=true",
            "features.token_budget=false",
        ),
        ignored=("web_search",),
        ignored_features=("guardian_approval", "guardian_approval", "undo"),
    )
    assert keys.warnings() == [
        "config key 'web_search' has no counterpart in relay; ignored",
        "feature 'guardian_approval' has no counterpart in relay; ignored",
        "feature 'guardian_approval' has no counterpart in relay; ignored",
        "feature 'undo' has no counterpart in relay; ignored",
    ]


def test_a_name_neither_relays_nor_codexs_stays_an_error_under_c() -> None:
    # Kept as an override, so that loading the configuration refuses it with the closest key.
    assert codex_keys(["modle=x", "features.warp=true"], strict=True).overrides == (
        "modle=x",
        "features.warp=true",
    )
    # exec's --config takes whatever the SDK's config object holds: a warning.
    assert codex_keys(["modle=x"]).ignored == ("modle",)
    with pytest.raises(ConfigError, match="--enable warp: unknown feature 'warp'"):
        codex_keys([], strict=True, enable=["warp"])
    with pytest.raises(ConfigError, match=r"did you mean 'async_compaction'\?"):
        codex_keys([], strict=True, disable=["async_compactoin"])


def test_the_effort_is_a_warning_where_no_turn_of_the_command_takes_it() -> None:
    keys = codex_keys(['model_reasoning_effort="high"'], strict=True)
    assert keys.effort == "high" and keys.warnings() == []
    assert keys.warnings(effort_applies=False) == [
        "config key 'model_reasoning_effort' sets relay exec's turn only; ignored "
        "(give each turn its effort)"
    ]


# ------------------------------------------------------------------ the checks


SERVER = ProviderConfig(name="local", base_url="http://127.0.0.1:9/v1")


def test_a_provider_over_http_with_no_model_is_refused_saying_how_to_set_one() -> None:
    config = Config(model_provider="local", model_providers={"local": SERVER})
    problem = missing_model(config)
    assert problem is not None
    assert "no model is set for provider 'local' (http://127.0.0.1:9/v1)" in problem
    assert "-m/--model MODEL" in problem and 'model = "MODEL"' in problem
    assert missing_model(attrs.evolve(config, model="gpt-5")) is None
    assert missing_model(Config()) is None  # the embedded scripted model needs no name


@pytest.mark.parametrize(
    ("config", "chosen"),
    [
        (Config(sandbox_mode="workspace-write"), ()),
        (Config(approval_policy="never"), ()),
        (Config(), ("sandbox_mode",)),  # set to relay's default, but set
    ],
)
def test_rules_set_with_no_tool_they_govern_are_a_warning_saying_how_to_turn_shell_on(
    config: Config, chosen: tuple[str, ...]
) -> None:
    warning = idle_rules_warning(config, chosen)
    assert warning is not None
    assert "-c tools.shell=true" in warning
    assert "new Codex({config: {tools: {shell: true}}})" in warning


@pytest.mark.parametrize(
    "config",
    [
        Config(),
        Config(sandbox_mode="workspace-write", tools={"shell": True}),
        Config(approval_policy="never", tools={"apply_patch": True}),
    ],
)
def test_no_warning_when_no_rule_is_set_or_a_governed_tool_is_on(config: Config) -> None:
    assert idle_rules_warning(config) is None


# ------------------------------------------------------------------ the commands


def test_app_server_starts_with_codexs_flags_and_warns_of_each(tmp_path: Path) -> None:
    server = AppServer(
        "--enable", "guardian_approval", "-c", 'web_search="live"', "--disable",
        "token_budget", cwd=tmp_path,
    )  # fmt: skip
    try:
        answer = server.initialize()
        assert answer["userAgent"].startswith("relay/")
        assert server.close_input() == 0
        assert server.stderr_text().splitlines() == [
            "relay: warning: config key 'web_search' has no counterpart in relay; ignored",
            "relay: warning: feature 'guardian_approval' has no counterpart in relay; ignored",
        ]
    finally:
        server.kill()


def test_run_and_exec_take_the_flags_and_refuse_a_feature_nobody_has(tmp_path: Path) -> None:
    script = '{"op": {"type": "user_input", "items": [{"type": "text", "text": "x"}]}}\n'
    ran = relay(
        "run", "-", "--enable", "fast_mode", "-c", "hide_agent_reasoning=true",
        "-c", "rollout.enabled=false", cwd=tmp_path, stdin=script,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.splitlines() == [
        "relay: warning: config key 'hide_agent_reasoning' has no counterpart in relay; ignored",
        "relay: warning: feature 'fast_mode' has no counterpart in relay; ignored",
    ]
    refused = relay("exec", "--enable", "warp", "hi", cwd=tmp_path)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr.startswith("relay: --enable warp: unknown feature 'warp'")


def test_exec_json_is_codexs_stream_and_events_is_relays(tmp_path: Path) -> None:
    codex = relay("exec", "--json", "-c", "rollout.enabled=false", "hi", cwd=tmp_path)
    assert codex.returncode == 0, codex.stderr
    kinds = [json.loads(line)["type"] for line in codex.stdout.splitlines()]
    assert kinds == ["thread.started", "turn.started", "item.completed", "turn.completed"]
    own = relay("exec", "--events", "-c", "rollout.enabled=false", "hi", cwd=tmp_path)
    assert own.returncode == 0, own.stderr
    msgs = [json.loads(line)["msg"]["type"] for line in own.stdout.splitlines()]
    assert msgs[0] == "session_configured" and msgs[-1] == "shutdown_complete"


def test_exec_with_rules_and_no_shell_warns_how_to_turn_it_on(tmp_path: Path) -> None:
    # exec offers Codex's apply_patch by default, which the rules govern: off here.
    warned = relay(
        "exec", "-s", "workspace-write", "-c", "rollout.enabled=false",
        "-c", "tools.apply_patch=false", "hi", cwd=tmp_path,
    )  # fmt: skip
    assert warned.returncode == 0, warned.stderr
    (line,) = warned.stderr.splitlines()
    assert line.startswith("relay: warning: sandbox_mode 'workspace-write' is set, but no tool")
    assert "-c tools.shell=true" in line
    quiet = relay(
        "exec", "-s", "workspace-write", "-c", "tools.shell=true", "-c", "rollout.enabled=false",
        "hi", cwd=tmp_path,
    )  # fmt: skip
    assert (quiet.returncode, quiet.stderr) == (0, "")


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


@pytest.mark.slow  # a server process of its own
def test_a_base_url_with_no_model_fails_before_any_request(
    tmp_path: Path, server: tuple[str, Path]
) -> None:
    base_url, log = server
    url = f"openai_base_url={json.dumps(base_url)}"
    failed = relay("exec", "--json", "--config", url, cwd=tmp_path, stdin="hi")
    assert (failed.returncode, failed.stdout) == (2, "")
    assert failed.stderr.startswith(
        f"relay: no model is set for provider 'openai' ({base_url}): set one with -m/--model"
    )
    assert not log.exists() or log.read_text() == ""
    # relay run takes the key too, and is refused alike.
    ran = relay("run", "-", "-c", url, cwd=tmp_path, stdin="")
    assert ran.returncode == 2 and "no model is set" in ran.stderr
    sent = relay(
        "exec", "--json", "--config", url, "-m", "gpt-x", cwd=tmp_path, stdin="hi",
        env={"CODEX_API_KEY": "sk-test"},
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    bodies: list[dict[str, Any]] = [json.loads(x)["body"] for x in log.read_text().splitlines()]
    assert [body["model"] for body in bodies] == ["gpt-x"]
