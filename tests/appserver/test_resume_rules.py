"""``thread/resume`` keeps the rules the thread recorded, but for the ``approvalPolicy`` and
``sandbox`` the request gives, and warns when those loosen them (docs/approvals.md, Rules on
resume): the real command over pipes, every line checked against Codex 0.169's schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from relay._base._codec import converter
from relay._base._exec_rules import ExecRules

from .client import AppServer, app_server, write_script

SHELL = ("-c", "tools.shell=true")
LOOSENS = "this resume loosens the session's recorded rules: "
NEVER = f"{LOOSENS}approval_policy 'untrusted' became 'never'"


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def write_rollout(root: Path, work: Path, session_id: str, rules: ExecRules | None) -> None:
    """A rollout written by hand under ``root``: the session ``session_id``, with ``rules``."""
    folder = root / "2026" / "01" / "02"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = "2026-01-02T03:04:05.000Z"
    meta = {"id": session_id, "cwd": str(work), "model": "m", "model_provider": "scripted"}
    lines = [{"timestamp": stamp, "type": "session_meta", "payload": meta}]
    if rules is not None:
        lines.append({"timestamp": stamp, "type": "rules", "payload": converter.unstructure(rules)})
    path = folder / f"rollout-2026-01-02T03-04-05-{session_id}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def resume(server: AppServer, thread: str, **params: Any) -> dict[str, Any]:
    answer: dict[str, Any] = server.call("thread/resume", {"threadId": thread, **params})
    server.next("thread/started")
    return answer


def loosened(server: AppServer, thread: str) -> list[str]:
    """The ``warning`` notifications of ``thread`` read so far that say a resume loosened its
    rules (the notifications right after a resume's answer come before a turn's)."""
    server.call("turn/start", {"threadId": thread, "input": text("hi")})
    server.next("turn/completed", threadId=thread)
    return [
        message["params"]["message"]
        for message in server.seen
        if message.get("method") == "warning"
        and message["params"]["threadId"] == thread
        and message["params"]["message"].startswith(LOOSENS)
    ]


def test_a_resumed_thread_keeps_its_recorded_rules_but_for_those_asked(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    root = tmp_path / "sessions"
    strict = ExecRules("untrusted", "workspace-write", (str(tmp_path / "data"),))
    for thread in ("t-kept", "t-asked", "t-sandbox"):
        write_rollout(root, work, thread, strict)
    write_rollout(root, work, "t-old", None)
    script = write_script(tmp_path / "model.json", "ok")
    with app_server("--model-script", str(script), "--rollout-dir", str(root), cwd=work) as server:
        server.initialize()
        kept = resume(server, "t-kept")
        assert kept["approvalPolicy"] == "untrusted"
        assert kept["sandbox"] == {
            "type": "workspaceWrite",
            "writableRoots": [str(tmp_path / "data")],
            "networkAccess": False,
            "excludeTmpdirEnvVar": False,
            "excludeSlashTmp": False,
        }
        assert loosened(server, "t-kept") == []
        asked = resume(server, "t-asked", approvalPolicy="never")
        assert asked["approvalPolicy"] == "never"
        assert asked["sandbox"]["type"] == "workspaceWrite"
        assert loosened(server, "t-asked") == [
            f"{LOOSENS}approval_policy 'untrusted' became 'never'"
        ]
        sandbox = resume(server, "t-sandbox", sandbox="read-only")
        assert (sandbox["approvalPolicy"], sandbox["sandbox"]["type"]) == ("untrusted", "readOnly")
        assert loosened(server, "t-sandbox") == []  # tighter: nothing to warn of
        old = resume(server, "t-old")  # recorded by an older relay: the server's rules
        assert (old["approvalPolicy"], old["sandbox"]["type"]) == ("on-request", "dangerFullAccess")
        assert server.close_input() == 0


@pytest.mark.slow  # two servers, one after the other
def test_a_thread_resumed_after_a_restart_keeps_the_rules_it_started_with(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path / "model.json", "first answer", "second answer")
    rollouts = ("--rollout-dir", str(tmp_path / "sessions"))
    with app_server("--model-script", str(script), *rollouts, *SHELL, cwd=tmp_path) as server:
        server.initialize()
        started = server.call(
            "thread/start",
            {"cwd": str(tmp_path), "approvalPolicy": "untrusted", "sandbox": "workspace-write"},
        )
        thread = started["thread"]["id"]
        server.next("thread/started")
        server.call("turn/start", {"threadId": thread, "input": text("hi")})
        server.next("turn/completed", threadId=thread)
        assert server.close_input() == 0
    with app_server("--model-script", str(script), *rollouts, *SHELL, cwd=tmp_path) as server:
        server.initialize()
        resumed = resume(server, thread)
        assert resumed["approvalPolicy"] == "untrusted"
        assert resumed["sandbox"]["type"] == "workspaceWrite"
        assert resumed["sandbox"] == started["sandbox"]
        assert loosened(server, thread) == []
        assert server.close_input() == 0
    with app_server("--model-script", str(script), *rollouts, *SHELL, cwd=tmp_path) as server:
        server.initialize()
        resumed = resume(server, thread, approvalPolicy="never")
        assert resumed["approvalPolicy"] == "never"
        assert resumed["sandbox"] == started["sandbox"]
        assert loosened(server, thread) == [NEVER]
        assert server.close_input() == 0
