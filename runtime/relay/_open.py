"""Opening a session: the wiring between a configuration and the core.

The core (:mod:`relay._core`) runs a session with what it is handed. Choosing those parts is
done here, once per session: the model client (the embedded scripted model, or an HTTP client
for the configured provider), the tools (the enabled built-ins, the context tools, ``recall``,
the embedder's own, those of the MCP servers it starts and stops), the rollout writer, the
state (new, or resumed), the task factories of the ops (relay's own from ``relay.tasks``, each
replaceable) and the compactor.

relay's own tasks are named here by where they live, as an embedder names its own
(``"module:attribute"``), and loaded when a session opens: the core and this face never import
``relay.tasks``, which is built on the public API alone.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import random
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ._base import _protocol as p
from ._base._config import Config, ProviderConfig, config_from_dict, relay_home, resolve_api_key
from ._base._errors import ConfigError
from ._base._mcp_config import McpServerConfig, check_mcp_server
from ._base._model import ModelClient
from ._base._protocol import BUILTIN_OP_TYPES
from ._base._secret import Secrets
from ._base._tokens import TokenEstimator
from ._core._context import TurnSettings, check_working_directory
from ._core._hooks import CompactHook
from ._core._port import Compactor, SessionTask
from ._core._services import Services
from ._core._session import Session, TaskFactories, run_session
from ._core._state import ResumedState, SessionState
from ._core._summary import compaction_prompt
from ._core._tools import CONTEXT_TOOLS, Tool, builtin_registry, recall_tool
from ._core._writer import Epoch, RolloutWriter
from ._models._scripted import ScriptedModel
from ._otel import session_tracer

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

if TYPE_CHECKING:
    from ._mcp._servers import OpenMcpServers

#: relay's own task factories, by op type.
BUILTIN_TASKS: Mapping[str, str] = {
    "user_turn": "relay.tasks:regular",
    "user_input": "relay.tasks:regular",
    "compact": "relay.tasks:compact",
}
#: relay's own compactor (one per task).
BUILTIN_COMPACTOR = "relay.tasks.compaction:Compactor"

TaskFactory = Callable[[Any], SessionTask]
"""Makes the task of an op: ``(op) -> SessionTask``."""


def load_object(spec: str, *, what: str) -> Any:
    """The object ``"package.module:attribute"`` or ``"path/to/file.py:attribute"`` names.

    Raises:
        ConfigError: the spec is malformed, or the module or attribute cannot be loaded (the
            message names ``what`` and the spec).
    """
    module_name, _, attribute = spec.rpartition(":")
    if not module_name or not attribute:
        raise ConfigError(f"{what} {spec!r}: expected 'package.module:attribute'")
    try:
        if module_name.endswith(".py"):
            module = _load_file(Path(module_name))
        else:
            module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(f"{what} {spec!r}: cannot import {module_name}: {exc}") from exc
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise ConfigError(f"{what} {spec!r}: {module_name} has no {attribute}") from None
    return value


def _load_file(path: Path) -> Any:
    """The module a ``.py`` file holds, loaded once under a name of its own."""
    resolved = path.resolve()
    name = f"relay_task_{hashlib.sha256(str(resolved).encode()).hexdigest()[:16]}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


#: The entry-point group through which an installed package adds op types:
#: ``name = op type``, ``value = "package.module:factory"``.
ENTRY_POINT_GROUP = "relay.tasks"


@functools.cache
def _entry_points() -> tuple[tuple[str, str], ...]:
    return tuple((ep.name, ep.value) for ep in metadata.entry_points(group=ENTRY_POINT_GROUP))


@attrs.frozen
class _Deferred:
    """A factory an installed package names: loaded when its op type is first used, so that a
    package that cannot load breaks its own ops only (an ``error`` when one is submitted)."""

    spec: str
    op_type: str

    def __call__(self, op: Any) -> SessionTask:
        factory = load_object(self.spec, what=f"task {self.op_type} (entry point)")
        task: SessionTask = factory(op)
        return task


def task_factories(
    config: Mapping[str, str] | None = None, extra: Mapping[str, TaskFactory | str] | None = None
) -> TaskFactories:
    """The task factories of a session, by op type: relay's own, then those installed packages
    add (the ``relay.tasks`` entry points), then a configuration's ``[tasks]``, then
    ``extra`` (``open_session(tasks=...)``); a later one takes an op type from an earlier.

    Raises:
        ConfigError: a factory named in ``config`` or ``extra`` cannot be loaded, or is not
            callable.
    """
    specs: dict[str, TaskFactory | str] = dict(BUILTIN_TASKS)
    factories: dict[str, TaskFactory] = {}
    for op_type, named in _entry_points():
        if op_type in BUILTIN_OP_TYPES - BUILTIN_TASKS.keys():
            continue  # an op relay handles itself is no package's to take
        specs.pop(op_type, None)
        factories[op_type] = _Deferred(named, op_type)
    for op_type, given in {**(config or {}), **(extra or {})}.items():
        factories.pop(op_type, None)
        specs[op_type] = given
    for op_type, spec in specs.items():
        if op_type in BUILTIN_OP_TYPES - BUILTIN_TASKS.keys():
            raise ConfigError(f"task {op_type}: {op_type!r} is an op relay handles itself")
        factory = load_object(spec, what=f"task {op_type}") if isinstance(spec, str) else spec
        if not callable(factory):
            raise ConfigError(f"task {op_type}: {spec!r} is not callable")
        factories[op_type] = factory
    return factories


def custom_op_types(factories: TaskFactories) -> frozenset[str]:
    """The op types of ``factories`` besides relay's own."""
    return frozenset(factories) - BUILTIN_TASKS.keys()


@asynccontextmanager
async def open_session(
    config: Config | None = None,
    *,
    model: ModelClient | None = None,
    tools: Iterable[Tool] = (),
    session_id: str | None = None,
    clock: Callable[[], datetime] | None = None,
    rng: random.Random | None = None,
    resume: ResumedState | None = None,
    estimator: TokenEstimator | None = None,
    hooks: Iterable[CompactHook] = (),
    tasks: Mapping[str, TaskFactory | str] | None = None,
    compactor: Callable[[], Compactor] | None = None,
    api_key: str | None = None,
    epoch: Epoch | None = None,
    compact_model: ModelClient | None = None,
    mcp_servers: Mapping[str, McpServerConfig | Mapping[str, Any]] | None = None,
    tracer_provider: TracerProvider | None = None,
) -> AsyncIterator[Session]:
    """Open a session that runs until the block exits or a ``shutdown`` op ends it.

    Leaving the block shuts the session down: a running task is aborted (reason
    ``shutdown``) and ``shutdown_complete`` is the last event.

    The API key is ``api_key`` when given, else read from the variable the provider's
    ``env_key`` names. Either way the program's environment is left as it is: its own
    ``OPENAI_API_KEY``, its own clients and the processes it starts keep working. The
    processes the session starts (the shell tool, hook commands) never get the variable, and
    whatever they output is redacted of the key before it is recorded, reported or sent.
    (The ``relay`` command, which owns its process, also takes the key out of its own
    environment, ``/proc/PID/environ`` included.)

    Example::

        async with relay.open_session(relay.Config()) as session:
            answer = await session.ask("hello")

    Args:
        config: the configuration (default: ``Config()``, the embedded scripted model).
        model: a model client to use instead of the configured provider.
        tools: tools to register besides the enabled built-ins.
        session_id: the session id (default: a new UUID).
        clock: the wall clock used for dates and timestamps in events.
        rng: the random source of retry jitter.
        resume: state rebuilt from a rollout; the session continues it and appends to its
            rollout file (see :func:`relay.resume_session`).
        estimator: the token counter for responses whose server reported no usage (default:
            tiktoken's ``o200k_base`` when installed, else the approximate count).
        hooks: Python callables to run before or after compactions (configured hook
            commands run first).
        tasks: task factories by op type, added to relay's (``user_turn``, ``user_input``,
            ``compact``) or in place of them: a callable ``(op) -> SessionTask``, or its
            ``"package.module:attribute"``. They come after those of installed packages (the
            ``relay.tasks`` entry points) and of ``config.tasks``.
        compactor: makes what a task does at its compaction points (default: relay's, from
            ``relay.tasks.compaction``).
        api_key: the provider's API key, passed by value instead of read from the
            environment (surrounding whitespace is stripped).
        epoch: the epoch the session writes its rollout in, when hosts take it over from one
            another (``docs/rollout.md``, Epochs); its events are numbered from the epoch's
            ``first_seq``.
        compact_model: a model client for compaction summaries, instead of the one
            ``config.compact_model_provider`` names (by default the session's own client).
        mcp_servers: MCP servers whose tools the model may call, by name, added to
            ``config.mcp_servers`` (or in place of one of the same name): each a
            :class:`~relay.lowlevel.McpServerConfig` or a plain table of the keys a
            ``[mcp_servers.NAME]`` table holds (docs/tools.md). They start before the session
            opens, at once, each within its ``startup_timeout_sec``; one that does not start
            is a ``warning`` event, and the session goes on without its tools. They stop when
            the session ends. This needs the ``mcp`` extra (``relay-runtime[mcp]``).
        tracer_provider: the OpenTelemetry tracer provider the session's spans go to
            (default: the global one; see ``docs/observability.md``). Without
            ``opentelemetry-api`` installed, a session has no spans.

    Raises:
        ConfigError: the configuration is invalid (unknown provider, missing or invalid API
            key, a task factory that cannot be loaded, ...).
    """
    config = config or Config()
    provider = config.provider()
    compaction_prompt(config)  # an unreadable prompt file is a configuration error, found now
    check_working_directory(config.cwd or os.getcwd())
    factories = task_factories(config.tasks, tasks)
    if resume is not None:
        missing = [op_type for op_type in resume.op_types if op_type not in factories]
        if missing:
            raise ConfigError(
                f"the session ran {', '.join(map(repr, missing))} ops, and no task is "
                f"registered for {'it' if len(missing) == 1 else 'them'} now: register "
                "the task (open_session(tasks=...), [tasks] in the configuration, relay "
                "--task, or an installed package's entry point) to resume it"
            )
    servers = mcp_server_tables(config, mcp_servers)
    if mcp_servers:
        config = attrs.evolve(config, mcp_servers=servers)
    open_mcp = _mcp_starter(servers)
    make_compactor = compactor or load_object(BUILTIN_COMPACTOR, what="compactor")
    registry = builtin_registry(config.tools)
    if config.features.token_budget:
        for tool in CONTEXT_TOOLS:
            registry.register(tool)
    for tool in tools:
        registry.register(tool)
    sid = resume.session_id if resume is not None else session_id or str(uuid.uuid4())
    now = clock or _default_clock
    async with AsyncExitStack() as stack:
        if model is None:
            model, key = await _open_model(config, provider, stack, api_key)
        else:
            key = _known_key(provider, api_key)
        secrets = Secrets.of([key], [provider.env_key])
        if compact_model is None and config.separate_compaction_provider:
            summarizer = config.compaction_provider()
            compact_model, compact_key = await _open_model(config, summarizer, stack, None)
            secrets = Secrets.of(
                [*secrets.values, compact_key], [*secrets.variables, summarizer.env_key]
            )
        rollout: RolloutWriter | None = None
        if config.rollout.enabled:
            if resume is not None and resume.rollout_path is not None:
                rollout = RolloutWriter.append_to(resume.rollout_path, epoch=epoch)
            else:
                root = Path(config.rollout.dir) if config.rollout.dir else relay_home() / "sessions"
                rollout = RolloutWriter.create(root, sid, now(), epoch=epoch)
            stack.callback(rollout.close)
        defaults = TurnSettings(model=config.model, cwd=config.cwd or os.getcwd(), effort=None)
        state = (
            SessionState.restored(resume, defaults)
            if resume is not None
            else SessionState(defaults=defaults)
        )
        if config.features.tool_output_masking:
            registry.register(recall_tool(state.outputs))
        first = list(resume.first_events) if resume is not None else []
        started: Mapping[str, int] = {}
        if open_mcp is not None:
            mcp_start = await stack.enter_async_context(
                open_mcp(
                    servers,
                    cwd=state.defaults.cwd,
                    hidden_env=secrets.variables,
                    taken=registry.names(),
                )
            )
            for tool in mcp_start.tools:
                registry.register(tool)
            started = mcp_start.counts
            secrets = Secrets.of([*secrets.values, *mcp_start.secrets], secrets.variables)
            first += [
                (MCP_EVENT_ID, p.WarningEvent(secrets.redact(warning)))
                for warning in mcp_start.warnings
            ]
        # Tracing is an observer of the session's events and a wrapper of its model client.
        tracer = session_tracer(config, tracer_provider, resume.spans if resume else ())
        client = model if tracer is None else tracer.wrap(model)
        if tracer is not None and compact_model is not None:
            compact_model = tracer.wrap(compact_model)
        if tracer is not None:
            stack.callback(tracer.close)

        def services() -> Services:
            shared = Services(
                config,
                session_id=sid,
                model=client,
                tools=registry,
                state=state,
                clock=now,
                rng=rng or random.Random(),
                rollout=rollout,
                estimator=estimator,
                hooks=hooks,
                ids=(resume.submissions, resume.items) if resume is not None else (0, 0),
                secrets=secrets,
                first_seq=epoch.first_seq if epoch is not None else 1,
                compact_model=compact_model,
            )
            if tracer is not None:
                tracer.attach(shared)
            return shared

        async with run_session(
            config,
            services=services,
            tasks=factories,
            compactor=make_compactor,
            resumed=resume is not None,
            first=first,
            mcp_servers=started,
        ) as session:
            yield session


#: The event id of what starting the MCP servers reports (before any submission).
MCP_EVENT_ID = "mcp"


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

        from ._mcp._servers import open_mcp_servers
    except ImportError as exc:
        raise ConfigError(
            f"MCP servers are configured ({', '.join(enabled)}) and the mcp package is not "
            f"installed ({exc.name or 'mcp'} is missing): pip install 'relay-runtime[mcp]'"
        ) from None
    return open_mcp_servers


def _default_clock() -> datetime:
    return datetime.now().astimezone()


async def _open_model(
    config: Config, provider: ProviderConfig, stack: AsyncExitStack, given: str | None
) -> tuple[ModelClient, str | None]:
    """The model client of the configured provider, and the API key it uses."""
    if provider.base_url is None:  # the embedded scripted provider
        return ScriptedModel(config.model_script), _known_key(provider, given)
    api_key = resolve_api_key(provider, given)
    from ._wire import open_http_client  # the SDK is imported only for HTTP providers

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
    "BUILTIN_COMPACTOR",
    "BUILTIN_TASKS",
    "ENTRY_POINT_GROUP",
    "custom_op_types",
    "load_object",
    "mcp_server_tables",
    "open_model_client",
    "open_session",
    "task_factories",
]
