"""The compaction policy: the backend interface, which backend runs, where context goes.

One small interface (:class:`CompactionBackend`), its request and result types, the failure it
raises, and the pure functions of policy: which built-in backend a configuration selects
(:func:`select_backend`) and where the initial context goes in a compacted history
(:func:`place_initial_context`). A backend of another package implements the protocol and is
put in the sequence of backends a session's tasks are built with (:func:`relay.tasks.task_kinds`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import attrs
import relay
from relay import Config, ProviderConfig
from relay.compaction import is_real_user_message
from relay.lowlevel import TaskContext


class Backend(enum.StrEnum):
    """relay's built-in compaction backends (docs/compaction.md)."""

    TOKEN_BUDGET = "token_budget"
    REMOTE_V2 = "remote_v2"
    REMOTE_V1 = "remote_v1"
    LOCAL = "local"


class Injection(enum.Enum):
    """Where the initial context goes after a compaction (docs/compaction.md)."""

    DO_NOT_INJECT = "do_not_inject"
    """Add nothing and clear the reference context (manual and pre-turn compaction)."""
    BEFORE_LAST_USER_MESSAGE = "before_last_user_message"
    """Insert it before the last user message (mid-turn compaction)."""


@attrs.frozen
class CompactionRequest:
    """What a compaction is asked to do."""

    trigger: relay.CompactionTrigger
    """Why it runs."""
    injection: Injection
    """Where the initial context goes afterwards."""
    instructions: str | None = None
    """Extra text for the summarization prompt (``compact {instructions}``)."""
    model: str | None = None
    """The model to compact with (default: the turn's)."""


@attrs.frozen
class BackendResult:
    """A backend's new history, before the initial context is placed."""

    history: Sequence[relay.ResponseItem]
    """The new history; a summary or compaction item is last (unless ``fresh_window``)."""
    message: str = ""
    """The summary text (local backend), recorded in the rollout's ``compacted`` line."""
    warn: bool = False
    """Whether to warn that repeated compactions make the model less accurate."""
    cut: bool = False
    """The summary was cut off at the answer limit (reported in the receipt and a warning)."""
    fresh_window: bool = False
    """The history already opens with the initial context of the current world state: it is
    installed as it is and becomes the reference context (token-budget backend)."""
    in_place: bool = False
    """The history is the old one with some items edited (masking): it is installed as it is,
    nothing is added to it, and the reference context stays."""
    masked_outputs: Mapping[str, str] = attrs.field(factory=dict)
    """The originals of the tool outputs the new history masked, by call id (written to the
    rollout, so that ``recall`` has them after a resume)."""


class CompactionFailed(Exception):
    """A backend could not produce a new history; nothing was changed."""

    def __init__(self, message: str, code: relay.ErrorCode) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class CompactionBackend(Protocol):
    """Computes a new, shorter history for a session."""

    @property
    def name(self) -> str:
        """The name reported in the compaction receipt."""
        ...

    @property
    def error_prefix(self) -> str:
        """What the message of its failures starts with."""
        ...

    def applies(self, config: Config, provider: ProviderConfig) -> bool:
        """Whether it compacts for this configuration and provider (the first that does
        in a session's sequence of backends runs)."""
        ...

    async def compact(self, ctx: TaskContext, request: CompactionRequest) -> BackendResult:
        """The new history.

        Raises:
            CompactionFailed: it cannot produce one.
            relay.ModelError: a model request failed (reported with :attr:`error_prefix`).
        """
        ...


def select_backend(config: Config, provider: ProviderConfig) -> Backend:
    """The built-in backend a compaction uses, in the order of docs/compaction.md."""
    if config.features.token_budget:
        return Backend.TOKEN_BUDGET
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
        index = _last_index(items, lambda i: isinstance(i, relay.Compaction))
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


__all__ = [
    "Backend",
    "BackendResult",
    "CompactionBackend",
    "CompactionFailed",
    "CompactionRequest",
    "Injection",
    "place_initial_context",
    "select_backend",
]
