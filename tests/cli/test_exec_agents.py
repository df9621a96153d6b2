"""Sub-agents in ``relay exec --json``: the root's sub-agent calls are Codex's
``collab_tool_call`` items, its descendants' own events write nothing, and the usage of the
root's turn is the whole tree's. End to end (a model script per session, over loopback) and
as the pure fold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from relay._base import _protocol as p
from relay._cli._codex_stream import CodexExecStream
from tests.appserver.agent_model import agent_model

TIMEOUT = 60
AGENTS = ("-c", "features.multi_agent=true")


def call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return {"function_call": {"name": name, "arguments": arguments, "call_id": call_id}}


def exec_json(*args: str, cwd: Path, prompt: str) -> list[dict[str, Any]]:
    environment = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY",)}
    done = subprocess.run(
        [sys.executable, "-m", "relay", "exec", "--json", *args],
        input=prompt,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_spawn_and_a_wait_are_collab_tool_calls(tmp_path: Path) -> None:
    root = [
        call("spawn_agent", "c1", message="say hi"),
        call("wait", "c2", ids=["/root/1"]),
        "all done",
    ]
    child = ["hi from child"]
    with agent_model(tmp_path, {"responses": root}, {"responses": child}) as model:
        lines = exec_json(*model, *AGENTS, "--skip-git-repo-check", cwd=tmp_path, prompt="go")
    thread = lines[0]["thread_id"]
    kinds = [line["type"] for line in lines]
    # One thread, one turn: the child's turn neither starts nor ends one of the root's.
    assert kinds.count("thread.started") == 1 and kinds.count("turn.started") == 1
    assert kinds.count("turn.completed") == 1 and kinds[-1] == "turn.completed"
    collab = [line for line in lines if line.get("item", {}).get("type") == "collab_tool_call"]
    assert [(c["type"], c["item"]["tool"], c["item"]["status"]) for c in collab] == [
        ("item.started", "spawn_agent", "in_progress"),
        ("item.completed", "spawn_agent", "completed"),
        ("item.started", "wait", "in_progress"),
        ("item.completed", "wait", "completed"),
    ]
    assert collab[0]["item"]["id"] == collab[1]["item"]["id"] == "item_0"
    spawned = collab[1]["item"]
    assert spawned["sender_thread_id"] == thread and spawned["prompt"] == "say hi"
    [child_id] = spawned["receiver_thread_ids"]
    assert child_id != thread
    assert spawned["agents_states"][child_id]["status"] in ("pending_init", "running")
    waited = collab[3]["item"]
    assert waited["receiver_thread_ids"] == [child_id]
    assert waited["agents_states"] == {
        child_id: {"status": "completed", "message": "hi from child"}
    }
    answers = [
        line["item"]["text"]
        for line in lines
        if line.get("item", {}).get("type") == "agent_message"
    ]
    assert answers == ["all done"]  # the child's answer is not the root's


def count(total: int, tree: int | None) -> p.TokenCount:
    usage = p.TokenUsage(input_tokens=total, output_tokens=1, total_tokens=total + 1)
    info = p.TokenUsageInfo(
        total_token_usage=usage, last_token_usage=usage, model_context_window=None
    )
    whole = None
    if tree is not None:
        whole = p.TokenUsage(input_tokens=tree, output_tokens=2, total_tokens=tree + 2)
    return p.TokenCount(info=info, tree_total=whole)


def test_a_childs_events_write_nothing_and_usage_is_the_trees() -> None:
    child = p.AgentRef("kid", "/root/1")
    stream = CodexExecStream()
    events = [
        p.Event("t1", 1, p.TurnStarted(turn_id="t1", model_context_window=None, started_at=0.0)),
        p.Event("t1", 2, count(100, None)),
        p.Event("sub-1", 3, p.TurnStarted("sub-1", None, 0.0), agent=child),
        p.Event("sub-1", 4, p.ItemCompleted("sub-1", p.AgentMessageItem("m", "hi")), agent=child),
        p.Event("sub-1", 5, count(40, None), agent=child),
        p.Event("sub-1", 6, p.TurnComplete("sub-1", "hi", 1), agent=child),
        p.Event("t1", 7, count(100, 140)),
        p.Event("t1", 8, p.TurnComplete("t1", None, 2)),
    ]
    lines = [line for event in events for line in stream.translate(event)]
    assert lines == [
        {"type": "turn.started"},
        {
            "type": "turn.completed",
            "usage": {
                "input_tokens": 140,
                "cached_input_tokens": 0,
                "cache_write_input_tokens": 0,
                "output_tokens": 2,
                "reasoning_output_tokens": 0,
            },
        },
    ]


def test_an_interrupted_call_and_resume_agent_show_as_codexs_exec_shows_them() -> None:
    stream = CodexExecStream()
    resumed = p.AgentCallItem(
        "c5",
        p.AgentTool.RESUME_AGENT,
        "root",
        '{"id": "/root/1"}',
        receiver_ids=("/root/1",),
        states={"/root/1": p.AgentState(p.AgentStatus.INTERRUPTED)},
        status=p.CallStatus.COMPLETED,
    )
    spawned = p.SubAgentSpawned("kid", "/root/1", "root", 1, "default", "m")
    lines = stream.translate(p.Event("t1", 1, spawned))
    lines += stream.translate(p.Event("t1", 2, p.ItemCompleted("t1", resumed)))
    assert lines == [
        {
            "type": "item.completed",
            "item": {
                "id": "item_0",
                "type": "collab_tool_call",
                "tool": "wait",
                "sender_thread_id": "root",
                "receiver_thread_ids": ["kid"],
                "prompt": None,
                "agents_states": {"kid": {"status": "interrupted", "message": None}},
                "status": "completed",
            },
        }
    ]
