"""An answer checked against a JSON Schema in bounded work (:func:`first_error`).

Theory of operation. ``jsonschema`` alone may work without end on an answer a model wrote:
a ``pattern`` that backtracks is exponential in the text; a recursive ``oneOf`` or ``anyOf``
checks every branch at every level, which multiplies at each level of the answer's nesting;
``uniqueItems`` over objects compares every pair. So relay checks with the draft's own
validator extended (``jsonschema.validators.extend``) in three ways:

- **Patterns in linear time.** ``pattern``, ``patternProperties`` and the keywords that read
  its patterns (``additionalProperties``, ``unevaluatedProperties``) match with RE2
  (:mod:`._ecma_regex`), never Python's ``re``.
- **A budget of steps.** Every keyword function is wrapped: each application spends one step,
  plus one per :data:`ITEMS_PER_STEP` items it loops over (the items of the keyword's value
  and of the value checked, and the size of what ``enum``, ``const`` and ``uniqueItems``
  compare), plus one per :data:`TEXT_PER_STEP` characters of the text a pattern reads and of
  the message of each error it makes (``jsonschema`` writes the value into it), plus one
  for each error it passes up; a pattern of ``patternProperties`` spends one step per key it
  reads. Every path of the check goes
  through keyword functions (subschemas, references, the branches of ``oneOf``), so a check
  that would run on meets the bound and stops (:class:`OverBound`), however the schema
  multiplies the work.
- **A bound on nesting.** An answer nested deeper than :data:`MAX_DEPTH` is refused before it
  is checked.

``uniqueItems`` is O(n log n): each item's canonical JSON text (keys sorted, an integral float
written as the integer it equals) goes into a set, so ``1`` equals ``1.0``, key order does not
count, and ``true`` is not ``1``. ``unevaluatedProperties`` and ``unevaluatedItems`` gather
what was evaluated into sets.

The budget is the running check's (a context variable): a validator of these classes used
outside :func:`first_error` counts nothing.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
from jsonschema.exceptions import ValidationError, best_match
from jsonschema.validators import extend
from referencing import Registry

from ._ecma_regex import search

#: The deepest answer relay checks, in arrays and objects one inside the other.
MAX_DEPTH = 64
#: The steps one check may take (see the module's theory): a step is a few microseconds, and
#: an answer as long as a model writes (tens of thousands of values) takes a few steps per
#: value under an ordinary schema.
MAX_STEPS = 500_000
#: The characters of text that cost one step.
TEXT_PER_STEP = 64
#: The items a keyword loops over that cost one step (a loop's turn is cheap beside a
#: keyword's application, which is a few microseconds).
ITEMS_PER_STEP = 16

Keyword = Callable[[Any, Any, Any, Any], Iterator[ValidationError] | None]


class OverBound(Exception):
    """The check of an answer went over one of relay's bounds; the message names it."""


@attrs.define
class _Budget:
    left: int
    sizes: dict[int, int]
    """The number of values in each array and object of the answer, by ``id``."""

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise OverBound(
                f"checking the answer against the output schema takes more than "
                f"{MAX_STEPS:,} steps, relay's bound on that work"
            )

    def size(self, value: object) -> int:
        return self.sizes.get(id(value), 1)


_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "relay_schema_budget", default=None
)


def _spend(steps: int) -> None:
    budget = _budget.get()
    if budget is not None:
        budget.spend(steps)


def depth(value: object) -> int:
    """How deep ``value`` nests arrays and objects (0 for a scalar), without recursion."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, Mapping):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        deepest = max(deepest, level + 1)
        stack.extend((child, level + 1) for child in children)
    return deepest


def _sizes(value: object) -> dict[int, int]:
    """The number of values in each array and object inside ``value`` (itself included)."""
    sizes: dict[int, int] = {}
    order: list[object] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping | list | tuple):
            order.append(node)
            stack.extend(node.values() if isinstance(node, Mapping) else node)
    for node in reversed(order):  # children before their parents
        children: Any = node.values() if isinstance(node, Mapping) else node
        sizes[id(node)] = 1 + sum(sizes.get(id(child), 1) for child in children)
    return sizes


# ----------------------------------------------------------------------- uniqueItems


def _normal(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list | tuple):
        return [_normal(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _normal(item) for key, item in value.items()}
    return value


def canonical(value: Any) -> str:
    """``value``'s JSON text, equal for values JSON Schema calls equal: object keys sorted,
    an integral number written as an integer (``1.0`` as ``1``); ``true`` stays ``true``."""
    return json.dumps(_normal(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not (unique and validator.is_type(instance, "array")):
        return
    seen: dict[str, int] = {}
    for index, item in enumerate(instance):
        first = seen.setdefault(canonical(item), index)
        if first != index:
            yield ValidationError(f"the items at {first} and {index} are equal: {item!r}")
            return


# --------------------------------------------------------------------- the patterns


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    _spend(len(patterns) * len(instance))
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(original: Keyword) -> Keyword:
    """``additionalProperties``: ``jsonschema``'s own where no ``patternProperties`` is beside
    it (it then reads no pattern), relay's where one is."""

    def check(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
        patterns = schema.get("patternProperties")
        if not patterns:
            yield from original(validator, additional, instance, schema) or ()
            return
        if not validator.is_type(instance, "object"):
            return
        _spend(len(patterns) * len(instance))
        named = schema.get("properties", {})
        extras = [
            key
            for key in instance
            if key not in named and not any(search(pattern, key) for pattern in patterns)
        ]
        if validator.is_type(additional, "object"):
            for key in extras:
                yield from validator.descend(instance[key], additional, path=key)
        elif additional is False and extras:
            names = ", ".join(repr(key) for key in sorted(extras))
            listed = ", ".join(repr(pattern) for pattern in sorted(patterns))
            yield ValidationError(
                f"Additional properties are not allowed: {names} match no property nor any "
                f"of the patterns {listed}"
            )

    return check


# ------------------------------------------------------- unevaluatedProperties and Items


def _valid(validator: Any, instance: Any, subschema: Any, **where: Any) -> bool:
    return next(validator.descend(instance, subschema, **where), None) is None


class _Found(Exception):
    """The validator and schema a reference leads to, found by a probe."""

    def __init__(self, validator: Any, schema: Any) -> None:
        super().__init__()
        self.validator = validator
        self.schema = schema


#: A probe in progress: the value it follows and the schema of the reference it follows.
_probe: contextvars.ContextVar[tuple[object, object] | None] = contextvars.ContextVar(
    "relay_schema_probe", default=None
)


def _referenced(
    validator: Any, instance: object, schema: Mapping[str, Any]
) -> list[tuple[Any, Any]]:
    """The validator and schema each reference of ``schema`` (``$ref``, ``$dynamicRef``,
    ``$recursiveRef``) leads to at ``instance``.

    ``jsonschema`` keeps the resolving to itself; so the reference alone is checked, and the
    first keyword applied to ``instance`` past it (see :func:`_counted`) reports the validator
    and schema it runs with, and stops the check.
    """
    found: list[tuple[Any, Any]] = []
    for keyword in ("$ref", "$dynamicRef", "$recursiveRef"):
        if keyword not in schema:
            continue
        reference = {keyword: schema[keyword]}
        token = _probe.set((instance, reference))
        try:
            next(validator.descend(instance, reference), None)
        except _Found as at:
            found.append((at.validator, at.schema))
        finally:
            _probe.reset(token)
    return found


def _conditional(validator: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
    """The subschemas of ``schema`` that apply to ``instance`` and evaluate what it holds
    (``allOf``, ``anyOf``, ``oneOf`` that it fits, ``if`` and ``then`` or ``else``)."""
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, ()):
            if _valid(validator, instance, subschema):
                yield subschema
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            yield schema["if"]
            if "then" in schema:
                yield schema["then"]
        elif "else" in schema:
            yield schema["else"]


def _evaluated_keys(validator: Any, instance: Mapping[str, Any], schema: Any) -> set[str]:
    if not isinstance(schema, Mapping):
        return set()
    _spend(1 + len(instance))
    keys: set[str] = set()
    for referenced, contents in _referenced(validator, instance, schema):
        keys |= _evaluated_keys(referenced, instance, contents)
    named = schema.get("properties")
    if isinstance(named, Mapping):
        keys |= named.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if keyword in schema:
            keys |= {k for k, v in instance.items() if _valid(validator, v, schema[keyword])}
    patterns = schema.get("patternProperties")
    if isinstance(patterns, Mapping) and patterns:
        _spend(len(patterns) * len(instance))
        keys |= {k for k in instance if any(search(pattern, k) for pattern in patterns)}
    for key, subschema in schema.get("dependentSchemas", {}).items():
        if key in instance:
            keys |= _evaluated_keys(validator, instance, subschema)
    for subschema in _conditional(validator, instance, schema):
        keys |= _evaluated_keys(validator, instance, subschema)
    return keys


def _unevaluated_properties(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    rest = [
        key
        for key in instance
        if key not in evaluated
        and not _valid(validator, instance[key], unevaluated, path=key, schema_path=key)
    ]
    if rest:
        names = ", ".join(repr(key) for key in sorted(rest))
        if unevaluated is False:
            yield ValidationError(f"Unevaluated properties are not allowed: {names}")
        else:
            yield ValidationError(
                f"Unevaluated properties do not fit unevaluatedProperties: {names}"
            )


def _evaluated_indexes(validator: Any, instance: list[Any], schema: Any) -> set[int]:
    if not isinstance(schema, Mapping):
        return set()
    _spend(1 + len(instance))
    items = schema.get("items")
    # Draft 2020-12's items, an earlier draft's single schema, or additionalItems after an
    # array of items: every item is evaluated.
    if "items" in schema and (not isinstance(items, list) or "additionalItems" in schema):
        return set(range(len(instance)))
    indexes: set[int] = set()
    for prefix in (items, schema.get("prefixItems")):
        if isinstance(prefix, list):
            indexes |= set(range(min(len(prefix), len(instance))))
    for referenced, contents in _referenced(validator, instance, schema):
        indexes |= _evaluated_indexes(referenced, instance, contents)
    for keyword in ("contains", "unevaluatedItems"):
        if keyword in schema:
            fits = validator.evolve(schema=schema[keyword])
            indexes |= {n for n, item in enumerate(instance) if fits.is_valid(item)}
    for subschema in _conditional(validator, instance, schema):
        indexes |= _evaluated_indexes(validator, instance, subschema)
    return indexes


def _unevaluated_items(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "array"):
        return
    evaluated = _evaluated_indexes(validator, instance, schema)
    rest = [n for n in range(len(instance)) if n not in evaluated]
    if rest:
        yield ValidationError(
            f"Unevaluated items are not allowed: those at {', '.join(map(str, rest))}"
        )


_OWN: dict[str, Keyword] = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "uniqueItems": _unique_items,
    "unevaluatedProperties": _unevaluated_properties,
    "unevaluatedItems": _unevaluated_items,
}


# ------------------------------------------------------------------------ the budget


def _cost(budget: _Budget, keyword: str, value: Any, instance: Any) -> int:
    """The steps of one application of ``keyword`` (see the module's theory)."""
    looped = 0
    if isinstance(value, list | dict):
        looped += len(value)
    if isinstance(instance, list | dict):
        looped += len(instance)
        if keyword == "enum":
            looped += budget.size(instance) * (len(value) if isinstance(value, list) else 1)
        elif keyword in ("const", "uniqueItems"):
            looped += budget.size(instance)
    elif isinstance(instance, str) and keyword == "pattern":
        return 1 + len(instance) // TEXT_PER_STEP
    return 1 + looped // ITEMS_PER_STEP


def _charged(budget: _Budget, errors: Iterator[ValidationError]) -> Iterator[ValidationError]:
    for error in errors:
        # Passing an error up is work at each level it passes; an error made here (not one
        # passed up from a subschema, which has a schema path already) holds its value
        # written out, and the writing was work too.
        fresh = not error.relative_schema_path
        budget.spend(1 + len(error.message) // TEXT_PER_STEP if fresh else 1)
        yield error


def _counted(keyword: str, function: Keyword) -> Keyword:
    def apply(
        validator: Any, value: Any, instance: Any, schema: Any
    ) -> Iterator[ValidationError] | None:
        probe = _probe.get()
        if probe is not None and instance is probe[0] and schema is not probe[1]:
            raise _Found(validator, schema)
        budget = _budget.get()
        if budget is None:
            return function(validator, value, instance, schema)
        budget.spend(_cost(budget, keyword, value, instance))
        errors = function(validator, value, instance, schema)
        return None if errors is None else _charged(budget, errors)

    return apply


#: The classes :func:`bounded` made, by the draft's class each extends. Two threads that make
#: one at once make two equal classes: the last kept serves from then on, and both count.
_bounded: dict[object, type[Any]] = {}
_made: set[type[Any]] = set()


def bounded(draft: type[Any]) -> type[Any]:
    """``draft``'s validator class with relay's patterns, ``uniqueItems`` and budget."""
    if (known := _bounded.get(draft)) is not None:
        return known
    keywords: dict[str, Keyword] = {}
    for keyword, function in draft.VALIDATORS.items():
        if keyword == "additionalProperties":
            function = _additional_properties(function)
        keywords[keyword] = _counted(keyword, _OWN.get(keyword, function))
    made: type[Any] = extend(draft, keywords)  # type: ignore[no-untyped-call]
    plain = made.evolve

    def evolve(self: Any, **changes: Any) -> Any:
        # A subschema that names a draft ($schema) is checked with that draft's class: the
        # bounded one, never jsonschema's own, which would match patterns with Python's re
        # and count nothing.
        evolved = plain(self, **changes)
        kind = type(evolved)
        if kind in _made:
            return evolved
        fields = attrs.fields(kind)
        return bounded(kind)(**{f.alias: getattr(evolved, f.name) for f in fields if f.init})

    made.evolve = evolve
    _made.add(made)
    _bounded[draft] = made
    return made


def first_error(draft: type[Any], schema: Mapping[str, Any], value: Any) -> ValidationError | None:
    """The error ``jsonschema``'s ``best_match`` picks among those of ``value`` under
    ``schema`` (checked with ``draft``'s validator, bounded), or None when it fits.

    Raises:
        OverBound: the answer nests deeper than :data:`MAX_DEPTH`, or its check takes more
            than :data:`MAX_STEPS` steps; the message names the bound.
        PatternRefused: a pattern of the schema that no check of it refused (the key of a
            draft 3 or 4 ``patternProperties``) cannot be matched in linear time.
    """
    if depth(value) > MAX_DEPTH:
        raise OverBound(
            f"the answer is nested more than {MAX_DEPTH} levels deep, relay's bound for "
            "checking an answer"
        )
    token = _budget.set(_Budget(MAX_STEPS, _sizes(value)))
    try:
        # An empty registry: a reference resolves within the schema (or to a draft's own
        # meta-schema), never over the network, which jsonschema would otherwise try.
        validator = bounded(draft)(schema, registry=Registry())
        error: ValidationError | None = best_match(validator.iter_errors(value))
        return error
    finally:
        _budget.reset(token)


__all__ = [
    "MAX_DEPTH",
    "MAX_STEPS",
    "ITEMS_PER_STEP",
    "TEXT_PER_STEP",
    "OverBound",
    "bounded",
    "canonical",
    "depth",
    "first_error",
]
