"""Renders ``docs/config.md`` from :class:`~relay.Config` and the classes it holds.

``python -m relay._cli._config_doc > docs/config.md`` writes it. A test checks that the file equals
what this renders and that every example below loads into the value it shows, so the document
cannot drift from the code. Each key's meaning is the attribute docstring in ``_config.py``.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import attrs

from .._base._agents_config import BUILTIN_ROLES, AgentRole, AgentsConfig
from .._base._config import (
    BUILTIN_PROVIDERS,
    CompactionSettings,
    Config,
    Features,
    HookCommand,
    Hooks,
    OtelConfig,
    ProviderConfig,
    RolloutConfig,
)
from .._base._environment_config import ShellEnvironmentPolicy
from .._base._mcp_config import McpServerConfig
from .._base._sandbox_config import SandboxWorkspaceWrite
from .._base._util import field_types
from ._protocol_doc import attribute_docs, markdown

#: One TOML example per key, by dotted path (``[]`` for an entry of an array of tables).
#: Keys whose default is not a constant of the class: what the document says instead.
DEFAULTS_GIVEN: Mapping[str, str] = {
    "model_providers.*.name": "default the table's name",
}

EXAMPLES: Mapping[str, str] = {
    "model": 'model = "gpt-5"',
    "model_provider": 'model_provider = "ollama"',
    "model_script": 'model_script = "examples/hello.model.json"',
    "compact_model": 'compact_model = "gpt-5-mini"',
    "compact_model_provider": (
        'compact_model = "qwen2.5-coder"\ncompact_model_provider = "local"\n\n'
        '[model_providers.local]\nbase_url = "http://127.0.0.1:8080/v1"\nwire_api = "chat"'
    ),
    "model_context_window": "model_context_window = 128000",
    "model_auto_compact_token_limit": "model_auto_compact_token_limit = 100000",
    "model_post_turn_compact_threshold_percent": "model_post_turn_compact_threshold_percent = 80",
    "background_compact_threshold_percent": "background_compact_threshold_percent = 60",
    "model_async_compact_threshold_percent": (
        "model_async_compact_threshold_percent = 10\n\n[features]\nasync_compaction = true"
    ),
    "max_auto_compactions_per_turn": "max_auto_compactions_per_turn = 2",
    "max_steps_per_turn": "max_steps_per_turn = 500",
    "max_identical_tool_calls": "max_identical_tool_calls = 0",
    "recent_reads_token_budget": "recent_reads_token_budget = 0",
    "work_state_token_budget": "work_state_token_budget = 4000",
    "mask_keep_recent_tokens": "mask_keep_recent_tokens = 8000",
    "mask_margin_percent": "mask_margin_percent = 20",
    "mask_trigger_tokens": "mask_trigger_tokens = 40000",
    "model_max_output_tokens": "model_max_output_tokens = 4096",
    "compact_prompt": 'compact_prompt = "Summarize the work so far for a colleague."',
    "experimental_compact_prompt_file": 'experimental_compact_prompt_file = "prompts/compact.md"',
    "base_instructions": 'base_instructions = "You are a careful coding assistant."',
    "base_instructions_file": 'base_instructions_file = "prompts/base.md"',
    "developer_instructions": 'developer_instructions = "Answer in English."',
    "project_doc": 'project_doc = "CONTRIBUTING.md"',
    "project_doc_max_bytes": "project_doc_max_bytes = 65536",
    "cwd": 'cwd = "/home/me/project"',
    "tools": "tools = { shell = true, sleep = false }",
    "compaction.tool_outputs_as_data": "[compaction]\ntool_outputs_as_data = false",
    "compaction.placement": '[compaction]\nplacement = "cache_aware"',
    "compaction.save_state": "[compaction]\nsave_state = true",
    "approval_policy": 'approval_policy = "on-failure"',
    "sandbox_mode": 'sandbox_mode = "workspace-write"',
    "sandbox_workspace_write.writable_roots": (
        '[sandbox_workspace_write]\nwritable_roots = ["/home/me/.cache/pip"]'
    ),
    "sandbox_workspace_write.network_access": "[sandbox_workspace_write]\nnetwork_access = true",
    "sandbox_workspace_write.exclude_tmpdir_env_var": (
        "[sandbox_workspace_write]\nexclude_tmpdir_env_var = true"
    ),
    "sandbox_workspace_write.exclude_slash_tmp": (
        "[sandbox_workspace_write]\nexclude_slash_tmp = true"
    ),
    "shell_environment_policy.inherit": '[shell_environment_policy]\ninherit = "core"',
    "shell_environment_policy.ignore_default_excludes": (
        "[shell_environment_policy]\nignore_default_excludes = true"
    ),
    "shell_environment_policy.exclude": (
        '[shell_environment_policy]\nexclude = ["AWS_*", "*_PASSWORD"]'
    ),
    "shell_environment_policy.set": (
        '[shell_environment_policy]\nset = { CI = "1", PAGER = "cat" }'
    ),
    "shell_environment_policy.include_only": (
        '[shell_environment_policy]\ninclude_only = ["PATH", "HOME", "LANG", "CI"]'
    ),
    "features.token_budget": "[features]\ntoken_budget = true",
    "features.remote_compaction_v2": "[features]\nremote_compaction_v2 = true",
    "features.async_compaction": (
        "model_async_compact_threshold_percent = 10\n\n[features]\nasync_compaction = true"
    ),
    "features.work_state": "[features]\nwork_state = false",
    "features.tool_output_masking": "[features]\ntool_output_masking = true",
    "features.multi_agent": "[features]\nmulti_agent = true",
    "agents.max_depth": "[agents]\nmax_depth = 2",
    "agents.max_threads": "[agents]\nmax_threads = 12",
    "agents.*.description": (
        '[agents.reviewer]\ndescription = "Reviews a change and lists what is wrong with it."'
    ),
    "agents.*.model": '[agents.reviewer]\nmodel = "gpt-5-mini"',
    "agents.*.model_reasoning_effort": '[agents.reviewer]\nmodel_reasoning_effort = "high"',
    "agents.*.instructions": (
        '[agents.reviewer]\ninstructions = "Review the change you are given; edit nothing."'
    ),
    "agents.*.tools": '[agents.reviewer]\ntools = ["read_file", "list_dir", "shell"]',
    "agents.*.approval_policy": '[agents.reviewer]\napproval_policy = "untrusted"',
    "agents.*.sandbox_mode": '[agents.reviewer]\nsandbox_mode = "read-only"',
    "rollout.enabled": "[rollout]\nenabled = false",
    "rollout.dir": '[rollout]\ndir = "/var/lib/relay/sessions"',
    "otel.record_content": "[otel]\nrecord_content = true",
    "tasks": '[tasks]\nreview = "my_tasks.review:review_task"',
    "compactor": 'compactor = "my_compaction.auto:make"',
    "hooks.pre_compact": '[[hooks.pre_compact]]\ncommand = ["python3", "hooks/check.py"]',
    "hooks.post_compact": '[[hooks.post_compact]]\ncommand = ["logger", "relay compacted"]',
    "hooks.*[].command": '[[hooks.pre_compact]]\ncommand = ["python3", "hooks/check.py"]',
    "hooks.*[].timeout_ms": '[[hooks.pre_compact]]\ncommand = ["true"]\ntimeout_ms = 2000',
    "model_providers.*.name": '[model_providers.local]\nname = "My vLLM"',
    "model_providers.*.base_url": (
        '[model_providers.local]\nbase_url = "http://127.0.0.1:8000/v1"'
    ),
    "model_providers.*.env_key": '[model_providers.local]\nenv_key = "LOCAL_API_KEY"',
    "model_providers.*.wire_api": '[model_providers.local]\nwire_api = "chat"',
    "model_providers.*.remote_compaction": ('[model_providers.local]\nremote_compaction = "v1"'),
    "model_providers.*.stream_max_retries": "[model_providers.local]\nstream_max_retries = 2",
    "model_providers.*.request_max_retries": "[model_providers.local]\nrequest_max_retries = 1",
    "model_providers.*.stream_idle_timeout_ms": (
        "[model_providers.local]\nstream_idle_timeout_ms = 60000"
    ),
    "model_providers.*.stream_first_event_timeout_ms": (
        "[model_providers.local]\nstream_first_event_timeout_ms = 900000"
    ),
    "model_providers.*.stream_max_duration_ms": (
        "[model_providers.local]\nstream_max_duration_ms = 3600000"
    ),
    "model_providers.*.max_output_tokens": "[model_providers.local]\nmax_output_tokens = 1024",
    "model_providers.*.http_headers": (
        '[model_providers.local]\nhttp_headers = { "X-Team" = "search" }'
    ),
    "model_providers.*.query_params": (
        '[model_providers.local]\nquery_params = { "api-version" = "2025-04-01" }'
    ),
    "model_providers.*.max_retry_after_ms": "[model_providers.local]\nmax_retry_after_ms = 5000",
    "model_providers.*.stream_max_line_bytes": (
        "[model_providers.local]\nstream_max_line_bytes = 1048576"
    ),
    "model_providers.*.stream_max_event_bytes": (
        "[model_providers.local]\nstream_max_event_bytes = 2097152"
    ),
    "model_providers.*.max_response_bytes": (
        "[model_providers.local]\nmax_response_bytes = 67108864"
    ),
    "mcp_servers.*.command": '[mcp_servers.docs]\ncommand = "npx"\nargs = ["-y", "docs-mcp"]',
    "mcp_servers.*.args": (
        '[mcp_servers.docs]\ncommand = "python3"\nargs = ["-m", "docs_server", "--verbose"]'
    ),
    "mcp_servers.*.env": '[mcp_servers.docs]\ncommand = "docs-mcp"\nenv = { DOCS_LANG = "en" }',
    "mcp_servers.*.env_vars": (
        '[mcp_servers.docs]\ncommand = "docs-mcp"\nenv_vars = ["DOCS_TOKEN", "HTTPS_PROXY"]'
    ),
    "mcp_servers.*.cwd": '[mcp_servers.docs]\ncommand = "docs-mcp"\ncwd = "/srv/docs"',
    "mcp_servers.*.url": '[mcp_servers.search]\nurl = "https://mcp.example.com/mcp"',
    "mcp_servers.*.bearer_token_env_var": (
        '[mcp_servers.search]\nurl = "https://mcp.example.com/mcp"\n'
        'bearer_token_env_var = "SEARCH_TOKEN"'
    ),
    "mcp_servers.*.http_headers": (
        '[mcp_servers.search]\nurl = "https://mcp.example.com/mcp"\n'
        'http_headers = { "X-Team" = "docs" }'
    ),
    "mcp_servers.*.startup_timeout_sec": (
        '[mcp_servers.docs]\ncommand = "docs-mcp"\nstartup_timeout_sec = 30'
    ),
    "mcp_servers.*.tool_timeout_sec": (
        '[mcp_servers.docs]\ncommand = "docs-mcp"\ntool_timeout_sec = 120.5'
    ),
    "mcp_servers.*.tool_output_max_bytes": (
        '[mcp_servers.docs]\ncommand = "docs-mcp"\ntool_output_max_bytes = 1048576'
    ),
    "mcp_servers.*.enabled": '[mcp_servers.docs]\ncommand = "docs-mcp"\nenabled = false',
    "mcp_servers.*.enabled_tools": (
        '[mcp_servers.docs]\ncommand = "docs-mcp"\nenabled_tools = ["search", "read_page"]'
    ),
    "mcp_servers.*.disabled_tools": (
        '[mcp_servers.docs]\ncommand = "docs-mcp"\ndisabled_tools = ["delete_page"]'
    ),
    "mcp_servers.*.approval": '[mcp_servers.docs]\ncommand = "docs-mcp"\napproval = "always"',
}

_TABLES: tuple[tuple[str, type, str], ...] = (
    ("", Config, "Top-level keys"),
    ("features.", Features, "`[features]`"),
    ("compaction.", CompactionSettings, "`[compaction]`"),
    ("sandbox_workspace_write.", SandboxWorkspaceWrite, "`[sandbox_workspace_write]`"),
    ("shell_environment_policy.", ShellEnvironmentPolicy, "`[shell_environment_policy]`"),
    ("rollout.", RolloutConfig, "`[rollout]`"),
    ("otel.", OtelConfig, "`[otel]`"),
    ("hooks.", Hooks, "`[hooks]`"),
    ("hooks.*[].", HookCommand, "`[[hooks.pre_compact]]` and `[[hooks.post_compact]]` entries"),
    ("model_providers.*.", ProviderConfig, "`[model_providers.NAME]`"),
    ("mcp_servers.*.", McpServerConfig, "`[mcp_servers.NAME]`"),
    ("agents.", AgentsConfig, "`[agents]`"),
    ("agents.*.", AgentRole, "`[agents.NAME]`"),
)

#: Keys documented by a table of their own rather than as one value, by dotted path.
_SUBTABLES = frozenset(
    {
        "agents",
        "agents.roles",
        "compaction",
        "features",
        "rollout",
        "otel",
        "hooks",
        "model_providers",
        "mcp_servers",
        "sandbox_workspace_write",
        "shell_environment_policy",
    }
)


def toml_type(hint: Any) -> str:
    """A key's type in TOML words."""
    origin = typing.get_origin(hint)
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    if origin is Literal:
        return " or ".join(json.dumps(arg) for arg in typing.get_args(hint))
    if origin is not None and len(args) < len(typing.get_args(hint)):
        return f"{toml_type(args[0])}, optional"
    if origin is tuple:
        inner = args[0]
        return "array of tables" if attrs.has(inner) else f"array of {toml_type(inner)}s"
    if origin is Mapping:
        return f"table of {toml_type(args[1])}s"
    names = {str: "string", int: "integer", bool: "boolean", float: "number"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))


def toml_value(value: Any) -> str:
    """A default in TOML form; ``unset`` for None."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return json.dumps(value)
    if isinstance(value, tuple | list):
        return "[]" if not value else json.dumps(list(value))
    if isinstance(value, Mapping):
        return "{}" if not value else json.dumps(dict(value))
    raise TypeError(f"no TOML form for {value!r}")


def _default(field: attrs.Attribute[Any]) -> str:
    default = field.default
    if default is attrs.NOTHING:
        return ""
    factory = getattr(default, "factory", None)
    if factory is not None:
        default = factory()
    return f"`{toml_value(default)}`"


#: What a table's section says before its keys.
_INTROS: Mapping[str, str] = {
    "sandbox_workspace_write.": (
        'What `sandbox_mode = "workspace-write"` lets the commands of `shell` and of hooks '
        "write and reach; the other modes ignore it ([approvals.md](approvals.md)).\n"
    ),
    "shell_environment_policy.": (
        "The environment the commands of `shell` and of hooks get, in the form Codex reads, "
        "made in five steps in this order: start from `inherit`; drop the names of the default "
        "excludes (`*KEY*`, `*SECRET*`, `*TOKEN*`) unless `ignore_default_excludes`; drop the "
        "names `exclude` matches; add `set`; keep only the names `include_only` matches, when "
        "it is given. The variable that holds the session's API key is dropped whatever the "
        "policy says ([approvals.md](approvals.md)).\n"
    ),
    "otel.": (
        "OpenTelemetry traces of a session (`observability.md`): they are sent to the tracer "
        "provider of the program (or `relay run --otel`); this table says what they hold.\n"
    ),
    "features.": (
        "Each feature is a switch (`token_budget = true`), or a table in the form Codex writes "
        "(`[features.token_budget]` with `enabled = true`); a table without `enabled` leaves "
        "its feature off, as in Codex. `[features.async_compaction]` may also hold "
        "`model_async_compact_threshold_percent`, which is the top-level key of that name "
        "(set in both places, the two must agree). Any other key in a feature's table is an "
        "error:\n\n"
        "```toml\n[features.async_compaction]\nenabled = true\n"
        "model_async_compact_threshold_percent = 30\n```\n"
    ),
    "agents.": (
        "The sub-agents of a session ([agents.md](agents.md)), in the form Codex reads: the "
        "limits of a tree of agents, and beside them a table for each role a spawn may name "
        "(`[agents.NAME]`, below). They matter only with `features.multi_agent = true`. A "
        "limit must be a positive integer; a spawn past one fails its tool call, with an output "
        "that names the limit, and the turn goes on.\n"
    ),
    "agents.*.": (
        "A role a `spawn_agent` call may name in `agent_type`: what the child it starts runs "
        "with. A key the table leaves out is the parent's. `approval_policy` and `sandbox_mode` "
        "may only narrow the parent's rules: a looser value than the parent's is ignored and "
        "the parent's is kept, so a role never gives a child more than its parent has. Codex's "
        "three roles are always there; a table with one of their names replaces that role, any "
        "other name adds one. The NAME is what the model passes as `agent_type`.\n"
    ),
    "mcp_servers.*.": (
        "An MCP server whose tools the model may call, in the form Codex reads: `command` "
        "(with `args`, `env`, `env_vars`, `cwd`) for a server relay starts and speaks to over "
        "its standard input and output, or `url` (with `bearer_token_env_var`, `http_headers`) "
        "for a streamable-HTTP server. The NAME may hold letters, digits, `_` and `-`; the "
        "model sees the server's tools as `mcp__NAME__TOOL`. This needs the `mcp` extra "
        "(`pip install 'relay-runtime[mcp]'`); see [tools.md](tools.md).\n"
    ),
}


def _builtin_roles() -> str:
    """The table of Codex's roles, as :data:`BUILTIN_ROLES` defines them."""
    rows = ["| role | what it is for | what it changes |", "|---|---|---|"]
    for name, role in BUILTIN_ROLES.items():
        changes = [
            f"`{key} = {toml_value(value)}`"
            for key, value in attrs.asdict(role).items()
            if key not in ("description", "instructions") and value is not None
        ]
        if role.instructions:
            changes.insert(0, "instructions of its own")
        rows.append(f"| `{name}` | {role.description} | {', '.join(changes) or 'nothing'} |")
    return "\n".join(rows) + "\n"


def _table(prefix: str, cls: type, title: str) -> Iterator[str]:
    yield f"## {title}\n"
    if prefix in _INTROS:
        yield _INTROS[prefix]
    if prefix == "agents.*.":
        yield _builtin_roles()
    docs = attribute_docs(cls)
    hints = field_types(cls)
    for field in attrs.fields(cls):
        path = f"{prefix}{field.name}"
        if path in _SUBTABLES:
            continue
        yield f"### `{path}`\n"
        default = _default(field)
        when = DEFAULTS_GIVEN.get(path) or (f"default {default}" if default else "required")
        yield f"{toml_type(hints[field.name])}; {when}.\n"
        yield f"{markdown(docs.get(field.name, ''))}\n"
        yield f"```toml\n{EXAMPLES[path]}\n```\n"


def documented_keys() -> list[str]:
    """Every key path the document describes (the keys of :data:`EXAMPLES`)."""
    keys = []
    for prefix, cls, _ in _TABLES:
        for field in attrs.fields(cls):
            if f"{prefix}{field.name}" not in _SUBTABLES:
                keys.append(f"{prefix}{field.name}")
    return keys


def render() -> str:
    """The whole configuration document."""
    lines = [
        "# Configuration",
        "",
        "Generated from `runtime/relay/_base/_config.py` by `python -m relay._cli._config_doc`;",
        "a test keeps it in step with the code and loads every example.",
        "",
        "relay reads TOML from `--config FILE`, else from `$RELAY_HOME/config.toml` (`RELAY_HOME`",
        "defaults to `~/.relay`) when it exists, then applies each `-c key=value` override: the",
        "value is parsed as TOML, else taken as a plain string (`-c model=gpt-5`,",
        "`-c rollout.enabled=false`, `-c 'tools={shell=true}'`). An embedding program builds a",
        "`relay.Config` directly or calls `relay.load_config(path, overrides)`.",
        "",
        "A key relay does not know is an error that names the file, every unknown key and the",
        "closest known one; a value of the wrong type names its key. Nothing runs until the whole",
        "configuration is valid. Non-positive context limits read as unset.",
        "",
    ]
    for prefix, cls, title in _TABLES:
        lines += list(_table(prefix, cls, title))
    lines += [
        "## Built-in providers\n",
        "A `[model_providers.NAME]` table with a built-in name replaces that provider; any other",
        "name adds one (its `name` defaults to the table's name).\n",
        "| name | base URL | wire API | API key variable | remote compaction |",
        "|---|---|---|---|---|",
    ]
    for name, provider in BUILTIN_PROVIDERS.items():
        url = f"`{provider.base_url}`" if provider.base_url else "embedded, no HTTP"
        key = f"`{provider.env_key}`" if provider.env_key else "none"
        lines.append(
            f"| `{name}` | {url} | `{provider.wire_api}` | {key} | `{provider.remote_compaction}` |"
        )
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(render(), end="")
