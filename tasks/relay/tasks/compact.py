"""The compaction task: what a ``compact`` op runs (docs/compaction.md)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import relay
from relay.lowlevel import SessionTask, TaskContext, TaskKind

from .compaction import BACKENDS, CompactionBackend, CompactionRequest, Injection
from .compaction.auto import compact_now


@attrs.frozen
class CompactTask(SessionTask):
    """Compact the history now, with the backend the configuration selects."""

    instructions: str | None = None
    """Extra text appended to the summarization prompt."""
    backends: Sequence[CompactionBackend] = BACKENDS
    """The compaction backends to choose from, in order."""

    @property
    def kind(self) -> TaskKind:
        return TaskKind.COMPACT

    async def run(self, ctx: TaskContext) -> str | None:
        await compact_now(
            ctx,
            CompactionRequest(
                trigger=relay.CompactionTrigger.MANUAL,
                injection=Injection.DO_NOT_INJECT,
                instructions=self.instructions,
            ),
            self.backends,
        )
        return None
