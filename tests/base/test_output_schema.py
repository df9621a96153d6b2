"""Structured output as plain functions: a schema checked before anything is sent, an answer
read and checked against it in bounded work (``runtime/relay/_base/_output_schema.py``,
``_schema_check.py``, ``_ecma_regex.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from relay._base import _schema_check
from relay._base._errors import ErrorCode, InvalidOpError, ModelError
from relay._base._output_schema import REASON_CHARS, check_output_schema, parse_output
from relay._base._schema_check import MAX_DEPTH, canonical, depth
from tests.hypothesis_profiles import examples

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
        "lazy = ('jsonschema', 're2', 'relay._base._schema_check', 'relay._base._ecma_regex');"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(lazy))))"
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


# ------------------------------------------------------------------ a check in bounded work


def _finishes(check: Callable[[], object]) -> object:
    """What ``check()`` returns or raises, run in a thread so that a check that would run for
    hours fails the test instead of holding it. The guard is no measure of speed: a bounded
    check ends in well under a second, and an unbounded one would take years."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(check())
        except Exception as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(GUARD_SECONDS)
    assert outcome, f"the check was still running after {GUARD_SECONDS} s"
    return outcome[0]


#: How long a check may run before :func:`_finishes` gives up on it.
GUARD_SECONDS = 60


def _refusal(text: str, schema: Any) -> str:
    error = _finishes(lambda: parse_output(text, schema))
    assert isinstance(error, ModelError), error
    assert error.code is ErrorCode.INVALID_OUTPUT
    return error.message


def test_a_backtracking_pattern_is_matched_in_linear_time() -> None:
    # Python's re takes time exponential in the run of a: 2**40 steps here.
    schema = {"type": "string", "pattern": "^(a+)+$"}
    check_output_schema(schema)
    message = _refusal(json.dumps("a" * 40 + "!"), schema)
    assert message.startswith("the answer does not fit the output schema: ")
    assert message.endswith("does not match '^(a+)+$'")
    assert _finishes(lambda: parse_output(json.dumps("a" * 40), schema)) == "a" * 40


def test_a_property_pattern_is_matched_in_linear_time_too() -> None:
    key = "a" * 40 + "!"
    for schema in (
        {"patternProperties": {"^(a+)+$": {"type": "integer"}}},
        {"patternProperties": {"^(a+)+$": True}, "additionalProperties": False},
        {"patternProperties": {"^(a+)+$": True}, "unevaluatedProperties": False},
        {"propertyNames": {"pattern": "^(a+)+$"}},
    ):
        check_output_schema(schema)
        result = _finishes(lambda schema=schema: parse_output(json.dumps({key: 1}), schema))
        assert isinstance(result, ModelError | dict), result


def test_a_subschema_that_names_its_draft_is_bounded_too() -> None:
    # jsonschema checks a subschema with a $schema with that draft's own class.
    schema = {
        "$defs": {
            "word": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "string",
                "pattern": "^(a+)+$",
            }
        },
        "$ref": "#/$defs/word",
    }
    check_output_schema(schema)
    assert _refusal(json.dumps("a" * 40 + "!"), schema).endswith("does not match '^(a+)+$'")


#: A tree of arrays, each of one item or of more: every level is checked by both branches of
#: the oneOf, so the work doubles with each level of the answer.
RECURSIVE = {
    "$defs": {
        "node": {
            "oneOf": [
                {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 1},
                {"type": "array", "items": {"$ref": "#/$defs/node"}, "minItems": 2},
            ]
        }
    },
    "$ref": "#/$defs/node",
}


def test_a_check_that_multiplies_its_work_stops_at_the_bound_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    check_output_schema(RECURSIVE)
    # The bound as it stands takes a second or two to reach; a smaller one, the same way.
    monkeypatch.setattr(_schema_check, "MAX_STEPS", 20_000)
    message = _refusal("[" * 40 + "]" * 40, RECURSIVE)
    assert message == (
        "checking the answer against the output schema takes more than 20,000 steps, "
        "relay's bound on that work"
    )
    # A shallow answer is checked as before.
    assert parse_output("[[[], []]]", RECURSIVE) == [[[], []]]
    assert _refusal("[[1]]", RECURSIVE).startswith("the answer does not fit the output schema")


@pytest.mark.parametrize("steps", [50, 500])
def test_the_bound_counts_keyword_applications(monkeypatch: pytest.MonkeyPatch, steps: int) -> None:
    # Each item of a flat array is one application of items' subschema: a bound below the
    # answer's size refuses it, whatever the schema says of it.
    monkeypatch.setattr(_schema_check, "MAX_STEPS", steps)
    schema = {"type": "array", "items": {"type": "integer"}}
    assert parse_output(json.dumps(list(range(steps // 2))), schema) == list(range(steps // 2))
    message = _refusal(json.dumps(list(range(steps + 1))), schema)
    assert message.startswith(
        f"checking the answer against the output schema takes more than {steps:,} steps"
    )


def test_an_answer_nested_past_the_bound_is_refused_naming_it() -> None:
    deepest = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert depth(parse_output(deepest, {})) == MAX_DEPTH
    message = _refusal("[" + deepest + "]", {})
    assert message == (
        f"the answer is nested more than {MAX_DEPTH} levels deep, relay's bound for checking "
        "an answer"
    )
    nested_objects = '{"a": ' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1)
    assert _refusal(nested_objects, {"type": "object"}).startswith("the answer is nested more")


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"oneOf": [{"type": "string"}, {"$ref": "#"}]},
        {
            "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"}]}, "b": {"$ref": "#/$defs/a"}},
            "$ref": "#/$defs/a",
        },
    ],
    ids=["itself", "through-oneOf", "through-two"],
)
def test_a_reference_that_leads_back_to_itself_fails_the_check_naming_the_bound(
    schema: dict[str, Any],
) -> None:
    # No answer, however shallow, ends these: the schema's nesting has its own bound.
    check_output_schema(schema)
    message = _refusal("1", schema)
    assert message.startswith(
        f"checking the answer against the output schema follows its subschemas deeper than "
        f"{sys.getrecursionlimit():,} calls, relay's bound on that nesting"
    )


def test_unique_items_over_many_objects_is_not_quadratic() -> None:
    # Pairwise comparison would take 3 * 10**7 comparisons of these, a few microseconds
    # each: minutes, past the guard of _finishes.
    items = [{"id": n, "tags": [n, str(n)], "nested": {"deep": [n]}} for n in range(8_000)]
    schema = {"type": "array", "uniqueItems": True}
    assert _finishes(lambda: parse_output(json.dumps(items), schema)) == items
    message = _refusal(
        json.dumps([*items, {"nested": {"deep": [7.0]}, "tags": [7, "7"], "id": 7}]), schema
    )
    assert message == (
        "the answer does not fit the output schema: the items at 7 and 8000 are equal: "
        "{'nested': {'deep': [7.0]}, 'tags': [7, '7'], 'id': 7}"
    )


@pytest.mark.parametrize(
    ("items", "unique"),
    [
        ([1, 1.0], False),
        ([0, -0.0], False),
        ([{"a": 1, "b": 2}, {"b": 2, "a": 1}], False),
        ([[1, {"x": 2.0}], [1.0, {"x": 2}]], False),
        ([True, 1], True),
        ([False, 0], True),
        ([[True], [1]], True),
        ([{"a": False}, {"a": 0}], True),
        ([None, 0, "", [], {}], True),
        (["1", 1], True),
        ([1.5, 1.5], False),
        ([10**20, 1e20], False),
        ([2**53 + 1, float(2**53)], True),
    ],
)
def test_unique_items_follows_json_schema_equality(items: list[Any], unique: bool) -> None:
    schema = {"uniqueItems": True}
    assert Draft202012Validator(schema).is_valid(items) is unique
    if unique:
        assert parse_output(json.dumps(items), schema) == items
    else:
        assert "the items at 0 and 1 are equal" in _refused(json.dumps(items), schema).message


@given(st.lists(JSON_VALUES, max_size=6))
def test_canonical_text_is_equal_exactly_for_equal_values(items: list[Any]) -> None:
    for one in items:
        for two in items:
            same = Draft202012Validator({"const": one}).is_valid(two)
            assert (canonical(one) == canonical(two)) is same


@pytest.mark.parametrize(
    ("schema", "refused", "why", "where"),
    [
        ({"pattern": "^(a)\\1$"}, "^(a)\\\\1$", "\\1 is a backreference", "$.pattern"),
        (
            {"properties": {"date": {"pattern": "(?<y>\\d{4})-\\k<y>"}}},
            "(?<y>\\\\d{4})-\\\\k<y>",
            "\\k is a backreference",
            "$.properties.date.pattern",
        ),
        ({"pattern": "^(?=a)"}, "^(?=a)", "(?=...) is a lookaround", "$.pattern"),
        ({"pattern": "(?<!a)b"}, "(?<!a)b", "(?<!...) is a lookaround", "$.pattern"),
        ({"pattern": "^\\Aa\\Z"}, "^\\\\Aa\\\\Z", "\\A is no escape of ECMA-262", "$.pattern"),
        ({"pattern": "a{1001}"}, "a{1001}", "invalid repetition size: {1001}", "$.pattern"),
        ({"pattern": "(a"}, "(a", "missing ): (a", "$.pattern"),
        (
            {"items": {"patternProperties": {"^(?!x)": True}}},
            "^(?!x)",
            "(?!...) is a lookaround",
            "$.items.patternProperties",
        ),
        (
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "anyOf": [{"pattern": "\\1"}],
            },
            "\\\\1",
            "\\1 is a backreference",
            "$.anyOf[0].pattern",
        ),
    ],
    ids=[
        "backreference",
        "named-backreference",
        "lookahead",
        "lookbehind",
        "no-ecma-escape",
        "repetition",
        "unclosed",
        "pattern-properties",
        "draft-7",
    ],
)
def test_a_pattern_relay_cannot_match_in_linear_time_is_refused_with_the_schema(
    schema: dict[str, Any], refused: str, why: str, where: str
) -> None:
    with pytest.raises(InvalidOpError) as raised:
        check_output_schema(schema)
    message = str(raised.value)
    assert message.startswith(f"not a JSON Schema: the pattern '{refused}' is refused: {why}")
    assert message.endswith(f" (at {where})")


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("b", "abc", True),  # not anchored: anywhere in the text
        ("^b", "abc", False),
        ("^\\d+$", "2024", True),
        ("^\\d+$", "٢٠٢٤", False),  # ECMA-262's \d is ASCII (Python's is not)
        ("^\\w+$", "é", False),
        ("^a$", "a\n", False),  # $ is the text's end (Python's also matches before a \n)
        ("^\\s$", "\u00a0", True),  # ECMA-262's \s holds Unicode's spaces
        ("^\\s$", "\ufeff", True),
        ("^\\S$", "\u2028", False),
        ("^[\\S]$", "x", True),
        ("^.$", "\u2028", False),  # . matches no line terminator
        ("^.$", "\U0001f600", True),  # one character, not two surrogates
        ("^\\ud83d\\ude00$", "\U0001f600", True),
        ("^\\u{1F600}$", "\U0001f600", True),
        ("^\\u00e9$", "é", True),
        ("^\\x41$", "A", True),
        ("^\\cJ$", "\n", True),
        ("^[]$", "", False),
        ("^[^]$", "\n", True),
        ("^[[]$", "[", True),
        ("^\\p{Lu}\\p{Letter}+$", "Ωmega", True),
        ("^\\p{Script=Greek}+$", "Ωω", True),
        ("^(?<year>\\d{4})-\\d\\d$", "2024-05", True),
        ("^[a-z\\-_.]+@[\\w.]+\\.\\w{2,}$", "first.last-x@mail.example.org", True),
        ("^\\/\\.\\:$", "/.:", True),
    ],
)
def test_patterns_are_read_as_ecma_262_reads_them(pattern: str, text: str, matches: bool) -> None:
    schema = {"type": "string", "pattern": pattern}
    check_output_schema(schema)
    if matches:
        assert parse_output(json.dumps(text), schema) == text
    else:
        assert _refused(json.dumps(text), schema).message.endswith(f"does not match {pattern!r}")


def test_a_pattern_refused_in_a_draft_that_does_not_check_property_patterns_fails_the_turn() -> (
    None
):
    # Draft 4's meta-schema does not say that patternProperties' keys are patterns.
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "patternProperties": {"(a)\\1": {}},
    }
    check_output_schema(schema)
    assert _refused('{"x": 1}', schema).message.startswith(
        "the output schema has a pattern relay cannot match (\\1 is a backreference"
    )


# -------------------------------------------- the bounded check agrees with jsonschema's own

#: Patterns and texts where ECMA-262, RE2 and Python's re agree.
PATTERNS = st.sampled_from(["a", "^a", "b$", "^a*b?$", "[ab]c", "^(ab|c)+$", "a{2}", "[^c]"])
TEXTS = st.text(alphabet="abc", max_size=5)
SMALL_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([1.0, 2.5]) | TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3),
    max_leaves=8,
)
TYPES = st.sampled_from(["null", "boolean", "integer", "number", "string", "array", "object"])


def _schemas(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    keywords: dict[str, st.SearchStrategy[Any]] = {
        "type": TYPES | st.lists(TYPES, min_size=1, max_size=2, unique=True),
        "enum": st.lists(SMALL_VALUES, min_size=1, max_size=3),
        "const": SMALL_VALUES,
        "minimum": st.integers(-2, 2),
        "exclusiveMaximum": st.integers(-2, 2),
        "multipleOf": st.sampled_from([1, 2, 0.5]),
        "minLength": st.integers(0, 3),
        "maxLength": st.integers(0, 3),
        "pattern": PATTERNS,
        "items": inner,
        "prefixItems": st.lists(inner, min_size=1, max_size=2),
        "contains": inner,
        "minItems": st.integers(0, 3),
        "maxItems": st.integers(0, 3),
        "uniqueItems": st.booleans(),
        "properties": st.dictionaries(TEXTS, inner, max_size=2),
        "patternProperties": st.dictionaries(PATTERNS, inner, max_size=2),
        "additionalProperties": inner,
        "propertyNames": inner,
        "required": st.lists(TEXTS, max_size=2, unique=True),
        "minProperties": st.integers(0, 2),
        "dependentRequired": st.dictionaries(
            TEXTS, st.lists(TEXTS, max_size=2, unique=True), max_size=2
        ),
        "allOf": st.lists(inner, min_size=1, max_size=2),
        "anyOf": st.lists(inner, min_size=1, max_size=2),
        "oneOf": st.lists(inner, min_size=1, max_size=2),
        "not": inner,
        "if": inner,
        "then": inner,
        "else": inner,
    }
    return st.fixed_dictionaries({}, optional=keywords)


SCHEMAS = st.recursive(
    st.booleans() | _schemas(st.booleans()),
    lambda inner: _schemas(inner),
    max_leaves=6,
)


def _faults(errors: Any) -> list[tuple[str, str]]:
    return sorted((str(error.validator), error.json_path) for error in errors)


@settings(max_examples=examples(80), deadline=None)
@given(st.dictionaries(st.just("allOf"), st.lists(SCHEMAS, min_size=1, max_size=2)), SMALL_VALUES)
def test_the_bounded_check_agrees_with_jsonschema(schema: dict[str, Any], value: Any) -> None:
    check_output_schema(schema)
    theirs = Draft202012Validator(schema)
    ours = _schema_check.bounded(Draft202012Validator)(schema)
    assert _faults(ours.iter_errors(value)) == _faults(theirs.iter_errors(value))
    error = _schema_check.first_error(Draft202012Validator, schema, value)
    expected = best_match(theirs.iter_errors(value))
    if expected is None:
        assert error is None
    else:
        assert error is not None
        assert (error.validator, error.json_path) == (expected.validator, expected.json_path)
