"""The gate every effect of a session goes through (docs/approvals.md).

A ``shell`` command, a hook command, and a Python or MCP tool that needs an approval each pass
here, and only here, before they touch anything. The order is always the same:

1. **Rule** on the call under the session's frozen :class:`~relay._base._exec_rules.ExecRules`
   (:func:`relay._exec._rules.rule`): run it unasked, ask first, or refuse it.
2. **Wait** for a decision, unless a grant for the session covers the call. The request is an
   ``exec_approval_request`` event, flushed to the rollout first; the wait is an ``await`` of
   the turn (its :class:`Waits`), so an interrupt, a replacing turn or the shutdown cancels it
   and nothing of the call runs.
3. **Choose the sandbox**: the session's, or none for a command approved to run outside it.
4. **Run** it, with the environment ``[shell_environment_policy]`` makes, the API key's
   variable never in it; a command judged read-only runs the very file the judge resolved.
5. **Retry**: under ``on-failure``, a command the sandbox refused (a typed refusal from
   :mod:`relay._exec._command`, not a reading of its output here) is asked about once more,
   to run outside, and runs again only when approved.

A decision is recorded by the session's one writer (:meth:`GateWriter.decided`); a grant for
the session goes into the session's state there, with its seal, and nowhere else.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Protocol, TypeAlias

import anyio
import attrs

from .._base import _json
from .._base import _protocol as p
from .._base._exec_rules import MODE_ORDER, POLICY_ORDER, ExecRules, loosenings
from .._base._rollout_lines import ApprovalDecided
from .._exec._command import (
    CommandOutput,
    CommandResult,
    CommandRunner,
    OutputSink,
    run_command,
    shell_argv,
    workdir_of,
)
from .._exec._environment import command_environment
from .._exec._process import Command
from .._exec._real_work import in_thread
from .._exec._rules import Call, Grant, Policy, parse_decision, rule, rule_writes, seal, sealed
from .._exec._sandbox import SandboxPolicy, open_sandboxed, rules_sandbox, writable_paths
from ._history import ABORTED_OUTPUT

#: The decision of a callback: a decision, or its name.
ApprovalCallback: TypeAlias = Callable[
    [p.ExecApprovalRequest | p.ApplyPatchApprovalRequest],
    "p.ReviewDecision | str | Awaitable[p.ReviewDecision | str]",
]

#: What a patch passes before it writes: ``(refusal, asked)``, the refusal None to write, else
#: what the model reads instead; ``asked``: whether anyone was asked.
WriteCheck = Callable[[Sequence[p.FileChange]], Awaitable[tuple[str | None, bool]]]

#: The output of a call whose request was denied.
DENIED_OUTPUT = "denied: the user did not approve this call, and nothing of it ran"
#: What the model reads after the output of a command the sandbox refused, when running it
#: outside was not approved.
NOT_OUTSIDE = "the sandbox refused it; running it outside was not approved"


class _Wait:
    def __init__(self) -> None:
        self.done = anyio.Event()
        self.decision: p.ReviewDecision | None = None


class Waits:
    """The calls of one turn that wait for a decision."""

    def __init__(
        self, callback: ApprovalCallback | None, settled: dict[str, str], *, unattended: bool
    ) -> None:
        self._callback = callback
        self._settled = settled
        self._unattended = unattended
        self._waiting: dict[str, _Wait] = {}

    @property
    def pending(self) -> Sequence[str]:
        """The call ids that wait for a decision."""
        return list(self._waiting)

    async def wait(
        self, request: p.ExecApprovalRequest | p.ApplyPatchApprovalRequest
    ) -> p.ReviewDecision:
        """Wait for the decision on ``request`` (reported already); cancellable.

        Raises:
            ValueError: the callback gave no decision (whatever it raises passes too).
        """
        if self._callback is not None:
            answer = self._callback(request)
            if inspect.isawaitable(answer):
                answer = await answer
            decision = parse_decision(answer)
            if decision is None:
                raise ValueError(f"the approval callback returned {answer!r}, not a decision")
            self._settled[request.call_id] = "decided"
            return decision
        if self._unattended:
            raise ValueError("nobody watches background work to answer it")
        wait = self._waiting[request.call_id] = _Wait()
        try:
            await wait.done.wait()
        finally:
            del self._waiting[request.call_id]
            if wait.decision is None:
                self._settled[request.call_id] = "ended"
        assert wait.decision is not None
        return wait.decision

    def decide(self, call_id: str, decision: p.ReviewDecision) -> bool:
        """Give the decision on a waiting call; False when no call of the turn waits under
        that id."""
        wait = self._waiting.get(call_id)
        if wait is None or wait.decision is not None:
            return False
        wait.decision = decision
        self._settled[call_id] = "decided"
        wait.done.set()
        return True


@attrs.define(eq=False)
class Gate:
    """A session's gate: its rules, the sandbox they make, and who decides."""

    rules: ExecRules
    """The rules: set when the session opens, changed only by :meth:`change`."""
    sandbox: SandboxPolicy | None = None
    """What a confined command may touch (None: ``danger-full-access``)."""
    hidden: frozenset[str] = frozenset()
    """The variables no command sees: the API keys'."""
    callback: ApprovalCallback | None = None
    """Decides every request when set; else ``exec_approval`` ops do."""
    key: bytes | None = None
    """The key that seals grants (None: grants hold for this run only)."""
    session_id: str = ""
    """The session whose grants the key seals."""
    guarded: SandboxPolicy | None = None
    """The paths any sandbox of the session keeps read-only or hidden, and its bubblewrap
    (None: the sandbox's own, else none)."""
    written: set[str] = attrs.field(factory=set)
    """The files an ``approved_for_session`` let patches write unasked (this run)."""
    _settled: dict[str, str] = attrs.field(factory=dict, alias="_settled")

    def change(self, op: p.OverrideTurnContext, cwd: str) -> list[str] | None:
        """Put the rules ``op`` asks for in place for every later call, with the sandbox they
        make (the paths the session guards stay guarded); returns what they loosen, or None
        when they are the rules in place."""
        rules = self.rules.changed(
            approval_policy=op.approval_policy,
            sandbox_mode=op.sandbox_mode,
            writable_roots=op.writable_roots,
            network_access=op.network_access,
            cwd=cwd,
        )
        if rules == self.rules:
            return None
        loosened = loosenings(self.rules, rules)
        like = self.guarded or self.sandbox
        made = rules_sandbox(rules, like.bwrap if like else shutil.which("bwrap") or "bwrap")
        if made is not None and like is not None:
            made = attrs.evolve(made, protected=like.protected, hidden=like.hidden)
        self.rules, self.sandbox = rules, made
        return loosened

    def waits(self, *, unattended: bool = False) -> Waits:
        """The waits of a new turn (``unattended``: of background work, which no op can
        answer)."""
        return Waits(self.callback, self._settled, unattended=unattended)

    def decide(self, waits: Waits | None, call_id: str, decision: p.ReviewDecision) -> str | None:
        """Give ``decision`` to the call ``call_id`` of the running turn (``waits``); returns
        why it cannot be taken, if it cannot."""
        if waits is not None and waits.decide(call_id, decision):
            return None
        match self._settled.get(call_id):
            case "decided":
                return f"the call {call_id!r} was decided already"
            case "ended":
                return f"the call {call_id!r} no longer waits: its turn ended"
            case _:
                return f"no call waits for a decision under the id {call_id!r}"

    def environment(self) -> dict[str, str]:
        """The environment of a command, as the rules make it from relay's."""
        return command_environment(self.rules.environment, os.environ, self.hidden)

    def writable(self, cwd: str, env: Mapping[str, str]) -> list[str]:
        """Every folder a command in ``cwd`` might write, for the read-only judge: the same
        in every mode, so that a program found there is never judged."""
        found = [cwd, *self.rules.writable_roots, "/tmp"]
        if tmpdir := env.get("TMPDIR"):
            found.append(tmpdir)
        return found

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        timeout_ms: int,
        confined: bool = True,
        program: str | None = None,
        root: str | None = None,
        on_output: OutputSink | None = None,
    ) -> CommandOutput:
        """Run ``argv`` in the sandbox (``confined``) or outside it; ``program`` is the file
        to run in place of ``argv[0]`` (judged read-only), ``root`` the working directory the
        sandbox makes writable (default ``cwd``), ``on_output`` gets the output as it comes."""
        return await run_command(
            argv,
            cwd=cwd,
            env=self.environment(),
            timeout_ms=timeout_ms,
            sandbox=self.sandbox if confined else None,
            executable=program,
            root=root,
            on_output=on_output,
        )

    @asynccontextmanager
    async def open_hook(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        stdin: int,
        stdout: int,
        stderr: int,
        time_limit: float | None,
    ) -> AsyncIterator[Command]:
        """Start a hook command: configured by the user, it runs unasked, in the sandbox."""
        async with open_sandboxed(
            self.sandbox,
            argv,
            cwd=cwd,
            env=self.environment(),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            time_limit=time_limit,
        ) as process:
            yield process

    def covered(self, grants: Sequence[Grant], call: Call, *, unconfined: bool) -> bool:
        """Whether a grant of ``grants`` answers ``call``."""
        return any(g.covers(call, self.rules, unconfined=unconfined) for g in grants)

    def kept(self, recorded: Sequence[ApprovalDecided]) -> tuple[list[Grant], list[str]]:
        """The grants of ``recorded`` (a resumed rollout's) whose seals hold, and a warning
        for each of the others, which are ignored."""
        grants: list[Grant] = []
        problems: list[str] = []
        for decided in recorded:
            grant = _grant_of(decided)
            why = None
            if grant is None:
                why = "it does not say the rules it was made under"
            elif self.key is None:
                why = "relay's key is not readable, so no grant can be checked"
            elif not sealed(self.key, self.session_id, decided.call_id, grant, decided.seal):
                why = "its seal does not hold: relay did not write it"
            if why is None and grant is not None:
                grants.append(grant)
            else:
                problems.append(
                    f"the grant for the session of call {decided.call_id!r} is ignored: {why}"
                )
        return grants, problems

    def record(
        self, call_id: str, decision: p.ReviewDecision, grant: Grant | None
    ) -> ApprovalDecided:
        """The ``approval`` line of a decision (a grant sealed)."""
        if grant is None:
            return ApprovalDecided(call_id, decision)
        kind, *rest = grant.key
        return ApprovalDecided(
            call_id,
            decision,
            command=tuple(rest) if kind == "shell" else None,
            tool=rest[0] if kind == "tool" else None,
            approval_policy=grant.approval_policy,
            sandbox_mode=grant.sandbox_mode,
            unconfined=grant.unconfined,
            seal=seal(self.key, self.session_id, call_id, grant) if self.key else None,
        )


def outside_session(hidden: Iterable[str] = ()) -> Gate:
    """The gate of commands run outside any session (a tool or a hook called on its own):
    the default rules, without the variables ``hidden``."""
    return Gate(ExecRules(), hidden=frozenset(hidden))


def _grant_of(decided: ApprovalDecided) -> Grant | None:
    if decided.command is not None:
        key: tuple[str, ...] = ("shell", *decided.command)
    elif decided.tool is not None:
        key = ("tool", decided.tool)
    else:
        return None
    policy = next((one for one in POLICY_ORDER if one == decided.approval_policy), None)
    mode = next((one for one in MODE_ORDER if one == decided.sandbox_mode), None)
    if policy is None or mode is None:
        return None
    return Grant(key, policy, mode, decided.unconfined)


class ToolFacts(Protocol):
    """What the gate reads of a tool."""

    @property
    def needs_approval(self) -> bool | None: ...

    @property
    def mcp(self) -> tuple[str, str] | None: ...


class Tools(Protocol):
    """The session's tools, as the gate looks them up."""

    def get(self, name: str) -> ToolFacts | None: ...


class GateWriter(Protocol):
    """What the gate needs of a turn."""

    @property
    def turn_id(self) -> str: ...

    @property
    def waits(self) -> Waits: ...

    @property
    def grants(self) -> Sequence[Grant]: ...

    def emit(self, msg: p.EventMsg) -> None: ...

    def flush(self) -> None: ...

    def decided(self, line: ApprovalDecided, grant: Grant | None) -> None: ...


@attrs.define
class Clearance:
    """How a call runs."""

    output: str | None = None
    """The call does not run: this is its output."""
    abort: bool = False
    """The turn ends after this call (``abort``)."""
    run: CommandRunner | None = None
    """How the call's commands run (a ``shell`` call)."""
    write: WriteCheck | None = None
    """What a patch passes before it writes (an ``apply_patch`` call)."""


@attrs.frozen
class _Facts:
    call: Call
    command: tuple[str, ...] | p.ToolInvocation
    justification: str | None
    workdir: object = None


def facts_of(tools: Tools, call: p.ToolCall) -> _Facts | None:
    """What the rules need of ``call``; None when nothing of it can run anyway (not a function
    call, no such tool, arguments that are not a JSON object: the tool's own error)."""
    if not isinstance(call, p.FunctionCall):
        return None
    tool = tools.get(call.name)
    if tool is None:
        return None
    try:
        args = _json.loads(call.arguments) if call.arguments.strip() else {}
    except (ValueError, json.JSONDecodeError):
        return None
    if not isinstance(args, Mapping):
        return None
    if call.name == "shell":
        argv = shell_argv(args)
        if argv is None:
            return None
        escalate = (
            args.get("sandbox_permissions") == "require_escalated"
            or args.get("with_escalated_permissions") is True
        )
        justification = args.get("justification")
        return _Facts(
            Call(call.name, tuple(argv), escalate=escalate),
            tuple(argv),
            justification if isinstance(justification, str) and justification else None,
            args.get("workdir"),
        )
    server, name = tool.mcp if tool.mcp is not None else (None, call.name)
    invocation = p.ToolInvocation(server, name, dict(args))
    return _Facts(Call(call.name, needs_approval=tool.needs_approval), invocation, None)


async def clear(
    gate: Gate, tools: Tools, writer: GateWriter, cwd: str, call: p.ToolCall
) -> Clearance:
    """The clearance of ``call``: asked for when the rules say so (the wait is cancellable;
    cancelled, nothing of the call runs)."""
    facts = facts_of(tools, call)
    clearance = Clearance()
    unconfined = False
    program: str | None = None
    # The folder the call runs in: the turn's, or the call's own (``workdir``). The sandbox
    # makes the turn's writable (``root``); the call is judged and shown where it runs.
    root, cwd = cwd, workdir_of(cwd, facts.workdir if facts is not None else None)
    if facts is not None:
        env = gate.environment()
        ruled = rule(
            gate.rules,
            facts.call,
            path=env.get("PATH", os.defpath),
            writable=[*gate.writable(cwd, env), root],
        )
        if ruled.refuse is not None:
            return Clearance(output=ruled.refuse)
        if ruled.ask is not None:
            reason = ruled.ask
            if facts.justification is not None:
                reason = f"{reason}: {facts.justification}"
            decision = await _decision(
                gate, writer, cwd, call.call_id, facts, reason, unconfined=ruled.unconfined
            )
            match decision:
                case p.ReviewDecision.DENIED:
                    return Clearance(output=DENIED_OUTPUT)
                case p.ReviewDecision.ABORT:
                    return Clearance(output=ABORTED_OUTPUT, abort=True)
            unconfined = ruled.unconfined
        program = ruled.program
    retry = (
        facts is not None
        and facts.call.argv is not None
        and Policy(gate.rules.approval_policy) is Policy.ON_FAILURE
        and gate.sandbox is not None
        and not unconfined
    )
    judged = facts.call.argv if facts is not None else None

    async def run(
        argv: Sequence[str], at: str, timeout_ms: int, *, on_output: OutputSink | None = None
    ) -> CommandResult:
        ran = await gate.run(
            argv,
            cwd=at,
            timeout_ms=timeout_ms,
            confined=not unconfined,
            program=program if tuple(argv) == judged and at == cwd else None,
            root=root,
            on_output=on_output,
        )
        if not retry or ran.refused is None:
            return CommandResult(ran)
        assert facts is not None
        decision = await _decision(
            gate,
            writer,
            cwd,
            call.call_id,
            facts,
            f"the sandbox refused it: {ran.refused}",
            unconfined=True,
        )
        clearance.abort = decision is p.ReviewDecision.ABORT
        if decision in (p.ReviewDecision.APPROVED, p.ReviewDecision.APPROVED_FOR_SESSION):
            again = await gate.run(
                argv, cwd=at, timeout_ms=timeout_ms, confined=False, root=root, on_output=on_output
            )
            return CommandResult(again)
        return CommandResult(ran, NOT_OUTSIDE)

    clearance.run = run
    if call.name == "apply_patch":
        clearance.write = _patch_check(gate, writer, root, call.call_id, clearance)
    return clearance


async def _decision(
    gate: Gate,
    writer: GateWriter,
    cwd: str,
    call_id: str,
    facts: _Facts,
    reason: str,
    *,
    unconfined: bool,
) -> p.ReviewDecision:
    """The decision on ``call_id``: a grant for the session, or the answer to a request
    (``unconfined``: the call would run outside the sandbox)."""
    if gate.covered(writer.grants, facts.call, unconfined=unconfined):
        return p.ReviewDecision.APPROVED
    request = p.ExecApprovalRequest(call_id, writer.turn_id, facts.command, cwd, reason)
    decision = await _asked(writer, request)
    grant = None
    if decision is p.ReviewDecision.APPROVED_FOR_SESSION:
        rules = gate.rules
        grant = Grant(
            facts.call.key,
            rules.approval_policy,
            rules.sandbox_mode,
            unconfined=unconfined and rules.confined,
        )
    writer.decided(gate.record(call_id, decision, grant), grant)
    return decision


async def _asked(
    writer: GateWriter, request: p.ExecApprovalRequest | p.ApplyPatchApprovalRequest
) -> p.ReviewDecision:
    """Report ``request`` and wait for its decision (a failed callback denies it)."""
    writer.emit(request)
    # The call and its request are on disk before anyone is asked: after a crash, a resume
    # answers the call.
    writer.flush()
    try:
        return await writer.waits.wait(request)
    except Exception as exc:  # the callback's failure: the call does not run
        writer.emit(p.WarningEvent(f"the approval callback failed ({_what(exc)}): denied"))
        return p.ReviewDecision.DENIED


def _patch_check(
    gate: Gate, writer: GateWriter, cwd: str, call_id: str, clearance: Clearance
) -> WriteCheck:
    """What a patch of the call ``call_id`` passes before it writes: the rules on the files it
    writes (:func:`~relay._exec._rules.rule_writes`), then a decision when they ask."""

    async def check(changes: Sequence[p.FileChange]) -> tuple[str | None, bool]:
        env = gate.environment()
        guarded = gate.guarded or gate.sandbox
        own = [*guarded.protected, *guarded.hidden] if guarded is not None else []
        wanted = [path for c in changes for path in (c.path, c.move_path) if path is not None]
        confined = rules_sandbox(gate.rules)

        def resolved() -> tuple[list[str], list[str]]:
            writable = writable_paths(confined, cwd, env) if confined is not None else []
            return [os.path.realpath(x) for x in wanted], writable

        paths, writable = await in_thread(resolved)
        ruled = rule_writes(gate.rules, paths, writable=writable, guarded=own, granted=gate.written)
        if ruled.refuse is not None:
            return ruled.refuse, False
        if ruled.ask is None:
            return None, False
        asked = p.ApplyPatchApprovalRequest(call_id, writer.turn_id, changes, ruled.ask)
        decision = await _asked(writer, asked)
        writer.decided(gate.record(call_id, decision, None), None)
        if decision is p.ReviewDecision.APPROVED_FOR_SESSION:
            gate.written.update(paths)
        clearance.abort = decision is p.ReviewDecision.ABORT
        match decision:
            case p.ReviewDecision.DENIED:
                return DENIED_OUTPUT, True
            case p.ReviewDecision.ABORT:
                return ABORTED_OUTPUT, True
        return None, True

    return check


def _what(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


__all__ = [
    "DENIED_OUTPUT",
    "NOT_OUTSIDE",
    "ApprovalCallback",
    "Clearance",
    "Gate",
    "GateWriter",
    "Waits",
    "WriteCheck",
    "clear",
    "facts_of",
    "outside_session",
]
