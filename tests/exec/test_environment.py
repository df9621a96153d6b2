"""The environment a command gets under ``[shell_environment_policy]``: each step, their order,
and the API key's variables, which no policy lets through (docs/approvals.md). Plain functions,
no event loop."""

from __future__ import annotations

import fnmatch

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay._base._environment_config import CORE_VARIABLES, ShellEnvironmentPolicy
from relay._exec._environment import command_environment, matches_any
from tests.hypothesis_profiles import examples

ENVIRON = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/me",
    "LANG": "C.UTF-8",
    "USER": "me",
    "EDITOR": "vi",
    "GITHUB_TOKEN": "ghp-token",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "AWS_REGION": "eu-west-1",
    "monkey_business": "yes",
    "OPENAI_API_KEY": "sk-relay-key",
}
SECRETS = ("OPENAI_API_KEY",)


def env(policy: ShellEnvironmentPolicy, environ: dict[str, str] | None = None) -> dict[str, str]:
    return command_environment(policy, ENVIRON if environ is None else environ, SECRETS)


# ----------------------------------------------------------------------------- each step


def test_the_default_inherits_everything_but_what_looks_like_a_credential() -> None:
    """The default excludes are on by default (Codex 0.169 has them off)."""
    policy = ShellEnvironmentPolicy()
    assert (policy.inherit, policy.ignore_default_excludes) == ("all", False)
    assert env(policy) == env(ShellEnvironmentPolicy(ignore_default_excludes=False))
    assert not any(part in name for name in env(policy) for part in ("KEY", "SECRET", "TOKEN"))


def test_inherit_core_keeps_the_core_variables_in_any_case() -> None:
    environ = {"path": "/bin", "Home": "/h", "TMPDIR": "/t", "EDITOR": "vi", "PATHS": "x"}
    assert env(ShellEnvironmentPolicy(inherit="core"), environ) == {
        "path": "/bin",
        "Home": "/h",
        "TMPDIR": "/t",
    }
    everything = {name: name.lower() for name in CORE_VARIABLES}
    assert env(ShellEnvironmentPolicy(inherit="core"), everything) == everything


def test_inherit_none_starts_empty() -> None:
    assert env(ShellEnvironmentPolicy(inherit="none")) == {}
    assert env(ShellEnvironmentPolicy(inherit="none", set={"CI": "1"})) == {"CI": "1"}


def test_the_default_excludes_drop_key_secret_and_token_names_in_any_case() -> None:
    kept = env(ShellEnvironmentPolicy(ignore_default_excludes=False))
    assert kept == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/me",
        "LANG": "C.UTF-8",
        "USER": "me",
        "EDITOR": "vi",
        "AWS_REGION": "eu-west-1",
    }  # "monkey_business" holds "key": a pattern looks at letters, not at words


def test_exclude_patterns_match_whole_names_in_either_case() -> None:
    policy = ShellEnvironmentPolicy(
        ignore_default_excludes=True, exclude=("aws_*", "edit?r", "LAN")
    )
    assert set(env(policy)) == {"PATH", "HOME", "LANG", "USER", "GITHUB_TOKEN", "monkey_business"}


def test_set_adds_and_replaces() -> None:
    policy = ShellEnvironmentPolicy(set={"CI": "1", "PATH": "/opt/bin"})
    made = env(policy)
    assert (made["CI"], made["PATH"], made["HOME"]) == ("1", "/opt/bin", "/home/me")


def test_include_only_keeps_only_what_matches() -> None:
    policy = ShellEnvironmentPolicy(include_only=("PATH", "h*"))
    assert env(policy) == {"PATH": "/usr/bin:/bin", "HOME": "/home/me"}


# ----------------------------------------------------------------------------- their order


def test_set_wins_over_the_excludes() -> None:
    """``set`` comes after both excludes: a name set there is kept although one matches it."""
    policy = ShellEnvironmentPolicy(
        ignore_default_excludes=False,
        exclude=("CI", "EDITOR"),
        set={"CI": "1", "NPM_TOKEN": "npm-token"},
    )
    made = env(policy)
    assert (made["CI"], made["NPM_TOKEN"]) == ("1", "npm-token")
    assert "EDITOR" not in made and "GITHUB_TOKEN" not in made


def test_include_only_comes_last_and_drops_a_set_name_it_does_not_match() -> None:
    policy = ShellEnvironmentPolicy(set={"CI": "1", "PAGER": "less"}, include_only=("P*",))
    assert env(policy) == {"PATH": "/usr/bin:/bin", "PAGER": "less"}


def test_include_only_does_not_bring_back_what_an_exclude_dropped() -> None:
    policy = ShellEnvironmentPolicy(exclude=("HOME",), include_only=("HOME", "PATH"))
    assert env(policy) == {"PATH": "/usr/bin:/bin"}


def test_include_only_does_not_reach_past_inherit() -> None:
    policy = ShellEnvironmentPolicy(inherit="core", include_only=("EDITOR", "PATH"))
    assert env(policy) == {"PATH": "/usr/bin:/bin"}


@pytest.mark.parametrize(
    "policy",
    [
        ShellEnvironmentPolicy(),
        ShellEnvironmentPolicy(set={"OPENAI_API_KEY": "sk-set"}),
        ShellEnvironmentPolicy(include_only=("*",)),
        ShellEnvironmentPolicy(include_only=("OPENAI_API_KEY",), set={"OPENAI_API_KEY": "x"}),
        ShellEnvironmentPolicy(inherit="none", set={"OPENAI_API_KEY": "sk-set"}),
    ],
)
def test_the_api_keys_variables_never_pass(policy: ShellEnvironmentPolicy) -> None:
    assert "OPENAI_API_KEY" not in env(policy)


def test_an_api_key_variable_is_removed_by_its_exact_name() -> None:
    """Environment names are case-sensitive: ``openai_api_key`` is another variable."""
    made = command_environment(
        ShellEnvironmentPolicy(ignore_default_excludes=True), {"openai_api_key": "x"}, SECRETS
    )
    assert made == {"openai_api_key": "x"}


# ----------------------------------------------------------------------------- patterns


@pytest.mark.parametrize(
    ("pattern", "name", "matched"),
    [
        ("*KEY*", "api_key", True),
        ("*KEY*", "KEY", True),
        ("*KEY*", "KY", False),
        ("A?C", "abc", True),
        ("A?C", "AC", False),
        ("A?C", "ABBC", False),
        ("A.C", "ABC", False),
        ("A.C", "a.c", True),
        ("[AB]", "A", False),
        ("[AB]", "[ab]", True),
        ("PATH", "PATH_EXTRA", False),
        ("*", "", True),
        ("É", "é", False),
    ],
)
def test_a_pattern_is_a_whole_name_with_star_and_question_mark(
    pattern: str, name: str, matched: bool
) -> None:
    assert matches_any(name, [pattern]) is matched


NAME_CHARS = st.sampled_from("ABCKEYTOabckeyto_1")
names = st.text(NAME_CHARS, min_size=1, max_size=8)
patterns = st.text(st.one_of(NAME_CHARS, st.sampled_from("*?")), min_size=1, max_size=6)


@given(names, patterns)
@settings(max_examples=examples(300))
def test_patterns_match_as_a_case_folded_glob_of_star_and_question_mark(
    name: str, pattern: str
) -> None:
    assert matches_any(name, [pattern]) == fnmatch.fnmatchcase(name.upper(), pattern.upper())


@given(names, patterns, st.lists(st.booleans(), min_size=8, max_size=8))
@settings(max_examples=examples(100))
def test_a_patterns_case_never_matters(name: str, pattern: str, flips: list[bool]) -> None:
    flipped = "".join(c.swapcase() if flip else c for c, flip in zip(pattern, flips, strict=False))
    assert matches_any(name, [pattern]) == matches_any(name, [flipped])


# ----------------------------------------------------------------------------- properties

environs = st.dictionaries(names, st.text("xyz", max_size=3), max_size=8)
policies = st.builds(
    ShellEnvironmentPolicy,
    inherit=st.sampled_from(["all", "core", "none"]),
    ignore_default_excludes=st.booleans(),
    exclude=st.lists(patterns, max_size=3),
    set=st.dictionaries(names, st.text("uvw", max_size=3), max_size=3),
    include_only=st.lists(patterns, max_size=3),
)
secret_names = st.lists(names, max_size=2)


@given(policies, environs, secret_names)
@settings(max_examples=examples(300))
def test_every_variable_comes_from_set_or_from_relays_environment(
    policy: ShellEnvironmentPolicy, environ: dict[str, str], secrets: list[str]
) -> None:
    made = command_environment(policy, environ, secrets)
    for name, value in made.items():
        assert value == (policy.set[name] if name in policy.set else environ[name])
        assert name not in secrets
        if name not in policy.set:
            assert policy.inherit != "none"
            assert policy.inherit == "all" or matches_any(name, CORE_VARIABLES)
            assert not matches_any(name, policy.exclude)
            assert policy.ignore_default_excludes or not matches_any(
                name, ("*KEY*", "*SECRET*", "*TOKEN*")
            )
        assert not policy.include_only or matches_any(name, policy.include_only)


@given(policies, environs, secret_names)
@settings(max_examples=examples(300))
def test_every_set_name_is_there_unless_include_only_or_a_secret_drops_it(
    policy: ShellEnvironmentPolicy, environ: dict[str, str], secrets: list[str]
) -> None:
    made = command_environment(policy, environ, secrets)
    for name, value in policy.set.items():
        dropped = name in secrets or (
            bool(policy.include_only) and not matches_any(name, policy.include_only)
        )
        assert made.get(name) == (None if dropped else value)


@given(policies, environs, secret_names)
@settings(max_examples=examples(200))
def test_the_environment_a_policy_makes_is_a_fixed_point_of_it(
    policy: ShellEnvironmentPolicy, environ: dict[str, str], secrets: list[str]
) -> None:
    made = command_environment(policy, environ, secrets)
    assert command_environment(policy, made, secrets) == made


@given(policies, environs, patterns)
@settings(max_examples=examples(200))
def test_another_exclude_pattern_never_adds_a_variable(
    policy: ShellEnvironmentPolicy, environ: dict[str, str], pattern: str
) -> None:
    wider = attrs.evolve(policy, exclude=(*policy.exclude, pattern))
    assert command_environment(wider, environ, ()).items() <= (
        command_environment(policy, environ, ()).items()
    )


@given(environs, secret_names)
@settings(max_examples=examples(100))
def test_passing_credentials_on_changes_nothing_but_the_secrets(
    environ: dict[str, str], secrets: list[str]
) -> None:
    made = command_environment(
        ShellEnvironmentPolicy(ignore_default_excludes=True), environ, secrets
    )
    assert made == {k: v for k, v in environ.items() if k not in secrets}
