"""A resumed session keeps the rules its rollout recorded (``rules`` lines), but for the parts
it is explicitly given, and warns when those loosen them (docs/approvals.md, Rules on resume):
the pure choice, and ``resume_session``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

import relay
from relay import testing
from relay._base import _protocol as p
from relay._base._codec import converter
from relay._base._environment_config import ShellEnvironmentPolicy
from relay._base._exec_rules import ExecRules
from relay._open._resume_rules import (
    LOOSENED,
    RULE_KEYS,
    chosen_rules,
    is_rule_key,
    loosened_warning,
    resumed_rules,
)
from relay._rollout._reader import parse_rollout
from relay._rollout._resume import reconstruct

from .test_resume import rollout_config, rollout_path, run_ops
from .test_rollout_reader import compacted, item, meta, raw, text_of

STRICT = ExecRules(
    "untrusted",
    "workspace-write",
    ("/srv/data",),
    exclude_tmpdir_env_var=True,
    exclude_slash_tmp=True,
    environment=ShellEnvironmentPolicy(inherit="core"),
)
LOOSE = ExecRules("never", "danger-full-access", ("/srv/data", "/home"), network_access=True)

rules_strategy = st.builds(
    ExecRules,
    st.sampled_from(["untrusted", "on-failure", "on-request", "never"]),
    st.sampled_from(["read-only", "workspace-write", "danger-full-access"]),
    st.lists(st.sampled_from(["/a", "/b", "/c"]), unique=True, max_size=2),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.builds(ShellEnvironmentPolicy, st.sampled_from(["all", "core", "none"]), st.booleans()),
)
#: Every key that chooses a part, with the fields of :class:`ExecRules` it replaces.
PARTS: dict[str, tuple[str, ...]] = {
    "approval_policy": ("approval_policy",),
    "sandbox_mode": ("sandbox_mode",),
    "sandbox_workspace_write": (
        "writable_roots",
        "network_access",
        "exclude_tmpdir_env_var",
        "exclude_slash_tmp",
    ),
    "sandbox_workspace_write.writable_roots": ("writable_roots",),
    "sandbox_workspace_write.network_access": ("network_access",),
    "sandbox_workspace_write.exclude_tmpdir_env_var": ("exclude_tmpdir_env_var",),
    "sandbox_workspace_write.exclude_slash_tmp": ("exclude_slash_tmp",),
    "shell_environment_policy": ("environment",),
}


def rules_line(rules: ExecRules) -> str:
    """A ``rules`` line as a session writes it."""
    payload = converter.unstructure(rules)
    line = {"timestamp": "2026-01-02T03:04:05.000Z", "type": "rules", "payload": payload}
    return json.dumps(line) + "\n"


def recorded(path: Path, rules: ExecRules | None) -> None:
    """A rollout that says which session it is, on the scripted model, with ``rules``."""
    meta = {"id": "s-rec", "cwd": str(path.parent), "model": "m", "model_provider": "scripted"}
    line = {"timestamp": "2026-01-02T03:04:05.000Z", "type": "session_meta", "payload": meta}
    path.write_text(json.dumps(line) + "\n" + (rules_line(rules) if rules else ""))


def rules_of(config: relay.Config) -> ExecRules:
    return ExecRules.from_config(config)


# ----------------------------------------------------------------------------- pure


@given(rules_strategy, rules_strategy)
def test_nothing_chosen_keeps_every_recorded_rule(old: ExecRules, new: ExecRules) -> None:
    assert chosen_rules(old, new, ()) == old
    assert chosen_rules(old, new, ("model", "tools.shell")) == old


@given(rules_strategy, rules_strategy)
def test_every_rule_chosen_takes_every_given_one(old: ExecRules, new: ExecRules) -> None:
    assert chosen_rules(old, new, RULE_KEYS) == new


@given(rules_strategy, rules_strategy, st.sets(st.sampled_from(sorted(PARTS))))
def test_a_chosen_key_replaces_its_part_and_only_it(
    old: ExecRules, new: ExecRules, chosen: set[str]
) -> None:
    made = chosen_rules(old, new, chosen)
    taken = {field for key in chosen for field in PARTS[key]}
    for field in attrs.fields(ExecRules):
        source = new if field.name in taken else old
        assert getattr(made, field.name) == getattr(source, field.name), field.name


def test_a_key_of_the_environment_replaces_that_field_of_it() -> None:
    old = ExecRules(environment=ShellEnvironmentPolicy("core", exclude=("AWS_*",)))
    new = ExecRules(environment=ShellEnvironmentPolicy("all", set={"A": "1"}))
    made = chosen_rules(old, new, ["shell_environment_policy.set.A"])
    assert made.environment == ShellEnvironmentPolicy("core", exclude=("AWS_*",), set={"A": "1"})


def test_the_rule_keys_are_those_of_the_rules() -> None:
    assert is_rule_key("approval_policy") and is_rule_key("sandbox_workspace_write.x")
    assert not is_rule_key("model") and not is_rule_key("sandbox")


def test_a_rollout_without_rules_leaves_the_config_as_it_is() -> None:
    config = relay.Config(approval_policy="never")
    assert resumed_rules(config, None, chosen=RULE_KEYS) is config
    assert loosened_warning(None, config) is None


def test_the_recorded_rules_replace_the_config_s_but_for_the_chosen() -> None:
    config = relay.Config(approval_policy="never", sandbox_mode="danger-full-access")
    assert rules_of(resumed_rules(config, STRICT)) == STRICT
    kept = resumed_rules(config, STRICT, chosen=["approval_policy"])
    assert rules_of(kept) == attrs.evolve(STRICT, approval_policy="never")


def test_the_warning_names_what_a_looser_config_gives_up() -> None:
    assert loosened_warning(STRICT, STRICT.apply(relay.Config())) is None
    tighter = attrs.evolve(STRICT, sandbox_mode="read-only", approval_policy="untrusted")
    assert loosened_warning(STRICT, tighter.apply(relay.Config())) is None
    warning = loosened_warning(STRICT, LOOSE.apply(relay.Config()))
    assert warning is not None and warning.startswith(f"{LOOSENED}: ")
    assert "approval_policy 'untrusted' became 'never'" in warning
    assert "sandbox_mode 'workspace-write' became 'danger-full-access'" in warning


@given(st.lists(rules_strategy, min_size=1, max_size=3), st.integers(0, 3))
def test_the_newest_rules_line_is_read_wherever_it_is(
    rules: list[ExecRules], compactions: int
) -> None:
    """A resume reads only what it needs; the rules lines are written when the session
    opens, so a compaction's new base comes after them and must not hide them."""
    lines = [meta(), *(raw("rules", converter.unstructure(one)) for one in rules)]
    for number in range(compactions):
        message = p.user_message(f"user {number}")
        lines += [item(message), compacted([message], window_number=number + 1)]
    data = text_of(*lines)
    assert reconstruct(parse_rollout(data)).rules == rules[-1]
    assert reconstruct(parse_rollout(data, for_resume=True)).rules == rules[-1]


# ----------------------------------------------------------------------------- resume_session


async def first_events(
    path: Path, config: relay.Config | None = None, **kwargs: Any
) -> tuple[relay.Config, list[relay.Event]]:
    """The configuration a resumed session runs on, and its events up to the first that
    is not ``session_configured`` or a ``resume`` warning."""
    seen: list[relay.Event] = []
    async with relay.resume_session(path, config, **kwargs) as session:
        events = session.events()
        seen.append(await anext(events))
        session.submit_nowait(relay.Shutdown())
        async for event in events:
            seen.append(event)
            if event.id != "resume":
                break
        return session.config, seen


def warnings(events: list[relay.Event]) -> list[str]:
    return [e.msg.message for e in events if isinstance(e.msg, relay.WarningEvent)]


async def test_resume_session_keeps_the_recorded_rules_with_or_without_a_config(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    path = tmp_path / "rollout.jsonl"
    recorded(path, STRICT)
    config, events = await first_events(path)
    assert rules_of(config) == STRICT and warnings(events) == []
    recorded(path, STRICT)
    loose = LOOSE.apply(rollout_config(tmp_path))
    config, events = await first_events(path, loose)
    assert rules_of(config) == STRICT and warnings(events) == []


async def test_resume_session_without_keep_rules_takes_the_config_s_and_warns(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    path = tmp_path / "rollout.jsonl"
    recorded(path, STRICT)
    loose = LOOSE.apply(rollout_config(tmp_path))
    config, events = await first_events(path, loose, keep_rules=False)
    assert rules_of(config) == LOOSE
    assert events[1].id == "resume"
    (warning,) = warnings(events)
    assert warning == loosened_warning(STRICT, loose)
    assert "approval_policy 'untrusted' became 'never'" in warning


async def test_resume_session_of_a_rollout_without_rules_takes_the_config_s(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    path = tmp_path / "rollout.jsonl"
    recorded(path, None)
    loose = LOOSE.apply(rollout_config(tmp_path))
    config, events = await first_events(path, loose)
    assert rules_of(config) == LOOSE and warnings(events) == []


async def test_a_session_resumed_without_a_config_keeps_the_rules_it_ran_under(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """End to end: the session records its rules itself."""
    base = rollout_config(tmp_path)
    strict = attrs.evolve(STRICT, writable_roots=(str(tmp_path),)).apply(base)
    async with testing.open_test_session(config=strict) as t:
        await run_ops(t, ("turn", "one"))
    path = rollout_path(t)
    config, events = await first_events(path, base)
    assert rules_of(config) == rules_of(strict)
    assert warnings(events) == []


async def test_a_session_resumed_after_a_compaction_keeps_its_rules(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    base = rollout_config(tmp_path)
    strict = STRICT.apply(base)
    async with testing.open_test_session(config=strict) as t:
        await run_ops(t, ("turn", "one"), ("compact", None), ("turn", "two"))
    config, _ = await first_events(rollout_path(t), base)
    assert rules_of(config) == STRICT
