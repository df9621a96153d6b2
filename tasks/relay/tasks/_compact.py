"""The compaction task: what a ``compact`` op runs (docs/compaction.md)."""

from __future__ import annotations

import attrs

import relay
from relay.lowlevel import CompactionRequest


@attrs.frozen
class CompactTask(relay.SessionTask):
    """Compact the history now: the session's compactor, asked for a manual compaction."""

    instructions: str | None = None
    """Extra text appended to the summarization prompt."""

    @property
    def kind(self) -> str:
        return "compact"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        trigger = relay.CompactionTrigger.MANUAL
        await ctx.compact(CompactionRequest(trigger, instructions=self.instructions))
        return None


def compact(op: relay.Compact) -> CompactTask:
    """The task of a ``compact`` op."""
    return CompactTask(op.instructions)
