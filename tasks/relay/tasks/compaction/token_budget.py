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
from relay.compaction import keep_recent_messages, kept_message_budget
from relay.lowlevel import TaskContext

from .base import Backend, BackendResult, CompactionRequest, select_backend

#: Budget of the developer messages carried into the new window (approximate tokens).
DEVELOPER_MESSAGE_BUDGET = 64_000


class TokenBudgetBackend:
    """Start a new window from the current world state instead of summarising the old one."""

    name = Backend.TOKEN_BUDGET
    error_prefix = "Error running token-budget compaction: "

    def applies(self, config: relay.Config, provider: relay.ProviderConfig) -> bool:
        return select_backend(config, provider) is self.name

    async def compact(self, ctx: TaskContext, request: CompactionRequest) -> BackendResult:
        initial = ctx.initial_context_items()
        room = ctx.room_after_compaction([], model=request.model)
        budget = kept_message_budget(DEVELOPER_MESSAGE_BUDGET, room, ctx.token_ratio)
        added = keep_recent_messages(client_developer_messages(ctx.history, initial), budget)
        return BackendResult([*initial, *added], fresh_window=True)


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


class FreshWindowBackend(TokenBudgetBackend):
    """The token-budget compaction whatever the configuration selects: the last step of the
    loop guard's escalation."""

    def applies(self, config: relay.Config, provider: relay.ProviderConfig) -> bool:
        del config, provider
        return True
