"""Opening a session, new or resumed from its rollout: the two functions of the face that
wire the core (docs/session.md, docs/rollout.md).

:func:`open_session` is a short sequence of named steps (:mod:`._parts`); :func:`resume_session`
reads the rollout, rebuilds the state and opens the session through the same steps. The rollout
reader and the reconstruction are loaded when a session is first resumed: a program that never
resumes does not pay for them at start-up.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime
from functools import partial
from os import PathLike
from typing import TYPE_CHECKING, Any

import attrs

from .._base import _protocol as p
from .._base._agents_config import AgentRole
from .._base._config import Config
from .._base._errors import ConfigError
from .._base._mcp_config import McpServerConfig
from .._base._model import ModelClient
from .._base._tokens import TokenEstimator
from .._core._agent_rules import ChildSpec, Tree, child_records
from .._core._agents import AgentPlace, ChildSession
from .._core._event_stream import EventStream
from .._core._exec_gate import ApprovalCallback
from .._core._hooks import CompactHook
from .._core._port import CompactionPolicy
from .._core._session import Session, run_session
from .._core._session_writer import SessionWriter
from .._core._state import ResumedState
from .._core._tools import Tool, recall_tool
from .._core._writer import Epoch
from .._exec._real_work import in_thread
from . import _parts
from ._agents import ChildParts, child_config, decided_for, inherited_tools
from ._resume_rules import loosened_warning, resumed_rules
from ._tasks import (
    BUILTIN_COMPACTOR,
    TASKS_EVENT_ID,
    TaskFactory,
    claimed_twice,
    load_object,
    task_factories,
)

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from .._rollout._lines import Rollout


@asynccontextmanager
async def open_session(
    config: Config | None = None,
    *,
    model: ModelClient | None = None,
    tools: Iterable[Tool] = (),
    session_id: str | None = None,
    clock: Callable[[], datetime] | None = None,
    rng: random.Random | None = None,
    estimator: TokenEstimator | None = None,
    hooks: Iterable[CompactHook] = (),
    tasks: Mapping[str, TaskFactory | str] | None = None,
    compactor: Callable[[], CompactionPolicy] | None = None,
    api_key: str | None = None,
    epoch: Epoch | None = None,
    compact_model: ModelClient | None = None,
    mcp_servers: Mapping[str, McpServerConfig | Mapping[str, Any]] | None = None,
    tracer_provider: TracerProvider | None = None,
    on_approval: ApprovalCallback | None = None,
) -> AsyncIterator[Session]:
    """Open a session that runs until the block exits or a ``shutdown`` op ends it; leaving
    the block aborts a running task (``shutdown``), and ``shutdown_complete`` is the last event.

    The API key is ``api_key``, else the variable the provider's ``env_key`` names; the
    program's environment is left as it is. The processes the session starts never get the
    variable, and their output is redacted of the key (docs/session.md).

    Args:
        config: the configuration (default: ``Config()``, the embedded scripted model).
        model: a model client in place of the configured provider's (which it talks to).
        tools: tools to register besides the enabled built-ins.
        session_id: the session id (default: a new UUID).
        clock: the wall clock of dates and timestamps in events.
        rng: the random source of retry jitter.
        estimator: the token counter of responses whose server reported no usage (default:
            tiktoken's ``o200k_base`` when installed, else the approximate count).
        hooks: Python callables run before or after compactions (after configured commands).
        tasks: task factories by op type, added to relay's or in their place: a callable
            ``(op) -> SessionTask`` or its ``"package.module:attribute"``; they come after
            installed packages' entry points and ``config.tasks`` (docs/tasks.md).
        compactor: makes what a task does at its compaction points (default:
            ``config.compactor``, else relay's; docs/compaction.md).
        api_key: the provider's API key, passed by value (surrounding whitespace stripped).
        epoch: the epoch the session writes its rollout in (docs/rollout.md, Epochs).
        compact_model: a model client for compaction summaries (default: the client of
            ``config.compact_model_provider``, else the session's own).
        mcp_servers: MCP servers by name, added to ``config.mcp_servers``: each a
            :class:`~relay.McpServerConfig` or a plain ``[mcp_servers.NAME]`` table; they start
            before the session opens (docs/tools.md; the ``mcp`` extra).
        tracer_provider: where the session's spans go (default: the global tracer provider;
            docs/observability.md).
        on_approval: decides every call that waits for an approval (docs/approvals.md): a
            callable, sync or async, given the :class:`~relay.ExecApprovalRequest` and
            returning a :class:`~relay.ReviewDecision` (or its name). Without it,
            ``exec_approval`` ops decide.

    Raises:
        ConfigError: the configuration is invalid (unknown provider, missing or invalid API
            key, a task factory that cannot be loaded, ...).
    """
    async with open_state(
        _parts.checked_config(config, mcp_servers),
        None,
        model=model,
        tools=tools,
        session_id=session_id,
        clock=clock,
        rng=rng,
        estimator=estimator,
        hooks=hooks,
        tasks=tasks,
        compactor=compactor,
        api_key=api_key,
        epoch=epoch,
        compact_model=compact_model,
        tracer_provider=tracer_provider,
        on_approval=on_approval,
    ) as session:
        yield session


@asynccontextmanager
async def open_state(
    config: Config,
    resume: ResumedState | None,
    *,
    model: ModelClient | None = None,
    tools: Iterable[Tool] = (),
    session_id: str | None = None,
    clock: Callable[[], datetime] | None = None,
    rng: random.Random | None = None,
    estimator: TokenEstimator | None = None,
    hooks: Iterable[CompactHook] = (),
    tasks: Mapping[str, TaskFactory | str] | None = None,
    compactor: Callable[[], CompactionPolicy] | None = None,
    api_key: str | None = None,
    epoch: Epoch | None = None,
    compact_model: ModelClient | None = None,
    tracer_provider: TracerProvider | None = None,
    on_approval: ApprovalCallback | None = None,
    place: AgentPlace | None = None,
) -> AsyncIterator[Session]:
    """The steps of opening a session, new (``resume`` None) or continuing ``resume`` (a
    state rebuilt from a rollout, or made by a program that measures relay); ``place`` is a
    sub-agent's in its tree (None: a root)."""
    factories = task_factories(config.tasks, tasks)
    _parts.check_resumable(factories, resume)
    make_compactor = compactor or load_object(
        config.compactor or BUILTIN_COMPACTOR, what="compactor"
    )
    registry = _parts.tool_registry(config, tools)
    sandbox = await _parts.session_sandbox(config, registry)
    sid = resume.session_id if resume is not None else session_id or str(uuid.uuid4())
    now = clock or _parts.default_clock
    async with AsyncExitStack() as stack:
        models = await _parts.open_models(
            config, stack, model=model, compact_model=compact_model, api_key=api_key
        )
        rollout = _parts.open_rollout(config, sid, now, stack, resume=resume, epoch=epoch)
        state = _parts.initial_state(config, resume)
        if config.features.tool_output_masking:
            registry.register(recall_tool(state.outputs))
        mcp = await _parts.start_mcp(
            config, stack, registry, cwd=state.defaults.cwd, secrets=models.secrets
        )
        gate = _parts.session_gate(
            config,
            sandbox,
            session_id=sid,
            rollout=rollout,
            secrets=mcp.secrets,
            callback=on_approval,
        )
        grants, ignored = gate.kept(resume.grants if resume is not None else ())
        state.grants = tuple(grants)
        models, tracer = _parts.traced(
            config, stack, models, tracer_provider=tracer_provider, resume=resume
        )

        place = place or AgentPlace(Tree(config.agents, config.developer_instructions))
        place = attrs.evolve(
            place,
            opener=partial(
                open_child,
                ChildParts(
                    config,
                    models.model,
                    models.compact_model,
                    api_key,
                    registry,
                    place.tree,
                    now,
                    rng,
                    estimator,
                    tuple(hooks),
                    tasks,
                    compactor,
                    on_approval,
                ),
            ),
            records=child_records(resume.agent_events) if resume is not None else (),
        )

        def writer() -> SessionWriter:
            made = _parts.session_writer(
                config,
                models,
                session_id=sid,
                registry=registry,
                state=state,
                rollout=rollout,
                secrets=mcp.secrets,
                clock=now,
                rng=rng,
                estimator=estimator,
                hooks=hooks,
                resume=resume,
                epoch=epoch,
                gate=gate,
            )
            if tracer is not None:
                tracer.attach(made)
            if place.upstream is not None:
                # Nobody reads a sub-agent's own stream: its parent hears every event.
                made.events = EventStream(unread_limit=0)
                made.agent_path = place.path
            return made

        claims = claimed_twice({*config.tasks, *(tasks or {})})
        first = [
            *(resume.first_events if resume is not None else ()),
            *(("resume", p.WarningEvent(text)) for text in ignored),
            *((TASKS_EVENT_ID, p.WarningEvent(text)) for text in claims),
            *mcp.events,
        ]
        async with run_session(
            config,
            services=writer,
            tasks=factories,
            compactor=make_compactor,
            resumed=resume is not None,
            first=first,
            mcp_servers=mcp.counts,
            place=place,
        ) as session:
            yield session


@asynccontextmanager
async def resume_session(
    source: str | PathLike[str] | Rollout,
    config: Config | None = None,
    *,
    model: ModelClient | None = None,
    tools: Iterable[Tool] = (),
    session_id: str | None = None,
    clock: Callable[[], datetime] | None = None,
    rng: random.Random | None = None,
    estimator: TokenEstimator | None = None,
    hooks: Iterable[CompactHook] = (),
    tasks: Mapping[str, TaskFactory | str] | None = None,
    compactor: Callable[[], CompactionPolicy] | None = None,
    api_key: str | None = None,
    epoch: Epoch | None = None,
    compact_model: ModelClient | None = None,
    mcp_servers: Mapping[str, McpServerConfig | Mapping[str, Any]] | None = None,
    tracer_provider: TracerProvider | None = None,
    model_name: str | None = None,
    first_events: Iterable[tuple[str, p.EventMsg]] = (),
    on_approval: ApprovalCallback | None = None,
    keep_rules: bool = True,
) -> AsyncIterator[Session]:
    """Resume the session recorded in a rollout file and append to that file.

    ``source`` is the file's path, or the file already read (:func:`read_rollout`).

    Without a ``config``, the session goes on with the model and provider it recorded last
    (``session_configured``, ``turn_context``, ``session_meta``), with the built-in provider
    tables: a recorded provider that is not built in, or whose API key is unset, is a
    :class:`~relay.ConfigError` naming it, never a switch to another model. With a
    ``config``, its provider is used (see :func:`resumed_config` to apply the recorded one
    to a config of your own) and the model of the latest ``turn_context``. ``model_name``
    replaces that model. ``api_key`` is the provider's key passed by value, as for
    :func:`~relay.open_session` (the environment is left as it is either way).

    The session keeps the rules it recorded last (its ``rules`` line: ``approval_policy``,
    ``sandbox_mode``, ``[sandbox_workspace_write]``, ``[shell_environment_policy]``), with or
    without a ``config``: a configuration always holds rules, so its own are not a choice to
    change them. ``keep_rules=False`` is that choice: the session goes on under ``config``'s
    rules, and when they allow more than the recorded ones a ``warning`` (id ``"resume"``) says
    what they loosen. A rollout that recorded no rules (written by an older relay) goes on
    under ``config``'s, as it always did (docs/approvals.md, Rules on resume).

    The session continues with the history, reference context, turn defaults, window and
    token usage it had as of the last completed write (see :func:`reconstruct`); the first
    request it sends starts with exactly the history the live session had. Problems found in
    the file (a truncated last line, malformed lines) are reported as ``warning`` events with
    the id ``"resume"``, right after ``session_configured`` (the first event of every
    session, here with ``resumed`` set), then ``first_events`` (``(event id, message)``: what
    a host that resumes a session elsewhere knows of its move). Generated submission and item
    ids go on from the rollout's. ``epoch`` is the epoch the resumed session writes in (a
    host taking it over from another; ``docs/rollout.md``, Epochs). When the session is
    traced, its span links to the spans of the earlier runs the rollout recorded
    (``docs/observability.md``). The other arguments are those of
    :func:`~relay.open_session` (the session id comes from the file), which this is
    otherwise like: the MCP servers of ``config`` and ``mcp_servers`` start again.

    Raises:
        RolloutError: the file cannot be read, or it has no ``session_meta`` line.
        ConfigError: the configuration is invalid, or (without one) the recorded provider
            cannot be used.
    """
    state, config = await _resumed(
        source, config, api_key, model_name, first_events, keep_rules=keep_rules
    )
    if session_id is not None and session_id != state.session_id:
        raise ConfigError(
            f"session_id {session_id!r} is not the id of the session the rollout records "
            f"({state.session_id!r})"
        )
    async with open_state(
        _parts.checked_config(config, mcp_servers),
        state,
        model=model,
        tools=tools,
        session_id=session_id,
        clock=clock,
        rng=rng,
        estimator=estimator,
        hooks=hooks,
        tasks=tasks,
        compactor=compactor,
        api_key=api_key,
        epoch=epoch,
        compact_model=compact_model,
        tracer_provider=tracer_provider,
        on_approval=on_approval,
    ) as session:
        yield session


@asynccontextmanager
async def open_child(
    parts: ChildParts, spec: ChildSpec, upstream: Callable[[p.Event], None]
) -> AsyncIterator[ChildSession]:
    """Open the child ``spec`` names (new, or again from its rollout) and run it until the
    block exits; ``upstream`` hears each of its events."""
    role = parts.tree.config.role(spec.role) or AgentRole()
    config = child_config(parts.config, spec, role, parts.tree.instructions)
    resume = None
    if spec.resume_from is not None:
        resume, config = await resumed_state(spec.resume_from, config)
    callback = parts.on_approval
    ref = p.AgentRef(spec.agent_id, spec.path)
    place = AgentPlace(
        parts.tree,
        path=spec.path,
        depth=spec.depth,
        upstream=upstream,
        link=(spec.parent_id, spec.path, spec.role),
    )
    async with open_state(
        config,
        resume,
        model=parts.model,
        compact_model=parts.compact_model,
        api_key=parts.api_key,
        tools=inherited_tools(parts, role),
        session_id=spec.agent_id,
        clock=parts.clock,
        rng=parts.rng,
        estimator=parts.estimator,
        hooks=parts.hooks,
        tasks=parts.tasks,
        compactor=parts.compactor,
        on_approval=None if callback is None else partial(decided_for, callback, ref),
        place=place,
    ) as session:
        yield session


async def resumed_state(source: str, config: Config) -> tuple[ResumedState, Config]:
    """The state a sub-agent's rollout rebuilds, and ``config`` with the rules it recorded."""
    return await _resumed(source, config, None, None, (), keep_rules=True)


async def _resumed(
    source: str | PathLike[str] | Rollout,
    config: Config | None,
    api_key: str | None,
    model_name: str | None,
    first_events: Iterable[tuple[str, p.EventMsg]],
    *,
    keep_rules: bool,
) -> tuple[ResumedState, Config]:
    """The state a rollout rebuilds, and the configuration the session goes on with (its
    recorded rules in place, with ``keep_rules``)."""
    from .._rollout._lines import Rollout
    from .._rollout._reader import read_rollout
    from .._rollout._resume import (
        INTERRUPTED_OUTPUT,
        RESUME_EVENT_ID,
        describe_note,
        interrupted_call,
        reconstruct,
        resumed_config,
    )

    if isinstance(source, Rollout):
        rollout = source
    else:
        rollout = await in_thread(partial(read_rollout, source, for_resume=True))
    state = reconstruct(rollout)
    if config is None:
        config = resumed_config(Config(), state, api_key=api_key)
    if model_name is not None:
        defaults = state.defaults
        state = attrs.evolve(
            state,
            model=model_name,
            defaults=attrs.evolve(defaults, model=model_name) if defaults is not None else None,
        )
        config = attrs.evolve(config, model=model_name)
    if keep_rules:
        config = resumed_rules(config, state.rules)
    loosened = loosened_warning(state.rules, config)
    # Right after session_configured, before any op is handled.
    warnings = tuple(
        (RESUME_EVENT_ID, p.WarningEvent(describe_note(rollout, note))) for note in rollout.notes
    ) + tuple(
        (RESUME_EVENT_ID, p.WarningEvent(interrupted_call(output.call_id)))
        for output in state.unanswered
        if output.output == INTERRUPTED_OUTPUT
    )
    if loosened is not None:
        warnings += ((RESUME_EVENT_ID, p.WarningEvent(loosened)),)
    return attrs.evolve(state, first_events=(*warnings, *first_events)), config


__all__ = ["open_session", "open_state", "resume_session"]
