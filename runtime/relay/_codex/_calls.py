"""A relay tool call as Codex's kinds: a command, an MCP server's tool, one of relay's own.

Everything here reads the protocol: the call's arguments as the model wrote them, and how it
ended as data (:class:`~relay.protocol.ToolResult`); no tool output is read back as text.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from .._base import _protocol as p
from .._base._json import loads

#: The names of relay's tools that have a kind of their own in Codex's protocols.
SHELL = "shell"
APPLY_PATCH = "apply_patch"
UPDATE_PLAN = "update_plan"
#: The server an item of one of relay's own tools names, where Codex's exec stream has only
#: MCP tool calls to show it as.
RELAY_SERVER = "relay"

#: The server and the name of an MCP server's tool, by the name the model calls it (None for
#: any other tool).
McpLookup = Callable[[str], "tuple[str, str] | None"]

_MCP_PREFIX = "mcp__"
_MCP_DELIMITER = "__"


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
    for server in sorted(servers, key=len, reverse=True):
        head = _sanitized(server) + _MCP_DELIMITER
        if rest.startswith(head) and len(rest) > len(head):
            return server, rest[len(head) :]
    server, sep, tool = rest.partition(_MCP_DELIMITER)
    if not sep or not server or not tool:
        return None
    return server, tool


def mcp_lookup(servers: Iterable[str]) -> McpLookup:
    """The lookup of MCP tools by name, for a session whose servers are ``servers``."""
    known = tuple(servers)
    return lambda name: split_mcp_name(name, known)


def call_arguments(text: str) -> Any:
    """A call's arguments as JSON (``{}`` when empty), or the text the model wrote when that is
    not JSON."""
    try:
        return loads(text) if text.strip() else {}
    except (ValueError, RecursionError):
        return text


def shell_command(arguments: str) -> str:
    """The command line of a ``shell`` call: its argv (``command``, or relay's older
    ``argv``), quoted as a POSIX shell would read it; else the arguments as written."""
    args = call_arguments(arguments)
    argv = args.get("command", args.get("argv")) if isinstance(args, dict) else None
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


#: The output of a call that an abort left without one.
ABORTED = "aborted"


@attrs.frozen
class Ended:
    """How a call stands, as Codex's items say it."""

    status: str
    """``in_progress``, ``completed``, ``failed`` or ``declined``."""
    exit_code: int | None = None
    """A command's exit status."""
    printed: str | None = None
    """What a command printed; None when it did not run."""
    duration_ms: int | None = None
    """How long it ran."""


def ended(item: p.ToolCallItem, *, declined: bool = False, aborted: bool = False) -> Ended:
    """How ``item`` stands: in progress until it has an output. ``declined``: a client said no
    to it; ``aborted``: its turn ended before it did."""
    if aborted:
        return Ended("declined" if declined else "failed")
    if item.output is None:
        return Ended("in_progress")
    result = item.result
    if declined:
        return Ended("declined", duration_ms=result.duration_ms if result else None)
    if result is None:
        # A rollout written before calls recorded how they ended: its output is all there is.
        return Ended("failed" if item.output == ABORTED else "completed", printed=item.output)
    return Ended(result.status.value, result.exit_code, result.printed, result.duration_ms)


__all__ = [
    "ABORTED",
    "APPLY_PATCH",
    "RELAY_SERVER",
    "SHELL",
    "UPDATE_PLAN",
    "Ended",
    "McpLookup",
    "approval_command",
    "call_arguments",
    "ended",
    "mcp_lookup",
    "shell_command",
    "split_mcp_name",
]
