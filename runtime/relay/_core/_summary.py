"""The shape of a summarised history: the summary message, the user messages kept beside it.

The local backend builds such a history, a resumed session rebuilds one from an old rollout
line, and a transcript recognises the summary: all three read these plain functions. What a
compaction *decides* (backends, selection, placement) lives with the compaction task in
``relay.tasks.compaction``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from .._base import _protocol as p
from .._base._config import Config
from .._base._errors import ConfigError
from .._base._templates import template
from .._base._tokens import approx_tokens, truncate_text
from ._history import is_contextual

#: Budget of recent user messages kept by the local backend (approximate tokens).
LOCAL_USER_MESSAGE_BUDGET = 20_000


#: The summary text used when the model wrote nothing.
NO_SUMMARY = "(no summary available)"


def summary_prefix() -> str:
    """The stable opening of every summary message."""
    return template("compact/summary_prefix.md")


def compaction_prompt(config: Config, instructions: str | None = None) -> str:
    """The summarization prompt: ``compact_prompt``, else the prompt file, else the template
    (with ``compaction.tool_outputs_as_data``, and the paragraph that says tool outputs are
    data); ``instructions`` (from a ``compact`` op) is appended."""
    prompt = config.effective_compact_prompt()
    if prompt is None and config.experimental_compact_prompt_file:
        path = Path(config.experimental_compact_prompt_file)
        try:
            prompt = path.read_text(encoding="utf-8").strip() or None
        except OSError as exc:
            raise ConfigError(
                f"cannot read experimental_compact_prompt_file {path}: {exc.strerror}"
            ) from exc
    if prompt is None:
        prompt = template("compact/prompt.md")
        if config.compaction.tool_outputs_as_data:
            prompt = f"{prompt}\n\n{template('compact/tool_outputs.md')}"
    extra = (instructions or "").strip()
    return f"{prompt}\n\n{extra}" if extra else prompt


def summary_text(summary: str) -> str:
    """The text of a summary message: the prefix, a newline, the summary."""
    return f"{summary_prefix()}\n{summary or NO_SUMMARY}"


def is_summary(item: p.ResponseItem) -> bool:
    """Whether ``item`` is a summary message written by an earlier local compaction."""
    return (
        isinstance(item, p.Message)
        and item.role == "user"
        and item.text().startswith(summary_prefix() + "\n")
    )


def is_real_user_message(item: p.ResponseItem) -> bool:
    """A user message that the user wrote: not contextual, not a summary."""
    return (
        isinstance(item, p.Message)
        and item.role == "user"
        and not is_contextual(item)
        and not is_summary(item)
    )


def message_kind(item: p.ResponseItem) -> Literal["user", "contextual", "summary"] | None:
    """Who wrote a user message: the user, the harness (``contextual``: the initial context,
    an abort marker) or an earlier local compaction (``summary``); None for any other item."""
    if not (isinstance(item, p.Message) and item.role == "user"):
        return None
    if is_contextual(item):
        return "contextual"
    if is_summary(item):
        return "summary"
    return "user"


def real_user_messages(items: Iterable[p.ResponseItem]) -> list[p.Message]:
    """The real user messages of ``items``, in order."""
    return [item for item in items if isinstance(item, p.Message) and is_real_user_message(item)]


def keep_recent_user_messages(messages: Sequence[p.Message], budget: int) -> list[p.Message]:
    """Recent user messages within ``budget`` approximate tokens (the local backend).

    Walks newest to oldest keeping whole messages while they fit; the first one that does not
    fit is truncated to what is left of the budget and the walk stops. Each kept message
    becomes a single ``input_text`` part and keeps its metadata. Chronological order is kept.
    """
    kept: list[p.Message] = []
    remaining = budget
    for message in reversed(messages):
        text = message.text()
        cost = approx_tokens(text)
        if cost <= remaining:
            kept.append(_text_message(message, text))
            remaining -= cost
            continue
        if remaining > 0:
            kept.append(_text_message(message, truncate_text(text, remaining)))
        break
    kept.reverse()
    return kept


def _text_message(message: p.Message, text: str) -> p.Message:
    return p.Message("user", (p.InputText(text),), metadata=message.metadata)


def build_compacted_history(
    user_messages: Sequence[p.Message],
    summary: str,
    *,
    budget: int = LOCAL_USER_MESSAGE_BUDGET,
    ghosts: Sequence[p.GhostSnapshot] = (),
) -> list[p.ResponseItem]:
    """The history a local compaction installs: kept user messages, ghosts, the summary last."""
    history: list[p.ResponseItem] = list(keep_recent_user_messages(user_messages, budget))
    history.extend(ghosts)
    history.append(p.user_message(summary_text(summary)))
    return history


def ghost_snapshots(items: Iterable[p.ResponseItem]) -> list[p.GhostSnapshot]:
    """The ghost snapshots of ``items``, in order."""
    return [item for item in items if isinstance(item, p.GhostSnapshot)]
