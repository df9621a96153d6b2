"""MCP servers in a configuration: the ``[mcp_servers.NAME]`` table, in the form Codex reads
(docs/tools.md), and the checks a table must pass before any server starts.

A server is spoken to over its standard input and output (``command``: a *stdio* server) or
over streamable HTTP (``url``). Whatever the transport, its tools are offered to the model as
``mcp__NAME__TOOL``; how they are started and called is the business of ``relay._mcp``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ._errors import ConfigError
from ._sandbox_config import McpApproval

#: A server's name: it becomes part of tool names, which allow these characters only.
SERVER_NAME = re.compile(r"[A-Za-z0-9_-]+")

#: The smallest ``tool_output_max_bytes``: room for the answers that start a server.
MIN_ANSWER_BYTES = 4096

#: Keys only a stdio server takes, and keys only an HTTP server takes.
STDIO_KEYS = ("args", "env", "env_vars", "cwd")
HTTP_KEYS = ("bearer_token_env_var", "http_headers")


def _optional_tuple(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen
class McpServerConfig:
    """An MCP server whose tools the model may call: ``[mcp_servers.NAME]``.

    Give ``command`` for a server relay starts and speaks to over its standard input and
    output, or ``url`` for a streamable-HTTP server; never both.

    Example::

        relay.Config(
            mcp_servers={
                "docs": McpServerConfig(command="npx", args=("-y", "docs-mcp-server")),
                "search": McpServerConfig(
                    url="https://mcp.example.com/mcp", bearer_token_env_var="SEARCH_TOKEN"
                ),
            }
        )
    """

    command: str | None = None
    """The program of a stdio server (looked up in ``PATH`` unless it is a path). In a
    configuration file, a command that starts with ``./`` or ``../`` is relative to that
    file."""
    args: tuple[str, ...] = attrs.field(converter=tuple, factory=tuple)
    """Its arguments. In a configuration file, an argument that starts with ``./`` or
    ``../`` is a path relative to that file."""
    env: Mapping[str, str] = attrs.field(factory=dict)
    """Environment variables of a stdio server, set over the few it inherits (``HOME``,
    ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``); nothing else of relay's
    environment reaches it."""
    env_vars: tuple[str, ...] = attrs.field(converter=tuple, factory=tuple)
    """Names of more of relay's environment variables a stdio server inherits (the one that
    holds the provider's API key never)."""
    cwd: str | None = None
    """The working directory of a stdio server (default: the session's). In a configuration
    file, a relative one is relative to that file."""
    url: str | None = None
    """The endpoint of a streamable-HTTP server (``http://`` or ``https://``)."""
    bearer_token_env_var: str | None = None
    """The environment variable whose value an HTTP server gets as
    ``Authorization: Bearer ...``; unset or empty, the server does not start."""
    http_headers: Mapping[str, str] = attrs.field(factory=dict)
    """More request headers of an HTTP server."""
    startup_timeout_sec: float = 10.0
    """Seconds the server has to start, answer ``initialize`` and list its tools."""
    tool_timeout_sec: float = 60.0
    """Seconds one tool call may take; a longer one is cancelled (the server is told) and
    fails."""
    tool_output_max_bytes: int = 8 * 1024 * 1024
    """The most bytes relay reads of one answer of the server (a line of a stdio server, the
    body of an HTTP answer or one event of its stream): a longer one is not read, and the call
    it answers fails with an output that says so."""
    enabled: bool = True
    """Start the server (false: the table is kept and nothing starts)."""
    enabled_tools: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    """The server's tools the model is offered, by the server's names for them (unset:
    every one)."""
    disabled_tools: tuple[str, ...] = attrs.field(converter=tuple, factory=tuple)
    """The server's tools the model is never offered (applied after ``enabled_tools``)."""
    approval: McpApproval | None = None
    """``"always"``: every call of the server's tools waits for a decision; ``"never"``: none
    does, whatever ``approval_policy`` says; unset: ``approval_policy`` decides
    (docs/approvals.md)."""

    @property
    def transport(self) -> str:
        """``stdio`` or ``http``."""
        return "http" if self.url is not None else "stdio"

    def offers(self, tool: str) -> bool:
        """Whether the model is offered the server's tool ``tool``."""
        allowed = self.enabled_tools is None or tool in self.enabled_tools
        return allowed and tool not in self.disabled_tools


def check_mcp_server(name: str, server: McpServerConfig) -> None:
    """Check one table; the error names the key (``mcp_servers.NAME.KEY``).

    Raises:
        ConfigError: the name is not a tool-name fragment, the table has neither or both of
            ``command`` and ``url``, a key of the other transport, an empty command, a URL
            that is not HTTP, a timeout that is not a positive number of seconds, or a
            ``tool_output_max_bytes`` under :data:`MIN_ANSWER_BYTES`.
    """
    where = f"mcp_servers.{name}"
    if not isinstance(name, str) or not SERVER_NAME.fullmatch(name):
        raise ConfigError(
            f"{where}: a server's name may hold only letters, digits, '_' and '-' "
            "(it becomes part of its tools' names)"
        )
    if (server.command is None) == (server.url is None):
        both = "both" if server.command is not None else "neither"
        raise ConfigError(
            f"{where} has {both} of command and url: give command for a server relay starts "
            "(stdio) or url for a streamable-HTTP server"
        )
    defaults = McpServerConfig()
    if server.command is not None:
        if not server.command.strip():
            raise ConfigError(f"{where}.command is empty")
        other = [key for key in HTTP_KEYS if getattr(server, key) != getattr(defaults, key)]
        if other:
            raise ConfigError(f"{where}.{other[0]} is for an HTTP server (url); this one is stdio")
    else:
        other = [key for key in STDIO_KEYS if getattr(server, key) != getattr(defaults, key)]
        if other:
            raise ConfigError(
                f"{where}.{other[0]} is for a stdio server (command); this one has a url"
            )
        assert server.url is not None
        if not server.url.startswith(("http://", "https://")):
            raise ConfigError(
                f"{where}.url must start with http:// or https://, got {server.url!r}"
            )
    for key in ("startup_timeout_sec", "tool_timeout_sec"):
        value = getattr(server, key)
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise ConfigError(f"{where}.{key} must be a positive number of seconds, got {value!r}")
    bound = server.tool_output_max_bytes
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < MIN_ANSWER_BYTES:
        raise ConfigError(
            f"{where}.tool_output_max_bytes must be a number of bytes of at least "
            f"{MIN_ANSWER_BYTES}, got {bound!r}"
        )


def resolve_mcp_paths(servers: Any, base: Path) -> None:
    """Make the paths a configuration file's ``[mcp_servers.NAME]`` tables give relative to
    the file absolute: a command or an argument that starts with ``./`` or ``../``, and a
    relative ``cwd``."""
    if not isinstance(servers, dict):
        return
    for table in servers.values():
        if not isinstance(table, dict):
            continue
        command = table.get("command")
        if isinstance(command, str) and command.startswith(("./", "../")):
            table["command"] = str(base / command)
        args = table.get("args")
        if isinstance(args, list):
            table["args"] = [
                str(base / arg) if isinstance(arg, str) and arg.startswith(("./", "../")) else arg
                for arg in args
            ]
        cwd = table.get("cwd")
        if isinstance(cwd, str) and cwd and not Path(cwd).is_absolute():
            table["cwd"] = str(base / cwd)


__all__ = [
    "MIN_ANSWER_BYTES",
    "McpServerConfig",
    "check_mcp_server",
    "resolve_mcp_paths",
]
