"""What :func:`relay.open_session` chose for a session: frozen while the session runs.

The session's parts read it; nothing writes it. What changes while a session runs (its state,
the numbering of events and items, the rollout, the event stream) is the business of the one
writer, :class:`~._session_writer.SessionWriter`.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import attrs

from .._base._config import Config, ProviderConfig
from .._base._errors import ConfigError
from .._base._exec_rules import ExecRules
from .._base._model import ModelClient
from .._base._secret import Secrets
from .._base._templates import template
from .._base._tokens import ApproxEstimator, TokenEstimator, context_window_for
from .._exec._real_work import in_thread
from ._cache_watch import CacheWatch
from ._context import WorldState, world_state
from ._exec_gate import Gate
from ._hooks import CompactHook
from ._tools import ToolRegistry


class Estimators:
    """The counter of usage a server did not report, made when first needed."""

    def __init__(self, given: TokenEstimator | None = None) -> None:
        self._estimator = given

    async def get(self) -> TokenEstimator:
        """tiktoken when it is installed (loaded once, off the event loop), else the
        approximate count."""
        if self._estimator is None:
            try:
                from .._base._tiktoken import TiktokenEstimator, get_encoding
            except ImportError:
                self._estimator = ApproxEstimator()
            else:
                estimator = TiktokenEstimator("o200k_base")
                await in_thread(get_encoding, estimator.encoding_name)
                self._estimator = estimator
        return self._estimator


@attrs.frozen(eq=False)
class Wiring:
    """The parts one session runs with, as they were chosen when it opened."""

    session_id: str
    """The session id."""
    config: Config
    """The configuration it runs with."""
    model: ModelClient
    """The model client."""
    provider: ProviderConfig
    """The provider the model client talks to (its retry limits apply)."""
    tools: ToolRegistry
    """The tools the model may call."""
    secrets: Secrets
    """The API keys: kept from the processes the session starts (their variables), and out of
    every tool and hook output (their values)."""
    clock: Callable[[], datetime]
    """The wall clock of dates and timestamps in events."""
    rng: random.Random
    """The random source of retry jitter."""
    instructions: str
    """The base instructions of every request."""
    compact_model: ModelClient
    """The client compaction summaries go to (``compact_model_provider``; by default the
    session's own)."""
    compact_provider: ProviderConfig
    """The provider of :attr:`compact_model` (its retry limits apply to summaries)."""
    hooks: list[CompactHook] = attrs.field(factory=list)
    """Python callables run around compactions, besides configured commands (a session may
    register more: :meth:`relay.Session.register_hook`)."""
    estimators: Estimators = attrs.field(factory=Estimators)
    """The counter of usage a server did not report."""
    prompt_cache: CacheWatch = attrs.field(factory=CacheWatch)
    """The last turn request and how much of it the server's prompt cache held."""
    gate: Gate = attrs.field(factory=lambda: Gate(ExecRules()))
    """What every effect of the session passes: its rules, who decides, how commands run."""

    def world(self, cwd: str) -> WorldState:
        """The world state of ``cwd`` now."""
        return world_state(cwd, self.clock, os.environ.get("SHELL"))

    def wall_time(self) -> float:
        """Seconds since the epoch, by the session's clock."""
        return self.clock().timestamp()

    def context_window(self, model: str) -> int | None:
        """The context window of ``model``."""
        return context_window_for(model, self.config.model_context_window)


def base_instructions(config: Config) -> str:
    """The base instructions of every request: configured text, a file, else the template."""
    if config.base_instructions is not None:
        return config.base_instructions
    if config.base_instructions_file is not None:
        try:
            return Path(config.base_instructions_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read base_instructions_file {config.base_instructions_file}: "
                f"{exc.strerror}"
            ) from exc
    return template("base_instructions.md")


__all__ = ["Estimators", "Wiring", "base_instructions"]
