"""Resuming a session from its rollout: the one function of the public face that reads one
(docs/rollout.md).

It loads the rollout's reader and the reconstruction (:mod:`._resume`) when it is first
called: a program that never resumes does not pay for them at start-up.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from functools import partial
from os import PathLike
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from .._base import _protocol as p
from .._base._config import Config
from .._base._mcp_config import McpServerConfig
from .._base._model import ModelClient
from .._base._tokens import TokenEstimator
from .._core._hooks import CompactHook
from .._core._session import Session
from .._core._tools import Tool
from .._core._writer import Epoch
from .._open import open_session

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from ._lines import Rollout


@asynccontextmanager
async def resume_session(
    source: str | PathLike[str] | Rollout,
    config: Config | None = None,
    *,
    model: ModelClient | None = None,
    tools: Iterable[Tool] = (),
    clock: Callable[[], datetime] | None = None,
    rng: random.Random | None = None,
    estimator: TokenEstimator | None = None,
    hooks: Iterable[CompactHook] = (),
    model_name: str | None = None,
    first_events: Iterable[tuple[str, p.EventMsg]] = (),
    api_key: str | None = None,
    epoch: Epoch | None = None,
    mcp_servers: Mapping[str, McpServerConfig | Mapping[str, Any]] | None = None,
    tracer_provider: TracerProvider | None = None,
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
    from ._lines import Rollout
    from ._reader import read_rollout
    from ._resume import RESUME_EVENT_ID, describe_note, reconstruct, resumed_config

    if isinstance(source, Rollout):
        rollout = source
    else:
        rollout = await anyio.to_thread.run_sync(partial(read_rollout, source, for_resume=True))
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
    # Right after session_configured, before any op is handled.
    warnings = tuple(
        (RESUME_EVENT_ID, p.WarningEvent(describe_note(rollout, note))) for note in rollout.notes
    )
    state = attrs.evolve(state, first_events=(*warnings, *first_events))
    async with open_session(
        config,
        model=model,
        tools=tools,
        clock=clock,
        rng=rng,
        estimator=estimator,
        hooks=hooks,
        resume=state,
        api_key=api_key,
        epoch=epoch,
        mcp_servers=mcp_servers,
        tracer_provider=tracer_provider,
    ) as session:
        yield session


__all__ = ["resume_session"]
