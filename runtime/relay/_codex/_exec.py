"""The exec stream's items (``codex exec --json``), made from the app-server's thread items as
Codex makes its own: the same facts, in snake case, with the exec stream's fewer statuses.

- ``commandExecution`` is ``command_execution`` (``aggregated_output`` never null);
- ``fileChange`` is ``file_change`` (a declined patch is ``failed``);
- ``mcpToolCall`` is ``mcp_tool_call``; so is ``dynamicToolCall``, one of relay's own tools,
  which the exec stream has no kind for: its server is ``relay``;
- ``agentMessage`` is ``agent_message``, ``reasoning`` is ``reasoning`` (its summary joined; none
  when empty);
- the plan is a ``todo_list``, its steps ``{text, completed}``;
- ``collabAgentToolCall`` (a sub-agent tool's call) is ``collab_tool_call``, its tool and the
  agents' statuses in snake case. As Codex's exec does, ``resume_agent`` shows as ``wait`` (its
  exec stream has no name for it), and a call its turn's end cut short (``interrupted``) is not
  shown.
Every other item (the user's message, a compaction) has no counterpart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._base import _protocol as p
from ._calls import RELAY_SERVER

Json = dict[str, Any]

_STATUS = {
    "inProgress": "in_progress",
    "completed": "completed",
    "failed": "failed",
    "declined": "declined",
}


def exec_item(item: Json, item_id: str) -> Json | None:
    """The exec stream's item of the app-server's ``item`` under the id ``item_id``; None for
    an item the exec stream does not show."""
    status = _STATUS.get(item.get("status", ""), "in_progress")
    match item["type"]:
        case "agentMessage":
            return {"id": item_id, "type": "agent_message", "text": item["text"]}
        case "reasoning":
            text = "\n".join(item["summary"])
            if not text.strip():
                return None
            return {"id": item_id, "type": "reasoning", "text": text}
        case "commandExecution":
            return {
                "id": item_id,
                "type": "command_execution",
                "command": item["command"],
                "aggregated_output": item["aggregatedOutput"] or "",
                "exit_code": item["exitCode"],
                "status": status,
            }
        case "fileChange":
            changes = [
                {"path": change["path"], "kind": change["kind"]["type"]}
                for change in sorted(item["changes"], key=lambda change: change["path"])
            ]
            done = "failed" if status == "declined" else status
            return {"id": item_id, "type": "file_change", "changes": changes, "status": done}
        case "mcpToolCall":
            return _tool_call(item_id, item["server"], item["tool"], item, status)
        case "dynamicToolCall":
            return _tool_call(item_id, RELAY_SERVER, item["tool"], item, status)
        case "collabAgentToolCall":
            return _collab_call(item_id, item)
    return None


#: The exec stream's names of the sub-agent tools, by the app-server's.
_COLLAB_TOOL = {
    "spawnAgent": "spawn_agent",
    "sendInput": "send_input",
    "wait": "wait",
    "resumeAgent": "wait",
    "closeAgent": "close_agent",
}
#: The exec stream's names of an agent's status, by the app-server's.
_AGENT_STATUS = {
    "pendingInit": "pending_init",
    "running": "running",
    "interrupted": "interrupted",
    "completed": "completed",
    "errored": "errored",
    "shutdown": "shutdown",
    "notFound": "not_found",
}


def _collab_call(item_id: str, item: Json) -> Json | None:
    status = _STATUS.get(item["status"])
    if status is None:
        return None  # interrupted: the exec stream has no such status, and shows none
    states = {
        agent: {"status": _AGENT_STATUS[state["status"]], "message": state.get("message")}
        for agent, state in item["agentsStates"].items()
    }
    return {
        "id": item_id,
        "type": "collab_tool_call",
        "tool": _COLLAB_TOOL[item["tool"]],
        "sender_thread_id": item["senderThreadId"],
        "receiver_thread_ids": list(item["receiverThreadIds"]),
        "prompt": item["prompt"],
        "agents_states": states,
        "status": status,
    }


def _tool_call(item_id: str, server: str, tool: str, item: Json, status: str) -> Json:
    result: Any = None
    error: Any = None
    if item["type"] == "mcpToolCall":
        if item["result"] is not None:
            result = {"content": item["result"]["content"], "structured_content": None}
        error = item["error"]
    elif item["contentItems"] is not None:
        text = "".join(part.get("text", "") for part in item["contentItems"])
        if status == "failed":
            error = {"message": text.removeprefix("error: ")}
        else:
            result = {"content": [{"type": "text", "text": text}], "structured_content": None}
    return {
        "id": item_id,
        "type": "mcp_tool_call",
        "server": server,
        "tool": tool,
        "arguments": item["arguments"],
        "result": result,
        "error": error,
        "status": status,
    }


def todo_list(item_id: str, plan: Sequence[p.PlanStep]) -> Json:
    """The ``todo_list`` item of the plan as it stands."""
    items = [
        {"text": step.step, "completed": step.status is p.StepStatus.COMPLETED} for step in plan
    ]
    return {"id": item_id, "type": "todo_list", "items": items}


def usage_of(total: p.TokenUsage | None) -> Json:
    """``turn.completed``'s usage: the session's total so far, zeros before any count."""
    total = total or p.TokenUsage()
    return {
        "input_tokens": total.input_tokens,
        "cached_input_tokens": total.cached_input_tokens,
        "cache_write_input_tokens": 0,
        "output_tokens": total.output_tokens,
        "reasoning_output_tokens": total.reasoning_output_tokens,
    }


__all__ = ["exec_item", "todo_list", "usage_of"]
