"""Prompt texts, loaded once as data.

The texts live in ``templates/`` at the top of the source tree; the wheel carries them as
``runtime/templates``. Both places are looked up so that an installed wheel and a checkout
behave the same.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path


def _roots() -> list[Path]:
    installed = Path(str(resources.files("relay"))) / "templates"
    checkout = Path(__file__).resolve().parent.parent / "templates"
    return [installed, checkout]


@functools.cache
def template(name: str) -> str:
    """The text of ``templates/<name>`` without its trailing newline."""
    for root in _roots():
        path = root / name
        if path.is_file():
            return path.read_text(encoding="utf-8").rstrip("\n")
    raise FileNotFoundError(f"template {name!r} is missing from the relay installation")
