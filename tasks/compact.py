"""The compaction task: what a ``compact`` op runs (SPEC §6.1)."""

from __future__ import annotations

import attrs

import runtime
from runtime import SessionTask, TaskContext, TaskKind
from runtime.compaction import Injection

from .compaction import CompactionRequest, run_compaction


@attrs.frozen
class CompactTask(SessionTask):
    """Compact the history now, with the backend the configuration selects."""

    instructions: str | None = None
    """Extra text appended to the summarization prompt."""

    @property
    def kind(self) -> TaskKind:
        return TaskKind.COMPACT

    async def run(self, ctx: TaskContext) -> str | None:
        await run_compaction(
            ctx,
            CompactionRequest(
                trigger=runtime.CompactionTrigger.MANUAL,
                injection=Injection.DO_NOT_INJECT,
                instructions=self.instructions,
            ),
        )
        return None
