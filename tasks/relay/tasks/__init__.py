"""relay's own tasks: the regular turn and the compaction task, and the compaction they share.

They are built on the public API alone (:mod:`relay` and :mod:`relay.lowlevel`), as an
embedder's tasks are, and registered the same way: ``user_turn`` and ``user_input`` →
:func:`regular`, ``compact`` → :func:`compact`. Each can be replaced
(``open_session(tasks={"compact": ...})``).
"""

from .compact import CompactTask as CompactTask
from .compact import compact as compact
from .regular import RegularTurn as RegularTurn
from .regular import regular as regular

__all__ = ["CompactTask", "RegularTurn", "compact", "regular"]
