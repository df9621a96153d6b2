"""relay's low-level API: the task port and the interfaces, for authors of tasks, compaction
backends and model clients.

Embedders need only :mod:`relay` (sessions, ops, events, items, configuration, errors) and
:mod:`relay.testing`. What is here is the other side of those:

- the task side: what a task sees through its :class:`~relay.TaskContext` (:class:`TaskView`,
  :class:`TokenBudget`, :class:`SampleResult`, the work-state record), how it ends a turn
  (:class:`StopTurn`), and what a compactor gets at each compaction point
  (:class:`Compactor`, :class:`CompactionContext`, the background job);
- the backend side: :class:`CompactionBackend`, the :class:`BackendContext` it runs with, its
  :class:`CompactionRequest` and :class:`BackendResult`, and the outcome of a compaction;
- the model side: the :class:`ModelClient` protocol, its :class:`Prompt` and its events;
- the codec of the protocol, token estimates, and the shape of a summarised history.

relay's own tasks and compaction (:mod:`relay.tasks`) are built on this and :mod:`relay` alone.
"""

from __future__ import annotations

import attrs as _attrs

from ._base._codec import decode_response_item as decode_response_item
from ._base._codec import encode_response_item as encode_response_item
from ._base._codec import from_json as from_json
from ._base._codec import to_json as to_json
from ._base._model import CompactRequest as CompactRequest
from ._base._model import Completed as Completed
from ._base._model import ModelClient as ModelClient
from ._base._model import ModelEvent as ModelEvent
from ._base._model import OutputItemDone as OutputItemDone
from ._base._model import OutputTextDelta as OutputTextDelta
from ._base._model import Prompt as Prompt
from ._base._model import ToolSpec as ToolSpec
from ._base._tokens import approx_tokens as approx_tokens
from ._base._tokens import item_tokens as item_tokens
from ._base._tokens import truncate_text as truncate_text
from ._core._background import BackgroundJob as BackgroundJob
from ._core._background import JobState as JobState
from ._core._background import Snapshot as Snapshot
from ._core._budget import TokenBudget as TokenBudget
from ._core._compaction import BackendResult as BackendResult
from ._core._compaction import CompactionBackend as CompactionBackend
from ._core._compaction import CompactionFailed as CompactionFailed
from ._core._compaction import CompactionOutcome as CompactionOutcome
from ._core._compaction import CompactionRequest as CompactionRequest
from ._core._compaction import Injection as Injection
from ._core._compaction import Placement as Placement
from ._core._context import TurnSettings as TurnSettings
from ._core._port import Compactor as Compactor
from ._core._sampling import SampleResult as SampleResult
from ._core._summary import build_compacted_history as build_compacted_history
from ._core._summary import compaction_prompt as compaction_prompt
from ._core._summary import message_kind as message_kind
from ._core._summary import summary_text as summary_text
from ._core._support import BackendContext as BackendContext
from ._core._support import CompactionContext as CompactionContext
from ._core._task import StopTurn as StopTurn
from ._core._view import TaskView as TaskView
from ._core._work_state import WorkEntry as WorkEntry
from ._core._work_state import WorkState as WorkState

__all__ = [
    "BackendContext",
    "BackendResult",
    "BackgroundJob",
    "CompactRequest",
    "CompactionBackend",
    "CompactionContext",
    "CompactionFailed",
    "CompactionOutcome",
    "CompactionRequest",
    "Compactor",
    "Completed",
    "Injection",
    "JobState",
    "ModelClient",
    "ModelEvent",
    "OutputItemDone",
    "OutputTextDelta",
    "Placement",
    "Prompt",
    "SampleResult",
    "Snapshot",
    "StopTurn",
    "TaskView",
    "TokenBudget",
    "ToolSpec",
    "TurnSettings",
    "WorkEntry",
    "WorkState",
    "approx_tokens",
    "build_compacted_history",
    "compaction_prompt",
    "decode_response_item",
    "encode_response_item",
    "from_json",
    "item_tokens",
    "message_kind",
    "summary_text",
    "to_json",
    "truncate_text",
]

# Public classes print where users import them from: relay.lowlevel.TaskView. Their annotations
# are resolved first, in the modules that define them.
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type) and _value.__module__.startswith("relay._"):
        if _attrs.has(_value):
            _attrs.resolve_types(_value)
        _value.__module__ = __name__
del _name, _value
