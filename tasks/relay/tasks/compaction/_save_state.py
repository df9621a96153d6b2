"""The save-state step before a compaction (``compaction.save_state = true``).

Before a compaction that summarises or opens a fresh window, the model gets one restricted
step to save what it needs: a request over the history with a prompt that says so
(:data:`SAVE_STATE_PROMPT`) and the session's tools; of the calls it asks for, the
first alone runs (no approval is asked, nothing of it enters the history), and a second
request, without tools, takes its output. What the model writes goes into the work-state
record as one entry of kind ``saved``, which every compaction places in the new history.

The step runs in the compaction's task: an interrupt or a replacement cancels it like any
step. A failed request is reported as a warning and the compaction goes on without it.
"""

from __future__ import annotations

import relay
from relay import user_message
from relay.lowlevel import CompactionContext, WorkEntry

SAVE_STATE_PROMPT = (
    "Your context is about to be compacted: most of this conversation will be replaced by a "
    "short summary. Before that, write down what you will need to go on that a summary could "
    "lose: exact values, file paths, commands and how they ended, test names, decisions and "
    "what the user asked for. You may make one tool call first if you must check something; "
    "then write the notes, in plain text, as short lines."
)
#: The kind of the work-state entry that holds what the step saved.
SAVED = "saved"
#: The most of the model's notes the entry keeps, in characters (the end is kept).
SAVED_MAX_CHARS = 1_500


def saved_entry(text: str | None) -> WorkEntry | None:
    """The work-state entry of the model's notes, or None when it wrote nothing."""
    notes = (text or "").strip()
    if not notes:
        return None
    if len(notes) > SAVED_MAX_CHARS:
        notes = "…" + notes[-SAVED_MAX_CHARS:]
    return WorkEntry(SAVED, notes, key=SAVED)


async def save_state(ctx: CompactionContext) -> None:
    """Run the save-state step and note what the model saved."""
    backend = ctx.backend
    ask = [*backend.view.history, user_message(SAVE_STATE_PROMPT)]
    try:
        result = await backend.sample(backend.prompt(ask))
        text = result.last_agent_message
        calls = [c for c in result.tool_calls if isinstance(c, relay.FunctionCall)]
        if calls and not (text or "").strip():
            call = calls[0]
            output = await ctx.run_tool(call)
            answered = [*ask, call, relay.FunctionCallOutput(call.call_id, output)]
            text = (await backend.sample(backend.prompt(answered, tools=False))).last_agent_message
    except relay.ModelError as error:
        backend.emit(
            relay.WarningEvent(
                f"The save-state step before the compaction failed ({error.message}); "
                "compacting without it."
            )
        )
        return
    entry = saved_entry(text)
    if entry is not None:
        ctx.note(entry)


__all__ = ["SAVED", "SAVE_STATE_PROMPT", "SAVED_MAX_CHARS", "save_state", "saved_entry"]
