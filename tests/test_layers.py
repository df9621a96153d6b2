"""The architecture, checked on the source (docs/architecture.md): the rooms and the imports
between them, no cycle, small core modules, no reach into another module's privates, tasks on
the public API alone, and a repository without links."""

from __future__ import annotations

import ast
import functools
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The two source roots of the package.
SOURCES = (ROOT / "runtime", ROOT / "tasks")

#: What each room may import, by module prefix (the longest prefix that matches decides).
#: A room below never imports a room above it: the ground floor imports nothing of relay, the
#: core only the ground floor, and the shells sit on top.
ALLOWED: dict[str, tuple[str, ...]] = {
    "relay._version": (),
    "relay._base": ("relay._base", "relay._version"),
    "relay._exec": ("relay._base", "relay._exec", "relay._version"),
    "relay._core": ("relay._base", "relay._core", "relay._exec", "relay._version"),
    "relay._models": ("relay._base", "relay._core", "relay._exec", "relay._models"),
    "relay._wire": ("relay._base", "relay._core", "relay._exec", "relay._models", "relay._wire"),
    "relay._mcp": ("relay._base", "relay._core", "relay._exec", "relay._mcp", "relay._version"),
    "relay._otel": ("relay._base", "relay._core", "relay._exec", "relay._otel", "relay._version"),
    "relay._rollout": ("relay._base", "relay._core", "relay._exec", "relay._rollout"),
    "relay._open": (
        "relay._base",
        "relay._core",
        "relay._exec",
        "relay._models",
        "relay._wire",
        "relay._mcp",
        "relay._otel",
        "relay._open",
        "relay._rollout",
    ),
    "relay.lowlevel": ("relay._base", "relay._core", "relay._exec"),
    "relay.protocol": ("relay._base",),
    "relay.tasks": ("relay", "relay.lowlevel", "relay.tasks"),
}
#: The package's face re-exports the ground floor, the core, the face and the resume.
ALLOWED["relay"] = (
    "relay._base",
    "relay._core",
    "relay._exec",
    "relay._open",
    "relay._rollout",
    "relay._version",
    "relay.lowlevel",
    "relay.protocol",
)
#: The shells sit on top: they choose, drive and show, and nothing below imports them. Each is
#: a room like any other, with what it may import; the pages' HTML is a room of its own, which
#: imports nothing of relay, so that two shells that write pages share it without a cycle.
ALLOWED |= {
    "relay._html": ("relay._html",),
    "relay._codex": ("relay._base", "relay._codex"),
    "relay._drive": ("relay._base", "relay._core", "relay._exec", "relay._drive"),
    "relay._testing": ("relay._base", "relay._models", "relay._testing"),
    "relay._eval": (
        "relay._base",
        "relay._core",
        "relay._exec",
        "relay._drive",
        "relay._eval",
        "relay._html",
        "relay._models",
        "relay._open",
        "relay._otel",
        "relay._version",
    ),
    "relay._cluster": (
        "relay._base",
        "relay._cluster",
        "relay._core",
        "relay._exec",
        "relay._drive",
        "relay._models",
        "relay._open",
        "relay._otel",
        "relay._rollout",
        "relay._version",
    ),
    "relay._appserver": (
        "relay._appserver",
        "relay._base",
        "relay._codex",
        "relay._core",
        "relay._exec",
        "relay._models",
        "relay._open",
        "relay._rollout",
        "relay._version",
    ),
    "relay._cli": (
        "relay",
        "relay._appserver",
        "relay._base",
        "relay._cli",
        "relay._cluster",
        "relay._codex",
        "relay._core",
        "relay._exec",
        "relay._drive",
        "relay._eval",
        "relay._html",
        "relay._models",
        "relay._open",
        "relay._otel",
        "relay._rollout",
        "relay._testing",
        "relay._version",
        "relay.lowlevel",
    ),
    "relay.testing": (
        "relay._base",
        "relay._core",
        "relay._exec",
        "relay._models",
        "relay._open",
        "relay._testing",
    ),
    "relay.cluster": ("relay._base", "relay._cluster", "relay._core", "relay._exec"),
    "relay.__main__": ("relay._cli",),
}
#: The shells, which the core never imports.
SHELLS = (
    "relay._appserver",
    "relay._cli",
    "relay._drive",
    "relay._eval",
    "relay._cluster",
    "relay._testing",
    "relay._html",
    "relay._codex",
    "relay.testing",
    "relay.cluster",
    "relay.__main__",
)

#: No module of any room is longer than this.
MODULE_LINES = 600


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for root in SOURCES:
        for path in sorted((root / "relay").rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = modules()


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The syntax tree of a module, parsed once for every test here."""
    return ast.parse(path.read_text(encoding="utf-8"))


def imports(name: str, path: Path) -> Iterator[tuple[int, str]]:
    """Every module of relay that ``name`` imports (anywhere in it, lazily or not, and under
    ``TYPE_CHECKING`` too), with its line."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "relay":
                    yield node.lineno, _known(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            if source.split(".")[0] != "relay":
                continue
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                yield node.lineno, submodule if submodule in MODULES else _known(source)


def _known(module: str) -> str:
    while module not in MODULES and "." in module:
        module = module.rpartition(".")[0]
    return module


def room(name: str) -> str:
    prefixes = list(ALLOWED)
    matches = [p for p in prefixes if name == p or name.startswith(p + ".")]
    assert matches, f"{name} is in no room"
    return max(matches, key=len)


def graph() -> dict[str, set[str]]:
    return {
        name: {target for _, target in imports(name, path) if target != name}
        for name, path in MODULES.items()
    }


def test_every_import_goes_down_the_rooms() -> None:
    wrong = []
    for name, path in MODULES.items():
        home = room(name)
        allowed = ALLOWED[home]
        for line, target in imports(name, path):
            if target == name:
                continue
            if not any(target == a or target.startswith(a + ".") for a in allowed):
                if home == "relay.tasks" and target in {"relay", "relay.lowlevel"}:
                    continue
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert wrong == []


def test_the_core_never_imports_a_shell() -> None:
    core = [name for name in MODULES if room(name) in {"relay._base", "relay._core"}]
    reached = {target for name in core for _, target in imports(name, MODULES[name])}
    assert [t for t in reached if room(t) in SHELLS or room(t) == "relay.tasks"] == []


def test_no_module_imports_itself_back() -> None:
    edges = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in edges:
        if node not in index:
            connect(node)
    assert cycles == []


def room_graph() -> dict[str, set[str]]:
    """Which rooms each room imports (itself left out)."""
    rooms: dict[str, set[str]] = {home: set() for home in ALLOWED}
    for name, targets in graph().items():
        rooms[room(name)] |= {room(target) for target in targets} - {room(name)}
    return rooms


def test_no_room_imports_another_that_imports_it_back() -> None:
    """The rooms, shells included, form no cycle: each is below or above each other."""
    edges = room_graph()
    cycles = []
    for start in edges:
        # Every room reachable from ``start``; a cycle when ``start`` is among them.
        seen: set[str] = set()
        todo = list(edges[start])
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo += edges.get(node, ())
        if start in seen:
            cycles.append(start)
    assert cycles == []


def test_the_rule_of_rooms_has_no_cycle() -> None:
    """What the table allows has no cycle either, so a change that follows it adds none."""
    edges = {home: {room(a) for a in allowed} - {home} for home, allowed in ALLOWED.items()}
    order: list[str] = []
    while edges:
        free = sorted(home for home, below in edges.items() if below <= set(order))
        assert free, f"the rooms {sorted(edges)} allow a cycle"
        order += free
        for home in free:
            del edges[home]


def test_no_module_is_long() -> None:
    """No module of any room, the shells and relay.tasks included, is over MODULE_LINES."""
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in MODULES.values()
    }
    assert {path for path, lines in sizes.items() if lines > MODULE_LINES} == set()


#: Private names a class is given to be called from its own module: ``Cls._create`` makes an
#: object that has no public constructor (:class:`relay._base._util.NoPublicConstructor`).
PROTOCOL_PRIVATES = {"_create"}


def private_reaches(path: Path) -> list[str]:
    """``other._name`` where ``_name`` is nothing this module defines: a reach into another
    module's privates (``self._x`` and ``cls._x`` are the object's own)."""
    tree = parsed(path)
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in {"self", "cls"}:
                own.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            own.add(node.target.id)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls", "os"})
            and node.attr not in own
            and node.attr not in PROTOCOL_PRIVATES
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def private_imports(name: str, path: Path) -> list[str]:
    """``from relay.x import _name`` where ``_name`` is no module: a private of another module
    imported by name."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(parsed(path)):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            source = ".".join([*base, node.module] if node.module else base)
        else:
            source = node.module or ""
        if source.split(".")[0] != "relay":
            continue
        for alias in node.names:
            private = alias.name.startswith("_") and not alias.name.startswith("__")
            if private and f"{source}.{alias.name}" not in MODULES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {source}.{alias.name}")
    return found


def test_nothing_reaches_into_another_modules_privates() -> None:
    """In every room, shells included: no ``other._name`` and no ``from x import _name``."""
    reaches = [reach for path in MODULES.values() for reach in private_reaches(path)]
    reaches += [found for name, path in MODULES.items() for found in private_imports(name, path)]
    assert reaches == []


def test_tasks_use_the_public_api_alone() -> None:
    """A module under ``tasks/`` imports no private relay module and names no private
    attribute of a relay object: relay's own tasks are written as an embedder's are."""
    offenders = []
    for name, path in MODULES.items():
        if room(name) != "relay.tasks":
            continue
        for line, target in imports(name, path):
            if any(part.startswith("_") for part in target.split(".")) and not target.startswith(
                "relay.tasks"
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
        offenders += private_reaches(path)
    assert offenders == []


def test_the_task_kinds_are_never_compared_by_the_runtime() -> None:
    """The session never asks which kind of task it runs (docs/architecture.md)."""
    offenders = []
    for name, path in MODULES.items():
        if room(name) not in {"relay._core"}:
            continue
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Compare) and "task.kind" in ast.unparse(node):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_the_repository_has_no_symlinks() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert [line for line in listed.splitlines() if line.startswith("120000")] == []


#: The rooms whose tests have a folder of their own, named as the room: the tests mirror the
#: code they test. (The face ``relay._open`` is tested through the sessions it opens, the pages'
#: HTML through the pages; ``reliability`` and ``real_server`` test the whole.)
TESTED_ROOMS = (
    "base",
    "exec",
    "core",
    "models",
    "wire",
    "mcp",
    "otel",
    "rollout",
    "cli",
    "appserver",
    "drive",
    "eval",
    "cluster",
    "testing",
    "tasks",
)


def test_the_tests_mirror_the_rooms() -> None:
    folders = {path.name for path in (ROOT / "tests").iterdir() if (path / "__init__.py").exists()}
    assert set(TESTED_ROOMS) <= folders
    assert folders - set(TESTED_ROOMS) <= {"reliability", "real_server"}
    rooms = {name.split(".")[-1].lstrip("_") for name in ALLOWED}
    assert set(TESTED_ROOMS) - {"tasks"} <= rooms
