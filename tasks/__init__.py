"""relay's task kinds: the regular turn and the compaction task.

:data:`TASK_KINDS` is what a session runs unless it is given other kinds
(``runtime.open_session(task_kinds=...)``).
"""

from __future__ import annotations

from runtime import TaskKinds

from .compact import CompactTask
from .regular import RegularTurn

#: relay's built-in task kinds.
TASK_KINDS = TaskKinds(regular=RegularTurn, compact=CompactTask)

__all__ = ["TASK_KINDS", "CompactTask", "RegularTurn"]
