"""The names relay's spans and attributes use (docs/observability.md).

The GenAI semantic conventions of OpenTelemetry are still in development and have moved out of
the main semantic-conventions repository; their Python constants are marked deprecated. relay
writes the names it uses here, once, as plain strings.
"""

from __future__ import annotations

# ----------------------------------------------------------------------------- span names

#: The span of a session, from ``session_configured`` to ``shutdown_complete``.
SESSION_SPAN = "relay.session"
#: The span of a turn (any task: a regular turn, a manual compaction, a custom op).
TURN_SPAN = "invoke_agent relay"
#: The span of a compaction, from its ``item_started`` to its ``item_completed`` (or failure).
COMPACTION_SPAN = "relay.compaction"
#: The span of a compaction hook.
HOOK_SPAN = "relay.hook"
#: ``relay eval``: the evaluation, and each run of a case under a configuration within it.
EVAL_SPAN = "relay.eval"
EVAL_RUN_SPAN = "relay.eval.case"
#: The agent's name in ``gen_ai.agent.name`` and in the turn span's name.
AGENT_NAME = "relay"


def chat_span(model: str) -> str:
    """The span of a model request: ``chat {model}``."""
    return f"chat {model}"


def tool_span(tool: str) -> str:
    """The span of a tool call: ``execute_tool {tool}``."""
    return f"execute_tool {tool}"


# ----------------------------------------------------------------------------- GenAI attributes

GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_SYSTEM = "gen_ai.system"
"""The older name of ``gen_ai.provider.name``, still read by many backends."""
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
ERROR_TYPE = "error.type"

#: ``gen_ai.operation.name`` values.
OP_CHAT = "chat"
OP_EXECUTE_TOOL = "execute_tool"
OP_INVOKE_AGENT = "invoke_agent"

# ----------------------------------------------------------------------------- relay's own

RELAY_VERSION = "relay.version"
RELAY_SESSION_RESUMED = "relay.session.resumed"
RELAY_TURN_ID = "relay.turn.id"
RELAY_TASK_KIND = "relay.task.kind"
RELAY_ABORT_REASON = "relay.turn.abort_reason"
"""On a turn that was aborted, and on what it left open: ``interrupted``, ``replaced``, ..."""
RELAY_CANCELLED = "relay.cancelled"
"""On a model request cancelled (by an interrupt, a replacing turn, a shutdown)."""
RELAY_PURPOSE = "relay.purpose"
"""Why a model request was made: ``turn``, or ``compact`` (a summary, a remote compaction)."""
RELAY_REMOTE_COMPACTION = "relay.remote_compaction"
"""On a model request to the remote compaction endpoint (``POST /responses/compact``)."""
RELAY_MCP_SERVER = "relay.mcp.server"
"""The MCP server of a tool named ``mcp__SERVER__TOOL``."""
RELAY_COMPACTION_BACKEND = "relay.compaction.backend"
RELAY_COMPACTION_TRIGGER = "relay.compaction.trigger"
RELAY_COMPACTION_TOKENS_BEFORE = "relay.compaction.tokens_before"
RELAY_COMPACTION_TOKENS_AFTER = "relay.compaction.tokens_after"
RELAY_COMPACTION_COUNTED_BEFORE = "relay.compaction.counted_before"
RELAY_COMPACTION_BACKGROUND = "relay.compaction.background"
RELAY_COMPACTION_SNAPSHOT_AGE_MS = "relay.compaction.snapshot_age_ms"
RELAY_COMPACTION_CUT = "relay.compaction.cut"
RELAY_COMPACTION_INSTALLED = "relay.compaction.installed"
RELAY_HOOK_NAME = "relay.hook.name"
RELAY_HOOK_POINT = "relay.hook.point"
RELAY_HOOK_OUTCOME = "relay.hook.outcome"
RELAY_CONTENT_TRUNCATED = "relay.content.truncated"
"""Set when recorded content was cut to :data:`~relay._otel._values.CONTENT_LIMIT`."""
RELAY_LINK = "relay.link"
"""On a resumed session's links: ``resumed_from``."""
RELAY_EVAL_CASES = "relay.eval.cases"
"""On the evaluation's span: how many cases the corpus holds."""
RELAY_EVAL_CONFIGURATIONS = "relay.eval.configurations"
"""On the evaluation's span: the names of the configurations, in the matrix's order."""
RELAY_EVAL_REPEATS = "relay.eval.repeats"
RELAY_EVAL_RUNS = "relay.eval.runs"
"""On the evaluation's span: the runs it made (cases × configurations × repeats)."""
RELAY_EVAL_FAILED_RUNS = "relay.eval.failed_runs"
RELAY_EVAL_CASE = "relay.eval.case"
"""On a run's span: the case's name (its folder under the corpus)."""
RELAY_EVAL_CONFIGURATION = "relay.eval.configuration"
RELAY_EVAL_REPEAT = "relay.eval.repeat"
"""On a run's span: which repeat, from 0."""
RELAY_EVAL_OUTCOME = "relay.eval.outcome"
"""On a run's span: ``completed``, or ``failed`` (its failure is the span's status)."""
RELAY_EVAL_RETENTION = "relay.eval.retention"
"""On a run's span: the facts kept over the facts looked for, when any was looked for."""
RELAY_EVAL_FACTS_CHECKED = "relay.eval.facts_checked"
RELAY_EVAL_FACTS_KEPT = "relay.eval.facts_kept"
RELAY_EVAL_ANSWERED = "relay.eval.answered"
"""On a run's span: the probe questions answered right (of ``relay.eval.questions``)."""
RELAY_EVAL_QUESTIONS = "relay.eval.questions"
RELAY_EVAL_COMPACTIONS = "relay.eval.compactions"
RELAY_EVAL_INPUT_TOKENS = "relay.eval.input_tokens"
RELAY_EVAL_REREADS = "relay.eval.rereads"
#: The event a session span gets for an ``error`` outside any turn.
ERROR_EVENT = "relay.error"
