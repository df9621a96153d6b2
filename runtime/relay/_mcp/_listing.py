"""The MCP servers' lists of tools: listing them, following their changes, and what the model
is offered of them (docs/tools.md).

A model is offered at most :data:`MAX_TOOLS` tools (OpenAI's API takes no more): a server's
list is read until it has offered that many, over at most :data:`MAX_PAGES` pages, so that a
server that lists without end costs a bounded time and memory; and the servers of a session
together fill what room relay's own tools left, in the order they are configured. Each cut is
a warning that names the server.

A server's tools are registered in the session's tool registry when the session opens. A server
that says its list changed (``notifications/tools/list_changed``) is asked for it again by its
connection's task (:func:`follow`), never by the SDK's handler of the notification, which
reads the answers; notifications that come while it lists make one more listing. A call that
was answered after such a notification returns once the new list is in, so the request that
follows the call offers it. :class:`Offer` puts a new list in the registry in place of the old
one, with a notice that the next request reports as a ``warning``: the server's new count, and
which tools came, went or changed. A list that did not change leaves the registry, and the
requests, as they were. A server started again is listed again the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import anyio
import attrs
import mcp.types as mcp_types
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from .._core._tools import Tool, ToolRegistry

logger = logging.getLogger("relay.mcp")


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


class Listing:
    """Whether a connection's list of tools is current.

    Invariant: ``current`` is set unless the server said its list changed and the listing
    that answers it has not ended; ``due`` is set while a listing is asked for and not begun.
    """

    def __init__(self) -> None:
        self.due = anyio.Event()
        self.current = anyio.Event()
        self.current.set()

    async def on_message(self, message: Any) -> None:
        """The client session's handler of what the server sends unasked."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.due.set()
            if self.current.is_set():
                self.current = anyio.Event()


async def follow(
    listing: Listing,
    relist: Callable[[], Awaitable[list[mcp_types.Tool]]],
    listed: Callable[[list[mcp_types.Tool]], None],
    *,
    server: str,
) -> None:
    """Have ``relist`` list the tools again each time the server says they changed, and hand
    each new list to ``listed``; until cancelled."""
    try:
        while True:
            await listing.due.wait()
            listing.due = anyio.Event()
            try:
                tools = await relist()
            except (TimeoutError, MCPError) as exc:
                # The tools offered stay as they were; a call to one that went says so.
                logger.info("MCP server %s: listing its tools again failed: %s", server, exc)
            else:
                listed(tools)
            if not listing.due.is_set():
                listing.current.set()
    finally:
        # Nobody waits for a listing that will not come.
        listing.current.set()


class Lister(Protocol):
    """A server, as the offer sees it."""

    name: str

    def tools(self, taken: Sequence[str]) -> tuple[list[Tool], list[str]]:
        """Its tools, named apart from ``taken``, and the names of those left out."""
        ...


def _plural(count: int) -> str:
    return f"{count} tool{'' if count == 1 else 's'}"


def tools_changed(
    server: str,
    before: Mapping[str, object],
    after: Mapping[str, object],
    skipped: Sequence[str] = (),
) -> str | None:
    """What a server's new list changed, as a sentence, or None when nothing did (``before``
    and ``after``: each tool's name and what the model sees of it; ``skipped``: the server's
    names of the tools left out because another tool has their name)."""
    added = [name for name in after if name not in before]
    removed = [name for name in before if name not in after]
    changed = [name for name in after if name in before and before[name] != after[name]]
    if not (added or removed or changed):
        return None
    parts = [
        f"{verb} {', '.join(names)}"
        for verb, names in (("added", added), ("removed", removed), ("changed", changed))
        if names
    ]
    if skipped:
        parts.append(f"left out {', '.join(map(repr, skipped))}, whose names another tool has")
    return (
        f"MCP server {server!r} now offers {_plural(len(after))} (it offered "
        f"{len(before)}): {'; '.join(parts)}."
    )


class Offer:
    """The MCP servers' tools in one session's registry."""

    def __init__(self, registry: ToolRegistry) -> None:
        self._registry = registry
        self._names: dict[str, list[str]] = {}

    def first(self, server: Lister) -> tuple[int, list[str], int]:
        """Register ``server``'s tools as the session opens: how many; the server's names of
        those left out because their name is taken; how many more were left out because the
        session offers the model :data:`MAX_TOOLS` tools at most."""
        registry = self._registry
        made, skipped = server.tools(registry.names())
        kept, left_out = room_left(made, len(registry.names()))
        for tool in kept:
            registry.register(tool)
        self._names[server.name] = [tool.name for tool in kept]
        return len(kept), skipped, left_out

    def relisted(self, server: Lister) -> None:
        """``server`` listed its tools again: offer the new list from the next request on."""
        before = self._names.get(server.name)
        if before is None:
            # Still starting: :meth:`first` takes the list as it is then.
            return
        registry = self._registry
        own = set(before)
        made, skipped = server.tools([name for name in registry.names() if name not in own])
        seen = {name: tool.spec() for name in before if (tool := registry.get(name)) is not None}
        notice = tools_changed(
            server.name, seen, {tool.name: tool.spec() for tool in made}, skipped
        )
        if notice is None:
            return
        self._names[server.name] = [tool.name for tool in made]
        registry.replace(before, made, notice)


__all__ = [
    "MAX_PAGES",
    "MAX_TOOLS",
    "Listed",
    "Lister",
    "Listing",
    "Offer",
    "follow",
    "list_tools",
    "room_left",
    "tools_changed",
]
