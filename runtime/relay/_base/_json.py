"""Reading JSON from outside (rollout lines, op-script lines, server events, tool arguments)
where every rejection is a :class:`ValueError` with a plain message.

Python's parser has limits that are not JSON syntax errors: nesting deeper than the
interpreter's recursion limit raises :class:`RecursionError`, an integer of more than 4,300
digits a bare :class:`ValueError`, and it accepts ``NaN`` and ``Infinity``, which JSON does not
have (and which relay could not write back), and it reads a number too large for a float
(``1e999``) as infinity. :func:`loads` turns each into a :class:`JsonRejected`, so that the
caller's ordinary handling of bad JSON applies.
"""

from __future__ import annotations

import json
import math
from typing import Any, NoReturn


class JsonRejected(ValueError):
    """JSON that Python's parser rejects, or that is not JSON (``NaN``, ``Infinity``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.msg = message


def reject_constant(name: str) -> NoReturn:
    """``parse_constant`` for a decoder: ``NaN`` and ``Infinity`` are not JSON."""
    raise JsonRejected(f"{name} is not a JSON number")


def finite_float(text: str) -> float:
    """``parse_float`` for a decoder: a number that overflows a float is rejected."""
    value = float(text)
    if not math.isfinite(value):
        raise JsonRejected(f"the number {text[:40]} is too large to be held")
    return value


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``; raises :class:`json.JSONDecodeError` for a syntax error and
    :class:`JsonRejected` for what Python's parser cannot hold or JSON does not allow."""
    try:
        return json.loads(text, parse_constant=reject_constant, parse_float=finite_float)
    except RecursionError:
        raise JsonRejected("nested too deeply to be read") from None
    except JsonRejected:
        raise
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        if "integer string conversion" in str(exc):
            raise JsonRejected("an integer has more than 4,300 digits") from None
        raise JsonRejected(str(exc)) from None


def describe(exc: ValueError) -> str:
    """What was wrong, for a message: ``msg (column N)`` for a syntax error."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} (column {exc.colno})"
    return str(exc)
