"""Masking: old tool outputs give way to placeholders, no model request.

Not one of the backends the policy selects: the automatic compaction flow runs it first when
``features.tool_output_masking`` is on (:mod:`relay.tasks.compaction._auto`). The history is
edited in place; the originals of what it masked go to the rollout's ``compacted`` line, and
the ``recall`` tool returns them.
"""

from __future__ import annotations

import relay
from relay.lowlevel import (
    BackendContext,
    BackendResult,
    CompactionFailed,
    CompactionRequest,
    Placement,
)

from ._history import mask_old_outputs

#: The backend named in the receipt of a masking.
MASKED = "masked"


class MaskingBackend:
    """Replace tool outputs older than the newest ``mask_keep_recent_tokens`` by placeholders."""

    name = MASKED
    error_prefix = "Error masking tool outputs: "

    async def compact(self, ctx: BackendContext, request: CompactionRequest) -> BackendResult:
        del request
        history = ctx.view.history
        items, originals = mask_old_outputs(history, ctx.view.config.mask_keep_recent_tokens)
        if not originals:
            raise CompactionFailed(
                "no tool output is old enough to mask",
                relay.ErrorCode.INTERNAL,
            )
        return BackendResult(items, placement=Placement.IN_PLACE, masked_outputs=originals)
