"""The steps of opening a session, one function each, in the order :func:`open_session` takes
them: the configuration, the model clients, the tools (MCP servers' included), the rollout and
the state, the tracer, and the session's wiring and writer.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .._base import _protocol as p
from .._base._config import Config, ProviderConfig, config_from_dict, relay_home, resolve_api_key
from .._base._errors import ConfigError
from .._base._exec_rules import ExecRules
from .._base._mcp_config import McpServerConfig, check_mcp_server
from .._base._model import ModelClient
from .._base._secret import Secrets
from .._base._tokens import TokenEstimator
from .._core._builtin import builtin_registry
from .._core._context import TurnSettings, working_directory
from .._core._exec_gate import ApprovalCallback, Gate
from .._core._hooks import CompactHook
from .._core._session import TaskFactories
from .._core._session_writer import SessionWriter
from .._core._state import ResumedState, SessionState
from .._core._summary import compaction_prompt
from .._core._tools import CONTEXT_TOOLS, Tool, ToolRegistry
from .._core._wiring import Estimators, Wiring, base_instructions
from .._core._writer import Epoch, RolloutWriter
from .._exec._real_work import in_thread
from .._exec._rules import KEY_FILE, grant_key
from .._exec._sandbox import SandboxPolicy, check_sandbox, sandbox_policy
from .._models._scripted import ScriptedModel

if TYPE_CHECKING:
    from .._mcp._session import OpenMcpServers
    from .._otel._observer import SessionTracer

#: The event id of what starting the MCP servers reports (before any submission).
MCP_EVENT_ID = "mcp"


def checked_config(
    config: Config | None, mcp_servers: Mapping[str, McpServerConfig | Mapping[str, Any]] | None
) -> Config:
    """The configuration a session opens with: checked now, with ``mcp_servers`` added.

    Raises:
        ConfigError: the compaction prompt file cannot be read, the working directory is not
            one, or an MCP server's table is invalid.
    """
    config = config or Config()
    compaction_prompt(config)  # an unreadable prompt file is a configuration error, found now
    # Made absolute once, here: the session records it so, and a resume from elsewhere works
    # in the same directory.
    config = attrs.evolve(config, cwd=working_directory(config.cwd))
    servers = mcp_server_tables(config, mcp_servers)
    return attrs.evolve(config, mcp_servers=servers) if mcp_servers else config


def check_resumable(factories: TaskFactories, resume: ResumedState | None) -> None:
    """Raise :class:`ConfigError` when ``resume`` ran ops that no task is registered for."""
    if resume is None:
        return
    missing = [op_type for op_type in resume.op_types if op_type not in factories]
    if missing:
        raise ConfigError(
            f"the session ran {', '.join(map(repr, missing))} ops, and no task is "
            f"registered for {'it' if len(missing) == 1 else 'them'} now: register "
            "the task (open_session(tasks=...) or resume_session(tasks=...), [tasks] in the "
            "configuration, relay --task, or an installed package's entry point) to resume it"
        )


@attrs.frozen
class Models:
    """The model clients of a session and what they talk to."""

    model: ModelClient
    """The session's client."""
    provider: ProviderConfig
    """Its provider."""
    compact_model: ModelClient
    """The client of compaction summaries."""
    compact_provider: ProviderConfig
    """Its provider."""
    secrets: Secrets
    """The keys of both, and the variables they come from."""


async def open_models(
    config: Config,
    stack: AsyncExitStack,
    *,
    model: ModelClient | None,
    compact_model: ModelClient | None,
    api_key: str | None,
) -> Models:
    """The session's model clients: those given, else the configured provider's (and
    ``compact_model_provider``'s, when it names another), closed with ``stack``."""
    provider = config.provider()
    if model is None:
        model, key = await _open_model(config, provider, stack, api_key)
    else:
        key = _known_key(provider, api_key)
    secrets = Secrets.of([key], [provider.env_key])
    compact_provider = provider
    if compact_model is not None:
        compact_provider = config.compaction_provider()
    elif config.separate_compaction_provider:
        compact_provider = config.compaction_provider()
        compact_model, compact_key = await _open_model(config, compact_provider, stack, None)
        secrets = Secrets.of(
            [*secrets.values, compact_key], [*secrets.variables, compact_provider.env_key]
        )
    return Models(model, provider, compact_model or model, compact_provider, secrets)


def tool_registry(config: Config, tools: Iterable[Tool]) -> ToolRegistry:
    """The enabled built-in tools, the context tools (token budget), then ``tools``."""
    registry = builtin_registry(config.tools, multi_agent=config.features.multi_agent)
    if config.features.token_budget:
        for tool in CONTEXT_TOOLS:
            registry.register(tool)
    for tool in tools:
        registry.register(tool)
    return registry


async def session_sandbox(config: Config, registry: ToolRegistry) -> SandboxPolicy | None:
    """The sandbox of the session's commands (None for ``danger-full-access``), made sure of
    when something runs commands (``shell``, hook commands).

    Raises:
        ConfigError: the mode confines commands and relay cannot make its sandbox here.
    """
    policy = sandbox_policy(config, bwrap=shutil.which("bwrap") or "bwrap")
    hooks = config.hooks.pre_compact or config.hooks.post_compact
    users = [
        name for name, used in (("shell", registry.get("shell")), ("hook commands", hooks)) if used
    ]
    if policy is not None and users:
        await in_thread(lambda: check_sandbox(policy, needed_by=" and ".join(users)))
    return policy


def session_gate(
    config: Config,
    sandbox: SandboxPolicy | None,
    *,
    session_id: str,
    rollout: RolloutWriter | None,
    secrets: Secrets,
    callback: ApprovalCallback | None,
) -> Gate:
    """The session's gate: its rules as it opens, and the sandbox they make. Inside the
    sandbox, relay's home and the session's rollout are read-only and the key that seals
    grants cannot be read (docs/approvals.md)."""
    home = relay_home()
    protected = [str(home)]
    if rollout is not None:
        protected.append(str(rollout.path))
    guarded = SandboxPolicy(
        "read-only",
        sandbox.bwrap if sandbox is not None else shutil.which("bwrap") or "bwrap",
        protected=tuple(protected),
        hidden=(str(home / KEY_FILE),),
    )
    if sandbox is not None:
        sandbox = attrs.evolve(sandbox, protected=guarded.protected, hidden=guarded.hidden)
    return Gate(
        ExecRules.from_config(config),
        sandbox,
        guarded=guarded,
        hidden=secrets.variables,
        callback=callback,
        key=grant_key(home),
        session_id=session_id,
    )


def open_rollout(
    config: Config,
    session_id: str,
    now: Callable[[], datetime],
    stack: AsyncExitStack,
    *,
    resume: ResumedState | None,
    epoch: Epoch | None,
) -> RolloutWriter | None:
    """The rollout writer (None when persistence is off): a resumed session appends to its
    file, a new one creates its own; closed with ``stack``."""
    if not config.rollout.enabled:
        return None
    if resume is not None and resume.rollout_path is not None:
        rollout = RolloutWriter.append_to(resume.rollout_path, epoch=epoch)
    else:
        root = Path(config.rollout.dir) if config.rollout.dir else relay_home() / "sessions"
        rollout = RolloutWriter.create(root, session_id, now(), epoch=epoch)
    stack.callback(rollout.close)
    return rollout


def initial_state(config: Config, resume: ResumedState | None) -> SessionState:
    """A new session's state, or a resumed one's."""
    defaults = TurnSettings(model=config.model, cwd=config.cwd or os.getcwd(), effort=None)
    if resume is not None:
        return SessionState.restored(resume, defaults)
    return SessionState(defaults=defaults)


@attrs.frozen
class McpStart:
    """What starting the MCP servers gave a session."""

    counts: Mapping[str, int]
    """The servers that started, and their tool counts."""
    events: list[tuple[str, p.EventMsg]]
    """What to report after ``session_configured``: servers that did not start."""
    secrets: Secrets
    """The session's secrets with the servers' own added."""


async def start_mcp(
    config: Config,
    stack: AsyncExitStack,
    registry: ToolRegistry,
    *,
    cwd: str,
    secrets: Secrets,
) -> McpStart:
    """Start the enabled MCP servers (stopped with ``stack``) and register their tools, which
    they keep current as their lists change."""
    open_mcp = _mcp_starter(config.mcp_servers)
    if open_mcp is None:
        return McpStart({}, [], secrets)
    started = await stack.enter_async_context(
        open_mcp(config.mcp_servers, cwd=cwd, hidden_env=secrets.variables, registry=registry)
    )
    secrets = Secrets.of([*secrets.values, *started.secrets], secrets.variables)
    events: list[tuple[str, p.EventMsg]] = [
        (MCP_EVENT_ID, p.WarningEvent(secrets.redact(warning))) for warning in started.warnings
    ]
    return McpStart(started.counts, events, secrets)


def traced(
    config: Config,
    stack: AsyncExitStack,
    models: Models,
    *,
    tracer_provider: Any,
    resume: ResumedState | None,
) -> tuple[Models, SessionTracer | None]:
    """The model clients wrapped in spans, and the tracer that observes the session's events
    (none without ``opentelemetry-api``)."""
    from .._otel import session_tracer

    tracer = session_tracer(config, tracer_provider, resume.spans if resume else ())
    if tracer is None:
        return models, None
    stack.callback(tracer.close)
    model = tracer.wrap(models.model)
    same = models.compact_model is models.model
    compact = model if same else tracer.wrap(models.compact_model)
    return attrs.evolve(models, model=model, compact_model=compact), tracer


def session_writer(
    config: Config,
    models: Models,
    *,
    session_id: str,
    registry: ToolRegistry,
    state: SessionState,
    rollout: RolloutWriter | None,
    secrets: Secrets,
    clock: Callable[[], datetime],
    rng: random.Random | None,
    estimator: TokenEstimator | None,
    hooks: Iterable[CompactHook],
    resume: ResumedState | None,
    epoch: Epoch | None,
    gate: Gate,
) -> SessionWriter:
    """The session's wiring and its one writer; a resumed session records first the outputs
    of the calls that had none when it stopped."""
    wiring = Wiring(
        session_id=session_id,
        config=config,
        model=models.model,
        provider=models.provider,
        tools=registry,
        secrets=secrets,
        clock=clock,
        rng=rng or random.Random(),
        instructions=base_instructions(config),
        compact_model=models.compact_model,
        compact_provider=models.compact_provider,
        hooks=list(hooks),
        estimators=Estimators(estimator),
        gate=gate,
    )
    writer = SessionWriter(
        wiring,
        state,
        rollout,
        ids=(resume.submissions, resume.items) if resume is not None else (0, 0),
        first_seq=epoch.first_seq if epoch is not None else 1,
    )
    for output in resume.unanswered if resume is not None else ():
        writer.record(output)
    return writer


def default_clock() -> datetime:
    """The local time, with its zone."""
    return datetime.now().astimezone()


def mcp_server_tables(
    config: Config, given: Mapping[str, McpServerConfig | Mapping[str, Any]] | None
) -> dict[str, McpServerConfig]:
    """The MCP servers of a session: ``config.mcp_servers``, then ``given`` (a plain table is
    read as a configuration file's is), each one checked.

    Raises:
        ConfigError: a table is invalid (the message names it and the key).
    """
    servers = dict(config.mcp_servers)
    if given:
        plain = {n: t for n, t in given.items() if not isinstance(t, McpServerConfig)}
        made = config_from_dict({"mcp_servers": plain}).mcp_servers if plain else {}
        for name, table in given.items():
            servers[name] = table if isinstance(table, McpServerConfig) else made[name]
    for name, server in servers.items():
        check_mcp_server(name, server)
    return servers


def _mcp_starter(servers: Mapping[str, McpServerConfig]) -> OpenMcpServers | None:
    """What starts the enabled ``servers`` (None when there is none), once the ``mcp`` SDK is
    known to be there.

    Raises:
        ConfigError: a server is configured and the ``mcp`` extra is not installed.
    """
    enabled = [name for name, server in servers.items() if server.enabled]
    if not enabled:
        return None
    try:
        import mcp  # noqa: F401  (the extra; the adapter imports it too)

        from .._mcp._session import open_mcp_servers
    except ImportError as exc:
        raise ConfigError(
            f"MCP servers are configured ({', '.join(enabled)}) and the mcp package is not "
            f"installed ({exc.name or 'mcp'} is missing): pip install 'relay-runtime[mcp]'"
        ) from None
    return open_mcp_servers


async def _open_model(
    config: Config, provider: ProviderConfig, stack: AsyncExitStack, given: str | None
) -> tuple[ModelClient, str | None]:
    """The model client of the configured provider, and the API key it uses."""
    if provider.base_url is None:  # the embedded scripted provider
        return ScriptedModel(config.model_script), _known_key(provider, given)
    api_key = resolve_api_key(provider, given)
    from .._wire import open_http_client  # the SDK is imported only for HTTP providers

    client: ModelClient = await stack.enter_async_context(
        open_http_client(provider, api_key=api_key)
    )
    return client, api_key


@asynccontextmanager
async def open_model_client(
    config: Config, provider: ProviderConfig | None = None, *, api_key: str | None = None
) -> AsyncIterator[ModelClient]:
    """The model client :func:`open_session` opens for ``provider`` (default: the
    configuration's own), open until the block exits: the scripted model of
    ``config.model_script`` for the embedded provider, else an HTTP client. For a program
    that wraps the client before it hands it to a session (``open_session(model=...)``).

    Raises:
        ConfigError: the provider's API key is missing or invalid.
    """
    async with AsyncExitStack() as stack:
        client, _ = await _open_model(config, provider or config.provider(), stack, api_key)
        yield client


def _known_key(provider: ProviderConfig, given: str | None) -> str | None:
    """The key a session given its model client still keeps out of what it records: the one
    passed, else the provider's when its variable holds a usable one."""
    try:
        return resolve_api_key(provider, given)
    except ConfigError:
        return given


__all__ = [
    "MCP_EVENT_ID",
    "McpStart",
    "Models",
    "check_resumable",
    "checked_config",
    "default_clock",
    "initial_state",
    "mcp_server_tables",
    "open_model_client",
    "open_models",
    "open_rollout",
    "session_sandbox",
    "session_writer",
    "start_mcp",
    "tool_registry",
    "traced",
]
