"""Renders ``docs/protocol.md`` from the protocol classes and their docstrings.

``python -m relay._cli._protocol_doc > docs/protocol.md`` writes it; a test checks the file equals
what this renders, so the document cannot drift from the code. Its readers of docstrings,
:func:`attribute_docs` and :func:`markdown`, render ``docs/config.md`` too (``_config_doc.py``).
"""

from __future__ import annotations

import ast
import enum
import inspect
import itertools
import re
import sys
import typing
from collections.abc import Iterator
from typing import Any

import attrs

from .._base import _protocol as p
from .._base._codec import type_tag
from .._base._util import field_types


def _defining_source(cls: type) -> str:
    """The source of the module that defines ``cls`` (a public class reports ``relay`` as its
    module, which only re-exports it)."""
    for name, module in list(sys.modules.items()):
        if (
            name.startswith("relay._")
            and getattr(module, cls.__name__, None) is cls
            and module.__dict__.get("__file__")
            and cls.__name__ in _defined_names(module)
        ):
            return inspect.getsource(module)
    return inspect.getsource(cls)


def _defined_names(module: Any) -> set[str]:
    tree = ast.parse(inspect.getsource(module))
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef)}


def attribute_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings (a string right after a field) of an attrs class."""
    tree = ast.parse(_defining_source(cls))
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__]
    body = classes[0].body if classes else []
    docs: dict[str, str] = {}
    for field, after in itertools.pairwise(body):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[field.target.id] = " ".join(after.value.value.split())
    return docs


def _type_name(hint: Any) -> str:
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return " | ".join(f'"{member.value}"' for member in hint)
    text = str(hint) if not isinstance(hint, type) else hint.__name__
    for prefix in (
        "relay._base._protocol.",
        "relay._base._items.",
        "relay._base._errors.",
        "relay.lowlevel.",
        "relay.protocol.",
        "relay.",
        "typing.",
        "collections.abc.",
    ):
        text = text.replace(prefix, "")
    text = re.sub(r"tuple\[(.*), \.\.\.\]", r"list[\1]", text)
    text = re.sub(r"\bNone(Type)?\b", "null", text)
    return re.sub(r"\bstr\b", "string", text)


def markdown(text: str) -> str:
    """reStructuredText roles and literals of a docstring, as Markdown."""
    text = re.sub(r":\w+:`~?([\w.]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _first_line(cls: type) -> str:
    return markdown((inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " "))


def _section(title: str, union: Any, intro: str) -> Iterator[str]:
    yield f"## {title}\n"
    yield f"{intro}\n"
    for cls in typing.get_args(union):
        yield from _class_block(cls)


def _python_name(cls: type) -> str:
    """Where a program finds the class: ``relay`` or ``relay.lowlevel``."""
    import relay.lowlevel
    import relay.protocol

    for module in (relay.protocol, relay.lowlevel):
        if getattr(module, cls.__name__, None) is cls:
            return f"{module.__name__}.{cls.__name__}"
    raise LookupError(f"{cls.__name__} is not exported")


def _class_block(cls: type) -> Iterator[str]:
    if cls is p.CustomOp:
        yield from _custom_op_block()
        return
    tag = type_tag(cls)
    yield f"### `{tag}`\n"
    yield f"{_first_line(cls)} In Python: `{_python_name(cls)}`.\n"
    hints = field_types(cls)
    docs = attribute_docs(cls)
    fields = attrs.fields(cls)
    skeleton = ", ".join([f'"type": "{tag}"'] + [f'"{f.name}": …' for f in fields])
    yield f"```json\n{{{skeleton}}}\n```\n"
    if fields:
        yield "| field | type | meaning |"
        yield "|---|---|---|"
        for field in fields:
            default = "" if field.default is attrs.NOTHING else " (optional)"
            kind = _type_name(hints[field.name]).replace("|", "\\|")
            meaning = markdown(docs.get(field.name, ""))
            yield f"| `{field.name}` | `{kind}`{default} | {meaning} |"
        yield ""


def _custom_op_block() -> Iterator[str]:
    yield "### Ops you register\n"
    yield f"{_first_line(p.CustomOp)} In Python: `{_python_name(p.CustomOp)}`.\n"
    yield (
        "Its `type` is the name it was registered under, and its fields sit beside it; "
        '`on_busy` (`"replace"` unless given; `"queue"` waits for the running task; '
        '`"steer"` is refused) is the one field relay reads itself. '
        "An op of a type no task is registered for is refused, naming the known types: "
        "`submit` raises `relay.InvalidOpError`, `relay run` stops before it starts, and "
        "an op sent as JSON to a running session is an `error` event (`invalid_op`).\n"
    )
    yield '```json\n{"type": "review", "path": "src/app.py", "on_busy": "queue"}\n```\n'


def render() -> str:
    """The whole protocol document."""
    lines = [
        "# Protocol",
        "",
        "Generated from `runtime/relay/_base/_protocol.py` by",
        "`python -m relay._cli._protocol_doc`; a test keeps it in step with the code. Every",
        "message is a JSON object whose `type` names its class.",
        'Submissions are `{"id": …, "op": {…}}`; events are',
        '`{"id": …, "seq": …, "msg": {…}}`, where `id` is the turn id for events of a turn',
        "and the submission id for events a handler reports, and `seq` counts from 1. An",
        'event of a sub-agent, in an ancestor\'s stream, also has `"agent": {"id": …,',
        '"path": …}` (agents.md).',
        "",
    ]
    lines += list(_section("Ops", p.Op, "What a client asks a session to do."))
    lines += list(_section("Events", p.EventMsg, "What a session reports, in order."))
    lines += list(
        _section("Turn items", p.TurnItem, "Items reported by `item_started` and `item_completed`.")
    )
    lines += list(_section("Input items", p.InputItem, "What a user turn carries."))
    lines += list(
        _section(
            "Response items",
            p.ResponseItem,
            "The history: OpenAI Responses API items in their wire form.",
        )
    )
    return "\n".join(lines).rstrip() + "\n"


__all__ = ["attribute_docs", "markdown", "render"]


if __name__ == "__main__":
    print(render(), end="")
