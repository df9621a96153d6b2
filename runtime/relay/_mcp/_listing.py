"""How many tools of MCP servers a session offers the model, and how much of a server's tool
list relay reads (docs/tools.md).

A model is offered at most :data:`MAX_TOOLS` tools (OpenAI's API takes no more): a server's
list is read until it has offered that many, over at most :data:`MAX_PAGES` pages, so that a
server that lists without end costs a bounded time and memory; and the servers of a session
together fill what room relay's own tools left, in the order they are configured. Each cut is
a warning that names the server.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import attrs
import mcp.types as mcp_types

if TYPE_CHECKING:
    from mcp import ClientSession

#: The most tools a session offers the model, its own included, and one server may offer.
MAX_TOOLS = 128
#: The most pages of a server's tool list read.
MAX_PAGES = 100

T = TypeVar("T")


@attrs.frozen
class Listed:
    """What was read of a server's tool list."""

    tools: tuple[mcp_types.Tool, ...]
    """The tools it offers, within :data:`MAX_TOOLS`."""
    more_tools: bool = False
    """It offered more than :data:`MAX_TOOLS`; the rest were not read."""
    more_pages: bool = False
    """Its list goes on past :data:`MAX_PAGES` pages; the rest were not read."""

    def warning(self, server: str) -> str | None:
        """What the caps left out, as a warning naming ``server``, or None."""
        if self.more_tools:
            return (
                f"MCP server {server!r} offers more than {MAX_TOOLS} tools; the model is "
                f"offered its first {MAX_TOOLS}"
            )
        if self.more_pages:
            return (
                f"MCP server {server!r} lists its tools over more than {MAX_PAGES} pages; the "
                f"pages after the first {MAX_PAGES} were not read"
            )
        return None


async def list_tools(session: ClientSession, offers: Callable[[str], bool]) -> Listed:
    """The tools the server lists that ``offers`` lets through, page by page, within the caps
    (a cursor seen before ends the listing)."""
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        for tool in page.tools:
            if offers(tool.name):
                if len(tools) == MAX_TOOLS:
                    return Listed(tuple(tools), more_tools=True)
                tools.append(tool)
        cursor = page.next_cursor
        if not cursor or cursor in seen:
            return Listed(tuple(tools))
        seen.add(cursor)
        if len(seen) == MAX_PAGES:
            return Listed(tuple(tools), more_pages=True)


def room_left(tools: Sequence[T], taken: int) -> tuple[list[T], int]:
    """Those of ``tools`` a session that has ``taken`` tools already still offers, and how
    many are left out."""
    kept = list(tools[: max(0, MAX_TOOLS - taken)])
    return kept, len(tools) - len(kept)


__all__ = ["MAX_PAGES", "MAX_TOOLS", "Listed", "list_tools", "room_left"]
