"""Hypothesis settings profiles for relay's tests, chosen with ``--hypothesis-profile``.

- ``default``: the counts each test names (the stateful runtime test runs 2,000 examples).
- ``quick``: a tenth of them, for an inner loop that still explores.
- ``thorough``: ten times as many, for a long run before a release.

A test names its example count once, as it runs under ``default``, and takes it through
:func:`examples`, which scales it by the loaded profile.
"""

from __future__ import annotations

from hypothesis import settings

#: Hypothesis' own ``max_examples``: the ``default`` profile's, which scales nothing.
_BASE = 100

settings.register_profile("quick", max_examples=_BASE // 10)
settings.register_profile("thorough", max_examples=_BASE * 10)


def examples(count: int) -> int:
    """``count`` examples, scaled by the loaded profile (at least one)."""
    return max(1, count * settings.default.max_examples // _BASE)
