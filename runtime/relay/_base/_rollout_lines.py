"""The payload of each rollout line type (docs/rollout.md), defined once.

A rollout line is ``{"timestamp", "type", "payload"}``. The recorder
(``relay._core._recorder``) writes each payload here with the codec, ``to_json``; the reader
(``relay._rollout._reader``) decodes it with ``from_json``. ``response_item`` and
``event_msg`` lines carry protocol values (:data:`~relay._base._protocol.ResponseItem`,
:data:`~relay._base._protocol.EventMsg`); every other line type carries one class of this
module, named in :data:`PAYLOADS`.

A payload's JSON form is its fields in the order they are declared: that order is the file's,
and a rollout's bytes are compared with Codex's and read back by every later relay, so a
field is never moved, renamed or left out except as :class:`Compacted` says.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypeAlias

import attrs
import cattrs.gen

from . import _protocol as p
from ._codec import converter
from ._exec_rules import ExecRules


@attrs.frozen
class TurnSettings:
    """What a turn runs with; the session's defaults change with overrides."""

    model: str
    """Model name."""
    cwd: str
    """Working directory."""
    effort: str | None = None
    """Reasoning effort."""

    def overridden(self, model: str | None, cwd: str | None, effort: str | None) -> TurnSettings:
        """These settings with those given (unset: kept); a relative ``cwd`` is taken against
        this one, and recorded absolute, so that a resume from elsewhere works there."""
        return TurnSettings(
            model or self.model,
            os.path.abspath(os.path.join(self.cwd, cwd)) if cwd is not None else self.cwd,
            effort if effort is not None else self.effort,
        )


@attrs.frozen
class WorldState:
    """The facts behind the environment context, snapshotted at the start of a window; the
    payload of a ``world_state`` line."""

    cwd: str
    """Working directory."""
    shell: str
    """The user's shell."""
    current_date: str
    """``YYYY-MM-DD``."""
    timezone: str
    """IANA name or UTC offset."""


@attrs.frozen
class SessionMeta:
    """The ``session_meta`` payload: which session the rollout belongs to."""

    id: str
    """Session id."""
    created: str | None = None
    """When the session was created (ISO 8601)."""
    cwd: str | None = None
    """Working directory at creation."""
    model: str | None = None
    """Configured model."""
    model_provider: str | None = None
    """Configured provider name."""
    relay_version: str | None = None
    """Version of relay that created the file."""
    parent_id: str | None = None
    """A sub-agent's: its parent session's id (docs/agents.md)."""
    agent_path: str | None = None
    """A sub-agent's: its place in its tree (``/root/1/2``)."""
    agent_role: str | None = None
    """A sub-agent's: the role it was spawned in."""


@attrs.frozen
class TurnContext:
    """The ``turn_context`` payload: the settings and reference world a turn ran with."""

    model: str
    """Model name."""
    cwd: str
    """Working directory."""
    effort: str | None = None
    """Reasoning effort."""
    instructions_hash: str | None = None
    """Short hash of the instructions (16 hex digits of their SHA-256)."""
    world: WorldState | None = None
    """The world the history's initial context describes (the reference context)."""

    @property
    def settings(self) -> TurnSettings:
        """Model, cwd and effort."""
        return TurnSettings(self.model, self.cwd, self.effort)


@attrs.frozen
class Compacted:
    """The ``compacted`` payload: an installed compaction.

    ``work_state`` and ``masked_outputs`` are left out of the JSON form while they are unset
    (no record, no masking); every other field is always written, ``null`` when unset. An
    old-style line has only ``message``.
    """

    message: str
    """The summary text (local backend), else empty."""
    replacement_history: tuple[p.ResponseItem, ...] | None = None
    """The new history; None on an old-style line (rebuilt when resuming)."""
    window_number: int | None = None
    """Compactions so far, this one included."""
    first_window_id: str | None = None
    """Id of the session's first window."""
    previous_window_id: str | None = None
    """Id of the window this compaction closed."""
    window_id: str | None = None
    """Id of the window it opened."""
    receipt: p.CompactionReceipt | None = None
    """What it did."""
    work_state: Mapping[str, Any] | None = None
    """The work-state record as it stood (JSON), when there was one."""
    masked_outputs: Mapping[str, str] = attrs.field(factory=dict)
    """The originals of the tool outputs this compaction masked, by call id."""


@attrs.frozen
class GeneratedIds:
    """The ``ids`` payload: how far the session's counters have gone, so that a resume
    continues them: its generated ids, and what it learned of how its server counts tokens.

    ``token_ratio`` is left out of the JSON form while it is unset (no server counted more
    than relay's estimate).
    """

    submission: int
    """The number of the last generated submission id (``sub-N``)."""
    item: int
    """The number of the last generated item id (``user-N``, ``msg-N``, ...)."""
    token_ratio: float | None = None
    """Server tokens per estimated token, as the session last calibrated it (docs/session.md);
    None: 1.0, the estimate as it is."""


@attrs.frozen
class StartedOp:
    """The ``op`` payload: an op of a registered type that started a task (a custom op), so
    that a resume knows the op types the session ran."""

    id: str
    """The submission id (the turn id of its task)."""
    op: p.CustomOp
    """The op, written as the codec writes it: ``{"type": ..., **fields}``."""


@attrs.frozen
class SessionSpan:
    """The ``trace`` payload: the span of one run of the session in a trace (written when the
    run was traced), so that a resume links its own span to it."""

    trace_id: str
    """The trace id, 32 hex digits."""
    span_id: str
    """The session span's id, 16 hex digits."""


@attrs.frozen
class ApprovalDecided:
    """The payload of an ``approval`` line: a decision on a call that waited for one. An
    ``approved_for_session`` decision names what it covers, the argv or the tool, so that a
    resume holds it, with the rules it was made under and its seal (docs/approvals.md): a
    grant whose seal does not hold is ignored."""

    call_id: str
    decision: p.ReviewDecision
    command: tuple[str, ...] | None = None
    tool: str | None = None
    approval_policy: str | None = None
    """The policy the grant was made under."""
    sandbox_mode: str | None = None
    """The sandbox mode the grant was made under."""
    unconfined: bool = False
    """The grant approved running the command outside the sandbox."""
    seal: str | None = None
    """The grant's HMAC under relay's key (``relay._exec._rules.seal``)."""


@attrs.frozen
class ToolIntent:
    """The payload of an ``intent`` line: the call is about to run (written, and flushed,
    before anything of it runs; its output is its outcome). A call with an intent and no
    output was running when its process ended."""

    call_id: str


LinePayload: TypeAlias = (
    SessionMeta
    | TurnContext
    | WorldState
    | Compacted
    | GeneratedIds
    | StartedOp
    | SessionSpan
    | ApprovalDecided
    | ToolIntent
    | ExecRules
)
"""The payloads of the line types other than ``response_item`` and ``event_msg``."""

#: Each line type and what its payload decodes as, in the order docs/rollout.md lists them.
PAYLOADS: dict[str, Any] = {
    "session_meta": SessionMeta,
    "response_item": p.ResponseItem,
    "event_msg": p.EventMsg,
    "turn_context": TurnContext,
    "world_state": WorldState,
    "ids": GeneratedIds,
    "op": StartedOp,
    "trace": SessionSpan,
    "rules": ExecRules,
    "approval": ApprovalDecided,
    "intent": ToolIntent,
    "compacted": Compacted,
}

#: The line type of each payload class.
LINE_TYPES: dict[type, str] = {
    cls: kind for kind, cls in PAYLOADS.items() if isinstance(cls, type) and attrs.has(cls)
}


def line_type(payload: LinePayload) -> str:
    """The ``type`` of the line that carries ``payload``."""
    return LINE_TYPES[type(payload)]


# Made when a compaction is first written, as the codec makes every encoder.
converter.register_unstructure_hook_factory(
    lambda cls: cls is Compacted,
    lambda cls: cattrs.gen.make_dict_unstructure_fn(
        cls,
        converter,
        work_state=cattrs.gen.override(omit_if_default=True),
        masked_outputs=cattrs.gen.override(omit_if_default=True),
    ),
)

# Ids with no calibration are written as before the ratio was recorded.
converter.register_unstructure_hook_factory(
    lambda cls: cls is GeneratedIds,
    lambda cls: cattrs.gen.make_dict_unstructure_fn(
        cls, converter, token_ratio=cattrs.gen.override(omit_if_default=True)
    ),
)

# A decision with no grant is written as before the grants recorded their rules.
converter.register_unstructure_hook_factory(
    lambda cls: cls is ApprovalDecided,
    lambda cls: cattrs.gen.make_dict_unstructure_fn(
        cls,
        converter,
        approval_policy=cattrs.gen.override(omit_if_default=True),
        sandbox_mode=cattrs.gen.override(omit_if_default=True),
        unconfined=cattrs.gen.override(omit_if_default=True),
        seal=cattrs.gen.override(omit_if_default=True),
    ),
)

# A root's first line is written as before sub-agents were recorded.
converter.register_unstructure_hook_factory(
    lambda cls: cls is SessionMeta,
    lambda cls: cattrs.gen.make_dict_unstructure_fn(
        cls,
        converter,
        parent_id=cattrs.gen.override(omit_if_default=True),
        agent_path=cattrs.gen.override(omit_if_default=True),
        agent_role=cattrs.gen.override(omit_if_default=True),
    ),
)


__all__ = [
    "LINE_TYPES",
    "PAYLOADS",
    "ApprovalDecided",
    "Compacted",
    "GeneratedIds",
    "LinePayload",
    "SessionMeta",
    "SessionSpan",
    "StartedOp",
    "ToolIntent",
    "TurnContext",
    "TurnSettings",
    "WorldState",
    "line_type",
]
