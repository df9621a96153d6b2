"""The token-budget backend: a fresh window, no model request (docs/compaction.md).

The new history is the initial context built from the world state as it is now, followed by
the developer messages the client added to the old window (newest first within a budget).
It is installed as it is and becomes the reference context, so the next turn records nothing
of the initial context again; the rollout's ``compacted`` line carries it as the replacement
history, so a resumed session starts from exactly this window.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import relay
from relay.lowlevel import (
    BackendContext,
    BackendResult,
    CompactionRequest,
    Placement,
)

from ._history import keep_recent_messages, kept_message_budget

#: Budget of the developer messages carried into the new window (approximate tokens).
DEVELOPER_MESSAGE_BUDGET = 64_000


class TokenBudgetBackend:
    """Start a new window from the current world state instead of summarising the old one."""

    name = "token_budget"
    error_prefix = "Error running token-budget compaction: "

    async def compact(self, ctx: BackendContext, request: CompactionRequest) -> BackendResult:
        initial = ctx.initial_context()
        room = ctx.room_after([], model=request.model)
        budget = kept_message_budget(DEVELOPER_MESSAGE_BUDGET, room, ctx.view.budget.ratio)
        added = keep_recent_messages(client_developer_messages(ctx.view.history, initial), budget)
        return BackendResult([*initial, *added], placement=Placement.FRESH_WINDOW)


def client_developer_messages(
    history: Iterable[relay.ResponseItem], initial: Sequence[relay.ResponseItem]
) -> list[relay.Message]:
    """The developer messages of ``history`` that the initial context does not produce."""
    own = {
        item.text()
        for item in initial
        if isinstance(item, relay.Message) and item.role == "developer"
    }
    return [
        item
        for item in history
        if isinstance(item, relay.Message) and item.role == "developer" and item.text() not in own
    ]
