"""The gate's rules as plain functions: rulings, grants and their seals, the rules of a session
and what loosens them (docs/approvals.md)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay._base._environment_config import ShellEnvironmentPolicy
from relay._base._exec_rules import MODE_ORDER, POLICY_ORDER, ExecRules, loosenings
from relay._exec._readonly import judge
from relay._exec._rules import Call, Grant, Policy, grant_key, rule, seal, sealed

PATH = os.defpath if os.defpath.startswith("/usr") else "/usr/bin:/bin"
WRITABLE = ("/work/here", "/tmp")


def rules(policy: str, mode: str = "danger-full-access") -> ExecRules:
    return ExecRules(policy, mode)  # type: ignore[arg-type]


def ruling(policy: str, call: Call, mode: str = "danger-full-access") -> object:
    return rule(rules(policy, mode), call, path=PATH, writable=WRITABLE)


# ------------------------------------------------------------------ rulings


@pytest.mark.parametrize(
    ("argv", "runs_unasked"),
    [
        (["ls", "-la"], True),
        (["/bin/cat", "a.txt"], True),
        (["git", "status"], False),  # the repository's config runs programs (fsmonitor)
        (["git", "log"], False),
        (["date"], True),
        (["date", "--se=2020-01-01"], False),  # an abbreviation of --set
        (["file", "-bC", "x"], False),  # bundled: -C compiles a magic file
        (["file", "--comp"], False),
        (["./tools/cat", "x"], False),  # not the system's cat
        (["/tmp/x/echo", "hi"], False),
        (["rm", "-rf", "build"], False),
        ([], False),
    ],
)
def test_untrusted_runs_unasked_only_what_the_judge_finds_read_only(
    argv: list[str], runs_unasked: bool
) -> None:
    ruled = rule(rules("untrusted"), Call("shell", tuple(argv)), path=PATH, writable=WRITABLE)
    assert (ruled.ask is None) is runs_unasked
    if runs_unasked:
        # It runs the very file the judge resolved, with no second lookup.
        assert ruled.program == judge(argv, path=PATH, writable=WRITABLE)
        assert ruled.program is not None and os.path.isabs(ruled.program)
    else:
        assert ruled.program is None


def test_a_program_found_on_a_writable_path_is_asked_about(tmp_path: Path) -> None:
    planted = tmp_path / "cat"
    planted.write_text("#!/bin/sh\ntouch pwned\n")
    planted.chmod(0o755)
    ruled = rule(
        rules("untrusted"),
        Call("shell", ("cat", "x")),
        path=f"{tmp_path}:{PATH}",
        writable=(str(tmp_path),),
    )
    assert ruled.ask is not None and ruled.program is None


_argvs = st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=4).map(tuple)
_calls = st.one_of(
    st.builds(Call, st.just("shell"), _argvs, st.booleans()),
    st.builds(
        Call,
        st.sampled_from(["mine", "mcp__s__t"]),
        st.none(),
        st.just(False),
        st.sampled_from([True, False, None]),
    ),
)


@given(_calls, st.sampled_from(POLICY_ORDER), st.sampled_from(MODE_ORDER))
def test_a_ruling_asks_or_refuses_never_both_and_never_asks_under_never(
    call: Call, policy: str, mode: str
) -> None:
    ruled = rule(rules(policy, mode), call, path=PATH, writable=WRITABLE)
    assert ruled.ask is None or ruled.refuse is None
    if policy == "never":
        assert ruled.ask is None
    if ruled.unconfined:
        assert ruled.ask is not None and mode != "danger-full-access"
    if ruled.program is not None:
        assert ruled.ask is None and policy == "untrusted"


@given(st.sampled_from(POLICY_ORDER), st.sampled_from(MODE_ORDER))
def test_a_tool_that_needs_approval_is_asked_for_unless_the_policy_never_asks(
    policy: str, mode: str
) -> None:
    ruled = ruling(policy, Call("mine", needs_approval=True), mode)
    if policy == "never":
        assert ruled.refuse is not None and ruled.ask is None  # type: ignore[attr-defined]
    else:
        assert ruled.ask is not None  # type: ignore[attr-defined]
    assert ruling(policy, Call("mine", needs_approval=False), mode).ask is None  # type: ignore[attr-defined]


def test_on_request_asks_for_an_escalation_only_inside_a_sandbox() -> None:
    wants_out = Call("shell", ("make",), escalate=True)
    ruled = rule(rules("on-request", "workspace-write"), wants_out, path=PATH, writable=WRITABLE)
    assert ruled.ask is not None and ruled.unconfined
    stays = rule(
        rules("on-request", "workspace-write"),
        Call("shell", ("make",)),
        path=PATH,
        writable=WRITABLE,
    )
    assert stays.ask is None
    no_sandbox = rule(rules("on-request"), wants_out, path=PATH, writable=WRITABLE)
    assert no_sandbox.ask is None and not no_sandbox.unconfined
    assert Policy("on-failure") is Policy.ON_FAILURE


# ------------------------------------------------------------------ grants


def test_a_grant_made_for_the_sandbox_does_not_cover_leaving_it() -> None:
    """Finding 5: a grant made under untrusted covered running the argv in the sandbox only."""
    call = Call("shell", ("make",), escalate=True)
    grant = Grant(call.key, "untrusted", "workspace-write")
    resumed = rules("on-request", "workspace-write")
    assert grant.covers(call, resumed, unconfined=False)
    assert not grant.covers(call, resumed, unconfined=True)
    # Nor a looser sandbox, nor none.
    assert not grant.covers(call, rules("on-request", "danger-full-access"), unconfined=False)
    assert grant.covers(call, rules("untrusted", "read-only"), unconfined=False)


def test_a_grant_to_run_outside_covers_the_call_anywhere_and_only_that_call() -> None:
    call = Call("shell", ("make", "install"))
    grant = Grant(call.key, "on-request", "workspace-write", unconfined=True)
    for mode in MODE_ORDER:
        assert grant.covers(call, rules("on-request", mode), unconfined=True)
    assert not grant.covers(Call("shell", ("make",)), rules("on-request"), unconfined=False)
    assert not grant.covers(Call("make"), rules("on-request"), unconfined=False)


_grants = st.builds(
    Grant,
    st.one_of(_argvs.map(lambda a: ("shell", *a)), st.text(max_size=5).map(lambda t: ("tool", t))),
    st.sampled_from(POLICY_ORDER),
    st.sampled_from(MODE_ORDER),
    st.booleans(),
)


@given(_grants, st.text(max_size=8), st.text(max_size=8))
def test_a_seal_holds_for_what_it_sealed_only(grant: Grant, session: str, call_id: str) -> None:
    key = b"k" * 32
    made = seal(key, session, call_id, grant)
    assert sealed(key, session, call_id, grant, made)
    assert not sealed(b"x" * 32, session, call_id, grant, made)
    assert not sealed(key, session + "x", call_id, grant, made)
    assert not sealed(key, session, call_id + "x", grant, made)
    assert not sealed(key, session, call_id, grant, None)
    assert not sealed(key, session, call_id, grant, made[:-1] + "é")
    looser = attrs.evolve(grant, unconfined=not grant.unconfined)
    assert not sealed(key, session, call_id, looser, made)
    for mode in MODE_ORDER:
        if mode != grant.sandbox_mode:
            assert not sealed(key, session, call_id, attrs.evolve(grant, sandbox_mode=mode), made)


def test_the_key_is_made_once_readable_by_its_owner_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    key = grant_key(home)
    assert key is not None and len(key) == 32
    assert stat.S_IMODE((home / "grant.key").stat().st_mode) == 0o600
    assert grant_key(home) == key
    (home / "grant.key").write_bytes(b"short")
    assert grant_key(home) is None  # not a key relay made: no grant can be checked
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert grant_key(blocked / "home") is None


# ------------------------------------------------------------------ the rules of a session


def test_loosenings_name_each_rule_given_up() -> None:
    recorded = ExecRules("untrusted", "workspace-write", ("/w",), exclude_slash_tmp=True)
    assert loosenings(recorded, recorded) == []
    tighter = ExecRules("untrusted", "read-only")
    assert loosenings(recorded, tighter) == []
    looser = ExecRules(
        "on-request",
        "workspace-write",
        ("/w", "/other"),
        network_access=True,
        environment=ShellEnvironmentPolicy(ignore_default_excludes=True),
    )
    found = " | ".join(loosenings(recorded, looser))
    for part in ("approval_policy", "/other", "network", "/tmp", "shell_environment_policy"):
        assert part in found
    assert "sandbox_mode" in " ".join(loosenings(recorded, ExecRules("untrusted")))
