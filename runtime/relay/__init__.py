"""relay: an actor runtime for agent sessions.

Open a session with :func:`open_session`, submit ops (:class:`UserTurn`, :class:`Compact`,
:class:`Interrupt`, ...) and read events (:class:`TurnStarted`, :class:`TurnComplete`, ...).

This namespace is for embedders. Authors of tasks, compaction backends and model clients find
the other side in :mod:`relay.lowlevel`; test doubles are in :mod:`relay.testing`, relay's own
tasks in :mod:`relay.tasks`, sessions on a Ray cluster in :mod:`relay.cluster`.
"""

from __future__ import annotations

import os as _os
import sys as _sys

from ._version import __version__ as __version__

# What type checkers and the API reference read. At run time the names load when one is first
# read, from where _SOURCES says (PEP 562, _base/_face.py), so that ``import relay`` costs next
# to nothing. This TYPE_CHECKING is ours, not typing's: importing typing costs more than the
# rest of the import.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import lowlevel as lowlevel
    from ._base._codec import DecodeError as DecodeError
    from ._base._config import CompactionSettings as CompactionSettings
    from ._base._config import Config as Config
    from ._base._config import Features as Features
    from ._base._config import HookCommand as HookCommand
    from ._base._config import Hooks as Hooks
    from ._base._config import OtelConfig as OtelConfig
    from ._base._config import ProviderConfig as ProviderConfig
    from ._base._config import RolloutConfig as RolloutConfig
    from ._base._config import load_config as load_config
    from ._base._errors import ClosedSessionError as ClosedSessionError
    from ._base._errors import ConfigError as ConfigError
    from ._base._errors import ContextWindowExceeded as ContextWindowExceeded
    from ._base._errors import ErrorCode as ErrorCode
    from ._base._errors import InvalidOpError as InvalidOpError
    from ._base._errors import ModelError as ModelError
    from ._base._errors import RelayError as RelayError
    from ._base._errors import RolloutError as RolloutError
    from ._base._errors import RolloutLockedError as RolloutLockedError
    from ._base._errors import ScriptError as ScriptError
    from ._base._errors import StreamError as StreamError
    from ._base._mcp_config import McpServerConfig as McpServerConfig
    from ._base._protocol import AbortReason as AbortReason
    from ._base._protocol import AgentMessage as AgentMessage
    from ._base._protocol import AgentMessageDelta as AgentMessageDelta
    from ._base._protocol import AgentMessageItem as AgentMessageItem
    from ._base._protocol import BackgroundEvent as BackgroundEvent
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
    from ._base._protocol import OutputText as OutputText
    from ._base._protocol import OverrideTurnContext as OverrideTurnContext
    from ._base._protocol import Reasoning as Reasoning
    from ._base._protocol import ReasoningItem as ReasoningItem
    from ._base._protocol import ResponseItem as ResponseItem
    from ._base._protocol import ReviewDecision as ReviewDecision
    from ._base._protocol import SessionConfigured as SessionConfigured
    from ._base._protocol import SessionResumed as SessionResumed
    from ._base._protocol import Shutdown as Shutdown
    from ._base._protocol import ShutdownComplete as ShutdownComplete
    from ._base._protocol import StreamErrorEvent as StreamErrorEvent
    from ._base._protocol import SummaryText as SummaryText
    from ._base._protocol import Text as Text
    from ._base._protocol import TokenCount as TokenCount
    from ._base._protocol import TokenUsage as TokenUsage
    from ._base._protocol import TokenUsageInfo as TokenUsageInfo
    from ._base._protocol import ToolCall as ToolCall
    from ._base._protocol import ToolCallItem as ToolCallItem
    from ._base._protocol import ToolInvocation as ToolInvocation
    from ._base._protocol import ToolOutput as ToolOutput
    from ._base._protocol import TurnAborted as TurnAborted
    from ._base._protocol import TurnComplete as TurnComplete
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
    from ._base._sandbox_config import SandboxWorkspaceWrite as SandboxWorkspaceWrite
    from ._core._answer import Answer as Answer
    from ._core._answer import TurnFailed as TurnFailed
    from ._core._hooks import CompactHook as CompactHook
    from ._core._hooks import HookInput as HookInput
    from ._core._hooks import HookStop as HookStop
    from ._core._input import user_message_of as user_message_of
    from ._core._port import SessionTask as SessionTask
    from ._core._port import TaskContext as TaskContext
    from ._core._session import Session as Session
    from ._core._state import SessionStatistics as SessionStatistics
    from ._core._task import TurnResult as TurnResult
    from ._core._tools import Tool as Tool
    from ._core._tools import ToolContext as ToolContext
    from ._core._tools import ToolError as ToolError
    from ._open import open_session as open_session
    from ._open import resume_session as resume_session

# relay.tasks lives in a second source root (tasks/relay/tasks) in a checkout, which an editable
# install puts on sys.path; an installed wheel has it here already. This is what
# pkgutil.extend_path does (without importing pkgutil, which costs as much as a module of relay).
__path__ = [
    *__path__,
    *(
        _os.path.join(entry, __name__)
        for entry in _sys.path
        if isinstance(entry, str)
        and _os.path.join(entry, __name__) not in __path__
        and _os.path.isdir(_os.path.join(entry, __name__))
    ),
]

__all__ = [
    "AbortReason",
    "AgentMessage",
    "AgentMessageDelta",
    "AgentMessageItem",
    "Answer",
    "BackgroundEvent",
    "ClosedSessionError",
    "Compact",
    "CompactHook",
    "Compaction",
    "CompactionReceipt",
    "CompactionSettings",
    "CompactionTrigger",
    "Config",
    "ConfigError",
    "ContentPart",
    "ContextCompacted",
    "ContextCompactionItem",
    "ContextWindowExceeded",
    "CustomOp",
    "CustomToolCall",
    "CustomToolCallOutput",
    "DecodeError",
    "ErrorCode",
    "ErrorEvent",
    "Event",
    "EventMsg",
    "Features",
    "FunctionCall",
    "FunctionCallOutput",
    "GhostSnapshot",
    "HookCommand",
    "HookCompleted",
    "HookInput",
    "HookStarted",
    "HookStop",
    "Hooks",
    "Image",
    "InputImage",
    "InputItem",
    "InputText",
    "Interrupt",
    "InvalidOpError",
    "ItemCompleted",
    "ItemStarted",
    "LocalImage",
    "McpServerConfig",
    "Message",
    "ModelError",
    "OnBusy",
    "Op",
    "OtelConfig",
    "Other",
    "OutputText",
    "OverrideTurnContext",
    "ProviderConfig",
    "Reasoning",
    "ReasoningItem",
    "RelayError",
    "ResponseItem",
    "RolloutConfig",
    "RolloutError",
    "RolloutLockedError",
    "SandboxWorkspaceWrite",
    "ScriptError",
    "Session",
    "SessionConfigured",
    "SessionResumed",
    "SessionStatistics",
    "SessionTask",
    "Shutdown",
    "ShutdownComplete",
    "StreamError",
    "StreamErrorEvent",
    "SummaryText",
    "TaskContext",
    "Text",
    "TokenCount",
    "TokenUsage",
    "TokenUsageInfo",
    "Tool",
    "ToolCall",
    "ToolCallItem",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "TurnAborted",
    "TurnComplete",
    "TurnFailed",
    "TurnItem",
    "TurnResult",
    "TurnStarted",
    "ExecApproval",
    "ExecApprovalRequest",
    "ReviewDecision",
    "ToolInvocation",
    "Unpin",
    "UserInput",
    "UserMessage",
    "UserMessageItem",
    "UserTurn",
    "WarningEvent",
    "WorkStateNoted",
    "__version__",
    "assistant_message",
    "load_config",
    "open_session",
    "resume_session",
    "user_message",
    "user_message_of",
]

#: Where each public name is defined (``tests/test_exports.py`` checks it against the imports).
_SOURCES = {
    "DecodeError": "relay._base._codec",
    "CompactionSettings": "relay._base._config",
    "Config": "relay._base._config",
    "Features": "relay._base._config",
    "HookCommand": "relay._base._config",
    "Hooks": "relay._base._config",
    "OtelConfig": "relay._base._config",
    "ProviderConfig": "relay._base._config",
    "RolloutConfig": "relay._base._config",
    "load_config": "relay._base._config",
    "ClosedSessionError": "relay._base._errors",
    "ConfigError": "relay._base._errors",
    "ContextWindowExceeded": "relay._base._errors",
    "ErrorCode": "relay._base._errors",
    "InvalidOpError": "relay._base._errors",
    "ModelError": "relay._base._errors",
    "RelayError": "relay._base._errors",
    "RolloutError": "relay._base._errors",
    "RolloutLockedError": "relay._base._errors",
    "ScriptError": "relay._base._errors",
    "StreamError": "relay._base._errors",
    "McpServerConfig": "relay._base._mcp_config",
    "AbortReason": "relay._base._protocol",
    "AgentMessage": "relay._base._protocol",
    "AgentMessageDelta": "relay._base._protocol",
    "AgentMessageItem": "relay._base._protocol",
    "BackgroundEvent": "relay._base._protocol",
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
    "OutputText": "relay._base._protocol",
    "OverrideTurnContext": "relay._base._protocol",
    "Reasoning": "relay._base._protocol",
    "ReasoningItem": "relay._base._protocol",
    "ResponseItem": "relay._base._protocol",
    "SessionConfigured": "relay._base._protocol",
    "SessionResumed": "relay._base._protocol",
    "Shutdown": "relay._base._protocol",
    "ShutdownComplete": "relay._base._protocol",
    "StreamErrorEvent": "relay._base._protocol",
    "SummaryText": "relay._base._protocol",
    "Text": "relay._base._protocol",
    "TokenCount": "relay._base._protocol",
    "TokenUsage": "relay._base._protocol",
    "TokenUsageInfo": "relay._base._protocol",
    "ToolCall": "relay._base._protocol",
    "ToolCallItem": "relay._base._protocol",
    "ToolOutput": "relay._base._protocol",
    "TurnAborted": "relay._base._protocol",
    "TurnComplete": "relay._base._protocol",
    "TurnItem": "relay._base._protocol",
    "TurnStarted": "relay._base._protocol",
    "ExecApproval": "relay._base._protocol",
    "ExecApprovalRequest": "relay._base._protocol",
    "ReviewDecision": "relay._base._protocol",
    "ToolInvocation": "relay._base._protocol",
    "Unpin": "relay._base._protocol",
    "UserInput": "relay._base._protocol",
    "UserMessage": "relay._base._protocol",
    "UserMessageItem": "relay._base._protocol",
    "UserTurn": "relay._base._protocol",
    "WarningEvent": "relay._base._protocol",
    "WorkStateNoted": "relay._base._protocol",
    "assistant_message": "relay._base._protocol",
    "user_message": "relay._base._protocol",
    "SandboxWorkspaceWrite": "relay._base._sandbox_config",
    "Answer": "relay._core._answer",
    "TurnFailed": "relay._core._answer",
    "CompactHook": "relay._core._hooks",
    "HookInput": "relay._core._hooks",
    "HookStop": "relay._core._hooks",
    "user_message_of": "relay._core._input",
    "SessionTask": "relay._core._port",
    "TaskContext": "relay._core._port",
    "Session": "relay._core._session",
    "SessionStatistics": "relay._core._state",
    "TurnResult": "relay._core._task",
    "Tool": "relay._core._tools",
    "ToolContext": "relay._core._tools",
    "ToolError": "relay._core._tools",
    "open_session": "relay._open",
    "resume_session": "relay._open",
}


if not TYPE_CHECKING:  # a checker sees the imports above, and no name it does not know

    def __getattr__(name: str) -> object:
        if name == "lowlevel":
            import importlib

            return importlib.import_module(f"{__name__}.lowlevel")
        from ._base._face import load

        return load(globals(), _SOURCES, name)

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__, "lowlevel"})


del TYPE_CHECKING
