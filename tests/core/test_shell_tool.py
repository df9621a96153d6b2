"""The ``shell`` tool as Codex's models call it (``command``, ``workdir``), its output as it
comes (``exec_command_output_delta``), and how each call ended as data (``ToolResult``), which
the faces read instead of the output's text (docs/tools.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

import relay
from relay import testing
from relay._base import _protocol as p
from relay._base._codec import from_json, to_json
from relay._core._shell import _delta_sink, workdir_of
from relay._core._tools import ToolContext
from tests.sandboxing import needs_bwrap


def call(call_id: str, arguments: dict[str, Any], name: str = "shell") -> dict[str, Any]:
    return {"function_call": {"name": name, "arguments": arguments, "call_id": call_id}}


def config_in(work: Path, **more: Any) -> relay.Config:
    more.setdefault("tools", {"shell": True})
    return relay.Config(cwd=str(work), rollout=relay.RolloutConfig(enabled=False), **more)


async def run_calls(work: Path, *calls: dict[str, Any], **more: Any) -> testing.TestSession:
    script = {"responses": [*calls, {"text": "done"}]}
    async with testing.open_test_session(script, config=config_in(work, **more)) as t:
        await t.turns("go")
    return t


def completed(t: testing.TestSession) -> dict[str, p.ToolCallItem]:
    return {
        m.item.id: m.item
        for m in t.recorder.of_type(relay.ItemCompleted)
        if isinstance(m.item, p.ToolCallItem)
    }


def test_a_workdir_is_taken_from_the_working_directory() -> None:
    assert workdir_of("/w", None) == "/w"
    assert workdir_of("/w", "sub/x") == "/w/sub/x"
    assert workdir_of("/w", "../y") == "/y"
    assert workdir_of("/w", "/abs") == "/abs"


async def test_codexs_arguments_run_the_command_in_the_workdir(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    t = await run_calls(
        tmp_path,
        call("a", {"command": ["pwd", "-P"], "workdir": "sub", "timeout_ms": 5000}),
        call("b", {"argv": ["pwd", "-P"]}),  # relay's older name is taken too
        call("c", {"command": ["true"], "workdir": "missing"}),
    )
    items = completed(t)
    assert items["a"].output == f"{(tmp_path / 'sub').resolve()}\n\n[exit code 0]"
    assert items["b"].output == f"{tmp_path.resolve()}\n\n[exit code 0]"
    assert items["c"].output == "error: workdir 'missing' is not a directory"


async def test_how_each_call_ended_is_reported_as_data(tmp_path: Path) -> None:
    slow = [sys.executable, "-c", "import time; time.sleep(30)"]
    t = await run_calls(
        tmp_path,
        call("ok", {"command": ["sh", "-c", "echo hi"]}),
        call("bad", {"command": ["sh", "-c", "echo no >&2; exit 4"]}),
        call("slow", {"command": slow, "timeout_ms": 300}),
        call("wrong", {"command": "ls"}),
        call("read", {"path": "nowhere"}, name="read_file"),
    )
    results = {call_id: item.result for call_id, item in completed(t).items()}
    ok, bad, slow_result = results["ok"], results["bad"], results["slow"]
    assert ok is not None and bad is not None and slow_result is not None
    assert (ok.status, ok.exit_code, ok.printed, ok.timed_out) == ("completed", 0, "hi\n", False)
    assert (bad.status, bad.exit_code, bad.printed) == ("failed", 4, "no\n")
    assert (slow_result.status, slow_result.exit_code, slow_result.timed_out) == (
        "failed",
        None,
        True,
    )
    # A call refused for its arguments ran nothing: how long the refusal took is the clock's.
    wrong = results["wrong"]
    assert wrong is not None and wrong.duration_ms is not None and wrong.duration_ms < 1000
    assert attrs.evolve(wrong, duration_ms=0) == p.ToolResult(p.CallStatus.FAILED, duration_ms=0)
    read = results["read"]
    assert read is not None and read.status is p.CallStatus.FAILED
    assert all(r is not None and r.duration_ms is not None for r in results.values())
    assert not ok.sandboxed


async def test_a_declined_call_is_declined_not_completed(tmp_path: Path) -> None:
    denied: list[str] = []

    async def deny(request: p.ExecApprovalRequest) -> p.ReviewDecision:
        denied.append(request.call_id)
        return p.ReviewDecision.DENIED

    script = {"responses": [call("asked", {"command": ["touch", "made"]}), {"text": "done"}]}
    config = config_in(tmp_path, approval_policy="untrusted")
    async with testing.open_test_session(script, config=config, on_approval=deny) as t:
        await t.turns("go")
    item = completed(t)["asked"]
    assert denied == ["asked"] and item.result == p.ToolResult(p.CallStatus.DECLINED)
    assert not (tmp_path / "made").exists()


async def test_the_output_goes_out_as_the_command_writes_it(tmp_path: Path) -> None:
    # The command writes a line, then waits for a file that only appears once the first
    # delta has been seen: a shell that buffered its output whole would never end.
    gate = tmp_path / "seen"
    program = (
        "import os, sys, time\n"
        "print('first', flush=True)\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.01)\n"
        "print('second', flush=True)\n"
    )
    script = {
        "responses": [
            call("s", {"command": [sys.executable, "-c", program], "timeout_ms": 20_000}),
            {"text": "done"},
        ]
    }
    async with testing.open_test_session(script, config=config_in(tmp_path)) as t:
        await t.turn("go")
        # Generous limits: the first line waits for a Python to start on a busy machine.
        await t.wait_for(lambda e: "first\n" in printed(t), timeout=60)
        assert "second" not in printed(t)
        gate.touch()
        await t.wait_for(relay.TurnComplete, timeout=60)
    deltas = [m for m in t.recorder.msgs if isinstance(m, p.ExecCommandOutputDelta)]
    assert all(d.call_id == "s" for d in deltas)
    assert "".join(d.chunk for d in deltas) == "first\nsecond\n"
    kinds = [type(m).__name__ for m in t.recorder.msgs]
    # Every delta comes between the call's start and its end.
    assert kinds.index("ItemStarted") < kinds.index("ExecCommandOutputDelta")
    last_delta = len(kinds) - 1 - kinds[::-1].index("ExecCommandOutputDelta")
    ends = [
        i
        for i, m in enumerate(t.recorder.msgs)
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, p.ToolCallItem)
    ]
    assert last_delta < ends[0]


def printed(t: testing.TestSession) -> str:
    """What the deltas of the session's commands carried so far."""
    return "".join(m.chunk for m in t.recorder.msgs if isinstance(m, p.ExecCommandOutputDelta))


def test_a_character_split_across_two_reads_goes_out_whole() -> None:
    sent: list[p.EventMsg] = []
    ctx = ToolContext("turn", "/", sent.append, call_id="c")
    sink = _delta_sink(ctx)
    word = "é∑x".encode()
    for one in (word[:1], word[1:3], word[3:]):
        sink(one)
    chunks = [m.chunk for m in sent if isinstance(m, p.ExecCommandOutputDelta)]
    assert chunks == ["é", "∑x"]


async def test_a_workdir_elsewhere_does_not_make_it_writable(tmp_path: Path) -> None:
    # The sandbox makes the session's working directory writable, wherever a call runs.
    needs_bwrap()
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    here = ["sh", "-c", "touch made-here"]
    there = ["sh", "-c", f"touch {work}/made-from-there"]
    t = await run_calls(
        work,
        call("here", {"command": here, "workdir": str(elsewhere)}),
        call("there", {"command": there, "workdir": str(elsewhere)}),
        sandbox_mode="workspace-write",
        approval_policy="never",
        sandbox_workspace_write=relay.SandboxWorkspaceWrite(
            exclude_slash_tmp=True, exclude_tmpdir_env_var=True
        ),
    )
    items = completed(t)
    assert not (elsewhere / "made-here").exists()
    assert (work / "made-from-there").exists()
    assert items["here"].result is not None and items["here"].result.sandboxed
    assert items["there"].result is not None and items["there"].result.status == "completed"


@pytest.mark.parametrize("name", ["command", "argv"])
def test_the_events_round_trip_as_json(name: str) -> None:
    item = p.ToolCallItem(
        "c",
        "shell",
        json.dumps({name: ["ls"]}),
        "x\n[exit code 0]",
        p.ToolResult(p.CallStatus.COMPLETED, 0, duration_ms=3, printed="x"),
    )
    event = p.Event("t", 4, p.ItemCompleted("t", item))
    assert from_json(json.loads(json.dumps(to_json(event))), p.Event) == event
