"""relay's exceptions: one tree under ``RelayError``, drawn where it is defined, and one rule for
the messages relay writes (``runtime/relay/_base/_errors.py``)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import relay
from relay._base import _errors

ROOT = Path(__file__).resolve().parent.parent.parent
SOURCES = (ROOT / "runtime" / "relay", ROOT / "tasks" / "relay")
#: Where a public exception may be public, and its mark in the drawing.
MARKS = {"relay": "", "relay.lowlevel": "[lowlevel]", "relay.cluster": "[cluster]"}
BRANCH = re.compile(r"^(?P<indent>(?:│   |    )*)(?:├── |└── )(?P<name>\w+)(?P<rest>.*)$")


def public_exceptions() -> dict[str, tuple[str, type[BaseException]]]:
    """Every exception class a public module exports: its name, module and class."""
    found: dict[str, tuple[str, type[BaseException]]] = {}
    for module in (*MARKS, "relay.testing", "relay.tasks", "relay.tasks.compaction"):
        namespace = importlib.import_module(module)
        for name in namespace.__all__:
            value = getattr(namespace, name)
            if inspect.isclass(value) and issubclass(value, BaseException):
                found[name] = (module, value)
    return found


def drawn_tree() -> dict[str, tuple[str, str]]:
    """The tree of the module docstring: each name's parent and its mark."""
    assert _errors.__doc__ is not None
    lines = _errors.__doc__.splitlines()
    (top,) = [i for i, line in enumerate(lines) if line.strip() == "RelayError"]
    parents: list[str] = ["RelayError"]
    drawn: dict[str, tuple[str, str]] = {}
    for line in lines[top + 1 :]:
        match = BRANCH.match(line.strip("\n")[4:])
        if match is None:
            break
        depth = len(match["indent"]) // 4
        del parents[depth + 1 :]
        mark = re.search(r"\[\w+\]", match["rest"])
        drawn[match["name"]] = (parents[depth], mark.group() if mark else "")
        parents.append(match["name"])
    return drawn


def test_every_public_exception_derives_from_relay_error() -> None:
    outside = [
        f"{module}.{name}"
        for name, (module, cls) in public_exceptions().items()
        if not issubclass(cls, relay.RelayError)
    ]
    assert outside == []


def test_the_drawn_tree_is_the_tree_of_the_classes() -> None:
    actual: dict[str, tuple[str, str]] = {}
    for name, (module, cls) in public_exceptions().items():
        if cls is relay.RelayError:
            continue
        (parent,) = [base for base in cls.__bases__ if issubclass(base, relay.RelayError)]
        actual[name] = (parent.__name__, MARKS[module])
    assert drawn_tree() == actual


def _leading_text(node: ast.expr) -> str | None:
    """The text a message starts with (``{}`` for each value put in), or None if not literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _breaks_the_rule(node: ast.expr) -> str:
    """Why a message breaks the rule of ``_errors.py``, or ""."""
    text = _leading_text(node)
    if text is None:
        return ""
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        if isinstance(first, ast.FormattedValue) and "prefix" in ast.unparse(first.value).lower():
            return "starts with the prefix of where it is reported"
    if text.lower().startswith(("relay:", "error")):
        return "starts with the prefix of where it is reported"
    if text[:1].isupper() and not re.match(r"[A-Z0-9_]{2,}\b", text):
        return "starts with a capital"
    if text.rstrip().endswith("."):
        return "ends with a full stop"
    return ""


def test_every_message_relay_writes_follows_the_rule() -> None:
    names = set(public_exceptions())
    alternatives = "|".join(sorted(names))
    made = re.compile(rf"\b(?:{alternatives})\(")
    broken = []
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if not made.search(text):  # parse only the modules that make one
                continue
            for node in ast.walk(ast.parse(text)):
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                called = node.func
                name = getattr(called, "id", None) or getattr(called, "attr", None)
                if name in names and (why := _breaks_the_rule(node.args[0])):
                    broken.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}: {why}")
    assert broken == []


def test_the_session_guide_draws_the_same_tree() -> None:
    assert _errors.__doc__ is not None
    drawing = re.compile(r"^ *(RelayError$|[│ ]*[├└]── .*$)")
    in_code = [line.strip() for line in _errors.__doc__.splitlines() if drawing.match(line)]
    guide = (ROOT / "docs" / "session.md").read_text(encoding="utf-8")
    in_guide = [line.strip() for line in guide.splitlines() if drawing.match(line)]
    assert in_code[0] == "RelayError"
    assert in_guide == in_code
