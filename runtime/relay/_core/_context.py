"""The initial context of a window: developer instructions, project instructions, environment.

Pure functions from the world state and settings to the messages a model sees first
(docs/session.md), and from a change of settings to the messages that record it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from .._base import _protocol as p
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
    """The user message that carries the project instructions file."""
    return p.user_message(
        f'<project_instructions path="{escape(path)}">\n{text.rstrip()}\n</project_instructions>'
    )


def read_project_doc(
    cwd: str, name: str, *, warn: Callable[[str], None] | None = None
) -> tuple[str, str] | None:
    """``(path, text)`` of the project instructions file in ``cwd``, if there is one.

    A file that is there but cannot be used (not UTF-8, not a regular file, unreadable) is
    left out, and ``warn`` is told why; a missing file is no news.
    """
    if not name:
        return None
    path = Path(cwd) / name
    try:
        # Without blocking: a FIFO in that place would wait for a writer for good.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        _left_out(warn, name, f"cannot be read ({exc.strerror})")
        return None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        _left_out(warn, name, f"it is {_kind(mode)}, not a regular file")
        return None
    with os.fdopen(fd, "rb") as file:
        try:
            data = file.read()
        except OSError as exc:
            _left_out(warn, name, f"cannot be read ({exc.strerror})")
            return None
    try:
        return str(path), data.decode("utf-8")
    except UnicodeDecodeError as exc:
        _left_out(warn, name, f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})")
        return None


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


def _left_out(warn: Callable[[str], None] | None, name: str, problem: str) -> None:
    if warn is not None:
        warn(f"project instructions {name} left out: {problem}")


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
