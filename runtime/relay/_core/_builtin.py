"""The built-in tools and which are on by default (docs/tools.md): ``tools.NAME = true`` or
``false`` in the configuration switches each."""

from __future__ import annotations

from collections.abc import Mapping

from .._base._errors import ConfigError
from ._agent_tools import AGENT_TOOLS
from ._patch_tool import APPLY_PATCH
from ._plan_tool import UPDATE_PLAN
from ._shell import SHELL
from ._tools import LIST_DIR, READ_FILE, SLEEP, Tool, ToolRegistry

#: Every built-in tool by name, with whether it is on when the configuration does not say.
BUILTIN_TOOLS: Mapping[str, tuple[Tool, bool]] = {
    "read_file": (READ_FILE, True),
    "list_dir": (LIST_DIR, True),
    "sleep": (SLEEP, True),
    "shell": (SHELL, False),
    "apply_patch": (APPLY_PATCH, False),
    "update_plan": (UPDATE_PLAN, False),
    # Codex's sub-agent tools: on with features.multi_agent (docs/agents.md).
    **{name: (tool, False) for name, tool in AGENT_TOOLS.items()},
}


def builtin_registry(enabled: Mapping[str, bool], *, multi_agent: bool = False) -> ToolRegistry:
    """The built-in tools, each on by its default unless ``enabled`` says otherwise; with
    ``multi_agent``, the sub-agent tools are on by default."""
    unknown = set(enabled) - set(BUILTIN_TOOLS)
    if unknown:
        raise ConfigError(f"unknown tool in config: tools.{sorted(unknown)[0]}")
    registry = ToolRegistry()
    for name, (tool, default) in BUILTIN_TOOLS.items():
        if enabled.get(name, default or (multi_agent and name in AGENT_TOOLS)):
            registry.register(tool)
    return registry


__all__ = ["BUILTIN_TOOLS", "builtin_registry"]
