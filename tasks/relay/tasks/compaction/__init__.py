"""Compaction: one small backend interface, one module per backend, one shared flow.

Which backend runs is decided once, by :func:`select_backend`. A session's :class:`Compactor`
(one per task) holds the backends by name and that function, and decides what each compaction
point does: masking first, a summary when that is not enough, the escalation of the loop guard,
background work. Whether anything is due at a point is a pure function of the task's view
(the policy). Every compaction then goes through one flow (:func:`run_compaction`,
:func:`install_result`). Adding a backend is one new module and one entry in :data:`BACKENDS`,
or a compactor of one's own (``open_session(compactor=...)``).

The interface a backend implements is in :mod:`relay.lowlevel`. This package's modules are
private: what it promises is the names below (docs/tasks.md).
"""

from ._auto import BACKENDS as BACKENDS
from ._auto import Compactor as Compactor
from ._flow import install_result as install_result
from ._flow import run_compaction as run_compaction
from ._local import LocalBackend as LocalBackend
from ._masking import MaskingBackend as MaskingBackend
from ._policy import Backend as Backend
from ._policy import place_initial_context as place_initial_context
from ._policy import select_backend as select_backend
from ._remote_v1 import RemoteV1Backend as RemoteV1Backend
from ._remote_v2 import RemoteV2Backend as RemoteV2Backend
from ._token_budget import TokenBudgetBackend as TokenBudgetBackend

__all__ = [
    "BACKENDS",
    "Backend",
    "Compactor",
    "LocalBackend",
    "MaskingBackend",
    "RemoteV1Backend",
    "RemoteV2Backend",
    "TokenBudgetBackend",
    "install_result",
    "place_initial_context",
    "run_compaction",
    "select_backend",
]
