"""How a run went, read from its events (it sets the exit status of ``relay run``).

A turn *failed* when an ``error`` event carrying its id arrives between its ``turn_started`` and
its end; an ``error`` for a submission that is not a running turn (input a compaction could not
take, a task that could not start) is a failure too, since the work the user asked for did not
happen. An interrupted or replaced turn is not a failure: someone asked for it.
"""

from __future__ import annotations

import attrs

from .._base import _protocol as p


@attrs.define
class RunOutcome:
    """Folds events into the run's failures; plain state, no I/O."""

    _open: dict[str, p.ErrorEvent | None] = attrs.field(factory=dict)
    failures: list[tuple[str, p.ErrorEvent]] = attrs.field(factory=list)
    """``(submission or turn id, error)`` for every failure, in order."""
    last_answer: str | None = None
    """The ``last_agent_message`` of the last turn that completed (what ``relay exec``
    prints)."""

    def observe(self, event: p.Event) -> None:
        """Take one event into account (a sub-agent's are its parent's business: its failure
        is reported to the parent, and its answer is not the run's)."""
        if event.agent is not None:
            return
        match event.msg:
            case p.TurnStarted(turn_id=turn_id):
                self._open[turn_id] = None
            case p.ErrorEvent() as error:
                if event.id not in self._open:
                    self.failures.append((event.id, error))
                elif self._open[event.id] is None:
                    self._open[event.id] = error
            case p.TurnComplete(turn_id=turn_id) | p.TurnAborted(turn_id=turn_id):
                first = self._open.pop(turn_id, None)
                if first is not None:
                    self.failures.append((turn_id, first))
                if isinstance(event.msg, p.TurnComplete):
                    self.last_answer = event.msg.last_agent_message
            case _:
                pass

    def error_of(self, turn_id: str) -> p.ErrorEvent | None:
        """The first error of a turn that is still open, if it had one."""
        return self._open.get(turn_id)

    @property
    def errors(self) -> list[p.ErrorEvent]:
        """The errors of the failures, in order."""
        return [error for _, error in self.failures]

    @property
    def failed(self) -> bool:
        """Whether anything failed."""
        return bool(self.failures)
