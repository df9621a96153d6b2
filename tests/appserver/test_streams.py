"""What streams through ``relay app-server`` as it comes: a command's output
(``item/commandExecution/outputDelta``) between its item's start and end, checked against Codex
0.169's schema (:mod:`.client`)."""

from __future__ import annotations

import sys
from pathlib import Path

from .client import app_server, write_script
from .test_approvals import SHELL, shell, text


def test_a_commands_output_streams_before_its_item_ends(tmp_path: Path) -> None:
    program = "import sys; print('one', flush=True); print('two', flush=True)"
    script = write_script(
        tmp_path / "model.json", shell(sys.executable, "-c", program, call_id="c1"), "ran"
    )
    with app_server("--model-script", str(script), *SHELL, cwd=tmp_path) as server:
        server.initialize()
        started = server.call("thread/start", {"cwd": str(tmp_path), "ephemeral": True})
        thread = started["thread"]["id"]
        server.call("turn/start", {"threadId": thread, "input": text("go")})
        seen = server.until("turn/completed")
    kinds = [
        (m["method"], m["params"].get("item", {}).get("type"))
        for m in seen
        if m.get("method", "").startswith("item/")
    ]
    deltas = [m["params"] for m in seen if m.get("method") == "item/commandExecution/outputDelta"]
    assert "".join(d["delta"] for d in deltas) == "one\ntwo\n"
    assert all(d["itemId"] == "c1" and d["threadId"] == thread for d in deltas)
    first = kinds.index(("item/commandExecution/outputDelta", None))
    assert kinds.index(("item/started", "commandExecution")) < first
    assert first < kinds.index(("item/completed", "commandExecution"))
    item = next(
        m["params"]["item"]
        for m in seen
        if m.get("method") == "item/completed" and m["params"]["item"]["type"] == "commandExecution"
    )
    assert (item["aggregatedOutput"], item["exitCode"], item["status"]) == (
        "one\ntwo\n",
        0,
        "completed",
    )
    assert isinstance(item["durationMs"], int)
