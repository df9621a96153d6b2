"""Patches in Codex's format: reading, planning and writing are plain functions. A patch made
by a differ from one tree of files to another turns the first into the second, planned and
written; a patch that does not apply changes nothing."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay._exec._patch import (
    Chunk,
    FileEdit,
    Hunk,
    PatchError,
    apply_changes,
    file_diff,
    find_lines,
    parse_patch,
    patch_summary,
    plan_patch,
    read_text,
    unified_diff,
)
from tests.hypothesis_profiles import examples

ROOT = "/w"


def patch(*body: str) -> str:
    return "*** Begin Patch\n" + "".join(body) + "*** End Patch\n"


def planned(text: str, files: dict[str, str]) -> dict[str, str]:
    """The tree ``files`` (paths relative to ROOT) after ``text``, planned."""
    edits = plan_patch(parse_patch(text), ROOT, lambda path: files.get(path[len(ROOT) + 1 :]))
    tree = dict(files)
    for edit in edits:
        name = edit.path[len(ROOT) + 1 :]
        tree.pop(name, None)
        if edit.new is not None:
            tree[(edit.move_path or edit.path)[len(ROOT) + 1 :]] = edit.new
    return tree


# ----------------------------------------------------------------------------- reading


def test_every_kind_of_hunk_is_read() -> None:
    hunks = parse_patch(
        patch(
            "*** Add File: a.txt\n+one\n+two\n",
            "*** Delete File: b.txt\n",
            "*** Update File: c.txt\n*** Move to: d.txt\n@@ def f():\n x\n-y\n+z\n",
            "@@\n-last\n+LAST\n*** End of File\n",
        )
    )
    assert hunks == (
        Hunk("add", "a.txt", ("one", "two")),
        Hunk("delete", "b.txt"),
        Hunk(
            "update",
            "c.txt",
            move_to="d.txt",
            chunks=(
                Chunk("def f():", ("x", "y"), ("x", "z")),
                Chunk(None, ("last",), ("LAST",), at_end=True),
            ),
        ),
    )


def test_a_patch_in_a_heredoc_or_with_spaces_around_is_read() -> None:
    body = "*** Add File: a\n+x\n"
    assert parse_patch(f"<<'EOF'\n{patch(body)}EOF\n") == parse_patch(patch(body))
    assert parse_patch(f"\n  {patch(body)}  \n") == parse_patch(patch(body))
    # The first chunk of an update may start without its "@@".
    assert parse_patch(patch("*** Update File: a\n-x\n+y\n"))[0].chunks == (
        Chunk(None, ("x",), ("y",)),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "line 1: a patch starts with '*** Begin Patch'"),
        ("*** Begin Patch\n*** Add File: a\n+x\n", "a patch ends with '*** End Patch'"),
        (patch("*** Frobnicate: a\n"), "line 2: expected '*** Add File:'"),
        (patch("*** Update File: a\n@@\n?x\n"), "line 4: a chunk's line starts with"),
        (patch("*** Add File: \n"), "line 2: *** Add File: needs a path"),
        (patch(), "the patch changes no file"),
    ],
)
def test_what_is_not_a_patch_is_refused_naming_where(text: str, message: str) -> None:
    with pytest.raises(PatchError, match=message.replace("*", r"\*")):
        parse_patch(text)


# ----------------------------------------------------------------------------- planning


def test_lines_are_found_exactly_then_more_loosely() -> None:
    lines = ["a  ", "  b", "say \u201chi\u201d \u2014 ok"]
    assert find_lines(lines, ["a  "], 0, at_end=False) == 0
    assert find_lines(lines, ["a"], 0, at_end=False) == 0  # trailing spaces
    assert find_lines(lines, ["b"], 0, at_end=False) == 1  # spaces around
    assert find_lines(lines, ['say "hi" - ok'], 0, at_end=False) == 2  # punctuation
    assert find_lines(lines, ["c"], 0, at_end=False) == -1
    assert find_lines(["x", "y", "x"], ["x"], 0, at_end=True) == 2


def test_an_update_applies_chunks_in_order_and_at_the_end() -> None:
    files = {"f.py": "def f():\n    return 1\n\ndef g():\n    return 1\n"}
    text = patch(
        "*** Update File: f.py\n@@ def g():\n-    return 1\n+    return 2\n*** End of File\n"
    )
    assert planned(text, files) == {"f.py": "def f():\n    return 1\n\ndef g():\n    return 2\n"}


def test_a_hunk_that_does_not_apply_says_which_file_and_lines() -> None:
    files = {"a": "one\n", "b": "two\n"}
    text = patch("*** Update File: a\n-one\n+1\n", "*** Update File: b\n-three\n+3\n")
    with pytest.raises(PatchError, match="b: chunk 1: these lines are not in the file") as caught:
        planned(text, files)
    assert "  three" in str(caught.value)
    with pytest.raises(PatchError, match="a: cannot add a file that exists"):
        planned(patch("*** Add File: a\n+x\n"), files)
    with pytest.raises(PatchError, match="c: cannot delete a file that does not exist"):
        planned(patch("*** Delete File: c\n"), files)
    with pytest.raises(PatchError, match="b: cannot move onto a file that exists"):
        planned(patch("*** Update File: a\n*** Move to: b\n-one\n+1\n"), files)


def test_the_summary_and_the_diffs_say_what_changed() -> None:
    edits = (
        FileEdit("update", "/w/a", "1\n2\n", "1\n3\n"),
        FileEdit("add", "/w/n", None, "x\n"),
        FileEdit("update", "/w/o", "k\n", "k\n", move_path="/w/m"),
    )
    assert patch_summary(edits, "/w").splitlines()[1:] == ["A n", "M a", "M m"]
    assert file_diff(edits[0]) == "@@ -1,2 +1,2 @@\n 1\n-2\n+3\n"
    whole = unified_diff(edits, "/w")
    assert "--- a/a\n+++ b/a\n" in whole and "--- /dev/null\n+++ b/n\n" in whole
    assert "diff --git a/o b/m\n" in whole


# ----------------------------------------------------------------------------- the differ


names = st.sampled_from(["a.txt", "b.txt", "src/c.py", "src/d.py", "e"])
# Few distinct lines, so that context repeats and a chunk must be found where it belongs.
texts = st.lists(st.sampled_from(["x", "y", "z", "", "  x", "def f():", "return 1"]), max_size=12)
trees = st.dictionaries(names, texts.map(lambda lines: "".join(f"{line}\n" for line in lines)))


def diff_patch(before: dict[str, str], after: dict[str, str]) -> str:
    """A patch from ``before`` to ``after``, made by difflib: whole-file chunks with context,
    anchored at the end of the file when they reach it."""
    body: list[str] = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        if old is None:
            body.append(f"*** Add File: {name}\n")
            body += [f"+{line}\n" for line in (new or "").splitlines()]
        elif new is None:
            body.append(f"*** Delete File: {name}\n")
        else:
            body.append(f"*** Update File: {name}\n")
            a, b = old.splitlines(), new.splitlines()
            matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
            for group in matcher.get_grouped_opcodes(3):
                body.append("@@\n")
                for tag, i1, i2, j1, j2 in group:
                    if tag == "equal":
                        body += [f" {line}\n" for line in a[i1:i2]]
                    if tag in ("replace", "delete"):
                        body += [f"-{line}\n" for line in a[i1:i2]]
                    if tag in ("replace", "insert"):
                        body += [f"+{line}\n" for line in b[j1:j2]]
                if group[-1][2] == len(a):
                    body.append("*** End of File\n")
    return patch(*body)


@settings(max_examples=examples(150), deadline=None)
@given(trees, trees)
def test_a_differs_patch_turns_one_tree_into_the_other(
    before: dict[str, str], after: dict[str, str]
) -> None:
    if before == after:
        return
    assert planned(diff_patch(before, after), before) == after


@settings(max_examples=examples(60), deadline=None)
@given(trees, trees)
def test_written_it_turns_a_real_tree_into_the_other(
    tmp_path_factory: pytest.TempPathFactory, before: dict[str, str], after: dict[str, str]
) -> None:
    if before == after:
        return
    root = tmp_path_factory.mktemp("tree")
    for name, text in before.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    edits = plan_patch(parse_patch(diff_patch(before, after)), str(root), read_text)
    apply_changes(edits)
    found = {
        str(path.relative_to(root)): path.read_text() for path in root.rglob("*") if path.is_file()
    }
    assert found == after


# ----------------------------------------------------------------------------- writing


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_write_that_fails_midway_changes_no_file(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("one\n")
    (tmp_path / "blocked").mkdir()
    (tmp_path / "blocked" / "x").write_text("keep\n")
    before = snapshot(tmp_path)
    edits = (
        FileEdit("update", str(tmp_path / "a"), "one\n", "ONE\n"),
        # The second write cannot happen: its target is a folder.
        FileEdit("add", str(tmp_path / "blocked"), None, "x\n"),
    )
    with pytest.raises(OSError):
        apply_changes(edits)
    assert snapshot(tmp_path) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".relay-patch-")]


def test_a_file_changed_since_the_plan_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("one\n")
    edits = plan_patch(
        parse_patch(patch("*** Update File: a\n-one\n+1\n")), str(tmp_path), read_text
    )
    (tmp_path / "a").write_text("someone else's\n")
    with pytest.raises(PatchError, match="changed since the patch was read"):
        apply_changes(edits)
    assert (tmp_path / "a").read_text() == "someone else's\n"


def test_a_file_that_is_not_text_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(PatchError, match="is not UTF-8 text"):
        read_text(str(tmp_path / "bin"))
