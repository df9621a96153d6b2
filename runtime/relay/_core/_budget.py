"""The token budget of a turn: the window, the auto-compaction limit and the usage measured
against it, computed in one place (docs/compaction.md, docs/session.md).

Everything that asks "is the context over the limit?" reads :attr:`TokenBudget.over_limit`;
nothing else compares usage with a limit. The functions here are pure.
"""

from __future__ import annotations

import attrs

from .._base._config import Config, ProviderConfig
from .._base._tokens import calibrated, context_window_for

#: Room kept for the answer after a compaction when no answer limit is set: a quarter of the
#: window, at most this many tokens.
ANSWER_ROOM = 8_192


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


@attrs.frozen
class TokenBudget:
    """Where a model's context stands: its window, the auto-compaction limit and the usage.

    ``usage`` is what the limit is compared with: the server's total of the last response plus
    the calibrated estimate of what was recorded after it (docs/session.md).
    """

    model: str
    """The model this budget is for."""
    window: int | None
    """Its context window, when known."""
    limit: int | None
    """The auto-compaction limit, or None (never)."""
    usage: int
    """Tokens in use, as compared with the limit."""
    ratio: float = 1.0
    """Server tokens per estimated token (1.0 until a server counted a request)."""
    max_output_tokens: int | None = None
    """The answer limit of the session's requests, when one is set."""
    counted: bool = False
    """Whether ``usage`` rests on a server's count (a response since the last compaction)
    rather than on relay's estimate alone."""

    @property
    def over_limit(self) -> bool:
        """Whether usage reached the auto-compaction limit (never when there is none)."""
        return self.limit is not None and self.usage >= self.limit

    @property
    def over_window(self) -> bool:
        """Whether usage is beyond the context window (never when it is unknown)."""
        return self.window is not None and self.usage > self.window

    def share(self, configured: int) -> int:
        """The token budget of a record placed in the context (the work-state record, the
        files read), in estimate units: ``configured``, and never more than a tenth of the
        window when it is known (on a small window the record must leave room for the rest).
        """
        return share_of_window(configured, self.window, self.ratio)

    def reached(self, percent: int, of: int | None) -> bool:
        """Whether usage reached ``percent`` of ``of`` (never when either is unset or zero)."""
        return percent > 0 and of is not None and self.usage * 100 >= of * percent

    def answer_room(self) -> int | None:
        """Tokens a compacted context must leave for an answer, when the window is known."""
        return None if self.window is None else answer_room(self.window, self.max_output_tokens)


#: A record placed in the context takes at most this share of the window (a divisor).
WINDOW_SHARE = 10


def share_of_window(configured: int, window: int | None, ratio: float = 1.0) -> int:
    """``configured`` tokens (estimate units), and never more than a tenth of the context
    ``window`` when it is known, as a server counts tokens (``ratio`` server tokens to an
    estimated one, never fewer than one)."""
    if window is None:
        return configured
    return max(0, min(configured, int(window / WINDOW_SHARE / max(1.0, ratio))))


def token_budget(
    config: Config,
    provider: ProviderConfig,
    model: str,
    *,
    last_response_tokens: int,
    tokens_since_model: int,
    ratio: float,
) -> TokenBudget:
    """The budget of ``model``: ``last_response_tokens`` (the server's total of the last
    response) and ``tokens_since_model`` (estimated, scaled by ``ratio``) make the usage."""
    usage = last_response_tokens + calibrated(tokens_since_model, ratio)
    budget = budget_at(config, provider, model, usage=usage, ratio=ratio)
    return (
        attrs.evolve(budget, counted=last_response_tokens > 0) if last_response_tokens else budget
    )


def budget_at(
    config: Config, provider: ProviderConfig, model: str, *, usage: int, ratio: float
) -> TokenBudget:
    """The budget of ``model`` with ``usage`` tokens in use (the usage of a history is the
    same whatever model reads it; the window and the limit are the model's)."""
    window = context_window_for(model, config.model_context_window)
    answer_limit = config.max_output_tokens(provider)
    return TokenBudget(
        model=model,
        window=window,
        limit=auto_compact_limit(
            config.model_auto_compact_token_limit, window, reserved_output=answer_limit
        ),
        usage=usage,
        ratio=ratio,
        max_output_tokens=answer_limit,
    )


__all__ = [
    "ANSWER_ROOM",
    "TokenBudget",
    "answer_room",
    "auto_compact_limit",
    "budget_at",
    "share_of_window",
    "token_budget",
]
