"""Masking: old tool outputs give way to placeholders, no model request.

Not one of the backends the policy selects: the automatic compaction flow runs it first when
``features.tool_output_masking`` is on (:mod:`relay.tasks.compaction.auto`). The history is
edited in place; the originals of what it masked go to the rollout's ``compacted`` line, and
the ``recall`` tool returns them.
"""

from __future__ import annotations

import relay
from relay.compaction import mask_old_outputs
from relay.lowlevel import TaskContext

from .base import BackendResult, CompactionFailed, CompactionRequest

#: The backend named in the receipt of a masking.
MASKED = "masked"


class MaskingBackend:
    """Replace tool outputs older than the newest ``mask_keep_recent_tokens`` by placeholders."""

    name = MASKED
    error_prefix = "Error masking tool outputs: "

    def applies(self, config: relay.Config, provider: relay.ProviderConfig) -> bool:
        del provider
        return config.features.tool_output_masking

    async def compact(self, ctx: TaskContext, request: CompactionRequest) -> BackendResult:
        del request
        items, references = mask_old_outputs(ctx.history, ctx.config.mask_keep_recent_tokens)
        if not references:
            raise CompactionFailed(
                f"{self.error_prefix}no tool output is old enough to mask",
                relay.ErrorCode.INTERNAL,
            )
        masked = set(references)
        originals = {
            item.call_id: item.output
            for item in ctx.history
            if isinstance(item, relay.FunctionCallOutput | relay.CustomToolCallOutput)
            and item.call_id in masked
        }
        return BackendResult(items, in_place=True, masked_outputs=originals)
