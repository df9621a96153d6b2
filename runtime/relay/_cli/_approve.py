"""``relay exec``'s approvals: asked on the terminal, or denied where nobody can be asked
(docs/approvals.md, "On the command line").

On a terminal (standard input and standard error are both one), each request is a question
on standard error, answered with a line on standard input: ``y`` runs the call, ``a`` runs it
and every later call of the same argv or tool unasked (``approved_for_session``), ``n``
denies it. An empty or unknown answer asks again; the end of input denies. The line is read
in a worker thread that the wait abandons when it is cancelled (an interrupt, the shutdown),
and that a byte on a pipe of its own then releases: nothing is left reading the terminal.

Without a terminal nobody can answer: every request is denied at once, with one warning line
on standard error naming the call.

The pure parts (:func:`decision_of`, :func:`question`, :func:`denied_warning`) are plain
functions of their arguments.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
from typing import TextIO

import anyio
import anyio.lowlevel

from .._base import _protocol as p
from .._core._approvals import ApprovalCallback
from .._html import visible
from ._pretty import command_line

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


def question(request: p.ExecApprovalRequest) -> str:
    """What the terminal shows of a request, before :data:`PROMPT`."""
    lines = [f"relay: the call {visible(request.call_id)} waits for your approval"]
    lines.append(f"  {command_line(request.command)}")
    lines.append(f"  in {visible(request.cwd)}")
    if request.reason:
        lines.append(f"  why: {visible(request.reason)}")
    return "\n".join(lines) + "\n"


def denied_warning(request: p.ExecApprovalRequest) -> str:
    """The warning line of a request denied because nobody can be asked."""
    return (
        f"relay: warning: denied the call {visible(request.call_id)} "
        f"({command_line(request.command)}): it needs an approval, and without a terminal "
        "(standard input and standard error) nobody can give one\n"
    )


def deny_unasked(stderr: TextIO) -> ApprovalCallback:
    """The callback of a ``relay exec`` without a terminal: denies at once, with a warning."""

    def deny(request: p.ExecApprovalRequest) -> p.ReviewDecision:
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

    async def __call__(self, request: p.ExecApprovalRequest) -> p.ReviewDecision:
        # One question at a time on the terminal, in the order the calls asked.
        async with self._lock:
            # Let the readers of the request event (a transcript on the same terminal)
            # show it before the question.
            await anyio.lowlevel.checkpoint()
            self._write(question(request))
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
    "PROMPT",
    "TerminalApprover",
    "decision_of",
    "deny_unasked",
    "denied_warning",
    "exec_approver",
    "question",
    "read_line",
]
