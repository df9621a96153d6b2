"""The local backend: the session's own model writes a summary (docs/compaction.md).

The answer is checked before it is installed (:mod:`._summary_check`): an answer that is not a
summary is asked for once more, without tools and with a prompt that says what was wrong; when
the second answer is refused too, what the session observed stands for the summary.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

import relay
from relay import user_message
from relay.lowlevel import (
    BackendContext,
    CompactionRequest,
    SampleResult,
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
from ._summary_check import (
    CheckedResult,
    fallback_summary,
    refusal_note,
    refusal_warning,
    retry_prompt,
    summary_refusal,
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

    async def compact(self, ctx: BackendContext, request: CompactionRequest) -> CheckedResult:
        view = ctx.view
        history = list(view.history)
        settings = view.config.compaction
        prompt = compaction_prompt(view.config, request.instructions)
        # The prompt goes to a clone only; the live history is untouched until install.
        shown = fenced(history) if settings.tool_outputs_as_data else history
        # With the turn's tools (none may be called) the request begins as the turns did.
        tools = settings.placement == "cache_aware"
        asking = _Summary(ctx, request.model, shown)
        result, model = await asking.sample(prompt, tools=tools)
        first = _refusal(result, history, prompt)
        second: str | None = None
        if first is not None:
            # Once more, with no tools offered and the prompt saying what was wrong.
            again = retry_prompt(prompt, first)
            result, model = await asking.sample(again, tools=False)
            second = _refusal(result, history, again)
        asking.report_trimmed()
        refused = refusal_note(first, second) if first is not None and second is not None else None
        if refused is None:
            summary = result.last_agent_message or ""
            notices: tuple[str, ...] = (ACCURACY_WARNING,)
        else:
            summary = fallback_summary(history, list_calls=not view.config.features.work_state)
            notices = (refusal_warning(refused), ACCURACY_WARNING)
        room = ctx.room_after([user_message(summary_text(summary))], model=request.model)
        new_history = build_compacted_history(
            real_user_messages(history),
            summary,
            budget=kept_message_budget(LOCAL_USER_MESSAGE_BUDGET, room, view.budget.ratio),
            ghosts=[item for item in history if isinstance(item, relay.GhostSnapshot)],
        )
        return CheckedResult(
            new_history,
            message=summary_text(summary),
            notices=notices,
            cut=refused is None and result.incomplete is not None,
            model=model if refused is None else None,
            summary_refused=refused,
            summary_retried=first is not None and refused is None,
        )


def _refusal(
    result: SampleResult, history: Sequence[relay.ResponseItem], prompt: str
) -> str | None:
    """Why an answer to the summary request ``prompt`` is not a summary; None when it is one."""
    text = result.last_agent_message or ""
    if not text.strip() and result.tool_calls:
        return f"it is a call of the tool {result.tool_calls[0].name}"
    return summary_refusal(text, history, prompt)


class _Summary:
    """The summary requests of one compaction, over one clone of the history that is cut
    from its oldest end while a request does not fit the model's window."""

    def __init__(
        self, ctx: BackendContext, model: str | None, shown: Sequence[relay.ResponseItem]
    ) -> None:
        self._ctx = ctx
        self._model = model
        self._items = list(shown)
        self._dropped = 0

    async def sample(self, text: str, *, tools: bool) -> tuple[SampleResult, str]:
        """The answer to the summary request whose prompt is ``text``, and the model's name."""
        prompt_message = user_message(text)
        while True:
            clone = [*self._items, prompt_message]
            prompt = self._ctx.prompt(clone, tools=tools, purpose="compact", model=self._model)
            if tools:
                prompt = attrs.evolve(prompt, tool_choice="none")
            try:
                return await self._ctx.sample(prompt), prompt.model
            except relay.ContextWindowExceeded as error:
                if len(prompt.input) <= 1:
                    self._ctx.window_full(error)
                    raise
                self._items, removed = drop_oldest(self._items)
                self._dropped += removed

    def report_trimmed(self) -> None:
        """Say how many items were cut from the requests so that they fit, when any were."""
        dropped = self._dropped
        if dropped:
            self._ctx.emit(
                relay.BackgroundEvent(
                    f"Trimmed {dropped} older item{'s' if dropped != 1 else ''} from the "
                    "summarization request so that it fits the model's context window."
                )
            )
