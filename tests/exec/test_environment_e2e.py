"""The environment a command sees, end to end: a real session whose model calls ``shell`` with
``env``, and a hook command that reports its environment, in each sandbox mode, with
credentials in relay's environment and ``[shell_environment_policy]`` set (docs/approvals.md).
The sandboxed modes skip, saying why, where bwrap cannot run; required in CI."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import relay
from relay import testing
from relay._base._environment_config import ShellEnvironmentPolicy
from relay.testing import turn_ended
from tests.sandboxing import needs_bwrap

GITHUB_TOKEN = "ghp-e2e-4k7Qz2mW9xR1tY6uP3sD"
AWS_SECRET = "aws-e2e-8Jf5Lq0Vn3Hc7Gb2Xe6Ro"
#: What relay's own provider key is, in the test that has one.
PROVIDER_KEY = "sk-e2e-provider-1Nw5Tz8Qa3Ky"
KEPT = "kept-e2e-value"

MODES = ["danger-full-access", "read-only", "workspace-write"]

#: A hook command that stops the compaction, giving the environment it was started with as the
#: reason: how a hook shows what it got in every mode, ``read-only`` (where it cannot write a
#: file) included. Read from ``/proc/self/environ``, as Python may add to ``os.environ`` (a
#: locale it coerces).
REPORT_ENVIRONMENT = relay.HookCommand(
    [
        sys.executable,
        "-I",
        "-c",
        "import json\n"
        "raw = open('/proc/self/environ', 'rb').read().decode()\n"
        "given = dict(e.split('=', 1) for e in raw.split('\\0') if e)\n"
        "print(json.dumps({'decision': 'stop', 'reason': json.dumps(given)}))",
    ]
)


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    chosen: str = request.param
    if chosen != "danger-full-access":
        needs_bwrap()
    return chosen


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials in relay's environment, as a developer's shell holds them."""
    monkeypatch.setenv("GITHUB_TOKEN", GITHUB_TOKEN)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
    monkeypatch.setenv("RELAY_E2E_KEPT", KEPT)


def config(
    tmp_path: Path, mode: str, policy: ShellEnvironmentPolicy, **changes: Any
) -> relay.Config:
    return relay.Config(
        tools={"shell": True},
        cwd=str(tmp_path),
        rollout=relay.RolloutConfig(enabled=False),
        approval_policy="never",
        sandbox_mode=mode,  # type: ignore[arg-type]
        sandbox_workspace_write=relay.SandboxWorkspaceWrite(
            exclude_tmpdir_env_var=True, exclude_slash_tmp=True
        ),
        shell_environment_policy=policy,
        **changes,
    )


ENV_CALL = {
    "function_call": {"name": "shell", "arguments": {"argv": ["/usr/bin/env"]}, "call_id": "env"}
}


def env_output(history: list[relay.ResponseItem]) -> str:
    (output,) = [
        item.output
        for item in history
        if isinstance(item, relay.FunctionCallOutput) and item.call_id == "env"
    ]
    assert "[exit code 0]" in output, output
    return output


def variables(printed: str) -> dict[str, str]:
    """The variables ``env`` printed (one ``NAME=value`` a line)."""
    return dict(
        line.split("=", 1)
        for line in printed.splitlines()
        if re.match(r"[A-Za-z_][A-Za-z0-9_]*=", line)
    )


def without_pwd(seen: dict[str, str], mode: str, cwd: Path) -> dict[str, str]:
    """``seen`` without the ``PWD`` bubblewrap sets to the working directory of every command it
    starts (the sandboxed modes'): the rest is what the policy made."""
    if mode != "danger-full-access":
        assert seen.pop("PWD") == str(cwd)
    return seen


async def shell_env(tmp_path: Path, mode: str, policy: ShellEnvironmentPolicy) -> str:
    """What ``env`` printed, run by the model through ``shell`` in a session of ``policy``."""
    script = {"responses": [ENV_CALL, {"text": "done"}]}
    async with testing.open_test_session(script, config=config(tmp_path, mode, policy)) as t:
        await t.turns("print the environment")
        history = list(t.session.history.items)
    return env_output(history)


async def hook_env(tmp_path: Path, mode: str, policy: ShellEnvironmentPolicy) -> dict[str, str]:
    """The environment a ``pre_compact`` hook command got in a session of ``policy``."""
    hooks = relay.Hooks(pre_compact=[REPORT_ENVIRONMENT])
    cfg = config(tmp_path, mode, policy, hooks=hooks)
    async with testing.open_test_session(config=cfg) as t:
        await t.turns("hi")
        await t.session.submit(relay.Compact(), id="c1")
        await t.wait_for(turn_ended, 2)
    (note,) = [
        e.msg
        for e in t.recorder.events
        if e.id == "c1" and isinstance(e.msg, relay.BackgroundEvent)
    ]
    reported: dict[str, str] = json.loads(note.message.split("stopped the turn: ", 1)[1])
    return reported


# ----------------------------------------------------------------------------- shell


async def test_the_default_excludes_keep_credentials_from_a_command(
    tmp_path: Path, mode: str
) -> None:
    printed = await shell_env(tmp_path, mode, ShellEnvironmentPolicy(ignore_default_excludes=False))
    assert GITHUB_TOKEN not in printed and AWS_SECRET not in printed
    seen = variables(printed)
    assert "GITHUB_TOKEN" not in seen and "AWS_SECRET_ACCESS_KEY" not in seen
    assert seen["RELAY_E2E_KEPT"] == KEPT and "PATH" in seen


async def test_exclude_patterns_keep_credentials_from_a_command(tmp_path: Path, mode: str) -> None:
    policy = ShellEnvironmentPolicy(exclude=("github_*", "AWS_*"))
    printed = await shell_env(tmp_path, mode, policy)
    assert GITHUB_TOKEN not in printed and AWS_SECRET not in printed
    assert variables(printed)["RELAY_E2E_KEPT"] == KEPT


async def test_inherit_none_gives_a_command_only_what_set_says(tmp_path: Path, mode: str) -> None:
    policy = ShellEnvironmentPolicy(inherit="none", set={"CI": "1", "GITHUB_TOKEN": "mine"})
    seen = variables(await shell_env(tmp_path, mode, policy))
    assert without_pwd(seen, mode, tmp_path) == {"CI": "1", "GITHUB_TOKEN": "mine"}


async def test_include_only_is_all_a_command_gets(tmp_path: Path, mode: str) -> None:
    policy = ShellEnvironmentPolicy(set={"CI": "1", "DROPPED": "x"}, include_only=("PATH", "ci"))
    seen = without_pwd(variables(await shell_env(tmp_path, mode, policy)), mode, tmp_path)
    assert set(seen) == {"PATH", "CI"} and seen["CI"] == "1"


# ----------------------------------------------------------------------------- hooks


async def test_the_default_excludes_keep_credentials_from_a_hook(tmp_path: Path, mode: str) -> None:
    seen = await hook_env(tmp_path, mode, ShellEnvironmentPolicy(ignore_default_excludes=False))
    assert GITHUB_TOKEN not in seen.values() and AWS_SECRET not in seen.values()
    assert seen["RELAY_E2E_KEPT"] == KEPT


async def test_inherit_none_gives_a_hook_only_what_set_says(tmp_path: Path, mode: str) -> None:
    policy = ShellEnvironmentPolicy(inherit="none", set={"CI": "1"})
    seen = await hook_env(tmp_path, mode, policy)
    assert without_pwd(seen, mode, tmp_path) == {"CI": "1"}


async def test_include_only_is_all_a_hook_gets(tmp_path: Path, mode: str) -> None:
    policy = ShellEnvironmentPolicy(set={"CI": "1"}, include_only=("RELAY_E2E_*", "CI"))
    seen = await hook_env(tmp_path, mode, policy)
    assert without_pwd(seen, mode, tmp_path) == {"RELAY_E2E_KEPT": KEPT, "CI": "1"}


# ----------------------------------------------------------------------------- the API key


async def test_no_policy_lets_the_providers_key_through(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ignore_default_excludes``, ``include_only = ["*"]`` and a ``set`` of the key's own
    variable: the command and the hook still never get it."""
    monkeypatch.setenv("RELAY_E2E_PROVIDER_KEY", PROVIDER_KEY)
    policy = ShellEnvironmentPolicy(
        ignore_default_excludes=True,
        include_only=("*",),
        set={"RELAY_E2E_PROVIDER_KEY": "set-by-the-policy"},
    )
    script = {"responses": [ENV_CALL, {"text": "done"}]}
    async with testing.open_mock_server(script) as server:
        cfg = config(
            tmp_path,
            mode,
            policy,
            model="gpt-test",
            model_provider="keyed",
            model_providers={
                "keyed": relay.ProviderConfig(
                    name="keyed", base_url=server.base_url, env_key="RELAY_E2E_PROVIDER_KEY"
                )
            },
            hooks=relay.Hooks(pre_compact=[REPORT_ENVIRONMENT]),
        )
        async with relay.open_session(cfg, clock=testing.fixed_clock) as session:
            recorder = testing.EventRecorder()
            async with anyio.create_task_group() as tg:
                tg.start_soon(recorder.consume, session)
                await session.submit(relay.UserTurn(items=[relay.Text("env")]))
                await recorder.wait_for(turn_ended)
                await session.submit(relay.Compact(), id="c1")
                await recorder.wait_for(turn_ended, 2)
                await session.submit(relay.Shutdown())
            history = list(session.history.items)
    printed = env_output(history)
    assert "RELAY_E2E_PROVIDER_KEY" not in variables(printed)
    assert PROVIDER_KEY not in printed and "set-by-the-policy" not in printed
    assert variables(printed)["GITHUB_TOKEN"] == GITHUB_TOKEN  # the policy let the rest through
    (note,) = [
        e.msg for e in recorder.events if e.id == "c1" and isinstance(e.msg, relay.BackgroundEvent)
    ]
    hook_saw = json.loads(note.message.split("stopped the turn: ", 1)[1])
    assert "RELAY_E2E_PROVIDER_KEY" not in hook_saw and hook_saw["RELAY_E2E_KEPT"] == KEPT
