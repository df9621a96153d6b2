"""Opening a session: the wiring between a configuration and the core.

The core (:mod:`relay._core`) runs a session with what it is handed. Choosing those parts is
done here, once per session: the model client (the embedded scripted model, or an HTTP client
for the configured provider), the tools (the enabled built-ins, the context tools, ``recall``,
the embedder's own), the rollout writer, the state (new, or resumed), the task factories of the
ops (relay's own from ``relay.tasks``, each replaceable) and the compactor.

relay's own tasks are named here by where they live, as an embedder names its own
(``"module:attribute"``), and loaded when a session opens: the core and this face never import
``relay.tasks``, which is built on the public API alone.
"""

from __future__ import annotations

import importlib
import os
import random
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from ._base._config import Config, ProviderConfig, relay_home, resolve_api_key
from ._base._errors import ConfigError
from ._base._model import ModelClient
from ._base._tokens import TokenEstimator
from ._core._context import TurnSettings, check_working_directory
from ._core._hooks import CompactHook
from ._core._port import Compactor, SessionTask
from ._core._services import Services
from ._core._session import Session, TaskFactories, run_session
from ._core._state import ResumedState, SessionState
from ._core._summary import compaction_prompt
from ._core._tools import CONTEXT_TOOLS, Tool, builtin_registry, recall_tool
from ._core._writer import RolloutWriter
from ._models._scripted import ScriptedModel

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
    """The object ``"package.module:attribute"`` names.

    Raises:
        ConfigError: the spec is malformed, or the module or attribute cannot be loaded (the
            message names ``what`` and the spec).
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"{what} {spec!r}: expected 'package.module:attribute'")
    try:
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


def task_factories(extra: Mapping[str, TaskFactory | str] | None = None) -> TaskFactories:
    """relay's task factories, with ``extra`` added or put in their place."""
    specs: dict[str, TaskFactory | str] = {**BUILTIN_TASKS, **(extra or {})}
    factories: dict[str, TaskFactory] = {}
    for op_type, spec in specs.items():
        factory = load_object(spec, what=f"task {op_type}") if isinstance(spec, str) else spec
        if not callable(factory):
            raise ConfigError(f"task {op_type}: {spec!r} is not callable")
        factories[op_type] = factory
    return factories


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
) -> AsyncIterator[Session]:
    """Open a session that runs until the block exits or a ``shutdown`` op ends it.

    Leaving the block shuts the session down: a running task is aborted (reason
    ``shutdown``) and ``shutdown_complete`` is the last event.

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
        tasks: task factories by op type, added to relay's or in place of them: a callable
            ``(op) -> SessionTask`` or its ``"package.module:attribute"``.
        compactor: makes what a task does at its compaction points (default: relay's, from
            ``relay.tasks.compaction``).

    Raises:
        ConfigError: the configuration is invalid (unknown provider, missing API key, a task
            factory that cannot be loaded, ...).
    """
    config = config or Config()
    provider = config.provider()
    compaction_prompt(config)  # an unreadable prompt file is a configuration error, found now
    check_working_directory(config.cwd or os.getcwd())
    factories = task_factories(tasks)
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
            model = await _open_model(config, provider, stack)
        rollout: RolloutWriter | None = None
        if config.rollout.enabled:
            if resume is not None and resume.rollout_path is not None:
                rollout = RolloutWriter.append_to(resume.rollout_path)
            else:
                root = Path(config.rollout.dir) if config.rollout.dir else relay_home() / "sessions"
                rollout = RolloutWriter.create(root, sid, now())
            stack.callback(rollout.close)
        defaults = TurnSettings(model=config.model, cwd=config.cwd or os.getcwd(), effort=None)
        state = (
            SessionState.restored(resume, defaults)
            if resume is not None
            else SessionState(defaults=defaults)
        )
        if config.features.tool_output_masking:
            registry.register(recall_tool(state.outputs))
        client = model

        def services() -> Services:
            return Services(
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
            )

        async with run_session(
            config,
            services=services,
            tasks=factories,
            compactor=make_compactor,
            resumed=resume is not None,
            first=resume.first_events if resume is not None else (),
        ) as session:
            yield session


def _default_clock() -> datetime:
    return datetime.now().astimezone()


async def _open_model(
    config: Config, provider: ProviderConfig, stack: AsyncExitStack
) -> ModelClient:
    if provider.base_url is None:  # the embedded scripted provider
        return ScriptedModel(config.model_script)
    api_key = resolve_api_key(provider)
    from ._wire import open_http_client  # the SDK is imported only for HTTP providers

    client: ModelClient = await stack.enter_async_context(
        open_http_client(provider, api_key=api_key)
    )
    return client


__all__ = ["BUILTIN_COMPACTOR", "BUILTIN_TASKS", "load_object", "open_session", "task_factories"]
