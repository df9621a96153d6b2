"""Patches in Codex's format: read, planned against the files as they are, written whole or not
at all (docs/tools.md, ``apply_patch``).

A patch is::

    *** Begin Patch
    *** Add File: PATH          (then the file's lines, each after a "+")
    *** Delete File: PATH
    *** Update File: PATH
    *** Move to: NEW PATH       (optional)
    @@ A LINE TO FIND FIRST     (optional text; one "@@" per chunk)
     a line kept
    -a line removed
    +a line added
    *** End of File             (optional: the chunk ends the file)
    *** End Patch

Reading (:func:`parse_patch`) and planning (:func:`plan_patch`) are plain functions; planning
reads the files through the function it is given. A chunk's lines are looked for from where
the last one ended, first exactly, then ignoring trailing spaces, then ignoring the spaces
around, then with typographic punctuation taken as ASCII, as models often write it. Writing
(:func:`apply_changes`) puts every file in place or none.
"""

from __future__ import annotations

import difflib
import os
import posixpath
import tempfile
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import attrs

from .._base._errors import RelayError

BEGIN = "*** Begin Patch"
END = "*** End Patch"
_ADD = "*** Add File:"
_DELETE = "*** Delete File:"
_UPDATE = "*** Update File:"
_MOVE = "*** Move to:"
_END_OF_FILE = "*** End of File"

Kind = Literal["add", "delete", "update"]


class PatchError(RelayError):
    """A patch that is not one, or that does not apply; the message says where and why."""


@attrs.frozen
class Chunk:
    """One ``@@`` chunk of an update: the lines it finds and what they become."""

    context: str | None
    """The text after ``@@``: a line to find before the chunk's lines (None: none)."""
    old: tuple[str, ...]
    """The lines kept and removed, in order: what must be found."""
    new: tuple[str, ...]
    """The lines kept and added, in order: what they become."""
    at_end: bool = False
    """The chunk ends the file (``*** End of File``)."""


@attrs.frozen
class Hunk:
    """What a patch does to one file."""

    kind: Kind
    path: str
    """The file, as the patch names it."""
    lines: tuple[str, ...] = ()
    """An added file's lines."""
    move_to: str | None = None
    """Where an updated file moves to."""
    chunks: tuple[Chunk, ...] = ()
    """An update's chunks, in the file's order."""


@attrs.frozen
class FileEdit:
    """One file a planned patch changes: where, and its text before and after."""

    kind: Kind
    path: str
    """The file, absolute."""
    old: str | None
    """Its text now (None: it does not exist)."""
    new: str | None
    """Its text after the patch (None: it is deleted, or moved away)."""
    move_path: str | None = None
    """Where it moves to, absolute."""

    @classmethod
    def between(cls, path: str, old: str | None, new: str | None) -> FileEdit:
        """The edit that turns ``old`` into ``new`` at ``path``."""
        kind: Kind = "add" if old is None else "delete" if new is None else "update"
        return cls(kind, path, old, new)


# ----------------------------------------------------------------------------- reading


def _unwrapped(text: str) -> list[str]:
    lines = text.strip().splitlines()
    # A patch sent as a shell heredoc (<<'EOF' ... EOF) is taken from inside it.
    if (
        len(lines) >= 2
        and lines[0].lstrip().startswith("<<")
        and lines[0].strip().endswith(("EOF", "EOF'", 'EOF"'))
    ):
        lines = lines[1:-1] if lines[-1].strip() == "EOF" else lines[1:]
    return [line.rstrip("\r") for line in lines]


def parse_patch(text: str) -> tuple[Hunk, ...]:
    """The hunks of ``text``, in order.

    Raises:
        PatchError: it is not a patch; the message names the line and what was expected.
    """
    lines = _unwrapped(text)
    if not lines or lines[0].strip() != BEGIN:
        raise PatchError(f"line 1: a patch starts with {BEGIN!r}")
    if lines[-1].strip() != END:
        raise PatchError(f"line {len(lines)}: a patch ends with {END!r}")
    hunks: list[Hunk] = []
    at, last = 1, len(lines) - 1
    while at < last:
        line = lines[at].strip()
        if line.startswith(_ADD):
            added: list[str] = []
            at += 1
            while at < last and lines[at].startswith("+"):
                added.append(lines[at][1:])
                at += 1
            hunks.append(Hunk("add", _path(line, _ADD, at), tuple(added)))
        elif line.startswith(_DELETE):
            hunks.append(Hunk("delete", _path(line, _DELETE, at + 1)))
            at += 1
        elif line.startswith(_UPDATE):
            path = _path(line, _UPDATE, at + 1)
            at += 1
            move_to = None
            if at < last and lines[at].strip().startswith(_MOVE):
                move_to = _path(lines[at].strip(), _MOVE, at + 1)
                at += 1
            chunks, at = _chunks(lines, at, last)
            if not chunks:
                raise PatchError(f"line {at + 1}: the update of {path} has no chunk")
            hunks.append(Hunk("update", path, move_to=move_to, chunks=tuple(chunks)))
        elif not line:
            at += 1
        else:
            raise PatchError(
                f"line {at + 1}: expected '*** Add File:', '*** Delete File:' or "
                f"'*** Update File:', found {lines[at][:80]!r}"
            )
    if not hunks:
        raise PatchError("the patch changes no file")
    return tuple(hunks)


def _path(line: str, head: str, number: int) -> str:
    path = line[len(head) :].strip()
    if not path:
        raise PatchError(f"line {number}: {head} needs a path")
    return path


def _is_header(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith((_ADD, _DELETE, _UPDATE)) or stripped == END


def _chunks(lines: list[str], at: int, last: int) -> tuple[list[Chunk], int]:
    """The chunks of an update from line ``at``, and the line after them."""
    chunks: list[Chunk] = []
    while at < last and not _is_header(lines[at]):
        context: str | None = None
        if lines[at].startswith("@@"):
            context = lines[at][2:].strip() or None
            at += 1
        elif chunks:
            raise PatchError(f"line {at + 1}: expected '@@' to start a chunk")
        old: list[str] = []
        new: list[str] = []
        at_end = False
        while at < last and not _is_header(lines[at]) and not lines[at].startswith("@@"):
            line = lines[at]
            at += 1
            if line.strip() == _END_OF_FILE:
                at_end = True
                break
            mark, rest = (line[:1], line[1:]) if line else (" ", "")
            if mark == " ":
                old.append(rest)
                new.append(rest)
            elif mark == "-":
                old.append(rest)
            elif mark == "+":
                new.append(rest)
            else:
                raise PatchError(
                    f"line {at}: a chunk's line starts with ' ', '-' or '+', found {line[:80]!r}"
                )
        chunks.append(Chunk(context, tuple(old), tuple(new), at_end))
    return chunks, at


# ----------------------------------------------------------------------------- planning

_PUNCTUATION = str.maketrans(
    {
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u00a0": " ",
        "\u2009": " ",
        "\u202f": " ",
    }
)

#: How lines are compared, strictest first: a chunk is matched at the first that finds it.
_COMPARISONS: tuple[Callable[[str], str], ...] = (
    lambda line: line,
    str.rstrip,
    str.strip,
    lambda line: unicodedata.normalize("NFC", line).translate(_PUNCTUATION).strip(),
)


def find_lines(lines: Sequence[str], wanted: Sequence[str], start: int, *, at_end: bool) -> int:
    """Where ``wanted`` first appears in ``lines`` from ``start`` (at the end when
    ``at_end``), under the strictest comparison that finds it; -1 when none does."""
    if not wanted:
        return len(lines) if at_end else start
    for same in _COMPARISONS:
        looked = [same(line) for line in wanted]
        found = [same(line) for line in lines]
        places = (
            range(len(lines) - len(wanted), start - 1, -1)
            if at_end
            else range(start, len(lines) - len(wanted) + 1)
        )
        for place in places:
            if found[place : place + len(wanted)] == looked:
                return place
    return -1


def updated_text(path: str, text: str, chunks: Sequence[Chunk]) -> str:
    """``text`` with ``chunks`` applied, in order.

    Raises:
        PatchError: a chunk's lines (or its ``@@`` line) are not in the file after the place
            the chunk before it ended; the message shows them.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's last newline ends its last line; it is put back below
    at = 0
    for number, chunk in enumerate(chunks, start=1):
        if chunk.context is not None:
            found = find_lines(lines, [chunk.context], at, at_end=False)
            if found < 0:
                raise PatchError(
                    f"{path}: chunk {number}: the line {chunk.context!r} after '@@' is not in "
                    "the file"
                )
            at = found + 1
        old = list(chunk.old)
        found = find_lines(lines, old, at, at_end=chunk.at_end)
        if found < 0 and old and old[-1] == "":
            # A chunk that ends on an empty line also matches where the file ends.
            old = old[:-1]
            found = find_lines(lines, old, at, at_end=chunk.at_end)
        if found < 0:
            shown = "\n".join(f"  {line}" for line in chunk.old)
            raise PatchError(
                f"{path}: chunk {number}: these lines are not in the file where expected:\n{shown}"
            )
        new = list(chunk.new)
        if len(old) < len(chunk.old) and new and new[-1] == "":
            new = new[:-1]
        lines[found : found + len(old)] = new
        at = found + len(new)
    return "\n".join(lines) + "\n" if lines else ""


def plan_patch(
    hunks: Sequence[Hunk], cwd: str, read: Callable[[str], str | None]
) -> tuple[FileEdit, ...]:
    """What ``hunks`` do to the files they name (relative paths from ``cwd``), as read by
    ``read`` (None: no such file); nothing is written. Two hunks of one file see each other's
    result.

    Raises:
        PatchError: a hunk does not apply (a file to update or delete is missing, one to add
            exists, a chunk is not found); the message names the file and what did not match.
    """
    now: dict[str, str | None] = {}
    first: dict[str, str | None] = {}
    moves: dict[str, str] = {}

    def text_of(path: str) -> str | None:
        if path not in now:
            now[path] = first[path] = read(path)
        return now[path]

    for hunk in hunks:
        path = posixpath.normpath(posixpath.join(cwd, hunk.path))
        current = text_of(path)
        match hunk.kind:
            case "add":
                if current is not None:
                    raise PatchError(f"{hunk.path}: cannot add a file that exists")
                now[path] = "".join(f"{line}\n" for line in hunk.lines)
            case "delete":
                if current is None:
                    raise PatchError(f"{hunk.path}: cannot delete a file that does not exist")
                now[path] = None
            case "update":
                if current is None:
                    raise PatchError(f"{hunk.path}: cannot update a file that does not exist")
                text = updated_text(hunk.path, current, hunk.chunks)
                if hunk.move_to is None:
                    now[path] = text
                else:
                    target = posixpath.normpath(posixpath.join(cwd, hunk.move_to))
                    if target != path and text_of(target) is not None:
                        raise PatchError(f"{hunk.move_to}: cannot move onto a file that exists")
                    now[path] = None
                    now[target] = text
                    moves[path] = target
    edits: list[FileEdit] = []
    targets = set(moves.values())
    for path, old in first.items():
        if path in moves:
            target = moves[path]
            edits.append(FileEdit("update", path, old, now[target], move_path=target))
        elif path in targets and old is None:
            continue  # the new place of a moved file: its move says it
        elif old is not None or now[path] is not None:
            edits.append(FileEdit.between(path, old, now[path]))
    return tuple(edits)


# ----------------------------------------------------------------------------- showing


def file_diff(edit: FileEdit) -> str:
    """The change of one file as unified diff hunks (no file headers)."""
    old = (edit.old or "").splitlines(keepends=True)
    new = (edit.new or "").splitlines(keepends=True)
    lines = list(difflib.unified_diff(old, new, n=3, lineterm=""))[2:]
    return "".join(line if line.endswith("\n") else f"{line}\n" for line in lines)


def unified_diff(edits: Sequence[FileEdit], root: str | None = None) -> str:
    """The edits as one unified diff with git's file headers, paths relative to ``root``."""
    parts: list[str] = []
    for edit in edits:
        before = _shown(edit.path, root).lstrip("/")
        after = _shown(edit.move_path or edit.path, root).lstrip("/")
        body = file_diff(edit)
        if not body and edit.move_path is None:
            continue
        parts.append(f"diff --git a/{before} b/{after}\n")
        if edit.old is None:
            parts.append("new file mode 100644\n")
        elif edit.new is None:
            parts.append("deleted file mode 100644\n")
        parts.append("--- /dev/null\n" if edit.old is None else f"--- a/{before}\n")
        parts.append("+++ /dev/null\n" if edit.new is None else f"+++ b/{after}\n")
        parts.append(body)
    return "".join(parts)


def _shown(path: str, root: str | None) -> str:
    if root is not None and (path == root or path.startswith(root.rstrip("/") + "/")):
        return posixpath.relpath(path, root)
    return path


def patch_summary(edits: Sequence[FileEdit], root: str | None = None) -> str:
    """What the model reads after a patch was applied: each file (relative to ``root``) and
    what happened to it: ``A`` added, ``M`` changed, ``D`` deleted."""
    marks = {"add": "A", "delete": "D", "update": "M"}
    lines = [f"{marks[edit.kind]} {_shown(edit.move_path or edit.path, root)}" for edit in edits]
    return "Done. The patch changed these files:\n" + "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- writing


def apply_changes(edits: Sequence[FileEdit]) -> None:
    """Write ``edits``: every one, or none.

    Each new text goes to a temporary file beside its target first; only when all are written
    are they renamed into place and the deleted files removed. A failure before that leaves
    every file as it was; one during it (a rename refused) puts back what it had replaced.

    Raises:
        PatchError: a file changed since the patch was planned.
        OSError: a file could not be written; nothing was changed.
    """
    for edit in edits:
        if _read(edit.path) != edit.old or (
            edit.move_path is not None and _read(edit.move_path) is not None
        ):
            raise PatchError(f"{edit.path} changed since the patch was read")
    writes: list[tuple[str, str]] = []  # (temporary file, target)
    removals: list[str] = []
    try:
        for edit in edits:
            target = edit.move_path or edit.path
            if edit.new is not None:
                Path(target).parent.mkdir(parents=True, exist_ok=True)
                fd, temporary = tempfile.mkstemp(
                    dir=os.path.dirname(target), prefix=".relay-patch-"
                )
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
                    out.write(edit.new)
                if edit.old is not None and edit.move_path is None:
                    os.chmod(temporary, os.stat(edit.path).st_mode & 0o7777)
                writes.append((temporary, target))
            if edit.new is None or edit.move_path is not None:
                removals.append(edit.path)
    except BaseException:
        for temporary, _ in writes:
            Path(temporary).unlink(missing_ok=True)
        raise
    _commit(writes, removals)


def _commit(writes: list[tuple[str, str]], removals: list[str]) -> None:
    saved: list[tuple[str, bytes | None]] = []
    try:
        for temporary, target in writes:
            saved.append((target, _bytes(target)))
            os.replace(temporary, target)
        for path in removals:
            saved.append((path, _bytes(path)))
            Path(path).unlink(missing_ok=True)
    except BaseException:
        for path, data in reversed(saved):
            if data is None:
                Path(path).unlink(missing_ok=True)
            else:
                Path(path).write_bytes(data)
        for temporary, _ in writes:
            Path(temporary).unlink(missing_ok=True)
        raise


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _bytes(path: str) -> bytes | None:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        return None


def read_text(path: str) -> str | None:
    """A file's text for a patch to plan against (None: no such file).

    Raises:
        PatchError: it is not UTF-8 text, or is not a file.
    """
    try:
        return _read(path)
    except UnicodeDecodeError:
        raise PatchError(f"{path} is not UTF-8 text: a patch does not change it") from None
    except IsADirectoryError:
        raise PatchError(f"{path} is a directory") from None


# ----------------------------------------------------------------------------- the tool

APPLY_PATCH_NAME = "apply_patch"
APPLY_PATCH_DESCRIPTION = (
    "Edit files with a patch. Send the whole patch as `input`: it starts with "
    "'*** Begin Patch' and ends with '*** End Patch'. In between, each file is one of:\n"
    "'*** Add File: PATH' then every line of the new file, each after a '+';\n"
    "'*** Delete File: PATH';\n"
    "'*** Update File: PATH', optionally '*** Move to: NEW PATH', then one or more chunks. "
    "A chunk starts with '@@', optionally followed by a line (a function or class header) to "
    "find first; its lines follow: ' ' a line kept, '-' a line removed, '+' a line added. "
    "Give about three lines kept before and after each change so that it is found; end a "
    "chunk that reaches the end of the file with '*** End of File'. Paths are relative to "
    "the working directory. The patch is applied whole or not at all.\n"
    "Example:\n"
    "*** Begin Patch\n"
    "*** Update File: src/app.py\n"
    "@@ def main():\n"
    "     args = parse()\n"
    "-    run(args)\n"
    "+    run(args, verbose=True)\n"
    "*** End Patch"
)
APPLY_PATCH_PARAMETERS = {
    "type": "object",
    "properties": {
        "input": {"type": "string", "description": "The whole patch"},
    },
    "required": ["input"],
    "additionalProperties": False,
}


__all__ = [
    "APPLY_PATCH_DESCRIPTION",
    "APPLY_PATCH_NAME",
    "APPLY_PATCH_PARAMETERS",
    "BEGIN",
    "END",
    "Chunk",
    "FileEdit",
    "Hunk",
    "PatchError",
    "apply_changes",
    "file_diff",
    "find_lines",
    "parse_patch",
    "patch_summary",
    "plan_patch",
    "read_text",
    "unified_diff",
    "updated_text",
]
