"""Project instructions as Codex finds them: every ``AGENTS.md`` from the git root down to the
working directory, root first, joined as Codex joins them and bounded by
``project_doc_max_bytes`` (docs/session.md, docs/config.md).

The expected texts below are what the real Codex 0.169 sent (``codex exec`` against a loopback
server, the same trees): its user message is ``# AGENTS.md instructions for CWD``, a blank
line, then the joined texts between ``<INSTRUCTIONS>`` lines. relay sends the same joined text
(with its trailing white space stripped, as relay always did) in its ``<project_instructions>``
message.
"""

from __future__ import annotations

import itertools
import json
import os
import posixpath
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay import testing
from relay._base import _protocol as p
from relay._base._config import (
    DEFAULT_PROJECT_DOC_MAX_BYTES,
    Config,
    RolloutConfig,
    config_from_dict,
)
from relay._base._errors import ConfigError
from relay._core._context import (
    FoundDoc,
    bound_project_docs,
    join_project_docs,
    project_doc_dirs,
    read_project_doc,
)

ROOT_TEXT = "# Root rules\nUse tabs.\n"
SUB_TEXT = "Sub rules: run make test.\n\n"

#: What Codex 0.169 put between its ``<INSTRUCTIONS>`` lines for the tree of :func:`repo`.
CODEX_JOINED = "# Root rules\nUse tabs.\n\n\nSub rules: run make test.\n\n"
#: The same, with ``project_doc_max_bytes = 30`` and ``= 23``.
CODEX_AT_30 = "# Root rules\nUse tabs.\n\n\nSub rul"
CODEX_AT_23 = "# Root rules\nUse tabs.\n"


def repo(base: Path, *, git_file: bool = False) -> Path:
    """``base/repo`` (a git root) with an ``AGENTS.md`` at its root and in ``sub``, one more
    outside the repository, and no file in ``sub/deeper``."""
    root = base / "repo"
    (root / "sub" / "deeper").mkdir(parents=True)
    if git_file:
        (root / ".git").write_text("gitdir: /elsewhere/.git/worktrees/repo\n")
    else:
        (root / ".git").mkdir()
    (base / "AGENTS.md").write_text("Outside the repository.\n")
    (root / "AGENTS.md").write_text(ROOT_TEXT)
    (root / "sub" / "AGENTS.md").write_text(SUB_TEXT)
    return root


# ----------------------------------------------------------------------------- which files


def marked(*roots: str) -> set[str]:
    return set(roots)


def test_the_directories_run_from_the_git_root_down_to_the_working_directory() -> None:
    has_git = marked("/home/me/repo").__contains__
    assert project_doc_dirs("/home/me/repo/a/b", has_git) == [
        "/home/me/repo",
        "/home/me/repo/a",
        "/home/me/repo/a/b",
    ]
    assert project_doc_dirs("/home/me/repo", has_git) == ["/home/me/repo"]
    # The nearest root wins (a repository inside another one).
    nested = marked("/home/me/repo", "/home/me/repo/vendor/lib").__contains__
    assert project_doc_dirs("/home/me/repo/vendor/lib/src", nested) == [
        "/home/me/repo/vendor/lib",
        "/home/me/repo/vendor/lib/src",
    ]


def test_without_a_git_root_only_the_working_directory_counts() -> None:
    assert project_doc_dirs("/home/me/notes/today", marked().__contains__) == [
        "/home/me/notes/today"
    ]
    # As in Codex, the file system root is never taken for a git root.
    assert project_doc_dirs("/srv/app", marked("/").__contains__) == ["/srv/app"]


_names = st.text("abc", min_size=1, max_size=3)


@given(st.lists(_names, min_size=0, max_size=6), st.sets(st.integers(0, 6)))
def test_the_directories_are_the_chain_from_the_nearest_root(
    parts: list[str], rooted: set[int]
) -> None:
    # Directory k is "/" + the first k parts; those in ``rooted`` have a .git (never "/").
    chain = ["/" + "/".join(parts[:k]) if k else "/" for k in range(len(parts) + 1)]
    roots = {chain[k] for k in rooted if 0 < k <= len(parts)}
    cwd = chain[-1]
    dirs = project_doc_dirs(cwd, roots.__contains__)
    assert dirs[-1] == cwd
    below = [d for d in chain if d in roots]
    if below:
        # From the deepest root to the cwd, each the parent of the next.
        assert dirs[0] == below[-1]
        assert all(posixpath.dirname(child) == parent for parent, child in itertools.pairwise(dirs))
        assert not any(d in roots for d in dirs[1:])
    else:
        assert dirs == [cwd]


# ----------------------------------------------------------------------------- joined, bounded


def found(*texts: bytes) -> list[FoundDoc]:
    return [FoundDoc(f"/r/{n}/AGENTS.md", t, len(t), f"{n}") for n, t in enumerate(texts)]


def test_the_texts_are_joined_as_codex_joins_them() -> None:
    kept, warnings = bound_project_docs(found(ROOT_TEXT.encode(), SUB_TEXT.encode()), 32768)
    assert warnings == []
    assert join_project_docs(kept) == ("/r/0/AGENTS.md, /r/1/AGENTS.md", CODEX_JOINED)


@pytest.mark.parametrize(("bound", "codex"), [(30, CODEX_AT_30), (23, CODEX_AT_23)])
def test_the_bound_cuts_as_codex_cuts(bound: int, codex: str) -> None:
    kept, warnings = bound_project_docs(found(ROOT_TEXT.encode(), SUB_TEXT.encode()), bound)
    joined = join_project_docs(kept)
    assert joined is not None and joined[1] == codex
    if bound == 30:
        assert warnings == [
            "project instructions 1 cut to 7 of its 27 bytes (project_doc_max_bytes = 30)"
        ]


def test_white_space_only_files_take_nothing_and_a_zero_bound_reads_nothing() -> None:
    kept, _ = bound_project_docs(found(b"  \n\n", b"ab", b"\t\n", b"cd"), 4)
    assert [text for _, text in kept] == ["ab", "cd"]
    assert bound_project_docs(found(b"ab"), 0) == ([], [])
    assert join_project_docs([]) is None


def test_a_cut_never_splits_a_character_and_bad_bytes_leave_a_file_out() -> None:
    kept, _ = bound_project_docs(found("é".encode() * 3), 5)
    assert [text for _, text in kept] == ["éé"]
    kept, warnings = bound_project_docs(found(b"ok \xff", b"next"), 100)
    assert [text for _, text in kept] == ["next"]
    assert warnings == ["project instructions 0 left out: not UTF-8 (byte 0xff at offset 3)"]
    # The bad byte past the bound is not read: what is kept is valid.
    kept, _ = bound_project_docs(found(b"ok \xff"), 3)
    assert [text for _, text in kept] == ["ok "]


@given(st.lists(st.text(max_size=40), max_size=6), st.integers(0, 120))
def test_the_bound_holds_and_the_order_stays(texts: list[str], bound: int) -> None:
    docs = found(*(t.encode() for t in texts))
    kept, _ = bound_project_docs(docs, bound)
    assert sum(len(text.encode()) for _, text in kept) <= bound
    # Files keep their order, and each text is the start of its file.
    positions = [int(path.split("/")[2]) for path, _ in kept]
    assert positions == sorted(set(positions))
    for (_, text), n in zip(kept, positions, strict=True):
        assert texts[n].startswith(text) and text.strip()
    # Nothing is cut when everything fits.
    if sum(len(t.encode()) for t in texts if t.strip()) <= bound:
        assert [text for _, text in kept] == [t for t in texts if t.strip()]


# ----------------------------------------------------------------------------- on disk


@pytest.mark.parametrize("git_file", [False, True])
def test_the_files_from_the_git_root_down_are_read(tmp_path: Path, git_file: bool) -> None:
    root = repo(tmp_path, git_file=git_file)
    for cwd in (root / "sub", root / "sub" / "deeper"):
        assert read_project_doc(str(cwd), "AGENTS.md") == (
            f"{root / 'AGENTS.md'}, {root / 'sub' / 'AGENTS.md'}",
            CODEX_JOINED,
        )
    assert read_project_doc(str(root), "AGENTS.md") == (str(root / "AGENTS.md"), ROOT_TEXT)
    assert read_project_doc(str(root / "sub"), "AGENTS.md", max_bytes=30) == (
        f"{root / 'AGENTS.md'}, {root / 'sub' / 'AGENTS.md'}",
        CODEX_AT_30,
    )
    assert read_project_doc(str(root / "sub"), "AGENTS.md", max_bytes=0) is None


def test_outside_a_repository_the_working_directory_alone_is_read(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "AGENTS.md").write_text("top\n")
    (tmp_path / "x" / "AGENTS.md").write_text("x doc\n")
    assert read_project_doc(str(tmp_path / "x"), "AGENTS.md") == (
        str(tmp_path / "x" / "AGENTS.md"),
        "x doc\n",
    )


def test_warnings_name_a_file_above_the_working_directory_relative_to_it(
    tmp_path: Path,
) -> None:
    root = repo(tmp_path)
    (root / "AGENTS.md").write_bytes(b"\xe9t\xe9")
    warnings: list[str] = []
    assert read_project_doc(str(root / "sub"), "AGENTS.md", warn=warnings.append) == (
        str(root / "sub" / "AGENTS.md"),
        SUB_TEXT,
    )
    assert warnings == [
        f"project instructions {os.path.join('..', 'AGENTS.md')} left out: not UTF-8 "
        "(byte 0xe9 at offset 0)"
    ]


async def test_a_session_sends_the_joined_instructions_in_one_message(tmp_path: Path) -> None:
    root = repo(tmp_path)
    config = Config(cwd=str(root / "sub"), rollout=RolloutConfig(enabled=False))
    async with testing.open_test_session({"responses": [{"text": "hi"}]}, config=config) as t:
        await t.turn("hello")
        await t.wait_for(testing.turn_ended)
    request = json.dumps(t.model.requests[0], default=list)
    assert "Outside the repository" not in request
    messages = [
        item
        for item in t.session.history.items
        if isinstance(item, p.Message) and "<project_instructions" in item.text()
    ]
    assert [m.text() for m in messages] == [
        f'<project_instructions path="{root / "AGENTS.md"}, {root / "sub" / "AGENTS.md"}">\n'
        f"{CODEX_JOINED.rstrip()}\n</project_instructions>"
    ]


# ----------------------------------------------------------------------------- the key


def test_the_bound_is_a_key_with_codexs_default() -> None:
    assert Config().project_doc_max_bytes == DEFAULT_PROJECT_DOC_MAX_BYTES == 32 * 1024
    assert config_from_dict({"project_doc_max_bytes": 0}).project_doc_max_bytes == 0
    with pytest.raises(ConfigError, match="project_doc_max_bytes must be >= 0, got -1"):
        config_from_dict({"project_doc_max_bytes": -1})
