"""Configuration loading, overrides, validation and providers (docs/config.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from relay._base._config import (
    BUILTIN_PROVIDERS,
    Config,
    Features,
    HookCommand,
    ProviderConfig,
    config_from_dict,
    load_config,
    parse_override,
    relay_home,
    resolve_api_key,
)
from relay._base._errors import ConfigError


def write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ loading


def test_defaults_without_any_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAY_HOME", str(tmp_path / "empty-home"))
    config = load_config()
    assert config == Config()
    assert config.model == "scripted"
    assert config.model_provider == "scripted"
    assert config.project_doc == "AGENTS.md"
    assert config.features == Features(token_budget=False, remote_compaction_v2=False)
    assert config.rollout.enabled is True
    assert config.model_auto_compact_token_limit is None


def test_load_a_full_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
model = "gpt-5"
model_provider = "local"
model_context_window = 200000
model_auto_compact_token_limit = 150000
compact_prompt = "Summarise."
developer_instructions = "Be brief."
project_doc = "CLAUDE.md"
cwd = "/work"

[features]
token_budget = true

[model_providers.local]
base_url = "http://127.0.0.1:8080/v1"
wire_api = "chat"
stream_max_retries = 1
http_headers = { "X-Team" = "relay" }

[[hooks.pre_compact]]
command = ["notify-send", "compacting"]
timeout_ms = 500

[tools]
shell = true
sleep = false

[rollout]
enabled = false
dir = "/var/relay"
""",
    )
    config = load_config(path)
    assert config.model == "gpt-5"
    assert config.model_context_window == 200_000
    assert config.model_auto_compact_token_limit == 150_000
    assert config.effective_compact_prompt() == "Summarise."
    assert config.developer_instructions == "Be brief."
    assert config.project_doc == "CLAUDE.md"
    assert config.cwd == "/work"
    assert config.features.token_budget is True
    assert config.features.remote_compaction_v2 is False
    assert config.hooks.pre_compact == (HookCommand(("notify-send", "compacting"), 500),)
    assert config.hooks.post_compact == ()
    assert config.tools == {"shell": True, "sleep": False}
    assert (config.rollout.enabled, config.rollout.dir) == (False, "/var/relay")
    provider = config.provider()
    assert provider == ProviderConfig(
        name="local",
        base_url="http://127.0.0.1:8080/v1",
        wire_api="chat",
        stream_max_retries=1,
        http_headers={"X-Team": "relay"},
    )
    assert provider.request_max_retries == 4
    assert provider.stream_idle_timeout_ms == 300_000


def test_hook_timeout_defaults_to_ten_seconds(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[[hooks.post_compact]]\ncommand = ["true"]\n'))
    assert config.hooks.post_compact == (HookCommand(("true",), 10_000),)


def test_relay_home_config_is_used_without_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAY_HOME", str(tmp_path))
    write(tmp_path, 'model = "from-home"\n')
    assert relay_home() == tmp_path
    assert load_config().model == "from-home"


def test_an_explicit_path_wins_over_relay_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAY_HOME", str(tmp_path))
    write(tmp_path, 'model = "from-home"\n')
    other = write(tmp_path, 'model = "explicit"\n', name="other.toml")
    assert load_config(other).model == "explicit"


def test_relay_home_defaults_to_dot_relay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RELAY_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert relay_home() == tmp_path / ".relay"
    (tmp_path / ".relay").mkdir()
    write(tmp_path / ".relay", 'model = "dot-relay"\n')
    assert load_config().model == "dot-relay"


def test_a_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match=r"nope\.toml"):
        load_config(missing)


def test_invalid_toml_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "model = \n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(path)


# ------------------------------------------------------------------ overrides


def test_override_values_are_parsed_as_toml(tmp_path: Path) -> None:
    path = write(tmp_path, 'model = "file"\nmodel_context_window = 1000\n')
    config = load_config(
        path,
        [
            "model_context_window=64000",
            "features.token_budget=true",
            'compact_prompt="quoted"',
            "tools={shell = true}",
        ],
    )
    assert config.model == "file"
    assert config.model_context_window == 64_000
    assert config.features.token_budget is True
    assert config.compact_prompt == "quoted"
    assert config.tools == {"shell": True}


def test_override_values_that_are_not_toml_are_strings() -> None:
    config = load_config(
        None,
        ["model=gpt-5-codex", "developer_instructions=a=b c", "cwd=/tmp/with space"],
    )
    assert config.model == "gpt-5-codex"
    assert config.developer_instructions == "a=b c"
    assert config.cwd == "/tmp/with space"


def test_later_overrides_win() -> None:
    config = load_config(None, ["model=one", "model=two"])
    assert config.model == "two"


def test_dotted_override_keys_create_tables() -> None:
    config = load_config(
        None,
        [
            "model_providers.lab.base_url=http://lab:9000/v1",
            "model_providers.lab.wire_api=chat",
            "model_provider=lab",
            "rollout.enabled=false",
        ],
    )
    assert config.provider() == ProviderConfig(
        name="lab", base_url="http://lab:9000/v1", wire_api="chat"
    )
    assert config.rollout.enabled is False


def test_dotted_override_merges_into_a_table_of_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[features]\ntoken_budget = true\n")
    config = load_config(path, ["features.remote_compaction_v2=true"])
    assert config.features == Features(token_budget=True, remote_compaction_v2=True)


def test_an_override_through_a_non_table_is_an_error() -> None:
    with pytest.raises(ConfigError, match="'model' is not a table"):
        load_config(None, ["model=x", "model.sub=1"])


@pytest.mark.parametrize("text", ["model", "=value", "  =1"])
def test_an_override_without_key_and_value_is_an_error(text: str) -> None:
    with pytest.raises(ConfigError, match="key=value"):
        parse_override(text)


def test_parse_override() -> None:
    assert parse_override("a.b.c=1") == (["a", "b", "c"], 1)
    assert parse_override("a=[1, 2]") == (["a"], [1, 2])
    assert parse_override("a=not toml") == (["a"], "not toml")
    assert parse_override("a=") == (["a"], "")


# ------------------------------------------------------------------ unknown keys


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("modle = 'typo'\n", "modle"),
        ("[features]\nturbo = true\n", "features.turbo"),
        (
            "[model_providers.local]\nbase_url = 'x'\napi_key = 'secret'\n",
            "model_providers.local.api_key",
        ),
        (
            "[[hooks.pre_compact]]\ncommand = ['a']\n"
            "[[hooks.pre_compact]]\ncommand = ['b']\nx = 1\n",
            "hooks.pre_compact[1].x",
        ),
        ("[[hooks.post_compact]]\ncommand = ['a']\ntimeout = 5\n", "hooks.post_compact[0].timeout"),
        ("[hooks]\nmid_compact = []\n", "hooks.mid_compact"),
        ("[rollout]\npath = '/x'\n", "rollout.path"),
    ],
    ids=["top", "features", "provider", "hook", "post-hook", "hooks", "rollout"],
)
def test_unknown_keys_are_errors_naming_the_key(tmp_path: Path, toml: str, key: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"unknown config key {key!r}")):
        load_config(write(tmp_path, toml))


def test_unknown_key_from_an_override_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"'features\.x'"):
        load_config(None, ["features.x=1"])
    with pytest.raises(ConfigError, match=r"'hooks\.pre_compact\[0\]\.x'"):
        load_config(None, ["hooks.pre_compact=[{command = ['a'], x = 1}]"])


# ------------------------------------------------------------------ wrong types


@pytest.mark.parametrize(
    ("toml", "where"),
    [
        ("model = 5", "model"),
        ("model_context_window = '128k'", "model_context_window"),
        ("model_context_window = true", "model_context_window"),
        ("model_context_window = 1.5", "model_context_window"),
        ("model_auto_compact_token_limit = [1]", "model_auto_compact_token_limit"),
        ("compact_prompt = 3", "compact_prompt"),
        ("features = 3", "features"),
        ("features.token_budget = 'yes'", "features.token_budget"),
        ("model_providers = 5", "model_providers"),
        ("model_providers.x = 5", "model_providers['x']"),
        ("model_providers.x.wire_api = 'grpc'", "model_providers['x'].wire_api"),
        ("model_providers.x.remote_compaction = 'v3'", "model_providers['x'].remote_compaction"),
        ("model_providers.x.stream_max_retries = '5'", "model_providers['x'].stream_max_retries"),
        ("model_providers.x.http_headers = { a = 1 }", "model_providers['x'].http_headers['a']"),
        ("hooks.pre_compact = [{ timeout_ms = 5 }]", "hooks.pre_compact[0].command"),
        (
            "hooks.pre_compact = [{ command = ['a'], timeout_ms = '5' }]",
            "hooks.pre_compact[0].timeout_ms",
        ),
        ("hooks.pre_compact = [{ command = [1] }]", "hooks.pre_compact[0].command"),
        ("tools = []", "tools"),
        ("tools.shell = 'on'", "tools['shell']"),
        ("rollout.dir = 5", "rollout.dir"),
    ],
)
def test_wrong_types_are_errors_naming_the_key(tmp_path: Path, toml: str, where: str) -> None:
    with pytest.raises(ConfigError, match="invalid config") as info:
        load_config(write(tmp_path, toml + "\n"))
    assert where in str(info.value)


@pytest.mark.parametrize(
    "toml",
    ["hooks.pre_compact = [{ command = 'notify-send done' }]", "hooks.pre_compact = {}"],
    ids=["string-command", "table-for-array"],
)
def test_a_string_or_table_where_an_array_is_expected_is_an_error(
    tmp_path: Path, toml: str
) -> None:
    with pytest.raises(ConfigError, match="invalid config"):
        load_config(write(tmp_path, toml + "\n"))


# ------------------------------------------------------------------ limits and prompts


@pytest.mark.parametrize("value", [0, -1, -200_000])
def test_non_positive_limits_are_ignored(value: int) -> None:
    config = config_from_dict(
        {"model_context_window": value, "model_auto_compact_token_limit": value}
    )
    assert config.model_context_window is None
    assert config.model_auto_compact_token_limit is None


def test_positive_limits_are_kept() -> None:
    config = config_from_dict({"model_context_window": 1, "model_auto_compact_token_limit": 2})
    assert (config.model_context_window, config.model_auto_compact_token_limit) == (1, 2)


@pytest.mark.parametrize(
    ("value", "effective"),
    [
        (None, None),
        ("", None),
        ("   \n\t ", None),
        ("  Summarise the work.\n", "Summarise the work."),
        ("line one\n  line two  ", "line one\n  line two"),
    ],
)
def test_compact_prompt_is_trimmed_and_blank_is_unset(
    value: str | None, effective: str | None
) -> None:
    assert Config(compact_prompt=value).effective_compact_prompt() == effective


# ------------------------------------------------------------------ providers


def test_builtin_providers() -> None:
    assert set(BUILTIN_PROVIDERS) == {"scripted", "openai", "ollama"}
    scripted = Config().provider()
    assert scripted is BUILTIN_PROVIDERS["scripted"]
    assert scripted.env_key is None
    assert scripted.remote_compaction == "unsupported"

    openai = Config(model_provider="openai").provider()
    assert openai.base_url == "https://api.openai.com/v1"
    assert openai.env_key == "OPENAI_API_KEY"
    assert openai.wire_api == "responses"
    assert openai.remote_compaction == "v1"

    ollama = Config(model_provider="ollama").provider()
    assert ollama.base_url == "http://127.0.0.1:11434/v1"
    assert ollama.wire_api == "chat"
    assert ollama.remote_compaction == "unsupported"
    assert ollama.env_key is None


def test_provider_defaults() -> None:
    provider = ProviderConfig(name="x")
    assert provider.stream_max_retries == 5
    assert provider.request_max_retries == 4
    assert provider.stream_idle_timeout_ms == 300_000
    assert provider.wire_api == "responses"
    assert provider.remote_compaction == "unsupported"
    assert (provider.http_headers, provider.query_params) == ({}, {})


def test_an_unknown_provider_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="'nowhere'") as info:
        Config(model_provider="nowhere").provider()
    assert "openai" in str(info.value)


def test_a_provider_table_may_name_itself() -> None:
    config = config_from_dict({"model_providers": {"lab": {"name": "The Lab"}}})
    assert config.model_providers["lab"].name == "The Lab"


# ------------------------------------------------------------------ API keys


def test_resolve_api_key_reads_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")
    assert resolve_api_key(BUILTIN_PROVIDERS["openai"]) == "sk-test-123"


def test_a_provider_without_env_key_needs_no_key() -> None:
    assert resolve_api_key(BUILTIN_PROVIDERS["scripted"]) is None
    assert resolve_api_key(BUILTIN_PROVIDERS["ollama"]) is None


@pytest.mark.parametrize("value", [None, ""], ids=["unset", "empty"])
def test_a_missing_key_is_an_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("LAB_API_KEY", raising=False)
    else:
        monkeypatch.setenv("LAB_API_KEY", value)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-do-not-print")
    provider = ProviderConfig(name="lab", env_key="LAB_API_KEY")
    with pytest.raises(ConfigError, match="LAB_API_KEY") as info:
        resolve_api_key(provider)
    assert "sk-secret-do-not-print" not in str(info.value)


def test_the_key_is_never_part_of_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-do-not-print")
    config = load_config(write(tmp_path, 'model_provider = "openai"\n'))
    assert resolve_api_key(config.provider()) == "sk-secret-do-not-print"
    assert "sk-secret" not in repr(config)
    assert "sk-secret" not in repr(config.provider())


def test_every_unknown_key_is_named_with_the_file_and_the_closest_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'modle = "gpt-5"\n'
        "[features]\ntoken_budgt = true\n"
        "[model_providers.local]\nbase_ur = 'http://127.0.0.1:1/v1'\n"
        "[rollout]\nwhere = '/x'\n",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"{path}: unknown config keys 'modle' (did you mean 'model'?), "
        "'features.token_budgt' (did you mean 'features.token_budget'?), "
        "'model_providers.local.base_ur' (did you mean 'model_providers.local.base_url'?), "
        "'rollout.where'"
    )


def test_unknown_override_keys_are_all_named() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, ["modle=x", "rollout.enabld=false"])
    assert str(caught.value) == (
        "-c overrides: unknown config keys 'modle' (did you mean 'model'?), "
        "'rollout.enabld' (did you mean 'rollout.enabled'?)"
    )


# ------------------------------------------------------------------ Codex's form of [features]


def _load(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path)


def test_codex_table_form_of_async_compaction_with_its_threshold(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        "[features.async_compaction]\nenabled = true\nmodel_async_compact_threshold_percent = 30\n",
    )
    assert config.features.async_compaction is True
    assert config.model_async_compact_threshold_percent == 30


@pytest.mark.parametrize("feature", ["token_budget", "remote_compaction_v2", "async_compaction"])
@pytest.mark.parametrize("enabled", [True, False])
def test_every_feature_takes_the_table_form(tmp_path: Path, feature: str, enabled: bool) -> None:
    config = _load(tmp_path, f"[features.{feature}]\nenabled = {str(enabled).lower()}\n")
    assert getattr(config.features, feature) is enabled


def test_a_feature_table_without_enabled_leaves_the_feature_off(tmp_path: Path) -> None:
    """As Codex reads it: the table sets the feature's options, `enabled` switches it on."""
    config = _load(
        tmp_path, "[features.async_compaction]\nmodel_async_compact_threshold_percent = 30\n"
    )
    assert config.features.async_compaction is False
    assert config.model_async_compact_threshold_percent == 30


def test_the_threshold_in_two_places_must_agree(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="model_async_compact_threshold_percent"):
        _load(
            tmp_path,
            "model_async_compact_threshold_percent = 20\n\n"
            "[features.async_compaction]\nenabled = true\n"
            "model_async_compact_threshold_percent = 30\n",
        )


def test_an_unknown_key_in_a_feature_table_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"features\.token_budget\.reminder_threshold_tokens"):
        _load(tmp_path, "[features.token_budget]\nenabled = true\nreminder_threshold_tokens = 9\n")


def test_enabled_must_be_a_boolean(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"features\.token_budget\.enabled"):
        _load(tmp_path, '[features.token_budget]\nenabled = "yes"\n')


def test_a_feature_set_as_an_override_takes_the_table_form_too() -> None:
    config = load_config(None, ["features.async_compaction.enabled=true", "rollout.enabled=false"])
    assert config.features.async_compaction is True
