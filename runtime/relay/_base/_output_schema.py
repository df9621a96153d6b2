"""Structured output: the JSON Schema a turn's final answer must fit, checked and applied.

A turn may ask for its final answer as JSON that fits a schema (``final_output_json_schema``
on ``user_turn``, ``Session.ask(output_schema=...)``). :func:`check_output_schema` refuses a
schema before anything is sent; :func:`parse_output` reads the final answer and checks it
against the schema. Both use ``jsonschema``, with the draft the schema names in ``$schema``
(the latest one ``jsonschema`` knows when it names none). ``jsonschema`` and RE2 are imported
on first use: a session that never asks for structured output never loads them.

The check of an answer is bounded (:mod:`._schema_check`): patterns match in linear time
(RE2, :mod:`._ecma_regex`), and an answer nested too deeply, or whose check takes too many
steps, is refused naming the bound. A pattern RE2 cannot match (a backreference, a
lookaround) is refused with the schema. :func:`parse_output` is a plain function; a turn
runs it off the event loop (``relay.lowlevel.read_output``), so that a long check holds up
no other session and no signal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import _json
from ._errors import ErrorCode, InvalidOpError, ModelError

if TYPE_CHECKING:
    from jsonschema import FormatChecker
    from jsonschema.exceptions import SchemaError
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
    draft: type[Validator] | None = None
    if isinstance(named, str):
        # With no default, a $schema jsonschema does not know gives None, not the latest draft.
        draft = validator_for(schema, default=None)  # type: ignore[arg-type]
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
    # Every draft's class takes a format checker for its meta-schema; jsonschema's protocol
    # leaves the argument out.
    meta: Any = draft
    try:
        meta.check_schema(dict(schema), format_checker=_schema_formats(draft))
    except SchemaError as exc:
        raise InvalidOpError(f"not a JSON Schema: {_schema_fault(exc)}") from None
    except RecursionError:
        raise InvalidOpError("not a JSON Schema: it is nested too deeply") from None


def _schema_formats(draft: type[Validator]) -> FormatChecker:
    """The formats a schema's meta-schema asks for, with ``regex`` (where a schema holds a
    pattern) checked as relay matches patterns: by RE2, read as ECMA-262."""
    from jsonschema import FormatChecker

    from ._ecma_regex import PatternRefused, compiled

    checker = FormatChecker(formats=())
    checker.checkers.update(draft.FORMAT_CHECKER.checkers)

    @checker.checks("regex", raises=PatternRefused)
    def _regex(value: object) -> bool:
        if isinstance(value, str):
            compiled(value)
        return True

    return checker


def _schema_fault(exc: SchemaError) -> str:
    """What is wrong with a schema, and where."""
    from ._ecma_regex import PatternRefused

    if isinstance(exc.cause, PatternRefused):
        why = f"the pattern {exc.instance!r} is refused: {exc.cause}"
    else:
        why = exc.message
    return f"{_bounded(why)}{_at(exc.json_path)}"


#: The longest account of what did not fit, in characters: jsonschema's messages quote the
#: value, which may be the whole answer.
REASON_CHARS = 500


def _bounded(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


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


def output_error(message: str) -> ModelError:
    """The error of an answer that is not the structured output asked for (``invalid_output``)."""
    return ModelError(message, ErrorCode.INVALID_OUTPUT)


def parse_output(text: str | None, schema: Mapping[str, Any]) -> Any:
    """The JSON value of ``text``, a turn's final answer, checked against ``schema`` (which
    :func:`check_output_schema` accepted), in bounded work.

    A plain function, for tests and for code off the event loop; a turn calls it through
    ``relay.lowlevel.read_output``, in a worker thread.

    Raises:
        ModelError: ``invalid_output``, naming what did not fit: the answer is missing, is
            not JSON (``the answer is not JSON: ...``), does not fit the schema (the path
            of the first value that does not, and why), or goes over a bound of the check
            (the answer's nesting, the steps of the check, or the nesting of the schema's
            subschemas: the message names the bound).
    """
    from referencing.exceptions import Unresolvable

    from ._ecma_regex import PatternRefused
    from ._schema_check import OverBound, first_error

    if text is None:
        raise output_error("the turn ended without an answer to read as JSON")
    try:
        value = _json.loads(text)
    except ValueError as exc:
        raise output_error(f"the answer is not JSON: {exc}") from None
    try:
        _as_json(value, "the answer")
    except ValueError as exc:
        raise output_error(str(exc)) from None
    try:
        error = first_error(_validator_class(schema), schema, value)
    except OverBound as exc:
        raise output_error(str(exc)) from None
    except RecursionError:
        # The answer is within MAX_DEPTH, whose check is well inside Python's recursion limit:
        # what went deeper is the schema, a reference that leads back to itself without
        # reaching into the answer (``{"$ref": "#"}``).
        raise output_error(
            "checking the answer against the output schema follows its subschemas deeper than "
            f"{sys.getrecursionlimit():,} calls, relay's bound on that nesting: a reference "
            "in the schema may lead back to itself"
        ) from None
    except PatternRefused as exc:
        raise output_error(
            f"the output schema has a pattern relay cannot match ({_bounded(str(exc))})"
        ) from None
    except Unresolvable as exc:
        raise output_error(
            f"the output schema has a reference relay cannot follow ({_bounded(str(exc))})"
        ) from None
    if error is not None:
        where = "" if error.json_path == "$" else f" at {error.json_path}"
        raise output_error(
            f"the answer does not fit the output schema{where}: {_bounded(error.message)}"
        )
    return value


__all__ = ["FORMAT_NAME", "REASON_CHARS", "check_output_schema", "output_error", "parse_output"]
