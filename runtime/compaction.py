"""Public names for compaction backends: the pure functions they are built from.

Backends (in the ``tasks`` package, or an embedder's own) compute a new history with these
functions and install it through :meth:`relay.lowlevel.TaskContext.install_compaction`.
"""

from __future__ import annotations

from collections.abc import Iterable

from . import _protocol as p
from ._background import background_due as background_due
from ._background import installed_history as installed_history
from ._background import still_current as still_current
from ._compact import LOCAL_USER_MESSAGE_BUDGET as LOCAL_USER_MESSAGE_BUDGET
from ._compact import NO_SUMMARY as NO_SUMMARY
from ._compact import REMOTE_V2_USER_MESSAGE_BUDGET as REMOTE_V2_USER_MESSAGE_BUDGET
from ._compact import TRUNCATED_OUTPUT_NOTE as TRUNCATED_OUTPUT_NOTE
from ._compact import auto_compact_limit as auto_compact_limit
from ._compact import build_compacted_history as build_compacted_history
from ._compact import compaction_prompt as compaction_prompt
from ._compact import drop_oldest as drop_oldest
from ._compact import filter_remote_output as filter_remote_output
from ._compact import fit_to_window as fit_to_window
from ._compact import ghost_snapshots as ghost_snapshots
from ._compact import is_real_user_message as is_real_user_message
from ._compact import is_summary as is_summary
from ._compact import keep_recent_messages as keep_recent_messages
from ._compact import keep_recent_user_messages as keep_recent_user_messages
from ._compact import real_user_messages as real_user_messages
from ._compact import summary_prefix as summary_prefix
from ._compact import summary_text as summary_text
from ._tokens import items_tokens


def estimate_tokens(items: Iterable[p.ResponseItem]) -> int:
    """Approximate tokens of a history (SPEC §7.5)."""
    return items_tokens(items)


__all__ = [
    "LOCAL_USER_MESSAGE_BUDGET",
    "NO_SUMMARY",
    "REMOTE_V2_USER_MESSAGE_BUDGET",
    "TRUNCATED_OUTPUT_NOTE",
    "auto_compact_limit",
    "background_due",
    "build_compacted_history",
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
    "real_user_messages",
    "still_current",
    "summary_prefix",
    "summary_text",
]
