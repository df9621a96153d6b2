"""``relay resume`` and ``relay exec resume`` keep the rules the session recorded, but for the
parts the command line chooses (``-c``, ``-s``, ``--add-dir``), and warn when those loosen
them; a ``--config`` file is no such choice (docs/approvals.md, Rules on resume). The real
command, the scripted model, the real sandbox."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from relay._base._codec import converter
from relay._base._exec_rules import ExecRules
from tests.cli.test_approvals_cli import TURN, asked, decide, requests, script, shell
from tests.cli.test_cli import events, relay
from tests.sandboxing import needs_bwrap

#: The rules the first run chooses: every command asks, and writes only in the workspace (the
#: tests' folders are under /tmp, which workspace-write would otherwise make writable).
STRICT = [
    "-c",
    "approval_policy=untrusted",
    "-s",
    "workspace-write",
    "-c",
    "sandbox_workspace_write.exclude_slash_tmp=true",
    "-c",
    "sandbox_workspace_write.exclude_tmpdir_env_var=true",
]
SHELL = ["-c", "tools.shell=true"]
#: A command that writes in the workspace and beside it.
WRITES = ("sh", "-c", "echo in > inside; echo out > ../outside")
ASKED = "approval policy untrusted: the command is not read-only"


def model(path: Path, *replies: Any) -> str:
    path.write_text(json.dumps({"responses": [*replies, "done"]}), encoding="utf-8")
    return str(path)


def start(tmp_path: Path, work: Path) -> str:
    """A session run with :data:`STRICT` by ``relay exec``; its id."""
    result = relay(
        "exec", "--events", "--model-script", model(tmp_path / "m0.json"),
        "--rollout-dir", str(tmp_path / "r"), *SHELL, *STRICT, "hello",
        cwd=work,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    session_id: str = events(result.stdout)[0]["msg"]["session_id"]
    return session_id


def exec_resume(
    tmp_path: Path, work: Path, session_id: str, *options: str, replies: list[Any]
) -> tuple[list[dict[str, Any]], str]:
    """``relay exec --events … resume SESSION go``: its events and its stderr."""
    result = relay(
        "exec", "--events", "--model-script", model(tmp_path / "m1.json", *replies),
        "--rollout-dir", str(tmp_path / "r"), *SHELL, *options, "resume", session_id, "go",
        cwd=work,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return events(result.stdout), result.stderr


def workspace(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def warnings(out: list[dict[str, Any]]) -> list[str]:
    return [e["msg"]["message"] for e in out if e["msg"]["type"] == "warning"]


def test_exec_resume_without_flags_keeps_the_recorded_policy(tmp_path: Path) -> None:
    needs_bwrap()
    work = workspace(tmp_path)
    session_id = start(tmp_path, work)
    out, stderr = exec_resume(tmp_path, work, session_id, replies=[shell("c1", "touch", "made")])
    # relay exec denies what asks when it has no terminal: the command never ran.
    assert [request["reason"] for request in requests(out)] == [ASKED]
    assert not (work / "made").exists()
    assert warnings(out) == [] and "loosens" not in stderr


def test_exec_resume_with_a_policy_keeps_the_recorded_sandbox_and_warns(tmp_path: Path) -> None:
    needs_bwrap()
    work = workspace(tmp_path)
    session_id = start(tmp_path, work)
    out, stderr = exec_resume(
        tmp_path, work, session_id, "-c", "approval_policy=never",
        replies=[shell("c1", *WRITES)],
    )  # fmt: skip
    assert requests(out) == []  # the policy given: nothing asks
    assert (work / "inside").read_text() == "in\n"
    assert not (tmp_path / "outside").exists()  # the recorded sandbox: the workspace only
    (warning,) = warnings(out)
    assert warning == (
        "this resume loosens the session's recorded rules: approval_policy 'untrusted' "
        "became 'never'"
    )
    assert f"relay: warning: {warning}\n" in stderr


def test_exec_resume_with_a_sandbox_keeps_the_recorded_policy(tmp_path: Path) -> None:
    needs_bwrap()
    work = workspace(tmp_path)
    session_id = start(tmp_path, work)
    out, stderr = exec_resume(
        tmp_path, work, session_id, "-s", "danger-full-access",
        replies=[shell("c1", "touch", "made")],
    )  # fmt: skip
    assert [request["reason"] for request in requests(out)] == [ASKED]
    (warning,) = warnings(out)
    assert "sandbox_mode 'workspace-write' became 'danger-full-access'" in warning
    assert f"relay: warning: {warning}\n" in stderr


def test_exec_resume_add_dir_adds_to_the_recorded_roots(tmp_path: Path) -> None:
    needs_bwrap()
    work = workspace(tmp_path)
    extra = tmp_path / "extra"
    extra.mkdir()
    session_id = start(tmp_path, work)
    out, _ = exec_resume(
        tmp_path, work, session_id, "-c", "approval_policy=never", "--add-dir", str(extra),
        replies=[shell("c1", "sh", "-c", "echo x > ../extra/made; echo y > ../outside")],
    )  # fmt: skip
    assert (extra / "made").read_text() == "x\n"
    assert not (tmp_path / "outside").exists()  # the recorded sandbox, one root more
    (warning,) = warnings(out)
    assert warning.endswith(f"; writable roots were added: {extra}")


def test_a_config_file_does_not_change_the_recorded_rules(tmp_path: Path) -> None:
    needs_bwrap()
    work = workspace(tmp_path)
    session_id = start(tmp_path, work)
    config = tmp_path / "config.toml"
    config.write_text('approval_policy = "never"\nsandbox_mode = "danger-full-access"\n')
    out, stderr = exec_resume(
        tmp_path, work, session_id, "--config", str(config),
        replies=[shell("c1", "touch", "made")],
    )  # fmt: skip
    assert [request["reason"] for request in requests(out)] == [ASKED]
    assert warnings(out) == [] and "loosens" not in stderr


def test_relay_resume_without_flags_keeps_the_recorded_rules(tmp_path: Path) -> None:
    needs_bwrap()
    work = workspace(tmp_path)
    start(tmp_path, work)
    (path,) = (tmp_path / "r").rglob("rollout-*.jsonl")
    lines = [TURN, asked("c1"), decide("c1", "approved"), {"wait_for": {"type": "turn_complete"}}]
    result = relay(
        "resume", str(path), script(tmp_path, *lines),
        "--model-script", model(tmp_path / "m1.json", shell("c1", *WRITES)), *SHELL,
        cwd=work,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = events(result.stdout)
    assert [request["reason"] for request in requests(out)] == [ASKED]
    # Approved, it ran in the recorded sandbox.
    assert (work / "inside").read_text() == "in\n"
    assert not (tmp_path / "outside").exists()


def write_rollout(root: Path, work: Path, rules: ExecRules | None) -> str:
    """A rollout written by hand under ``root``: the session ``s-recorded``, with ``rules``."""
    folder = root / "2026" / "01" / "02"
    folder.mkdir(parents=True)
    stamp = "2026-01-02T03:04:05.000Z"
    meta = {"id": "s-recorded", "cwd": str(work), "model": "m", "model_provider": "scripted"}
    lines = [{"timestamp": stamp, "type": "session_meta", "payload": meta}]
    if rules is not None:
        lines.append({"timestamp": stamp, "type": "rules", "payload": converter.unstructure(rules)})
    path = folder / "rollout-2026-01-02T03-04-05-s-recorded.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return "s-recorded"


def test_a_rules_line_is_kept_and_a_rollout_without_one_resumes_as_before(
    tmp_path: Path,
) -> None:
    needs_bwrap()
    work = workspace(tmp_path)
    rules = ExecRules("untrusted", "workspace-write", exclude_slash_tmp=True)
    session_id = write_rollout(tmp_path / "r", work, rules)
    out, _ = exec_resume(tmp_path, work, session_id, replies=[shell("c1", "touch", "made")])
    assert [request["reason"] for request in requests(out)] == [ASKED]
    assert not (work / "made").exists()
    old = tmp_path / "old"
    old.mkdir()
    session_id = write_rollout(old / "r", work, None)
    out, _ = exec_resume(old, work, session_id, replies=[shell("c1", "touch", "made")])
    assert requests(out) == []  # the configuration's rules: on-request, no sandbox
    assert (work / "made").exists()
