"""The gate's rules, as plain functions over plain data (docs/approvals.md): what a call needs
before it runs under a session's :class:`~relay._base._exec_rules.ExecRules`, what a grant
for the session covers, and the seal that proves relay wrote a grant.

:func:`rule` decides a call: run it unasked, ask first (and whether the question is about
running outside the sandbox), or refuse it. A command runs unasked under ``untrusted`` only
when :func:`relay._exec._readonly.judge` finds it reads only, and then it runs the very file
the judge resolved. A :class:`Grant` (``approved_for_session``) records the rules it was
given under and covers nothing looser. The rollout carries each grant with a seal, an HMAC
under a key kept in relay's home (:func:`grant_key`), which a sandboxed command can neither
read nor write: a grant read back on resume counts only when its seal holds.
"""

from __future__ import annotations

import enum
import errno
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Collection, Sequence
from pathlib import Path

import attrs

from .._base import _protocol as p
from .._base._exec_rules import MODE_ORDER, ExecRules
from .._base._sandbox_config import ApprovalPolicy, SandboxMode
from ._readonly import judge

#: The key's file, in relay's home.
KEY_FILE = "grant.key"


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
    def key(self) -> tuple[str, ...]:
        """What a grant for this call names: the argv, or the tool."""
        return ("shell", *self.argv) if self.argv is not None else ("tool", self.tool)


@attrs.frozen
class Ruling:
    """What happens before a call runs."""

    ask: str | None = None
    """Ask first, for this reason (None: run unasked)."""
    refuse: str | None = None
    """Do not run it: the model reads this (the policy allows no asking)."""
    unconfined: bool = False
    """Once approved, the command runs outside the sandbox."""
    program: str | None = None
    """The file to run, as judged read-only (a command run unasked under ``untrusted``)."""


@attrs.frozen
class Grant:
    """What one ``approved_for_session`` decision covers, and under which rules it was made."""

    key: tuple[str, ...]
    """The call's :attr:`Call.key`."""
    approval_policy: ApprovalPolicy
    """The policy it was made under."""
    sandbox_mode: SandboxMode
    """The sandbox mode it was made under."""
    unconfined: bool = False
    """It approved running the command outside the sandbox."""

    def covers(self, call: Call, rules: ExecRules, *, unconfined: bool) -> bool:
        """Whether this grant answers ``call`` under ``rules`` (``unconfined``: the question
        is about running it outside the sandbox): the same call, run no looser than it was
        approved to run."""
        if call.key != self.key:
            return False
        if call.argv is None or self.unconfined:
            return True
        if unconfined and rules.confined:
            return False
        return MODE_ORDER.index(rules.sandbox_mode) <= MODE_ORDER.index(self.sandbox_mode)


def rule(
    rules: ExecRules,
    call: Call,
    *,
    path: str,
    writable: Sequence[str],
) -> Ruling:
    """The ruling on ``call`` under ``rules``. ``path`` is the ``PATH`` the command would run
    with, ``writable`` every folder it may write (both for the read-only judge). A grant is
    the caller's to check."""
    policy = Policy(rules.approval_policy)
    if call.argv is None:
        wanted = call.needs_approval
        if not (policy is Policy.UNTRUSTED if wanted is None else wanted):
            return Ruling()
        if policy is Policy.NEVER:
            return Ruling(
                refuse=f"{call.tool} needs an approval, and the approval policy never asks"
            )
        return Ruling(ask=f"{call.tool} runs only when approved")
    escalate = call.escalate and rules.confined
    match policy:
        case Policy.UNTRUSTED:
            if not escalate:
                program = judge(call.argv, path=path, writable=writable)
                if program is not None:
                    return Ruling(program=program)
            why = "outside the sandbox" if escalate else "the command is not read-only"
            return Ruling(ask=f"approval policy untrusted: {why}", unconfined=escalate)
        case Policy.ON_REQUEST if escalate:
            return Ruling(ask="the command asks to run outside the sandbox", unconfined=True)
        case _:
            return Ruling()


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def rule_writes(
    rules: ExecRules,
    paths: Sequence[str],
    *,
    writable: Sequence[str],
    guarded: Sequence[str],
    granted: Collection[str] = frozenset(),
) -> Ruling:
    """The ruling on a patch that writes ``paths`` (absolute, links resolved) under ``rules``.

    ``writable`` are the folders the sandbox mode lets a command write (the working
    directory, the writable roots, the temporary folders), ``guarded`` relay's own files,
    which no patch writes, and ``granted`` the files an ``approved_for_session`` let through.
    As for commands: ``untrusted`` asks first; ``on-request`` and ``on-failure`` let a patch
    through when every file is inside a writable folder and none is in a ``.git`` folder
    (``workspace-write``), or whatever it writes (``danger-full-access``), and ask otherwise;
    ``never`` refuses what it would ask. ``read-only`` writes nothing unasked.
    """
    mine = [path for path in paths if any(_inside(path, own) for own in guarded)]
    if mine:
        return Ruling(refuse=f"{mine[0]} is one of relay's own files, which no patch writes")
    policy = Policy(rules.approval_policy)
    pending = [path for path in paths if path not in granted]
    if not pending:
        return Ruling()
    why: str | None = None
    if policy is Policy.UNTRUSTED:
        why = "approval policy untrusted: every patch asks first"
    elif rules.sandbox_mode == "read-only":
        why = "the sandbox is read-only"
    elif rules.sandbox_mode == "workspace-write":
        outside = [path for path in pending if not any(_inside(path, w) for w in writable)]
        in_git = [path for path in pending if "/.git/" in path or path.endswith("/.git")]
        if outside:
            why = f"{outside[0]} is outside the writable folders"
        elif in_git:
            why = f"{in_git[0]} is inside a .git folder"
    if why is None:
        return Ruling()
    if policy is Policy.NEVER:
        return Ruling(
            refuse=f"the patch was not applied: {why}, and the approval policy never asks"
        )
    return Ruling(ask=why)


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


def seal(key: bytes, session_id: str, call_id: str, grant: Grant) -> str:
    """The seal of ``grant``, made in the session ``session_id`` for the call ``call_id``."""
    message = json.dumps(
        [
            session_id,
            call_id,
            list(grant.key),
            grant.approval_policy,
            grant.sandbox_mode,
            grant.unconfined,
        ],
        ensure_ascii=True,
        separators=(",", ":"),
    )
    return hmac.new(key, message.encode("ascii"), hashlib.sha256).hexdigest()


def sealed(key: bytes, session_id: str, call_id: str, grant: Grant, found: str | None) -> bool:
    """Whether ``found`` is the seal relay made of ``grant`` (:func:`seal`)."""
    return found is not None and hmac.compare_digest(
        found.encode("ascii", "replace"), seal(key, session_id, call_id, grant).encode("ascii")
    )


def grant_key(home: Path) -> bytes | None:
    """The key that seals grants, made on first use: 32 random bytes in ``home/grant.key``,
    readable by its owner only. None when relay's home cannot hold it (grants then hold for
    the run that made them only)."""
    path = home / KEY_FILE
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        home.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if exc.errno != errno.EEXIST:
            return None
        try:  # made meanwhile by another session
            return _read_key(path)
        except OSError:
            return None
    key = secrets.token_bytes(32)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


def _read_key(path: Path) -> bytes | None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        key = os.read(fd, 64)
    finally:
        os.close(fd)
    return key if len(key) == 32 else None


__all__ = [
    "KEY_FILE",
    "Call",
    "Grant",
    "Policy",
    "Ruling",
    "grant_key",
    "parse_decision",
    "rule",
    "rule_writes",
    "seal",
    "sealed",
]
