"""Approvals in a session: the request and its decision, and a wait as a cancellation point
(docs/approvals.md; the rules alone: tests/exec/test_rules.py)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel

import relay
import relay.lowlevel
from relay import testing
from relay._core._exec_gate import DENIED_OUTPUT

# ------------------------------------------------------------------ a session


def shell_call(call_id: str, *argv: str) -> dict[str, Any]:
    return {
        "function_call": {"name": "shell", "arguments": {"argv": list(argv)}, "call_id": call_id}
    }


def config(tmp_path: Path, **changes: Any) -> relay.Config:
    return relay.Config(
        tools={"shell": True},
        cwd=str(tmp_path),
        rollout=relay.RolloutConfig(enabled=False),
        approval_policy=changes.pop("approval_policy", "untrusted"),
        **changes,
    )


def output_of(t: testing.TestSession, call_id: str) -> str:
    (output,) = [
        item.output
        for item in t.session.history.items
        if isinstance(item, relay.FunctionCallOutput) and item.call_id == call_id
    ]
    return output


def errors(t: testing.TestSession) -> list[relay.ErrorEvent]:
    return list(t.recorder.of_type(relay.ErrorEvent))


async def test_an_approved_command_runs_after_its_request(tmp_path: Path) -> None:
    script = {"responses": [shell_call("c1", "touch", "made"), {"text": "done"}]}
    async with testing.open_test_session(script, config=config(tmp_path)) as t:
        await t.turn("make it", id="t1")
        request = (await t.wait_for(relay.ExecApprovalRequest)).msg
        assert request == relay.ExecApprovalRequest(
            "c1", "t1", ("touch", "made"), str(tmp_path), request.reason
        )
        assert request.reason and "not read-only" in request.reason
        await trio.testing.wait_all_tasks_blocked()
        assert not (tmp_path / "made").exists()
        await t.submit(relay.ExecApproval("c1", relay.ReviewDecision.APPROVED))
        await t.wait_for(testing.turn_ended)
    assert (tmp_path / "made").exists()
    assert "[exit code 0]" in output_of(t, "c1")
    assert t.recorder.of_type(relay.TurnComplete)


async def test_a_read_only_command_runs_unasked_under_untrusted(tmp_path: Path) -> None:
    script = {"responses": [shell_call("c1", "ls"), {"text": "done"}]}
    async with testing.open_test_session(script, config=config(tmp_path)) as t:
        await t.turn("look", id="t1")
        await t.wait_for(testing.turn_ended)
    assert t.recorder.of_type(relay.ExecApprovalRequest) == []
    assert "[exit code 0]" in output_of(t, "c1")


async def test_a_denied_command_does_not_run_and_the_turn_goes_on(tmp_path: Path) -> None:
    script = {"responses": [shell_call("c1", "touch", "made"), {"text": "understood"}]}
    async with testing.open_test_session(script, config=config(tmp_path)) as t:
        await t.turn("make it", id="t1")
        await t.wait_for(relay.ExecApprovalRequest)
        await t.submit(relay.ExecApproval("c1", relay.ReviewDecision.DENIED))
        done = (await t.wait_for(testing.turn_ended)).msg
    assert isinstance(done, relay.TurnComplete) and done.last_agent_message == "understood"
    assert not (tmp_path / "made").exists()
    assert output_of(t, "c1") == DENIED_OUTPUT


async def test_abort_ends_the_turn_and_nothing_runs(tmp_path: Path) -> None:
    script = {"responses": [shell_call("c1", "touch", "made"), {"text": "never"}]}
    async with testing.open_test_session(script, config=config(tmp_path)) as t:
        await t.turn("make it", id="t1")
        await t.wait_for(relay.ExecApprovalRequest)
        await t.submit(relay.ExecApproval("c1", relay.ReviewDecision.ABORT))
        done = (await t.wait_for(testing.turn_ended)).msg
    assert isinstance(done, relay.TurnAborted) and done.reason is relay.AbortReason.INTERRUPTED
    assert not (tmp_path / "made").exists()
    assert output_of(t, "c1") == "aborted"
    assert len(t.model.requests) == 1


async def test_an_interrupt_ends_the_wait_and_a_late_decision_is_refused(tmp_path: Path) -> None:
    script = {"responses": [shell_call("c1", "touch", "made"), {"text": "never"}]}
    async with testing.open_test_session(script, config=config(tmp_path)) as t:
        await t.turn("make it", id="t1")
        await t.wait_for(relay.ExecApprovalRequest)
        await t.submit(relay.Interrupt())
        done = (await t.wait_for(testing.turn_ended)).msg
        assert isinstance(done, relay.TurnAborted)
        await t.submit(relay.ExecApproval("c1", relay.ReviewDecision.APPROVED))
        error = (await t.wait_for(relay.ErrorEvent)).msg
    assert error.code is relay.ErrorCode.UNKNOWN_APPROVAL and "c1" in error.message
    assert not (tmp_path / "made").exists()
    assert output_of(t, "c1") == "aborted"


async def test_a_replacing_turn_ends_the_wait(tmp_path: Path) -> None:
    script = {"responses": [shell_call("c1", "touch", "made"), {"text": "other"}]}
    async with testing.open_test_session(script, config=config(tmp_path)) as t:
        await t.turn("make it", id="t1")
        await t.wait_for(relay.ExecApprovalRequest)
        await t.turn("never mind", id="t2", on_busy=relay.OnBusy.REPLACE)
        await t.wait_for(testing.turn_ended, count=2)
    aborted = t.recorder.of_type(relay.TurnAborted)
    assert [a.reason for a in aborted] == [relay.AbortReason.REPLACED]
    assert not (tmp_path / "made").exists()
    assert output_of(t, "c1") == "aborted"


async def test_an_unknown_id_and_a_second_decision_are_refused(tmp_path: Path) -> None:
    script = {"responses": [shell_call("c1", "touch", "made"), {"text": "done"}]}
    async with testing.open_test_session(script, config=config(tmp_path)) as t:
        await t.submit(relay.ExecApproval("nobody", relay.ReviewDecision.APPROVED))
        first = (await t.wait_for(relay.ErrorEvent)).msg
        assert first.code is relay.ErrorCode.UNKNOWN_APPROVAL and "nobody" in first.message
        await t.turn("make it", id="t1")
        await t.wait_for(relay.ExecApprovalRequest)
        await t.submit(relay.ExecApproval("c1", relay.ReviewDecision.DENIED))
        await t.submit(relay.ExecApproval("c1", relay.ReviewDecision.APPROVED))
        await t.wait_for(testing.turn_ended)
        await t.wait_for(relay.ErrorEvent, count=2)
    assert not (tmp_path / "made").exists()
    assert [e.code for e in errors(t)] == [relay.ErrorCode.UNKNOWN_APPROVAL] * 2


async def test_an_invalid_decision_is_refused_before_anything_runs(tmp_path: Path) -> None:
    script = {"responses": [shell_call("c1", "touch", "made"), {"text": "done"}]}
    async with testing.open_test_session(script, config=config(tmp_path)) as t:
        await t.turn("make it", id="t1")
        await t.wait_for(relay.ExecApprovalRequest)
        t.session.submit_json_nowait({"type": "exec_approval", "id": "c1", "decision": "yes"})
        error = (await t.wait_for(relay.ErrorEvent)).msg
        assert error.code is relay.ErrorCode.INVALID_OP and "decision" in error.message
        await trio.testing.wait_all_tasks_blocked()
        assert not (tmp_path / "made").exists()
        await t.submit(relay.ExecApproval("c1", relay.ReviewDecision.DENIED))
        await t.wait_for(testing.turn_ended)
    assert not (tmp_path / "made").exists()


async def test_approved_for_session_covers_the_same_argv_only(tmp_path: Path) -> None:
    script = {
        "responses": [
            shell_call("c1", "touch", "a"),
            shell_call("c2", "touch", "a"),
            shell_call("c3", "touch", "b"),
            {"text": "done"},
        ]
    }
    async with testing.open_test_session(script, config=config(tmp_path)) as t:
        await t.turn("make them", id="t1")
        await t.wait_for(relay.ExecApprovalRequest)
        await t.submit(relay.ExecApproval("c1", relay.ReviewDecision.APPROVED_FOR_SESSION))
        third = (await t.wait_for(relay.ExecApprovalRequest, count=2)).msg
        assert third.call_id == "c3"
        await t.submit(relay.ExecApproval("c3", relay.ReviewDecision.DENIED))
        await t.wait_for(testing.turn_ended)
    assert "[exit code 0]" in output_of(t, "c2")
    assert (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# ------------------------------------------------------------------ the callback


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_callback_approves_reads_and_denies_writes(
    tmp_path: Path, asynchronous: bool
) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    script = {
        "responses": [
            shell_call("c1", "touch", "made"),
            shell_call("c2", "sh", "-c", "cat notes.txt"),
            {"text": "done"},
        ]
    }
    seen: list[relay.ExecApprovalRequest] = []

    def decide(request: relay.ExecApprovalRequest) -> relay.ReviewDecision:
        seen.append(request)
        assert isinstance(request.command, tuple)
        return relay.ReviewDecision.DENIED if "touch" in request.command else "approved"  # type: ignore[return-value]

    async def decide_later(request: relay.ExecApprovalRequest) -> relay.ReviewDecision:
        await trio.lowlevel.checkpoint()
        return decide(request)

    callback: Any = decide_later if asynchronous else decide
    async with testing.open_test_session(
        script, config=config(tmp_path), on_approval=callback
    ) as t:
        await t.turn("go", id="t1")
        await t.wait_for(testing.turn_ended)
    assert [r.call_id for r in seen] == ["c1", "c2"]
    assert output_of(t, "c1") == DENIED_OUTPUT
    assert output_of(t, "c2").startswith("hello")
    assert not (tmp_path / "made").exists()


async def test_a_callback_that_fails_or_answers_nonsense_denies(tmp_path: Path) -> None:
    script = {
        "responses": [
            shell_call("c1", "touch", "a"),
            shell_call("c2", "touch", "b"),
            {"text": "done"},
        ]
    }
    answers = iter([ValueError("no"), "perhaps"])

    def decide(request: relay.ExecApprovalRequest) -> Any:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async with testing.open_test_session(script, config=config(tmp_path), on_approval=decide) as t:
        await t.turn("go", id="t1")
        await t.wait_for(testing.turn_ended)
    assert output_of(t, "c1") == output_of(t, "c2") == DENIED_OUTPUT
    warnings = [w.message for w in t.recorder.of_type(relay.WarningEvent)]
    assert any("ValueError: no" in w for w in warnings)
    assert any("'perhaps'" in w for w in warnings)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# ------------------------------------------------------------------ other tools


async def test_a_python_tool_that_needs_approval_asks_with_its_arguments(tmp_path: Path) -> None:
    ran: list[Mapping[str, Any]] = []

    async def deploy(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
        ran.append(args)
        return "deployed"

    tool = relay.Tool("deploy", "Deploy.", {"type": "object"}, deploy, needs_approval=True)
    script = {
        "responses": [
            {"function_call": {"name": "deploy", "arguments": {"to": "prod"}, "call_id": "d1"}},
            {"text": "done"},
        ]
    }
    cfg = relay.Config(cwd=str(tmp_path), rollout=relay.RolloutConfig(enabled=False))
    async with testing.open_test_session(script, config=cfg, tools=[tool]) as t:
        await t.turn("ship it", id="t1")
        request = (await t.wait_for(relay.ExecApprovalRequest)).msg
        assert request.command == relay.ToolInvocation(None, "deploy", {"to": "prod"})
        assert ran == []
        await t.submit(relay.ExecApproval("d1", relay.ReviewDecision.APPROVED_FOR_SESSION))
        await t.wait_for(testing.turn_ended)
    assert ran == [{"to": "prod"}]
    assert output_of(t, "d1") == "deployed"
    assert json.loads(json.dumps(relay.lowlevel.to_json(request)))["command"] == {
        "server": None,
        "tool": "deploy",
        "arguments": {"to": "prod"},
    }


async def test_never_refuses_a_tool_that_needs_approval_without_asking(tmp_path: Path) -> None:
    async def deploy(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
        raise AssertionError("ran")

    tool = relay.Tool("deploy", "Deploy.", {"type": "object"}, deploy, needs_approval=True)
    script = {
        "responses": [
            {"function_call": {"name": "deploy", "arguments": {}, "call_id": "d1"}},
            {"text": "done"},
        ]
    }
    cfg = relay.Config(
        cwd=str(tmp_path), rollout=relay.RolloutConfig(enabled=False), approval_policy="never"
    )
    async with testing.open_test_session(script, config=cfg, tools=[tool]) as t:
        await t.turn("ship it", id="t1")
        await t.wait_for(testing.turn_ended)
    assert t.recorder.of_type(relay.ExecApprovalRequest) == []
    assert "never asks" in output_of(t, "d1")


async def test_the_default_policy_asks_nothing_for_shell(tmp_path: Path) -> None:
    script = {"responses": [shell_call("c1", "touch", "made"), {"text": "done"}]}
    cfg = relay.Config(
        tools={"shell": True}, cwd=str(tmp_path), rollout=relay.RolloutConfig(enabled=False)
    )
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turn("make it", id="t1")
        await t.wait_for(testing.turn_ended)
    assert t.recorder.of_type(relay.ExecApprovalRequest) == []
    assert (tmp_path / "made").exists()


# ------------------------------------------------------------------ a compaction meanwhile


@attrs.frozen
class CompactWhileWaiting(relay.SessionTask):
    """Calls ``deploy`` and, while its approval waits, compacts the history."""

    asked: trio.Event

    @property
    def kind(self) -> str:
        return "compact_while_waiting"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        await ctx.record_input([relay.Text("ship it")])
        call = relay.FunctionCall("deploy", '{"to": "prod"}', "d1")
        ctx.record(call)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ctx.run_tool, call)
            await self.asked.wait()
            await ctx.compact(relay.lowlevel.CompactionRequest(relay.CompactionTrigger.MANUAL))
        return None


@pytest.mark.parametrize("token_budget", [False, True])
async def test_a_compaction_keeps_a_call_that_waits_for_its_decision(
    tmp_path: Path, token_budget: bool
) -> None:
    async def deploy(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
        return "deployed"

    tool = relay.Tool("deploy", "Deploy.", {"type": "object"}, deploy, needs_approval=True)
    asked = trio.Event()
    cfg = relay.Config(
        cwd=str(tmp_path),
        rollout=relay.RolloutConfig(enabled=False),
        features=relay.Features(token_budget=token_budget),
    )
    script = {"responses": [{"text": "earlier answer"}, {"text": "a summary of it all"}]}
    async with testing.open_test_session(
        script,
        config=cfg,
        tools=[tool],
        tasks={"compact_while_waiting": lambda op: CompactWhileWaiting(asked)},
    ) as t:
        await t.turn("first", id="t1")
        await t.wait_for(testing.turn_ended)
        await t.submit(relay.CustomOp("compact_while_waiting"), id="t2")
        request = (await t.wait_for(relay.ExecApprovalRequest)).msg
        asked.set()
        await t.wait_for(relay.ContextCompacted)
        items = list(t.session.history.items)
        assert relay.FunctionCall("deploy", '{"to": "prod"}', "d1") in items
        await t.submit(relay.ExecApproval(request.call_id, relay.ReviewDecision.APPROVED))
        await t.wait_for(testing.turn_ended, count=2)
    items = list(t.session.history.items)
    calls = [i for i, item in enumerate(items) if isinstance(item, relay.FunctionCall)]
    assert len(calls) == 1
    assert items[calls[0] + 1] == relay.FunctionCallOutput("d1", "deployed")


# ------------------------------------------------------------------ with the sandbox

#: The tests' folders are under the temporary directory, which the sandbox leaves writable
#: unless it is excluded.
NO_TMP = {
    "sandbox_workspace_write": relay.SandboxWorkspaceWrite(
        exclude_tmpdir_env_var=True, exclude_slash_tmp=True
    )
}

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None and not os.environ.get("RELAY_SANDBOX_REQUIRED"),
    reason="bubblewrap is not installed",
)


@needs_bwrap
@pytest.mark.parametrize("decision", ["approved", "denied"])
async def test_on_failure_asks_to_run_a_refused_command_outside(
    tmp_path: Path, decision: str
) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    target = outside / "made"
    script = {"responses": [shell_call("c1", "touch", str(target)), {"text": "done"}]}
    cfg = config(work, approval_policy="on-failure", sandbox_mode="workspace-write", **NO_TMP)
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turn("make it", id="t1")
        request = (await t.wait_for(relay.ExecApprovalRequest)).msg
        assert request.reason is not None and "sandbox refused" in request.reason
        assert not target.exists()
        await t.submit(relay.ExecApproval("c1", relay.ReviewDecision(decision)))
        await t.wait_for(testing.turn_ended)
    assert target.exists() is (decision == "approved")
    if decision == "denied":
        assert "not approved" in output_of(t, "c1")


@needs_bwrap
async def test_on_request_asks_for_an_escalation_and_runs_it_outside(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    target = outside / "made"
    arguments = {
        "argv": ["touch", str(target)],
        "sandbox_permissions": "require_escalated",
        "justification": "Write the file outside the workspace?",
    }
    script = {
        "responses": [
            {"function_call": {"name": "shell", "arguments": arguments, "call_id": "c1"}},
            shell_call("c2", "touch", str(outside / "quiet")),
            {"text": "done"},
        ]
    }
    cfg = config(work, approval_policy="on-request", sandbox_mode="workspace-write", **NO_TMP)
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turn("make it", id="t1")
        request = (await t.wait_for(relay.ExecApprovalRequest)).msg
        assert request.reason is not None and "Write the file outside" in request.reason
        await t.submit(relay.ExecApproval("c1", relay.ReviewDecision.APPROVED))
        await t.wait_for(testing.turn_ended)
    assert target.exists()
    # Without the escalation, the sandbox holds and nothing is asked.
    assert len(t.recorder.of_type(relay.ExecApprovalRequest)) == 1
    assert not (outside / "quiet").exists()


@needs_bwrap
async def test_under_untrusted_a_grant_does_not_cover_leaving_the_sandbox(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    escalated = {
        "argv": ["touch", str(outside / "made")],
        "sandbox_permissions": "require_escalated",
    }
    script = {
        "responses": [
            shell_call("c1", "touch", str(outside / "made")),
            {"function_call": {"name": "shell", "arguments": escalated, "call_id": "c2"}},
            {"text": "done"},
        ]
    }
    cfg = config(work, sandbox_mode="workspace-write", **NO_TMP)
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turn("make it", id="t1")
        await t.wait_for(relay.ExecApprovalRequest)
        await t.submit(relay.ExecApproval("c1", relay.ReviewDecision.APPROVED_FOR_SESSION))
        second = (await t.wait_for(relay.ExecApprovalRequest, count=2)).msg
        assert second.call_id == "c2"
        assert not (outside / "made").exists()  # the sandbox held the approved first run
        await t.submit(relay.ExecApproval("c2", relay.ReviewDecision.DENIED))
        await t.wait_for(testing.turn_ended)
    assert not (outside / "made").exists()


# ------------------------------------------------------------------ grants across a resume


async def run_turn(session: relay.Session) -> list[relay.EventMsg]:
    """Submit one turn and collect every event up to its end."""
    seen: list[relay.EventMsg] = []
    events = session.events()
    await session.submit(relay.UserTurn(items=[relay.Text("go")]))
    async for event in events:
        seen.append(event.msg)
        if testing.turn_ended(event):
            break
    return seen


async def test_a_grant_relay_did_not_write_is_ignored_on_resume(tmp_path: Path) -> None:
    """Finding 4: a command that can write the rollout appends an ``approval`` line; the
    resume must not take it for a grant. Only the line relay sealed holds."""
    work = tmp_path / "work"
    work.mkdir()
    cfg = relay.Config(
        tools={"shell": True},
        cwd=str(work),
        approval_policy="untrusted",
        rollout=relay.RolloutConfig(dir=str(tmp_path / "sessions")),
    )
    first = testing.ScriptedModel({"responses": [shell_call("c1", "touch", "a"), {"text": "ok"}]})
    async with relay.open_session(
        cfg, model=first, on_approval=lambda request: "approved_for_session"
    ) as session:
        await run_turn(session)
        assert session.rollout is not None
        path = session.rollout.path
    assert (work / "a").exists()
    (work / "a").unlink()
    lines = Path(path).read_text().splitlines()
    (sealed_line,) = [line for line in lines if '"type":"approval"' in line]
    assert '"seal":' in sealed_line
    forged = sealed_line.replace('"touch","a"', '"touch","b"')  # the seal of another grant
    unsealed = json.loads(sealed_line)
    unsealed["payload"].update(command=["touch", "c"], seal=None)
    with open(path, "a") as rollout:
        rollout.write(forged + "\n" + json.dumps(unsealed) + "\n")

    asked: list[tuple[str, ...]] = []

    def deny(request: relay.ExecApprovalRequest) -> str:
        assert isinstance(request.command, tuple)
        asked.append(request.command)
        return "denied"

    again = testing.ScriptedModel(
        {
            "responses": [
                shell_call("r1", "touch", "a"),
                shell_call("r2", "touch", "b"),
                shell_call("r3", "touch", "c"),
                {"text": "done"},
            ]
        }
    )
    async with relay.resume_session(path, cfg, model=again, on_approval=deny) as session:
        events = await run_turn(session)
    warnings = [msg.message for msg in events if isinstance(msg, relay.WarningEvent)]
    assert asked == [("touch", "b"), ("touch", "c")]
    assert (work / "a").exists() and not (work / "b").exists() and not (work / "c").exists()
    assert sum("is ignored" in text for text in warnings) == 2


def test_only_a_grant_relay_sealed_for_this_session_is_kept() -> None:
    from relay._base._exec_rules import ExecRules
    from relay._base._rollout_lines import ApprovalDecided
    from relay._core._exec_gate import Gate
    from relay._exec._rules import Grant

    gate = Gate(ExecRules("untrusted", "workspace-write"), key=b"k" * 32, session_id="s")
    grant = Grant(("shell", "touch", "a"), "untrusted", "workspace-write")
    made = gate.record("c1", relay.ReviewDecision.APPROVED_FOR_SESSION, grant)
    forged = attrs.evolve(made, command=("touch", "b"))
    unsealed = attrs.evolve(made, seal=None)
    older = ApprovalDecided("c2", relay.ReviewDecision.APPROVED_FOR_SESSION, ("ls",))
    other_session = attrs.evolve(gate, session_id="t")
    kept, problems = gate.kept([made, forged, unsealed, older])
    assert kept == [grant]
    assert len(problems) == 3 and all("is ignored" in text for text in problems)
    assert other_session.kept([made])[0] == []
    assert Gate(gate.rules, session_id="s").kept([made])[0] == []  # no key: nothing holds
