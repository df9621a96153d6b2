"""What environment the commands of a session get, in the form Codex reads:
the ``[shell_environment_policy]`` table (docs/approvals.md, docs/config.md).

Only the value lives here, with the checks that word its errors; the environment a policy makes
is ``relay._exec._environment.command_environment``'s business.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import attrs

#: Where a command's environment starts (``shell_environment_policy.inherit``).
EnvironmentInherit: TypeAlias = Literal["all", "core", "none"]

ENVIRONMENT_INHERITS: tuple[EnvironmentInherit, ...] = ("all", "core", "none")

#: The patterns a policy drops unless ``ignore_default_excludes``: names that look like they
#: hold a credential.
DEFAULT_EXCLUDES: tuple[str, ...] = ("*KEY*", "*SECRET*", "*TOKEN*")

#: The variables ``inherit = "core"`` keeps, whatever their case: what a command needs to find
#: programs, a home, a temporary folder, its user and its locale.
CORE_VARIABLES: tuple[str, ...] = (
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TEMP",
    "TMP",
    "TMPDIR",
    "USER",
)


@attrs.frozen
class ShellEnvironmentPolicy:
    """The environment the commands of ``shell`` and of hooks get:
    ``[shell_environment_policy]``. It is made in five steps, in this order: start from
    ``inherit``; drop the default excludes (unless ``ignore_default_excludes``); drop
    ``exclude``; add ``set``; keep only ``include_only`` (when given). The variables that hold
    the session's API key are dropped whatever the policy says."""

    inherit: EnvironmentInherit = "all"
    """Where the environment starts: ``"all"`` of relay's environment, ``"core"`` (only
    ``HOME``, ``LANG``, ``LC_ALL``, ``LC_CTYPE``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TEMP``,
    ``TMP``, ``TMPDIR`` and ``USER``, in any case) or ``"none"`` (nothing)."""
    ignore_default_excludes: bool = False
    """Keep the variables whose names hold ``KEY``, ``SECRET`` or ``TOKEN`` (in any case);
    false drops them before ``exclude`` is applied."""
    exclude: tuple[str, ...] = attrs.field(converter=tuple, factory=tuple)
    """Patterns of names to drop: ``*`` stands for any run of characters, ``?`` for one, and
    letters match in either case (``"AWS_*"``)."""
    set: Mapping[str, str] = attrs.field(factory=dict)
    """Variables to set, by name, after the excludes: a name given here is kept even when an
    exclude pattern matches it."""
    include_only: tuple[str, ...] = attrs.field(converter=tuple, factory=tuple)
    """When given, patterns of the only names kept, applied last: a variable of ``set`` that
    none matches is dropped too."""


def environment_policy_problem(data: Any) -> str | None:
    """What is wrong with the ``shell_environment_policy`` table of plain configuration data,
    worded for a ``ConfigError`` that names the key; None when it is right or absent. Checked
    before the data is structured, so the message is this one rather than the converter's.
    (An unknown key in the table is found with the others of the configuration.)"""
    table = data.get("shell_environment_policy")
    if table is None:
        return None
    if not isinstance(table, Mapping):
        return f"shell_environment_policy must be a table; got {table!r}"
    where = "shell_environment_policy."
    inherit = table.get("inherit")
    if inherit is not None and inherit not in ENVIRONMENT_INHERITS:
        wanted = ", ".join(f'"{one}"' for one in ENVIRONMENT_INHERITS)
        return f"{where}inherit must be one of {wanted}; got {inherit!r}"
    flag = table.get("ignore_default_excludes")
    if flag is not None and not isinstance(flag, bool):
        return f"{where}ignore_default_excludes must be true or false; got {flag!r}"
    for key in ("exclude", "include_only"):
        patterns = table.get(key)
        if patterns is None:
            continue
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            return f"{where}{key} must be an array of strings (name patterns); got {patterns!r}"
        if "" in patterns:
            return f"{where}{key} holds an empty pattern, which matches no name"
    variables = table.get("set")
    if variables is None:
        return None
    if not isinstance(variables, Mapping):
        return f'{where}set must be a table of NAME = "value"; got {variables!r}'
    for name, value in variables.items():
        if not name or "=" in name or "\0" in name:
            return f"{where}set: {name!r} is not a variable name (empty, or holds '=' or NUL)"
        if not isinstance(value, str):
            return f"{where}set.{name} must be a string; got {value!r}"
        if "\0" in value:
            return f"{where}set.{name} holds a NUL character, which no environment can carry"
    return None


__all__ = [
    "CORE_VARIABLES",
    "DEFAULT_EXCLUDES",
    "ENVIRONMENT_INHERITS",
    "EnvironmentInherit",
    "ShellEnvironmentPolicy",
    "environment_policy_problem",
]
