"""The names of the ``runtime`` namespace, loaded on the first use of any of them.

``runtime/__init__.py`` declares them for type checkers and imports this module lazily, so a
program that needs one module of the package does not pay for all of them.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

from . import compaction as compaction
from . import lowlevel as lowlevel
from ._codec import DecodeError as DecodeError
from ._codec import decode_op as decode_op
from ._codec import from_json as from_json
from ._codec import to_json as to_json
from ._config import BUILTIN_PROVIDERS as BUILTIN_PROVIDERS
from ._config import Config as Config
from ._config import Features as Features
from ._config import HookCommand as HookCommand
from ._config import Hooks as Hooks
from ._config import ProviderConfig as ProviderConfig
from ._config import RolloutConfig as RolloutConfig
from ._config import load_config as load_config
from ._errors import ClosedSessionError as ClosedSessionError
from ._errors import ConfigError as ConfigError
from ._errors import ContextWindowExceeded as ContextWindowExceeded
from ._errors import ErrorCode as ErrorCode
from ._errors import InvalidOpError as InvalidOpError
from ._errors import ModelError as ModelError
from ._errors import RelayError as RelayError
from ._errors import RolloutError as RolloutError
from ._errors import RolloutLockedError as RolloutLockedError
from ._errors import ScriptError as ScriptError
from ._errors import StreamError as StreamError
from ._hooks import CompactHook as CompactHook
from ._hooks import HookInput as HookInput
from ._hooks import HookStop as HookStop
from ._protocol import AbortReason as AbortReason
from ._protocol import AgentMessage as AgentMessage
from ._protocol import AgentMessageDelta as AgentMessageDelta
from ._protocol import AgentMessageItem as AgentMessageItem
from ._protocol import BackgroundEvent as BackgroundEvent
from ._protocol import Compact as Compact
from ._protocol import Compaction as Compaction
from ._protocol import CompactionReceipt as CompactionReceipt
from ._protocol import CompactionTrigger as CompactionTrigger
from ._protocol import ContentPart as ContentPart
from ._protocol import ContextCompacted as ContextCompacted
from ._protocol import ContextCompactionItem as ContextCompactionItem
from ._protocol import CustomToolCall as CustomToolCall
from ._protocol import CustomToolCallOutput as CustomToolCallOutput
from ._protocol import ErrorEvent as ErrorEvent
from ._protocol import Event as Event
from ._protocol import EventMsg as EventMsg
from ._protocol import FunctionCall as FunctionCall
from ._protocol import FunctionCallOutput as FunctionCallOutput
from ._protocol import GhostSnapshot as GhostSnapshot
from ._protocol import HookCompleted as HookCompleted
from ._protocol import HookStarted as HookStarted
from ._protocol import Image as Image
from ._protocol import InputImage as InputImage
from ._protocol import InputItem as InputItem
from ._protocol import InputText as InputText
from ._protocol import Interrupt as Interrupt
from ._protocol import ItemCompleted as ItemCompleted
from ._protocol import ItemStarted as ItemStarted
from ._protocol import LocalImage as LocalImage
from ._protocol import Message as Message
from ._protocol import OnBusy as OnBusy
from ._protocol import Op as Op
from ._protocol import Other as Other
from ._protocol import OutputText as OutputText
from ._protocol import OverrideTurnContext as OverrideTurnContext
from ._protocol import Reasoning as Reasoning
from ._protocol import ReasoningItem as ReasoningItem
from ._protocol import ResponseItem as ResponseItem
from ._protocol import SessionConfigured as SessionConfigured
from ._protocol import SessionResumed as SessionResumed
from ._protocol import Shutdown as Shutdown
from ._protocol import ShutdownComplete as ShutdownComplete
from ._protocol import StreamErrorEvent as StreamErrorEvent
from ._protocol import Submission as Submission
from ._protocol import SummaryText as SummaryText
from ._protocol import Text as Text
from ._protocol import TokenCount as TokenCount
from ._protocol import TokenUsage as TokenUsage
from ._protocol import TokenUsageInfo as TokenUsageInfo
from ._protocol import ToolCallItem as ToolCallItem
from ._protocol import TurnAborted as TurnAborted
from ._protocol import TurnComplete as TurnComplete
from ._protocol import TurnItem as TurnItem
from ._protocol import TurnStarted as TurnStarted
from ._protocol import UserInput as UserInput
from ._protocol import UserMessage as UserMessage
from ._protocol import UserMessageItem as UserMessageItem
from ._protocol import UserTurn as UserTurn
from ._protocol import WarningEvent as WarningEvent
from ._protocol import WorkStateNoted as WorkStateNoted
from ._protocol import assistant_message as assistant_message
from ._protocol import user_message as user_message
from ._session import Session as Session
from ._session import SessionStatistics as SessionStatistics
from ._session import open_session as open_session
from ._tools import Tool as Tool
from ._tools import ToolContext as ToolContext
from ._tools import ToolError as ToolError
from ._version import __version__ as __version__
from ._work_state import WorkEntry as WorkEntry

if _typing.TYPE_CHECKING:
    from ._resume import resume_session as resume_session

#: Names loaded from their module on first use: resuming reads rollouts, and a session that
#: never resumes need not import the reader.
_LAZY = {"resume_session": "relay._resume"}


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'relay._api' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
