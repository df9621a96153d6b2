"""A turn may change the rules (``override_turn_context``'s approval policy and sandbox): they
hold for the running turn's later calls and every later turn, through the one gate, and a
resume keeps the newest (docs/approvals.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import relay
from relay import testing
from relay._base._errors import InvalidOpError
from relay._base._exec_rules import ExecRules
from tests.sandboxing import needs_bwrap


def shell_call(call_id: str, argv: list[str]) -> dict[str, Any]:
    return {"function_call": {"name": "shell", "arguments": {"argv": argv}, "call_id": call_id}}


def outputs(t: testing.TestSession) -> dict[str, str]:
    return {
        item.call_id: item.output
        for item in t.session.history.items
        if isinstance(item, relay.FunctionCallOutput)
    }


def test_the_changed_rules_keep_what_the_turn_leaves_unset() -> None:
    rules = ExecRules("on-request", "workspace-write", ("/a",), network_access=True)
    assert rules.changed(cwd="/w") == rules
    made = rules.changed(approval_policy="never", writable_roots=("b", "/w", "/c"), cwd="/w")
    # Relative roots are the working directory's; the working directory itself is implied.
    assert made == ExecRules("never", "workspace-write", ("/w/b", "/c"), network_access=True)
    assert rules.changed(sandbox_mode="read-only", network_access=False, cwd="/w") == ExecRules(
        "on-request", "read-only", ("/a",), network_access=False
    )


def test_an_op_that_names_no_policy_or_mode_of_relay_is_refused() -> None:
    with pytest.raises(InvalidOpError, match="approval_policy: 'sometimes' is not one of"):
        relay.OverrideTurnContext(approval_policy="sometimes")
    with pytest.raises(InvalidOpError, match="sandbox_mode"):
        relay.OverrideTurnContext(sandbox_mode="workspace")
    assert not relay.OverrideTurnContext(model="m").changes_rules
    assert relay.OverrideTurnContext(network_access=False).changes_rules


async def test_a_turn_that_confines_the_session_confines_its_commands(tmp_path: Path) -> None:
    needs_bwrap()
    work = tmp_path / "work"
    work.mkdir()
    script = {
        "responses": [
            shell_call("before", ["sh", "-c", "echo 1 > before"]),
            {"text": "ran"},
            shell_call("after", ["sh", "-c", "echo 2 > after"]),
            {"text": "refused"},
        ]
    }
    config = relay.Config(
        cwd=str(work),
        rollout=relay.RolloutConfig(enabled=False),
        approval_policy="never",
        tools={"shell": True},
    )
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("write before")
        await t.submit(relay.OverrideTurnContext(sandbox_mode="read-only"))
        await t.turns("write after")
    assert (work / "before").exists() and not (work / "after").exists()
    assert "Read-only file system" in outputs(t)["after"]
    # Tightening warns of nothing.
    assert t.recorder.of_type(relay.WarningEvent) == []


async def test_a_looser_turn_warns_and_the_resume_keeps_the_newest_rules(tmp_path: Path) -> None:
    config = relay.Config(
        cwd=str(tmp_path),
        rollout=relay.RolloutConfig(dir=str(tmp_path / "sessions")),
        approval_policy="untrusted",
        sandbox_mode="read-only",
    )
    async with testing.open_test_session({"responses": []}, config=config) as t:
        await t.submit(
            relay.OverrideTurnContext(
                approval_policy="never", sandbox_mode="workspace-write", writable_roots=["more"]
            )
        )
        warning = await t.wait_for(
            lambda e: isinstance(e.msg, relay.WarningEvent) and "loosen" in e.msg.message
        )
        assert t.session.config.approval_policy == "never"
        assert t.session.rollout is not None
        path = t.session.rollout.path
    assert isinstance(warning.msg, relay.WarningEvent)
    assert "approval_policy 'untrusted' became 'never'" in warning.msg.message
    assert "sandbox_mode 'read-only' became 'workspace-write'" in warning.msg.message
    async with relay.resume_session(path) as resumed:
        kept = resumed.config
        resumed.submit_nowait(relay.Shutdown())
    assert kept.approval_policy == "never" and kept.sandbox_mode == "workspace-write"
    assert kept.sandbox_workspace_write.writable_roots == (str(tmp_path / "more"),)
