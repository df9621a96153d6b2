"""A case's fixture (``docs/eval.md``): what it holds, checked when the corpus is read, and the
fresh copy each run works in.

A fixture holds folders, regular files and symbolic links that resolve inside it; anything
else is refused by name before anything runs: a link that leads out of the fixture (to a file
of the machine, which the tools would read and a ``--live`` run would send to the provider, or
to ``/dev/zero``, whose copy never ends), a FIFO, a socket, a device. A link is copied as a link,
its target made relative to where it stands, so that a copied link points into the copy and
never back into the corpus. The copy opens every folder and file without following links,
one level at a time, and copies regular files only: a fixture changed after it was checked
fails its run, it cannot lead the copy out.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path
from typing import Literal

import attrs

from .._base._errors import ScriptError
from .._core._tools import file_kind

_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@attrs.frozen
class Entry:
    """One thing in a fixture."""

    parts: tuple[str, ...]
    """Its path inside the fixture, one name per level."""
    kind: Literal["dir", "file", "link"]
    mode: int = 0
    """Its permission bits (a folder's, a file's)."""
    target: str = ""
    """A link's target, relative to the link's folder, inside the fixture."""


@attrs.frozen
class Fixture:
    """A fixture as it was checked: its folder and what it holds, folders before what they
    hold."""

    root: Path
    entries: tuple[Entry, ...]


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def scan_fixture(root: Path) -> Fixture | None:
    """The fixture at ``root`` (None when there is no folder there), checked.

    Raises:
        ScriptError: the fixture is a link, or holds a link that leads out of it, or a file
            that is not a regular file; the message names it.
    """
    try:
        top = root.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ScriptError(f"{root}: cannot be read: {exc.strerror}") from exc
    if stat.S_ISLNK(top.st_mode):
        raise ScriptError(
            f"{root} is a symbolic link: a case's fixture is a folder of its own, not a link"
        )
    if not stat.S_ISDIR(top.st_mode):
        return None
    real_root = os.path.realpath(root)
    entries: list[Entry] = []
    pending: list[tuple[str, ...]] = [()]
    while pending:
        folder = pending.pop()
        where = root.joinpath(*folder)
        try:
            with os.scandir(where) as listing:
                children = sorted(listing, key=lambda child: child.name)
        except OSError as exc:
            raise ScriptError(f"{where}: cannot be read: {exc.strerror}") from exc
        for child in children:
            parts = (*folder, child.name)
            shown = root.joinpath(*parts)
            mode = child.stat(follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                target = os.path.realpath(child.path)
                if not _inside(target, real_root):
                    raise ScriptError(
                        f"{shown}: the symbolic link to {os.readlink(child.path)!r} leaves the "
                        "fixture (a fixture's links must resolve inside it)"
                    )
                at = os.path.join(real_root, *folder)
                entries.append(Entry(parts, "link", target=os.path.relpath(target, at)))
            elif stat.S_ISDIR(mode):
                entries.append(Entry(parts, "dir", stat.S_IMODE(mode)))
                pending.append(parts)
            elif stat.S_ISREG(mode):
                entries.append(Entry(parts, "file", stat.S_IMODE(mode)))
            else:
                raise ScriptError(
                    f"{shown} is {file_kind(mode)}, not a regular file (a fixture holds "
                    "folders, regular files and links that stay inside it)"
                )
    # Depth first, a folder before what it holds: the copy keeps one open folder per level.
    entries.sort(key=lambda entry: entry.parts)
    return Fixture(root, tuple(entries))


def copy_fixture(fixture: Fixture, dest: Path) -> None:
    """Copy ``fixture`` to ``dest`` (a new folder), as it was checked.

    Raises:
        ScriptError: something in the fixture changed since it was checked.
        OSError: the copy could not be written.
    """
    dest.mkdir()
    chain: list[tuple[tuple[str, ...], int]] = [((), os.open(fixture.root, _OPEN_DIR))]
    folders: list[tuple[Path, int]] = []
    try:
        for entry in fixture.entries:
            parent = entry.parts[:-1]
            while chain[-1][0] != parent:
                os.close(chain.pop()[1])
            at, name, out = chain[-1][1], entry.parts[-1], dest.joinpath(*entry.parts)
            try:
                if entry.kind == "link":
                    os.symlink(entry.target, out)
                elif entry.kind == "dir":
                    out.mkdir()
                    folders.append((out, entry.mode))
                    chain.append((entry.parts, os.open(name, _OPEN_DIR, dir_fd=at)))
                else:
                    source = os.open(name, _OPEN_FILE, dir_fd=at)
                    _copy_file(source, out, entry.mode, fixture.root.joinpath(*entry.parts))
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                    raise ScriptError(
                        f"{fixture.root.joinpath(*entry.parts)} changed since the corpus was read"
                    ) from exc
                raise
        # Last, so that a read-only folder does not stop its own copy.
        for folder, mode in reversed(folders):
            folder.chmod(mode)
    finally:
        for _, fd in chain:
            os.close(fd)


def _copy_file(source: int, out: Path, mode: int, shown: Path) -> None:
    try:
        status = os.fstat(source)
        if not stat.S_ISREG(status.st_mode):
            raise ScriptError(f"{shown} is {file_kind(status.st_mode)} now, not a regular file")
        with (
            open(source, "rb", closefd=False) as reader,
            open(out, "xb") as writer,
        ):
            shutil.copyfileobj(reader, writer)
            os.fchmod(writer.fileno(), mode)
        os.utime(out, ns=(status.st_atime_ns, status.st_mtime_ns))
    finally:
        os.close(source)


__all__ = ["Entry", "Fixture", "copy_fixture", "scan_fixture"]
