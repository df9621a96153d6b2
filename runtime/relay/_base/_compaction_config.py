"""The configuration tables of compaction: ``[compaction]`` and ``[hooks]`` (docs/config.md).

Kept apart from ``_config.py``, which re-exports them, as the tables of one subject.
"""

from __future__ import annotations

from typing import Literal

import attrs


@attrs.frozen
class CompactionSettings:
    """How relay's compactions write and place a summary (docs/compaction.md)."""

    tool_outputs_as_data: bool = True
    """In a local summary request, fence every tool output as data and tell the model that
    nothing inside one is addressed to it (docs/compaction.md)."""
    placement: Literal["cache_aware", "codex", "default"] = "cache_aware"
    """Where a compaction puts what it keeps: ``cache_aware`` (the initial context where it
    stood, so the next request begins as the earlier ones did, and the summary request sent
    with the turn's tools, so it begins as the turns did: a server's prompt cache holds more
    of both), or ``codex`` (Codex's: the kept user messages, the summary, then the initial
    context anew; ``default`` is its older name)."""
    save_state: bool = False
    """Before a compaction that summarises or opens a fresh window, give the model one
    restricted step to save what it needs (at most one tool call, no approval asked); what
    it writes goes into the work-state record."""


@attrs.frozen
class HookCommand:
    """A compaction hook run as a command."""

    command: tuple[str, ...] = attrs.field(converter=tuple)
    """The program and its arguments (argv); never run through a shell. In a configuration
    file, an argument that starts with ``./`` or ``../`` is a path relative to that file."""
    timeout_ms: int = 10_000
    """Milliseconds after which the hook is stopped (and the compaction goes on)."""


@attrs.frozen
class Hooks:
    """Compaction hooks."""

    pre_compact: tuple[HookCommand, ...] = attrs.field(converter=tuple, factory=tuple)
    """Run before a compaction; may stop it."""
    post_compact: tuple[HookCommand, ...] = attrs.field(converter=tuple, factory=tuple)
    """Run after a compaction is installed."""


__all__ = ["CompactionSettings", "HookCommand", "Hooks"]
