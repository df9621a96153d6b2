"""relay's task kinds: the regular turn and the compaction task.

:data:`TASK_KINDS` is what a session runs unless it is given other kinds
(``relay.open_session(task_kinds=...)``); :func:`task_kinds` builds the same kinds over
another sequence of compaction backends.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from relay.lowlevel import TaskKinds

from .compact import CompactTask
from .compaction import BACKENDS, CompactionBackend
from .regular import RegularTurn


def task_kinds(backends: Sequence[CompactionBackend] = BACKENDS) -> TaskKinds:
    """relay's task kinds, compacting with the first of ``backends`` that applies."""
    backends = tuple(backends)
    return TaskKinds(
        regular=partial(RegularTurn, backends=backends),
        compact=partial(CompactTask, backends=backends),
    )


#: relay's built-in task kinds.
TASK_KINDS = task_kinds()

__all__ = ["TASK_KINDS", "CompactTask", "RegularTurn", "task_kinds"]
