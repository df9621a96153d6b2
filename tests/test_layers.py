"""The architecture, checked on the source (docs/architecture.md): the rooms and the imports
between them, no cycle, small core modules, no reach into another module's privates, tasks on
the public API alone, and a repository without links."""

from __future__ import annotations

import ast
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
    "relay._core": ("relay._base", "relay._core", "relay._version"),
    "relay._models": ("relay._base", "relay._core", "relay._models"),
    "relay._wire": ("relay._base", "relay._core", "relay._models", "relay._wire"),
    "relay._mcp": ("relay._base", "relay._core", "relay._mcp", "relay._version"),
    "relay._otel": ("relay._base", "relay._core", "relay._otel", "relay._version"),
    "relay._rollout": ("relay._base", "relay._core", "relay._rollout"),
    "relay._open": (
        "relay._base",
        "relay._core",
        "relay._models",
        "relay._wire",
        "relay._mcp",
        "relay._otel",
        "relay._open",
        "relay._rollout",
    ),
    "relay.lowlevel": ("relay._base", "relay._core"),
    "relay.tasks": ("relay", "relay.lowlevel", "relay.tasks"),
}
#: The shells: they import the rooms below, and the core never imports them.
SHELLS = (
    "relay._cli",
    "relay._drive",
    "relay._eval",
    "relay._cluster",
    "relay._testing",
    "relay.testing",
    "relay.cluster",
    "relay.__main__",
)
#: The package's face re-exports the ground floor, the core, the face and the resume.
ALLOWED["relay"] = (
    "relay._base",
    "relay._core",
    "relay._open",
    "relay._rollout",
    "relay._version",
    "relay.lowlevel",
)

CORE_MODULE_LINES = 600


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


def imports(name: str, path: Path) -> Iterator[tuple[int, str]]:
    """Every module of relay that ``name`` imports (anywhere in it, lazily or not, and under
    ``TYPE_CHECKING`` too), with its line."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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
    prefixes = [*ALLOWED, *SHELLS]
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
        if home in SHELLS:
            continue
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


def test_core_modules_are_small() -> None:
    core = [path for name, path in MODULES.items() if room(name) in {"relay._base", "relay._core"}]
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in core}
    assert {path: n for path, n in sizes.items() if n > CORE_MODULE_LINES} == {}


#: Private names a class is given to be called from its own module: ``Cls._create`` makes an
#: object that has no public constructor (:class:`relay._base._util.NoPublicConstructor`).
PROTOCOL_PRIVATES = {"_create"}


def private_reaches(path: Path) -> list[str]:
    """``other._name`` where ``_name`` is nothing this module defines: a reach into another
    module's privates (``self._x`` and ``cls._x`` are the object's own)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
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


def test_nothing_reaches_into_another_modules_privates() -> None:
    assert [reach for path in MODULES.values() for reach in private_reaches(path)] == []


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
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and "task.kind" in ast.unparse(node):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_the_repository_has_no_symlinks() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert [line for line in listed.splitlines() if line.startswith("120000")] == []
