"""Codex's TypeScript SDK reads relay's file changes and plan: a turn whose model calls
``apply_patch`` and ``update_plan`` ends with a ``file_change`` item and a ``todo_list`` among
the SDK's items, as Codex's clients expect (docs/codex-compat.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .test_sdk import drive, node, serve  # noqa: F401 (the node fixture)

pytestmark = pytest.mark.slow  # node, relay and a model server


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"function_call": {"name": name, "arguments": arguments, "call_id": call_id}}


def test_a_patch_and_a_plan_reach_the_sdk_as_codexs_items(node: str, tmp_path: Path) -> None:  # noqa: F811
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("one\ntwo\n")
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+TWO\n*** End Patch\n"
    plan = [{"step": "edit a.txt", "status": "in_progress"}]
    done = [{"step": "edit a.txt", "status": "completed"}]
    responses = [
        call("update_plan", {"plan": plan}, "c0"),
        call("apply_patch", {"input": patch}, "c1"),
        call("update_plan", {"plan": done}, "c2"),
        {"text": "Edited."},
    ]
    with serve(tmp_path, responses) as (url, _):
        turn = drive(node, "relay", "run", url, tmp_path)
    assert turn["finalResponse"] == "Edited."
    assert (work / "a.txt").read_text() == "one\nTWO\n"
    kinds = {item["type"]: item for item in turn["items"]}
    change = kinds["file_change"]
    assert change["status"] == "completed"
    assert change["changes"] == [{"path": str(work / "a.txt"), "kind": "update"}]
    assert kinds["todo_list"]["items"] == [{"text": "edit a.txt", "completed": True}]
    # The calls themselves are no items of their own.
    assert all(item["type"] != "mcp_tool_call" for item in turn["items"])
