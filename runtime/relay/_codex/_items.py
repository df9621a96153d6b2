"""relay's turn items as the app-server's thread items (docs/codex-compat.md, the mapping).

- ``user_message`` is ``userMessage``; its input parts are ``text``, ``image`` (a URL) and
  ``localImage`` (a path);
- ``agent_message`` is ``agentMessage``, ``reasoning`` is ``reasoning`` (its summary parts);
- a ``tool_call`` of ``shell`` is ``commandExecution``: the argv joined as a shell would quote
  it, the exit code and what the command printed, from how the call ended;
- a patch (``apply_patch``) is ``fileChange``, with each file's diff;
- a ``tool_call`` of an MCP server's tool is ``mcpToolCall``, with the server's name and the
  tool's;
- a ``tool_call`` of any other tool (relay's ``read_file``, ``list_dir``, a program's own) is
  ``dynamicToolCall``, its output one text part;
- ``context_compaction`` is ``contextCompaction``;
- an ``agent_call`` (a sub-agent tool's) is ``collabAgentToolCall``: the tool, the session that
  called it and the agents it was for, with their states as the call ended.

Every function is plain: it reads relay's item and what the face knows of it, and returns the
JSON object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._base import _protocol as p
from ._calls import ABORTED, SHELL, McpLookup, call_arguments, ended, shell_command

Json = dict[str, Any]

#: Codex's names of how a call stands, by relay's.
_STATUS = {
    "in_progress": "inProgress",
    "completed": "completed",
    "failed": "failed",
    "declined": "declined",
}


#: Codex's names of the sub-agent tools, and of a sub-agent's status.
_AGENT_TOOL = {
    p.AgentTool.SPAWN_AGENT: "spawnAgent",
    p.AgentTool.SEND_INPUT: "sendInput",
    p.AgentTool.WAIT: "wait",
    p.AgentTool.CLOSE_AGENT: "closeAgent",
    p.AgentTool.RESUME_AGENT: "resumeAgent",
}
AGENT_STATUS = {
    p.AgentStatus.PENDING_INIT: "pendingInit",
    p.AgentStatus.RUNNING: "running",
    p.AgentStatus.INTERRUPTED: "interrupted",
    p.AgentStatus.COMPLETED: "completed",
    p.AgentStatus.ERRORED: "errored",
    p.AgentStatus.SHUTDOWN: "shutdown",
    p.AgentStatus.NOT_FOUND: "notFound",
}


def input_part(item: p.InputItem) -> Json:
    """One part of the user's input."""
    match item:
        case p.Text(text):
            return {"type": "text", "text": text, "text_elements": []}
        case p.Image(url):
            return {"type": "image", "url": url}
        case p.LocalImage(path):
            return {"type": "localImage", "path": path}
    raise AssertionError(f"not an input item: {item!r}")


def user_message(item: p.UserMessageItem) -> Json:
    """A ``userMessage`` item."""
    return {"type": "userMessage", "id": item.id, "content": [input_part(x) for x in item.content]}


def agent_message(item_id: str, text: str) -> Json:
    """An ``agentMessage`` item."""
    return {"type": "agentMessage", "id": item_id, "text": text}


def reasoning(item: p.ReasoningItem) -> Json:
    """A ``reasoning`` item: the summary's parts (relay keeps no reasoning text)."""
    return {"type": "reasoning", "id": item.id, "summary": list(item.summary), "content": []}


def compaction(item_id: str) -> Json:
    """A ``contextCompaction`` item."""
    return {"type": "contextCompaction", "id": item_id}


def tool_call(
    item: p.ToolCallItem,
    *,
    cwd: str,
    mcp_tool: McpLookup = lambda name: None,
    duration_ms: int | None = None,
    declined: bool = False,
    aborted: bool = False,
) -> Json:
    """The item of a tool call: in progress while ``item.output`` is None, else ended.
    ``declined``: the client declined to let it run; ``aborted``: its turn ended first."""
    now = ended(item, declined=declined, aborted=aborted)
    status = _STATUS[now.status]
    took = now.duration_ms if now.duration_ms is not None else duration_ms
    if item.name == SHELL:
        command = shell_command(item.arguments)
        ran = now.status in ("completed", "failed") and now.printed is not None
        return {
            "type": "commandExecution",
            "id": item.id,
            "command": command,
            "cwd": cwd,
            "processId": None,
            "source": "agent",
            "status": status,
            "commandActions": [{"type": "unknown", "command": command}],
            "aggregatedOutput": now.printed if ran else None,
            "exitCode": now.exit_code,
            "durationMs": took,
        }
    output = None if aborted else item.output
    failed = now.status in ("failed", "declined")
    mcp = mcp_tool(item.name)
    if mcp is not None:
        server, tool = mcp
        made: Json = {
            "type": "mcpToolCall",
            "id": item.id,
            "server": server,
            "tool": tool,
            "arguments": call_arguments(item.arguments),
            "status": "failed" if failed else status,
            "result": None,
            "error": None,
            "durationMs": took,
        }
        if now.status != "in_progress":
            if failed:
                message = ABORTED if aborted else (output or now.status).removeprefix("error: ")
                made["error"] = {"message": message}
            else:
                made["result"] = {"content": [{"type": "text", "text": output or ""}]}
        return made
    return {
        "type": "dynamicToolCall",
        "id": item.id,
        "tool": item.name,
        "arguments": call_arguments(item.arguments),
        "status": "failed" if failed else status,
        "contentItems": None if output is None else [{"type": "inputText", "text": output}],
        "success": None if now.status == "in_progress" else not failed,
        "durationMs": took,
    }


def agent_receivers(item: p.AgentCallItem) -> list[str]:
    """The agents a sub-agent call is for: those its end names, else (while it runs) those its
    arguments name (``id``, or ``wait``'s ``ids``); a spawn names none until it has spawned."""
    if item.receiver_ids or item.status is not None:
        return list(item.receiver_ids)
    args = call_arguments(item.arguments)
    if not isinstance(args, dict):
        return []
    named = args.get("ids") if item.tool is p.AgentTool.WAIT else [args.get("id")]
    if not isinstance(named, list):
        return []
    return [each for each in named if isinstance(each, str)]


def by_agent_id(item: p.AgentCallItem, ids: Mapping[str, str]) -> p.AgentCallItem:
    """``item`` with the agents it names by path (``/root/1``, as a model may name them) named
    by id, their thread's: ``ids`` maps the paths known to the ids."""
    receivers = agent_receivers(item)
    if not any(each in ids for each in (*receivers, *item.states)):
        return item
    return attrs.evolve(
        item,
        receiver_ids=tuple(ids.get(each, each) for each in receivers),
        states={ids.get(key, key): state for key, state in item.states.items()},
    )


def agent_call(
    item: p.AgentCallItem,
    *,
    model: str | None = None,
    effort: str | None = None,
    aborted: bool = False,
) -> Json:
    """A ``collabAgentToolCall`` item: in progress while ``item.status`` is None, else
    completed or failed as the call ended; ``interrupted`` when its turn ended first
    (``aborted``). ``model`` and ``effort``: what a spawned agent runs with, when known."""
    if aborted:
        status = "interrupted"
    elif item.status is None:
        status = "inProgress"
    else:
        status = "completed" if item.status is p.CallStatus.COMPLETED else "failed"
    states = {
        agent: {"status": AGENT_STATUS[state.status], "message": state.message}
        for agent, state in item.states.items()
    }
    return {
        "type": "collabAgentToolCall",
        "id": item.id,
        "tool": _AGENT_TOOL[item.tool],
        "status": status,
        "senderThreadId": item.sender_id,
        "receiverThreadIds": agent_receivers(item),
        "prompt": item.prompt,
        "model": model,
        "reasoningEffort": effort,
        "agentsStates": states,
    }


def file_changes(changes: Sequence[p.FileChange]) -> list[Json]:
    """A patch's ``FileUpdateChange`` list: each file with its kind and its diff."""
    made: list[Json] = []
    for change in sorted(changes, key=lambda change: change.path):
        kind: Json = {"type": change.kind.value}
        if change.kind is p.ChangeKind.UPDATE:
            kind["move_path"] = change.move_path
        made.append({"path": change.path, "kind": kind, "diff": change.diff})
    return made


def file_change(call_id: str, changes: Sequence[p.FileChange], status: str) -> Json:
    """A ``fileChange`` item: ``status`` is relay's (``in_progress``, ``completed``,
    ``failed``, ``declined``)."""
    return {
        "type": "fileChange",
        "id": call_id,
        "changes": file_changes(changes),
        "status": _STATUS[status],
    }


def plan_steps(plan: Sequence[p.PlanStep]) -> list[Json]:
    """The steps of ``turn/plan/updated``."""
    return [{"step": step.step, "status": _PLAN_STATUS[step.status]} for step in plan]


_PLAN_STATUS = {
    p.StepStatus.PENDING: "pending",
    p.StepStatus.IN_PROGRESS: "inProgress",
    p.StepStatus.COMPLETED: "completed",
}


__all__ = [
    "AGENT_STATUS",
    "agent_call",
    "agent_message",
    "agent_receivers",
    "by_agent_id",
    "compaction",
    "file_change",
    "file_changes",
    "input_part",
    "plan_steps",
    "reasoning",
    "tool_call",
    "user_message",
]
