"""The JSON codec of the protocol, generated from the attrs classes.

One cattrs converter knows every protocol class. Unions are tagged by ``"type"`` (see
:func:`type_tag`); their hooks are built from the union's members, so adding a class to a union
is the whole change. Unknown fields are ignored; an unknown ``type`` is an error, except in
response items, where an unknown type from a model becomes :class:`~relay.Other`.
"""

from __future__ import annotations

import enum
import json
import math
import re
import typing
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

import cattrs
import cattrs.gen

from . import _protocol as p
from ._errors import InvalidOpError, RelayError
from ._suggest import did_you_mean

T = TypeVar("T")

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


class DecodeError(RelayError, ValueError):
    """JSON that does not decode into the expected protocol type."""


#: Tags the naming rule cannot give (docs/protocol.md names this event ``background_event``).
_TAG_OVERRIDES: dict[type, str] = {p.BackgroundEvent: "background_event"}


def type_tag(cls: type) -> str:
    """The ``"type"`` of a protocol class: snake_case name without an ``Event``/``Item`` suffix."""
    if cls in _TAG_OVERRIDES:
        return _TAG_OVERRIDES[cls]
    name = cls.__name__
    for suffix in ("Event", "Item"):
        if name.endswith(suffix) and name != suffix:
            name = name[: -len(suffix)]
            break
    return _CAMEL.sub("_", name).lower()


converter = cattrs.Converter()


def _members(union: Any) -> tuple[type, ...]:
    return tuple(typing.get_args(union))


def _register_tagged_union(
    union: Any,
    *,
    omit_defaults: bool = False,
    aliases: Mapping[str, type] | None = None,
    fallback: Callable[[Mapping[str, Any]], Any] | None = None,
    untagged: Collection[type] = (),
) -> None:
    by_tag: dict[str, type] = {type_tag(cls): cls for cls in _members(union) if cls not in untagged}
    if aliases:
        by_tag.update(aliases)
    expected = ", ".join(sorted(by_tag))

    def structure(obj: Any, _: Any) -> Any:
        if not isinstance(obj, Mapping):
            raise DecodeError(f"expected a JSON object, got {type(obj).__name__}")
        tag = obj.get("type")
        cls = by_tag.get(tag) if isinstance(tag, str) else None
        if cls is None:
            if fallback is not None:
                return fallback(obj)
            raise DecodeError(f"unknown type {tag!r} (expected one of: {expected})")
        try:
            return converter.structure(obj, cls)
        except Exception as exc:
            raise DecodeError(f"invalid {tag!r}: {_describe(exc)}") from exc

    converter.register_structure_hook(union, structure)
    for cls in _members(union):
        if cls not in untagged:
            _register_tag_unstructure(cls, omit_defaults=omit_defaults)


#: The tagged classes, and whether each leaves out fields at their defaults (wire items).
_tagged: dict[type, bool] = {}


def _register_tag_unstructure(cls: type, *, omit_defaults: bool = False) -> None:
    """Tag ``cls`` with its ``"type"``; wire items (``omit_defaults``) leave out unset fields.

    The function is made the first time a ``cls`` is encoded (:func:`_tagged_unstructure`):
    a process encodes a few of the protocol's classes, and making them all costs start-up.
    """
    if cls not in _tagged and cls is not p.Other:
        _tagged[cls] = omit_defaults


#: Fields of tagged classes left out of their JSON form while they hold their default.
_OMITTED_DEFAULTS: dict[type, tuple[str, ...]] = {
    # A session's first event names a compaction model only when it has one of its own, and
    # says nothing of MCP servers when it has none.
    p.SessionConfigured: ("mcp_servers", "compact_model", "compact_model_provider"),
    # A turn that asks for no structured output says nothing of it.
    p.UserTurn: ("final_output_json_schema",),
    p.TurnComplete: ("output",),
    # A session with no sub-agents, and a decision for the session's own call, say nothing
    # of sub-agents.
    p.TokenCount: ("tree_total",),
    p.ExecApproval: ("agent_id",),
    p.ExecApprovalRequest: ("agent",),
    p.ApplyPatchApprovalRequest: ("agent",),
    p.PatchApproval: ("agent_id",),
}


def _tagged_unstructure(cls: type) -> Callable[[Any], dict[str, Any]]:
    overrides: dict[str, Any] = {
        name: cattrs.gen.override(omit_if_default=True) for name in _OMITTED_DEFAULTS.get(cls, ())
    }
    base: Callable[[Any], dict[str, Any]] = cattrs.gen.make_dict_unstructure_fn(
        cls, converter, _cattrs_omit_if_default=_tagged[cls], **overrides
    )
    return _with_tag(cls, base)


def _with_tag(cls: type, base: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    """``base`` with the ``"type"`` of ``cls`` first."""
    tag = type_tag(cls)

    def unstructure(obj: Any) -> dict[str, Any]:
        out = {"type": tag}
        out.update(base(obj))
        return out

    return unstructure


converter.register_unstructure_hook_factory(lambda cls: cls in _tagged, _tagged_unstructure)


def _format_leaf(exc: BaseException, _: Any) -> str:
    if isinstance(exc, KeyError):
        return "required field missing"
    return str(exc) or type(exc).__name__


def _describe(exc: BaseException) -> str:
    if isinstance(exc, cattrs.ClassValidationError | cattrs.IterableValidationError):
        return "; ".join(cattrs.transform_error(exc, format_exception=_format_leaf))
    if isinstance(exc, DecodeError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


#: JSON may escape a lone surrogate ("\\ud800"); no UTF-8 file, stream or model takes one.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate, which cannot be encoded as UTF-8."""
    return not text.isascii() and _LONE_SURROGATE.search(text) is not None


def _strict(kind: type) -> Callable[[Any, Any], Any]:
    def structure(obj: Any, _: Any) -> Any:
        # bool is an int in Python, but true is not a number in JSON.
        if not isinstance(obj, kind) or (kind is not bool and isinstance(obj, bool)):
            if kind is float and isinstance(obj, int) and not isinstance(obj, bool):
                return float(obj)
            raise DecodeError(f"expected {kind.__name__}, got {type(obj).__name__}")
        if isinstance(obj, str) and has_lone_surrogate(obj):
            raise DecodeError("text is not valid Unicode (it holds a lone surrogate)")
        if isinstance(obj, float) and not math.isfinite(obj):
            raise DecodeError(f"{obj} is not a JSON number")
        return obj

    return structure


for _kind in (str, int, float, bool):
    converter.register_structure_hook(_kind, _strict(_kind))


def _structure_enum(obj: Any, cls: type[enum.StrEnum]) -> enum.StrEnum:
    try:
        return cls(obj)
    except ValueError:
        expected = ", ".join(member.value for member in cls)
        raise DecodeError(f"expected one of: {expected}; got {obj!r}") from None


# StrEnum precedes str in every StrEnum's MRO, so this wins over the strict str hook.
converter.register_structure_hook(enum.StrEnum, _structure_enum)


def _is_homogeneous_tuple(kind: Any) -> bool:
    return typing.get_origin(kind) is tuple and typing.get_args(kind)[1:] == (...,)


def _homogeneous_tuple(kind: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    import cattrs.cols

    base = cattrs.cols.homogenous_tuple_structure_factory(kind, conv)

    def structure(obj: Any, _: Any) -> Any:
        # Only a JSON array: cattrs would otherwise read a string character by character.
        if not isinstance(obj, list | tuple):
            raise DecodeError(f"expected a list, got {_json_type(obj)}")
        return base(obj, kind)

    return structure


def _json_type(obj: Any) -> str:
    """What a JSON value is, in JSON's words where Python's differ."""
    if isinstance(obj, Mapping):
        return "object"
    return "null" if obj is None else type(obj).__name__


converter.register_structure_hook_factory(_is_homogeneous_tuple, _homogeneous_tuple)

# Nested classes get their hooks before the classes that hold them: the generated hook of a
# class captures the hooks of its fields when it is made.
for _cls in (p.SummaryText, p.ReasoningText):
    _register_tag_unstructure(_cls, omit_defaults=True)
_register_tagged_union(p.ContentPart, omit_defaults=True)
# A foreground compaction's receipt has no background fields in its JSON form, and one whose
# summary was installed at the first answer says nothing of the summary check.
converter.register_unstructure_hook_factory(
    lambda cls: cls is p.CompactionReceipt,
    lambda cls: cattrs.gen.make_dict_unstructure_fn(
        cls,
        converter,
        background=cattrs.gen.override(omit_if_default=True),
        snapshot_age_ms=cattrs.gen.override(omit_if_default=True),
        model=cattrs.gen.override(omit_if_default=True),
        installed_at=cattrs.gen.override(omit_if_default=True),
        summary_refused=cattrs.gen.override(omit_if_default=True),
        summary_retried=cattrs.gen.override(omit_if_default=True),
    ),
)
# A call of any tool but a sub-agent's, and an event of the session's own: nothing of
# sub-agents in their JSON form.
converter.register_unstructure_hook_factory(
    lambda cls: cls is p.ToolResult,
    lambda cls: cattrs.gen.make_dict_unstructure_fn(
        cls, converter, agents=cattrs.gen.override(omit_if_default=True)
    ),
)
converter.register_unstructure_hook_factory(
    lambda cls: cls is p.Event,
    lambda cls: cattrs.gen.make_dict_unstructure_fn(
        cls, converter, agent=cattrs.gen.override(omit_if_default=True)
    ),
)
_register_tagged_union(p.InputItem)
_register_tagged_union(p.TurnItem)
# A schema is taken as it came: the op's own check says what is wrong with one.
converter.register_structure_hook(
    p.UserTurn,
    cattrs.gen.make_dict_structure_fn(
        p.UserTurn,
        converter,
        final_output_json_schema=cattrs.gen.override(struct_hook=lambda value, _: value),
    ),
)
# A custom op's type is its own name: any type that is not a built-in op's is a custom op here
# (whether the session has a task for it is the session's check, and decode_op's).
_register_tagged_union(
    p.Op, untagged=(p.CustomOp,), fallback=lambda obj: _structure_custom_op(obj, p.CustomOp)
)
converter.register_unstructure_hook(
    p.CustomOp,
    lambda op: {
        "type": op.type,
        **op.fields,
        **({"on_busy": op.on_busy.value} if op.on_busy is not p.OnBusy.REPLACE else {}),
    },
)


def _structure_command(obj: Any, _: Any) -> tuple[str, ...] | p.ToolInvocation:
    if isinstance(obj, Mapping):
        invocation: p.ToolInvocation = converter.structure(obj, p.ToolInvocation)
        return invocation
    if isinstance(obj, list | tuple) and all(isinstance(arg, str) for arg in obj):
        return tuple(obj)
    raise DecodeError("a command is a list of strings or a {server, tool, arguments} object")


converter.register_structure_hook(tuple[str, ...] | p.ToolInvocation, _structure_command)
_register_tagged_union(p.EventMsg)
_register_tagged_union(
    p.ResponseItem,
    omit_defaults=True,
    aliases={"compaction_summary": p.Compaction},
    fallback=lambda obj: _other(obj),
)
converter.register_unstructure_hook(p.Other, lambda other: dict(other.raw))
converter.register_structure_hook(p.Other, lambda obj, _: p.Other(raw=dict(obj)))


def _other(obj: Mapping[str, Any]) -> p.Other:
    # An item relay keeps as it came is written back as it came: it must be JSON that a UTF-8
    # file can hold, with no NaN or infinity (which Python makes of a number like 1e999).
    try:
        text = json.dumps(obj, ensure_ascii=False, allow_nan=False)
    except ValueError:
        raise DecodeError("a number is not finite (JSON has no NaN or infinity)") from None
    if has_lone_surrogate(text):
        raise DecodeError("text is not valid Unicode (it holds a lone surrogate)")
    return p.Other(raw=dict(obj))


def _structure_custom_op(obj: Any, _: Any) -> p.CustomOp:
    tag = obj.get("type") if isinstance(obj, Mapping) else None
    if not isinstance(tag, str):
        raise DecodeError("an op needs a 'type' string")
    try:
        return _custom_op(tag, obj)
    except InvalidOpError as exc:
        raise DecodeError(str(exc).removeprefix("invalid op: ")) from None


converter.register_structure_hook(p.CustomOp, _structure_custom_op)


def _structure_summary(obj: Any, _: Any) -> p.SummaryText:
    if isinstance(obj, Mapping) and isinstance(obj.get("text"), str):
        return p.SummaryText(obj["text"])
    raise DecodeError("a summary part needs a 'text' string")


converter.register_structure_hook(p.SummaryText, _structure_summary)


def to_json(obj: Any) -> Any:
    """The JSON form (plain dicts, lists, strings, numbers) of any protocol value."""
    return converter.unstructure(obj)


def from_json(data: Any, cls: type[T] | Any) -> T:
    """Decode JSON into a protocol class or union; raises :class:`DecodeError`."""
    try:
        return typing.cast(T, converter.structure(data, cls))
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError(_describe(exc)) from exc


def decode_op(data: Any, custom_types: Collection[str] = ()) -> p.Op:
    """Decode an op; ``user_input`` is kept as its own class, and an op whose type is one of
    ``custom_types`` is a :class:`~relay.CustomOp`. Raises InvalidOpError, which names the
    closest known type of an unknown one."""
    tag = data.get("type") if isinstance(data, Mapping) else None
    if isinstance(tag, str) and tag not in p.BUILTIN_OP_TYPES:
        if tag in custom_types:
            return _custom_op(tag, data)
        known = sorted({*p.BUILTIN_OP_TYPES, *custom_types})
        raise InvalidOpError(
            f"invalid op: unknown type {tag!r}{did_you_mean(tag, known)} "
            f"(expected one of: {', '.join(known)})"
        )
    try:
        return from_json(data, p.Op)
    except DecodeError as exc:
        raise InvalidOpError(f"invalid op: {exc}") from exc


def _custom_op(tag: str, data: Mapping[str, Any]) -> p.CustomOp:
    fields = {key: value for key, value in data.items() if key not in ("type", "on_busy")}
    try:
        text = json.dumps(fields, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidOpError(f"invalid op: {tag!r}: its fields are not JSON ({exc})") from None
    if has_lone_surrogate(text):
        raise InvalidOpError(f"invalid op: {tag!r}: text is not valid Unicode") from None
    on_busy = data.get("on_busy", p.OnBusy.REPLACE.value)
    try:
        return p.CustomOp(tag, fields, on_busy)
    except ValueError:
        allowed = ", ".join(member.value for member in p.OnBusy)
        raise InvalidOpError(
            f"invalid op: {tag!r}: on_busy must be one of {allowed}, not {on_busy!r}"
        ) from None


def encode_response_item(item: p.ResponseItem) -> dict[str, Any]:
    """The wire form of a history item, without harness-only fields."""
    out: dict[str, Any] = converter.unstructure(item, p.ResponseItem)
    out.pop("metadata", None)
    return out


def decode_response_item(data: Any) -> p.ResponseItem:
    """Decode a history item; unknown types become :class:`~relay.Other`."""
    return from_json(data, p.ResponseItem)


__all__ = [
    "DecodeError",
    "converter",
    "decode_op",
    "decode_response_item",
    "encode_response_item",
    "from_json",
    "to_json",
    "type_tag",
]
