"""The environment a command of the session gets: relay's own, shaped by the
``[shell_environment_policy]`` table (docs/approvals.md).

:func:`command_environment` is a plain function of the policy, an environment and the names of
the variables that hold the session's API keys; the shell tool and hook commands call it with
``os.environ``. Its steps, in order:

1. start from ``inherit``: all of the environment, the core variables, or nothing;
2. unless ``ignore_default_excludes``, drop the names that match ``*KEY*``, ``*SECRET*`` or
   ``*TOKEN*``;
3. drop the names that match a pattern of ``exclude``;
4. add ``set`` (so a name set there is kept although an exclude matched it);
5. when ``include_only`` is given, keep only the names that match one of its patterns (a name
   of ``set`` included: this step is last);
6. drop the API keys' variables, whatever the steps before kept or set.

A pattern is a whole name, where ``*`` stands for any run of characters (none included) and
``?`` for one; nothing else is special, and the letters A to Z match in either case. The core
variables are matched the same way, so ``inherit = "core"`` keeps ``Path`` as well as ``PATH``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import assert_never

from .._base._environment_config import CORE_VARIABLES, DEFAULT_EXCLUDES, ShellEnvironmentPolicy


def command_environment(
    policy: ShellEnvironmentPolicy,
    environ: Mapping[str, str],
    secret_names: Iterable[str],
) -> dict[str, str]:
    """The environment of a command under ``policy``, made from ``environ`` (relay's), without
    any of ``secret_names`` (the variables of the session's API keys: a command never gets
    them, whatever the policy says, ``set`` included)."""
    match policy.inherit:
        case "all":
            env = dict(environ)
        case "core":
            env = {k: v for k, v in environ.items() if matches_any(k, CORE_VARIABLES)}
        case "none":
            env = {}
        case _:
            assert_never(policy.inherit)
    if not policy.ignore_default_excludes:
        env = {k: v for k, v in env.items() if not matches_any(k, DEFAULT_EXCLUDES)}
    if policy.exclude:
        env = {k: v for k, v in env.items() if not matches_any(k, policy.exclude)}
    env.update(policy.set)
    if policy.include_only:
        env = {k: v for k, v in env.items() if matches_any(k, policy.include_only)}
    for name in secret_names:
        env.pop(name, None)
    return env


def matches_any(name: str, patterns: Iterable[str]) -> bool:
    """Whether ``name`` matches one of ``patterns`` (see the module's docstring)."""
    return any(_compiled(pattern).fullmatch(name) is not None for pattern in patterns)


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    parts = [".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern]
    # ASCII: only A-Z and a-z fold into each other, as environment names are compared.
    return re.compile("".join(parts), re.IGNORECASE | re.ASCII | re.DOTALL)


__all__ = ["command_environment", "matches_any"]
