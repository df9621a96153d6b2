"""What :meth:`Session.ask <relay.Session.ask>` gives back: the answer of one turn, or the
failure that ended it."""

from __future__ import annotations

from typing import Any

import anyio
import attrs

from .._base import _protocol as p
from .._base._errors import RelayError


@attrs.frozen
class Answer:
    """The answer of one turn.

    Example::

        answer = await session.ask("Which build backend does this project use?")
        print(answer.message, answer.usage.total_tokens)

    With a schema, the answer is JSON that fits it, read::

        answer = await session.ask("Name the build backend.", output_schema={
            "type": "object",
            "properties": {"backend": {"type": "string"}},
            "required": ["backend"],
            "additionalProperties": False,
        })
        print(answer.output["backend"])
    """

    turn_id: str
    """The turn's id (its submission id)."""
    message: str | None
    """The turn's last agent message (None when the model wrote no text)."""
    items: tuple[p.TurnItem, ...]
    """The turn's completed items, in order: the user's message, the answers, tool calls, a
    compaction."""
    usage: p.TokenUsage
    """The tokens of the turn's model requests, as the servers counted them."""
    output: Any = attrs.field(default=None, hash=False)
    """The turn's structured output, when it asked for one (``output_schema``): the JSON
    value of :attr:`message`, which fits the schema; None otherwise."""


class TurnFailed(RelayError):
    """A turn asked for with :meth:`Session.ask <relay.Session.ask>` did not answer: it
    ended with an ``error`` (``error``; ``invalid_output`` for an answer that does not fit
    the schema asked for), was aborted (``aborted``), or was refused before it started
    (``error`` too)."""

    def __init__(
        self, turn_id: str, error: p.ErrorEvent | None, aborted: p.AbortReason | None
    ) -> None:
        if error is not None:
            why = f"{error.code}: {error.message}"
        elif aborted is not None:
            why = f"aborted ({aborted.value})"
        else:
            why = "the session shut down before it ran"
        super().__init__(f"turn {turn_id} failed: {why}")
        self.turn_id = turn_id
        """The turn's id."""
        self.error = error
        """The ``error`` event that ended it, if one did."""
        self.aborted = aborted
        """Why it was aborted, if it was."""


@attrs.define
class AnswerCollector:
    """Gathers one turn's answer from the events the session emits."""

    turn_id: str = ""
    started: bool = False
    items: list[p.TurnItem] = attrs.field(factory=list)
    usage: p.TokenUsage = attrs.field(factory=p.TokenUsage)
    error: p.ErrorEvent | None = None
    aborted: p.AbortReason | None = None
    message: str | None = None
    output: Any = None
    done: anyio.Event = attrs.field(factory=anyio.Event)

    def see(self, event: p.Event) -> None:
        """Take ``event`` into account if it is the turn's."""
        if event.id != self.turn_id or self.done.is_set():
            return
        match event.msg:
            case p.TurnStarted():
                self.started = True
            case p.ItemCompleted(item=item):
                self.items.append(item)
            case p.TokenCount(info=p.TokenUsageInfo(estimated=False) as info):
                self.usage = self.usage + info.last_token_usage
            case p.ErrorEvent() as error:
                self.error = self.error or error
            case p.TurnComplete(last_agent_message=message, output=output):
                self.message, self.output = message, output
                self.done.set()
            case p.TurnAborted(reason=reason):
                self.aborted = reason
                self.done.set()
            case _:
                pass

    def handled(self, queued: bool) -> None:
        """The session has handled the submission: an op that started nothing and waits for
        nothing was refused."""
        if not self.started and not queued:
            self.done.set()

    def answer(self) -> Answer:
        """The answer; raises :class:`TurnFailed` when there is none."""
        if self.error is not None or self.aborted is not None or not self.started:
            raise TurnFailed(self.turn_id, self.error, self.aborted)
        return Answer(self.turn_id, self.message, tuple(self.items), self.usage, self.output)


__all__ = ["Answer", "AnswerCollector", "TurnFailed"]
