"""The names of the ``runtime`` namespace, loaded on the first use of any of them.

``runtime/__init__.py`` declares them for type checkers and imports this module lazily, so a
program that needs one module of the package does not pay for all of them.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

from . import compaction as compaction
from . import lowlevel as lowlevel
from ._base._codec import DecodeError as DecodeError
from ._base._codec import decode_op as decode_op
from ._base._codec import from_json as from_json
from ._base._codec import to_json as to_json
from ._base._config import BUILTIN_PROVIDERS as BUILTIN_PROVIDERS
from ._base._config import Config as Config
from ._base._config import Features as Features
from ._base._config import HookCommand as HookCommand
from ._base._config import Hooks as Hooks
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
from ._base._protocol import Submission as Submission
from ._base._protocol import SummaryText as SummaryText
from ._base._protocol import Text as Text
from ._base._protocol import TokenCount as TokenCount
from ._base._protocol import TokenUsage as TokenUsage
from ._base._protocol import TokenUsageInfo as TokenUsageInfo
from ._base._protocol import ToolCallItem as ToolCallItem
from ._base._protocol import TurnAborted as TurnAborted
from ._base._protocol import TurnComplete as TurnComplete
from ._base._protocol import TurnItem as TurnItem
from ._base._protocol import TurnStarted as TurnStarted
from ._base._protocol import UserInput as UserInput
from ._base._protocol import UserMessage as UserMessage
from ._base._protocol import UserMessageItem as UserMessageItem
from ._base._protocol import UserTurn as UserTurn
from ._base._protocol import WarningEvent as WarningEvent
from ._base._protocol import WorkStateNoted as WorkStateNoted
from ._base._protocol import assistant_message as assistant_message
from ._base._protocol import user_message as user_message
from ._core._hooks import CompactHook as CompactHook
from ._core._hooks import HookInput as HookInput
from ._core._hooks import HookStop as HookStop
from ._core._session import Session as Session
from ._core._session import SessionStatistics as SessionStatistics
from ._core._session import open_session as open_session
from ._core._tools import Tool as Tool
from ._core._tools import ToolContext as ToolContext
from ._core._tools import ToolError as ToolError
from ._core._work_state import WorkEntry as WorkEntry
from ._version import __version__ as __version__

if _typing.TYPE_CHECKING:
    from ._rollout._resume import resume_session as resume_session

#: Names loaded from their module on first use: resuming reads rollouts, and a session that
#: never resumes need not import the reader.
_LAZY = {"resume_session": "relay._rollout._resume"}


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'relay._api' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
