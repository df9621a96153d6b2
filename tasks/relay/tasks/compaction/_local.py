"""The local backend: the session's own model writes a summary (docs/compaction.md)."""

from __future__ import annotations

import attrs

import relay
from relay import user_message
from relay.lowlevel import (
    BackendContext,
    BackendResult,
    CompactionRequest,
    build_compacted_history,
    compaction_prompt,
    summary_text,
)

from ._defence import fenced
from ._history import (
    LOCAL_USER_MESSAGE_BUDGET,
    drop_oldest,
    kept_message_budget,
    real_user_messages,
)

ERROR_PREFIX = "Error running local compact task: "

ACCURACY_WARNING = (
    "This conversation has been compacted. Long sessions and repeated compactions make the "
    "model less accurate; start a new session when you can."
)


class LocalBackend:
    """Summarise the history with the session's model and keep recent user messages."""

    name = "local"
    error_prefix = ERROR_PREFIX

    async def compact(self, ctx: BackendContext, request: CompactionRequest) -> BackendResult:
        view = ctx.view
        history = list(view.history)
        settings = view.config.compaction
        prompt_message = user_message(compaction_prompt(view.config, request.instructions))
        # The prompt goes to a clone only; the live history is untouched until install.
        shown = fenced(history) if settings.tool_outputs_as_data else history
        clone = [*shown, prompt_message]
        # With the turn's tools (none may be called) the request begins as the turns did.
        tools = settings.placement == "cache_aware"
        dropped = 0
        while True:
            prompt = ctx.prompt(clone, tools=tools, purpose="compact", model=request.model)
            if tools:
                prompt = attrs.evolve(prompt, tool_choice="none")
            try:
                result = await ctx.sample(prompt)
                break
            except relay.ContextWindowExceeded as error:
                if len(prompt.input) <= 1:
                    ctx.window_full(error)
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
        room = ctx.room_after([user_message(summary_text(summary))], model=request.model)
        new_history = build_compacted_history(
            real_user_messages(history),
            summary,
            budget=kept_message_budget(LOCAL_USER_MESSAGE_BUDGET, room, view.budget.ratio),
            ghosts=[item for item in history if isinstance(item, relay.GhostSnapshot)],
        )
        return BackendResult(
            new_history,
            message=summary_text(summary),
            notices=(ACCURACY_WARNING,),
            cut=result.incomplete is not None,
            model=prompt.model,
        )
