"""Structured output as plain functions: a schema checked before anything is sent
(``runtime/relay/_base/_output_schema.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from relay._base._errors import InvalidOpError
from relay._base._output_schema import check_output_schema

ANSWER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "schema",
    [
        ANSWER,
        {},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array"},
        {"$defs": {"n": {"type": "number"}}, "$ref": "#/$defs/n"},
    ],
    ids=["object", "empty", "draft-7", "local-ref"],
)
def test_a_json_schema_is_accepted(schema: dict[str, Any]) -> None:
    check_output_schema(schema)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (None, "not a JSON Schema: a schema is a JSON object, not null"),
        (True, "not a JSON Schema: a schema is a JSON object, not a boolean"),
        ([ANSWER], "not a JSON Schema: a schema is a JSON object, not an array"),
        (
            {"type": "object", "required": "city"},
            "not a JSON Schema: 'city' is not of type 'array' (at $.required)",
        ),
        (
            {"$schema": "https://example.com/draft-99"},
            "not a JSON Schema: $schema names no draft relay knows: 'https://example.com/draft-99'",
        ),
        ({"$schema": 7}, "not a JSON Schema: $schema names no draft relay knows: 7"),
        (
            {"type": "number", "maximum": float("inf")},
            "not a JSON Schema: the schema is not JSON",
        ),
        ({"title": "\ud800"}, "not a JSON Schema: the schema is not valid Unicode"),
    ],
    ids=[
        "null",
        "boolean",
        "array",
        "bad-keyword",
        "unknown-draft",
        "draft-not-text",
        "inf",
        "surrogate",
    ],
)
def test_what_is_not_a_json_schema_is_refused_saying_why(schema: object, message: str) -> None:
    with pytest.raises(InvalidOpError) as refused:
        check_output_schema(schema)
    assert str(refused.value).startswith(message)


def test_a_schema_nested_too_deeply_is_refused() -> None:
    schema: dict[str, Any] = {}
    for _ in range(5_000):
        schema = {"items": schema}
    with pytest.raises(InvalidOpError, match="^not a JSON Schema: .*nested too deeply"):
        check_output_schema(schema)


def test_a_session_that_asks_for_no_structured_output_never_loads_jsonschema() -> None:
    program = (
        "import sys, relay; relay.UserTurn(items=[relay.Text('hi')]);"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'jsonschema')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", f"import json; {program}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out) == []
