"""Structured output as plain functions: a schema checked before anything is sent, an answer
read and checked against it (``runtime/relay/_base/_output_schema.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay._base._errors import ErrorCode, InvalidOpError, ModelError
from relay._base._output_schema import REASON_CHARS, check_output_schema, parse_output

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
    with pytest.raises(InvalidOpError, match=r"^not a JSON Schema: .*nested too deeply"):
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


# ------------------------------------------------------------------ an answer read and checked

#: JSON values as a model writes them: no NaN, no infinity, no lone surrogate.
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(exclude_categories=["Cs"])),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(alphabet=st.characters(exclude_categories=["Cs"])), inner, max_size=4
        )
    ),
    max_leaves=20,
)

JSON_TYPES = {
    type(None): "null",
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
}


def _refused(text: str | None, schema: Any) -> ModelError:
    with pytest.raises(ModelError) as refused:
        parse_output(text, schema)
    assert refused.value.code is ErrorCode.INVALID_OUTPUT
    assert not refused.value.retryable
    return refused.value


@given(JSON_VALUES)
def test_any_json_answer_is_read_back_as_the_value_it_writes(value: Any) -> None:
    assert parse_output(json.dumps(value, ensure_ascii=False), {}) == value
    assert parse_output(f" \n{json.dumps(value)}\n ", {"type": JSON_TYPES[type(value)]}) == value


@given(JSON_VALUES, st.sampled_from(["null", "boolean", "string", "array", "object"]))
def test_an_answer_of_another_type_is_refused_naming_it(value: Any, wanted: str) -> None:
    if JSON_TYPES[type(value)] == wanted:
        return
    error = _refused(json.dumps(value), {"type": wanted})
    assert error.message.startswith("the answer does not fit the output schema: ")
    # The value is quoted, cut to a bound when it is long.
    assert error.message.endswith((f"is not of type '{wanted}'", "…"))


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"])))
def test_text_that_is_not_json_is_refused_as_such(text: str) -> None:
    try:
        json.loads(text)
    except ValueError:
        assert _refused(text, {}).message.startswith("the answer is not JSON: ")


def test_the_answer_that_fits_is_its_json_value() -> None:
    assert parse_output('{"city": "Oslo", "population": 709000}', ANSWER) == {
        "city": "Oslo",
        "population": 709000,
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "the turn ended without an answer to read as JSON"),
        ("Oslo, 709000", "the answer is not JSON: Expecting value: line 1 column 1 (char 0)"),
        ('```json\n{"city": "Oslo"}\n```', "the answer is not JSON: Expecting value"),
        ('{"city": "Oslo", "population": NaN}', "the answer is not JSON: NaN is not a JSON number"),
        ('{"city": "\\ud800"}', "the answer is not valid Unicode (it holds a lone surrogate)"),
        (
            '{"city": "Oslo", "population": "many"}',
            "the answer does not fit the output schema at $.population: "
            "'many' is not of type 'integer'",
        ),
        (
            '{"city": "Oslo"}',
            "the answer does not fit the output schema: 'population' is a required property",
        ),
        (
            '{"city": "Oslo", "population": 1, "country": "NO"}',
            "the answer does not fit the output schema: Additional properties are not allowed "
            "('country' was unexpected)",
        ),
    ],
    ids=["none", "prose", "fenced", "nan", "surrogate", "wrong-type", "missing", "extra"],
)
def test_an_answer_that_does_not_fit_is_refused_naming_what(text: str | None, message: str) -> None:
    assert _refused(text, ANSWER).message.startswith(message)


def test_what_did_not_fit_is_told_in_a_bounded_message() -> None:
    error = _refused(json.dumps(["x" * 10_000]), {"type": "object"})
    assert len(error.message) < REASON_CHARS + 100
    assert error.message.endswith("…")


def test_a_reference_is_never_fetched() -> None:
    # jsonschema, left to itself, would fetch the reference over the network.
    error = _refused("1", {"$ref": "http://127.0.0.1:9/schema.json"})
    assert error.message.startswith("the output schema has a reference relay cannot follow")


def test_a_draft_named_by_the_schema_is_the_draft_that_checks() -> None:
    # Draft 4 reads a boolean exclusiveMaximum; 2020-12 would refuse the schema.
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "maximum": 3,
        "exclusiveMaximum": True,
    }
    check_output_schema(schema)
    assert parse_output("2", schema) == 2
    assert _refused("3", schema).message.startswith("the answer does not fit the output schema")
