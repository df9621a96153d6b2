"""``apply_patch`` in a session: a patch is written whole or not at all, reported with each
file's diff and the turn's diff, and passes the session's gate, which may ask first or refuse
(docs/tools.md, docs/approvals.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import relay
from relay import testing
from relay._base import _protocol as p
from relay._base._config import relay_home


def patch_call(call_id: str, body: str) -> dict[str, Any]:
    text = f"*** Begin Patch\n{body}*** End Patch\n"
    return {
        "function_call": {"name": "apply_patch", "arguments": {"input": text}, "call_id": call_id}
    }


def config_in(work: Path, **more: Any) -> relay.Config:
    more.setdefault("tools", {"apply_patch": True})
    return relay.Config(cwd=str(work), rollout=relay.RolloutConfig(enabled=False), **more)


Decider = Callable[[Any], p.ReviewDecision]


async def run(
    work: Path, *calls: dict[str, Any], on_approval: Decider | None = None, **more: Any
) -> testing.TestSession:
    script = {"responses": [*calls, {"text": "done"}]}
    config = config_in(work, **more)
    async with testing.open_test_session(script, config=config, on_approval=on_approval) as t:
        await t.turns("edit")
    return t


def outputs(t: testing.TestSession) -> dict[str, str]:
    return {
        item.call_id: item.output
        for item in t.session.history.items
        if isinstance(item, p.FunctionCallOutput)
    }


def results(t: testing.TestSession) -> dict[str, p.ToolResult | None]:
    return {
        m.item.id: m.item.result
        for m in t.recorder.of_type(relay.ItemCompleted)
        if isinstance(m.item, p.ToolCallItem)
    }


def asked(requests: list[Any], decision: str) -> Decider:
    def decide(request: Any) -> p.ReviewDecision:
        requests.append(request)
        return p.ReviewDecision(decision)

    return decide


async def test_a_patch_adds_updates_moves_and_deletes_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\nthree\n")
    (tmp_path / "old.txt").write_text("keep\n")
    (tmp_path / "gone.txt").write_text("bye\n")
    body = (
        "*** Add File: new.txt\n+hello\n"
        "*** Update File: a.txt\n@@\n one\n-two\n+TWO\n three\n"
        "*** Update File: old.txt\n*** Move to: moved.txt\n@@\n-keep\n+kept\n"
        "*** Delete File: gone.txt\n"
    )
    t = await run(tmp_path, patch_call("p1", body), features=relay.Features(work_state=True))
    assert (tmp_path / "new.txt").read_text() == "hello\n"
    assert (tmp_path / "a.txt").read_text() == "one\nTWO\nthree\n"
    assert (tmp_path / "moved.txt").read_text() == "kept\n" and not (tmp_path / "old.txt").exists()
    assert not (tmp_path / "gone.txt").exists()
    begin = t.recorder.of_type(p.PatchApplyBegin)[0]
    end = t.recorder.of_type(p.PatchApplyEnd)[0]
    assert end.success and begin.changes == end.changes and begin.auto_approved
    kinds = {Path(c.path).name: (c.kind.value, c.move_path) for c in end.changes}
    assert kinds == {
        "new.txt": ("add", None),
        "a.txt": ("update", None),
        "old.txt": ("update", str(tmp_path / "moved.txt")),
        "gone.txt": ("delete", None),
    }
    diff = t.recorder.of_type(p.TurnDiff)[0].unified_diff
    assert "-two\n+TWO\n" in diff and "+hello\n" in diff
    assert results(t)["p1"] == p.ToolResult(
        p.CallStatus.COMPLETED,
        duration_ms=results(t)["p1"].duration_ms,  # type: ignore[union-attr]
    )
    record = t.session.snapshot().work_state
    changed = sorted(e.text for e in record.entries if e.kind == "changed")
    assert any(text.endswith("a.txt updated") for text in changed)
    assert any("moved to" in text for text in changed)


async def test_a_patch_that_does_not_apply_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    (tmp_path / "b.txt").write_text("two\n")
    body = "*** Update File: a.txt\n@@\n-one\n+ONE\n*** Update File: b.txt\n@@\n-not there\n+x\n"
    t = await run(tmp_path, patch_call("p1", body))
    assert (tmp_path / "a.txt").read_text() == "one\n"
    assert (tmp_path / "b.txt").read_text() == "two\n"
    output = outputs(t)["p1"]
    assert output.startswith("error: ") and "b.txt" in output and "not there" in output
    result = results(t)["p1"]
    assert result is not None and result.status is p.CallStatus.FAILED
    assert t.recorder.of_type(p.PatchApplyBegin) == []


async def test_inside_the_workspace_a_patch_does_not_ask_outside_it_does(tmp_path: Path) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    requests: list[Any] = []
    t = await run(
        work,
        patch_call("in", "*** Add File: in.txt\n+x\n"),
        patch_call("out", f"*** Add File: {elsewhere}/out.txt\n+x\n"),
        patch_call("git", "*** Add File: .git/hooks/post-commit\n+x\n"),
        on_approval=asked(requests, "denied"),
        sandbox_mode="workspace-write",
        approval_policy="on-request",
        sandbox_workspace_write=relay.SandboxWorkspaceWrite(
            exclude_slash_tmp=True, exclude_tmpdir_env_var=True
        ),
    )
    assert (work / "in.txt").exists()
    assert not (elsewhere / "out.txt").exists() and not (work / ".git").exists()
    assert [r.call_id for r in requests] == ["out", "git"]
    assert all(isinstance(r, p.ApplyPatchApprovalRequest) for r in requests)
    assert "outside the writable folders" in (requests[0].reason or "")
    assert ".git" in (requests[1].reason or "")
    assert [results(t)[c].status for c in ("in", "out", "git")] == [  # type: ignore[union-attr]
        "completed",
        "declined",
        "declined",
    ]
    assert outputs(t)["out"].startswith("denied")


async def test_untrusted_asks_for_every_patch_and_a_grant_covers_its_files(tmp_path: Path) -> None:
    requests: list[Any] = []
    t = await run(
        tmp_path,
        patch_call("p1", "*** Add File: a.txt\n+1\n"),
        patch_call("p2", "*** Update File: a.txt\n@@\n-1\n+2\n"),
        patch_call("p3", "*** Add File: b.txt\n+1\n"),
        on_approval=asked(requests, "approved_for_session"),
        approval_policy="untrusted",
    )
    # The grant of p1 covers a.txt: p2 does not ask; b.txt is another file.
    assert [r.call_id for r in requests] == ["p1", "p3"]
    assert (tmp_path / "a.txt").read_text() == "2\n"
    assert (tmp_path / "b.txt").exists()
    assert all(r.status is p.CallStatus.COMPLETED for r in results(t).values() if r)


async def test_never_refuses_what_it_would_ask_and_writes_nothing(tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    t = await run(
        tmp_path,
        patch_call("p1", f"*** Add File: {outside}\n+x\n"),
        sandbox_mode="workspace-write",
        approval_policy="never",
        sandbox_workspace_write=relay.SandboxWorkspaceWrite(
            exclude_slash_tmp=True, exclude_tmpdir_env_var=True
        ),
    )
    assert not outside.exists()
    assert "the approval policy never asks" in outputs(t)["p1"]
    assert results(t)["p1"].status is p.CallStatus.DECLINED  # type: ignore[union-attr]


async def test_no_patch_writes_relays_own_files(tmp_path: Path) -> None:
    # Whatever the rules: relay's home holds its grant key and its sessions.
    forged = relay_home() / "forged.txt"
    t = await run(
        tmp_path,
        patch_call("p1", f"*** Add File: {forged}\n+x\n"),
        approval_policy="never",
        sandbox_mode="danger-full-access",
    )
    assert not forged.exists()
    assert "one of relay's own files" in outputs(t)["p1"]


async def test_a_patch_through_a_link_is_judged_where_it_lands(tmp_path: Path) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    (elsewhere / "target.txt").write_text("safe\n")
    (work / "link.txt").symlink_to(elsewhere / "target.txt")
    requests: list[Any] = []
    await run(
        work,
        patch_call("p1", "*** Update File: link.txt\n@@\n-safe\n+changed\n"),
        on_approval=asked(requests, "denied"),
        sandbox_mode="workspace-write",
        approval_policy="on-request",
        sandbox_workspace_write=relay.SandboxWorkspaceWrite(
            exclude_slash_tmp=True, exclude_tmpdir_env_var=True
        ),
    )
    assert [r.call_id for r in requests] == ["p1"]
    assert (elsewhere / "target.txt").read_text() == "safe\n"


async def test_a_patch_approval_op_answers_a_waiting_patch(tmp_path: Path) -> None:
    script = {"responses": [patch_call("p1", "*** Add File: a.txt\n+x\n"), {"text": "done"}]}
    config = config_in(tmp_path, approval_policy="untrusted")
    async with testing.open_test_session(script, config=config) as t:
        await t.turn("edit")
        request = await t.wait_for(p.ApplyPatchApprovalRequest)
        assert not (tmp_path / "a.txt").exists()
        await t.submit(p.PatchApproval(request.msg.call_id, "approved"))  # type: ignore[union-attr]
        await t.wait_for(relay.TurnComplete)
    assert (tmp_path / "a.txt").read_text() == "x\n"
    assert not t.recorder.of_type(p.PatchApplyBegin)[0].auto_approved


async def test_a_free_form_patch_call_is_applied_as_codex_offers_the_tool(tmp_path: Path) -> None:
    # Codex offers apply_patch to its models as a free-form tool: the call's input is the patch.
    patch = "*** Begin Patch\n*** Add File: free.txt\n+form\n*** End Patch\n"
    custom = {"type": "custom_tool_call", "call_id": "f1", "name": "apply_patch", "input": patch}
    t = await run(tmp_path, {"output": [custom]})
    assert (tmp_path / "free.txt").read_text() == "form\n"
    outputs = [i for i in t.session.history.items if isinstance(i, p.CustomToolCallOutput)]
    assert outputs[0].output.startswith("Patch applied.")
    assert t.recorder.of_type(p.PatchApplyEnd)[0].success
