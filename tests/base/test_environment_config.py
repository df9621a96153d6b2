"""The ``[shell_environment_policy]`` table of a configuration (docs/config.md,
docs/approvals.md): its defaults, a file, ``-c`` overrides, and the errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay._base._config import Config, config_from_dict, load_config
from relay._base._environment_config import ShellEnvironmentPolicy
from relay._base._errors import ConfigError


def test_the_default_inherits_everything_and_drops_no_name_by_pattern() -> None:
    assert Config().shell_environment_policy == ShellEnvironmentPolicy(
        inherit="all", ignore_default_excludes=False, exclude=(), set={}, include_only=()
    )


def test_a_file_sets_every_key(tmp_path: Path) -> None:
    file = tmp_path / "config.toml"
    file.write_text(
        "[shell_environment_policy]\n"
        'inherit = "core"\n'
        "ignore_default_excludes = false\n"
        'exclude = ["AWS_*", "*_PASSWORD"]\n'
        'include_only = ["PATH", "HOME", "CI"]\n'
        "[shell_environment_policy.set]\n"
        'CI = "1"\n',
        encoding="utf-8",
    )
    assert load_config(file).shell_environment_policy == ShellEnvironmentPolicy(
        inherit="core",
        ignore_default_excludes=False,
        exclude=("AWS_*", "*_PASSWORD"),
        set={"CI": "1"},
        include_only=("PATH", "HOME", "CI"),
    )


def test_overrides_set_the_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAY_HOME", str(tmp_path / "empty-home"))
    policy = load_config(
        overrides=[
            "shell_environment_policy.inherit=core",
            "shell_environment_policy.ignore_default_excludes=false",
            'shell_environment_policy.exclude=["AWS_*"]',
            'shell_environment_policy.set.CI="1"',
            "shell_environment_policy.set.EDITOR=vi",
            'shell_environment_policy.include_only=["P*"]',
        ]
    ).shell_environment_policy
    assert policy == ShellEnvironmentPolicy(
        inherit="core",
        ignore_default_excludes=False,
        exclude=("AWS_*",),
        set={"CI": "1", "EDITOR": "vi"},
        include_only=("P*",),
    )


def test_a_value_that_toml_reads_as_a_number_must_be_quoted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAY_HOME", str(tmp_path / "empty-home"))
    with pytest.raises(ConfigError, match=r"shell_environment_policy\.set\.CI must be a string"):
        load_config(overrides=["shell_environment_policy.set.CI=1"])


def test_an_override_of_inherit_alone_keeps_the_other_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAY_HOME", str(tmp_path / "empty-home"))
    policy = load_config(overrides=["shell_environment_policy.inherit=core"])
    assert policy.shell_environment_policy == ShellEnvironmentPolicy(inherit="core")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            {"inherit": "some"},
            'shell_environment_policy.inherit must be one of "all", "core", "none"; got \'some\'',
        ),
        (
            {"ignore_default_excludes": "yes"},
            "shell_environment_policy.ignore_default_excludes must be true or false",
        ),
        ({"exclude": "AWS_*"}, "shell_environment_policy.exclude must be an array of strings"),
        ({"include_only": [1]}, "shell_environment_policy.include_only must be an array"),
        ({"exclude": [""]}, "shell_environment_policy.exclude holds an empty pattern"),
        ({"set": ["CI"]}, "shell_environment_policy.set must be a table"),
        ({"set": {"CI": 1}}, "shell_environment_policy.set.CI must be a string; got 1"),
        ({"set": {"A=B": "x"}}, "shell_environment_policy.set: 'A=B' is not a variable name"),
        ({"set": {"": "x"}}, "shell_environment_policy.set: '' is not a variable name"),
        ({"set": {"CI": "a\0b"}}, "shell_environment_policy.set.CI holds a NUL character"),
    ],
)
def test_a_bad_value_is_an_error_naming_the_key(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict({"shell_environment_policy": table})
    assert message in str(info.value)


def test_a_table_that_is_not_one_is_an_error() -> None:
    with pytest.raises(ConfigError, match="shell_environment_policy must be a table"):
        config_from_dict({"shell_environment_policy": "core"})


def test_an_unknown_key_is_named_with_the_closest_one(tmp_path: Path) -> None:
    file = tmp_path / "config.toml"
    file.write_text('[shell_environment_policy]\ninherits = "core"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(file)
    assert "'shell_environment_policy.inherits'" in str(info.value)
    assert "did you mean 'shell_environment_policy.inherit'" in str(info.value)


def test_an_unknown_key_from_an_override_is_named() -> None:
    with pytest.raises(ConfigError, match=r"'shell_environment_policy\.include'"):
        load_config(overrides=['shell_environment_policy.include=["PATH"]'])
