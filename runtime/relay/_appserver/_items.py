"""relay's turn items as the app-server's thread items (docs/codex-compat.md, the mapping).

- ``user_message`` is ``userMessage``; its input parts are ``text``, ``image`` (a URL) and
  ``localImage`` (a path);
- ``agent_message`` is ``agentMessage``, ``reasoning`` is ``reasoning`` (its summary parts);
- a ``tool_call`` of ``shell`` is ``commandExecution``: the argv joined as a shell would quote
  it, the exit code and the output read from the tool's output;
- a ``tool_call`` of an MCP server's tool is ``mcpToolCall``, with the server's name and the
  tool's;
- a ``tool_call`` of any other tool (relay's ``read_file``, ``list_dir``, a program's own) is
  ``dynamicToolCall``, its output one text part;
- ``context_compaction`` is ``contextCompaction``.

Every function is plain: it reads relay's item and what the translator knows of it, and
returns the JSON object.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from typing import Any

from .._base import _protocol as p
from .._base._json import loads
from ._rpc import Message

#: The name of relay's command tool.
SHELL = "shell"
#: How relay's ``shell`` ends its output: the exit code, or the time limit that killed it.
_EXIT_CODE = re.compile(r"\n?\[exit code (-?\d+)\]\Z")
_TIMED_OUT = re.compile(r"\n?\[timed out after \d+ ms; process killed\]\Z")
#: How a tool's failure reads as its output (relay's ``ToolError``).
_FAILED = "error: "
#: The output of a call that an abort left without one.
ABORTED = "aborted"


def input_part(item: p.InputItem) -> Message:
    """One part of the user's input."""
    match item:
        case p.Text(text):
            return {"type": "text", "text": text, "text_elements": []}
        case p.Image(url):
            return {"type": "image", "url": url}
        case p.LocalImage(path):
            return {"type": "localImage", "path": path}
    raise AssertionError(f"not an input item: {item!r}")


def user_message(item: p.UserMessageItem) -> Message:
    """A ``userMessage`` item."""
    return {"type": "userMessage", "id": item.id, "content": [input_part(x) for x in item.content]}


def agent_message(item_id: str, text: str) -> Message:
    """An ``agentMessage`` item."""
    return {"type": "agentMessage", "id": item_id, "text": text}


def reasoning(item: p.ReasoningItem) -> Message:
    """A ``reasoning`` item: the summary's parts (relay keeps no reasoning text)."""
    return {"type": "reasoning", "id": item.id, "summary": list(item.summary), "content": []}


def compaction(item_id: str) -> Message:
    """A ``contextCompaction`` item."""
    return {"type": "contextCompaction", "id": item_id}


def _arguments(text: str) -> Any:
    """A call's arguments as JSON, or as the text the model wrote when that is not JSON."""
    try:
        return loads(text)
    except (ValueError, RecursionError):
        return text


def shell_command(arguments: str) -> str:
    """The command line of a ``shell`` call: its argv, quoted as a shell would need it."""
    args = _arguments(arguments)
    argv = args.get("argv") if isinstance(args, dict) else None
    if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
        return shlex.join(argv)
    return arguments


def approval_command(command: tuple[str, ...] | p.ToolInvocation) -> str:
    """The command line an approval request shows: a command's argv quoted as a shell would
    need it, or a tool's name (``SERVER.TOOL`` for an MCP server's) and its arguments."""
    if isinstance(command, p.ToolInvocation):
        name = command.tool if command.server is None else f"{command.server}.{command.tool}"
        return f"{name} {json.dumps(dict(command.arguments), ensure_ascii=False)}"
    return shlex.join(command)


def shell_outcome(output: str) -> tuple[str, int | None, bool]:
    """What a ``shell`` call's output says: the command's own output, its exit code (None when
    it did not exit by itself or did not start), and whether it succeeded."""
    found = _EXIT_CODE.search(output)
    if found is not None:
        code = int(found.group(1))
        return output[: found.start()], code, code == 0
    timed_out = _TIMED_OUT.search(output)
    if timed_out is not None:
        return output[: timed_out.start()], None, False
    return output, None, False


def tool_call(
    item: p.ToolCallItem,
    *,
    cwd: str,
    mcp_tool: Callable[[str], tuple[str, str] | None] = lambda name: None,
    duration_ms: int | None = None,
    declined: bool = False,
) -> Message:
    """The item of a tool call: in progress while ``item.output`` is None, else ended.
    ``mcp_tool``: the server and the name of an MCP server's tool, by the name the model calls
    it (None for any other tool). ``declined``: the client declined to let it run."""
    output = item.output
    if item.name == SHELL:
        return _command(item, cwd, duration_ms, declined)
    mcp = mcp_tool(item.name)
    failed = output is not None and (output.startswith(_FAILED) or output == ABORTED or declined)
    status = "inProgress" if output is None else "failed" if failed else "completed"
    if mcp is not None:
        server, tool = mcp
        made: Message = {
            "type": "mcpToolCall",
            "id": item.id,
            "server": server,
            "tool": tool,
            "arguments": _arguments(item.arguments),
            "status": status,
            "result": None,
            "error": None,
            "durationMs": duration_ms,
        }
        if output is not None:
            if failed:
                made["error"] = {"message": output.removeprefix(_FAILED)}
            else:
                made["result"] = {"content": [{"type": "text", "text": output}]}
        return made
    return {
        "type": "dynamicToolCall",
        "id": item.id,
        "tool": item.name,
        "arguments": _arguments(item.arguments),
        "status": status,
        "contentItems": None if output is None else [{"type": "inputText", "text": output}],
        "success": None if output is None else not failed,
        "durationMs": duration_ms,
    }


def _command(item: p.ToolCallItem, cwd: str, duration_ms: int | None, declined: bool) -> Message:
    command = shell_command(item.arguments)
    made: Message = {
        "type": "commandExecution",
        "id": item.id,
        "command": command,
        "cwd": cwd,
        "processId": None,
        "source": "agent",
        "status": "inProgress",
        "commandActions": [{"type": "unknown", "command": command}],
        "aggregatedOutput": None,
        "exitCode": None,
        "durationMs": duration_ms,
    }
    if item.output is None:
        return made
    if declined or item.output == ABORTED:
        made["status"] = "declined" if declined else "failed"
        return made
    output, code, succeeded = shell_outcome(item.output)
    made["aggregatedOutput"] = output
    made["exitCode"] = code
    made["status"] = "completed" if succeeded else "failed"
    return made


__all__ = [
    "ABORTED",
    "SHELL",
    "agent_message",
    "approval_command",
    "compaction",
    "input_part",
    "reasoning",
    "shell_command",
    "shell_outcome",
    "tool_call",
    "user_message",
]
