"""The compaction policy as plain functions: which backend a configuration selects, and where
the initial context goes in a compacted history (docs/compaction.md)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence

import relay
from relay.lowlevel import Compaction, Injection, is_real_user_message


class Backend(enum.StrEnum):
    """relay's built-in compaction backends (docs/compaction.md)."""

    TOKEN_BUDGET = "token_budget"
    REMOTE_V2 = "remote_v2"
    REMOTE_V1 = "remote_v1"
    LOCAL = "local"


def select_backend(config: relay.Config, provider: relay.ProviderConfig) -> str:
    """The backend a compaction uses: the one decision, made here only.

    The token budget when ``features.token_budget`` is on; else the local summary when
    ``compact_model_provider`` names another provider (a remote compaction is the session's
    provider's own); else remote V2 for a provider that offers it with
    ``features.remote_compaction_v2``; else remote V1 for a provider that compacts remotely;
    else the local summary.
    """
    if config.features.token_budget:
        return Backend.TOKEN_BUDGET
    if config.separate_compaction_provider:
        return Backend.LOCAL
    if provider.remote_compaction == "v2" and config.features.remote_compaction_v2:
        return Backend.REMOTE_V2
    if provider.remote_compaction in {"v1", "v2"}:
        return Backend.REMOTE_V1
    return Backend.LOCAL


def place_initial_context(
    history: Sequence[relay.ResponseItem],
    initial: Sequence[relay.ResponseItem],
    injection: Injection,
) -> list[relay.ResponseItem]:
    """Put the initial context into a compacted history (docs/compaction.md).

    ``before_last_user_message`` inserts it before, in order of preference, the last real user
    message, the last user message of any kind, the last ``compaction`` item, else at the end.
    The summary or compaction item stays last in every case the history ends with one.
    """
    items = list(history)
    if injection is Injection.DO_NOT_INJECT or not initial:
        return items
    index = _last_index(items, is_real_user_message)
    if index is None:
        index = _last_index(items, lambda i: isinstance(i, relay.Message) and i.role == "user")
    if index is None:
        index = _last_index(items, lambda i: isinstance(i, Compaction))
    if index is None:
        return items + list(initial)
    return items[:index] + list(initial) + items[index:]


def _last_index(
    items: Sequence[relay.ResponseItem], test: Callable[[relay.ResponseItem], bool]
) -> int | None:
    for index in range(len(items) - 1, -1, -1):
        if test(items[index]):
            return index
    return None


__all__ = ["Backend", "place_initial_context", "select_backend"]
