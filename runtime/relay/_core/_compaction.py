"""What the core owns of compaction: the interface a backend implements, the outcome a
compaction reports, and the atomic install of a new history (docs/compaction.md).

Everything else about compaction (which backend runs, when, the escalation of the loop guard,
background work, hooks around it) lives with the compaction task in ``relay.tasks.compaction``
and reaches the session through the task port. The install itself is the session writer's
(:meth:`~._session_writer.SessionWriter.install`): one step, with no ``await``, in which the
history, the window, the reference context and the rollout change together or not at all.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

from .._base import _protocol as p
from .._base._errors import ErrorCode, RelayError
from ._support import BackendContext


class Injection(enum.Enum):
    """Where the initial context goes after a compaction (docs/compaction.md)."""

    DO_NOT_INJECT = "do_not_inject"
    """Add nothing and clear the reference context (manual and pre-turn compaction)."""
    BEFORE_LAST_USER_MESSAGE = "before_last_user_message"
    """Insert it before the last user message (mid-turn compaction)."""


class Placement(enum.Enum):
    """How a backend's new history takes the old one's place."""

    REPLACE = "replace"
    """A new history (a summary or a compaction item last): the initial context is placed as
    the request's :class:`Injection` says, with the work-state record."""
    FRESH_WINDOW = "fresh_window"
    """It already opens with the initial context of the world as it is now: it gets the
    work-state record and becomes the reference context (token-budget backend)."""
    IN_PLACE = "in_place"
    """The old history with some items edited (masking): installed as it is, nothing added,
    and the reference context stays."""


@attrs.frozen
class CompactionRequest:
    """What a compaction is asked to do."""

    trigger: p.CompactionTrigger
    """Why it runs."""
    injection: Injection = Injection.DO_NOT_INJECT
    """Where the initial context goes afterwards."""
    instructions: str | None = None
    """Extra text for the summarization prompt (``compact`` op's ``instructions``)."""
    model: str | None = None
    """The model to compact with (default: the turn's)."""


@attrs.frozen
class BackendResult:
    """A backend's new history, before the initial context and the record are placed."""

    history: Sequence[p.ResponseItem]
    """The new history."""
    placement: Placement = Placement.REPLACE
    """How it takes the old history's place."""
    message: str = ""
    """The summary text (local backend), recorded in the rollout's ``compacted`` line."""
    notices: tuple[str, ...] = ()
    """Warnings to report once it is installed."""
    cut: bool = False
    """The summary was cut off at the answer limit (reported in the receipt)."""
    masked_outputs: Mapping[str, str] = attrs.field(factory=dict)
    """The originals of the tool outputs the new history masked, by reference (written to
    the rollout, so that ``recall`` has them after a resume)."""
    model: str | None = None
    """The model that wrote the new history, when a model did (named in the receipt)."""


class CompactionFailed(RelayError):
    """A backend could not produce a new history; nothing was changed.

    ``message`` says what went wrong, without the backend's :attr:`~CompactionBackend.error_prefix`:
    the compaction adds it where it reports the failure, as it does for a ``ModelError``.
    """

    def __init__(self, message: str, code: ErrorCode) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class CompactionOutcome(enum.Enum):
    """How a compaction point ended, for the task that reached it."""

    NOT_DUE = "not_due"
    """Nothing was due: the history stays as it is."""
    INSTALLED = "installed"
    """A new history is installed."""
    DEFERRED = "deferred"
    """A background compaction is still working and the history fits: its result is
    installed at a later point."""
    FAILED = "failed"
    """It failed and an ``error`` was reported; the turn must end."""
    STOPPED = "stopped"
    """A hook stopped it; nothing changed and the turn must end (``hook_stopped``)."""
    INSTALLED_THEN_STOPPED = "installed_then_stopped"
    """A new history is installed, then a post-compact hook stopped the turn."""

    @property
    def proceed(self) -> bool:
        """Whether the task may go on."""
        return self in _PROCEED

    @property
    def installed(self) -> bool:
        """Whether a new history was installed."""
        return self in (CompactionOutcome.INSTALLED, CompactionOutcome.INSTALLED_THEN_STOPPED)


_PROCEED = frozenset(
    {CompactionOutcome.NOT_DUE, CompactionOutcome.INSTALLED, CompactionOutcome.DEFERRED}
)


class CompactionBackend(Protocol):
    """Computes a new, shorter history for a session."""

    @property
    def name(self) -> str:
        """The name reported in the compaction receipt."""
        ...

    @property
    def error_prefix(self) -> str:
        """What the ``error`` event of its failures starts with (a ``CompactionFailed`` or a
        ``ModelError`` it raised); its messages leave it out."""
        ...

    async def compact(self, ctx: BackendContext, request: CompactionRequest) -> BackendResult:
        """The new history.

        Raises:
            CompactionFailed: it cannot produce one.
            relay.ModelError: a model request failed (reported with :attr:`error_prefix`).
        """
        ...


__all__ = [
    "BackendResult",
    "CompactionBackend",
    "CompactionFailed",
    "CompactionOutcome",
    "CompactionRequest",
    "Injection",
    "Placement",
]
