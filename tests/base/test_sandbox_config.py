"""The approval and sandbox keys of a configuration (docs/config.md, docs/approvals.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

import relay
from relay._base._config import Config, config_from_dict, load_config
from relay._base._errors import ConfigError
from relay._base._sandbox_config import SandboxWorkspaceWrite


def test_the_defaults_keep_commands_unconfined_and_ask_only_on_request() -> None:
    config = Config()
    assert config.approval_policy == "on-request"
    assert config.sandbox_mode == "danger-full-access"
    assert config.sandbox_workspace_write == SandboxWorkspaceWrite(
        writable_roots=(),
        network_access=False,
        exclude_tmpdir_env_var=False,
        exclude_slash_tmp=False,
    )
    assert relay.SandboxWorkspaceWrite is SandboxWorkspaceWrite


def test_a_file_sets_every_key_and_relative_roots_follow_the_file(tmp_path: Path) -> None:
    file = tmp_path / "conf" / "config.toml"
    file.parent.mkdir()
    file.write_text(
        'approval_policy = "on-failure"\n'
        'sandbox_mode = "workspace-write"\n'
        "[sandbox_workspace_write]\n"
        'writable_roots = ["cache", "/abs/root", "../out"]\n'
        "network_access = true\n"
        "exclude_tmpdir_env_var = true\n"
        "exclude_slash_tmp = true\n"
        "[mcp_servers.docs]\n"
        'command = "docs-mcp"\n'
        'approval = "always"\n',
        encoding="utf-8",
    )
    config = load_config(file)
    assert config.approval_policy == "on-failure"
    assert config.sandbox_mode == "workspace-write"
    base = file.parent.resolve()
    assert config.sandbox_workspace_write == SandboxWorkspaceWrite(
        writable_roots=(str(base / "cache"), "/abs/root", str(base / "../out")),
        network_access=True,
        exclude_tmpdir_env_var=True,
        exclude_slash_tmp=True,
    )
    assert config.mcp_servers["docs"].approval == "always"


def test_an_mcp_server_without_approval_leaves_it_unset() -> None:
    config = config_from_dict({"mcp_servers": {"docs": {"command": "docs-mcp"}}})
    assert config.mcp_servers["docs"].approval is None


def test_overrides_set_the_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAY_HOME", str(tmp_path / "empty-home"))
    config = load_config(
        overrides=[
            "approval_policy=never",
            "sandbox_mode=read-only",
            "sandbox_workspace_write.network_access=true",
            'sandbox_workspace_write.writable_roots=["/srv/cache"]',
            "mcp_servers.docs.command=docs-mcp",
            "mcp_servers.docs.approval=never",
        ]
    )
    assert config.approval_policy == "never"
    assert config.sandbox_mode == "read-only"
    assert config.sandbox_workspace_write.network_access is True
    assert config.sandbox_workspace_write.writable_roots == ("/srv/cache",)
    assert config.mcp_servers["docs"].approval == "never"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"approval_policy": "ask"},
            'approval_policy must be one of "untrusted", "on-failure", "on-request", "never";'
            " got 'ask'",
        ),
        (
            {"sandbox_mode": "workspace_write"},
            'sandbox_mode must be one of "read-only", "workspace-write", "danger-full-access";'
            " got 'workspace_write'",
        ),
        (
            {"mcp_servers": {"docs": {"command": "x", "approval": "sometimes"}}},
            'mcp_servers.docs.approval must be one of "always", "never"; got \'sometimes\'',
        ),
        ({"approval_policy": True}, "approval_policy must be one of"),
    ],
)
def test_a_value_not_among_the_allowed_ones_is_named_with_them(
    data: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match="invalid config: ") as caught:
        config_from_dict(data)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"sandbox_workspace_write": {"network_access": "yes"}}, "network_access"),
        ({"sandbox_workspace_write": {"writable_roots": "/srv"}}, "writable_roots"),
        ({"sandbox_workspace_write": {"exclude_slash_tmp": 1}}, "exclude_slash_tmp"),
    ],
)
def test_wrong_types_in_the_table_name_the_key(data: dict[str, object], where: str) -> None:
    with pytest.raises(ConfigError, match=where):
        config_from_dict(data)


def test_an_unknown_key_of_the_table_is_named_with_the_closest_one() -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_dict({"sandbox_workspace_write": {"network": True}})
    assert "'sandbox_workspace_write.network'" in str(caught.value)
    assert "network_access" in str(caught.value)
