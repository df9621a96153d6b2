"""The sandbox from the command line: a mode whose sandbox cannot be made exits 2 before
anything runs, and ``shell`` writes only where the mode allows (docs/approvals.md)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli import relay
from tests.sandboxing import needs_bwrap

SHELL_SCRIPT = {
    "responses": [
        {
            "function_call": {
                "name": "shell",
                "arguments": {"argv": ["sh", "-c", "echo in > inside; echo out > ../outside"]},
                "call_id": "sh1",
            }
        },
        {"text": "done"},
    ]
}


def python_only_path() -> str:
    """A PATH with the Python that runs relay and no bwrap."""
    return os.path.dirname(sys.executable)


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
@pytest.mark.parametrize("command", ["run", "exec"])
def test_a_mode_whose_sandbox_cannot_be_made_exits_2(
    tmp_path: Path, mode: str, command: str
) -> None:
    model = tmp_path / "model.json"
    model.write_text(json.dumps(SHELL_SCRIPT))
    work = tmp_path / "work"
    work.mkdir()
    target = "-" if command == "run" else "write"
    script = '{"op": {"type": "user_input", "items": [{"type": "text", "text": "x"}]}}\n'
    result = relay(
        command,
        target,
        "--model-script",
        str(model),
        "-c",
        f"sandbox_mode={mode}",
        "-c",
        "tools.shell=true",
        "-c",
        "rollout.enabled=false",
        stdin=script if command == "run" else None,
        cwd=work,
        env={"PATH": python_only_path()},
    )
    assert result.returncode == 2, result.stderr
    assert f'sandbox_mode = "{mode}" with shell' in result.stderr
    assert "apt-get install bubblewrap" in result.stderr
    assert result.stdout == ""
    assert not (work / "inside").exists()
    assert not (tmp_path / "outside").exists()


def test_relay_exec_in_workspace_write_writes_only_in_the_workspace(tmp_path: Path) -> None:
    needs_bwrap()
    model = tmp_path / "model.json"
    model.write_text(json.dumps(SHELL_SCRIPT))
    work = tmp_path / "work"
    work.mkdir()
    result = relay(
        "exec",
        "write",
        "--model-script",
        str(model),
        "-c",
        "sandbox_mode=workspace-write",
        "-c",
        "sandbox_workspace_write.exclude_slash_tmp=true",
        "-c",
        "sandbox_workspace_write.exclude_tmpdir_env_var=true",
        "-c",
        "tools.shell=true",
        "-c",
        "rollout.enabled=false",
        cwd=work,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "done\n"
    assert (work / "inside").read_text() == "in\n"
    assert not (tmp_path / "outside").exists()
