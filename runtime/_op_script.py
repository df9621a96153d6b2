"""Op scripts (SPEC §9.1): JSON Lines of ops, ``wait_for`` conditions and sleeps.

:func:`parse_op_script` turns the text into steps without running anything; a line that is
not an op line nor a valid ``wait_for``/``sleep_ms`` line is kept as a :class:`BadOpLine`, which
the runner submits so that the session reports it as ``error{invalid_op}`` and goes on.
:func:`matches` decides whether an event satisfies a ``wait_for``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeAlias

import attrs

from ._errors import ScriptError


@attrs.frozen
class OpLine:
    """Submit an op (decoded by the session, so a bad op is reported in order)."""

    line: int
    id: str | None
    op: Any


@attrs.frozen
class BadOpLine:
    """A line that is not valid JSON or not a known kind of line."""

    line: int
    error: str


@attrs.frozen
class WaitFor:
    """Block until ``count`` events of ``type`` matching ``match`` have been emitted."""

    line: int
    type: str
    count: int = 1
    match: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Sleep:
    """Sleep for ``ms`` milliseconds."""

    line: int
    ms: int


Step: TypeAlias = OpLine | BadOpLine | WaitFor | Sleep


def _wait_for(line: int, data: Any) -> WaitFor:
    if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
        raise ScriptError(f"line {line}: wait_for needs an object with a 'type' string")
    count = data.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ScriptError(f"line {line}: wait_for count must be a positive integer")
    match = data.get("match", {})
    if not isinstance(match, Mapping) or not all(isinstance(k, str) for k in match):
        raise ScriptError(f"line {line}: wait_for match must be an object of dotted paths")
    unknown = set(data) - {"type", "count", "match"}
    if unknown:
        raise ScriptError(f"line {line}: unknown wait_for keys: {', '.join(sorted(unknown))}")
    return WaitFor(line, data["type"], count, dict(match))


def parse_op_script(text: str) -> list[Step]:
    """Parse an op script. Raises :class:`ScriptError` for malformed wait/sleep lines."""
    steps: list[Step] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            steps.append(BadOpLine(number, f"invalid JSON: {exc.msg} (column {exc.colno})"))
            continue
        if isinstance(data, Mapping) and "wait_for" in data:
            steps.append(_wait_for(number, data["wait_for"]))
        elif isinstance(data, Mapping) and "sleep_ms" in data:
            ms = data["sleep_ms"]
            if not isinstance(ms, int) or isinstance(ms, bool) or ms < 0:
                raise ScriptError(f"line {number}: sleep_ms must be a non-negative integer")
            steps.append(Sleep(number, ms))
        elif isinstance(data, Mapping) and "op" in data:
            sub_id = data.get("id")
            if sub_id is not None and (not isinstance(sub_id, str) or not sub_id):
                steps.append(BadOpLine(number, "id must be a non-empty string"))
                continue
            steps.append(OpLine(number, sub_id, data["op"]))
        else:
            steps.append(
                BadOpLine(number, "expected an object with 'op', 'wait_for' or 'sleep_ms'")
            )
    return steps


_MISSING = object()


def lookup(data: Any, path: str) -> Any:
    """The value at a dotted path inside JSON data (list indexes allowed), or a sentinel."""
    node = data
    for part in path.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node


def matches(wait: WaitFor, msg: Mapping[str, Any]) -> bool:
    """Whether an event's JSON ``msg`` counts towards ``wait``."""
    if msg.get("type") != wait.type:
        return False
    return all(_same(lookup(msg, path), value) for path, value in wait.match.items())


def _same(found: Any, wanted: Any) -> bool:
    # JSON equality: true is not 1, and 1 is not "1".
    if isinstance(found, bool) or isinstance(wanted, bool):
        return found is wanted
    return bool(found == wanted)
