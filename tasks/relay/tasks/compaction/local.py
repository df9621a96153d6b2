"""The local backend: the session's own model writes a summary (docs/compaction.md)."""

from __future__ import annotations

import relay
from relay.compaction import (
    LOCAL_USER_MESSAGE_BUDGET,
    build_compacted_history,
    compaction_prompt,
    drop_oldest,
    ghost_snapshots,
    kept_message_budget,
    real_user_messages,
    summary_text,
)
from relay.lowlevel import TaskContext

from .base import Backend, BackendResult, CompactionRequest, select_backend

ERROR_PREFIX = "Error running local compact task: "


class LocalBackend:
    """Summarise the history with the session's model and keep recent user messages."""

    name = Backend.LOCAL
    error_prefix = ERROR_PREFIX

    def applies(self, config: relay.Config, provider: relay.ProviderConfig) -> bool:
        return select_backend(config, provider) is self.name

    async def compact(self, ctx: TaskContext, request: CompactionRequest) -> BackendResult:
        history = list(ctx.history)
        prompt_message = relay.user_message(compaction_prompt(ctx.config, request.instructions))
        # The prompt goes to a clone only; the live history is untouched until install.
        clone = [*history, prompt_message]
        dropped = 0
        while True:
            prompt = ctx.build_prompt(clone, tools=False, purpose="compact", model=request.model)
            try:
                result = await ctx.sample(prompt, record=False, report=False)
                break
            except relay.ContextWindowExceeded as error:
                if len(prompt.input) <= 1:
                    ctx.report_window_full(error)
                    raise
                kept, removed = drop_oldest(clone[:-1])
                clone = [*kept, prompt_message]
                dropped += removed
        if dropped:
            ctx.emit(
                relay.BackgroundEvent(
                    f"Trimmed {dropped} older item{'s' if dropped != 1 else ''} from the "
                    "summarization request so that it fits the model's context window."
                )
            )
        summary = result.last_agent_message or ""
        ghosts = ghost_snapshots(history)
        room = ctx.room_after_compaction(
            [relay.user_message(summary_text(summary))], model=request.model
        )
        new_history = build_compacted_history(
            real_user_messages(history),
            summary,
            budget=kept_message_budget(LOCAL_USER_MESSAGE_BUDGET, room, ctx.token_ratio),
            ghosts=ghosts,
        )
        return BackendResult(
            new_history,
            message=summary_text(summary),
            warn=True,
            cut=result.incomplete is not None,
        )
