"""``relay exec``'s reading of Codex's options and keys: plain functions, no session."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay._base._config import BUILTIN_PROVIDERS, Config, ProviderConfig, load_config
from relay._base._errors import ConfigError
from relay._cli._exec import (
    CodexKeys,
    codex_config,
    codex_keys,
    exec_request,
    find_thread,
)
from relay._cli._parser import build_parser


def test_codex_keys_sorts_relays_keys_codexs_and_the_unknown() -> None:
    keys = codex_keys(
        [
            'openai_base_url="http://127.0.0.1:9/v1"',
            'model_reasoning_effort="high"',
            'approval_policy="never"',
            "sandbox_workspace_write.network_access=false",
            'web_search="live"',
            "sandbox_workspace_write.sideways=1",
            "model_context_window=9000",
        ]
    )
    assert keys == CodexKeys(
        overrides=(
            'approval_policy="never"',
            "sandbox_workspace_write.network_access=false",
            "model_context_window=9000",
        ),
        base_url="http://127.0.0.1:9/v1",
        effort="high",
        ignored=("web_search", "sandbox_workspace_write.sideways"),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("openai_base_url=3", "--config openai_base_url: expected a string, got 3"),
        ('model_reasoning_effort=""', "--config model_reasoning_effort: expected a string, got ''"),
        ("no equals sign", "invalid override 'no equals sign': expected key=value"),
    ],
)
def test_a_malformed_codex_key_is_a_config_error(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        codex_keys([text])
    assert str(raised.value) == message


def parse(*argv: str) -> object:
    args = build_parser().parse_args(["exec", *argv])
    return args


def test_the_sdks_command_line_parses_and_config_is_a_file_or_a_key(tmp_path: Path) -> None:
    config_file = tmp_path / "a=b.toml"  # a file whose name has '=' is still the file
    config_file.write_text("")
    args = build_parser().parse_args(
        [
            "exec", "--experimental-json", "--config", 'web_search="live"', "--config",
            str(config_file), "--model", "m", "--sandbox", "workspace-write", "--cd", "w",
            "--add-dir", "extra", "--skip-git-repo-check", "resume", "t-1", "--image", "a.png",
            "--image", "b.png",
        ]
    )  # fmt: skip
    assert (args.output, args.config, args.codex_overrides) == (
        "codex",
        str(config_file),
        ['web_search="live"'],
    )
    request = exec_request(args)
    assert (request.prompt, request.thread_id) == ("-", "t-1")
    assert request.images == (str(Path("a.png").absolute()), str(Path("b.png").absolute()))
    assert request.writable_roots == (str(Path("extra").absolute()),)
    assert args.overrides == ['model="m"', 'cwd="w"', 'sandbox_mode="workspace-write"']
    assert request.warnings == ("config key 'web_search' has no counterpart in relay; ignored",)


def test_openai_base_url_sets_the_openai_table_and_chooses_it_unless_chosen() -> None:
    request = exec_request(build_parser().parse_args(["exec", "--config", 'openai_base_url="u"']))
    chosen = codex_config(Config(), request, provider_chosen=False, environ={})
    assert chosen.model_provider == "openai"
    assert chosen.provider() == ProviderConfig(
        **{**_fields(BUILTIN_PROVIDERS["openai"]), "base_url": "u"}
    )
    kept = codex_config(Config(model_provider="ollama"), request, provider_chosen=False, environ={})
    assert (kept.model_provider, kept.model_providers["openai"].base_url) == ("ollama", "u")
    assert codex_config(Config(), request, provider_chosen=True, environ={}).model_provider == (
        "scripted"
    )


def test_codex_api_key_is_the_openai_providers_key_and_add_dir_adds_roots(
    tmp_path: Path,
) -> None:
    (tmp_path / "relay.toml").write_text(
        '[sandbox_workspace_write]\nwritable_roots = ["/srv/cache"]\n'
        '[model_providers.openai]\nname = "mine"\nenv_key = "MY_KEY"\n'
    )
    args = build_parser().parse_args(["exec", "--add-dir", "/srv/out"])
    request = exec_request(args)
    plain = codex_config(Config(), request, provider_chosen=False, environ={"CODEX_API_KEY": "k"})
    assert plain.model_providers["openai"].env_key == "CODEX_API_KEY"
    assert plain.sandbox_workspace_write.writable_roots == ("/srv/out",)
    assert codex_config(Config(), request, provider_chosen=False, environ={}).model_providers == {}
    # A configured openai table that reads its own variable keeps it.
    configured = codex_config(
        load_config(tmp_path / "relay.toml"),
        request,
        provider_chosen=False,
        environ={"CODEX_API_KEY": "k"},
    )
    assert configured.model_providers["openai"].env_key == "MY_KEY"
    assert configured.sandbox_workspace_write.writable_roots == ("/srv/cache", "/srv/out")


def test_a_thread_is_found_by_its_id_and_nothing_else(tmp_path: Path) -> None:
    day = tmp_path / "2026" / "01" / "02"
    day.mkdir(parents=True)
    path = day / "rollout-2026-01-02T03-04-05-abc-123.jsonl"
    path.write_text("{}\n")
    (day / "rollout-2026-01-02T03-04-06-empty-1.jsonl").write_text("")
    assert find_thread(tmp_path, "abc-123") == path
    assert find_thread(tmp_path, "123") is None
    for name in ("empty-1", "*", "abc-*", "../x", ""):
        assert find_thread(tmp_path, name) is None


def _fields(provider: ProviderConfig) -> dict[str, object]:
    import attrs

    return attrs.asdict(provider, recurse=False)
