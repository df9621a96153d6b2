"""The public face: every public name importable, documented, seen by static analysis, and
nothing private leaking (the shape of trio's ``_tests/test_exports.py``)."""

from __future__ import annotations

import ast
import importlib
import inspect
import types
from pathlib import Path

import pytest

import relay

PUBLIC_MODULES = [
    "relay",
    "relay.lowlevel",
    "relay.testing",
    "relay.cluster",
    "relay.tasks",
    "relay.tasks.compaction",
]
#: Public submodules a namespace may hold besides its names.
SUBMODULES = {"cluster", "compaction", "lowlevel", "testing", "tasks"}
#: The committed public face: one line per name of each public module's ``__all__``.
EXPORTS = Path(__file__).resolve().parent / "exports.txt"


def committed() -> dict[str, list[str]]:
    faces: dict[str, list[str]] = {}
    module = ""
    for line in EXPORTS.read_text(encoding="utf-8").splitlines():
        if line.startswith("[") and line.endswith("]"):
            module = line[1:-1]
            faces[module] = []
        elif line.strip():
            faces[module].append(line.strip())
    return faces


def public_names(module: types.ModuleType) -> set[str]:
    declared = getattr(module, "__all__", None)
    if declared is not None:
        return set(declared)
    return {
        name
        for name in dir(module)
        if not name.startswith("_") and name not in SUBMODULES and name != "annotations"
    }


def static_names(module: types.ModuleType) -> set[str]:
    """What a type checker sees the module define or re-export: ``import x as x``, or any
    imported name listed in ``__all__`` (mypy's rule)."""
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    declared = set(getattr(module, "__all__", ()))
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            match node:
                case ast.ImportFrom(module=source, names=[ast.alias(name="*")], level=level):
                    # ``from ._api import *``: everything that module shows the checker.
                    package = module.__name__ if level else ""
                    names.update(static_names(importlib.import_module(f".{source}", package)))
                case ast.ImportFrom(names=aliases) | ast.Import(names=aliases):
                    for alias in aliases:
                        bound = alias.asname or alias.name.split(".")[0]
                        if alias.asname == alias.name.split(".")[-1] or bound in declared:
                            names.add(bound)
                case ast.FunctionDef(name=name) | ast.AsyncFunctionDef(name=name):
                    names.add(name)
                case ast.ClassDef(name=name):
                    names.add(name)
                case ast.Assign(targets=targets):
                    names.update(t.id for t in targets if isinstance(t, ast.Name))
                case ast.AnnAssign(target=ast.Name(id=name)):
                    names.add(name)
                case ast.If(
                    test=ast.Name(id="TYPE_CHECKING") | ast.Attribute(attr="TYPE_CHECKING"),
                    body=inner,
                ):
                    visit(inner)
                case _:
                    pass

    visit(tree.body)
    return names


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_name_is_importable_and_documented(name: str) -> None:
    module = importlib.import_module(name)
    assert inspect.getdoc(module), f"{name} has no docstring"
    undocumented = []
    for attr in sorted(public_names(module)):
        value = getattr(module, attr)  # raises if a name in __all__ does not load
        if (inspect.isclass(value) or inspect.isfunction(value)) and not inspect.getdoc(value):
            undocumented.append(attr)
    assert undocumented == []


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_static_analysis_sees_every_public_name(name: str) -> None:
    module = importlib.import_module(name)
    assert public_names(module) - static_names(module) == set()


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_nothing_private_leaks(name: str) -> None:
    module = importlib.import_module(name)
    leaks = []
    for attr in public_names(module):
        value = getattr(module, attr)
        origin = getattr(value, "__module__", None)
        if isinstance(value, types.ModuleType):
            leaks.append(f"{attr} is a module")
        elif inspect.isclass(value) or inspect.isfunction(value):
            # Everything public comes from relay's own packages (or the standard library's
            # typing helpers re-exported as type aliases).
            assert origin is not None
            if origin.split(".")[0] not in {"relay"}:
                leaks.append(f"{attr} comes from {origin}")
    assert leaks == []


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_the_public_face_is_the_committed_list(name: str) -> None:
    """A change to a public module's ``__all__`` is a visible diff of ``tests/exports.txt``."""
    module = importlib.import_module(name)
    assert sorted(module.__all__) == committed()[name]


def test_relay_shows_at_most_110_names_each_printed_where_it_is_imported() -> None:
    # The protocol (ops, events, items), the configuration, the errors and the session.
    assert len(relay.__all__) <= 110
    classes = [getattr(relay, name) for name in relay.__all__]
    assert [c for c in classes if inspect.isclass(c) and c.__module__ != "relay"] == []
    assert repr(relay.Config).startswith("<class 'relay.Config'>")


def test_relay_loads_its_names_as_it_is_imported() -> None:
    """No module ``__getattr__`` hides what ``relay`` exports: each name is in its dict."""
    assert not hasattr(relay, "__getattr__")
    assert [name for name in relay.__all__ if name not in vars(relay)] == []


def test_the_low_level_face_is_the_port_and_the_interfaces() -> None:
    assert len(relay.lowlevel.__all__) <= 40
    members = [name for name in vars(relay.TaskContext) if not name.startswith("_")]
    assert sorted(members) == [
        "compact",
        "emit",
        "note",
        "record",
        "record_context",
        "record_input",
        "run_tool",
        "sample",
        "take_input",
        "view",
    ]


def test_the_friendly_and_the_low_level_namespace_do_not_overlap() -> None:
    assert public_names(relay) & public_names(relay.lowlevel) == set()


def test_sessions_are_made_only_by_open_session() -> None:
    with pytest.raises(TypeError, match="no public constructor"):
        relay.Session()
