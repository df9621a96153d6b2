"""Public names for compaction backends: the pure functions they are built from.

Backends (in the ``tasks`` package, or an embedder's own) compute a new history with these
functions and install it through :meth:`relay.lowlevel.TaskContext.install_compaction`.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._base import _protocol as p
from ._base._tokens import items_tokens
from ._core._background import background_due as background_due
from ._core._background import installed_history as installed_history
from ._core._background import still_current as still_current
from ._core._compact import ANSWER_ROOM as ANSWER_ROOM
from ._core._compact import LOCAL_USER_MESSAGE_BUDGET as LOCAL_USER_MESSAGE_BUDGET
from ._core._compact import NO_SUMMARY as NO_SUMMARY
from ._core._compact import REMOTE_V2_USER_MESSAGE_BUDGET as REMOTE_V2_USER_MESSAGE_BUDGET
from ._core._compact import TRUNCATED_OUTPUT_NOTE as TRUNCATED_OUTPUT_NOTE
from ._core._compact import answer_room as answer_room
from ._core._compact import auto_compact_limit as auto_compact_limit
from ._core._compact import build_compacted_history as build_compacted_history
from ._core._compact import compaction_prompt as compaction_prompt
from ._core._compact import drop_oldest as drop_oldest
from ._core._compact import filter_remote_output as filter_remote_output
from ._core._compact import fit_to_window as fit_to_window
from ._core._compact import ghost_snapshots as ghost_snapshots
from ._core._compact import is_real_user_message as is_real_user_message
from ._core._compact import is_summary as is_summary
from ._core._compact import keep_recent_messages as keep_recent_messages
from ._core._compact import keep_recent_user_messages as keep_recent_user_messages
from ._core._compact import kept_message_budget as kept_message_budget
from ._core._compact import real_user_messages as real_user_messages
from ._core._compact import summary_prefix as summary_prefix
from ._core._compact import summary_text as summary_text
from ._core._work_state import MASK_MARKER as MASK_MARKER
from ._core._work_state import WORK_STATE_MARKER as WORK_STATE_MARKER
from ._core._work_state import WorkState as WorkState
from ._core._work_state import carry_work_state as carry_work_state
from ._core._work_state import mask_old_outputs as mask_old_outputs
from ._core._work_state import mask_placeholder as mask_placeholder
from ._core._work_state import masking_suffices as masking_suffices
from ._core._work_state import render_work_state as render_work_state


def estimate_tokens(items: Iterable[p.ResponseItem]) -> int:
    """Approximate tokens of a history (docs/session.md)."""
    return items_tokens(items)


__all__ = [
    "ANSWER_ROOM",
    "LOCAL_USER_MESSAGE_BUDGET",
    "MASK_MARKER",
    "NO_SUMMARY",
    "REMOTE_V2_USER_MESSAGE_BUDGET",
    "TRUNCATED_OUTPUT_NOTE",
    "WORK_STATE_MARKER",
    "WorkState",
    "answer_room",
    "auto_compact_limit",
    "background_due",
    "build_compacted_history",
    "carry_work_state",
    "compaction_prompt",
    "drop_oldest",
    "estimate_tokens",
    "filter_remote_output",
    "fit_to_window",
    "ghost_snapshots",
    "installed_history",
    "is_real_user_message",
    "is_summary",
    "keep_recent_messages",
    "keep_recent_user_messages",
    "mask_old_outputs",
    "mask_placeholder",
    "masking_suffices",
    "kept_message_budget",
    "real_user_messages",
    "render_work_state",
    "still_current",
    "summary_prefix",
    "summary_text",
]
