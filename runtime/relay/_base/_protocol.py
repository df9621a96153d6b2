"""The protocol: ops in, events out, and the response items that make up the history.

Every message is a frozen attrs class. Its JSON form is an object whose ``"type"`` is the
snake_case name of the class, with a trailing ``Event`` or ``Item`` dropped (``ErrorEvent`` is
``error``, ``UserMessageItem`` is ``user_message``). The codec in :mod:`relay._base._codec` is
generated from these classes; nothing here knows about JSON.

Ops are imperatives (``UserTurn``), events are past-tense facts (``TurnStarted``). Closed sets
are ``TypeAlias`` unions meant to be dispatched with ``match`` and ``assert_never``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import attrs

from ._agent_events import AgentCallOutcome as AgentCallOutcome
from ._agent_events import AgentRef as AgentRef
from ._agent_events import AgentState as AgentState
from ._agent_events import AgentStatus as AgentStatus
from ._agent_events import AgentTool as AgentTool
from ._agent_events import SubAgentEnded as SubAgentEnded
from ._agent_events import SubAgentSpawned as SubAgentSpawned
from ._agent_events import frozen_states
from ._effects import ApplyPatchApprovalRequest as ApplyPatchApprovalRequest
from ._effects import CallStatus as CallStatus
from ._effects import ChangeKind as ChangeKind
from ._effects import ExecCommandOutputDelta as ExecCommandOutputDelta
from ._effects import FileChange as FileChange
from ._effects import OutputStream as OutputStream
from ._effects import PatchApplyBegin as PatchApplyBegin
from ._effects import PatchApplyEnd as PatchApplyEnd
from ._effects import PlanStep as PlanStep
from ._effects import PlanUpdate as PlanUpdate
from ._effects import ReasoningSummaryDelta as ReasoningSummaryDelta
from ._effects import StepStatus as StepStatus
from ._effects import ToolResult as ToolResult
from ._effects import TurnDiff as TurnDiff
from ._errors import ErrorCode
from ._items import ROLES as ROLES
from ._items import Compaction as Compaction
from ._items import ContentPart as ContentPart
from ._items import CustomToolCall as CustomToolCall
from ._items import CustomToolCallOutput as CustomToolCallOutput
from ._items import FunctionCall as FunctionCall
from ._items import FunctionCallOutput as FunctionCallOutput
from ._items import GhostSnapshot as GhostSnapshot
from ._items import InputImage as InputImage
from ._items import InputText as InputText
from ._items import Message as Message
from ._items import Other as Other
from ._items import OutputText as OutputText
from ._items import Reasoning as Reasoning
from ._items import ReasoningText as ReasoningText
from ._items import ResponseItem as ResponseItem
from ._items import Role as Role
from ._items import SummaryText as SummaryText
from ._items import TokenUsage as TokenUsage
from ._items import TokenUsageInfo as TokenUsageInfo
from ._items import ToolCall as ToolCall
from ._items import ToolOutput as ToolOutput
from ._items import as_tuple
from ._items import assistant_message as assistant_message
from ._items import user_message as user_message
from ._ops import BUILTIN_OP_TYPES as BUILTIN_OP_TYPES
from ._ops import Compact as Compact
from ._ops import CustomOp as CustomOp
from ._ops import ExecApproval as ExecApproval
from ._ops import Image as Image
from ._ops import InputItem as InputItem
from ._ops import Interrupt as Interrupt
from ._ops import LocalImage as LocalImage
from ._ops import OnBusy as OnBusy
from ._ops import Op as Op
from ._ops import OverrideTurnContext as OverrideTurnContext
from ._ops import PatchApproval as PatchApproval
from ._ops import ReviewDecision as ReviewDecision
from ._ops import Shutdown as Shutdown
from ._ops import Submission as Submission
from ._ops import Text as Text
from ._ops import Unpin as Unpin
from ._ops import UserInput as UserInput
from ._ops import UserTurn as UserTurn

# --------------------------------------------------------------------------- turn items


@attrs.frozen
class UserMessageItem:
    """The user's input, as recorded in a turn."""

    id: str
    """Item id."""
    content: tuple[InputItem, ...] = attrs.field(converter=as_tuple)
    """The input."""


@attrs.frozen
class AgentMessageItem:
    """A message written by the model."""

    id: str
    """Item id."""
    text: str
    """The text (empty on ``item_started``)."""


@attrs.frozen
class ReasoningItem:
    """The model's reasoning summary."""

    id: str
    """Item id."""
    summary: tuple[str, ...] = attrs.field(converter=as_tuple)
    """Summary parts."""


@attrs.frozen
class ToolCallItem:
    """A tool call and, when completed, its output."""

    id: str
    """Item id (the call id)."""
    name: str
    """Tool name."""
    arguments: str
    """Arguments as the model wrote them."""
    output: str | None = None
    """The tool's output, on ``item_completed``."""
    result: ToolResult | None = None
    """How the call ended, on ``item_completed`` (None in rollouts written before it was
    recorded)."""


class CompactionTrigger(enum.StrEnum):
    """Why a compaction ran."""

    MANUAL = "manual"
    PRE_TURN = "pre_turn"
    MID_TURN = "mid_turn"
    MODEL_DOWNSHIFT = "model_downshift"
    POST_TURN = "post_turn"
    MODEL_REQUESTED = "model_requested"


@attrs.frozen
class CompactionReceipt:
    """What a completed compaction did."""

    trigger: CompactionTrigger
    """Why it ran: for a background result, the point it started at (``post_turn``)."""
    backend: str
    """Which backend ran it."""
    tokens_before: int
    """Tokens of the context before: the server's count of the last request plus the
    estimate of what came after it when ``counted_before``, else an estimate."""
    tokens_after: int
    """Estimated tokens of the context after (instructions and tools included), scaled by the
    server's last count of a request."""
    duration_ms: int
    """How long it took."""
    background: bool = False
    """Whether the new history was computed in the background, from a snapshot."""
    snapshot_age_ms: int | None = None
    """For a background result: how old its snapshot was when it was installed."""
    cut: bool = False
    """The summary was cut off at the answer limit: the new history holds what arrived."""
    counted_before: bool = False
    """``tokens_before`` rests on the server's count of the last request."""
    model: str | None = None
    """The model that wrote the summary, when one did (``compact_model``, else the
    session's)."""
    installed_at: CompactionTrigger | None = None
    """For a background result: the compaction point that installed it (``pre_turn``,
    ``mid_turn`` or ``post_turn``)."""
    summary_refused: str | None = None
    """Why the model's answers to the summary request were refused, the second (asked for
    without tools) too: the compacted history holds the session's own record instead of a
    summary (docs/compaction.md, "A summary is checked")."""
    summary_retried: bool = False
    """The model's first answer was not a summary; its second, asked for without tools, was
    installed."""


def receipt_figures(receipt: CompactionReceipt) -> str:
    """``before → after`` of a receipt, each estimate marked ``~``."""
    before = f"{'' if receipt.counted_before else '~'}{receipt.tokens_before}"
    return f"{before} → ~{receipt.tokens_after}"


@attrs.frozen
class ContextCompactionItem:
    """A compaction, reported by ``item_started`` and ``item_completed``."""

    id: str
    """Item id."""
    receipt: CompactionReceipt | None = None
    """What it did (on ``item_completed`` only); None there when nothing was installed (a
    compaction that would not make the context smaller, docs/compaction.md)."""


@attrs.frozen
class AgentCallItem:
    """A call of a sub-agent tool, reported by ``item_started`` and ``item_completed`` in place
    of a ``tool_call`` item: Codex's collaboration call."""

    id: str
    """Item id (the call id)."""
    tool: AgentTool
    """Which tool."""
    sender_id: str
    """The session that made the call."""
    arguments: str
    """Arguments as the model wrote them."""
    prompt: str | None = None
    """The message the call gives an agent, when it gives one."""
    receiver_ids: tuple[str, ...] = ()
    """The agents it was for (known once it completed; a spawn's: the new one)."""
    states: Mapping[str, AgentState] = attrs.field(
        factory=dict, converter=frozen_states, hash=False
    )
    """Their states when it ended."""
    status: CallStatus | None = None
    """How it ended (None while it runs)."""
    output: str | None = None
    """The output the model reads, on ``item_completed``."""
    result: ToolResult | None = None
    """How the call ended, on ``item_completed``."""


TurnItem: TypeAlias = (
    UserMessageItem
    | AgentMessageItem
    | ReasoningItem
    | ToolCallItem
    | AgentCallItem
    | ContextCompactionItem
)

# --------------------------------------------------------------------------- events


class AbortReason(enum.StrEnum):
    """Why a task was aborted."""

    INTERRUPTED = "interrupted"
    REPLACED = "replaced"
    SHUTDOWN = "shutdown"
    HOOK_STOPPED = "hook_stopped"
    HOST_LOST = "host_lost"
    """The process hosting the session died mid-turn (see ``session_resumed``)."""


@attrs.frozen
class SessionConfigured:
    """The session is open; this is its first event (also of a resumed session).

    Everything a user needs to find the session again: its id, what it talks to, where it
    runs and the rollout file to resume it from.
    """

    session_id: str
    """The session id."""
    model: str
    """The model of the next turn."""
    model_provider: str
    """The provider the model client talks to (its name in the configuration)."""
    model_context_window: int | None
    """The context window of that model, if known."""
    cwd: str
    """The working directory of the next turn."""
    rollout_path: str | None
    """The rollout file the session appends to, or None when persistence is off."""
    relay_version: str
    """The version of relay running the session."""
    resumed: bool = False
    """Whether the session continues a rollout (``relay resume``, :func:`relay.resume_session`)."""
    mcp_servers: Mapping[str, int] = attrs.field(factory=dict, hash=False)
    """The MCP servers that started, each with the number of its tools the model is offered
    (left out of the JSON form when there is none; a server that did not start is a
    ``warning``)."""
    compact_model: str | None = None
    """The model that writes compaction summaries, when it is not the session's."""
    compact_model_provider: str | None = None
    """Its provider, when it is not the session's."""


@attrs.frozen
class TurnStarted:
    """A task started."""

    turn_id: str
    """The turn id (the id of the submission that started it)."""
    model_context_window: int | None
    """The context window of the turn's model, if known."""
    started_at: float
    """Unix seconds."""
    auto_compact_token_limit: int | None = None
    """The context usage at which the turn compacts on its own, if it ever does."""
    kind: str | None = None
    """The kind of its task: ``regular``, ``compact``, or the type of an op of your own (None
    in rollouts written before it was recorded)."""


@attrs.frozen
class TurnComplete:
    """A task ended normally (also after an ``error``)."""

    turn_id: str
    """The turn id."""
    last_agent_message: str | None
    """The last message the model wrote in this turn."""
    duration_ms: int
    """How long the turn ran."""
    output: Any = attrs.field(default=None, hash=False)
    """The turn's structured output, when its ``user_turn`` asked for one
    (``final_output_json_schema``): the JSON value of its final answer, which fits the schema
    (left out of the JSON form when there is none; an answer that does not fit is an
    ``error{invalid_output}`` before this event, and no output)."""


@attrs.frozen
class TurnAborted:
    """A task was aborted."""

    turn_id: str
    """The turn id."""
    reason: AbortReason
    """Why."""
    duration_ms: int
    """How long the turn ran."""


@attrs.frozen
class ItemStarted:
    """An item of a turn started."""

    turn_id: str
    """The turn id."""
    item: TurnItem
    """The item so far."""


@attrs.frozen
class ItemCompleted:
    """An item of a turn completed."""

    turn_id: str
    """The turn id."""
    item: TurnItem
    """The complete item."""


@attrs.frozen
class AgentMessageDelta:
    """A piece of an agent message as it streams."""

    turn_id: str
    """The turn id."""
    item_id: str
    """The message's item id."""
    delta: str
    """The new text."""


@attrs.frozen
class AgentMessage:
    """Legacy mirror of a completed agent message."""

    message: str
    """The text."""


@attrs.frozen
class UserMessage:
    """Legacy mirror of recorded user input."""

    message: str
    """The text."""


@attrs.frozen
class TokenCount:
    """Token usage after a response or a compaction."""

    info: TokenUsageInfo | None
    """The usage, or None when unknown."""
    tree_total: TokenUsage | None = None
    """The usage of the session and of every sub-agent below it, summed, once a sub-agent
    has reported usage (None before; ``info`` holds the session's own usage)."""


@attrs.frozen
class ContextCompacted:
    """Legacy mirror of a completed compaction item."""


@attrs.frozen
class WarningEvent:
    """Something the user should know; the session goes on."""

    message: str
    """What happened."""


@attrs.frozen
class ErrorEvent:
    """Something failed; the session goes on."""

    message: str
    """What failed."""
    code: ErrorCode
    """Which kind of failure (docs/session.md)."""


@attrs.frozen
class StreamErrorEvent:
    """A model request failed and is being retried."""

    message: str
    """``Reconnecting... N/MAX``."""
    detail: str
    """What failed."""


@attrs.frozen
class BackgroundEvent:
    """Information about background work."""

    message: str
    """What happened."""


@attrs.frozen
class HookStarted:
    """A compaction hook started."""

    hook: str
    """The hook's name (its command or callable)."""
    event: Literal["pre_compact", "post_compact"]
    """Which hook point."""


@attrs.frozen
class HookCompleted:
    """A compaction hook finished."""

    hook: str
    """The hook's name."""
    event: Literal["pre_compact", "post_compact"]
    """Which hook point."""
    outcome: Literal["continue", "stop", "timeout", "failed"]
    """What it decided or how it ended."""
    duration_ms: int
    """How long it ran."""


@attrs.frozen
class SessionResumed:
    """The session's host was lost; the session goes on from its rollout on another host.

    Everything the caller saw before the loss is in the rollout and kept. What was lost is
    named here and never redone: the turn in flight (reported ``turn_aborted`` with reason
    ``host_lost`` just before) and the submissions the lost host accepted but no event showed
    handled. Submit them again to have them.
    """

    lost_host: str
    """The host that died."""
    host: str
    """The host the session now runs on."""
    aborted_turn: str | None
    """The turn that was running, if any."""
    unhandled: tuple[str, ...] = attrs.field(converter=as_tuple, factory=tuple)
    """Ids of accepted submissions that no event showed handled, in submission order."""
    downtime_ms: int = 0
    """From the loss being noticed to the session accepting ops again."""


@attrs.frozen
class WorkStateNoted:
    """The session added an entry to its work-state record (``features.work_state``), or the
    user pinned a message (kind ``pinned``). Persisted, so that a resumed session has the
    record as it was."""

    kind: str
    """``read``, ``list``, ``command``, ``error``, ``pinned``, or a custom tool's own kind."""
    text: str
    """The fact, one line (for ``pinned``: the whole text of the message)."""
    key: str | None = None
    """Entries with the same kind and key replace each other; None: the text is the key."""


@attrs.frozen
class ToolInvocation:
    """A call of a tool that is not a command: an MCP server's tool, or a Python tool."""

    server: str | None
    """The MCP server that serves the tool; None for a tool of the program's own."""
    tool: str
    """The tool's name (on its server, for an MCP tool)."""
    arguments: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    """The arguments the model gave."""


@attrs.frozen
class ExecApprovalRequest:
    """A call waits for a decision (an ``exec_approval`` op, or the session's callback)
    before anything of it runs."""

    call_id: str
    """The model's call id; the ``exec_approval`` op names it as its ``id``."""
    turn_id: str
    """The turn that made the call."""
    command: tuple[str, ...] | ToolInvocation
    """The argv of a ``shell`` call, or the tool and its arguments."""
    cwd: str
    """The working directory the call would run in."""
    reason: str | None = None
    """Why it is asked (a sandbox refusal, the model's justification, the policy)."""
    agent: AgentRef | None = None
    """The sub-agent whose call it is, when the session's callback decides for its tree (in
    an event stream, ``Event.agent`` says it)."""


@attrs.frozen
class ShutdownComplete:
    """The session has shut down; this is its last event."""


EventMsg: TypeAlias = (
    SessionConfigured
    | TurnStarted
    | TurnComplete
    | TurnAborted
    | ItemStarted
    | ItemCompleted
    | AgentMessageDelta
    | AgentMessage
    | UserMessage
    | TokenCount
    | ContextCompacted
    | WarningEvent
    | ErrorEvent
    | StreamErrorEvent
    | BackgroundEvent
    | HookStarted
    | HookCompleted
    | SessionResumed
    | WorkStateNoted
    | ExecApprovalRequest
    | ApplyPatchApprovalRequest
    | PatchApplyBegin
    | PatchApplyEnd
    | TurnDiff
    | PlanUpdate
    | ExecCommandOutputDelta
    | ReasoningSummaryDelta
    | SubAgentSpawned
    | SubAgentEnded
    | ShutdownComplete
)


@attrs.frozen
class Event:
    """An event with its envelope."""

    id: str
    """The turn id for events of a turn, else the id of the submission being handled."""
    seq: int
    """Position in the session's event stream, from 1."""
    msg: EventMsg
    """The fact."""
    agent: AgentRef | None = None
    """The sub-agent the event comes from, in the stream of an ancestor (None: the session's
    own event)."""
