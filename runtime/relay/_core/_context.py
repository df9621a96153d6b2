"""The initial context of a window: developer instructions, project instructions, environment.

Pure functions from the world state and settings to the messages a model sees first
(docs/session.md), and from a change of settings to the messages that record it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import attrs

from .._base import _protocol as p
from .._base._config import DEFAULT_PROJECT_DOC_MAX_BYTES
from .._base._errors import ConfigError
from .._base._rollout_lines import TurnSettings as TurnSettings
from .._base._rollout_lines import WorldState as WorldState
from .._base._templates import template

_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})


def escape(text: str) -> str:
    """``text`` safe inside XML-like markup and its attribute values.

    (``xml.sax.saxutils`` would do, but importing it pulls ``urllib`` and ``email`` into every
    start-up.)
    """
    return text.translate(_ESCAPES)


def world_state(cwd: str, now: Callable[[], datetime], shell: str | None) -> WorldState:
    """Snapshot the world: ``now`` is the session's clock (aware datetime)."""
    moment = now()
    zone = moment.tzname() or moment.strftime("%z") or "UTC"
    return WorldState(
        cwd=cwd,
        shell=_shell_name(shell) if shell else "sh",
        current_date=moment.date().isoformat(),
        timezone=zone,
    )


@functools.lru_cache(maxsize=8)
def _shell_name(shell: str) -> str:
    # Every turn asks again, most often about the same $SHELL.
    return Path(shell).name


def environment_context(world: WorldState) -> p.Message:
    """The ``<environment_context>`` user message."""
    lines = [
        "<environment_context>",
        f"  <cwd>{escape(world.cwd)}</cwd>",
        f"  <shell>{escape(world.shell)}</shell>",
        f"  <current_date>{world.current_date}</current_date>",
        f"  <timezone>{escape(world.timezone)}</timezone>",
        "</environment_context>",
    ]
    return p.user_message("\n".join(lines))


def working_directory(cwd: str | None) -> str:
    """The absolute path of the working directory ``cwd`` (default: the process's).

    A relative ``cwd`` is relative to the process's working directory. It is resolved once,
    when a session opens: the session records the absolute path, so that a resume from
    elsewhere works in the same directory.

    Raises:
        ConfigError: the directory does not exist, is not a directory, or its name is not
            valid UTF-8 (it goes into the model's context and every rollout line that records
            a turn's settings; neither can carry bytes that are not UTF-8, and an escaped form
            would not lead back to the directory on resume).
    """
    path = os.path.abspath(cwd if cwd is not None else os.getcwd())
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", errors="backslashreplace")
        raise ConfigError(
            f"the working directory {shown} is not valid UTF-8; run relay in one that is, or"
            " set cwd"
        ) from None
    if not os.path.isdir(path):
        problem = "is not a directory" if os.path.exists(path) else "does not exist"
        raise ConfigError(f"the working directory {path} {problem} (cwd)")
    return path


def project_instructions(path: str, text: str) -> p.Message:
    """The user message that carries the project instructions (``path``: the file, or the
    files joined by ``", "`` when several were found)."""
    return p.user_message(
        f'<project_instructions path="{escape(path)}">\n{text.rstrip()}\n</project_instructions>'
    )


#: What joins the texts of two project instructions files, as Codex joins them.
PROJECT_DOC_SEPARATOR = "\n\n"


def _has_git(directory: str) -> bool:
    # A directory, or a file (a worktree's or a submodule's ``gitdir:`` pointer).
    return os.path.exists(os.path.join(directory, ".git"))


def project_doc_dirs(cwd: str, has_git: Callable[[str], bool] = _has_git) -> list[str]:
    """The directories whose project instructions apply in ``cwd``, the outermost first.

    From the git root (the nearest directory, ``cwd`` or an ancestor, that ``has_git``: a
    ``.git`` directory or file) down to ``cwd``; only ``cwd`` when there is no git root. The
    file system root itself is never taken for a git root, as in Codex, which looks for ``.git``
    only in directories that have a parent. ``cwd`` is absolute and normalized.
    """
    chain = [cwd]
    cursor = cwd
    while (parent := os.path.dirname(cursor)) != cursor:
        if has_git(cursor):
            return chain[::-1]
        chain.append(parent)
        cursor = parent
    return [cwd]


@attrs.frozen
class FoundDoc:
    """The start of one project instructions file, as read."""

    path: str
    """Where it is."""
    data: bytes
    """Its first bytes: all of it, or at least as many as the bound leaves."""
    size: int
    """Its size in bytes."""
    label: str
    """What a warning calls it: its path relative to the working directory."""


def bound_project_docs(
    found: Sequence[FoundDoc], max_bytes: int
) -> tuple[list[tuple[str, str]], list[str]]:
    """The ``(path, text)`` of each file kept, in order, and the warnings to give.

    Codex's rules: at most ``max_bytes`` bytes of files in all, each file cut to what the files
    before it left (here at a character boundary, so that the text stays UTF-8); a file that
    is only white space is left out and takes nothing from the bound. A file that is not UTF-8
    where it is kept is left out, with a warning; so is the cut of a file, with one.
    """
    kept: list[tuple[str, str]] = []
    warnings: list[str] = []
    remaining = max_bytes
    for doc in found:
        if remaining <= 0:
            break
        cut = doc.size > remaining or len(doc.data) > remaining
        end = _boundary(doc.data, remaining) if cut else len(doc.data)
        piece = doc.data[:end]
        try:
            text = piece.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = piece[exc.start]
            warnings.append(
                _left_out_text(doc.label, f"not UTF-8 (byte 0x{bad:02x} at offset {exc.start})")
            )
            continue
        if not text.strip():
            continue
        remaining -= len(piece)
        kept.append((doc.path, text))
        if cut:
            warnings.append(
                f"project instructions {doc.label} cut to {len(piece)} of its {doc.size} bytes "
                f"(project_doc_max_bytes = {max_bytes})"
            )
    return kept, warnings


def _boundary(data: bytes, index: int) -> int:
    """The largest character boundary of UTF-8 ``data`` at or before ``index``."""
    index = min(index, len(data))
    while 0 < index < len(data) and data[index] & 0xC0 == 0x80:
        index -= 1
    return index


def join_project_docs(kept: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """The ``(path, text)`` of the one message that carries ``kept``: the paths joined by
    ``", "``, the texts as Codex joins them (:data:`PROJECT_DOC_SEPARATOR`); None for none."""
    if not kept:
        return None
    return ", ".join(path for path, _ in kept), PROJECT_DOC_SEPARATOR.join(t for _, t in kept)


def read_project_doc(
    cwd: str,
    name: str,
    *,
    max_bytes: int = DEFAULT_PROJECT_DOC_MAX_BYTES,
    warn: Callable[[str], None] | None = None,
) -> tuple[str, str] | None:
    """``(path, text)`` of the project instructions that apply in ``cwd``, if there are any.

    Every file called ``name`` from the git root down to ``cwd`` (:func:`project_doc_dirs`,
    walked from ``cwd`` with its symbolic links resolved, as Codex walks it), joined and bounded
    by ``max_bytes`` (:func:`bound_project_docs`, :func:`join_project_docs`); 0 reads none. A
    file that is there but cannot be used (not UTF-8, not a regular file, unreadable) is left
    out, and ``warn`` is told why; a missing file is no news.
    """
    if not name or max_bytes <= 0:
        return None
    dirs = project_doc_dirs(os.path.realpath(cwd))
    if len(dirs) == 1:
        # No git root: the working directory as it is named.
        dirs = [cwd]
    found: list[FoundDoc] = []
    for directory in dirs:
        path = os.path.join(directory, name)
        label = name if directory in (dirs[-1], cwd) else os.path.relpath(path, dirs[-1])
        doc = _read_start(path, label, max_bytes, warn)
        if doc is not None:
            found.append(doc)
    kept, warnings = bound_project_docs(found, max_bytes)
    for text in warnings:
        if warn is not None:
            warn(text)
    return join_project_docs(kept)


def _read_start(
    path: str, label: str, limit: int, warn: Callable[[str], None] | None
) -> FoundDoc | None:
    """The first ``limit`` bytes (and a few more, to find a character boundary) of the file at
    ``path``; None when it is missing or cannot be used (``warn`` is told why)."""
    try:
        # Without blocking: a FIFO in that place would wait for a writer for good.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        _left_out(warn, label, f"cannot be read ({exc.strerror})")
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        _left_out(warn, label, f"it is {_kind(info.st_mode)}, not a regular file")
        return None
    with os.fdopen(fd, "rb") as file:
        try:
            data = file.read(limit + 4)
        except OSError as exc:
            _left_out(warn, label, f"cannot be read ({exc.strerror})")
            return None
    return FoundDoc(path, data, max(info.st_size, len(data)), label)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def _left_out_text(name: str, problem: str) -> str:
    return f"project instructions {name} left out: {problem}"


def _left_out(warn: Callable[[str], None] | None, name: str, problem: str) -> None:
    if warn is not None:
        warn(_left_out_text(name, problem))


def initial_context(
    world: WorldState,
    *,
    developer_instructions: str | None,
    project_doc: tuple[str, str] | None,
    context_window: int | None = None,
) -> list[p.Message]:
    """The full initial context of a window, in order (docs/session.md).

    ``context_window`` (the token-budget feature) adds a ``<context_window>`` block that
    states the window's size and the tools that manage it.
    """
    out: list[p.Message] = []
    if developer_instructions:
        out.append(p.Message("developer", (p.InputText(developer_instructions),)))
    if project_doc is not None:
        out.append(project_instructions(*project_doc))
    out.append(environment_context(world))
    if context_window is not None:
        out.append(context_window_block(context_window))
    return out


def context_window_block(tokens: int) -> p.Message:
    """The ``<context_window>`` user message of the token-budget feature."""
    return p.user_message(
        f"<context_window>\n{template('context_window.md').strip().format(tokens=tokens)}\n"
        "</context_window>"
    )


def context_changes(previous: WorldState, current: WorldState) -> list[p.Message]:
    """What to record when the world changed since the reference context."""
    if previous == current:
        return []
    return [environment_context(current)]


def turn_aborted_marker() -> p.Message:
    """The model-visible marker recorded when a turn is interrupted."""
    return p.user_message(f"<turn_aborted>\n{template('turn_aborted.md')}\n</turn_aborted>")


def instructions_hash(instructions: str) -> str:
    """A short stable hash of the instructions, for ``turn_context`` rollout lines."""
    return hashlib.sha256(instructions.encode("utf-8")).hexdigest()[:16]
