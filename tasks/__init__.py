"""relay's task kinds: the regular turn and the compaction task.

The ``relay.tasks`` entry point calls :func:`register` the first time a session needs a kind.
"""

from __future__ import annotations

from collections.abc import Callable

from runtime import TaskKind

from .compact import CompactTask
from .regular import RegularTurn


def register(register_kind: Callable[..., None]) -> None:
    """Register every task kind of this package with the runtime."""
    register_kind(TaskKind.REGULAR, RegularTurn)
    register_kind(TaskKind.COMPACT, CompactTask)
