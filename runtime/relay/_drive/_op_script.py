"""Op scripts: JSON Lines of ops, ``wait_for`` conditions and sleeps (see ``README.md``).

:func:`parse_op_script` checks the whole text before anything runs: invalid JSON, an unknown
op type, a bad field, an unknown event type or match key in a ``wait_for``: every problem is
reported at once, each naming its line and, where a name was misspelt, the closest known name.
:func:`matches` decides whether an event satisfies a ``wait_for``; :class:`WaitCounter` keeps
the count of matching events as they arrive, so a wait costs one match per event.

A program that embeds relay submits ops itself and stays tolerant (a bad JSON op is an
``error{invalid_op}`` event there); a script is a program written in advance, so the command line
refuses a wrong one whole rather than running half of it.
"""

from __future__ import annotations

import functools
import json
import types
import typing
from collections.abc import Collection, Iterable, Mapping
from typing import Any, TypeAlias

import attrs

from .._base import _json
from .._base import _protocol as p
from .._base._codec import decode_op, type_tag
from .._base._errors import InvalidOpError, ScriptError
from .._base._suggest import did_you_mean
from .._base._util import field_types

_LINE_KEYS = ("op", "wait_for", "sleep_ms")
_WAIT_KEYS = ("type", "count", "match")


@attrs.frozen
class OpLine:
    """Submit an op (already decoded and checked)."""

    line: int
    id: str | None
    op: p.Op


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


Step: TypeAlias = OpLine | WaitFor | Sleep

EVENT_TYPES: Mapping[str, type] = {type_tag(cls): cls for cls in typing.get_args(p.EventMsg)}
OP_TYPES: Mapping[str, type] = {
    type_tag(cls): cls for cls in typing.get_args(p.Op) if cls is not p.CustomOp
}
_INPUT_TYPES: Mapping[str, type] = {type_tag(cls): cls for cls in typing.get_args(p.InputItem)}


def _unknown(kind: str, name: str, known: Iterable[str]) -> str:
    names = sorted(known)
    hint = did_you_mean(name, names) or f" (known: {', '.join(names)})"
    return f"unknown {kind} {name!r}{hint}"


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    # Asked again for every line of a script.
    return tuple(field.name for field in attrs.fields(cls))


def _extra_keys(data: Mapping[str, Any], allowed: Iterable[str], where: str) -> list[str]:
    allowed = list(allowed)
    known = set(allowed)
    return [f"{where}: {_unknown('field', key, allowed)}" for key in data if key not in known]


def _check_op(data: Any, custom_types: Collection[str]) -> tuple[p.Op | None, list[str]]:
    """Decode an op; also refuse fields that the op or its input items do not have (a custom
    op's fields are its task's business)."""
    if isinstance(data, Mapping):
        tag = data.get("type")
        if not isinstance(tag, str):
            return None, ["op needs a 'type' string"]
        cls = OP_TYPES.get(tag)
        if cls is None and tag in custom_types:
            try:
                return decode_op(data, custom_types), []
            except InvalidOpError as exc:
                return None, [str(exc)]
        if cls is None:
            return None, [_unknown("op type", tag, [*OP_TYPES, *custom_types])]
        problems = _extra_keys(data, ["type", *_field_names(cls)], f"op {tag!r}")
        items = data.get("items")
        if isinstance(items, list):
            for index, item in enumerate(items):
                if isinstance(item, Mapping) and item.get("type") in _INPUT_TYPES:
                    item_cls = _INPUT_TYPES[item["type"]]
                    problems += _extra_keys(
                        item, ["type", *_field_names(item_cls)], f"op {tag!r} items[{index}]"
                    )
        if problems:
            return None, problems
    try:
        return decode_op(data), []
    except InvalidOpError as exc:
        return None, [str(exc)]


def _path_problem(kind: Any, path: str) -> str | None:
    """Why ``path`` cannot name a value inside an event of type ``kind``, or None."""
    done: list[str] = []
    for part in path.split("."):
        if typing.get_origin(kind) is tuple:
            if not part.isdigit():
                return f"match key {path!r}: {part!r} is not a list index"
            kind = typing.get_args(kind)[0]
        else:
            members = _attrs_members(kind)
            if members is None:
                return None  # a mapping, Any or a plain value: anything goes below it
            fields = {n: m for m in members for n in _field_names(m)}
            if part != "type" and part not in fields:
                prefix = "".join(f"{d}." for d in done)
                known = [f"{prefix}{n}" for n in ("type", *fields)]
                return _unknown("match key", path, known)
            hints = [field_types(m)[part] for m in members if part in _field_names(m)]
            kind = str if part == "type" else hints[0] if len(hints) == 1 else Any
        done.append(part)
    return None


def _attrs_members(kind: Any) -> list[type] | None:
    """The attrs classes ``kind`` stands for (one class or a union of them), else None."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        members = [m for m in typing.get_args(kind) if m is not type(None)]
    else:
        members = [kind]
    if members and all(isinstance(m, type) and attrs.has(m) for m in members):
        return members
    return None


def _wait_for(data: Any) -> tuple[WaitFor | None, list[str]]:
    if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
        return None, ["wait_for needs an object with a 'type' string"]
    problems = [
        f"wait_for: {_unknown('key', key, _WAIT_KEYS)}" for key in data if key not in _WAIT_KEYS
    ]
    event = EVENT_TYPES.get(data["type"])
    if event is None:
        problems.append(f"wait_for: {_unknown('event type', data['type'], EVENT_TYPES)}")
    count = data.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        problems.append("wait_for count must be a positive integer")
    match = data.get("match", {})
    if not isinstance(match, Mapping) or not all(isinstance(k, str) for k in match):
        problems.append("wait_for match must be an object of dotted paths")
    elif event is not None:
        for path in match:
            problem = _path_problem(event, path)
            if problem is not None:
                problems.append(f"wait_for {data['type']!r}: {problem}")
    if problems:
        return None, problems
    return WaitFor(0, data["type"], count, dict(match)), []


def _step(number: int, data: Any, custom_types: Collection[str]) -> tuple[Step | None, list[str]]:
    if not isinstance(data, Mapping):
        return None, [f"expected an object with one of {', '.join(map(repr, _LINE_KEYS))}"]
    kinds = [key for key in _LINE_KEYS if key in data]
    if len(kinds) != 1:
        if not kinds:
            guesses = [did_you_mean(key, _LINE_KEYS) for key in data]
            hint = next((g for g in guesses if g), "")
            return None, [f"expected an object with 'op', 'wait_for' or 'sleep_ms'{hint}"]
        return None, [f"a line holds one of 'op', 'wait_for' or 'sleep_ms', not {kinds}"]
    kind = kinds[0]
    allowed = ("id", "op") if kind == "op" else (kind,)
    problems = [_unknown("key", key, allowed) for key in data if key not in allowed]
    if kind == "sleep_ms":
        ms = data["sleep_ms"]
        if not isinstance(ms, int) or isinstance(ms, bool) or ms < 0:
            problems.append("sleep_ms must be a non-negative integer")
        return (None if problems else Sleep(number, ms)), problems
    if kind == "wait_for":
        wait, more = _wait_for(data["wait_for"])
        problems += more
        return (None if problems or wait is None else attrs.evolve(wait, line=number)), problems
    sub_id = data.get("id")
    if sub_id is not None and (not isinstance(sub_id, str) or not sub_id):
        problems.append("id must be a non-empty string")
    op, more = _check_op(data["op"], custom_types)
    problems += more
    if problems or op is None:
        return None, problems
    return OpLine(number, sub_id, op), []


def parse_op_script(
    text: str, name: str = "script", custom_types: Collection[str] = ()
) -> list[Step]:
    """Parse and check a whole op script; ``custom_types`` are the op types registered besides
    relay's own.

    Raises:
        ScriptError: one line per problem, each ``NAME line N: ...``.
    """
    steps: list[Step] = []
    problems: list[str] = []
    shutdown: int | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if shutdown is not None:
            problems.append(
                f"{name} line {number}: nothing runs after the shutdown on line {shutdown}"
            )
            continue
        try:
            data = _json.loads(stripped)
        except json.JSONDecodeError as exc:
            problems.append(f"{name} line {number}: invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        except _json.JsonRejected as exc:
            problems.append(f"{name} line {number}: JSON that cannot be read: {exc}")
            continue
        try:
            step, found = _step(number, data, custom_types)
        except RecursionError:
            problems.append(f"{name} line {number}: JSON that cannot be read: nested too deeply")
            continue
        problems += [f"{name} line {number}: {problem}" for problem in found]
        if step is not None:
            steps.append(step)
            if isinstance(step, OpLine) and isinstance(step.op, p.Shutdown):
                shutdown = number
    if problems:
        raise ScriptError("\n".join(problems))
    return steps


def validate_ops(steps: Iterable[Step], factories: Mapping[str, Any], name: str) -> None:
    """Let each custom op's factory check the op before anything runs, when it can.

    A factory that has a ``validate`` attribute (a callable taking the op) is asked about every
    op of its type; a ``ValueError`` it raises is a problem of that op's line.

    Raises:
        ScriptError: one line per problem, each ``NAME line N: TYPE: ...``.
    """
    problems: list[str] = []
    for step in steps:
        if not (isinstance(step, OpLine) and isinstance(step.op, p.CustomOp)):
            continue
        validate = getattr(factories.get(step.op.type), "validate", None)
        if not callable(validate):
            continue
        try:
            validate(step.op)
        except ValueError as exc:
            problems.append(f"{name} line {step.line}: {step.op.type}: {exc}")
        except Exception as exc:
            problems.append(f"{name} line {step.line}: {step.op.type}: its check failed: {exc!r}")
    if problems:
        raise ScriptError("\n".join(problems))


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


@attrs.define
class WaitCounter:
    """How many of the events read so far match ``wait``, kept up to date one event at a time.

    ``wait_for`` counts from the start of the session, so the counter is shown every event of
    its type from the first one on and keeps only the count, not the events.
    """

    wait: WaitFor
    count: int = 0

    def observe(self, msg: Mapping[str, Any]) -> bool:
        """Count ``msg`` if it matches; return whether it did."""
        if matches(self.wait, msg):
            self.count += 1
            return True
        return False
