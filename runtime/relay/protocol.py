"""relay's protocol: the ops a program submits, the events a session answers with, the items
of a turn and of the history, and the small values they carry.

A session reads :data:`Op` values (:class:`UserTurn`, :class:`Interrupt`, :class:`Compact`,
:class:`ExecApproval`, ...) and writes :class:`Event` envelopes, each holding one
:data:`EventMsg` (:class:`TurnStarted`, :class:`ItemCompleted`, :class:`TurnComplete`, ...).
A turn's work is told as :data:`TurnItem` values (:class:`AgentMessageItem`,
:class:`ToolCallItem` with its :class:`ToolResult`, ...), and the history the model reads is a
sequence of :data:`ResponseItem` values (:class:`Message`, :class:`FunctionCall`, ...). Every
one is a frozen attrs class or a closed union of them, meant for ``match``; the JSON form of
each is in ``docs/protocol.md``, and its codec in :mod:`relay.lowlevel`.

The session itself, its configuration and its errors are in :mod:`relay`. The names that
:mod:`relay` showed before this module existed (``relay.UserTurn``) still read there, as the
same objects.
"""

from __future__ import annotations

# As in relay/__init__.py: type checkers and the API reference read these imports; at run time
# the names load when one is first read, from where _SOURCES says (PEP 562, _base/_face.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._base._protocol import AbortReason as AbortReason
    from ._base._protocol import AgentCallItem as AgentCallItem
    from ._base._protocol import AgentCallOutcome as AgentCallOutcome
    from ._base._protocol import AgentMessage as AgentMessage
    from ._base._protocol import AgentMessageDelta as AgentMessageDelta
    from ._base._protocol import AgentMessageItem as AgentMessageItem
    from ._base._protocol import AgentRef as AgentRef
    from ._base._protocol import AgentState as AgentState
    from ._base._protocol import AgentStatus as AgentStatus
    from ._base._protocol import AgentTool as AgentTool
    from ._base._protocol import ApplyPatchApprovalRequest as ApplyPatchApprovalRequest
    from ._base._protocol import BackgroundEvent as BackgroundEvent
    from ._base._protocol import CallStatus as CallStatus
    from ._base._protocol import ChangeKind as ChangeKind
    from ._base._protocol import Compact as Compact
    from ._base._protocol import Compaction as Compaction
    from ._base._protocol import CompactionReceipt as CompactionReceipt
    from ._base._protocol import CompactionTrigger as CompactionTrigger
    from ._base._protocol import ContentPart as ContentPart
    from ._base._protocol import ContextCompacted as ContextCompacted
    from ._base._protocol import ContextCompactionItem as ContextCompactionItem
    from ._base._protocol import CustomOp as CustomOp
    from ._base._protocol import CustomToolCall as CustomToolCall
    from ._base._protocol import CustomToolCallOutput as CustomToolCallOutput
    from ._base._protocol import ErrorEvent as ErrorEvent
    from ._base._protocol import Event as Event
    from ._base._protocol import EventMsg as EventMsg
    from ._base._protocol import ExecApproval as ExecApproval
    from ._base._protocol import ExecApprovalRequest as ExecApprovalRequest
    from ._base._protocol import ExecCommandOutputDelta as ExecCommandOutputDelta
    from ._base._protocol import FileChange as FileChange
    from ._base._protocol import FunctionCall as FunctionCall
    from ._base._protocol import FunctionCallOutput as FunctionCallOutput
    from ._base._protocol import GhostSnapshot as GhostSnapshot
    from ._base._protocol import HookCompleted as HookCompleted
    from ._base._protocol import HookStarted as HookStarted
    from ._base._protocol import Image as Image
    from ._base._protocol import InputImage as InputImage
    from ._base._protocol import InputItem as InputItem
    from ._base._protocol import InputText as InputText
    from ._base._protocol import Interrupt as Interrupt
    from ._base._protocol import ItemCompleted as ItemCompleted
    from ._base._protocol import ItemStarted as ItemStarted
    from ._base._protocol import LocalImage as LocalImage
    from ._base._protocol import Message as Message
    from ._base._protocol import OnBusy as OnBusy
    from ._base._protocol import Op as Op
    from ._base._protocol import Other as Other
    from ._base._protocol import OutputStream as OutputStream
    from ._base._protocol import OutputText as OutputText
    from ._base._protocol import OverrideTurnContext as OverrideTurnContext
    from ._base._protocol import PatchApplyBegin as PatchApplyBegin
    from ._base._protocol import PatchApplyEnd as PatchApplyEnd
    from ._base._protocol import PatchApproval as PatchApproval
    from ._base._protocol import PlanStep as PlanStep
    from ._base._protocol import PlanUpdate as PlanUpdate
    from ._base._protocol import Reasoning as Reasoning
    from ._base._protocol import ReasoningItem as ReasoningItem
    from ._base._protocol import ReasoningSummaryDelta as ReasoningSummaryDelta
    from ._base._protocol import ReasoningText as ReasoningText
    from ._base._protocol import ResponseItem as ResponseItem
    from ._base._protocol import ReviewDecision as ReviewDecision
    from ._base._protocol import Role as Role
    from ._base._protocol import SessionConfigured as SessionConfigured
    from ._base._protocol import SessionResumed as SessionResumed
    from ._base._protocol import Shutdown as Shutdown
    from ._base._protocol import ShutdownComplete as ShutdownComplete
    from ._base._protocol import StepStatus as StepStatus
    from ._base._protocol import StreamErrorEvent as StreamErrorEvent
    from ._base._protocol import SubAgentEnded as SubAgentEnded
    from ._base._protocol import SubAgentSpawned as SubAgentSpawned
    from ._base._protocol import SummaryText as SummaryText
    from ._base._protocol import Text as Text
    from ._base._protocol import TokenCount as TokenCount
    from ._base._protocol import TokenUsage as TokenUsage
    from ._base._protocol import TokenUsageInfo as TokenUsageInfo
    from ._base._protocol import ToolCall as ToolCall
    from ._base._protocol import ToolCallItem as ToolCallItem
    from ._base._protocol import ToolInvocation as ToolInvocation
    from ._base._protocol import ToolOutput as ToolOutput
    from ._base._protocol import ToolResult as ToolResult
    from ._base._protocol import TurnAborted as TurnAborted
    from ._base._protocol import TurnComplete as TurnComplete
    from ._base._protocol import TurnDiff as TurnDiff
    from ._base._protocol import TurnItem as TurnItem
    from ._base._protocol import TurnStarted as TurnStarted
    from ._base._protocol import Unpin as Unpin
    from ._base._protocol import UserInput as UserInput
    from ._base._protocol import UserMessage as UserMessage
    from ._base._protocol import UserMessageItem as UserMessageItem
    from ._base._protocol import UserTurn as UserTurn
    from ._base._protocol import WarningEvent as WarningEvent
    from ._base._protocol import WorkStateNoted as WorkStateNoted
    from ._base._protocol import assistant_message as assistant_message
    from ._base._protocol import user_message as user_message

__all__ = [
    # Ops: what a program submits, and the values they carry.
    "Op",
    "UserTurn",
    "UserInput",
    "InputItem",
    "Text",
    "Image",
    "LocalImage",
    "OnBusy",
    "Compact",
    "Interrupt",
    "OverrideTurnContext",
    "Unpin",
    "ExecApproval",
    "PatchApproval",
    "ReviewDecision",
    "CustomOp",
    "Shutdown",
    # Events: the envelope, the facts, and the values they carry.
    "Event",
    "EventMsg",
    "SessionConfigured",
    "SessionResumed",
    "TurnStarted",
    "TurnComplete",
    "TurnAborted",
    "AbortReason",
    "ItemStarted",
    "ItemCompleted",
    "AgentMessageDelta",
    "AgentMessage",
    "UserMessage",
    "ReasoningSummaryDelta",
    "ExecCommandOutputDelta",
    "OutputStream",
    "TokenCount",
    "TokenUsage",
    "TokenUsageInfo",
    "ContextCompacted",
    "CompactionReceipt",
    "CompactionTrigger",
    "ExecApprovalRequest",
    "ToolInvocation",
    "ApplyPatchApprovalRequest",
    "PatchApplyBegin",
    "PatchApplyEnd",
    "FileChange",
    "ChangeKind",
    "TurnDiff",
    "PlanUpdate",
    "PlanStep",
    "StepStatus",
    "WorkStateNoted",
    "HookStarted",
    "HookCompleted",
    "BackgroundEvent",
    "WarningEvent",
    "ErrorEvent",
    "StreamErrorEvent",
    "SubAgentSpawned",
    "SubAgentEnded",
    "AgentRef",
    "AgentState",
    "AgentStatus",
    "ShutdownComplete",
    # Turn items: what ``item_started`` and ``item_completed`` carry.
    "TurnItem",
    "UserMessageItem",
    "AgentMessageItem",
    "ReasoningItem",
    "ToolCallItem",
    "ToolResult",
    "CallStatus",
    "AgentCallItem",
    "AgentTool",
    "AgentCallOutcome",
    "ContextCompactionItem",
    # Response items: the history, as the model reads it.
    "ResponseItem",
    "Message",
    "Role",
    "ContentPart",
    "InputText",
    "OutputText",
    "InputImage",
    "Reasoning",
    "SummaryText",
    "ReasoningText",
    "FunctionCall",
    "FunctionCallOutput",
    "CustomToolCall",
    "CustomToolCallOutput",
    "ToolCall",
    "ToolOutput",
    "Compaction",
    "GhostSnapshot",
    "Other",
    "user_message",
    "assistant_message",
]

#: Where each public name is defined (``tests/test_exports.py`` checks it against the imports).
#: ``_base/_protocol.py`` gathers the protocol from the modules of the ground floor that define
#: it; every name loads from there.
_SOURCES = {
    "SubAgentSpawned": "relay._base._protocol",
    "SubAgentEnded": "relay._base._protocol",
    "AgentRef": "relay._base._protocol",
    "AgentState": "relay._base._protocol",
    "AgentStatus": "relay._base._protocol",
    "AgentCallItem": "relay._base._protocol",
    "AgentTool": "relay._base._protocol",
    "AgentCallOutcome": "relay._base._protocol",
    "AbortReason": "relay._base._protocol",
    "AgentMessage": "relay._base._protocol",
    "AgentMessageDelta": "relay._base._protocol",
    "AgentMessageItem": "relay._base._protocol",
    "ApplyPatchApprovalRequest": "relay._base._protocol",
    "BackgroundEvent": "relay._base._protocol",
    "CallStatus": "relay._base._protocol",
    "ChangeKind": "relay._base._protocol",
    "Compact": "relay._base._protocol",
    "Compaction": "relay._base._protocol",
    "CompactionReceipt": "relay._base._protocol",
    "CompactionTrigger": "relay._base._protocol",
    "ContentPart": "relay._base._protocol",
    "ContextCompacted": "relay._base._protocol",
    "ContextCompactionItem": "relay._base._protocol",
    "CustomOp": "relay._base._protocol",
    "CustomToolCall": "relay._base._protocol",
    "CustomToolCallOutput": "relay._base._protocol",
    "ErrorEvent": "relay._base._protocol",
    "Event": "relay._base._protocol",
    "EventMsg": "relay._base._protocol",
    "ExecApproval": "relay._base._protocol",
    "ExecApprovalRequest": "relay._base._protocol",
    "ExecCommandOutputDelta": "relay._base._protocol",
    "FileChange": "relay._base._protocol",
    "FunctionCall": "relay._base._protocol",
    "FunctionCallOutput": "relay._base._protocol",
    "GhostSnapshot": "relay._base._protocol",
    "HookCompleted": "relay._base._protocol",
    "HookStarted": "relay._base._protocol",
    "Image": "relay._base._protocol",
    "InputImage": "relay._base._protocol",
    "InputItem": "relay._base._protocol",
    "InputText": "relay._base._protocol",
    "Interrupt": "relay._base._protocol",
    "ItemCompleted": "relay._base._protocol",
    "ItemStarted": "relay._base._protocol",
    "LocalImage": "relay._base._protocol",
    "Message": "relay._base._protocol",
    "OnBusy": "relay._base._protocol",
    "Op": "relay._base._protocol",
    "Other": "relay._base._protocol",
    "OutputStream": "relay._base._protocol",
    "OutputText": "relay._base._protocol",
    "OverrideTurnContext": "relay._base._protocol",
    "PatchApplyBegin": "relay._base._protocol",
    "PatchApplyEnd": "relay._base._protocol",
    "PatchApproval": "relay._base._protocol",
    "PlanStep": "relay._base._protocol",
    "PlanUpdate": "relay._base._protocol",
    "Reasoning": "relay._base._protocol",
    "ReasoningItem": "relay._base._protocol",
    "ReasoningSummaryDelta": "relay._base._protocol",
    "ReasoningText": "relay._base._protocol",
    "ResponseItem": "relay._base._protocol",
    "ReviewDecision": "relay._base._protocol",
    "Role": "relay._base._protocol",
    "SessionConfigured": "relay._base._protocol",
    "SessionResumed": "relay._base._protocol",
    "Shutdown": "relay._base._protocol",
    "ShutdownComplete": "relay._base._protocol",
    "StepStatus": "relay._base._protocol",
    "StreamErrorEvent": "relay._base._protocol",
    "SummaryText": "relay._base._protocol",
    "Text": "relay._base._protocol",
    "TokenCount": "relay._base._protocol",
    "TokenUsage": "relay._base._protocol",
    "TokenUsageInfo": "relay._base._protocol",
    "ToolCall": "relay._base._protocol",
    "ToolCallItem": "relay._base._protocol",
    "ToolInvocation": "relay._base._protocol",
    "ToolOutput": "relay._base._protocol",
    "ToolResult": "relay._base._protocol",
    "TurnAborted": "relay._base._protocol",
    "TurnComplete": "relay._base._protocol",
    "TurnDiff": "relay._base._protocol",
    "TurnItem": "relay._base._protocol",
    "TurnStarted": "relay._base._protocol",
    "Unpin": "relay._base._protocol",
    "UserInput": "relay._base._protocol",
    "UserMessage": "relay._base._protocol",
    "UserMessageItem": "relay._base._protocol",
    "UserTurn": "relay._base._protocol",
    "WarningEvent": "relay._base._protocol",
    "WorkStateNoted": "relay._base._protocol",
    "assistant_message": "relay._base._protocol",
    "user_message": "relay._base._protocol",
}


if not TYPE_CHECKING:  # a checker sees the imports above, and no name it does not know

    def __getattr__(name: str) -> object:
        from ._base._face import load

        return load(globals(), _SOURCES, name)

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})


del TYPE_CHECKING
