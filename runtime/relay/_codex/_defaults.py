"""What a session offers when it runs for a program written for Codex (docs/decisions.md).

Codex offers its model ``apply_patch`` and ``update_plan`` by default, and its clients expect
file changes and plans; so ``relay exec`` and ``relay app-server`` turn both on unless the
configuration names them. A session opened from Python offers what its configuration says.
"""

from __future__ import annotations

import attrs

from .._base._config import Config

#: The tools Codex offers by default that relay offers only when asked, elsewhere.
CODEX_TOOLS = ("apply_patch", "update_plan")


def with_codex_tools(config: Config) -> Config:
    """``config`` with Codex's default tools on, but for those it switches itself."""
    missing = {name: True for name in CODEX_TOOLS if name not in config.tools}
    if not missing:
        return config
    return attrs.evolve(config, tools={**missing, **config.tools})


__all__ = ["CODEX_TOOLS", "with_codex_tools"]
