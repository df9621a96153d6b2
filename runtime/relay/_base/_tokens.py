"""Token estimates and truncation: plain functions over plain data.

Approximate tokens are ``ceil(utf8_bytes / 4)`` (docs/session.md). Every budget of the compaction
backends uses these estimates, so that budgets are deterministic and cheap; the exact
``tiktoken`` counter (:mod:`relay._base._tiktoken`) is for usage estimates only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from . import _protocol as p
from ._codec import to_json

if TYPE_CHECKING:
    from ._model import ToolSpec

#: Bytes an image counts for, whatever its size.
IMAGE_BYTES = 340

#: The largest ratio of a server's count to the estimate that calibration believes (a digit
#: is a token to many tokenizers, a quarter of one to the estimate).
MAX_TOKEN_RATIO = 8.0

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
#: The tools last estimated and their tokens: a session passes the same tuple every request.
_last_tools: tuple[tuple[ToolSpec, ...] | None, int] = (None, 0)


class TokenEstimator(Protocol):
    """Counts tokens of a text."""

    name: str

    def count(self, text: str) -> int:
        """Tokens of ``text``."""
        ...


class ApproxEstimator:
    """``ceil(utf8_bytes / 4)``: the estimate every budget uses."""

    name = "approx"

    def count(self, text: str) -> int:
        return approx_tokens(text)


def item_text(item: p.ResponseItem) -> str:
    """The JSON text of an item as a model would read it (for exact counters)."""
    data = to_json(item)
    if isinstance(data, dict):
        data.pop("metadata", None)
    return _ENCODER.encode(data)


def count_items(estimator: TokenEstimator, items: Iterable[p.ResponseItem]) -> int:
    """Tokens of ``items`` by ``estimator`` (approximate counts as docs/session.md says)."""
    if isinstance(estimator, ApproxEstimator):
        return items_tokens(items)
    return sum(estimator.count(item_text(item)) for item in items)


def tokens_for_bytes(n: int) -> int:
    """Approximate tokens of ``n`` bytes."""
    return -(-max(0, n) // 4)


def approx_tokens(text: str) -> int:
    """Approximate tokens of a text."""
    return tokens_for_bytes(len(text.encode("utf-8")))


def _encrypted_bytes(encrypted: str) -> int:
    return max(0, len(encrypted) * 3 // 4 - 650)


def item_bytes(item: p.ResponseItem, text: str | None = None) -> int:
    """The approximate byte size of a history item, as docs/session.md counts it.

    ``text``, when given, is the item's JSON text without its ``metadata`` (made already).
    """
    match item:
        case p.GhostSnapshot():
            return 0
        case p.Compaction(encrypted_content=encrypted):
            return _encrypted_bytes(encrypted)
        case p.Reasoning(encrypted_content=str() as encrypted):
            return _encrypted_bytes(encrypted)
        case p.Message(content=content) if any(isinstance(c, p.InputImage) for c in content):
            images = sum(1 for c in content if isinstance(c, p.InputImage))
            stripped = p.Message(
                item.role,
                tuple(c for c in content if not isinstance(c, p.InputImage)),
                id=item.id,
            )
            return _json_bytes(stripped) + images * IMAGE_BYTES
        case _:
            return _json_bytes(item) if text is None else len(text.encode("utf-8"))


def _json_bytes(item: p.ResponseItem) -> int:
    data = to_json(item)
    if isinstance(data, dict):
        data.pop("metadata", None)
    return len(_ENCODER.encode(data).encode("utf-8"))


def item_tokens(item: p.ResponseItem, text: str | None = None) -> int:
    """Approximate tokens of a history item (``text``: see :func:`item_bytes`)."""
    return tokens_for_bytes(item_bytes(item, text))


def items_tokens(items: Iterable[p.ResponseItem]) -> int:
    """Approximate tokens of several items."""
    return sum(item_tokens(item) for item in items)


def truncation_marker(removed_tokens: int) -> str:
    """The text that stands where a truncated text lost its middle."""
    return f"…{removed_tokens} tokens truncated…"


def truncate_text(text: str, max_tokens: int) -> str:
    """Keep the head and tail of ``text`` within ``max_tokens`` approximate tokens.

    Keeps the first ``floor(4T/2)`` and the last ``4T - floor(4T/2)`` bytes, cut on character
    boundaries, with a marker in between that says how many tokens went. A text that fits is
    returned unchanged; ``max_tokens <= 0`` leaves only the marker.
    """
    data = text.encode("utf-8")
    budget = max(0, max_tokens) * 4
    if len(data) <= budget and max_tokens > 0:
        return text
    head_bytes = budget // 2
    tail_bytes = budget - head_bytes
    head_end = _boundary_at_or_before(data, head_bytes)
    tail_start = _boundary_at_or_after(data, len(data) - tail_bytes)
    tail_start = max(tail_start, head_end)
    removed = tail_start - head_end
    head = data[:head_end].decode("utf-8")
    tail = data[tail_start:].decode("utf-8")
    return head + truncation_marker(tokens_for_bytes(removed)) + tail


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _boundary_at_or_before(data: bytes, index: int) -> int:
    index = max(0, min(index, len(data)))
    while 0 < index < len(data) and _is_continuation(data[index]):
        index -= 1
    return index


def _boundary_at_or_after(data: bytes, index: int) -> int:
    index = max(0, min(index, len(data)))
    while index < len(data) and _is_continuation(data[index]):
        index += 1
    return index


def token_ratio(counted: int, estimated: int) -> float | None:
    """Server tokens per estimated token, from a server's ``counted`` tokens of a request
    whose estimate was ``estimated``; None when either is unknown.

    Never below 1: an estimate is only ever scaled up, so that every budget and threshold it
    feeds errs on the side of room. At most :data:`MAX_TOKEN_RATIO`.
    """
    if counted <= 0 or estimated <= 0:
        return None
    return min(MAX_TOKEN_RATIO, max(1.0, counted / estimated))


def calibrated(estimate: int, ratio: float) -> int:
    """``estimate`` scaled by ``ratio`` (from :func:`token_ratio`), rounded up."""
    return -(-int(estimate * ratio * 1000) // 1000) if ratio > 1.0 else estimate


def tools_tokens(tools: Iterable[ToolSpec]) -> int:
    """Approximate tokens of tool definitions as a request carries them."""
    global _last_tools
    if isinstance(tools, tuple) and tools is _last_tools[0]:
        # A session asks about the same tuple of its tools for every request.
        return _last_tools[1]
    specs = [tool.to_wire() for tool in tools]
    tokens = approx_tokens(_ENCODER.encode(specs)) if specs else 0
    if isinstance(tools, tuple):
        _last_tools = (tools, tokens)
    return tokens


#: Context windows of well-known models, used when ``model_context_window`` is unset.
_KNOWN_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-5", 272_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
)


#: The largest context window of a well-known model.
MAX_KNOWN_WINDOW = max(window for _, window in _KNOWN_WINDOWS)


def context_window_for(model: str, configured: int | None) -> int | None:
    """The context window of ``model``: the configured value, else a known default."""
    if configured is not None:
        return configured
    for prefix, window in _KNOWN_WINDOWS:
        if model.startswith(prefix):
            return window
    return None
