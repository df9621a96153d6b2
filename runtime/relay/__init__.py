"""relay: an actor runtime for agent sessions.

Open a session with :func:`open_session` (or :func:`resume_session`), submit ops to it and read
its events, or ask it for an :class:`Answer`. What a session is given, :class:`Config`, what it
raises (:class:`RelayError` and the rest) and what a program adds to it (:class:`Tool`, hooks,
a :class:`SessionTask`) are here.

This namespace is for embedders. The protocol's vocabulary, the ops (``UserTurn``,
``Interrupt``, ...), the events (``TurnStarted``, ``TurnComplete``, ...) and the items, is in
:mod:`relay.protocol`; its names read here too (``relay.UserTurn``), as the same objects,
though ``__all__`` and ``dir()`` leave them out. Authors of tasks, compaction backends and
model clients find the other side in :mod:`relay.lowlevel`; test doubles are in
:mod:`relay.testing`, relay's own tasks in :mod:`relay.tasks`, sessions on a Ray cluster in
:mod:`relay.cluster`.
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
    from . import protocol as protocol
    from ._base._agents_config import AgentRole as AgentRole
    from ._base._agents_config import AgentsConfig as AgentsConfig
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

    # The protocol's names that relay showed before relay.protocol: read here still, the same
    # objects, outside __all__.
    from .protocol import AbortReason as AbortReason
    from .protocol import AgentMessage as AgentMessage
    from .protocol import AgentMessageDelta as AgentMessageDelta
    from .protocol import AgentMessageItem as AgentMessageItem
    from .protocol import BackgroundEvent as BackgroundEvent
    from .protocol import Compact as Compact
    from .protocol import Compaction as Compaction
    from .protocol import CompactionReceipt as CompactionReceipt
    from .protocol import CompactionTrigger as CompactionTrigger
    from .protocol import ContentPart as ContentPart
    from .protocol import ContextCompacted as ContextCompacted
    from .protocol import ContextCompactionItem as ContextCompactionItem
    from .protocol import CustomOp as CustomOp
    from .protocol import CustomToolCall as CustomToolCall
    from .protocol import CustomToolCallOutput as CustomToolCallOutput
    from .protocol import ErrorEvent as ErrorEvent
    from .protocol import Event as Event
    from .protocol import EventMsg as EventMsg
    from .protocol import ExecApproval as ExecApproval
    from .protocol import ExecApprovalRequest as ExecApprovalRequest
    from .protocol import FunctionCall as FunctionCall
    from .protocol import FunctionCallOutput as FunctionCallOutput
    from .protocol import GhostSnapshot as GhostSnapshot
    from .protocol import HookCompleted as HookCompleted
    from .protocol import HookStarted as HookStarted
    from .protocol import Image as Image
    from .protocol import InputImage as InputImage
    from .protocol import InputItem as InputItem
    from .protocol import InputText as InputText
    from .protocol import Interrupt as Interrupt
    from .protocol import ItemCompleted as ItemCompleted
    from .protocol import ItemStarted as ItemStarted
    from .protocol import LocalImage as LocalImage
    from .protocol import Message as Message
    from .protocol import OnBusy as OnBusy
    from .protocol import Op as Op
    from .protocol import Other as Other
    from .protocol import OutputText as OutputText
    from .protocol import OverrideTurnContext as OverrideTurnContext
    from .protocol import Reasoning as Reasoning
    from .protocol import ReasoningItem as ReasoningItem
    from .protocol import ResponseItem as ResponseItem
    from .protocol import ReviewDecision as ReviewDecision
    from .protocol import SessionConfigured as SessionConfigured
    from .protocol import SessionResumed as SessionResumed
    from .protocol import Shutdown as Shutdown
    from .protocol import ShutdownComplete as ShutdownComplete
    from .protocol import StreamErrorEvent as StreamErrorEvent
    from .protocol import SummaryText as SummaryText
    from .protocol import Text as Text
    from .protocol import TokenCount as TokenCount
    from .protocol import TokenUsage as TokenUsage
    from .protocol import TokenUsageInfo as TokenUsageInfo
    from .protocol import ToolCall as ToolCall
    from .protocol import ToolCallItem as ToolCallItem
    from .protocol import ToolInvocation as ToolInvocation
    from .protocol import ToolOutput as ToolOutput
    from .protocol import TurnAborted as TurnAborted
    from .protocol import TurnComplete as TurnComplete
    from .protocol import TurnItem as TurnItem
    from .protocol import TurnStarted as TurnStarted
    from .protocol import Unpin as Unpin
    from .protocol import UserInput as UserInput
    from .protocol import UserMessage as UserMessage
    from .protocol import UserMessageItem as UserMessageItem
    from .protocol import UserTurn as UserTurn
    from .protocol import WarningEvent as WarningEvent
    from .protocol import WorkStateNoted as WorkStateNoted
    from .protocol import assistant_message as assistant_message
    from .protocol import user_message as user_message

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
    # Sessions and what a turn gives back.
    "open_session",
    "resume_session",
    "Session",
    "Answer",
    "TurnFailed",
    "TurnResult",
    "SessionStatistics",
    "user_message_of",
    # The configuration.
    "Config",
    "load_config",
    "CompactionSettings",
    "Features",
    "AgentsConfig",
    "AgentRole",
    "HookCommand",
    "Hooks",
    "McpServerConfig",
    "OtelConfig",
    "ProviderConfig",
    "RolloutConfig",
    "SandboxWorkspaceWrite",
    # A program's own tools, hooks and tasks.
    "Tool",
    "ToolContext",
    "ToolError",
    "CompactHook",
    "HookInput",
    "HookStop",
    "SessionTask",
    "TaskContext",
    # Errors.
    "RelayError",
    "ClosedSessionError",
    "ConfigError",
    "ContextWindowExceeded",
    "DecodeError",
    "ErrorCode",
    "InvalidOpError",
    "ModelError",
    "RolloutError",
    "RolloutLockedError",
    "ScriptError",
    "StreamError",
    "__version__",
]

#: Where each public name is defined (``tests/test_exports.py`` checks it against the imports).
_SOURCES = {
    "DecodeError": "relay._base._codec",
    "CompactionSettings": "relay._base._config",
    "Config": "relay._base._config",
    "Features": "relay._base._config",
    "AgentsConfig": "relay._base._agents_config",
    "AgentRole": "relay._base._agents_config",
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
    # The protocol's names of before relay.protocol, loaded from there (so each class shows
    # relay.protocol as its module, whichever name is read first).
    "AbortReason": "relay.protocol",
    "AgentMessage": "relay.protocol",
    "AgentMessageDelta": "relay.protocol",
    "AgentMessageItem": "relay.protocol",
    "BackgroundEvent": "relay.protocol",
    "Compact": "relay.protocol",
    "Compaction": "relay.protocol",
    "CompactionReceipt": "relay.protocol",
    "CompactionTrigger": "relay.protocol",
    "ContentPart": "relay.protocol",
    "ContextCompacted": "relay.protocol",
    "ContextCompactionItem": "relay.protocol",
    "CustomOp": "relay.protocol",
    "CustomToolCall": "relay.protocol",
    "CustomToolCallOutput": "relay.protocol",
    "ErrorEvent": "relay.protocol",
    "Event": "relay.protocol",
    "EventMsg": "relay.protocol",
    "ExecApproval": "relay.protocol",
    "ExecApprovalRequest": "relay.protocol",
    "FunctionCall": "relay.protocol",
    "FunctionCallOutput": "relay.protocol",
    "GhostSnapshot": "relay.protocol",
    "HookCompleted": "relay.protocol",
    "HookStarted": "relay.protocol",
    "Image": "relay.protocol",
    "InputImage": "relay.protocol",
    "InputItem": "relay.protocol",
    "InputText": "relay.protocol",
    "Interrupt": "relay.protocol",
    "ItemCompleted": "relay.protocol",
    "ItemStarted": "relay.protocol",
    "LocalImage": "relay.protocol",
    "Message": "relay.protocol",
    "OnBusy": "relay.protocol",
    "Op": "relay.protocol",
    "Other": "relay.protocol",
    "OutputText": "relay.protocol",
    "OverrideTurnContext": "relay.protocol",
    "Reasoning": "relay.protocol",
    "ReasoningItem": "relay.protocol",
    "ResponseItem": "relay.protocol",
    "ReviewDecision": "relay.protocol",
    "SessionConfigured": "relay.protocol",
    "SessionResumed": "relay.protocol",
    "Shutdown": "relay.protocol",
    "ShutdownComplete": "relay.protocol",
    "StreamErrorEvent": "relay.protocol",
    "SummaryText": "relay.protocol",
    "Text": "relay.protocol",
    "TokenCount": "relay.protocol",
    "TokenUsage": "relay.protocol",
    "TokenUsageInfo": "relay.protocol",
    "ToolCall": "relay.protocol",
    "ToolCallItem": "relay.protocol",
    "ToolInvocation": "relay.protocol",
    "ToolOutput": "relay.protocol",
    "TurnAborted": "relay.protocol",
    "TurnComplete": "relay.protocol",
    "TurnItem": "relay.protocol",
    "TurnStarted": "relay.protocol",
    "Unpin": "relay.protocol",
    "UserInput": "relay.protocol",
    "UserMessage": "relay.protocol",
    "UserMessageItem": "relay.protocol",
    "UserTurn": "relay.protocol",
    "WarningEvent": "relay.protocol",
    "WorkStateNoted": "relay.protocol",
    "assistant_message": "relay.protocol",
    "user_message": "relay.protocol",
}


#: The public submodules relay shows as attributes, each imported when first read.
_SUBMODULES = ("lowlevel", "protocol")


if not TYPE_CHECKING:  # a checker sees the imports above, and no name it does not know

    def __getattr__(name: str) -> object:
        if name in _SUBMODULES:
            import importlib

            return importlib.import_module(f"{__name__}.{name}")
        from ._base._face import load

        return load(globals(), _SOURCES, name)

    def __dir__() -> list[str]:
        # The embedding API and the submodules; the protocol's names are listed where they
        # live, in relay.protocol, though each still reads here.
        kept = {name for name in globals() if _SOURCES.get(name) != "relay.protocol"}
        return sorted({*kept, *__all__, *_SUBMODULES})


del TYPE_CHECKING
