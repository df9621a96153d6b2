"""The sandbox in a session: ``shell`` and hook commands run in it, an interrupt leaves nothing
of it, and a session whose mode needs a sandbox relay cannot make does not open
(docs/approvals.md)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

import relay
from relay import testing
from relay._base._exec_rules import ExecRules
from relay._core._exec_gate import Gate
from relay._core._hooks import HookInput, run_hook_command
from tests.escapees import alive, escape_argv, wait_gone
from tests.sandboxing import needs_bwrap, processes_with, workspace_only


def shell_call(call_id: str, argv: list[str]) -> dict[str, Any]:
    return {"function_call": {"name": "shell", "arguments": {"argv": argv}, "call_id": call_id}}


def confined_config(work: Path, mode: str = "workspace-write", **more: Any) -> relay.Config:
    more.setdefault("tools", {"shell": True})
    return relay.Config(
        cwd=str(work),
        rollout=relay.RolloutConfig(enabled=False),
        sandbox_mode=mode,  # type: ignore[arg-type]
        # The tests' folders are under /tmp, which the mode makes writable by default.
        sandbox_workspace_write=relay.SandboxWorkspaceWrite(
            exclude_slash_tmp=True, exclude_tmpdir_env_var=True
        ),
        **more,
    )


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


async def test_the_models_commands_write_only_in_the_workspace(tmp_path: Path, work: Path) -> None:
    needs_bwrap()
    outside = tmp_path / "outside"
    outside.mkdir()
    script = {
        "responses": [
            shell_call("in", ["sh", "-c", "echo inside > made"]),
            shell_call("out", ["sh", "-c", f"echo outside > {outside}/made"]),
            {"text": "done"},
        ]
    }
    async with testing.open_test_session(script, config=confined_config(work)) as t:
        await t.turns("write both")
    outputs = {
        item.call_id: item.output
        for item in t.session.history.items
        if isinstance(item, relay.FunctionCallOutput)
    }
    assert outputs["in"] == "\n[exit code 0]"
    assert (work / "made").read_text() == "inside\n"
    assert "Read-only file system" in outputs["out"]
    assert outputs["out"].endswith("[exit code 2]")
    assert not (outside / "made").exists()


async def test_an_interrupt_leaves_nothing_of_a_sandboxed_command(work: Path) -> None:
    needs_bwrap()
    marker = f"relay-escapee-{uuid.uuid4().hex}"
    fifo = work / "pid.fifo"
    os.mkfifo(fifo)
    script = {
        "responses": [shell_call("sh1", escape_argv(str(fifo), marker, "wait")), {"text": "ok"}]
    }
    async with testing.open_test_session(script, config=confined_config(work)) as t:
        await t.turn("run it", id="t1")
        async with await trio.open_file(fifo) as reader:
            await reader.read()  # the daemon has left the command's session, holding the lock
        assert len(processes_with(marker)) >= 2  # the command and the daemon it left behind
        assert alive(fifo)
        await t.submit(relay.Interrupt())
        await t.wait_for(relay.TurnAborted)
        await wait_gone(fifo, marker=marker)
    assert relay.FunctionCallOutput("sh1", "aborted") in t.session.history.items
    assert processes_with(marker) == []


async def test_a_hook_command_runs_in_the_sandbox(tmp_path: Path, work: Path) -> None:
    bwrap = needs_bwrap()
    outside = tmp_path / "outside"
    outside.mkdir()
    info = HookInput("s1", "t1", str(work), None, "m", "manual", "pre_compact")
    hook = relay.HookCommand(["sh", "-c", f"echo x > {outside}/hook"])
    rules = ExecRules(
        sandbox_mode="workspace-write", exclude_tmpdir_env_var=True, exclude_slash_tmp=True
    )
    gate = Gate(rules, sandbox=workspace_only(bwrap))
    confined = await run_hook_command(hook, info, start=gate.open_hook)
    assert confined.outcome == "failed"
    assert "Read-only file system" in confined.problem
    assert not (outside / "hook").exists()
    inside = relay.HookCommand(["sh", "-c", "cat > hook-input"])
    assert (await run_hook_command(inside, info, start=gate.open_hook)).outcome == "continue"
    assert '"session_id": "s1"' in (work / "hook-input").read_text()
    assert (await run_hook_command(hook, info)).outcome == "continue"
    assert (outside / "hook").read_text() == "x\n"


async def test_a_sessions_hook_commands_run_in_its_sandbox(tmp_path: Path, work: Path) -> None:
    needs_bwrap()
    outside = tmp_path / "outside"
    outside.mkdir()
    hooks = relay.Hooks(pre_compact=[relay.HookCommand(["sh", "-c", f"echo x > {outside}/h"])])
    config = confined_config(work, tools={}, hooks=hooks)
    script = {"responses": [{"text": "hello"}, {"text": "the summary"}]}
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("hi")
        await t.submit(relay.Compact(), id="c1")
        completed = await t.wait_for(relay.HookCompleted)
    assert isinstance(completed.msg, relay.HookCompleted)
    assert completed.msg.outcome == "failed"
    assert not (outside / "h").exists()


# ------------------------------------------------------------------ no silent fallback


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_a_session_whose_sandbox_cannot_be_made_does_not_open(
    work: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(relay.ConfigError) as caught:
        async with testing.open_test_session(config=confined_config(work, mode)):
            pass
    message = str(caught.value)
    assert message.startswith(f'sandbox_mode = "{mode}" with shell: the sandbox needs bubblewrap')
    assert "apt-get install bubblewrap" in message
    hooks = relay.Hooks(post_compact=[relay.HookCommand(["true"])])
    with pytest.raises(relay.ConfigError, match="with hook commands: the sandbox needs"):
        async with testing.open_test_session(
            config=confined_config(work, mode, tools={}, hooks=hooks)
        ):
            pass


async def test_without_commands_or_in_full_access_no_sandbox_is_needed(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    async with testing.open_test_session(config=confined_config(work, tools={})) as t:
        await t.shutdown()
    config = confined_config(work, "danger-full-access")
    async with testing.open_test_session(config=config) as t:
        await t.shutdown()
