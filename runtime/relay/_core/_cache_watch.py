"""Why the server's prompt cache held less of a request than of the one before it.

A server that caches prompts (OpenAI's, llama-server's) reads again only what follows the
prefix it has already seen, and says how much it held (``cached_input_tokens``). When that
share falls between two turn requests of a session, something changed at the front of the
request; :func:`cache_fall_cause` names it from the two requests alone, in the order a request
is read: the model, the instructions, the tool list, then the history (rewritten by a
compaction, or otherwise). :class:`CacheWatch` keeps the last turn request of a session and
says, once per fall, what the session reports (a ``background_event``).
"""

from __future__ import annotations

import attrs

from .._base import _protocol as p
from .._base._model import Prompt

#: How far the cached share must fall, in points, for the session to say why.
FALL_POINTS = 25
#: How many leading input items a shape keeps to tell a rewritten history.
HEAD_ITEMS = 4


@attrs.frozen
class RequestShape:
    """What of a request decides how much of it a prompt cache can hold."""

    model: str
    instructions: str
    tools: tuple[object, ...]
    head: tuple[p.ResponseItem, ...]
    """The first items of the input (:data:`HEAD_ITEMS`): a request is never copied whole."""
    length: int
    """How many items the input has."""
    window: int
    """The session's window number when it was sent (a compaction starts a new one)."""


def shape_of(prompt: Prompt, window: int) -> RequestShape:
    """The shape of ``prompt``, sent in window ``window``."""
    head = tuple(prompt.input[:HEAD_ITEMS])
    return RequestShape(
        prompt.model, prompt.instructions, tuple(prompt.tools), head, len(prompt.input), window
    )


def cache_fall_cause(before: RequestShape, now: RequestShape) -> str:
    """What changed at the front of the request between ``before`` and ``now``."""
    if before.model != now.model:
        return f"a model switch ({before.model} → {now.model})"
    if before.instructions != now.instructions:
        return "a changed instruction"
    if before.tools != now.tools:
        return "a new tool list"
    if before.window != now.window:
        return "a compaction"
    if now.length < before.length or now.head[: len(before.head)] != before.head:
        return "a rewritten history"
    return "the server's own eviction (the request began as the one before it)"


def share(usage: p.TokenUsage) -> float:
    """The share of the request's input the server's prompt cache held."""
    return usage.cached_input_tokens / usage.input_tokens if usage.input_tokens else 0.0


@attrs.define
class CacheWatch:
    """A session's last turn request and the share of it the server's cache held."""

    last: RequestShape | None = None
    last_share: float = 0.0

    def observe(self, prompt: Prompt, usage: p.TokenUsage, window: int) -> str | None:
        """Note a turn request and its usage; the message of a fall, when the share fell by
        :data:`FALL_POINTS` points or more since the previous one."""
        now, held = shape_of(prompt, window), share(usage)
        before, before_share = self.last, self.last_share
        self.last, self.last_share = now, held
        if before is None or (before_share - held) * 100 < FALL_POINTS:
            return None
        return (
            f"The server's prompt cache held {held:.0%} of this request's input, "
            f"{before_share:.0%} of the previous one's: {cache_fall_cause(before, now)} "
            "since then."
        )


__all__ = [
    "FALL_POINTS",
    "HEAD_ITEMS",
    "CacheWatch",
    "RequestShape",
    "cache_fall_cause",
    "shape_of",
    "share",
]
