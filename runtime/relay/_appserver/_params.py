"""The parameters of the methods ``relay app-server`` serves, read into plain values.

Each reader takes the ``params`` member as the client sent it and returns a frozen value, or
raises :class:`~._rpc.RpcError` with ``-32602`` and a message that starts with the field it is
about (``input[1].url: expected a string``). A field relay has no counterpart for, and that
changes nothing of what a session does (``serviceName``, ``personality``), is left unread; one
that would change it is refused by name rather than ignored (docs/codex-compat.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._base import _protocol as p
from .._base._sandbox_config import APPROVAL_POLICIES, SANDBOX_MODES
from ._rpc import Code, RpcError

#: The ``SandboxPolicy`` types of the protocol that are one of relay's sandbox modes.
SANDBOX_POLICY_MODES = {
    "readOnly": "read-only",
    "workspaceWrite": "workspace-write",
    "dangerFullAccess": "danger-full-access",
}


def invalid(field: str, what: str) -> RpcError:
    """The error of a bad parameter: ``-32602``, naming the field."""
    return RpcError(Code.INVALID_PARAMS, f"{field}: {what}")


class Fields:
    """The members of a ``params`` object, read one at a time with their type checked."""

    def __init__(self, params: Any, where: str = "params") -> None:
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise invalid(where, "expected an object")
        self._params = params
        self._where = "" if where == "params" else f"{where}."

    def name(self, key: str) -> str:
        """How an error names the member ``key``."""
        return f"{self._where}{key}"

    def raw(self, key: str) -> Any:
        """The member as sent (None when absent or null)."""
        return self._params.get(key)

    def text(self, key: str, *, required: bool = False) -> str | None:
        """A string member."""
        value = self._params.get(key)
        if value is None:
            if required:
                raise invalid(self.name(key), "missing")
            return None
        if not isinstance(value, str):
            raise invalid(self.name(key), "expected a string")
        return value

    def flag(self, key: str) -> bool | None:
        """A boolean member."""
        value = self._params.get(key)
        if value is None or isinstance(value, bool):
            return value
        raise invalid(self.name(key), "expected a boolean")

    def choice(self, key: str, choices: tuple[str, ...]) -> str | None:
        """A string member that is one of ``choices``."""
        value = self.text(key)
        if value is not None and value not in choices:
            raise invalid(self.name(key), f"{value!r} is not one of {', '.join(choices)}")
        return value


@attrs.frozen
class ThreadSettings:
    """What ``thread/start`` and ``thread/resume`` may set for the thread's session."""

    model: str | None = None
    """The model (default: the configuration's, or what a resumed session recorded)."""
    model_provider: str | None = None
    """The provider, by its name in the configuration."""
    cwd: str | None = None
    """The working directory."""
    approval_policy: str | None = None
    """When to ask before a command runs."""
    sandbox: str | None = None
    """What commands may touch."""
    base_instructions: str | None = None
    """The instructions in place of relay's own."""
    developer_instructions: str | None = None
    """Instructions added as a developer message."""
    ephemeral: bool = False
    """Write no rollout (``thread/start`` only)."""


def read_settings(fields: Fields, *, ephemeral: bool) -> ThreadSettings:
    policy = fields.raw("approvalPolicy")
    if isinstance(policy, Mapping):
        raise invalid(fields.name("approvalPolicy"), "granular policies are not supported")
    overrides = fields.raw("config")
    if overrides is not None and (not isinstance(overrides, Mapping) or overrides):
        raise invalid(
            fields.name("config"),
            "configuration overrides per thread are not supported; give them to the server "
            "(relay app-server -c KEY=VALUE)",
        )
    cwd = fields.text("cwd")
    if cwd is not None and ("\0" in cwd or not cwd):
        raise invalid(fields.name("cwd"), "expected a path")
    return ThreadSettings(
        model=fields.text("model"),
        model_provider=fields.text("modelProvider"),
        cwd=cwd,
        approval_policy=fields.choice("approvalPolicy", APPROVAL_POLICIES),
        sandbox=fields.choice("sandbox", SANDBOX_MODES),
        base_instructions=fields.text("baseInstructions"),
        developer_instructions=fields.text("developerInstructions"),
        ephemeral=bool(fields.flag("ephemeral")) if ephemeral else False,
    )


def thread_start(params: Any) -> ThreadSettings:
    """The parameters of ``thread/start``."""
    return read_settings(Fields(params), ephemeral=True)


@attrs.frozen
class ThreadResume:
    """The parameters of ``thread/resume``."""

    thread_id: str
    """The thread to continue: a session id."""
    settings: ThreadSettings
    """What the resumed session changes."""
    exclude_turns: bool = False
    """Leave the thread's past turns out of the answer (they are read from its whole
    rollout)."""


def thread_resume(params: Any) -> ThreadResume:
    """The parameters of ``thread/resume``."""
    fields = Fields(params)
    thread_id = fields.text("threadId", required=True)
    assert thread_id is not None
    exclude = bool(fields.flag("excludeTurns"))
    return ThreadResume(thread_id, read_settings(fields, ephemeral=False), exclude_turns=exclude)


def thread_id(params: Any) -> str:
    """The ``threadId`` of a method that takes nothing else (``thread/compact/start``)."""
    found = Fields(params).text("threadId", required=True)
    assert found is not None
    return found


@attrs.frozen
class SandboxAsked:
    """A ``SandboxPolicy`` in relay's terms."""

    mode: str
    """The sandbox mode."""
    writable_roots: tuple[str, ...] = ()
    """Folders writable besides the working directory (``workspace-write``)."""
    network_access: bool = False
    """Whether commands reach the network."""


def _sandbox_policy(value: Any) -> SandboxAsked | None:
    if value is None:
        return None
    fields = Fields(value, "sandboxPolicy")
    kind = fields.text("type", required=True)
    mode = SANDBOX_POLICY_MODES.get(kind or "")
    if mode is None:
        raise invalid("sandboxPolicy.type", f"{kind!r} is not one of relay's sandbox modes")
    roots = fields.raw("writableRoots") or []
    if not isinstance(roots, list) or not all(isinstance(root, str) for root in roots):
        raise invalid("sandboxPolicy.writableRoots", "expected an array of paths")
    network = fields.flag("networkAccess")
    return SandboxAsked(mode, tuple(roots), bool(network))


@attrs.frozen
class TurnStart:
    """The parameters of ``turn/start``."""

    thread_id: str
    """The thread the turn runs in."""
    items: tuple[p.InputItem, ...]
    """The user's input."""
    cwd: str | None = None
    """The working directory of this turn and later ones."""
    model: str | None = None
    """The model of this turn and later ones."""
    effort: str | None = None
    """The reasoning effort of this turn and later ones."""
    approval_policy: str | None = None
    """When to ask before a command runs, for this turn and later ones."""
    sandbox: SandboxAsked | None = None
    """What commands may touch, as the client asked (its ``sandboxPolicy``)."""
    output_schema: Any = attrs.field(default=None, hash=False)
    """A JSON Schema the turn's answer is to fit (None: free text)."""


def input_item(value: Any, where: str) -> p.InputItem:
    fields = Fields(value, where)
    kind = fields.text("type", required=True)
    if kind == "text":
        text = fields.text("text", required=True)
        assert text is not None
        return p.Text(text)
    if kind == "image":
        if fields.raw("fileId") is not None and fields.raw("url") is None:
            raise invalid(fields.name("fileId"), "images by file id are not supported; send a url")
        url = fields.text("url", required=True)
        assert url is not None
        return p.Image(url)
    if kind == "localImage":
        path = fields.text("path", required=True)
        assert path is not None
        return p.LocalImage(path)
    raise invalid(fields.name("type"), f"{kind!r} input is not supported (text, image, localImage)")


def turn_start(params: Any) -> TurnStart:
    """The parameters of ``turn/start``."""
    fields = Fields(params)
    thread = fields.text("threadId", required=True)
    assert thread is not None
    raw_input = fields.raw("input")
    if not isinstance(raw_input, list):
        raise invalid("input", "missing" if raw_input is None else "expected an array")
    if not raw_input:
        raise invalid("input", "must hold at least one item")
    items = tuple(input_item(value, f"input[{n}]") for n, value in enumerate(raw_input))
    policy = fields.raw("approvalPolicy")
    if isinstance(policy, Mapping):
        raise invalid("approvalPolicy", "granular policies are not supported")
    schema = fields.raw("outputSchema")
    if schema is not None and not isinstance(schema, Mapping | bool):
        raise invalid("outputSchema", "expected a JSON Schema (an object)")
    effort = fields.text("effort")
    if effort == "":
        raise invalid("effort", "must not be empty")
    return TurnStart(
        thread_id=thread,
        items=items,
        cwd=fields.text("cwd"),
        model=fields.text("model"),
        effort=effort,
        approval_policy=fields.choice("approvalPolicy", APPROVAL_POLICIES),
        sandbox=_sandbox_policy(fields.raw("sandboxPolicy")),
        output_schema=schema,
    )


@attrs.frozen
class TurnInterrupt:
    """The parameters of ``turn/interrupt``."""

    thread_id: str
    """The thread."""
    turn_id: str
    """The turn to interrupt: the one running."""


def turn_interrupt(params: Any) -> TurnInterrupt:
    """The parameters of ``turn/interrupt``."""
    fields = Fields(params)
    thread = fields.text("threadId", required=True)
    turn = fields.text("turnId", required=True)
    assert thread is not None and turn is not None
    return TurnInterrupt(thread, turn)


#: The client's decisions on a command, as relay's: an accept that amends a policy relay does
#: not have (an exec policy, a network rule) is an accept for the session, or for the call.
DECISIONS = {
    "accept": p.ReviewDecision.APPROVED,
    "acceptForSession": p.ReviewDecision.APPROVED_FOR_SESSION,
    "acceptWithExecpolicyAmendment": p.ReviewDecision.APPROVED_FOR_SESSION,
    "applyNetworkPolicyAmendment": p.ReviewDecision.APPROVED,
    "decline": p.ReviewDecision.DENIED,
    "cancel": p.ReviewDecision.ABORT,
}


def approval_decision(result: Any, error: Any) -> tuple[p.ReviewDecision, str | None]:
    """relay's decision on the client's reply to an approval request, and what was wrong with
    the reply when it was no decision: then the call is denied, never run unasked."""
    if error is not None:
        return p.ReviewDecision.DENIED, "the client answered the approval request with an error"
    decision = result.get("decision") if isinstance(result, Mapping) else None
    if isinstance(decision, Mapping) and len(decision) == 1:
        decision = next(iter(decision))
    if isinstance(decision, str) and decision in DECISIONS:
        return DECISIONS[decision], None
    return p.ReviewDecision.DENIED, f"the client's decision {decision!r} is none relay knows"


def client_info(params: Any) -> tuple[str, str]:
    """``initialize``'s ``clientInfo``: the client's name and version."""
    raw = Fields(params).raw("clientInfo")
    if raw is None:
        raise invalid("clientInfo", "missing")
    info = Fields(raw, "clientInfo")
    name = info.text("name", required=True)
    version = info.text("version", required=True)
    assert name is not None and version is not None
    return name, version


__all__ = [
    "SANDBOX_POLICY_MODES",
    "DECISIONS",
    "Fields",
    "SandboxAsked",
    "ThreadResume",
    "ThreadSettings",
    "TurnInterrupt",
    "TurnStart",
    "approval_decision",
    "client_info",
    "input_item",
    "invalid",
    "read_settings",
    "thread_id",
    "thread_resume",
    "thread_start",
    "turn_interrupt",
    "turn_start",
]
