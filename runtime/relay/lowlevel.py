"""relay's low-level API: for authors of tasks, compaction backends and model clients.

Embedders need only :mod:`relay` (sessions, ops, events, items, configuration, errors) and
:mod:`relay.testing`. What is here is the other side of those:

- the task port's view and what a compaction needs beyond it (:class:`TaskView`,
  :class:`TokenBudget`, :class:`StopTurn`, :class:`CompactionSupport`, :class:`Compactor`);
- the compaction interface: :class:`CompactionBackend`, the :class:`BackendContext` it runs
  with, its :class:`CompactionRequest` and :class:`BackendResult`;
- the shape of a summarised history and token estimates, as plain functions;
- the model client protocol and its events;
- the session's state, what a resumed session starts from, and the codec of the protocol;
- the table of an MCP server (:class:`McpServerConfig`), which :func:`relay.open_session` also
  takes as a plain dict.
- the configuration tables :mod:`relay` leaves out (:class:`OtelConfig`, the ``[otel]`` table).
"""

from __future__ import annotations

# As in relay/__init__.py: type checkers and the API reference read these imports; at run time
# the names load when one is first read, from where _SOURCES says.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._base._codec import DecodeError as DecodeError
    from ._base._codec import decode_op as decode_op
    from ._base._codec import decode_response_item as decode_response_item
    from ._base._codec import encode_response_item as encode_response_item
    from ._base._codec import from_json as from_json
    from ._base._codec import to_json as to_json
    from ._base._config import BUILTIN_PROVIDERS as BUILTIN_PROVIDERS
    from ._base._config import OtelConfig as OtelConfig
    from ._base._errors import ScriptError as ScriptError
    from ._base._errors import StreamError as StreamError
    from ._base._mcp_config import McpServerConfig as McpServerConfig
    from ._base._model import CUT_AT_LIMIT as CUT_AT_LIMIT
    from ._base._model import CompactRequest as CompactRequest
    from ._base._model import Completed as Completed
    from ._base._model import ModelClient as ModelClient
    from ._base._model import ModelEvent as ModelEvent
    from ._base._model import OutputItemDone as OutputItemDone
    from ._base._model import OutputTextDelta as OutputTextDelta
    from ._base._model import Prompt as Prompt
    from ._base._model import ToolSpec as ToolSpec
    from ._base._protocol import Compaction as Compaction
    from ._base._protocol import ContentPart as ContentPart
    from ._base._protocol import CustomToolCall as CustomToolCall
    from ._base._protocol import CustomToolCallOutput as CustomToolCallOutput
    from ._base._protocol import GhostSnapshot as GhostSnapshot
    from ._base._protocol import InputImage as InputImage
    from ._base._protocol import InputText as InputText
    from ._base._protocol import Other as Other
    from ._base._protocol import OutputText as OutputText
    from ._base._protocol import Reasoning as Reasoning
    from ._base._protocol import SessionResumed as SessionResumed
    from ._base._protocol import Submission as Submission
    from ._base._protocol import SummaryText as SummaryText
    from ._base._protocol import TokenUsageInfo as TokenUsageInfo
    from ._base._protocol import ToolCall as ToolCall
    from ._base._protocol import ToolOutput as ToolOutput
    from ._base._protocol import assistant_message as assistant_message
    from ._base._protocol import user_message as user_message
    from ._base._tokens import approx_tokens as approx_tokens
    from ._base._tokens import item_tokens as item_tokens
    from ._base._tokens import items_tokens as items_tokens
    from ._base._tokens import truncate_text as truncate_text
    from ._core._background import BackgroundContext as BackgroundContext
    from ._core._background import BackgroundJob as BackgroundJob
    from ._core._background import JobState as JobState
    from ._core._background import Snapshot as Snapshot
    from ._core._background import installed_history as installed_history
    from ._core._background import still_current as still_current
    from ._core._budget import ANSWER_ROOM as ANSWER_ROOM
    from ._core._budget import TokenBudget as TokenBudget
    from ._core._budget import answer_room as answer_room
    from ._core._budget import auto_compact_limit as auto_compact_limit
    from ._core._compaction import BackendContext as BackendContext
    from ._core._compaction import BackendResult as BackendResult
    from ._core._compaction import CompactionBackend as CompactionBackend
    from ._core._compaction import CompactionFailed as CompactionFailed
    from ._core._compaction import CompactionOutcome as CompactionOutcome
    from ._core._compaction import CompactionRequest as CompactionRequest
    from ._core._compaction import Injection as Injection
    from ._core._compaction import Placement as Placement
    from ._core._context import TurnSettings as TurnSettings
    from ._core._context import WorldState as WorldState
    from ._core._history import call_id_of as call_id_of
    from ._core._history import is_contextual as is_contextual
    from ._core._hooks import HookPoint as HookPoint
    from ._core._hooks import HookTrigger as HookTrigger
    from ._core._input import user_message_of as user_message_of
    from ._core._port import TOOL_OUTPUT_TOKENS as TOOL_OUTPUT_TOKENS
    from ._core._port import Compactor as Compactor
    from ._core._sampling import SampleResult as SampleResult
    from ._core._sampling import cut_answer_warning as cut_answer_warning
    from ._core._state import ResumedState as ResumedState
    from ._core._state import SessionState as SessionState
    from ._core._summary import LOCAL_USER_MESSAGE_BUDGET as LOCAL_USER_MESSAGE_BUDGET
    from ._core._summary import NO_SUMMARY as NO_SUMMARY
    from ._core._summary import build_compacted_history as build_compacted_history
    from ._core._summary import compaction_prompt as compaction_prompt
    from ._core._summary import ghost_snapshots as ghost_snapshots
    from ._core._summary import is_real_user_message as is_real_user_message
    from ._core._summary import is_summary as is_summary
    from ._core._summary import keep_recent_user_messages as keep_recent_user_messages
    from ._core._summary import real_user_messages as real_user_messages
    from ._core._summary import summary_prefix as summary_prefix
    from ._core._summary import summary_text as summary_text
    from ._core._support import CompactionSupport as CompactionSupport
    from ._core._task import StopTurn as StopTurn
    from ._core._tools import NEW_CONTEXT_WINDOW as NEW_CONTEXT_WINDOW
    from ._core._tools import RECALL_TOOL as RECALL_TOOL
    from ._core._view import TaskView as TaskView
    from ._core._work_state import KIND_HEADINGS as KIND_HEADINGS
    from ._core._work_state import WorkEntry as WorkEntry
    from ._core._work_state import WorkState as WorkState
    from ._core._work_state import kind_heading as kind_heading
    from ._core._work_state import pins_overflow_advice as pins_overflow_advice
    from ._core._work_state import work_state_budget as work_state_budget
    from ._core._writer import Epoch as Epoch

__all__ = [
    "ANSWER_ROOM",
    "BUILTIN_PROVIDERS",
    "CUT_AT_LIMIT",
    "KIND_HEADINGS",
    "LOCAL_USER_MESSAGE_BUDGET",
    "NEW_CONTEXT_WINDOW",
    "NO_SUMMARY",
    "RECALL_TOOL",
    "TOOL_OUTPUT_TOKENS",
    "BackendContext",
    "BackendResult",
    "BackgroundContext",
    "BackgroundJob",
    "CompactRequest",
    "Compaction",
    "CompactionBackend",
    "CompactionFailed",
    "CompactionOutcome",
    "CompactionRequest",
    "CompactionSupport",
    "Compactor",
    "Completed",
    "ContentPart",
    "CustomToolCall",
    "CustomToolCallOutput",
    "DecodeError",
    "Epoch",
    "GhostSnapshot",
    "HookPoint",
    "HookTrigger",
    "Injection",
    "InputImage",
    "InputText",
    "JobState",
    "McpServerConfig",
    "ModelClient",
    "ModelEvent",
    "Other",
    "OtelConfig",
    "OutputItemDone",
    "OutputText",
    "OutputTextDelta",
    "Placement",
    "Prompt",
    "Reasoning",
    "ResumedState",
    "SampleResult",
    "ScriptError",
    "SessionResumed",
    "SessionState",
    "Snapshot",
    "StopTurn",
    "StreamError",
    "Submission",
    "SummaryText",
    "TaskView",
    "TokenBudget",
    "TokenUsageInfo",
    "ToolCall",
    "ToolOutput",
    "ToolSpec",
    "TurnSettings",
    "WorkEntry",
    "WorkState",
    "WorldState",
    "answer_room",
    "approx_tokens",
    "assistant_message",
    "auto_compact_limit",
    "build_compacted_history",
    "call_id_of",
    "compaction_prompt",
    "cut_answer_warning",
    "decode_op",
    "decode_response_item",
    "encode_response_item",
    "from_json",
    "ghost_snapshots",
    "installed_history",
    "is_contextual",
    "is_real_user_message",
    "is_summary",
    "item_tokens",
    "items_tokens",
    "keep_recent_user_messages",
    "kind_heading",
    "pins_overflow_advice",
    "real_user_messages",
    "still_current",
    "summary_prefix",
    "summary_text",
    "to_json",
    "truncate_text",
    "user_message",
    "user_message_of",
    "work_state_budget",
]

#: Where each public name is defined (``tests/test_exports.py`` checks it against the imports).
_SOURCES = {
    "DecodeError": "relay._base._codec",
    "decode_op": "relay._base._codec",
    "decode_response_item": "relay._base._codec",
    "encode_response_item": "relay._base._codec",
    "from_json": "relay._base._codec",
    "to_json": "relay._base._codec",
    "BUILTIN_PROVIDERS": "relay._base._config",
    "OtelConfig": "relay._base._config",
    "ScriptError": "relay._base._errors",
    "StreamError": "relay._base._errors",
    "McpServerConfig": "relay._base._mcp_config",
    "CUT_AT_LIMIT": "relay._base._model",
    "CompactRequest": "relay._base._model",
    "Completed": "relay._base._model",
    "ModelClient": "relay._base._model",
    "ModelEvent": "relay._base._model",
    "OutputItemDone": "relay._base._model",
    "OutputTextDelta": "relay._base._model",
    "Prompt": "relay._base._model",
    "ToolSpec": "relay._base._model",
    "Compaction": "relay._base._protocol",
    "ContentPart": "relay._base._protocol",
    "CustomToolCall": "relay._base._protocol",
    "CustomToolCallOutput": "relay._base._protocol",
    "GhostSnapshot": "relay._base._protocol",
    "InputImage": "relay._base._protocol",
    "InputText": "relay._base._protocol",
    "Other": "relay._base._protocol",
    "OutputText": "relay._base._protocol",
    "Reasoning": "relay._base._protocol",
    "SessionResumed": "relay._base._protocol",
    "Submission": "relay._base._protocol",
    "SummaryText": "relay._base._protocol",
    "TokenUsageInfo": "relay._base._protocol",
    "ToolCall": "relay._base._protocol",
    "ToolOutput": "relay._base._protocol",
    "assistant_message": "relay._base._protocol",
    "user_message": "relay._base._protocol",
    "approx_tokens": "relay._base._tokens",
    "item_tokens": "relay._base._tokens",
    "items_tokens": "relay._base._tokens",
    "truncate_text": "relay._base._tokens",
    "BackgroundContext": "relay._core._background",
    "BackgroundJob": "relay._core._background",
    "JobState": "relay._core._background",
    "Snapshot": "relay._core._background",
    "installed_history": "relay._core._background",
    "still_current": "relay._core._background",
    "ANSWER_ROOM": "relay._core._budget",
    "TokenBudget": "relay._core._budget",
    "answer_room": "relay._core._budget",
    "auto_compact_limit": "relay._core._budget",
    "BackendContext": "relay._core._compaction",
    "BackendResult": "relay._core._compaction",
    "CompactionBackend": "relay._core._compaction",
    "CompactionFailed": "relay._core._compaction",
    "CompactionOutcome": "relay._core._compaction",
    "CompactionRequest": "relay._core._compaction",
    "Injection": "relay._core._compaction",
    "Placement": "relay._core._compaction",
    "TurnSettings": "relay._core._context",
    "WorldState": "relay._core._context",
    "call_id_of": "relay._core._history",
    "is_contextual": "relay._core._history",
    "HookPoint": "relay._core._hooks",
    "HookTrigger": "relay._core._hooks",
    "user_message_of": "relay._core._input",
    "TOOL_OUTPUT_TOKENS": "relay._core._port",
    "Compactor": "relay._core._port",
    "SampleResult": "relay._core._sampling",
    "cut_answer_warning": "relay._core._sampling",
    "ResumedState": "relay._core._state",
    "SessionState": "relay._core._state",
    "LOCAL_USER_MESSAGE_BUDGET": "relay._core._summary",
    "NO_SUMMARY": "relay._core._summary",
    "build_compacted_history": "relay._core._summary",
    "compaction_prompt": "relay._core._summary",
    "ghost_snapshots": "relay._core._summary",
    "is_real_user_message": "relay._core._summary",
    "is_summary": "relay._core._summary",
    "keep_recent_user_messages": "relay._core._summary",
    "real_user_messages": "relay._core._summary",
    "summary_prefix": "relay._core._summary",
    "summary_text": "relay._core._summary",
    "CompactionSupport": "relay._core._support",
    "StopTurn": "relay._core._task",
    "NEW_CONTEXT_WINDOW": "relay._core._tools",
    "RECALL_TOOL": "relay._core._tools",
    "TaskView": "relay._core._view",
    "KIND_HEADINGS": "relay._core._work_state",
    "WorkEntry": "relay._core._work_state",
    "WorkState": "relay._core._work_state",
    "kind_heading": "relay._core._work_state",
    "pins_overflow_advice": "relay._core._work_state",
    "work_state_budget": "relay._core._work_state",
    "Epoch": "relay._core._writer",
}

if not TYPE_CHECKING:  # a checker sees the imports above, and no name it does not know

    def __getattr__(name: str) -> object:
        from ._base._face import load

        return load(globals(), _SOURCES, name)

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})


del TYPE_CHECKING
