"""Structured output: the JSON Schema a turn's final answer must fit, checked and applied.

A turn may ask for its final answer as JSON that fits a schema (``final_output_json_schema``
on ``user_turn``). :func:`check_output_schema` refuses a schema before anything is sent, with
``jsonschema`` and the draft the schema names in ``$schema`` (the latest one ``jsonschema``
knows when it names none). ``jsonschema`` is imported on first use: a
session that never asks for structured output never loads it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._errors import InvalidOpError

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

#: The ``name`` of the response format relay asks for, Codex's own.
FORMAT_NAME = "codex_output_schema"


def _as_json(value: object, what: str) -> str:
    """``value`` as JSON text; raises ValueError when it is not JSON a UTF-8 stream can hold."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply") from None
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid Unicode (it holds a lone surrogate)") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} is not JSON ({exc})") from None
    return text


def _validator_class(schema: Mapping[str, Any]) -> type[Validator]:
    """The ``jsonschema`` validator of the draft ``schema`` names (default: the latest)."""
    from jsonschema.validators import validator_for

    if "$schema" not in schema:
        found: type[Validator] = validator_for(schema)
        return found
    named = schema["$schema"]
    draft: type[Validator] | None = (
        validator_for(schema, default=None) if isinstance(named, str) else None  # type: ignore[arg-type]
    )
    if draft is None:
        raise InvalidOpError(f"not a JSON Schema: $schema names no draft relay knows: {named!r}")
    return draft


def check_output_schema(schema: object) -> None:
    """Check that ``schema`` is a JSON Schema (a JSON object) that an answer can be checked
    against.

    Raises:
        InvalidOpError: it is not; the message says why and where (``not a JSON Schema:
            ...``).
    """
    from jsonschema.exceptions import SchemaError

    if not isinstance(schema, Mapping):
        raise InvalidOpError(f"not a JSON Schema: a schema is a JSON object, not {_kind(schema)}")
    try:
        _as_json(schema, "the schema")
    except ValueError as exc:
        raise InvalidOpError(f"not a JSON Schema: {exc}") from None
    draft = _validator_class(schema)
    try:
        draft.check_schema(dict(schema))
    except SchemaError as exc:
        raise InvalidOpError(f"not a JSON Schema: {exc.message}{_at(exc.json_path)}") from None
    except RecursionError:
        raise InvalidOpError("not a JSON Schema: it is nested too deeply") from None


def _kind(value: object) -> str:
    """What ``value`` is, in JSON's words where it is JSON."""
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    if value is None:
        return "null"
    if isinstance(value, list | tuple):
        return "an array"
    return names.get(type(value), type(value).__name__)


def _at(path: str) -> str:
    return "" if path == "$" else f" (at {path})"


__all__ = ["FORMAT_NAME", "check_output_schema"]
