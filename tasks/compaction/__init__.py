"""Compaction: one small backend interface, one module per backend, one shared flow.

:func:`run_compaction` is what the compaction task and auto-compaction call. It selects the
backend (a pure function of features and provider capability), reports the compaction item,
lets the backend compute the new history, places the initial context, installs the result and
reports it. A backend raises :class:`CompactionFailed` to fail; until it returns, nothing about
the session has changed (SPEC §6.9).

Adding a backend is one new module and one line in :data:`BACKENDS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import anyio
import attrs

import runtime
from runtime import TaskContext
from runtime.compaction import Backend, Injection, place_initial_context, select_backend

from .local import LocalBackend


@attrs.frozen
class CompactionRequest:
    """What a compaction is asked to do."""

    trigger: runtime.CompactionTrigger
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

    history: Sequence[runtime.ResponseItem]
    """The new history; a summary or compaction item is last."""
    message: str = ""
    """The summary text (local backend), recorded in the rollout's ``compacted`` line."""
    warn: bool = False
    """Whether to warn that repeated compactions make the model less accurate."""


class CompactionFailed(Exception):
    """A backend could not produce a new history; nothing was changed."""

    def __init__(self, message: str, code: runtime.ErrorCode) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class CompactionBackend(Protocol):
    """Computes a new, shorter history for a session."""

    name: Backend

    async def compact(self, ctx: TaskContext, request: CompactionRequest) -> BackendResult:
        """The new history. Raises :class:`CompactionFailed`."""
        ...


BACKENDS: dict[Backend, CompactionBackend] = {
    Backend.LOCAL: LocalBackend(),
}

ACCURACY_WARNING = (
    "This conversation has been compacted. Long sessions and repeated compactions make the "
    "model less accurate; start a new session when you can."
)


async def run_compaction(ctx: TaskContext, request: CompactionRequest) -> bool:
    """Compact the session's history; True when a new history was installed."""
    kind = select_backend(ctx.config, ctx.session.provider)
    backend = BACKENDS.get(kind)
    if backend is None:
        ctx.emit(
            runtime.ErrorEvent(
                f"compaction backend {kind.value!r} is not available", runtime.ErrorCode.INTERNAL
            )
        )
        return False
    item_id = ctx.session.new_item_id("compaction")
    ctx.emit(runtime.ItemStarted(ctx.turn_id, runtime.ContextCompactionItem(item_id)))
    started = anyio.current_time()
    tokens_before = ctx.session.history.estimated_tokens()
    try:
        result = await backend.compact(ctx, request)
    except CompactionFailed as failure:
        ctx.emit(runtime.ErrorEvent(failure.message, failure.code))
        return False
    initial = (
        ctx.initial_context_items()
        if request.injection is Injection.BEFORE_LAST_USER_MESSAGE
        else []
    )
    history = place_initial_context(result.history, initial, request.injection)
    receipt = runtime.CompactionReceipt(
        trigger=request.trigger,
        backend=kind.value,
        tokens_before=tokens_before,
        tokens_after=runtime.compaction.estimate_tokens(history),
        duration_ms=round((anyio.current_time() - started) * 1000),
    )
    ctx.install_compaction(
        history,
        message=result.message,
        receipt=receipt,
        clear_reference=request.injection is Injection.DO_NOT_INJECT,
    )
    ctx.emit(runtime.ItemCompleted(ctx.turn_id, runtime.ContextCompactionItem(item_id, receipt)))
    ctx.emit(runtime.ContextCompacted())
    if result.warn:
        ctx.emit(runtime.WarningEvent(ACCURACY_WARNING))
    return True
