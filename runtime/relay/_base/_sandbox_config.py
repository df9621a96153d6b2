"""Approvals and the sandbox in a configuration, in the form Codex reads (docs/approvals.md):
``approval_policy``, ``sandbox_mode`` and the ``[sandbox_workspace_write]`` table.

Only the values live here. What a mode confines is ``relay._exec._sandbox``'s business, and
when a call waits for a decision is the session's.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, TypeAlias

import attrs

#: When a session asks before it runs a call (``approval_policy``).
ApprovalPolicy: TypeAlias = Literal["untrusted", "on-failure", "on-request", "never"]

#: What a command run by ``shell`` or a hook may touch (``sandbox_mode``).
SandboxMode: TypeAlias = Literal["read-only", "workspace-write", "danger-full-access"]

#: Whether an MCP server's calls are asked about (``[mcp_servers.NAME] approval``).
McpApproval: TypeAlias = Literal["always", "never"]

APPROVAL_POLICIES: tuple[ApprovalPolicy, ...] = ("untrusted", "on-failure", "on-request", "never")
SANDBOX_MODES: tuple[SandboxMode, ...] = ("read-only", "workspace-write", "danger-full-access")
MCP_APPROVALS: tuple[McpApproval, ...] = ("always", "never")


def strings(values: Iterable[str]) -> tuple[str, ...]:
    """``values`` as a tuple (a converter mypy can type)."""
    return tuple(values)


@attrs.frozen
class SandboxWorkspaceWrite:
    """What ``sandbox_mode = "workspace-write"`` lets a command write and reach:
    ``[sandbox_workspace_write]``. The other modes ignore it."""

    writable_roots: tuple[str, ...] = attrs.field(converter=strings, factory=tuple)
    """Folders a command may write under, besides the session's working directory. In a
    configuration file, a relative one is relative to that file; in a ``relay.Config`` built
    in code, to the session's working directory. Each must exist when the session opens."""
    network_access: bool = False
    """Let commands reach the network, loopback included; otherwise they have none (in
    ``"read-only"`` mode they never have it)."""
    exclude_tmpdir_env_var: bool = False
    """Do not make the folder ``$TMPDIR`` names writable."""
    exclude_slash_tmp: bool = False
    """Do not make ``/tmp`` writable."""


def sandbox_keys_problem(data: Any) -> str | None:
    """What is wrong with the approval and sandbox keys of plain configuration data, worded
    for a ``ConfigError`` (naming the key, the value and the values it takes); None when they
    are right or absent. Checked before the data is structured, so the message is this one
    rather than the converter's."""
    checks: list[tuple[str, Any, tuple[str, ...]]] = [
        ("approval_policy", data.get("approval_policy"), APPROVAL_POLICIES),
        ("sandbox_mode", data.get("sandbox_mode"), SANDBOX_MODES),
    ]
    servers = data.get("mcp_servers")
    if isinstance(servers, dict):
        for name, table in servers.items():
            if isinstance(table, dict):
                checks.append(
                    (f"mcp_servers.{name}.approval", table.get("approval"), MCP_APPROVALS)
                )
    for key, value, allowed in checks:
        if value is not None and value not in allowed:
            wanted = ", ".join(f'"{one}"' for one in allowed)
            return f"{key} must be one of {wanted}; got {value!r}"
    return None


def resolve_sandbox_paths(data: dict[str, Any], base: Path) -> None:
    """Make the relative ``writable_roots`` of a configuration file's
    ``[sandbox_workspace_write]`` relative to the file (``base``, its folder)."""
    table = data.get("sandbox_workspace_write")
    roots = table.get("writable_roots") if isinstance(table, dict) else None
    if isinstance(table, dict) and isinstance(roots, list):
        table["writable_roots"] = [
            str(base / root) if isinstance(root, str) and not Path(root).is_absolute() else root
            for root in roots
        ]


__all__ = [
    "APPROVAL_POLICIES",
    "MCP_APPROVALS",
    "SANDBOX_MODES",
    "ApprovalPolicy",
    "McpApproval",
    "SandboxMode",
    "SandboxWorkspaceWrite",
    "resolve_sandbox_paths",
    "sandbox_keys_problem",
]
