"""Retry policy of model requests (SPEC §7.3), as plain functions."""

from __future__ import annotations

import random

from ._errors import ModelError

BASE_DELAY = 0.2


def backoff_delay(attempt: int, rng: random.Random) -> float:
    """Seconds before retry ``attempt`` (from 1): 200 ms × 2^(n−1) × a jitter in [0.9, 1.1)."""
    jitter: float = rng.uniform(0.9, 1.1)
    return float(BASE_DELAY * 2 ** (attempt - 1) * jitter)


def retry_delay(
    error: ModelError, attempt: int, max_retries: int, rng: random.Random
) -> float | None:
    """How long to wait before retrying after ``error``, or None to give up."""
    if not error.retryable or attempt > max_retries:
        return None
    if error.retry_after is not None:
        return max(0.0, error.retry_after)
    return backoff_delay(attempt, rng)


def reconnecting_message(attempt: int, max_retries: int) -> str:
    """The ``stream_error`` message shown before retry ``attempt``."""
    return f"Reconnecting... {attempt}/{max_retries}"
