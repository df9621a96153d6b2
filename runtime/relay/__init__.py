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

import attrs as _attrs

from . import lowlevel as lowlevel
from ._base._codec import DecodeError as DecodeError
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
from ._core._answer import Answer as Answer
from ._core._answer import TurnFailed as TurnFailed
from ._core._hooks import CompactHook as CompactHook
from ._core._hooks import HookInput as HookInput
from ._core._hooks import HookStop as HookStop
from ._core._input import user_message_of as user_message_of
from ._core._port import SessionTask as SessionTask
from ._core._port import TaskContext as TaskContext
from ._core._session import Session as Session
from ._core._session import SessionStatistics as SessionStatistics
from ._core._tools import Tool as Tool
from ._core._tools import ToolContext as ToolContext
from ._core._tools import ToolError as ToolError
from ._open import open_session as open_session
from ._open import resume_session as resume_session
from ._version import __version__ as __version__

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
    "TurnStarted",
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

# Public classes print where users import them from: relay.Config, not relay._base._config.Config.
# Their annotations are resolved first, in the modules that define them.
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type):
        if _attrs.has(_value):
            _attrs.resolve_types(_value)
        _value.__module__ = __name__
del _name, _value
