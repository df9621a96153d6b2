"""The public face: every public name importable, documented, seen by static analysis, and
nothing private leaking (the shape of trio's ``_tests/test_exports.py``)."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest

import relay

PUBLIC_MODULES = [
    "relay",
    "relay.protocol",
    "relay.lowlevel",
    "relay.testing",
    "relay.cluster",
    "relay.tasks",
    "relay.tasks.compaction",
]
#: Public submodules a namespace may hold besides its names.
SUBMODULES = {"cluster", "compaction", "lowlevel", "protocol", "testing", "tasks"}
#: The committed public face: one line per name of each public module's ``__all__``, and
#: under ``[relay, outside __all__]`` the protocol's names that ``relay`` still reads.
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


def test_relay_shows_at_most_50_names_each_printed_where_it_is_imported() -> None:
    # The embedding API: the session, the configuration, a program's tools, hooks and tasks,
    # the errors. The protocol's vocabulary is relay.protocol's.
    assert len(relay.__all__) <= 50
    classes = [getattr(relay, name) for name in relay.__all__]
    assert [c for c in classes if inspect.isclass(c) and c.__module__ != "relay"] == []
    assert repr(relay.Config).startswith("<class 'relay.Config'>")


def test_the_protocol_shows_every_op_event_and_item_each_printed_as_relay_protocol() -> None:
    import relay.protocol

    protocol = vars(importlib.import_module("relay._base._protocol"))
    for union in ("Op", "EventMsg", "TurnItem", "ResponseItem", "InputItem", "ContentPart"):
        members = set(typing.get_args(protocol[union]))
        assert members <= {getattr(relay.protocol, name) for name in relay.protocol.__all__}
    classes = [getattr(relay.protocol, name) for name in relay.protocol.__all__]
    shown = {c.__module__ for c in classes if inspect.isclass(c)}
    assert shown == {"relay.protocol"}
    assert repr(relay.protocol.UserTurn) == "<class 'relay.protocol.UserTurn'>"


#: What ``_base/_protocol.py`` shows that is the ground floor's own, not the protocol's
#: vocabulary: the op queue's envelope, two constants, the receipt's formatter.
PROTOCOL_PRIVATE = {"BUILTIN_OP_TYPES", "ROLES", "Submission", "receipt_figures"}


def test_the_protocol_face_has_every_name_the_protocol_defines() -> None:
    """A name the protocol gains (in ``_ops``, ``_items``, ``_effects`` or ``_protocol``) is
    public in relay.protocol, or named here as the ground floor's own."""
    import relay.protocol

    defined = static_names(importlib.import_module("relay._base._protocol"))
    assert defined - PROTOCOL_PRIVATE == set(relay.protocol.__all__)


def former_names() -> list[str]:
    """The protocol's names ``relay`` showed before ``relay.protocol``, as committed."""
    return committed()["relay, outside __all__"]


def test_relay_still_reads_each_protocol_name_it_showed_as_the_same_object() -> None:
    """``relay.UserTurn`` (in the docs and in users' code) is ``relay.protocol.UserTurn``:
    read at run time and seen by type checkers, though neither ``__all__`` nor ``dir()``
    lists it."""
    import relay.protocol

    former = former_names()
    assert len(former) == 70
    for name in former:
        assert getattr(relay, name) is getattr(relay.protocol, name), name
    assert set(former) <= set(relay.protocol.__all__)
    assert set(former) & set(relay.__all__) == set()
    assert set(former) & set(dir(relay)) == set()
    assert {"protocol", "lowlevel"} <= set(dir(relay))
    # The same table: what a type checker sees, and what relay.__getattr__ loads.
    table = vars(relay)["_SOURCES"]
    assert {name for name, source in table.items() if source == "relay.protocol"} == set(former)
    assert {name: static_sources(relay)[name] for name in former} == dict.fromkeys(
        former, "relay.protocol"
    )


def test_a_name_that_was_never_relays_is_read_only_in_relay_protocol() -> None:
    import relay.protocol

    assert relay.protocol.ToolResult.__module__ == "relay.protocol"
    with pytest.raises(AttributeError, match="module 'relay' has no attribute 'ToolResult'"):
        _ = relay.ToolResult


#: The namespaces that load their names on first use, and the submodules they hold besides.
LAZY = {"relay": {"lowlevel", "protocol"}, "relay.lowlevel": set(), "relay.protocol": set()}


def static_sources(module: types.ModuleType) -> dict[str, str]:
    """What the ``if TYPE_CHECKING:`` imports of a lazy namespace say: each name's module."""
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    (guard,) = [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    ]
    package = module.__name__ if module.__file__.endswith("__init__.py") else "relay"
    found: dict[str, str] = {}
    for node in guard.body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1
        for alias in node.names:
            assert alias.asname == alias.name
            source = f"{package}.{node.module}" if node.module else f"{package}.{alias.name}"
            found[alias.name] = source
    return found


@pytest.mark.parametrize("name", list(LAZY))
def test_a_lazy_namespace_loads_what_its_static_imports_say(name: str) -> None:
    """Type checkers and the API reference read the ``TYPE_CHECKING`` imports; a program gets
    what the table of the namespace says: the two agree, and cover ``__all__``."""
    module = importlib.import_module(name)
    table = {**vars(module)["_SOURCES"]}
    table.update({sub: f"{name}.{sub}" for sub in LAZY[name]})
    assert static_sources(module) == table
    eager = {"__version__"} if name == "relay" else set()
    # A name loaded from another public module is that module's, read here too.
    elsewhere = {each for each, source in table.items() if source in PUBLIC_MODULES}
    assert set(module.__all__) == set(table) - LAZY[name] - elsewhere | eager


@pytest.mark.parametrize("name", list(LAZY))
def test_a_lazy_namespace_lists_every_name_and_refuses_others(name: str) -> None:
    module = importlib.import_module(name)
    assert set(module.__all__) | LAZY[name] <= set(dir(module))
    with pytest.raises(AttributeError, match=f"module '{name}' has no attribute 'Nothing'"):
        _ = module.Nothing


FIRST_READ = """
import json, sys
import relay
before = sorted(set(relay.__all__) - set(vars(relay)))
exec(sys.argv[1])
after = sorted(set(relay.__all__) - set(vars(relay)))
import relay.protocol
shown = {
    module.__name__: sorted({
        cls.__module__ for cls in (getattr(module, name) for name in module.__all__)
        if isinstance(cls, type)
    })
    for module in (relay, relay.protocol)
}
former = [n for n, source in vars(relay)["_SOURCES"].items() if source == "relay.protocol"]
same = all(getattr(relay, n) is getattr(relay.protocol, n) for n in former)
resolved = relay.UserTurn.__annotations__["items"] == tuple[relay.protocol.InputItem, ...]
print(json.dumps([len(before), after, shown, same, resolved]))
"""


@pytest.mark.parametrize(
    ("first", "reads_relay"),
    [
        ("relay.TurnStarted", True),
        ("relay.Config", True),
        ("from relay import UserTurn", True),
        ("import relay.protocol; relay.protocol.UserTurn", False),
        ("from relay.protocol import ToolResult", False),
    ],
)
def test_the_first_name_read_loads_every_name_each_printed_where_it_is_imported(
    tmp_path: Path, first: str, reads_relay: bool
) -> None:
    """A namespace's names load together, on the first read of any: from then on each class
    reports its public module, ``relay`` or ``relay.protocol``, whichever name was read
    first and through whichever module (a fresh interpreter for each)."""
    result = subprocess.run(
        [sys.executable, "-c", FIRST_READ, first],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    unloaded, after, shown, same, resolved = json.loads(result.stdout)
    assert unloaded == len(relay.__all__) - 1  # all but __version__
    # Reading relay.protocol's names loads relay.protocol alone.
    assert len(after) == (0 if reads_relay else unloaded)
    assert shown == {"relay": ["relay"], "relay.protocol": ["relay.protocol"]}
    assert same
    assert resolved


def public_classes() -> list[tuple[str, str]]:
    return [
        (module, name)
        for module in PUBLIC_MODULES
        for name in importlib.import_module(module).__all__
        if inspect.isclass(getattr(importlib.import_module(module), name))
    ]


@pytest.mark.parametrize(("module", "name"), public_classes())
def test_every_public_class_resolves_its_type_hints(module: str, name: str) -> None:
    """What pydantic, cattrs, mkdocstrings and users' code do with a class: its annotations
    resolve, though the class reports the public module as its own."""
    cls = getattr(importlib.import_module(module), name)
    typing.get_type_hints(cls)
    typing.get_type_hints(cls, include_extras=True)


def test_each_name_is_public_in_exactly_one_module() -> None:
    homes: dict[str, list[str]] = {}
    for name in PUBLIC_MODULES:
        for attr in importlib.import_module(name).__all__:
            homes.setdefault(attr, []).append(name)
    assert {attr: where for attr, where in homes.items() if len(where) > 1} == {}


def test_the_low_level_face_is_the_port_and_the_interfaces() -> None:
    # The port, the interfaces, and the events a model client yields (a reasoning summary
    # streams too).
    assert len(relay.lowlevel.__all__) <= 42
    members = [name for name in vars(relay.TaskContext) if not name.startswith("_")]
    assert sorted(members) == [
        "agents",
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
    import relay.protocol

    assert public_names(relay) & public_names(relay.lowlevel) == set()
    assert public_names(relay) & public_names(relay.protocol) == set()
    assert public_names(relay.protocol) & public_names(relay.lowlevel) == set()


def test_sessions_are_made_only_by_open_session() -> None:
    with pytest.raises(TypeError, match="no public constructor"):
        relay.Session()
