"""relay's low-level API: the task port and the interfaces, for authors of tasks, compaction
backends and model clients.

Embedders need only :mod:`relay` (sessions, ops, events, items, configuration, errors) and
:mod:`relay.testing`. What is here is the other side of those:

- the task side: what a task sees through its :class:`~relay.TaskContext` (:class:`TaskView`,
  :class:`TokenBudget`, :class:`SampleResult`, the work-state record), how it ends a turn
  (:class:`StopTurn`), how it reads a structured answer (:func:`read_output`), and what a
  compactor gets at each compaction point (:class:`CompactionPolicy`,
  :class:`CompactionContext`, the background job);
- the backend side: :class:`CompactionBackend`, the :class:`BackendContext` it runs with, its
  :class:`CompactionRequest` and :class:`BackendResult`, and the outcome of a compaction;
- the model side: the :class:`ModelClient` protocol, its :class:`Prompt` and its events;
- the codec of the protocol, token estimates, and the shape of a summarised history.

relay's own tasks and compaction (:mod:`relay.tasks`) are built on this and :mod:`relay` alone.
"""

from __future__ import annotations

# As in relay/__init__.py: type checkers and the API reference read these imports; at run time
# the names load when one is first read, from where _SOURCES says.
TYPE_CHECKING = False
if TYPE_CHECKING:
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
    from ._base._model import SummaryTextDelta as SummaryTextDelta
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
    from ._core._port import CompactionPolicy as CompactionPolicy
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
    from ._exec._output_check import read_output as read_output

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
    "CompactionPolicy",
    "Completed",
    "Injection",
    "JobState",
    "ModelClient",
    "ModelEvent",
    "OutputItemDone",
    "OutputTextDelta",
    "SummaryTextDelta",
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
    "read_output",
    "summary_text",
    "to_json",
    "truncate_text",
]

#: Where each public name is defined (``tests/test_exports.py`` checks it against the imports).
_SOURCES = {
    "decode_response_item": "relay._base._codec",
    "encode_response_item": "relay._base._codec",
    "from_json": "relay._base._codec",
    "to_json": "relay._base._codec",
    "CompactRequest": "relay._base._model",
    "Completed": "relay._base._model",
    "ModelClient": "relay._base._model",
    "ModelEvent": "relay._base._model",
    "OutputItemDone": "relay._base._model",
    "OutputTextDelta": "relay._base._model",
    "SummaryTextDelta": "relay._base._model",
    "Prompt": "relay._base._model",
    "ToolSpec": "relay._base._model",
    "approx_tokens": "relay._base._tokens",
    "item_tokens": "relay._base._tokens",
    "truncate_text": "relay._base._tokens",
    "BackgroundJob": "relay._core._background",
    "JobState": "relay._core._background",
    "Snapshot": "relay._core._background",
    "TokenBudget": "relay._core._budget",
    "BackendResult": "relay._core._compaction",
    "CompactionBackend": "relay._core._compaction",
    "CompactionFailed": "relay._core._compaction",
    "CompactionOutcome": "relay._core._compaction",
    "CompactionRequest": "relay._core._compaction",
    "Injection": "relay._core._compaction",
    "Placement": "relay._core._compaction",
    "TurnSettings": "relay._core._context",
    "CompactionPolicy": "relay._core._port",
    "SampleResult": "relay._core._sampling",
    "build_compacted_history": "relay._core._summary",
    "compaction_prompt": "relay._core._summary",
    "message_kind": "relay._core._summary",
    "summary_text": "relay._core._summary",
    "BackendContext": "relay._core._support",
    "CompactionContext": "relay._core._support",
    "StopTurn": "relay._core._task",
    "TaskView": "relay._core._view",
    "WorkEntry": "relay._core._work_state",
    "WorkState": "relay._core._work_state",
    "read_output": "relay._exec._output_check",
}


if not TYPE_CHECKING:  # a checker sees the imports above, and no name it does not know

    def __getattr__(name: str) -> object:
        from ._base._face import load

        return load(globals(), _SOURCES, name)

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})


del TYPE_CHECKING
