"""Patches behave as Codex's do where a model can tell: where lines that replace nothing go,
the summary the model reads, blank lines between chunks, typographic spaces; and written, a
patch keeps what it does not name (line ends, modes, links) and leaves nothing behind when it
fails (docs/tools.md, ``apply_patch``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay._exec._patch import (
    FileEdit,
    PatchError,
    apply_changes,
    parse_patch,
    patch_summary,
    plan_patch,
    read_text,
)
from tests.hypothesis_profiles import examples


def patch(*body: str) -> str:
    return "*** Begin Patch\n" + "".join(body) + "*** End Patch\n"


def planned_text(text: str, before: str) -> str | None:
    (edit,) = plan_patch(parse_patch(text), "/w", lambda path: before)
    return edit.new


def write(root: Path, text: str) -> None:
    """Plan ``text`` against the files under ``root`` and write it."""
    apply_changes(plan_patch(parse_patch(text), str(root), read_text))


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# ----------------------------------------------------------------------------- planning


@pytest.mark.parametrize("head", ["@@\n", "@@ def f():\n"])
def test_lines_that_replace_nothing_go_at_the_end_of_the_file(head: str) -> None:
    text = patch(f"*** Update File: f.py\n{head}+# the end\n")
    assert planned_text(text, "def f():\n    pass\n") == "def f():\n    pass\n# the end\n"


def test_moving_a_file_onto_its_own_place_updates_it(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    edits = plan_patch(
        parse_patch(patch("*** Update File: a.txt\n*** Move to: ./a.txt\n@@\n-one\n+two\n")),
        str(tmp_path),
        read_text,
    )
    assert [(e.kind, e.move_path) for e in edits] == [("update", None)]
    apply_changes(edits)
    assert snapshot(tmp_path) == {"a.txt": b"two\n"}


def test_blank_lines_between_chunks_are_read_as_separators() -> None:
    text = patch(
        "*** Update File: f\n\n@@\n-x\n+X\n*** End of File\n\n",
        "*** Update File: g\n@@\n-y\n+Y\n",
    )
    hunks = parse_patch(text)
    assert [len(h.chunks) for h in hunks] == [1, 1]


def test_typographic_dashes_and_spaces_match_their_ascii_forms() -> None:
    before = "a\u2015b\nc\u3000d\ne\u2007f\n"
    text = patch("*** Update File: f\n@@\n-a-b\n-c d\n-e f\n+done\n")
    assert planned_text(text, before) == "done\n"


def test_a_file_whose_lines_end_in_crlf_keeps_them() -> None:
    text = patch("*** Update File: f\n@@\n one\n-two\n+TWO\n")
    assert planned_text(text, "one\r\ntwo\r\nthree\r\n") == "one\r\nTWO\r\nthree\r\n"


def test_the_summary_lists_adds_then_updates_then_deletes_as_codex_does() -> None:
    edits = (
        FileEdit("delete", "/w/gone.txt", "x\n", None),
        FileEdit("update", "/w/a.txt", "1\n", "2\n"),
        FileEdit("add", "/w/src/new.py", None, "x\n"),
        FileEdit("update", "/w/old.txt", "k\n", "k\n", move_path="/w/moved.txt"),
        FileEdit("add", "/elsewhere/n.txt", None, "x\n"),
    )
    assert patch_summary(edits, "/w") == (
        "Patch applied. Files changed:\n"
        "A src/new.py\n"
        "A /elsewhere/n.txt\n"
        "M a.txt\n"
        "M moved.txt\n"
        "D gone.txt\n"
    )


# ----------------------------------------------------------------------------- writing


def test_only_the_lines_a_patch_names_change_on_disk(tmp_path: Path) -> None:
    (tmp_path / "dos.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    write(tmp_path, patch("*** Update File: dos.txt\n@@\n-two\n+TWO\n"))
    assert (tmp_path / "dos.txt").read_bytes() == b"one\r\nTWO\r\nthree\r\n"


def test_a_new_file_gets_the_umasks_mode_and_a_moved_one_keeps_its_own(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("echo 1\n")
    script.chmod(0o750)
    previous = os.umask(0o027)
    try:
        write(
            tmp_path,
            patch(
                "*** Add File: new.txt\n+x\n",
                "*** Update File: run.sh\n*** Move to: bin/run.sh\n@@\n-echo 1\n+echo 2\n",
            ),
        )
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "bin" / "run.sh").stat().st_mode) == 0o750


def test_an_update_through_a_link_changes_the_file_it_names(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("one\n")
    (tmp_path / "link.txt").symlink_to("real.txt")
    write(tmp_path, patch("*** Update File: link.txt\n@@\n-one\n+two\n"))
    assert (tmp_path / "link.txt").is_symlink()
    assert (tmp_path / "real.txt").read_text() == "two\n"


def test_a_write_that_fails_leaves_no_file_or_folder_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "b.txt").write_text("one\n")
    before = snapshot(tmp_path)
    replace = os.replace

    def refused(source: str, target: str) -> None:
        if target.endswith("b.txt"):
            raise PermissionError(target)
        replace(source, target)

    # The rename of the second file is refused once the first is in place.
    monkeypatch.setattr(os, "replace", refused)
    with pytest.raises(PermissionError):
        write(
            tmp_path, patch("*** Add File: new/deep/a.txt\n+x\n", whole("b.txt", "one\n", "two\n"))
        )
    assert snapshot(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.txt"]


# ----------------------------------------------------------------------------- properties

names = st.sampled_from(["a.txt", "b.txt", "src/c.py", "src/d.py"])
# A few distinct lines, so that context repeats.
texts = st.lists(st.sampled_from(["x", "y", "z", "", "  x", "def f():"]), min_size=1, max_size=8)
trees = st.dictionaries(
    names, texts.map(lambda lines: "".join(f"{line}\n" for line in lines)), min_size=1
)


def make(root: Path, tree: dict[str, str]) -> None:
    for name, text in tree.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def whole(name: str, old: str, new: str, move_to: str | None = None) -> str:
    """An update of ``name`` that replaces all of ``old`` with ``new``."""
    moved = f"*** Move to: {move_to}\n" if move_to else ""
    lines = [f"-{line}\n" for line in old.splitlines()] + [
        f"+{line}\n" for line in new.splitlines()
    ]
    return f"*** Update File: {name}\n{moved}@@\n" + "".join(lines)


@settings(max_examples=examples(60), deadline=None)
@given(trees, st.data())
def test_a_patch_with_one_hunk_that_does_not_apply_changes_nothing(
    tmp_path_factory: pytest.TempPathFactory, tree: dict[str, str], data: st.DataObject
) -> None:
    root = tmp_path_factory.mktemp("tree")
    make(root, tree)
    before = snapshot(root)
    good = [whole(name, text, text.upper() or "X\n") for name, text in sorted(tree.items())]
    good.append("*** Add File: added/new.txt\n+new\n")
    victim = data.draw(st.sampled_from(sorted(tree)))
    bad = f"*** Update File: {victim}\n@@\n-not in any file\n+x\n"
    at = data.draw(st.integers(0, len(good)))
    with pytest.raises(PatchError) as caught:
        write(root, patch(*good[:at], bad, *good[at:]))
    assert victim in str(caught.value) and "not in any file" in str(caught.value)
    assert snapshot(root) == before
    assert not (root / "added").exists()


@settings(max_examples=examples(60), deadline=None)
@given(trees, st.data())
def test_a_move_or_a_delete_and_its_reverse_give_back_the_tree(
    tmp_path_factory: pytest.TempPathFactory, tree: dict[str, str], data: st.DataObject
) -> None:
    root = tmp_path_factory.mktemp("tree")
    make(root, tree)
    before = snapshot(root)
    name = data.draw(st.sampled_from(sorted(tree)))
    text = tree[name]
    if data.draw(st.booleans()):
        there = "moved/" + name
        write(root, patch(whole(name, text, "changed\n", move_to=there)))
        assert not (root / name).exists() and (root / there).read_text() == "changed\n"
        write(root, patch(whole(there, "changed\n", text, move_to=name)))
    else:
        write(root, patch(f"*** Delete File: {name}\n"))
        assert not (root / name).exists()
        write(root, patch(f"*** Add File: {name}\n", *[f"+{line}\n" for line in text.splitlines()]))
    assert snapshot(root) == before
