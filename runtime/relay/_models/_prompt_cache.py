"""A prompt cache as an OpenAI-like server keeps one, for ``relay mock-server --prompt-cache``.

A server that caches prompts reads again only what follows the longest prefix it has already
seen under the request's ``prompt_cache_key``: OpenAI reports that prefix as
``usage.input_tokens_details.cached_tokens``, in steps of 128 tokens once it reaches 1,024.
:class:`PromptCache` computes that figure for the mock server from the request bodies alone:
a request is its instructions, its tool list and each input item (without the ids that differ
between runs), and the cached prefix is what it shares, piece by piece, with an earlier
request of the same key. Tokens are estimated (``ceil(bytes / 4)``), like every other figure
of the mock server. As OpenAI counts them, the tool list's tokens are part of the input and of
the cached prefix: with the cache on, the mock server adds them to the input tokens its usage
reports (:func:`tool_tokens`), which leaves them out otherwise.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Mapping, Sequence
from typing import Any

from .._base._tokens import approx_tokens

#: The smallest prefix a cache reports, and the step it reports it in (OpenAI's).
MIN_CACHED_TOKENS = 1024
CACHE_STEP_TOKENS = 128


def request_pieces(body: Mapping[str, Any]) -> tuple[str, ...]:
    """A request as the pieces a prefix is made of: instructions, tools, each input item."""
    items = body.get("input")
    pieces = [
        json.dumps(body.get("instructions"), ensure_ascii=False),
        json.dumps(body.get("tools") or [], sort_keys=True, ensure_ascii=False),
    ]
    for item in items if isinstance(items, list) else []:
        if isinstance(item, Mapping):
            item = {k: v for k, v in item.items() if k != "id"}
        pieces.append(json.dumps(item, sort_keys=True, ensure_ascii=False))
    return tuple(pieces)


def tool_tokens(body: Mapping[str, Any]) -> int:
    """The estimated tokens of a request's tool list (none without tools)."""
    tools = body.get("tools")
    return approx_tokens(json.dumps(tools, sort_keys=True, ensure_ascii=False)) if tools else 0


def shared_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    """How many leading pieces ``a`` and ``b`` share."""
    same = 0
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        same += 1
    return same


def reported(tokens: int) -> int:
    """The cached tokens a server reports for a prefix of ``tokens``."""
    return 0 if tokens < MIN_CACHED_TOKENS else tokens - tokens % CACHE_STEP_TOKENS


class PromptCache:
    """The prefixes seen per ``prompt_cache_key``, the latest ``keep`` requests of each."""

    def __init__(self, keep: int = 32) -> None:
        self._seen: dict[str, collections.deque[tuple[str, ...]]] = {}
        self._keep = keep

    def cached(self, body: Mapping[str, Any]) -> int:
        """The cached tokens of ``body``'s request; the request is remembered."""
        key = body.get("prompt_cache_key")
        seen = self._seen.setdefault(
            key if isinstance(key, str) else "", collections.deque(maxlen=self._keep)
        )
        pieces = request_pieces(body)
        best = max((shared_prefix(pieces, earlier) for earlier in seen), default=0)
        seen.append(pieces)
        # An empty tool list is no tokens (its piece, "[]", still has to match).
        sizes = [approx_tokens(piece) for piece in pieces]
        if not body.get("tools"):
            sizes[1] = 0
        return reported(sum(sizes[:best]))


def with_cached(
    events: Sequence[Mapping[str, Any]], cached: int, tools: int = 0
) -> tuple[dict[str, Any], ...]:
    """Stream events whose completion reports ``tools`` more input tokens (the tool list's) and
    ``cached`` tokens (at most its input tokens), unless the script gave a usage with cached
    tokens of its own, which is left as it is."""
    out: list[dict[str, Any]] = []
    for event in events:
        usage = event.get("response", {}).get("usage") if "response" in event else None
        if event.get("type") != "response.completed" or not isinstance(usage, Mapping):
            out.append(dict(event))
            continue
        details = dict(usage.get("input_tokens_details") or {})
        if details.get("cached_tokens"):
            out.append(dict(event))
            continue
        input_tokens = int(usage.get("input_tokens", 0)) + tools
        details["cached_tokens"] = min(cached, input_tokens)
        counted = {
            **usage,
            "input_tokens": input_tokens,
            "total_tokens": int(usage.get("total_tokens", 0)) + tools,
            "input_tokens_details": details,
        }
        response = {**event["response"], "usage": counted}
        out.append({**event, "response": response})
    return tuple(out)


__all__ = [
    "CACHE_STEP_TOKENS",
    "MIN_CACHED_TOKENS",
    "PromptCache",
    "reported",
    "request_pieces",
    "shared_prefix",
    "tool_tokens",
    "with_cached",
]
