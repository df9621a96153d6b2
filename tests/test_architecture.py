"""docs/architecture.md, checked against the code: its table of rooms is the rule the layers
test enforces, and its two paths follow the imports, file by file."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from relay import _open
from tests.test_layers import ALLOWED, MODULES, ROOT, imports

DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    start = DOC.index(f"### {title}\n")
    end = DOC.find("\n#", start + 4)
    return DOC[start : end if end != -1 else None]


def path_of(entry: str) -> list[str]:
    """The files of a numbered list, in order."""
    return re.findall(r"^\d+\. `([^`]+\.py)`", entry, re.M)


def module_of(path: str) -> str:
    relative = Path(path).relative_to(path.split("/")[0]).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_the_table_of_rooms_is_the_rule_the_layers_test_enforces() -> None:
    rows = re.findall(r"^\| `(relay[\w.]*)` \| [^|]+ \| ([^|]+) \|$", DOC, re.M)
    table = {room: tuple(re.findall(r"`([\w.]+)`", allowed)) for room, allowed in rows}
    rule = {room: allowed for room, allowed in ALLOWED.items() if room != "relay._version"}
    assert {room: set(allowed) for room, allowed in table.items()} == {
        room: set(allowed) for room, allowed in rule.items()
    }


def follows(earlier: str, later: str) -> bool:
    """``later`` is where ``earlier`` goes next: it imports it, or reaches it through the public
    face (a task), or through the task factories the face names (the slot), or it is a module
    of the same package of tasks (a backend the compactor holds)."""
    reached = {target for _, target in imports(earlier, MODULES[earlier])}
    if later in reached:
        return True
    parent = earlier.rpartition(".")[0]
    if earlier.startswith("relay.tasks.") and later.rpartition(".")[0] == parent:
        return True
    faces = {"relay", "relay.lowlevel"}
    if earlier.startswith("relay.tasks") and reached & faces:
        return any(later == target for face in faces for _, target in imports(face, MODULES[face]))
    named = {spec.partition(":")[0] for spec in _open.BUILTIN_TASKS.values()}
    return later.rpartition(".")[0] in named or later in named


def check(files: list[str]) -> None:
    assert files, "the path lists no file"
    for path in files:
        assert (ROOT / path).is_file(), f"{path} does not exist"
    modules = [module_of(path) for path in files]
    for earlier, later in itertools.pairwise(modules):
        assert follows(earlier, later) or follows(later, earlier), f"{earlier} → {later}"


def test_a_user_turn_crosses_seven_files_entering_the_session_once() -> None:
    files = path_of(section("A UserTurn"))
    check(files)
    assert len(files) <= 7
    assert [f for f in files if f.endswith("_core/_session.py")] == [files[0]]


def test_an_auto_compaction_follows_the_imports() -> None:
    check(path_of(section("An auto-compaction")))
