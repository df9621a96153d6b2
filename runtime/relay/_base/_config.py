"""Configuration: TOML files, ``-c key=value`` overrides and provider tables (docs/config.md).

:func:`load_config` merges the sources into one plain dict, checks every key against the attrs
classes below (the error names the file and every unknown key, with the closest known one),
then structures it. docs/config.md is generated from these classes by
``runtime/_config_doc.py``. Nothing reads the environment except :func:`resolve_api_key` (and
:func:`take_api_key`, the ``relay`` command's), and the key is never stored in a config.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
import cattrs

from ._agents_config import AgentsConfig, agents_table
from ._compaction_config import CompactionSettings as CompactionSettings
from ._compaction_config import HookCommand as HookCommand
from ._compaction_config import Hooks as Hooks
from ._environment_config import ShellEnvironmentPolicy, environment_policy_problem
from ._errors import ConfigError
from ._features import features_in_tables
from ._mcp_config import McpServerConfig, check_mcp_server, resolve_mcp_paths
from ._sandbox_config import (
    ApprovalPolicy,
    SandboxMode,
    SandboxWorkspaceWrite,
    resolve_sandbox_paths,
    sandbox_keys_problem,
)
from ._structure import config_converter
from ._suggest import did_you_mean
from ._util import field_types


@attrs.frozen
class ProviderConfig:
    """A model provider table."""

    name: str
    """Display name; in a configuration file, the table's name unless given
    (``local`` for ``[model_providers.local]``)."""
    base_url: str | None = None
    """Base URL of the API (``.../v1``)."""
    env_key: str | None = None
    """Environment variable that holds the API key."""
    wire_api: Literal["responses", "chat"] = "responses"
    """Which HTTP API to speak."""
    remote_compaction: Literal["unsupported", "v1", "v2"] = "unsupported"
    """Which remote compaction the provider offers."""
    stream_max_retries: int = 5
    """Retries of a failed sampling request."""
    request_max_retries: int = 4
    """Retries of a failed non-streaming request."""
    stream_idle_timeout_ms: int = 300_000
    """A stream silent for this long between two events is a retryable error."""
    stream_first_event_timeout_ms: int = 600_000
    """How long a server may take from the request to the first event of its answer, the
    connection and the response headers included (a local server sends nothing while it
    reads the prompt; a remote compaction request: to the headers of the answer); longer is
    a retryable error."""
    stream_max_duration_ms: int = 1_800_000
    """The longest one request may take, from sending it to the end of its answer, however
    steadily the server keeps sending (a slow local server can stream one answer for many
    minutes); longer is a retryable error. Remote compaction requests too."""
    max_output_tokens: int | None = None
    """The longest answer to ask this provider for, in tokens (overrides
    ``model_max_output_tokens``); unset: no limit is sent."""
    http_headers: Mapping[str, str] = attrs.field(factory=dict)
    """Extra request headers."""
    query_params: Mapping[str, str] = attrs.field(factory=dict)
    """Extra query parameters."""
    max_retry_after_ms: int = 60_000
    """The longest wait a server's retry-after can ask for; a longer one is cut to this."""
    stream_max_line_bytes: int = 16 * 1024 * 1024
    """The longest line of a server-sent event stream; a longer one is a stream error."""
    stream_max_event_bytes: int = 32 * 1024 * 1024
    """The largest server-sent event (its data lines together); a larger one is a stream error."""
    max_response_bytes: int = 256 * 1024 * 1024
    """The largest response body, once decompressed; a larger one is a stream error."""


BUILTIN_PROVIDERS: Mapping[str, ProviderConfig] = {
    "scripted": ProviderConfig(name="scripted", wire_api="responses"),
    "openai": ProviderConfig(
        name="OpenAI",
        base_url="https://api.openai.com/v1",
        env_key="OPENAI_API_KEY",
        wire_api="responses",
        remote_compaction="v1",
    ),
    "ollama": ProviderConfig(name="Ollama", base_url="http://127.0.0.1:11434/v1", wire_api="chat"),
}


@attrs.frozen
class Features:
    """Feature switches."""

    token_budget: bool = False
    """Use the token-budget compaction backend."""
    remote_compaction_v2: bool = False
    """Allow the remote V2 compaction backend."""
    async_compaction: bool = False
    """Compact in the background right after a turn whose usage reached
    ``model_async_compact_threshold_percent`` of the window; the result is installed before
    the next turn."""
    work_state: bool = True
    """Keep the work-state record (files read, commands run, tool errors, the model's latest
    answer) and place it in the history after every compaction. Off, with
    ``recent_reads_token_budget = 0``, a compaction makes the history Codex makes."""
    tool_output_masking: bool = False
    """Mask old tool outputs before compacting (the ``recall`` tool returns them)."""
    multi_agent: bool = False
    """Offer the model Codex's sub-agent tools (``spawn_agent``, ``send_input``, ``wait``,
    ``close_agent``, ``resume_agent``): each child is a session in the parent's nursery
    (docs/agents.md)."""


@attrs.frozen
class RolloutConfig:
    """Persistence."""

    enabled: bool = True
    """Write a rollout file."""
    dir: str | None = None
    """Where; default ``$RELAY_HOME/sessions``."""


@attrs.frozen
class OtelConfig:
    """OpenTelemetry traces (``docs/observability.md``)."""

    record_content: bool = False
    """Record prompts, answers, tool arguments and tool outputs on the spans, redacted of the
    API key; also switched on by ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``."""


#: The default of ``project_doc_max_bytes``: Codex's, 32 KiB.
DEFAULT_PROJECT_DOC_MAX_BYTES = 32 * 1024


@attrs.frozen
class Config:
    """Everything that configures a session. Build it in code or with :func:`load_config`.

    Example::

        config = relay.Config(
            model="qwen2.5-coder",
            model_provider="local",
            model_context_window=8192,
            model_providers={
                "local": relay.ProviderConfig(
                    name="local", base_url="http://127.0.0.1:8000/v1", wire_api="chat"
                )
            },
        )
    """

    model: str = "scripted"
    """Model name sent to the provider."""
    model_provider: str = "scripted"
    """Name of a provider table."""
    model_script: str | None = None
    """Model script for the ``scripted`` provider."""
    compact_model: str | None = None
    """The model that writes the local backend's summaries; unset: the session's model.
    Turns, and the remote backends' requests, stay on the session's model."""
    compact_model_provider: str | None = None
    """The provider table ``compact_model`` is served by; unset: ``model_provider``. Another
    provider than the session's makes every compaction a local summary: a remote
    compaction's items are its own provider's."""
    model_context_window: int | None = None
    """Context window in tokens; overrides the model default."""
    model_auto_compact_token_limit: int | None = None
    """Auto-compaction threshold."""
    model_post_turn_compact_threshold_percent: int = 0
    """Compact after a turn's final answer when usage reached this percentage of the context
    window (0 = never)."""
    background_compact_threshold_percent: int = 0
    """Start a background compaction when usage reaches this percentage of the
    auto-compaction limit (0 = never); its result is installed at the next automatic
    compaction point while the history still begins with its snapshot."""
    model_async_compact_threshold_percent: int = 0
    """With ``features.async_compaction``: the percentage of the context window whose crossing
    starts a background compaction right after a turn (0 = never)."""
    model_max_output_tokens: int | None = None
    """The longest answer to ask for, in tokens, sent with every request and kept free in the
    context window; unset: no limit is sent (a provider's ``max_output_tokens`` wins)."""
    max_auto_compactions_per_turn: int = 3
    """Automatic compactions one turn may run; one more needed ends it with
    ``error{compaction_loop}``."""
    max_steps_per_turn: int = 200
    """Model requests one turn may make; the next one ends it with ``error{step_limit}``
    (0: no limit)."""
    max_identical_tool_calls: int = 10
    """Tool calls in a row, the same tool with the same arguments and the same output, that
    end a turn with ``error{tool_loop}``; half as many are warned about (0: no limit)."""
    recent_reads_token_budget: int = 1_000
    """After a compaction, the latest output of each file ``read_file`` read is placed back,
    newest first, each whole or not at all, within this many tokens (never more than a tenth
    of the model's context window, when it is known); 0: none, as in Codex."""
    work_state_token_budget: int = 2_000
    """Tokens the work-state record may take in the history after a compaction; never more
    than a tenth of the model's context window, when it is known."""
    mask_keep_recent_tokens: int = 20_000
    """Tool outputs within this many of the newest tokens of the history are never masked."""
    mask_margin_percent: int = 10
    """Masking replaces a summary compaction when it leaves usage this far under the limit."""
    mask_trigger_tokens: int | None = None
    """Also mask old tool outputs after a tool step that leaves usage at this many tokens or
    more, below the auto-compaction limit (unset: mask only when usage reaches the limit)."""
    compact_prompt: str | None = None
    """Replaces the default summarization prompt."""
    experimental_compact_prompt_file: str | None = None
    """File whose text is used when ``compact_prompt`` is unset."""
    base_instructions: str | None = None
    """The request's ``instructions``."""
    base_instructions_file: str | None = None
    """File holding the request's ``instructions``."""
    developer_instructions: str | None = None
    """A developer message in the initial context."""
    project_doc: str = "AGENTS.md"
    """File name of project instructions. Every file of that name from the git root (the
    nearest directory, ``cwd`` or one above it, with a ``.git`` directory or file) down to
    ``cwd`` is read, the root's first, and their texts go in one message, joined by a blank
    line, as Codex joins them; outside a git repository, ``cwd``'s alone."""
    project_doc_max_bytes: int = DEFAULT_PROJECT_DOC_MAX_BYTES
    """Bytes of project instructions read at most, all the files together (Codex's key and
    default): the file that reaches the bound is cut there, with a warning, and those after it
    are left out; a file of white space only takes nothing. 0: none is read."""
    cwd: str | None = None
    """Working directory; default the process's. Relative: to the configuration file (in one),
    else to the process's. Made absolute when the session opens; a missing one is an error."""
    features: Features = Features()
    """Feature switches."""
    model_providers: Mapping[str, ProviderConfig] = attrs.field(factory=dict)
    """Provider tables, added to (or replacing) the built-ins."""
    hooks: Hooks = attrs.field(factory=Hooks)
    """Compaction hooks."""
    compaction: CompactionSettings = attrs.field(factory=CompactionSettings)
    """How relay's compactions write and place a summary (docs/compaction.md)."""
    tools: Mapping[str, bool] = attrs.field(factory=dict)
    """Built-in tools switched on or off."""
    approval_policy: ApprovalPolicy = "on-request"
    """When a call waits for a decision before it runs: ``"untrusted"`` (every command but a
    few read-only ones), ``"on-failure"`` (a command the sandbox refused, to run it outside),
    ``"on-request"`` (a command the model asks to run outside the sandbox, and tools that ask
    for approval) or ``"never"`` (docs/approvals.md)."""
    sandbox_mode: SandboxMode = "danger-full-access"
    """What commands run by ``shell`` and by hooks may touch: ``"read-only"`` (nothing can be
    written), ``"workspace-write"`` (writes under ``cwd`` and the writable roots only) or
    ``"danger-full-access"`` (no sandbox). A mode that needs a sandbox relay cannot make
    stops the session from opening (docs/approvals.md)."""
    sandbox_workspace_write: SandboxWorkspaceWrite = attrs.field(factory=SandboxWorkspaceWrite)
    """What ``"workspace-write"`` lets commands write and reach."""
    shell_environment_policy: ShellEnvironmentPolicy = attrs.field(factory=ShellEnvironmentPolicy)
    """The environment the commands of ``shell`` and of hooks get (docs/approvals.md); the
    API key's variable is never part of it."""
    rollout: RolloutConfig = RolloutConfig()
    """Persistence."""
    otel: OtelConfig = OtelConfig()
    """OpenTelemetry traces."""
    tasks: Mapping[str, str] = attrs.field(factory=dict)
    """Task factories by op type, added to relay's or in place of them:
    ``"package.module:attribute"``, or ``"path/to/file.py:attribute"`` (in a configuration
    file, relative to it). The factory takes the op and returns a ``relay.SessionTask``."""
    compactor: str | None = None
    """What the session does at its compaction points, manual and automatic alike, in place
    of relay's own: ``"package.module:attribute"`` or ``"path/to/file.py:attribute"`` (in a
    configuration file, relative to it), a callable that makes a ``relay.lowlevel.CompactionPolicy``
    for each task (docs/compaction.md)."""
    mcp_servers: Mapping[str, McpServerConfig] = attrs.field(factory=dict)
    """MCP servers whose tools the model may call, by name (docs/tools.md)."""
    agents: AgentsConfig = attrs.field(factory=AgentsConfig)
    """The limits of a tree of sub-agents and the roles a spawn may name (``[agents]``;
    docs/agents.md)."""

    def provider(self) -> ProviderConfig:
        """The selected provider table."""
        return self._provider_table("model_provider", self.model_provider)

    def compaction_provider(self) -> ProviderConfig:
        """The provider table compaction summaries go to."""
        if self.compact_model_provider is None:
            return self.provider()
        return self._provider_table("compact_model_provider", self.compact_model_provider)

    def _provider_table(self, key: str, name: str) -> ProviderConfig:
        providers = {**BUILTIN_PROVIDERS, **self.model_providers}
        try:
            return providers[name]
        except KeyError:
            raise ConfigError(
                f"unknown {key} {name!r} (known: {', '.join(sorted(providers))})"
            ) from None

    @property
    def separate_compaction_provider(self) -> bool:
        """Whether summaries go to a provider other than the session's."""
        return (
            self.compact_model_provider is not None
            and self.compact_model_provider != self.model_provider
        )

    def max_output_tokens(self, provider: ProviderConfig) -> int | None:
        """The answer limit requests to ``provider`` carry: its own, else the global one."""
        return provider.max_output_tokens or self.model_max_output_tokens

    def effective_compact_prompt(self) -> str | None:
        """``compact_prompt`` trimmed, or None when unset or blank."""
        if self.compact_prompt is None:
            return None
        text = self.compact_prompt.strip()
        return text or None


def relay_home() -> Path:
    """``$RELAY_HOME``, default ``~/.relay``."""
    return Path(os.environ.get("RELAY_HOME") or Path.home() / ".relay")


def resolve_api_key(provider: ProviderConfig, given: str | None = None) -> str | None:
    """The provider's API key: ``given`` (a key passed by value, checked), else the key in its
    ``env_key`` variable (see :mod:`relay._base._secret`: checked, the environment left as it
    is); an unset, empty or invalid one is an error.

    Raises:
        ConfigError: the key is missing, or has a character a request header cannot carry.
    """
    from ._secret import check_key, read_key

    if given is not None:
        return check_key("the api_key argument", given)
    if provider.env_key is None:
        return None
    key = read_key(provider.env_key)
    if key is None:
        raise ConfigError(
            f"provider {provider.name!r} needs an API key in the environment variable "
            f"{provider.env_key}, which is unset or empty"
        )
    return key


def take_api_key(provider: ProviderConfig) -> None:
    """Take the provider's API key out of this process's environment (the ``relay`` command's
    own; see :func:`relay._base._secret.take_key`); later reads still find it.

    Raises:
        ConfigError: the key has a character a request header cannot carry.
    """
    from ._secret import take_key

    if provider.env_key is not None:
        take_key(provider.env_key)


def unknown_keys(data: Mapping[str, Any], cls: type = Config, prefix: str = "") -> list[str]:
    """Every key of ``data`` that ``cls`` does not know, as ``'path' (did you mean ...)``."""
    fields = {field.name: field for field in attrs.fields(cls)}
    found: list[str] = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if key not in fields:
            found.append(f"{path!r}{did_you_mean(key, fields, prefix=prefix)}")
            continue
        if cls is Config and key == "agents":
            continue  # a table of its own form, checked when it is read (agents_table)
        nested = _nested_class(field_types(cls)[key])
        if nested is not None and isinstance(value, Mapping):
            found += unknown_keys(value, nested, f"{path}.")
        elif key in _NAMED_TABLES and isinstance(value, Mapping):
            for name, table in value.items():
                if isinstance(table, Mapping):
                    found += unknown_keys(table, _NAMED_TABLES[key], f"{path}.{name}.")
        elif key in {"pre_compact", "post_compact"} and isinstance(value, Sequence):
            for index, table in enumerate(value):
                if isinstance(table, Mapping):
                    found += unknown_keys(table, HookCommand, f"{path}[{index}].")
    return found


#: The keys that hold tables by name, and the class of each table.
_NAMED_TABLES: Mapping[str, type] = {
    "model_providers": ProviderConfig,
    "mcp_servers": McpServerConfig,
}


def _unknown_key_error(keys: Sequence[str], where: str = "") -> ConfigError:
    noun = "key" if len(keys) == 1 else "keys"
    return ConfigError(f"{where}unknown config {noun} {', '.join(keys)}")


def _nested_class(kind: Any) -> type | None:
    return kind if isinstance(kind, type) and attrs.has(kind) else None


def config_from_dict(data: Mapping[str, Any]) -> Config:
    """Build a :class:`Config` from plain data; unknown keys and wrong types are errors."""
    data = features_in_tables(data)
    if isinstance(data.get("agents"), Mapping):
        data = {**data, "agents": agents_table(data["agents"])}
    unknown = unknown_keys(data)
    if unknown:
        raise _unknown_key_error(unknown)
    problem = sandbox_keys_problem(data) or environment_policy_problem(data)
    if problem is not None:
        raise ConfigError(f"invalid config: {problem}")
    providers = data.get("model_providers")
    if isinstance(providers, Mapping):
        data = {
            **data,
            "model_providers": {
                name: {"name": name, **table} if isinstance(table, Mapping) else table
                for name, table in providers.items()
            },
        }
    try:
        config = config_converter().structure(data, Config)
    except Exception as exc:
        details = (
            "; ".join(cattrs.transform_error(exc))
            if isinstance(exc, cattrs.BaseValidationError)
            else str(exc)
        )
        raise ConfigError(f"invalid config: {details}") from exc
    _check_limits(config)
    # Non-positive limits are ignored (docs/compaction.md): they read as unset.
    if config.model_context_window is not None and config.model_context_window <= 0:
        config = attrs.evolve(config, model_context_window=None)
    limit = config.model_auto_compact_token_limit
    if limit is not None and limit <= 0:
        config = attrs.evolve(config, model_auto_compact_token_limit=None)
    return config


def _check_limits(config: Config) -> None:
    """Retry counts and waits must be >= 0, timeouts and sizes positive; the error names the
    key."""
    for name, provider in config.model_providers.items():
        for key in ("stream_max_retries", "request_max_retries", "max_retry_after_ms"):
            value = getattr(provider, key)
            if value < 0:
                raise ConfigError(f"model_providers.{name}.{key} must be >= 0, got {value}")
        for key in ("stream_max_line_bytes", "stream_max_event_bytes", "max_response_bytes"):
            value = getattr(provider, key)
            if value <= 0:
                raise ConfigError(f"model_providers.{name}.{key} must be positive, got {value}")
        if provider.max_output_tokens is not None and provider.max_output_tokens <= 0:
            raise ConfigError(
                f"model_providers.{name}.max_output_tokens must be positive, "
                f"got {provider.max_output_tokens}"
            )
        for key in (
            "stream_idle_timeout_ms",
            "stream_first_event_timeout_ms",
            "stream_max_duration_ms",
        ):
            value = getattr(provider, key)
            if value <= 0:
                raise ConfigError(f"model_providers.{name}.{key} must be positive, got {value}")
    for key in (
        "model_post_turn_compact_threshold_percent",
        "background_compact_threshold_percent",
        "model_async_compact_threshold_percent",
    ):
        percent = getattr(config, key)
        if not 0 <= percent <= 100:
            raise ConfigError(f"{key} must be between 0 and 100, got {percent}")
    if config.model_max_output_tokens is not None and config.model_max_output_tokens <= 0:
        raise ConfigError(
            f"model_max_output_tokens must be positive, got {config.model_max_output_tokens}"
        )
    for key in ("max_auto_compactions_per_turn", "work_state_token_budget"):
        if getattr(config, key) <= 0:
            raise ConfigError(f"{key} must be positive, got {getattr(config, key)}")
    for key in (
        "max_steps_per_turn",
        "max_identical_tool_calls",
        "recent_reads_token_budget",
        "project_doc_max_bytes",
    ):
        if getattr(config, key) < 0:
            raise ConfigError(f"{key} must be >= 0, got {getattr(config, key)}")
    if config.mask_trigger_tokens is not None and config.mask_trigger_tokens <= 0:
        raise ConfigError(f"mask_trigger_tokens must be positive, got {config.mask_trigger_tokens}")
    if config.mask_keep_recent_tokens < 0:
        raise ConfigError(
            f"mask_keep_recent_tokens must be >= 0, got {config.mask_keep_recent_tokens}"
        )
    if not 0 <= config.mask_margin_percent < 100:
        raise ConfigError(
            f"mask_margin_percent must be from 0 to 99, got {config.mask_margin_percent}"
        )
    for name, server in config.mcp_servers.items():
        check_mcp_server(name, server)
    for point in ("pre_compact", "post_compact"):
        for index, hook in enumerate(getattr(config.hooks, point)):
            if hook.timeout_ms <= 0:
                raise ConfigError(
                    f"hooks.{point}[{index}].timeout_ms must be positive, got {hook.timeout_ms}"
                )


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``key=value``: the value as TOML, else as a plain string."""
    import tomllib

    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"invalid override {text!r}: expected key=value")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key.split("."), value


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> Config:
    """Load ``path`` (else ``$RELAY_HOME/config.toml`` if it exists) and apply overrides."""
    data: dict[str, Any] = {}
    file = Path(path) if path is not None else relay_home() / "config.toml"
    if path is not None or file.exists():
        import tomllib

        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from exc
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"invalid TOML in config file {file}: {exc}") from exc
        unknown = unknown_keys(data)
        if unknown:
            raise _unknown_key_error(unknown, f"{file}: ")
        _resolve_paths(data, file.resolve().parent)
    for override in overrides:
        keys, value = parse_override(override)
        node = data
        for key in keys[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise ConfigError(f"invalid override {override!r}: {key!r} is not a table")
            node = child
        node[keys[-1]] = value
    unknown = unknown_keys(data)
    if unknown:
        raise _unknown_key_error(unknown, "-c overrides: ")
    # Nothing to read: the defaults, without building the converter of configuration tables.
    return config_from_dict(data) if data else Config()


def _resolve_paths(data: dict[str, Any], base: Path) -> None:
    """Make the paths a configuration file gives relative to itself absolute: the working
    directory, hook arguments that start with ``./`` or ``../``, task factories named by a
    ``.py`` file, MCP servers' commands and working directories, and the sandbox's writable
    roots."""
    cwd = data.get("cwd")
    if isinstance(cwd, str) and cwd and not Path(cwd).is_absolute():
        data["cwd"] = str(base / cwd)
    resolve_mcp_paths(data.get("mcp_servers"), base)
    resolve_sandbox_paths(data, base)
    hooks = data.get("hooks")
    for point in ("pre_compact", "post_compact"):
        tables = hooks.get(point) if isinstance(hooks, dict) else None
        for table in tables if isinstance(tables, list) else []:
            command = table.get("command") if isinstance(table, dict) else None
            if isinstance(command, list):
                table["command"] = [
                    str(base / arg)
                    if isinstance(arg, str) and arg.startswith(("./", "../"))
                    else arg
                    for arg in command
                ]
    tasks = data.get("tasks")
    if isinstance(tasks, dict):
        for op_type, spec in tasks.items():
            tasks[op_type] = _beside(base, spec)
    if "compactor" in data:
        data["compactor"] = _beside(base, data["compactor"])


def _beside(base: Path, spec: Any) -> Any:
    """A ``"file.py:attribute"`` spec with a relative file, made relative to ``base`` (the
    configuration file's folder); any other value as it is."""
    if isinstance(spec, str):
        source, sep, attribute = spec.rpartition(":")
        if sep and source.endswith(".py") and not Path(source).is_absolute():
            return f"{base / source}:{attribute}"
    return spec
