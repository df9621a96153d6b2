"""Compaction as plain functions: which prompt, which history comes out.

What the session itself needs (the auto-compaction limit, the prompt) and what rollout
reconstruction shares with the backends (how a summarised history is built) lives here, tested
without an event loop. The policy (backends and their selection, context placement) lives with
the compaction task in ``tasks/compaction/``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from .._base import _protocol as p
from .._base._config import Config
from .._base._errors import ConfigError
from .._base._templates import template
from .._base._tokens import approx_tokens, item_tokens, truncate_text
from ._history import call_id_of, is_contextual

#: Budget of recent user messages kept by the local backend (approximate tokens).
LOCAL_USER_MESSAGE_BUDGET = 20_000
#: Budget of recent user messages kept by the remote V2 backend (approximate tokens).
REMOTE_V2_USER_MESSAGE_BUDGET = 64_000
#: Room kept for the answer after a compaction when no answer limit is set: a quarter of the
#: window, at most this many tokens.
ANSWER_ROOM = 8_192
#: The text that replaces the body of tool outputs that do not fit a remote request.
TRUNCATED_OUTPUT_NOTE = "Output exceeded the available model context and was truncated"
#: The summary text used when the model wrote nothing.
NO_SUMMARY = "(no summary available)"


def auto_compact_limit(
    configured: int | None, window: int | None, *, reserved_output: int | None = None
) -> int | None:
    """The auto-compaction threshold (docs/compaction.md).

    ``min(configured, 90 % of the window)`` when both exist, whichever exists, else None
    (never). Non-positive values count as unset. An answer limit (``reserved_output``) is kept
    free in the window: the threshold is at most the window less that limit.
    """
    limits = []
    if configured is not None and configured > 0:
        limits.append(configured)
    if window is not None and window > 0:
        limits.append(window * 9 // 10)
        if reserved_output:
            limits.append(max(0, window - reserved_output))
    return min(limits) if limits else None


def answer_room(window: int, max_output_tokens: int | None) -> int:
    """Tokens a compacted context leaves free for an answer: the answer limit when one is
    set, else a quarter of the window up to :data:`ANSWER_ROOM`."""
    return max_output_tokens or min(window // 4, ANSWER_ROOM)


def kept_message_budget(default: int, room: int | None, ratio: float = 1.0) -> int:
    """The budget, in approximate tokens, of the messages a compaction keeps.

    ``default`` (20,000 for the local backend, 64,000 for remote V2 and the token-budget
    carry-over) when the window has room for it; else what is left of ``room`` — the tokens of
    the window the rest of the new context (summary, initial context, instructions, tools)
    and an answer leave, as a server counts them — in estimate units (``ratio`` server tokens
    to an estimated one, never fewer than one). ``room`` None (no window known) keeps the
    default; no room keeps nothing.
    """
    if room is None:
        return default
    return max(0, min(default, int(room / max(1.0, ratio))))


def summary_prefix() -> str:
    """The stable opening of every summary message."""
    return template("compact/summary_prefix.md")


def compaction_prompt(config: Config, instructions: str | None = None) -> str:
    """The summarization prompt: ``compact_prompt``, else the prompt file, else the template;
    ``instructions`` (from a ``compact`` op) is appended."""
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


def keep_recent_messages(messages: Sequence[p.Message], budget: int) -> list[p.Message]:
    """Recent messages (of any role) within ``budget``: the user messages the remote V2 backend
    keeps (docs/compaction.md), the developer messages the token-budget backend carries over.

    Newest first; a message costs at least 1 token; a message over the remaining budget has
    its text parts truncated to it; empty text parts and messages are dropped; images are kept
    (and cost nothing beyond the minimum).
    """
    kept: list[p.Message] = []
    remaining = budget
    for message in reversed(messages):
        if remaining <= 0:
            break
        texts = [part for part in message.content if isinstance(part, p.InputText | p.OutputText)]
        cost = max(1, sum(approx_tokens(part.text) for part in texts))
        parts: list[p.ContentPart] = []
        if cost <= remaining:
            parts = [part for part in message.content if not _empty(part)]
            remaining -= cost
        else:
            for part in message.content:
                if isinstance(part, p.InputText | p.OutputText):
                    if remaining <= 0 or not part.text:
                        continue
                    text = truncate_text(part.text, remaining)
                    remaining -= min(remaining, approx_tokens(part.text))
                    parts.append(attrs.evolve(part, text=text))
                else:
                    parts.append(part)
            remaining = 0
        if parts:
            kept.append(attrs.evolve(message, content=tuple(parts)))
    kept.reverse()
    return kept


def _empty(part: p.ContentPart) -> bool:
    return isinstance(part, p.InputText | p.OutputText) and not part.text


def drop_oldest(items: Sequence[p.ResponseItem]) -> tuple[list[p.ResponseItem], int]:
    """Drop the oldest item, and its call/output partner; returns the rest and how many went."""
    if not items:
        return [], 0
    first = items[0]
    partner = call_id_of(first)
    if partner is None:
        return list(items[1:]), 1
    rest = [item for item in items[1:] if call_id_of(item) != partner]
    return rest, len(items) - len(rest)


def fit_to_window(
    items: Sequence[p.ResponseItem], instructions: str, window: int | None
) -> list[p.ResponseItem]:
    """Make a remote compaction request fit the window (docs/compaction.md).

    Walking from the newest item backwards while the estimate (instructions + items) exceeds
    the window, the body of each tool output is replaced by a short note; the walk stops at
    the first item that is not a tool output.
    """
    out = list(items)
    if window is None:
        return out
    total = approx_tokens(instructions) + sum(item_tokens(item) for item in out)
    for index in range(len(out) - 1, -1, -1):
        if total <= window:
            break
        item = out[index]
        if not isinstance(item, p.FunctionCallOutput | p.CustomToolCallOutput):
            break
        replaced = attrs.evolve(item, output=TRUNCATED_OUTPUT_NOTE)
        total += item_tokens(replaced) - item_tokens(item)
        out[index] = replaced
    return out


def filter_remote_output(items: Iterable[p.ResponseItem]) -> list[p.ResponseItem]:
    """What a remote V1 compaction may install (docs/compaction.md)."""
    kept: list[p.ResponseItem] = []
    for item in items:
        match item:
            case p.Message(role="user") if is_contextual(item):
                continue
            case p.Message(role="user" | "assistant"):
                kept.append(item)
            case p.Compaction():
                kept.append(item)
            case _:
                continue
    return kept


def ghost_snapshots(items: Iterable[p.ResponseItem]) -> list[p.GhostSnapshot]:
    """The ghost snapshots of ``items``, in order."""
    return [item for item in items if isinstance(item, p.GhostSnapshot)]
