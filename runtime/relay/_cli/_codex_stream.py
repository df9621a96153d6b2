"""relay's events as the event stream of ``codex exec --experimental-json`` (docs/codex-compat.md).

``relay exec --experimental-json`` writes one JSON object per line, the events Codex 0.169
writes, so that a program written for Codex (its TypeScript SDK, ``@openai/codex-sdk``) reads
relay's. :class:`CodexExecStream` folds relay's events into them: plain state, no I/O, one
call per event.

Theory of operation:

- ``session_configured`` is ``thread.started``: the thread id is the session id, so that
  ``resume THREAD_ID`` finds the session again.
- ``turn_started`` is ``turn.started``; the turn's end is ``turn.completed`` with the session's
  token usage so far (as Codex reports it: the thread's total, from the last ``token_count``),
  or ``turn.failed`` with the message of the turn's first ``error``. A turn aborted (a signal
  shut the session down) is ``turn.failed`` too, so that every ``turn.started`` has its end.
- Items get Codex's ids, ``item_0``, ``item_1``, … in the order they first appear; an item's
  ``item.started`` and ``item.completed`` share its id. Agent messages and reasoning are only
  ``item.completed``, as in Codex; tool calls are ``item.started`` then ``item.completed``.
- A tool call is ``command_execution`` for ``shell``, ``mcp_tool_call`` for an MCP server's
  tool, and ``mcp_tool_call`` of the server ``relay`` for relay's other tools.
- ``warning`` is an ``error`` item; ``error`` and ``stream_error`` (a retry) are the top-level
  ``error`` event. Every other event has no counterpart and writes nothing.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable
from typing import Any

import attrs

from .._base import _protocol as p

#: The server an item of one of relay's own tools (not ``shell``, not an MCP server's) names.
RELAY_SERVER = "relay"

#: What an MCP server's tool is called, ``mcp__SERVER__TOOL`` (docs/tools.md).
_MCP_PREFIX = "mcp__"
_MCP_DELIMITER = "__"

_EXIT_CODE = re.compile(r"\n\[exit code (-?\d+)\]\Z")
_TIMED_OUT = re.compile(r"\n\[timed out after \d+ ms; process killed\]\Z")
_FAILED = "error: "
_ABORTED = "aborted"

Line = dict[str, Any]


def _sanitized(name: str) -> str:
    # The characters a tool name keeps, as relay's MCP tool names are made (docs/tools.md).
    return "".join(c if (c.isascii() and c.isalnum()) or c in "_-" else "_" for c in name) or "_"


def split_mcp_name(name: str, servers: Iterable[str]) -> tuple[str, str] | None:
    """``(server, tool)`` of an MCP tool's name, ``mcp__SERVER__TOOL``; None for a name that is
    not an MCP tool's. A server of ``servers`` whose name the tool's begins with wins (the
    longest one); else the server is what comes before the next ``__``."""
    if not name.startswith(_MCP_PREFIX):
        return None
    rest = name[len(_MCP_PREFIX) :]
    known = sorted(servers, key=len, reverse=True)
    for server in known:
        head = _sanitized(server) + _MCP_DELIMITER
        if rest.startswith(head) and len(rest) > len(head):
            return server, rest[len(head) :]
    server, sep, tool = rest.partition(_MCP_DELIMITER)
    if not sep or not server or not tool:
        return None
    return server, tool


def shell_command(arguments: str) -> str:
    """The command line of a ``shell`` call: its argv quoted as a POSIX shell would read it,
    else the arguments as the model wrote them."""
    try:
        argv = json.loads(arguments).get("argv")
    except (ValueError, AttributeError):
        return arguments
    if isinstance(argv, list) and all(isinstance(arg, str) for arg in argv):
        return shlex.join(argv)
    return arguments


def command_result(output: str) -> tuple[str, int | None, str]:
    """``(aggregated_output, exit_code, status)`` of a ``shell`` call's output."""
    if (found := _EXIT_CODE.search(output)) is not None:
        code = int(found.group(1))
        return output[: found.start()], code, "completed" if code == 0 else "failed"
    if (found := _TIMED_OUT.search(output)) is not None:
        return output[: found.start()], None, "failed"
    if output.startswith(_FAILED):
        return output[len(_FAILED) :], None, "failed"
    if output == _ABORTED:
        return "", None, "failed"
    return output, None, "completed"


def _arguments(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return text


def tool_call_item(
    item: p.ToolCallItem, item_id: str, servers: Iterable[str], *, done: bool
) -> Line:
    """The Codex item of a tool call: started (``done`` false) or completed."""
    output = item.output if done and item.output is not None else None
    if item.name == "shell":
        aggregated, code, status = (
            command_result(output) if output is not None else ("", None, "in_progress")
        )
        return {
            "id": item_id,
            "type": "command_execution",
            "command": shell_command(item.arguments),
            "aggregated_output": aggregated,
            "exit_code": code,
            "status": status,
        }
    server, tool = split_mcp_name(item.name, servers) or (RELAY_SERVER, item.name)
    result: Any = None
    error: Any = None
    status = "in_progress"
    if output is not None:
        if output.startswith(_FAILED) or output == _ABORTED:
            status = "failed"
            error = {"message": output.removeprefix(_FAILED)}
        else:
            status = "completed"
            result = {"content": [{"type": "text", "text": output}], "structured_content": None}
    return {
        "id": item_id,
        "type": "mcp_tool_call",
        "server": server,
        "tool": tool,
        "arguments": _arguments(item.arguments),
        "result": result,
        "error": error,
        "status": status,
    }


def usage_of(total: p.TokenUsage | None) -> Line:
    """``turn.completed``'s usage: the session's total so far, zeros before any count."""
    total = total or p.TokenUsage()
    return {
        "input_tokens": total.input_tokens,
        "cached_input_tokens": total.cached_input_tokens,
        "cache_write_input_tokens": 0,
        "output_tokens": total.output_tokens,
        "reasoning_output_tokens": total.reasoning_output_tokens,
    }


@attrs.define
class CodexExecStream:
    """Folds relay's events into Codex's ``exec --experimental-json`` events."""

    _servers: tuple[str, ...] = ()
    _next_item: int = 0
    _item_ids: dict[str, str] = attrs.field(factory=dict)
    _total: p.TokenUsage | None = None
    _turn_errors: dict[str, str | None] = attrs.field(factory=dict)

    def _new_id(self) -> str:
        item_id = f"item_{self._next_item}"
        self._next_item += 1
        return item_id

    def _started_id(self, relay_id: str) -> str:
        return self._item_ids.setdefault(relay_id, self._new_id())

    def _completed_id(self, relay_id: str) -> str:
        return self._item_ids.pop(relay_id, None) or self._new_id()

    def translate(self, event: p.Event) -> list[Line]:
        """The Codex events of one relay event, in order (often none)."""
        match event.msg:
            case p.SessionConfigured(session_id=session_id, mcp_servers=servers):
                self._servers = tuple(servers)
                return [{"type": "thread.started", "thread_id": session_id}]
            case p.TurnStarted(turn_id=turn_id):
                self._turn_errors[turn_id] = None
                return [{"type": "turn.started"}]
            case p.ItemStarted(item=p.ToolCallItem() as item):
                item_id = self._started_id(item.id)
                line = tool_call_item(item, item_id, self._servers, done=False)
                return [{"type": "item.started", "item": line}]
            case p.ItemCompleted(item=p.ToolCallItem() as item):
                item_id = self._completed_id(item.id)
                line = tool_call_item(item, item_id, self._servers, done=True)
                return [{"type": "item.completed", "item": line}]
            case p.ItemCompleted(item=p.AgentMessageItem(text=text)):
                line = {"id": self._new_id(), "type": "agent_message", "text": text}
                return [{"type": "item.completed", "item": line}]
            case p.ItemCompleted(item=p.ReasoningItem(summary=summary)):
                text = "\n".join(summary)
                if not text.strip():
                    return []
                line = {"id": self._new_id(), "type": "reasoning", "text": text}
                return [{"type": "item.completed", "item": line}]
            case p.WarningEvent(message=message):
                line = {"id": self._new_id(), "type": "error", "message": message}
                return [{"type": "item.completed", "item": line}]
            case p.ErrorEvent(message=message):
                if event.id in self._turn_errors and self._turn_errors[event.id] is None:
                    self._turn_errors[event.id] = message
                return [{"type": "error", "message": message}]
            case p.StreamErrorEvent(message=message, detail=detail):
                return [{"type": "error", "message": f"{message} ({detail})"}]
            case p.TokenCount(info=p.TokenUsageInfo(total_token_usage=total)):
                self._total = total
                return []
            case p.TurnComplete(turn_id=turn_id):
                error = self._turn_errors.pop(turn_id, None)
                if error is not None:
                    return [{"type": "turn.failed", "error": {"message": error}}]
                return [{"type": "turn.completed", "usage": usage_of(self._total)}]
            case p.TurnAborted(turn_id=turn_id, reason=reason):
                error = self._turn_errors.pop(turn_id, None)
                message = error or f"the turn was aborted ({reason.value})"
                return [{"type": "turn.failed", "error": {"message": message}}]
            case _:
                return []


__all__ = [
    "RELAY_SERVER",
    "CodexExecStream",
    "command_result",
    "shell_command",
    "split_mcp_name",
    "tool_call_item",
    "usage_of",
]
