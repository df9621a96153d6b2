"""Prompt texts, loaded once as data.

The texts live in the package, in ``relay/templates/``.
"""

from __future__ import annotations

import functools
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent / "templates"


@functools.cache
def template(name: str) -> str:
    """The text of ``templates/<name>`` without its trailing newline."""
    path = _ROOT / name
    try:
        return path.read_text(encoding="utf-8").rstrip("\n")
    except FileNotFoundError:
        raise FileNotFoundError(
            f"template {name!r} is missing from the relay installation"
        ) from None
