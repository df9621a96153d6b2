"""The MCP servers of one session: started together as it opens, their tools registered in
its registry (:mod:`._listing` keeps them current and capped), stopped when it ends."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio
import attrs

from .._base._mcp_config import McpServerConfig
from .._core._tools import ToolRegistry
from ._listing import MAX_TOOLS, Offer
from ._servers import McpServer, StartFailed


@attrs.frozen
class McpStart:
    """What starting a session's servers came to."""

    counts: Mapping[str, int]
    """Each server that started, and the number of its tools."""
    warnings: tuple[str, ...]
    """What went wrong: servers that did not start, tools left out."""
    secrets: tuple[str, ...]
    """The bearer tokens the servers were given (kept out of what the session records)."""


@asynccontextmanager
async def open_mcp_servers(
    servers: Mapping[str, McpServerConfig],
    *,
    cwd: str,
    hidden_env: frozenset[str] = frozenset(),
    registry: ToolRegistry,
) -> AsyncIterator[McpStart]:
    """Start the enabled ``servers`` at once, each within its startup timeout, and register
    their tools in ``registry`` (kept current as their lists change, until the block ends);
    leaving the block stops every one (shielded, bounded).

    A server that does not start is a warning (with the end of its standard error), and the
    session goes on without its tools. ``cwd`` is a stdio server's working directory (and what
    a relative ``cwd`` of its own is relative to); ``hidden_env`` holds the variables no server
    inherits.
    """
    offer = Offer(registry)
    async with anyio.create_task_group() as group:
        started = [
            McpServer(
                name, config, cwd=cwd, hidden_env=hidden_env, group=group, listed=offer.relisted
            )
            for name, config in servers.items()
            if config.enabled
        ]
        failures: dict[str, StartFailed] = {}

        async def start(server: McpServer) -> None:
            try:
                await server.start()
            except StartFailed as failure:
                failures[server.name] = failure

        try:
            async with anyio.create_task_group() as starting:
                for server in started:
                    starting.start_soon(start, server)
            counts: dict[str, int] = {}
            warnings: list[str] = []
            for server in started:
                failure = failures.get(server.name)
                if failure is not None:
                    warnings.append(
                        f"MCP server {server.name!r} did not start: {failure.describe()}"
                    )
                    continue
                connection = server.connection
                if connection is not None and connection.cut is not None:
                    warnings.append(connection.cut)
                counts[server.name], skipped, left_out = offer.first(server)
                if skipped:
                    warnings.append(
                        f"MCP server {server.name!r}: left out {', '.join(map(repr, skipped))}, "
                        "whose names another tool has"
                    )
                if left_out:
                    warnings.append(
                        f"MCP server {server.name!r}: left out {left_out} of its tools: a "
                        f"session offers the model at most {MAX_TOOLS} tools, its own included"
                    )
            yield McpStart(counts, tuple(warnings), _tokens(servers))
        finally:
            for server in started:
                server.close()


OpenMcpServers = Callable[..., AbstractAsyncContextManager[McpStart]]
"""The type of :func:`open_mcp_servers`."""


def _tokens(servers: Mapping[str, McpServerConfig]) -> tuple[str, ...]:
    tokens = []
    for config in servers.values():
        if config.bearer_token_env_var is not None:
            token = os.environ.get(config.bearer_token_env_var, "").strip()
            if token:
                tokens.append(token)
    return tuple(tokens)


__all__ = ["McpStart", "OpenMcpServers", "open_mcp_servers"]
