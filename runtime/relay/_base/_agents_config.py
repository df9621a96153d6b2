"""Sub-agents in a configuration (docs/agents.md): the ``[agents]`` table, with Codex's keys.

``[agents]`` holds the limits of a tree of sessions (``max_depth``, ``max_threads``) and, as
tables of their own, the roles a spawn may name (``[agents.NAME]``). Codex's three roles,
``default``, ``worker`` and ``explorer``, are always there; a configuration may add its own or
replace theirs. Only the values live here: what a spawn does with them is the session's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ._errors import ConfigError
from ._sandbox_config import APPROVAL_POLICIES, SANDBOX_MODES, strings
from ._suggest import did_you_mean

#: Codex's default for ``agents.max_depth``: the root's children may not spawn.
DEFAULT_MAX_DEPTH = 1
#: Codex's default for ``agents.max_threads``.
DEFAULT_MAX_THREADS = 6


@attrs.frozen
class AgentRole:
    """What a spawn with ``agent_type = NAME`` changes in the child: ``[agents.NAME]``.

    Unset keys are the parent's. The approval policy and the sandbox may only narrow the
    parent's: a looser value is ignored in favour of the parent's own.
    """

    description: str = ""
    """What the role is for, shown to the model in ``spawn_agent``'s description."""
    model: str | None = None
    """The child's model."""
    model_reasoning_effort: str | None = None
    """The child's reasoning effort."""
    instructions: str | None = None
    """A developer message added to the child's initial context."""
    tools: tuple[str, ...] | None = attrs.field(
        default=None, converter=attrs.converters.optional(strings)
    )
    """The only tools the child may call, by name (unset: the parent's)."""
    approval_policy: str | None = None
    """A stricter approval policy for the child's calls."""
    sandbox_mode: str | None = None
    """A stricter sandbox for the child's commands."""


#: Codex's roles, in relay's words: every configuration has them unless it redefines one.
BUILTIN_ROLES: Mapping[str, AgentRole] = {
    "default": AgentRole(description="A general agent with the parent's model and tools."),
    "worker": AgentRole(
        description="Carries out a bounded change and reports the files it touched.",
        instructions=(
            "You are a worker agent started by another agent. Do the task you were given, "
            "change only what it needs, and end with a short report that lists the files you "
            "changed."
        ),
    ),
    "explorer": AgentRole(
        description="Reads and searches to answer a question; it changes nothing.",
        instructions=(
            "You are an explorer agent started by another agent. Read and search to answer "
            "the question you were given; change nothing. End with a short, factual answer "
            "that names the files and lines it rests on."
        ),
        sandbox_mode="read-only",
    ),
}


@attrs.frozen
class AgentsConfig:
    """The ``[agents]`` table: the limits of a tree of sessions and its roles."""

    max_depth: int = DEFAULT_MAX_DEPTH
    """How deep the tree may grow below the root: 1 lets the root spawn, and no child."""
    max_threads: int = DEFAULT_MAX_THREADS
    """How many agents of one tree may be at work at once (the root is not counted); a
    child that ended its turn, was interrupted or was closed does not count."""
    roles: Mapping[str, AgentRole] = attrs.field(factory=dict)
    """The roles a configuration adds to Codex's, or redefines, by name."""

    def role(self, name: str | None) -> AgentRole | None:
        """The role called ``name`` (None: ``default``); None when there is no such role."""
        name = name or "default"
        found = self.roles.get(name)
        return found if found is not None else BUILTIN_ROLES.get(name)

    def role_names(self) -> list[str]:
        """Every role a spawn may name, Codex's first."""
        return [*BUILTIN_ROLES, *(name for name in self.roles if name not in BUILTIN_ROLES)]


_LIMIT_KEYS = ("max_depth", "max_threads")
_ROLE_KEYS = tuple(field.name for field in attrs.fields(AgentRole))


def agents_table(data: Mapping[str, Any]) -> dict[str, Any]:
    """``[agents]`` as written (limits and ``[agents.NAME]`` tables side by side) in the form
    :class:`AgentsConfig` takes (the tables under ``roles``), checked.

    Raises:
        ConfigError: a key that is neither a limit nor a role's table, a role key relay does
            not know, a limit that is not a positive integer, or a policy or mode that does
            not exist.
    """
    out: dict[str, Any] = {}
    roles: dict[str, Any] = {}
    for key, value in data.items():
        if key in _LIMIT_KEYS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"agents.{key} must be a positive integer, got {value!r}")
            out[key] = value
        elif isinstance(value, Mapping):
            for role_key in value:
                if role_key not in _ROLE_KEYS:
                    raise ConfigError(
                        f"unknown config key: agents.{key}.{role_key}"
                        f"{did_you_mean(role_key, _ROLE_KEYS)} (a role holds: "
                        f"{', '.join(_ROLE_KEYS)})"
                    )
            _check_choice(
                f"agents.{key}.approval_policy", value.get("approval_policy"), APPROVAL_POLICIES
            )
            _check_choice(f"agents.{key}.sandbox_mode", value.get("sandbox_mode"), SANDBOX_MODES)
            roles[key] = dict(value)
        else:
            raise ConfigError(
                f"unknown config key: agents.{key}{did_you_mean(key, _LIMIT_KEYS)} ([agents] "
                "holds max_depth, max_threads and a table for each role)"
            )
    if roles:
        out["roles"] = roles
    return out


def _check_choice(key: str, value: Any, choices: tuple[str, ...]) -> None:
    if value is not None and value not in choices:
        raise ConfigError(f"{key} must be one of {', '.join(choices)}, got {value!r}")


__all__ = [
    "BUILTIN_ROLES",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_THREADS",
    "AgentRole",
    "AgentsConfig",
    "agents_table",
]
