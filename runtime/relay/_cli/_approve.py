"""``relay exec``'s approvals: asked on the terminal, or denied where nobody can be asked
(docs/approvals.md, "On the command line").

On a terminal (standard input and standard error are both one), each request is a question
on standard error, answered with a line on standard input: ``y`` runs the call, ``a`` runs it
and every later call of the same argv or tool unasked (``approved_for_session``), ``n``
denies it. An empty or unknown answer asks again; the end of input denies. The line is read
in a worker thread that the wait abandons when it is cancelled (an interrupt, the shutdown),
and that a byte on a pipe of its own then releases: nothing is left reading the terminal.

The question shows the whole call, never a part of it: a user approves what runs, and what
runs can hide its point (the path a write goes to) at its end. A call longer than one line of
the terminal is wrapped to its width, each line of it behind a gutter that tells a line of the
call (``│``) from the rest of a line too long for the terminal (``↪``), and its size follows.
Control characters are written out (``\\x1b``), so that what the model wrote cannot change what
the question shows.

Without a terminal nobody can answer: every request is denied at once, with one warning line
on standard error naming the call.

The pure parts (:func:`decision_of`, :func:`question`, :func:`call_text`, :func:`wrapped`,
:func:`denied_warning`) are plain functions of their arguments.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shlex
import shutil
import sys
from typing import TextIO

import anyio
import anyio.lowlevel

from .._base import _protocol as p
from .._core._exec_gate import ApprovalCallback
from ._pretty import command_line, visible

#: The answers and their decisions.
ANSWERS = {
    "y": p.ReviewDecision.APPROVED,
    "yes": p.ReviewDecision.APPROVED,
    "a": p.ReviewDecision.APPROVED_FOR_SESSION,
    "n": p.ReviewDecision.DENIED,
    "no": p.ReviewDecision.DENIED,
}

#: The last line of a question, where the answer is typed.
PROMPT = "relay: run it? y = yes, a = yes for this session, n = no [y/a/n] "


def decision_of(answer: str) -> p.ReviewDecision | None:
    """The decision an answer gives, or None (empty, unknown: ask again)."""
    return ANSWERS.get(answer.strip().lower())


#: The width a question is wrapped to when the terminal's is unknown.
DEFAULT_WIDTH = 80

#: The gutters of a call shown on more than one line: the start of a line of the call, and
#: the rest of a line too long for the terminal.
LINE_GUTTER = "  │ "
WRAP_GUTTER = "  ↪ "

#: The narrowest a line of a call is wrapped to, however narrow the terminal.
_NARROWEST = 20

#: A surrogate alone (text decoded with ``surrogateescape``, or a JSON escape of half a pair)
#: cannot be written to a terminal as UTF-8: it is written out like a control character.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _written_out(text: str) -> str:
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", visible(text))


def _one_line(text: str) -> str:
    # A field of one line (the call id, the directory, the reason) keeps to its line: a
    # newline in it could otherwise show a line the question never wrote.
    return _written_out(text).replace("\n", "\\n").replace("\t", "\\t")


def call_text(command: tuple[str, ...] | p.ToolInvocation) -> str:
    """The whole of what an approval runs, control characters written out: the argv as a
    shell would read it, or ``server/tool`` and all its arguments. Newlines and tabs stay
    (a script's lines are its lines)."""
    if isinstance(command, p.ToolInvocation):
        name = command.tool if command.server is None else f"{command.server}/{command.tool}"
        arguments = json.dumps(dict(command.arguments), ensure_ascii=False, default=str)
        return _written_out(f"{name} {arguments}")
    return _written_out(shlex.join(command))


def wrapped(line: str, width: int) -> list[str]:
    """``line`` in pieces of at most ``width`` characters that join back to it: each piece
    ends after its last space when it has one, else at the width (a long word or path)."""
    width = max(width, 1)
    pieces: list[str] = []
    while len(line) > width:
        cut = line.rfind(" ", 0, width) + 1 or width
        pieces.append(line[:cut])
        line = line[cut:]
    pieces.append(line)
    return pieces


def call_lines(command: tuple[str, ...] | p.ToolInvocation, width: int) -> list[str]:
    """What a question shows of the call on a terminal ``width`` columns wide: one indented
    line if it fits; else every line of it behind its gutter, wrapped, then its size."""
    text = call_text(command)
    if "\n" not in text and len(LINE_GUTTER) + len(text) <= width:
        return [f"  {text}"]
    room = max(width - len(LINE_GUTTER), _NARROWEST)
    shown: list[str] = []
    for line in text.split("\n"):
        first, *rest = wrapped(line, room)
        shown.append(LINE_GUTTER + first)
        shown.extend(WRAP_GUTTER + piece for piece in rest)
    lines = text.count("\n") + 1
    extent = f"{len(text):,} characters" + (f", {lines:,} lines" if lines > 1 else "")
    shown.append(f"  ({extent})")
    return shown


#: The most lines of a patch's diffs a question shows.
PATCH_LINES = 40

Request = p.ExecApprovalRequest | p.ApplyPatchApprovalRequest


def _request_text(request: Request) -> str:
    if isinstance(request, p.ApplyPatchApprovalRequest):
        return "a patch of " + ", ".join(change.path for change in request.changes)
    return command_line(request.command)


def question(request: Request, width: int = DEFAULT_WIDTH) -> str:
    """What a terminal ``width`` columns wide shows of a request, before :data:`PROMPT`."""
    lines = [f"relay: the call {_one_line(request.call_id)} waits for your approval"]
    if isinstance(request, p.ApplyPatchApprovalRequest):
        diff = "".join(change.diff for change in request.changes).splitlines()
        lines.append(f"  a patch of {len(request.changes)} file(s):")
        lines.extend(f"    {_one_line(line)[: width - 4]}" for line in diff[:PATCH_LINES])
        if len(diff) > PATCH_LINES:
            lines.append(f"    ({len(diff) - PATCH_LINES:,} more lines)")
    else:
        lines.extend(call_lines(request.command, width))
        lines.append(f"  in {_one_line(request.cwd)}")
    if request.reason:
        lines.append(f"  why: {_one_line(request.reason)}")
    return "\n".join(lines) + "\n"


def denied_warning(request: Request) -> str:
    """The warning line of a request denied because nobody can be asked."""
    return (
        f"relay: warning: denied the call {_one_line(request.call_id)} "
        f"({_request_text(request)}): it needs an approval, and without a terminal "
        "(standard input and standard error) nobody can give one\n"
    )


def deny_unasked(stderr: TextIO) -> ApprovalCallback:
    """The callback of a ``relay exec`` without a terminal: denies at once, with a warning."""

    def deny(request: Request) -> p.ReviewDecision:
        stderr.write(denied_warning(request))
        stderr.flush()
        return p.ReviewDecision.DENIED

    return deny


def read_line(fd: int, release: int) -> str | None:
    """A line from ``fd`` (without its newline), None at the end of input, or None as soon as
    ``release`` is readable (the wait was abandoned). Runs in a worker thread; closes
    ``release``. Reads a byte at a time: what was typed after the line stays for the next
    question."""
    data = bytearray()
    try:
        while True:
            ready, _, _ = select.select([fd, release], [], [])
            if release in ready:
                return None
            byte = os.read(fd, 1)
            if not byte or byte == b"\n":
                break
            data += byte
    finally:
        os.close(release)
    if not data and not byte:
        return None
    return data.decode("utf-8", "replace")


class TerminalApprover:
    """The callback of a ``relay exec`` on a terminal: asks each request in turn."""

    def __init__(self, stdin: int, stderr: TextIO) -> None:
        self._stdin = stdin
        self._stderr = stderr
        self._lock = anyio.Lock()

    async def __call__(self, request: Request) -> p.ReviewDecision:
        # One question at a time on the terminal, in the order the calls asked.
        async with self._lock:
            # Let the readers of the request event (a transcript on the same terminal)
            # show it before the question.
            await anyio.lowlevel.checkpoint()
            # The width now: the terminal may have been resized since the last question.
            width = shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
            self._write(question(request, width))
            while True:
                self._write(PROMPT)
                answer = await self._answer()
                if answer is None:
                    self._write("\nrelay: no answer (end of input): denied\n")
                    return p.ReviewDecision.DENIED
                decision = decision_of(answer)
                if decision is not None:
                    return decision

    def _write(self, text: str) -> None:
        self._stderr.write(text)
        self._stderr.flush()

    async def _answer(self) -> str | None:
        release, releasing = os.pipe()
        answered = False
        try:
            line = await anyio.to_thread.run_sync(
                read_line, self._stdin, release, abandon_on_cancel=True
            )
            answered = True
            return line
        finally:
            if not answered:
                # Abandoned: the byte wakes the thread, which returns. (It may have returned
                # already and closed its end: the byte then goes nowhere.)
                with contextlib.suppress(OSError):
                    os.write(releasing, b"x")
            os.close(releasing)


def exec_approver(stdin: TextIO | None = None, stderr: TextIO | None = None) -> ApprovalCallback:
    """The approval callback of ``relay exec``: on a terminal, ask; else deny with a warning."""
    stdin = sys.stdin if stdin is None else stdin
    stderr = sys.stderr if stderr is None else stderr
    if stdin.isatty() and stderr.isatty():
        return TerminalApprover(stdin.fileno(), stderr)
    return deny_unasked(stderr)


__all__ = [
    "ANSWERS",
    "DEFAULT_WIDTH",
    "LINE_GUTTER",
    "PROMPT",
    "WRAP_GUTTER",
    "TerminalApprover",
    "call_lines",
    "call_text",
    "decision_of",
    "deny_unasked",
    "denied_warning",
    "exec_approver",
    "question",
    "read_line",
    "wrapped",
]
