"""A call's clearance: what the approval policy lets it do before it runs (docs/approvals.md).

The port's ``run_tool`` asks :func:`clear` before every call. The rules are
:func:`relay._core._approvals.gate`'s; this module asks (an ``exec_approval_request``, then
the wait), records the decision, and says how the call runs.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import attrs

from .._base import _json
from .._base import _protocol as p
from ._approvals import Call, Policy, gate
from ._history import ABORTED_OUTPUT
from ._tools import ToolRegistry
from ._wiring import Wiring

#: The output of a call whose request was denied.
DENIED_OUTPUT = "denied: the user did not approve this call, and nothing of it ran"


class ApprovalWriter(Protocol):
    """What asking needs of a turn's writer."""

    @property
    def turn_id(self) -> str: ...

    def emit(self, msg: p.EventMsg) -> None: ...

    def flush(self) -> None: ...

    def approval(
        self, call_id: str, decision: p.ReviewDecision, grant: tuple[str, ...] | None
    ) -> None: ...


@attrs.define
class Clearance:
    """How a call runs."""

    output: str | None = None
    """The call does not run: this is its output."""
    abort: bool = False
    """The turn ends after this call (``abort``)."""
    unconfined: bool = False
    """The command runs outside the sandbox (approved)."""
    ask_unconfined: Callable[[str], Awaitable[bool]] | None = None
    """Under ``on-failure``: ask to run the command outside the sandbox, for a reason (the
    sandbox's refusal); True once approved. An ``abort`` sets :attr:`abort`."""


@attrs.frozen
class _Facts:
    call: Call
    command: tuple[str, ...] | p.ToolInvocation
    justification: str | None


def facts_of(tools: ToolRegistry, call: p.ToolCall) -> _Facts | None:
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
        argv = args.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
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
        )
    server, name = tool.mcp if tool.mcp is not None else (None, tool.name)
    invocation = p.ToolInvocation(server, name, dict(args))
    return _Facts(Call(call.name, needs_approval=tool.needs_approval), invocation, None)


async def clear(wiring: Wiring, writer: ApprovalWriter, cwd: str, call: p.ToolCall) -> Clearance:
    """The clearance of ``call``: asked for when the policy says so (the wait is
    cancellable; cancelled, nothing of the call runs)."""
    facts = facts_of(wiring.tools, call)
    if facts is None:
        return Clearance()
    config = wiring.config
    policy = Policy(config.approval_policy)
    sandboxed = config.sandbox_mode != "danger-full-access"
    clearance = Clearance()
    if facts.call.argv is not None and policy is Policy.ON_FAILURE and sandboxed:

        async def ask_unconfined(reason: str) -> bool:
            decision = await _decision(
                wiring, writer, cwd, call.call_id, facts, reason, outside=True
            )
            clearance.abort = decision is p.ReviewDecision.ABORT
            return decision in (p.ReviewDecision.APPROVED, p.ReviewDecision.APPROVED_FOR_SESSION)

        clearance.ask_unconfined = ask_unconfined
    ruled = gate(policy, facts.call, sandboxed=sandboxed)
    if ruled.refuse is not None:
        return Clearance(output=ruled.refuse)
    if ruled.ask is None:
        return clearance
    reason = ruled.ask if facts.justification is None else f"{ruled.ask}: {facts.justification}"
    decision = await _decision(
        wiring, writer, cwd, call.call_id, facts, reason, outside=ruled.unconfined
    )
    match decision:
        case p.ReviewDecision.APPROVED | p.ReviewDecision.APPROVED_FOR_SESSION:
            clearance.unconfined = ruled.unconfined
            return clearance
        case p.ReviewDecision.DENIED:
            return Clearance(output=DENIED_OUTPUT)
        case p.ReviewDecision.ABORT:
            return Clearance(output=ABORTED_OUTPUT, abort=True)


async def _decision(
    wiring: Wiring,
    writer: ApprovalWriter,
    cwd: str,
    call_id: str,
    facts: _Facts,
    reason: str,
    *,
    outside: bool,
) -> p.ReviewDecision:
    """The decision on ``call_id``: a grant for the session, or the answer to a request
    (``outside``: the call would run outside the sandbox)."""
    policy = Policy(wiring.config.approval_policy)
    approvals = wiring.approvals
    grant = facts.call.grant
    # Under untrusted, a grant is for running the command in the sandbox: a call that asks to
    # leave it is asked about all the same (under the other policies, every question is about
    # running outside, and so is every grant).
    if grant in approvals.grants and not (outside and policy is Policy.UNTRUSTED):
        return p.ReviewDecision.APPROVED
    request = p.ExecApprovalRequest(call_id, writer.turn_id, facts.command, cwd, reason)
    writer.emit(request)
    # The call and its request are on disk before anyone is asked: after a crash, a resume
    # answers the call.
    writer.flush()
    try:
        decision = await approvals.wait(request)
    except Exception as exc:  # the callback's failure: the call does not run
        writer.emit(p.WarningEvent(f"the approval callback failed ({_what(exc)}): denied"))
        decision = p.ReviewDecision.DENIED
    for_session = decision is p.ReviewDecision.APPROVED_FOR_SESSION
    if for_session:
        approvals.grants.add(grant)
    writer.approval(call_id, decision, grant if for_session else None)
    return decision


def _what(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


__all__ = ["DENIED_OUTPUT", "Clearance", "clear", "facts_of"]
