"""The local backend: the session's own model writes a summary (SPEC §6.3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import runtime
from runtime import TaskContext
from runtime.compaction import (
    Backend,
    build_compacted_history,
    compaction_prompt,
    drop_oldest,
    ghost_snapshots,
    real_user_messages,
    summary_text,
)

if TYPE_CHECKING:
    from . import BackendResult, CompactionRequest

ERROR_PREFIX = "Error running local compact task: "


class LocalBackend:
    """Summarise the history with the session's model and keep recent user messages."""

    name = Backend.LOCAL

    async def compact(self, ctx: TaskContext, request: CompactionRequest) -> BackendResult:
        from . import BackendResult, CompactionFailed

        history = list(ctx.history)
        prompt_message = runtime.user_message(compaction_prompt(ctx.config, request.instructions))
        # The prompt goes to a clone only; the live history is untouched until install.
        clone = [*history, prompt_message]
        dropped = 0
        while True:
            prompt = ctx.build_prompt(clone, tools=False, purpose="compact", model=request.model)
            try:
                result = await ctx.sample(prompt, record=False, report=False)
                break
            except runtime.ContextWindowExceeded as error:
                if len(prompt.input) <= 1:
                    ctx.report_window_full()
                    raise CompactionFailed(
                        f"{ERROR_PREFIX}{error.message}",
                        runtime.ErrorCode.CONTEXT_WINDOW_EXCEEDED,
                    ) from error
                kept, removed = drop_oldest(clone[:-1])
                clone = [*kept, prompt_message]
                dropped += removed
            except runtime.ModelError as error:
                raise CompactionFailed(f"{ERROR_PREFIX}{error.message}", error.code) from error
        if dropped:
            ctx.emit(
                runtime.BackgroundEvent(
                    f"Trimmed {dropped} older item{'s' if dropped != 1 else ''} from the "
                    "summarization request so that it fits the model's context window."
                )
            )
        summary = result.last_agent_message or ""
        new_history = build_compacted_history(
            real_user_messages(history), summary, ghosts=ghost_snapshots(history)
        )
        return BackendResult(new_history, message=summary_text(summary), warn=True)
