"""The closest known name to a misspelt one, for error messages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, known: Iterable[str], *, prefix: str = "") -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or an empty string.

    ``prefix`` is put before the suggestion (a dotted path) but takes no part in finding it.
    """
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {prefix + close[0]!r}?)" if close else ""
