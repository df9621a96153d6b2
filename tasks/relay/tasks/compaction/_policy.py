"""The compaction policy as plain functions: which backend a configuration selects, whether
each kind of compaction is due (every rule a function of the task's view), and where the
initial context goes in a compacted history (docs/compaction.md)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence

import relay
from relay import Compaction
from relay.lowlevel import Injection, TaskView, message_kind

from ._history import WORK_STATE_MARKER, mask_old_outputs


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


def limit_reached(view: TaskView) -> bool:
    """Whether usage reached the auto-compaction limit: an automatic compaction is due at a
    pre-turn, mid-turn or post-turn point."""
    return view.budget.over_limit


def answered_since_compaction(view: TaskView) -> bool:
    """Whether a model answered since the history was last compacted (or it never was): only
    then may an automatic compaction run. Another one before that would compact what the last
    one made, with nothing new said."""
    if view.budget.counted:
        return True
    return not any(_made_by_compaction(item) for item in view.history)


def _made_by_compaction(item: relay.ResponseItem) -> bool:
    if isinstance(item, Compaction) or message_kind(item) == "summary":
        return True
    return (
        isinstance(item, relay.Message)
        and item.role == "user"
        and item.text().startswith(WORK_STATE_MARKER)
    )


def fits_window(view: TaskView) -> bool:
    """Whether the context as it stands can be sent to the turn's model at all."""
    window = view.budget.window
    return window is None or view.budget.usage < window


def downshift_due(view: TaskView) -> bool:
    """Whether the turn's model has a smaller window than the previous turn's and the history
    no longer fits under its limit: a model-downshift compaction is due before the turn."""
    previous = view.last_turn_model
    if previous is None or previous == view.settings.model:
        return False
    old_window = view.budget_for(previous).window
    new = view.budget
    return (
        old_window is not None
        and new.window is not None
        and new.window < old_window
        and new.limit is not None
        and new.usage > new.limit
    )


def mask_due(view: TaskView) -> bool:
    """Whether usage reached ``mask_trigger_tokens`` with masking on (below the limit, a
    mid-turn point masks old tool outputs; :func:`maskable` says whether there are any)."""
    config = view.config
    trigger = config.mask_trigger_tokens
    return (
        config.features.tool_output_masking and trigger is not None and view.budget.usage >= trigger
    )


def maskable(view: TaskView) -> bool:
    """Whether any tool output is old enough to mask."""
    return bool(mask_old_outputs(view.history, view.config.mask_keep_recent_tokens)[1])


def post_turn_due(view: TaskView) -> bool:
    """Whether usage reached ``model_post_turn_compact_threshold_percent`` of the window."""
    budget = view.budget
    return budget.reached(view.config.model_post_turn_compact_threshold_percent, budget.window)


def async_due(view: TaskView) -> bool:
    """Whether an async compaction is due (``features.async_compaction``, usage at
    ``model_async_compact_threshold_percent`` of the window): its result is meant for the next
    turn."""
    config, budget = view.config, view.budget
    return config.features.async_compaction and budget.reached(
        config.model_async_compact_threshold_percent, budget.window
    )


def background_due(view: TaskView) -> bool:
    """Whether a background compaction is due: usage at
    ``background_compact_threshold_percent`` of the auto-compaction limit."""
    budget = view.budget
    return budget.reached(view.config.background_compact_threshold_percent, budget.limit)


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
    index = _last_index(items, _is_real_user_message)
    if index is None:
        index = _last_index(items, lambda i: isinstance(i, relay.Message) and i.role == "user")
    if index is None:
        index = _last_index(items, lambda i: isinstance(i, Compaction))
    if index is None:
        return items + list(initial)
    return items[:index] + list(initial) + items[index:]


#: How the messages that say what the world is begin (the initial context's own kinds). One
#: later in a history says the world changed since its head was recorded; the session's other
#: notes (the work-state record an earlier compaction placed, an abort marker, a sub-agent's
#: notification) change nothing of it.
WORLD_MARKERS = ("<environment_context>", "<project_instructions")


def cache_aware_head(
    old: Sequence[relay.ResponseItem], new: Sequence[relay.ResponseItem]
) -> list[relay.ResponseItem] | None:
    """``new`` (a compacted history) after the initial context as it stood at the top of
    ``old``, item for item, so that the next request begins as the earlier ones did and a
    server's prompt cache still holds that much of it (``compaction.placement =
    "cache_aware"``); None when that would show the model a stale world: ``old`` does not
    open with an initial context, or a later message of the world's kinds (a changed
    environment or project instructions) follows in it.
    """
    head = 0
    while head < len(old) and message_kind(old[head]) == "contextual":
        head += 1
    if head == 0 or any(_says_the_world(item) for item in old[head:]):
        return None
    return [*old[:head], *new]


def _says_the_world(item: relay.ResponseItem) -> bool:
    return (
        isinstance(item, relay.Message)
        and item.role == "user"
        and item.text().lstrip().startswith(WORLD_MARKERS)
    )


def _is_real_user_message(item: relay.ResponseItem) -> bool:
    return message_kind(item) == "user"


def _last_index(
    items: Sequence[relay.ResponseItem], test: Callable[[relay.ResponseItem], bool]
) -> int | None:
    for index in range(len(items) - 1, -1, -1):
        if test(items[index]):
            return index
    return None


__all__ = [
    "Backend",
    "answered_since_compaction",
    "fits_window",
    "cache_aware_head",
    "async_due",
    "background_due",
    "downshift_due",
    "limit_reached",
    "mask_due",
    "maskable",
    "place_initial_context",
    "post_turn_due",
    "select_backend",
]
