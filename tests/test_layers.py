"""The package boundaries, checked on the source: what imports what, and who reaches where."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sources(package: str) -> list[Path]:
    """The package's own files (``runtime/tasks`` is a link to the task package)."""
    top = ROOT / package
    return sorted(path for path in top.rglob("*.py") if path.resolve().is_relative_to(top))


def test_the_session_core_never_imports_tasks_at_module_level() -> None:
    offenders = []
    for path in sources("runtime"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.ImportFrom) and node.level == 1:
                names = [f"relay.{node.module or alias.name}" for alias in node.names]
            if any(name == "relay.tasks" or name.startswith("relay.tasks.") for name in names):
                offenders.append(path.name)
    assert offenders == []


def test_tasks_reach_the_session_only_through_their_context() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in sources("tasks")
        if "ctx.session" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []


def test_runtime_never_compares_task_kinds() -> None:
    offenders = []
    for path in sources("runtime"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare | ast.MatchValue) and "TaskKind." in ast.unparse(node):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
