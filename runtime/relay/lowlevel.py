"""relay's low-level API: for authors of tasks, compaction backends and model clients.

Embedders need only :mod:`runtime` (sessions, ops, events, items, configuration, errors) and
:mod:`relay.testing`. What is here is the other side of those: the task interface and the
context a task sees, the model client protocol and its events, the session's state and what a
resumed session starts from, and the codec of history items. The pure functions compaction
backends are built from are in :mod:`relay.compaction`.
"""

from ._base._codec import decode_response_item as decode_response_item
from ._base._codec import encode_response_item as encode_response_item
from ._base._model import CompactRequest as CompactRequest
from ._base._model import Completed as Completed
from ._base._model import ModelClient as ModelClient
from ._base._model import ModelEvent as ModelEvent
from ._base._model import OutputItemDone as OutputItemDone
from ._base._model import OutputTextDelta as OutputTextDelta
from ._base._model import Prompt as Prompt
from ._base._model import ToolSpec as ToolSpec
from ._core._background import BackgroundJob as BackgroundJob
from ._core._background import JobState as JobState
from ._core._background import Snapshot as Snapshot
from ._core._context import TurnSettings as TurnSettings
from ._core._context import WorldState as WorldState
from ._core._hooks import HookTrigger as HookTrigger
from ._core._hooks import run_compact_hooks as run_compact_hooks
from ._core._sampling import SampleResult as SampleResult
from ._core._sampling import cut_answer_warning as cut_answer_warning
from ._core._state import ResumedState as ResumedState
from ._core._state import SessionState as SessionState
from ._core._task import CompactTaskFactory as CompactTaskFactory
from ._core._task import RegularTaskFactory as RegularTaskFactory
from ._core._task import SessionTask as SessionTask
from ._core._task import TaskKind as TaskKind
from ._core._task import TaskKinds as TaskKinds
from ._core._task_context import TaskContext as TaskContext
from ._core._tools import NEW_CONTEXT_WINDOW as NEW_CONTEXT_WINDOW
