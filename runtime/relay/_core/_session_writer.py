"""The one writer of a session: its state, the numbering of its events and ids, its rollout
lines and its event stream.

Theory of operation. Everything that changes while a session runs changes here, and nowhere
else: :class:`SessionWriter` owns the :class:`~._state.SessionState`, the
:class:`~._recorder.RolloutRecorder` and the :class:`~._event_stream.EventStream`. The session
actor and its task slot call it directly; a task reaches it only through its turn's writer
(:class:`~._turn.TurnWriter`), which drops every write once the turn is detached, and a
background compaction through :class:`~._turn.Silent`, which drops them all. So the guard that
keeps a finished turn from writing is checked in one place, and the state has one writer.

Each method is one step with no ``await``: a change to the state, the rollout lines that record
it and the events that report it happen together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs

from .._base import _protocol as p
from .._base._codec import to_json
from .._base._config import Config
from .._base._errors import ContextWindowExceeded, ErrorCode
from .._base._rollout_lines import LinePayload
from .._base._tokens import token_ratio
from .._exec._rules import Grant
from .._version import __version__
from ._budget import TokenBudget, token_budget
from ._context import TurnSettings, WorldState, context_changes
from ._event_stream import EventJson, EventStream
from ._history import missing_outputs
from ._input import input_text, user_message_of
from ._recorder import TERMINAL_EVENTS, RolloutRecorder
from ._state import SessionState
from ._view import TaskView
from ._wiring import Wiring
from ._work_state import WorkEntry, pin_refusal
from ._writer import RolloutWriter, payload_json

#: The event id of ``session_configured``, which no submission caused.
SESSION_EVENT_ID = "session"


def open_calls(
    before: Sequence[p.ResponseItem], after: Sequence[p.ResponseItem]
) -> list[p.ToolCall]:
    """The calls of ``before`` that have no output there and that ``after`` does not hold."""
    waiting = {output.call_id for output in missing_outputs(before)}
    kept = {item.call_id for item in after if isinstance(item, p.FunctionCall | p.CustomToolCall)}
    return [
        item
        for item in before
        if isinstance(item, p.FunctionCall | p.CustomToolCall)
        and item.call_id in waiting
        and item.call_id not in kept
    ]


class SessionWriter:
    """Writes one session: its state, its rollout, its events."""

    def __init__(
        self,
        wiring: Wiring,
        state: SessionState,
        rollout: RolloutWriter | None,
        *,
        ids: tuple[int, int] = (0, 0),
        first_seq: int = 1,
    ) -> None:
        self.wiring = wiring
        """What the session runs with."""
        self.state = state
        """Everything the session knows between turns: read it anywhere, write it here."""
        self.recorder = RolloutRecorder(rollout, ids, state.token_ratio)
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
        self.upstream: Callable[[p.Event], None] | None = None
        """A sub-agent's parent, told every event of the sub-agent and of its descendants
        (docs/agents.md); None for a root."""
        self.agent_path: str | None = None
        """A sub-agent's place in its tree (None: a root)."""
        self.children_usage: p.TokenUsage | None = None
        """The usage of the session's sub-agents and theirs, summed (None: it has none)."""
        self._last_count: p.TokenCount | None = None
        self._rollout_failure_reported = False
        # The generated ids go on from where a resumed session's left off.
        self.submissions, self.items = ids

    # ------------------------------------------------------------------ events and ids

    def _record_counters(self) -> None:
        """An ``ids`` line with the counters and the token ratio (:meth:`RolloutRecorder.ids`)."""
        self.recorder.ids(self.submissions, self.items, self.state.token_ratio)

    def emit(self, event_id: str, msg: p.EventMsg) -> None:
        """Number ``msg``, persist it if it is a persisted kind, and send it to the reader.

        A terminal event (``turn_complete``, ``turn_aborted``, ``shutdown_complete``) is
        flushed to the rollout, with everything before it, before anyone can see it. When the
        rollout can no longer be written, an ``error{rollout}`` says so, once, with this
        event's id: before a terminal event, after any other.
        """
        if isinstance(msg, p.TokenCount):
            msg = self._counted(msg)
        terminal = isinstance(msg, TERMINAL_EVENTS)
        if terminal:
            self._record_counters()
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
        if self.upstream is not None:
            self.upstream(event)
        if not terminal:
            self._check_rollout(event_id)

    def forward(self, event: p.Event) -> None:
        """Pass on an event of a descendant (``event.agent`` names it): numbered in this
        session's stream and sent on up, but neither recorded (the descendant's rollout has it)
        nor told to the listeners, which watch this session's own events."""
        self.last_seq += 1
        forwarded = attrs.evolve(event, seq=self.last_seq)
        self.events.send(forwarded)
        if self.upstream is not None:
            self.upstream(forwarded)

    def roll_up(self, event_id: str, children: p.TokenUsage) -> None:
        """Take the summed usage of the sub-agents and report the tree's in a ``token_count``
        (the session's own usage as it last reported it). It is not recorded: the rollout
        keeps the session's own counts, one per response, and each child's its own."""
        self.children_usage = children
        self.last_seq += 1
        event = p.Event(
            event_id, self.last_seq, self._counted(self._last_count or p.TokenCount(None))
        )
        self.events.send(event)
        if self.upstream is not None:
            self.upstream(event)

    def _counted(self, msg: p.TokenCount) -> p.TokenCount:
        """``msg`` with the tree's usage, once there are sub-agents; remembered."""
        own = attrs.evolve(msg, tree_total=None)
        self._last_count = own
        children = self.children_usage
        if children is None:
            return msg
        mine = msg.info.total_token_usage if msg.info is not None else p.TokenUsage()
        return attrs.evolve(own, tree_total=mine + children)

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

    def new_item_id(self, prefix: str = "item") -> str:
        """A fresh item id, unique in the session."""
        self.items += 1
        return f"{prefix}-{self.items}"

    def new_submission_id(self) -> str:
        """A fresh submission id, unique in the session."""
        self.submissions += 1
        return f"sub-{self.submissions}"

    def note(self, event_id: str, msg: p.EventMsg) -> None:
        """Report ``msg`` and write it to the rollout even when its kind is not persisted."""
        self.recorder.note(msg)
        self.emit(event_id, msg)

    # ------------------------------------------------------------------ the history

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

    def record_context(
        self,
        settings: TurnSettings,
        world: WorldState,
        initial: Callable[[], Sequence[p.ResponseItem]],
    ) -> None:
        """Record the initial context (``initial()``), or what changed in ``world`` since the
        reference context; ``world`` becomes the reference, ``settings`` the turn context."""
        state = self.state
        if state.reference_world is None:
            for item in initial():
                self.record(item)
            self.recorder.world_state(world)
        else:
            for item in context_changes(state.reference_world, world):
                self.record(item)
        state.reference_world = world
        state.last_turn_model = settings.model
        self.recorder.turn_context(settings, self.wiring.instructions, world)

    def install(
        self,
        turn_id: str,
        settings: TurnSettings,
        items: Sequence[p.ResponseItem],
        *,
        message: str,
        receipt: p.CompactionReceipt,
        clear_reference: bool,
        masked_outputs: Mapping[str, str] | None = None,
    ) -> None:
        """Install a compacted history (docs/compaction.md).

        Replaces the history (and the reference context), starts a new window, persists
        ``compacted`` (with the work-state record and the originals of ``masked_outputs``),
        ``world_state`` and ``turn_context`` (when there is a reference context), and emits
        the ``token_count`` of the receipt's estimate.

        A call with no output yet (one that waits for a decision, or runs, while a
        background compaction installs) stays in the new history, after ``items``, whatever
        the compactor kept: its output comes after it, and its request still stands.
        """
        state = self.state
        items = [*items, *open_calls(state.history.items, items)]
        state.history.replace(items)
        state.outputs.update(masked_outputs or {})
        state.start_window()
        world = self.wiring.world(settings.cwd)
        state.reference_world = None if clear_reference else world
        recorder = self.recorder
        recorder.compacted(
            items,
            message=message,
            receipt=receipt,
            window_number=state.window_number,
            first_window_id=state.first_window_id,
            previous_window_id=state.previous_window_id,
            window_id=state.window_id,
            work_state=None if state.work_state.is_empty() else state.work_state,
            masked_outputs=masked_outputs,
        )
        recorder.world_state(world)
        if state.reference_world is not None:
            recorder.turn_context(settings, self.wiring.instructions, world)
        # Nothing counted the new history yet: the figure is the receipt's estimate.
        usage = p.TokenUsage(total_tokens=receipt.tokens_after)
        window = self.wiring.context_window(settings.model)
        self.emit(turn_id, state.token_count(usage, window, estimated=True))

    # ------------------------------------------------------------------ usage

    def count_response(
        self, turn_id: str | None, usage: p.TokenUsage, *, recorded: bool, window: int | None
    ) -> None:
        """Add a response's usage to the total; when its output was ``recorded``, it is the
        history's latest count; with a ``turn_id``, a ``token_count`` reports it."""
        state = self.state
        if recorded:
            state.history.response_completed(usage.total_tokens)
        state.add_usage(usage)
        if turn_id is not None:
            self.emit(turn_id, state.token_count(usage, window))

    def calibrate(self, counted: int, estimate: int) -> None:
        """Scale later estimates by a server's ``counted`` tokens of a request relay
        estimated at ``estimate``."""
        ratio = token_ratio(counted, estimate)
        if ratio is not None:
            self.state.token_ratio = ratio

    def window_full(
        self, turn_id: str, model: str, error: ContextWindowExceeded | None = None
    ) -> None:
        """Count the history as filling the context window of ``model`` and emit a
        ``token_count`` that shows it: the next turn then compacts before it sends anything."""
        window = self.wiring.context_window(model)
        state = self.state
        counted = (error.prompt_tokens if error is not None else None) or 0
        full = window or max(state.history.usage_tokens, counted)
        # The server's count, when it is more than the window, is the better figure to compact
        # from; what is shown is the window, full.
        state.history.response_completed(max(full, counted))
        self.emit(turn_id, state.token_count(p.TokenUsage(total_tokens=full), window))

    # ------------------------------------------------------------------ the rest of the state

    def note_work(self, turn_id: str, entry: WorkEntry) -> None:
        """Add ``entry`` to the work-state record (redacted of the keys) and report it."""
        entry = attrs.evolve(entry, text=self.wiring.secrets.redact(entry.text))
        self.state.work_state.add(entry)
        self.emit(turn_id, p.WorkStateNoted(entry.kind, entry.text, entry.key))

    def decided(self, line: LinePayload, grant: Grant | None) -> None:
        """Record the decision on a call (its ``line``, from the gate); ``grant``, the one
        for the session it makes, holds from now on. The one writer of the grants."""
        if grant is not None:
            self.state.grants = (*self.state.grants, grant)
        self.recorder.line(line)

    def pin(self, event_id: str, text: str) -> None:
        """Pin a user message."""
        self.state.work_state.pin(text)
        self.emit(event_id, p.WorkStateNoted("pinned", text))

    def unpin(self, event_id: str, text: str | None) -> list[str]:
        """Release pinned messages (all, or the one that is ``text``); returns them."""
        released = self.state.work_state.unpin(text)
        for gone in released:
            self.emit(event_id, p.WorkStateNoted("unpinned", gone))
        return released

    def set_defaults(self, defaults: TurnSettings) -> None:
        """Model, cwd and effort of the next turn."""
        self.state.defaults = defaults

    def change_rules(self, event_id: str, op: p.OverrideTurnContext) -> Config | None:
        """Change the rules of later calls, recorded for a resume (docs/session.md); the
        configuration with the new rules, when they changed."""
        gate = self.wiring.gate
        loosened = gate.change(op, self.state.defaults.cwd)
        if loosened:
            message = f"the rules of later calls loosen: {'; '.join(loosened)}"
            self.emit(event_id, p.WarningEvent(message))
        if loosened is None:
            return None
        self.recorder.line(gate.rules)
        return gate.rules.apply(self.wiring.config)

    def pin_checked(self, event_id: str, text: str, model: str) -> None:
        """Pin ``text``, unless the pinned messages would take too much of the window (a
        ``warning`` says so)."""
        refusal = pin_refusal(text, self.state.work_state.pinned, self.budget(model).window)
        if refusal is not None:
            self.emit(event_id, p.WarningEvent(refusal))
            return
        self.pin(event_id, text)

    def budget(self, model: str) -> TokenBudget:
        """The token budget of ``model`` as the history stands (docs/session.md)."""
        state = self.state
        history = state.history
        return token_budget(
            self.wiring.config,
            self.wiring.provider,
            model,
            last_response_tokens=history.last_response_tokens,
            tokens_since_model=history.tokens_since_model,
            ratio=state.token_ratio,
        )

    def view(
        self,
        turn_id: str,
        kind: str,
        settings: TurnSettings,
        *,
        steered: int = 0,
        snapshot: tuple[Sequence[p.ResponseItem], str] | None = None,
    ) -> TaskView:
        """The session as it is now, frozen, for the work of ``turn_id`` (``snapshot``: the
        history and window id a background compaction works from, in place of the live ones)."""
        wiring, state = self.wiring, self.state
        history = state.history
        if snapshot is None:
            items: Sequence[p.ResponseItem] = history.frozen()
            wire = history.frozen_wire() if history.regular else None
            window_id = state.window_id
        else:
            (items, window_id), wire = snapshot, None
        return TaskView(
            turn_id=turn_id,
            kind=kind,
            settings=settings,
            config=wiring.config,
            provider=wiring.provider,
            history=items,
            budget=self.budget(settings.model),
            instructions=wiring.instructions,
            work_state=state.work_state,
            window_id=window_id,
            last_turn_model=state.last_turn_model,
            steered=steered,
            session_id=wiring.session_id,
            agent_path=self.agent_path,
            tools=wiring.tools.specs(),
            wire=wire,
        )

    # ------------------------------------------------------------------ the session's life

    def configured(self, *, resumed: bool, mcp_servers: Mapping[str, int] | None = None) -> None:
        """Emit ``session_configured``, the first event of every session (``mcp_servers``:
        the MCP servers that started, and their tool counts), then a ``warning`` when the
        rollout file could not be locked."""
        writer = self.recorder.writer
        defaults = self.state.defaults
        wiring = self.wiring
        config = wiring.config
        self.emit(
            SESSION_EVENT_ID,
            p.SessionConfigured(
                session_id=wiring.session_id,
                model=defaults.model,
                model_provider=config.model_provider,
                model_context_window=wiring.context_window(defaults.model),
                cwd=defaults.cwd,
                rollout_path=str(writer.path) if writer is not None else None,
                relay_version=__version__,
                resumed=resumed,
                compact_model=config.compact_model,
                compact_model_provider=(
                    config.compact_model_provider if config.separate_compaction_provider else None
                ),
                mcp_servers=dict(mcp_servers or {}),
            ),
        )
        if writer is not None and writer.warning is not None:
            self.emit(SESSION_EVENT_ID, p.WarningEvent(writer.warning))


__all__ = ["SESSION_EVENT_ID", "SessionWriter"]
