"""Approvals: which calls wait for a decision, and the session's waits (docs/approvals.md).

The rules are plain functions of the call and the policy (:func:`gate`, :func:`read_only`);
:class:`Approvals` holds a session's pending waits and the grants ``approved_for_session``
made. A wait is an ``await`` like any other of its turn: an interrupt, a replacing turn or
the shutdown cancels it, and nothing of the call runs.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeAlias

import anyio
import attrs

from .._base import _protocol as p

#: The decision of a callback: a decision, or its name.
ApprovalCallback: TypeAlias = Callable[
    [p.ExecApprovalRequest], "p.ReviewDecision | str | Awaitable[p.ReviewDecision | str]"
]


class Policy(enum.StrEnum):
    """When a call waits for a decision (``approval_policy``)."""

    UNTRUSTED = "untrusted"
    """Ask before every command that is not on the read-only list."""
    ON_FAILURE = "on-failure"
    """Run commands in the sandbox; when it refuses one, ask to run it outside."""
    ON_REQUEST = "on-request"
    """Ask when the model asks for more than the sandbox allows."""
    NEVER = "never"
    """Never ask: what the sandbox refuses stays refused."""


#: Programs that only read, run unasked under ``untrusted`` (with no argument that writes or
#: runs something else: see :func:`read_only`).
READ_ONLY_PROGRAMS = frozenset(
    {
        "cat",
        "cut",
        "date",
        "diff",
        "echo",
        "false",
        "file",
        "grep",
        "head",
        "ls",
        "nl",
        "pwd",
        "rg",
        "stat",
        "tail",
        "tr",
        "true",
        "uname",
        "wc",
        "which",
        "whoami",
    }
)

#: ``git`` subcommands that only read. Not ``diff``, ``show`` or ``log``: a repository's own
#: configuration can make them run programs (an external diff, a textconv filter).
READ_ONLY_GIT = frozenset({"status", "rev-parse"})

#: ``find`` options that write or run something.
_FIND_ACTIONS = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
)

#: Options of read-only programs that make them run something else or write (``rg --pre``).
_UNSAFE_OPTIONS = frozenset({"--pre", "--output", "-o"})

#: Options that make one of those programs change something: ``date`` sets the clock,
#: ``file`` writes a compiled magic file.
PROGRAM_WRITES: dict[str, frozenset[str]] = {
    "date": frozenset({"-s", "--set"}),
    "file": frozenset({"-C", "--compile"}),
}


def read_only(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is on the read-only list: it runs unasked under ``untrusted``."""
    if not argv:
        return False
    program = argv[0].rsplit("/", 1)[-1]
    args = argv[1:]
    if program == "git":
        return bool(args) and args[0] in READ_ONLY_GIT and "--output" not in args
    if program == "find":
        return not any(arg in _FIND_ACTIONS for arg in args)
    if program not in READ_ONLY_PROGRAMS:
        return False
    unsafe = _UNSAFE_OPTIONS | PROGRAM_WRITES.get(program, frozenset())
    return not any(arg.split("=", 1)[0] in unsafe for arg in args)


@attrs.frozen
class Call:
    """What the rules know of a call."""

    tool: str
    """The tool's name."""
    argv: tuple[str, ...] | None = None
    """A ``shell`` call's argv (None for any other tool)."""
    escalate: bool = False
    """The model asked to run the command outside the sandbox (``sandbox_permissions`` is
    ``require_escalated``)."""
    needs_approval: bool | None = False
    """The tool's own rule: True asks before every call, False never; None follows the
    policy (an MCP server without ``approval``)."""

    @property
    def grant(self) -> tuple[str, ...]:
        """What ``approved_for_session`` for this call covers: the argv, or the tool."""
        return ("shell", *self.argv) if self.argv is not None else ("tool", self.tool)


@attrs.frozen
class Gate:
    """What happens before a call runs."""

    ask: str | None = None
    """Ask first, for this reason (None: run unasked)."""
    refuse: str | None = None
    """Do not run it: the model reads this (the policy allows no asking)."""
    unconfined: bool = False
    """Once approved, the command runs outside the sandbox."""


def gate(policy: Policy, call: Call, *, sandboxed: bool) -> Gate:
    """The gate of ``call`` under ``policy``; ``sandboxed`` says whether commands run in a
    sandbox (any mode but ``danger-full-access``). A grant is the caller's to check."""
    if call.argv is None:
        wanted = call.needs_approval
        if not (policy is Policy.UNTRUSTED if wanted is None else wanted):
            return Gate()
        if policy is Policy.NEVER:
            return Gate(refuse=f"{call.tool} needs an approval, and the approval policy never asks")
        return Gate(ask=f"{call.tool} runs only when approved")
    escalate = call.escalate and sandboxed
    match policy:
        case Policy.UNTRUSTED:
            if read_only(call.argv) and not escalate:
                return Gate()
            why = "outside the sandbox" if escalate else "the command is not read-only"
            return Gate(ask=f"approval policy untrusted: {why}", unconfined=escalate)
        case Policy.ON_REQUEST if escalate:
            return Gate(ask="the command asks to run outside the sandbox", unconfined=True)
        case _:
            return Gate()


def parse_decision(value: object) -> p.ReviewDecision | None:
    """``value`` as a decision, or None when it is none."""
    if isinstance(value, p.ReviewDecision):
        return value
    if isinstance(value, str):
        try:
            return p.ReviewDecision(value)
        except ValueError:
            return None
    return None


class _Wait:
    def __init__(self) -> None:
        self.done = anyio.Event()
        self.decision: p.ReviewDecision | None = None


class Approvals:
    """A session's pending waits and its grants for the session."""

    def __init__(
        self,
        callback: ApprovalCallback | None = None,
        grants: Iterable[tuple[str, ...]] = (),
    ) -> None:
        self.callback = callback
        """Decides every request when set; else ``exec_approval`` ops do."""
        self.grants: set[tuple[str, ...]] = set(grants)
        """What ``approved_for_session`` covers (a call's :attr:`Call.grant`)."""
        self._waiting: dict[str, _Wait] = {}
        self._decided: set[str] = set()
        self._ended: set[str] = set()

    @property
    def pending(self) -> Sequence[str]:
        """The call ids that wait for a decision."""
        return list(self._waiting)

    async def wait(self, request: p.ExecApprovalRequest) -> p.ReviewDecision:
        """Wait for the decision on ``request`` (reported already); cancellable.

        Raises :class:`ValueError` when the callback gives no decision, and whatever the
        callback raises.
        """
        if self.callback is not None:
            answer = self.callback(request)
            if inspect.isawaitable(answer):
                answer = await answer
            decision = parse_decision(answer)
            if decision is None:
                raise ValueError(f"the approval callback returned {answer!r}, not a decision")
            self._decided.add(request.call_id)
            return decision
        wait = self._waiting[request.call_id] = _Wait()
        try:
            await wait.done.wait()
        finally:
            del self._waiting[request.call_id]
            if wait.decision is None:
                self._ended.add(request.call_id)
        assert wait.decision is not None
        return wait.decision

    def decide(self, call_id: str, decision: p.ReviewDecision) -> str | None:
        """Give the decision on a waiting call; returns why it cannot be taken, if it cannot
        (no call waits under that id: it was never asked, was decided, or was cancelled)."""
        wait = self._waiting.get(call_id)
        if wait is None or wait.decision is not None:
            if call_id in self._decided:
                return f"the call {call_id!r} was decided already"
            if call_id in self._ended:
                return f"the call {call_id!r} no longer waits: its turn ended"
            return f"no call waits for a decision under the id {call_id!r}"
        wait.decision = decision
        self._decided.add(call_id)
        wait.done.set()
        return None


__all__ = [
    "READ_ONLY_GIT",
    "PROGRAM_WRITES",
    "READ_ONLY_PROGRAMS",
    "ApprovalCallback",
    "Approvals",
    "Call",
    "Gate",
    "Policy",
    "gate",
    "parse_decision",
    "read_only",
]
