"""File changes and the plan through ``relay app-server``: the real command over pipes, the
scripted model calling ``apply_patch`` and ``update_plan`` (on by default for Codex's
clients), every line checked against Codex 0.169's schema (:mod:`.client`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .client import AppServer, app_server, write_script
from .test_approvals import answer, text


def patch_call(call_id: str, body: str) -> dict[str, Any]:
    patch = f"*** Begin Patch\n{body}*** End Patch\n"
    return {
        "function_call": {"name": "apply_patch", "arguments": {"input": patch}, "call_id": call_id}
    }


def plan_call(call_id: str, *steps: tuple[str, str]) -> dict[str, Any]:
    plan = [{"step": step, "status": status} for step, status in steps]
    return {
        "function_call": {"name": "update_plan", "arguments": {"plan": plan}, "call_id": call_id}
    }


def start(server: AppServer, cwd: Path, policy: str) -> str:
    server.initialize()
    started = server.call(
        "thread/start", {"cwd": str(cwd), "approvalPolicy": policy, "ephemeral": True}
    )
    server.next("thread/started")
    thread: str = started["thread"]["id"]
    return thread


def test_a_patch_is_a_file_change_with_the_turns_diff(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    script = write_script(
        tmp_path / "model.json",
        plan_call("c0", ("edit", "in_progress"), ("check", "pending")),
        patch_call("c1", "*** Update File: a.txt\n@@\n one\n-two\n+TWO\n*** Add File: b.txt\n+b\n"),
        "edited",
    )
    with app_server("--model-script", str(script), cwd=tmp_path) as server:
        thread = start(server, tmp_path, "never")
        server.call("turn/start", {"threadId": thread, "input": text("edit")})
        seen = server.until("turn/completed")
    plan = next(m["params"] for m in seen if m.get("method") == "turn/plan/updated")
    assert plan["plan"] == [
        {"step": "edit", "status": "inProgress"},
        {"step": "check", "status": "pending"},
    ]
    changes = [
        m["params"]["item"]
        for m in seen
        if m.get("method") in ("item/started", "item/completed")
        and m["params"]["item"]["type"] == "fileChange"
    ]
    assert [c["status"] for c in changes] == ["inProgress", "completed"]
    done = changes[-1]["changes"]
    assert [(Path(c["path"]).name, c["kind"]["type"]) for c in done] == [
        ("a.txt", "update"),
        ("b.txt", "add"),
    ]
    assert "-two\n+TWO\n" in done[0]["diff"]
    diff = next(m["params"]["diff"] for m in seen if m.get("method") == "turn/diff/updated")
    assert "--- a/a.txt\n+++ b/a.txt\n" in diff and "+++ b/b.txt\n" in diff
    # No item for the plan's call or the patch's call besides the file change.
    assert not [
        m
        for m in seen
        if m.get("method") == "item/started" and m["params"]["item"]["type"] == "dynamicToolCall"
    ]
    assert (tmp_path / "a.txt").read_text() == "one\nTWO\n"


def test_a_patch_asks_under_untrusted_and_a_declined_one_writes_nothing(tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "model.json",
        patch_call("c1", "*** Add File: yes.txt\n+y\n"),
        patch_call("c2", "*** Add File: no.txt\n+n\n"),
        "done",
    )
    with app_server("--model-script", str(script), cwd=tmp_path) as server:
        thread = start(server, tmp_path, "untrusted")
        server.call("turn/start", {"threadId": thread, "input": text("edit")})
        for decision in ("accept", "decline"):
            request = server.wait(
                lambda m: (
                    m.get("method") == "item/fileChange/requestApproval"
                    and m["params"]["threadId"] == thread
                )
            )
            assert request["params"]["reason"]
            answer(server, request, decision)
            server.next("serverRequest/resolved", threadId=thread)
        seen = server.until("turn/completed")
        assert server.close_input() == 0
    assert (tmp_path / "yes.txt").read_text() == "y\n" and not (tmp_path / "no.txt").exists()
    ended = [
        m["params"]["item"]
        for m in seen
        if m.get("method") == "item/completed" and m["params"]["item"]["type"] == "fileChange"
    ]
    assert ended[-1]["id"] == "c2" and ended[-1]["status"] == "declined"
