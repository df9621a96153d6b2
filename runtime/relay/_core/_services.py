"""What the parts of one session share: its configuration, model, tools and state, and the one
place its events and history items are numbered, persisted and sent.

The session actor (:mod:`._session`), its task slot (:mod:`._slot`) and the ports its tasks see
(:mod:`._port`) all hold the same :class:`Services`; none of them reaches into another's
private state. Every event goes through :meth:`Services.emit`, every history item through
:meth:`Services.record`.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path

import anyio

from .._base import _protocol as p
from .._base._codec import to_json
from .._base._config import Config, ProviderConfig
from .._base._errors import ConfigError, ErrorCode
from .._base._model import ModelClient
from .._base._secret import NO_SECRETS, Secrets
from .._base._templates import template
from .._base._tokens import ApproxEstimator, TokenEstimator, context_window_for
from .._version import __version__
from ._budget import TokenBudget, token_budget
from ._context import WorldState, world_state
from ._event_stream import EventJson, EventStream
from ._hooks import CompactHook
from ._input import input_text, user_message_of
from ._recorder import TERMINAL_EVENTS, RolloutRecorder
from ._state import SessionState
from ._tools import ToolRegistry
from ._writer import RolloutWriter, payload_json

#: The event id of ``session_configured``, which no submission caused.
SESSION_EVENT_ID = "session"


class Services:
    """The shared parts of one session."""

    def __init__(
        self,
        config: Config,
        *,
        session_id: str,
        model: ModelClient,
        tools: ToolRegistry,
        state: SessionState,
        clock: Callable[[], datetime],
        rng: random.Random,
        rollout: RolloutWriter | None,
        estimator: TokenEstimator | None = None,
        hooks: Iterable[CompactHook] = (),
        ids: tuple[int, int] = (0, 0),
        secrets: Secrets = NO_SECRETS,
        first_seq: int = 1,
        compact_model: ModelClient | None = None,
    ) -> None:
        self.id = session_id
        """The session id."""
        self.config = config
        """The configuration it runs with."""
        client_provider = getattr(model, "provider", None)
        # An HTTP client carries its provider table; its retry limits are the ones that apply.
        self.provider: ProviderConfig = (
            client_provider if isinstance(client_provider, ProviderConfig) else config.provider()
        )
        """The provider the model client talks to."""
        self.secrets = Secrets.of(secrets.values, [*secrets.variables, self.provider.env_key])
        """The API key: kept from the processes the session starts (its variable), and out
        of every tool and hook output (its value)."""
        self.model = model
        """The model client."""
        self.compact_model = compact_model or model
        """The client compaction summaries go to (``compact_model_provider``; by default the
        session's own)."""
        compact_provider = getattr(self.compact_model, "provider", None)
        self.compact_provider: ProviderConfig = (
            compact_provider
            if isinstance(compact_provider, ProviderConfig)
            else (config.compaction_provider() if compact_model is not None else self.provider)
        )
        """The provider of :attr:`compact_model` (its retry limits apply to summaries)."""
        self.tools = tools
        """The tools the model may call."""
        self.state = state
        """Everything the session knows between turns."""
        self.rng = rng
        """The random source of retry jitter."""
        self.clock = clock
        """The wall clock of dates and timestamps in events."""
        self.hooks: list[CompactHook] = list(hooks)
        """Python callables run around compactions (besides configured commands)."""
        self.instructions = base_instructions(config)
        """The base instructions of every request."""
        self.recorder = RolloutRecorder(rollout, ids)
        """The rollout's lines."""
        self.events = EventStream()
        """The event stream to the session's reader."""
        self.events_emitted = 0
        """Events numbered so far."""
        self.last_seq = first_seq - 1
        """The ``seq`` of the last event (numbering starts at ``first_seq``: 1, or where an
        epoch's starts)."""
        self.listeners: list[Callable[[p.Event], None]] = []
        """Told every event as it is emitted (what :meth:`Session.ask` watches)."""
        self.on_rollout_failure: Callable[[], None] = lambda: None
        """Called once when the rollout can no longer be written (the session shuts down)."""
        self._rollout_failure_reported = False
        self.submissions, self.items = ids
        # The generated ids go on from where a resumed session's left off.
        self._estimator = estimator

    def emit(self, event_id: str, msg: p.EventMsg) -> None:
        """Number ``msg``, persist it if it is a persisted kind, and send it to the reader.

        A terminal event (``turn_complete``, ``turn_aborted``, ``shutdown_complete``) is
        flushed to the rollout, with everything before it, before anyone can see it. When the
        rollout can no longer be written, an ``error{rollout}`` says so, once, with this
        event's id: before a terminal event, after any other.
        """
        terminal = isinstance(msg, TERMINAL_EVENTS)
        if terminal:
            self.recorder.ids(self.submissions, self.items)
        seq = self.last_seq + 1
        json_of: EventJson | None = None
        if self.events.keeps_json:
            data = to_json(msg)
            json_of = (data, payload_json(data))
            self.recorder.event(msg, json_of[1], seq=seq, event_id=event_id)
        else:
            self.recorder.event(msg, seq=seq, event_id=event_id)
        if terminal:
            self._check_rollout(event_id)
            # An error{rollout} went first: its line was not written, and this event follows it.
            seq = self.last_seq + 1
        self.events_emitted += 1
        self.last_seq = seq
        event = p.Event(event_id, seq, msg)
        for listener in self.listeners:
            listener(event)
        if json_of is not None:
            self.events.send(event, json_of)
        else:
            self.events.send(event)
        if not terminal:
            self._check_rollout(event_id)

    def _check_rollout(self, event_id: str) -> None:
        writer = self.recorder.writer
        if writer is None or writer.failure is None or self._rollout_failure_reported:
            return
        self._rollout_failure_reported = True
        failure = writer.failure
        self.emit(
            event_id,
            p.ErrorEvent(
                f"the rollout file {writer.path} cannot be written ({failure.strerror}); "
                "it keeps every line up to here, and the session shuts down",
                ErrorCode.ROLLOUT,
            ),
        )
        self.on_rollout_failure()

    def record(self, item: p.ResponseItem, *, from_model: bool = False) -> None:
        """Append an item to the history and the rollout."""
        history = self.state.history
        history.record(item, from_model=from_model)
        written = self.recorder.item(item)
        if written is not None:
            history.known_json(item, *written)

    def record_input(self, turn_id: str, items: tuple[p.InputItem, ...]) -> None:
        """Record user input as a user message, with its item and ``user_message`` events."""
        started = p.UserMessageItem(self.new_item_id("user"), items)
        self.emit(turn_id, p.ItemStarted(turn_id, started))
        self.record(user_message_of(items))
        self.emit(turn_id, p.ItemCompleted(turn_id, started))
        self.emit(turn_id, p.UserMessage(input_text(items)))

    def new_item_id(self, prefix: str = "item") -> str:
        """A fresh item id, unique in the session."""
        self.items += 1
        return f"{prefix}-{self.items}"

    def new_submission_id(self) -> str:
        """A fresh submission id, unique in the session."""
        self.submissions += 1
        return f"sub-{self.submissions}"

    def world(self, cwd: str) -> WorldState:
        """The world state of ``cwd`` now."""
        return world_state(cwd, self.clock, os.environ.get("SHELL"))

    def wall_time(self) -> float:
        """Seconds since the epoch, by the session's clock."""
        return self.clock().timestamp()

    def context_window(self, model: str) -> int | None:
        """The context window of ``model``."""
        return context_window_for(model, self.config.model_context_window)

    def budget(self, model: str) -> TokenBudget:
        """The token budget of ``model`` as the history stands (docs/session.md)."""
        state = self.state
        history = state.history
        return token_budget(
            self.config,
            self.provider,
            model,
            last_response_tokens=history.last_response_tokens,
            tokens_since_model=history.tokens_since_model,
            ratio=state.token_ratio,
        )

    async def usage_estimator(self) -> TokenEstimator:
        """The counter for usage a server did not report: tiktoken when it is installed
        (loaded once, off the event loop), else the approximate count."""
        if self._estimator is None:
            try:
                from .._base._tiktoken import TiktokenEstimator, get_encoding
            except ImportError:
                self._estimator = ApproxEstimator()
            else:
                estimator = TiktokenEstimator("o200k_base")
                await anyio.to_thread.run_sync(get_encoding, estimator.encoding_name)
                self._estimator = estimator
        return self._estimator

    def configured(self, *, resumed: bool, mcp_servers: Mapping[str, int] | None = None) -> None:
        """Emit ``session_configured``, the first event of every session (``mcp_servers``:
        the MCP servers that started, and their tool counts), then a ``warning`` when the
        rollout file could not be locked."""
        writer = self.recorder.writer
        defaults = self.state.defaults
        self.emit(
            SESSION_EVENT_ID,
            p.SessionConfigured(
                session_id=self.id,
                model=defaults.model,
                model_provider=self.config.model_provider,
                model_context_window=self.context_window(defaults.model),
                cwd=defaults.cwd,
                rollout_path=str(writer.path) if writer is not None else None,
                relay_version=__version__,
                resumed=resumed,
                compact_model=self.config.compact_model,
                compact_model_provider=(
                    self.config.compact_model_provider
                    if self.config.separate_compaction_provider
                    else None
                ),
                mcp_servers=dict(mcp_servers or {}),
            ),
        )
        if writer is not None and writer.warning is not None:
            self.emit(SESSION_EVENT_ID, p.WarningEvent(writer.warning))


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


__all__ = ["SESSION_EVENT_ID", "Services", "base_instructions"]
