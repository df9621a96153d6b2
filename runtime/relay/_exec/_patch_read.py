"""Patches in Codex's format, read: the text of a patch as hunks, and the lines of a file
with a chunk's change made (docs/tools.md, ``apply_patch``). :mod:`relay._exec._patch` plans
and writes them; see there for the format.

A chunk's lines are looked for from where the last one ended, first exactly, then ignoring
trailing spaces, then ignoring the spaces around, then with typographic punctuation and odd
spaces taken as ASCII, as models often write them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
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
        if not lines[at].strip():
            # Blank lines between chunks (after an "*** End of File", say) separate them; a
            # blank line inside a chunk is an empty line kept, read below.
            at += 1
            continue
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
        "\u2015": "-",
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
        **{chr(code): " " for code in range(0x2002, 0x200B)},
        "\u202f": " ",
        "\u205f": " ",
        "\u3000": " ",
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

    A chunk that removes and keeps no line adds its lines at the end of the file (before a
    last empty line), wherever its ``@@`` line is, as Codex does.

    Raises:
        PatchError: a chunk's lines (or its ``@@`` line) are not in the file after the place
            the chunk before it ended; the message shows them.
    """
    # A file whose every line ends in CRLF keeps CRLF, on the lines changed too.
    newline = "\r\n" if "\r\n" in text and text.count("\r\n") == text.count("\n") else "\n"
    lines = text.split(newline)
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
        if not chunk.old:
            end = len(lines) - 1 if lines and lines[-1] == "" else len(lines)
            lines[end:end] = chunk.new
            continue
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
    return newline.join(lines) + newline if lines else ""
