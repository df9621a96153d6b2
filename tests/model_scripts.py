"""Model scripts whose response ids tests can name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relay._models._script import ModelScript, parse_model_script


def numbered(data: Mapping[str, Any] | None = None) -> ModelScript:
    """``data`` parsed, with response ids ``resp-1``, ``resp-2``, … (a script left to itself
    starts its ids with a random prefix, so that no two processes repeat them)."""
    script = parse_model_script(dict(data or {}))
    script.id_prefix = ""
    return script
