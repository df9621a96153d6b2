"""Compaction: one small backend interface, one module per backend, one shared flow.

Which backend runs is decided once, by :func:`select_backend`. A session's :class:`Compactor`
(one per task) holds the backends by name and that function, and decides what each compaction
point does: masking first, a summary when that is not enough, the escalation of the loop guard,
background work (:mod:`.auto`, :mod:`.background`). Every compaction then goes through one flow
(:func:`run_compaction`, :func:`install_result`). Adding a backend is one new module and one
entry in :data:`BACKENDS`, or a compactor of one's own (``open_session(compactor=...)``).

The pure functions backends are built from are here too (:mod:`._history`); the interface a
backend implements is in :mod:`relay.lowlevel`.
"""

from ._flow import CUT_SUMMARY_WARNING as CUT_SUMMARY_WARNING
from ._flow import hook_trigger as hook_trigger
from ._flow import install_result as install_result
from ._flow import run_compaction as run_compaction
from ._flow import still_over_window as still_over_window
from ._flow import with_record as with_record
from ._history import MASK_MARKER as MASK_MARKER
from ._history import REMOTE_V2_USER_MESSAGE_BUDGET as REMOTE_V2_USER_MESSAGE_BUDGET
from ._history import TRUNCATED_OUTPUT_NOTE as TRUNCATED_OUTPUT_NOTE
from ._history import WORK_STATE_MARKER as WORK_STATE_MARKER
from ._history import carry_work_state as carry_work_state
from ._history import drop_oldest as drop_oldest
from ._history import filter_remote_output as filter_remote_output
from ._history import fit_to_window as fit_to_window
from ._history import keep_recent_messages as keep_recent_messages
from ._history import kept_message_budget as kept_message_budget
from ._history import mask_old_outputs as mask_old_outputs
from ._history import mask_placeholder as mask_placeholder
from ._history import mask_reference as mask_reference
from ._history import masking_suffices as masking_suffices
from ._history import render_work_state as render_work_state
from ._policy import Backend as Backend
from ._policy import place_initial_context as place_initial_context
from ._policy import select_backend as select_backend
from .auto import BACKENDS as BACKENDS
from .auto import Compactor as Compactor
from .local import LocalBackend as LocalBackend
from .masking import MaskingBackend as MaskingBackend
from .remote_v1 import RemoteV1Backend as RemoteV1Backend
from .remote_v2 import RemoteV2Backend as RemoteV2Backend
from .token_budget import TokenBudgetBackend as TokenBudgetBackend

__all__ = [
    "BACKENDS",
    "CUT_SUMMARY_WARNING",
    "MASK_MARKER",
    "REMOTE_V2_USER_MESSAGE_BUDGET",
    "TRUNCATED_OUTPUT_NOTE",
    "WORK_STATE_MARKER",
    "Backend",
    "Compactor",
    "LocalBackend",
    "MaskingBackend",
    "RemoteV1Backend",
    "RemoteV2Backend",
    "TokenBudgetBackend",
    "carry_work_state",
    "drop_oldest",
    "filter_remote_output",
    "fit_to_window",
    "hook_trigger",
    "install_result",
    "keep_recent_messages",
    "kept_message_budget",
    "mask_old_outputs",
    "mask_placeholder",
    "mask_reference",
    "masking_suffices",
    "place_initial_context",
    "render_work_state",
    "run_compaction",
    "select_backend",
    "still_over_window",
    "with_record",
]
