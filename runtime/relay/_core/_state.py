"""The session's mutable state in one place, and the state a resumed session starts from.

:class:`SessionState` is everything a session knows that outlives a turn: the history (with its
usage bookkeeping), the turn defaults, the reference context, the compaction windows and the
total usage. A resumed session is a new session whose state is restored from a
:class:`ResumedState`; nothing else differs.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import attrs

from .._base import _protocol as p
from .._base._exec_rules import ExecRules
from .._base._rollout_lines import ApprovalDecided
from .._exec._rules import Grant
from ._context import TurnSettings, WorldState
from ._history import History, HistoryView
from ._work_state import WorkState


def _new_window_id() -> str:
    return str(uuid.uuid4())


@attrs.frozen
class ResumedState:
    """What a session resumes from: the state rebuilt from its rollout (``docs/rollout.md``)."""

    session_id: str
    """The resumed session's id."""
    rollout_path: Path | None
    """The rollout file to append to."""
    history: tuple[p.ResponseItem, ...]
    """The history as of the last completed write."""
    reference_world: WorldState | None = None
    """The reference context, unless a later compaction cleared it."""
    defaults: TurnSettings | None = None
    """Model, cwd and effort of the latest ``turn_context``."""
    window_number: int = 0
    """Compactions so far."""
    first_window_id: str | None = None
    """Id of the session's first window."""
    previous_window_id: str | None = None
    """Id of the window before the current one."""
    window_id: str | None = None
    """Id of the current window."""
    last_response_tokens: int = 0
    """Restored usage: ``total_tokens`` of the last response."""
    token_ratio: float = 1.0
    """Server tokens per estimated token, as the session last calibrated it."""
    tokens_since_model: int = 0
    """Restored usage: estimate of the items after the last model item."""
    items_since_model: int = 0
    """How many of the last items came after the last model item."""
    total_usage: p.TokenUsage = attrs.field(factory=p.TokenUsage)
    """Usage summed over the session so far."""
    work_state: WorkState = attrs.field(factory=WorkState)
    """The work-state record as of the last completed write."""
    outputs: Mapping[str, str] = attrs.field(factory=dict)
    """The originals of the tool outputs masked so far, by call id (what ``recall`` returns)."""
    model: str | None = None
    """The model the session last used or announced (``turn_context``, ``session_configured``)."""
    model_provider: str | None = None
    """The provider the session last announced (``session_configured``, else ``session_meta``)."""
    submissions: int = 0
    """The number of the last generated submission id; the resumed session goes on after it."""
    items: int = 0
    """The number of the last generated item id; the resumed session goes on after it."""
    spans: tuple[tuple[str, str], ...] = ()
    """The trace id and span id (hex) of each earlier run of the session that was traced, as
    its rollout's ``trace`` lines give them, oldest first."""
    op_types: tuple[str, ...] = ()
    """The types of the custom ops the session ran: a resume needs a task for each."""
    grants: tuple[ApprovalDecided, ...] = ()
    """The ``approved_for_session`` decisions, as recorded: the session keeps those whose
    seal holds (docs/approvals.md)."""
    rules: ExecRules | None = None
    """The rules the session last recorded (its latest ``rules`` line), if any."""
    unanswered: tuple[p.ToolOutput, ...] = ()
    """Outputs to record first, for the calls that had none when the session stopped."""
    agent_events: tuple[p.SubAgentSpawned | p.SubAgentEnded, ...] = ()
    """What the rollout says of the session's sub-agents, in order: a resume opens again those
    that were open (docs/agents.md)."""
    first_events: tuple[tuple[str, p.EventMsg], ...] = ()
    """Events the resumed session reports right after ``session_configured``, as
    ``(event id, message)``: what the resume found in the rollout, what its host knows."""


@attrs.frozen
class SessionSnapshot:
    """What a session knows between turns, at one moment (:meth:`relay.Session.snapshot`):
    nothing in it changes afterwards."""

    defaults: TurnSettings
    """Model, cwd and effort of the next turn."""
    history: HistoryView
    """The conversation history, with its usage figures."""
    reference_world: WorldState | None
    """The world state the history's initial context describes; None = recorded in full at
    the next turn."""
    last_turn_model: str | None
    """The model of the last regular turn."""
    total_usage: p.TokenUsage
    """Usage summed over the session so far."""
    window_number: int
    """Compactions so far."""
    window_id: str
    """Id of the current window."""
    first_window_id: str
    """Id of the session's first window."""
    previous_window_id: str | None
    """Id of the window before the current one."""
    work_state: WorkState
    """A copy of the work-state record."""
    outputs: Mapping[str, str]
    """The originals of the tool outputs masked so far, by call id."""
    token_ratio: float
    """Server tokens per estimated token."""


@attrs.frozen
class SessionStatistics:
    """A snapshot of what the session is doing."""

    submissions_pending: int
    """Submissions not yet handled."""
    running_turn: str | None
    """The turn id of the running task, if any."""
    running_kind: str | None
    """Its kind."""
    queued_turns: int
    """Turns waiting for the running task to end."""
    events_emitted: int
    """Events so far."""
    history_items: int
    """Items in the history."""
    background_compaction: str | None = None
    """Where the session's background compaction is (``running``, ``ready`` or ``failed``),
    when there is one that no turn has taken yet."""
    last_seq: int = 0
    """The ``seq`` of the last event (``events_emitted`` unless the numbering started later:
    an epoch's, ``docs/rollout.md``)."""
    lingering: tuple[str, ...] = ()
    """Tasks that were stopped and whose code has not returned (it ignores cancellation), as
    ``"KIND TURN_ID"``: the session's end waits for them."""
    events_unread: int = 0
    """Events emitted and not read yet: at most 1,000 until a reader takes the stream
    (:meth:`Session.events <relay.Session.events>`), every one after."""
    events_dropped: int = 0
    """Events dropped because no reader had taken the stream when more were waiting."""
    pending_approvals: tuple[str, ...] = ()
    """The call ids that wait for an ``exec_approval`` op (docs/approvals.md)."""


@attrs.define(eq=False)
class SessionState:
    """What a session knows between turns; only the session's writer changes it
    (:class:`~._session_writer.SessionWriter`)."""

    defaults: TurnSettings
    """Model, cwd and effort of the next turn."""
    history: History = attrs.field(factory=History)
    """The conversation history and its usage bookkeeping."""
    reference_world: WorldState | None = None
    """The world state the history's initial context describes; None = record it in full."""
    last_turn_model: str | None = None
    """The model of the last regular turn (for model downshift)."""
    total_usage: p.TokenUsage = attrs.field(factory=p.TokenUsage)
    """Usage summed over the session so far."""
    window_number: int = 0
    """Compactions so far."""
    window_id: str = attrs.field(factory=_new_window_id)
    """Id of the current window."""
    first_window_id: str = attrs.field(
        default=attrs.Factory(lambda self: self.window_id, takes_self=True)
    )
    """Id of the session's first window."""
    previous_window_id: str | None = None
    """Id of the window before the current one."""
    work_state: WorkState = attrs.field(factory=WorkState)
    """The work-state record: what the session did, and the pinned user messages."""
    outputs: dict[str, str] = attrs.field(factory=dict)
    """The originals of the tool outputs masked so far, by call id (what ``recall`` returns)."""
    grants: tuple[Grant, ...] = ()
    """What ``approved_for_session`` decisions cover, each with the rules it was made under
    (docs/approvals.md)."""
    token_ratio: float = 1.0
    """Server tokens per estimated token, from the last request a server counted (1.0, the
    estimate as it is, until one did): estimates of the history are scaled by it."""

    @classmethod
    def restored(cls, resumed: ResumedState, defaults: TurnSettings) -> SessionState:
        """The state of a session resumed from ``resumed`` (``defaults`` when it has none)."""
        history = History()
        history.restore(
            resumed.history,
            last_response_tokens=resumed.last_response_tokens,
            tokens_since_model=resumed.tokens_since_model,
            items_since_model=resumed.items_since_model,
        )
        window_id = resumed.window_id or _new_window_id()
        return cls(
            defaults=resumed.defaults or defaults,
            history=history,
            reference_world=resumed.reference_world,
            last_turn_model=resumed.defaults.model if resumed.defaults is not None else None,
            total_usage=resumed.total_usage,
            window_number=resumed.window_number,
            window_id=window_id,
            first_window_id=resumed.first_window_id or window_id,
            previous_window_id=resumed.previous_window_id,
            work_state=WorkState(list(resumed.work_state.entries), list(resumed.work_state.pinned)),
            outputs=dict(resumed.outputs),
            token_ratio=resumed.token_ratio,
        )

    def snapshot(self) -> SessionSnapshot:
        """This state as it is now, frozen."""
        return SessionSnapshot(
            defaults=self.defaults,
            history=self.history.view(),
            reference_world=self.reference_world,
            last_turn_model=self.last_turn_model,
            total_usage=self.total_usage,
            window_number=self.window_number,
            window_id=self.window_id,
            first_window_id=self.first_window_id,
            previous_window_id=self.previous_window_id,
            work_state=WorkState(list(self.work_state.entries), list(self.work_state.pinned)),
            outputs=MappingProxyType(dict(self.outputs)),
            token_ratio=self.token_ratio,
        )

    def start_window(self) -> None:
        """Begin the next compaction window."""
        self.window_number += 1
        self.previous_window_id = self.window_id
        self.window_id = _new_window_id()

    def add_usage(self, usage: p.TokenUsage) -> None:
        """Add a response's usage to the total."""
        self.total_usage = self.total_usage + usage

    def token_count(
        self, last: p.TokenUsage, window: int | None, *, estimated: bool = False
    ) -> p.TokenCount:
        """A ``token_count`` event for ``last`` against the total so far (``estimated``: the
        size of the context is relay's estimate, not a server's count)."""
        return p.TokenCount(p.TokenUsageInfo(self.total_usage, last, window, estimated))


__all__ = ["ResumedState", "SessionSnapshot", "SessionState", "SessionStatistics"]
