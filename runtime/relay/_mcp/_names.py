"""How an MCP server's tools are named to the model: ``mcp__SERVER__TOOL``, as Codex names
them (docs/tools.md).

The name is sanitised to the characters a tool name may hold (``[A-Za-z0-9_-]``; any other
becomes ``_``). A name longer than :data:`MAX_TOOL_NAME` keeps its first characters and ends
with the SHA-1 of the name before it was sanitised, in hex, so that it is exactly that long and
two long names that differ only at the end stay apart. A tool whose name is taken (by an
earlier tool of the session or of the server) is left out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator

#: The longest tool name a model API takes.
MAX_TOOL_NAME = 64
#: What joins the prefix, the server's name and the tool's.
DELIMITER = "__"
PREFIX = "mcp"


def sanitize(name: str) -> str:
    """``name`` with every character outside ``[A-Za-z0-9_-]`` made ``_`` (``_`` if empty)."""
    return "".join(c if (c.isascii() and c.isalnum()) or c in "_-" else "_" for c in name) or "_"


def qualified_name(server: str, tool: str) -> str:
    """The name the model calls ``server``'s tool ``tool`` by."""
    raw = f"{PREFIX}{DELIMITER}{server}{DELIMITER}{tool}"
    name = sanitize(raw)
    if len(name) > MAX_TOOL_NAME:
        digest = hashlib.sha1(raw.encode("utf-8"), usedforsecurity=False).hexdigest()
        name = name[: MAX_TOOL_NAME - len(digest)] + digest
    return name


def qualify(
    server: str, tools: Iterable[str], taken: Iterable[str] = ()
) -> Iterator[tuple[str, str | None]]:
    """Each of ``server``'s ``tools`` with its qualified name, or None when the name is taken:
    by one of ``taken``, or by an earlier tool of the list (the first one keeps it)."""
    used = set(taken)
    for tool in tools:
        name = qualified_name(server, tool)
        if name in used:
            yield tool, None
            continue
        used.add(name)
        yield tool, name


__all__ = ["DELIMITER", "MAX_TOOL_NAME", "PREFIX", "qualified_name", "qualify", "sanitize"]
