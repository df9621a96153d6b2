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

Reading (:func:`parse_patch`, in :mod:`relay._exec._patch_read`) and planning
(:func:`plan_patch`) are plain functions; planning reads the files through the function it is
given. Writing (:func:`apply_changes`) puts every file in place or none.
"""

from __future__ import annotations

import difflib
import os
import posixpath
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from ._patch_read import (
    BEGIN,
    END,
    Chunk,
    Hunk,
    Kind,
    PatchError,
    find_lines,
    parse_patch,
    updated_text,
)


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
                target = (
                    path
                    if hunk.move_to is None
                    else posixpath.normpath(posixpath.join(cwd, hunk.move_to))
                )
                if target == path:  # "*** Move to:" its own place is no move
                    now[path] = text
                else:
                    if text_of(target) is not None:
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
    """What the model reads after a patch was applied, in the shape Codex's models know (the
    first line in relay's words), then ``A PATH`` for each file added, ``M PATH`` for each
    updated (a moved file at its new place), ``D PATH`` for each deleted, in that order; paths
    relative to ``root`` when inside it, as a patch names them."""
    lines = ["Patch applied. Files changed:"]
    for kind, mark in (("add", "A"), ("update", "M"), ("delete", "D")):
        lines += [
            f"{mark} {_shown(edit.move_path or edit.path, root)}"
            for edit in edits
            if edit.kind == kind
        ]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- writing


def apply_changes(edits: Sequence[FileEdit]) -> None:
    """Write ``edits``: every one, or none.

    Each new text goes to a temporary file beside its target first; only when all are written
    are they renamed into place and the deleted files removed. A failure before that leaves
    every file as it was; one during it (a rename refused) puts back what it had replaced.
    Either way the folders made for new files are removed again.

    An update writes through a symbolic link to the file it names, which keeps the link; a new
    file gets the mode the umask gives, a changed or moved one keeps its own.

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
    made: list[str] = []  # folders made, outermost first
    try:
        for edit in edits:
            if edit.new is not None:
                target = edit.move_path or (
                    edit.path if edit.old is None else os.path.realpath(edit.path)
                )
                mode = None if edit.old is None else os.stat(edit.path).st_mode & 0o7777
                _make_folders(os.path.dirname(target), made)
                writes.append((_temporary(target, edit.new, mode), target))
            if edit.new is None or edit.move_path is not None:
                removals.append(edit.path)
        _commit(writes, removals)
    except BaseException:
        for temporary, _ in writes:
            Path(temporary).unlink(missing_ok=True)
        for folder in reversed(made):
            try:
                os.rmdir(folder)
            except OSError:
                pass  # not empty: something else put a file there meanwhile
        raise


def _make_folders(folder: str, made: list[str]) -> None:
    missing: list[str] = []
    while not os.path.isdir(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for each in reversed(missing):
        os.mkdir(each)  # a file in the way raises here
        made.append(each)


def _temporary(target: str, text: str, mode: int | None) -> str:
    """A new file beside ``target`` holding ``text``, with ``mode`` (None: a new file's)."""
    folder = os.path.dirname(target)
    while True:
        name = os.path.join(folder, f".relay-patch-{secrets.token_hex(6)}")
        try:
            # 0o666 less the umask, as any new file; O_EXCL: never someone else's file.
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue
        break
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        if mode is not None:
            os.chmod(name, mode)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return name


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
        raise


def _read(path: str) -> str | None:
    try:
        # newline="": line ends as they are, so a patch rewrites no line it does not name.
        with open(path, encoding="utf-8", newline="") as file:
            return file.read()
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
