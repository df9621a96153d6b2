"""Opening a session: the wiring between a configuration and the core.

The core (:mod:`relay._core`) runs a session with what it is handed. Choosing those parts is
done here, once per session: the model clients (the embedded scripted model, or an HTTP client
for the configured provider), the tools (the enabled built-ins, the context tools, ``recall``,
the embedder's own, those of the MCP servers it starts and stops), the rollout writer, the
state (new, or resumed from a rollout), the task factories of the ops (relay's own from
``relay.tasks``, each replaceable) and the compactor.
"""

from ._parts import MCP_EVENT_ID as MCP_EVENT_ID
from ._parts import mcp_server_tables as mcp_server_tables
from ._parts import open_model_client as open_model_client
from ._session import open_session as open_session
from ._session import resume_session as resume_session
from ._tasks import BUILTIN_COMPACTOR as BUILTIN_COMPACTOR
from ._tasks import BUILTIN_TASKS as BUILTIN_TASKS
from ._tasks import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from ._tasks import TaskFactory as TaskFactory
from ._tasks import custom_op_types as custom_op_types
from ._tasks import load_object as load_object
from ._tasks import task_factories as task_factories

__all__ = [
    "BUILTIN_COMPACTOR",
    "BUILTIN_TASKS",
    "ENTRY_POINT_GROUP",
    "MCP_EVENT_ID",
    "TaskFactory",
    "custom_op_types",
    "load_object",
    "mcp_server_tables",
    "open_model_client",
    "open_session",
    "resume_session",
    "task_factories",
]
