"""relay's own tasks: the regular turn and the compaction task, and the compaction they share.

They are built on the public API alone (:mod:`relay` and :mod:`relay.lowlevel`), as an
embedder's tasks are, and registered the same way: ``user_turn`` and ``user_input`` →
:func:`regular`, ``compact`` → :func:`compact`. Each can be replaced
(``open_session(tasks={"compact": ...})``). A task of one's own that wants the regular turn's
semantics reuses its steps: :class:`TurnSteps`.
"""

from ._compact import CompactTask as CompactTask
from ._compact import compact as compact
from ._regular import RegularTurn as RegularTurn
from ._regular import regular as regular
from ._steps import TurnSteps as TurnSteps
from ._steps import keep_steered as keep_steered

__all__ = ["CompactTask", "RegularTurn", "TurnSteps", "compact", "keep_steered", "regular"]
