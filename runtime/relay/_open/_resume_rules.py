"""The rules a resumed session runs under: those its rollout recorded, with only the parts a
resume chose on purpose in their place (docs/approvals.md, Rules on resume).

A session's rules are its approval policy, its sandbox and its commands' environment
(:class:`~relay._base._exec_rules.ExecRules`). Resuming a session under other rules than it
had is a choice its user makes, never a side effect of which configuration happens to be at
hand: every resume path (``resume_session``, ``relay resume``, ``relay exec resume``, the
app-server's ``thread/resume``) keeps the recorded rules, replaces only the parts it was
explicitly given, and warns when what it was given loosens them. Everything here is a plain
function over plain data.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import attrs

from .._base._config import Config
from .._base._environment_config import ShellEnvironmentPolicy
from .._base._exec_rules import ExecRules, loosenings

#: The configuration keys that make a session's rules: a chosen key, or one below it
#: (``sandbox_workspace_write.network_access``), replaces that part of the recorded rules.
RULE_KEYS: tuple[str, ...] = (
    "approval_policy",
    "sandbox_mode",
    "sandbox_workspace_write",
    "shell_environment_policy",
)

#: The fields of :class:`ExecRules` that ``[sandbox_workspace_write]`` holds, by key.
_TABLE_FIELDS: tuple[str, ...] = (
    "writable_roots",
    "network_access",
    "exclude_tmpdir_env_var",
    "exclude_slash_tmp",
)
_ENVIRONMENT_FIELDS: tuple[str, ...] = tuple(
    field.name for field in attrs.fields(ShellEnvironmentPolicy)
)

#: The start of the warning of a resume that loosens the recorded rules.
LOOSENED = "this resume loosens the session's recorded rules"


def is_rule_key(dotted: str) -> bool:
    """Whether the configuration key ``dotted`` (``a.b.c``) sets part of a session's rules."""
    return dotted.partition(".")[0] in RULE_KEYS


def chosen_rules(recorded: ExecRules, given: ExecRules, chosen: Collection[str]) -> ExecRules:
    """``recorded`` with the parts the keys ``chosen`` name taken from ``given``.

    A key names a part as deep as it goes, down to a field of a table:
    ``sandbox_workspace_write`` takes the whole table, ``sandbox_workspace_write.network_access``
    only that field, ``shell_environment_policy.set.NAME`` the whole ``set``. Keys that set no
    rule are ignored.
    """
    changes: dict[str, Any] = {}
    environment: dict[str, Any] = {}
    for key in chosen:
        head, _, rest = key.partition(".")
        field = rest.partition(".")[0]
        if head in ("approval_policy", "sandbox_mode"):
            changes[head] = getattr(given, head)
        elif head == "sandbox_workspace_write":
            for name in (field,) if field else _TABLE_FIELDS:
                if name in _TABLE_FIELDS:
                    changes[name] = getattr(given, name)
        elif head == "shell_environment_policy":
            if not field:
                changes["environment"] = given.environment
            elif field in _ENVIRONMENT_FIELDS:
                environment[field] = getattr(given.environment, field)
    if environment and "environment" not in changes:
        changes["environment"] = attrs.evolve(recorded.environment, **environment)
    return attrs.evolve(recorded, **changes)


def resumed_rules(
    config: Config, recorded: ExecRules | None, *, chosen: Collection[str] = ()
) -> Config:
    """``config`` with the rules a resumed session recorded, but for the parts the keys
    ``chosen`` name, which keep ``config``'s. A rollout that recorded none (written before
    sessions recorded their rules) leaves ``config`` as it is."""
    if recorded is None:
        return config
    return chosen_rules(recorded, ExecRules.from_config(config), chosen).apply(config)


def loosened_warning(recorded: ExecRules | None, config: Config) -> str | None:
    """The warning of a resume that goes on under ``config``'s rules where the session
    recorded ``recorded``; None when they allow nothing more (or none were recorded)."""
    if recorded is None:
        return None
    found = loosenings(recorded, ExecRules.from_config(config))
    return f"{LOOSENED}: {'; '.join(found)}" if found else None


__all__ = [
    "LOOSENED",
    "RULE_KEYS",
    "chosen_rules",
    "is_rule_key",
    "loosened_warning",
    "resumed_rules",
]
