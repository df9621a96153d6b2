"""The remote V2 backend: compaction inside a normal streamed request (docs/compaction.md).

The request is the history (normalised, fitted to the window as for V1) followed by a raw
``{"type": "compaction_trigger"}`` item; the model answers with exactly one ``compaction`` item.
The new history keeps the real user messages *of that request* within a budget and ends with
the compaction item.
"""

from __future__ import annotations

from typing import Any

import attrs

import relay
from relay import (
    Compaction,
    StreamError,
)
from relay.lowlevel import (
    BackendContext,
    BackendResult,
    CompactionFailed,
    CompactionRequest,
)

from ._history import (
    REMOTE_V2_USER_MESSAGE_BUDGET,
    keep_recent_messages,
    kept_message_budget,
    real_user_messages,
)
from ._remote_v1 import ERROR_PREFIX, fitted_prompt

#: The raw wire item that asks the model to compact the input before it.
COMPACTION_TRIGGER: dict[str, Any] = {"type": "compaction_trigger"}

#: At most this many retries, whatever the provider's ``stream_max_retries`` allows.
MAX_RETRIES = 2

_NOT_COMPLETED = "stream closed before response.completed"


class RemoteV2Backend:
    """Have the model write a ``compaction`` item in answer to ``compaction_trigger``."""

    name = "remote_v2"
    error_prefix = ERROR_PREFIX

    async def compact(self, ctx: BackendContext, request: CompactionRequest) -> BackendResult:
        prompt = attrs.evolve(
            fitted_prompt(ctx, request.model),
            trailing_input=(COMPACTION_TRIGGER,),
            purpose="compact",
        )
        retries = min(ctx.view.provider.stream_max_retries, MAX_RETRIES)
        try:
            result = await ctx.sample(prompt, max_retries=retries)
        except StreamError as error:
            # Whatever broke the stream, it ended without ``response.completed``.
            detail = error.message
            message = detail if _NOT_COMPLETED in detail else f"{_NOT_COMPLETED}: {detail}"
            raise CompactionFailed(message, error.code) from error
        compactions = [item for item in result.output if isinstance(item, Compaction)]
        if len(compactions) != 1:
            raise CompactionFailed(
                f"expected exactly one compaction item, got {len(compactions)} "
                f"compaction item{'' if len(compactions) == 1 else 's'} of "
                f"{len(result.output)} output item{'' if len(result.output) == 1 else 's'}",
                relay.ErrorCode.SERVER_ERROR,
            )
        room = ctx.room_after(compactions[:1], model=request.model)
        budget = kept_message_budget(REMOTE_V2_USER_MESSAGE_BUDGET, room, ctx.view.budget.ratio)
        kept = keep_recent_messages(real_user_messages(prompt.input), budget)
        return BackendResult([*kept, compactions[0]])
