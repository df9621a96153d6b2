"""The frozen view a task, a compaction or a backend has of its session, and the requests
made from it.

A request is a pure function of a view (:func:`prompt_of`): what a task sends is decided by
what it sees, and the port only sends it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from .._base import _protocol as p
from .._base._config import Config, ProviderConfig
from .._base._model import Prompt, ToolSpec
from ._budget import TokenBudget, budget_at
from ._context import TurnSettings
from ._history import normalize_for_prompt
from ._work_state import WorkState


@attrs.frozen(slots=True)
class TaskView:
    """What a task sees of its session at one moment; nothing in it changes afterwards.

    ``history`` is a view of the history as it was when the view was taken: reading it copies
    nothing, and later records do not show in it.
    """

    turn_id: str
    """The id of the submission that started the task."""
    kind: str
    """The task's kind."""
    settings: TurnSettings
    """Model, cwd and effort of the turn."""
    config: Config
    """The session's configuration."""
    provider: ProviderConfig
    """The provider the session's model client talks to (its limits and capabilities)."""
    history: Sequence[p.ResponseItem]
    """The conversation history (for a background compaction: its snapshot)."""
    budget: TokenBudget
    """The token budget of the turn's model."""
    instructions: str
    """The base instructions of every request."""
    work_state: WorkState
    """The work-state record (read it; the session writes it)."""
    window_id: str
    """The id of the current compaction window."""
    last_turn_model: str | None
    """The model of the last regular turn that recorded its context, if any."""
    steered: int
    """Steered inputs waiting to be taken (:meth:`~relay.TaskContext.take_input`)."""
    session_id: str = ""
    """The session id (the requests' ``prompt_cache_key``)."""
    agent_path: str | None = None
    """A sub-agent's place in its tree (None: a root), which its requests name."""
    tools: tuple[ToolSpec, ...] = ()
    """The tools the model may call."""
    wire: Sequence[Mapping[str, Any]] | None = attrs.field(default=None, eq=False, repr=False)
    """``history`` in wire form, when it is its own normalisation (shared, read-only)."""

    def budget_for(self, model: str) -> TokenBudget:
        """The token budget of ``model`` over the same history (a model downshift compares
        the previous model's window with the turn's)."""
        if model == self.budget.model:
            return self.budget
        return budget_at(
            self.config, self.provider, model, usage=self.budget.usage, ratio=self.budget.ratio
        )

    def prompt(
        self,
        input: Iterable[p.ResponseItem] | None = None,
        *,
        tools: bool = True,
        model: str | None = None,
        instructions: str | None = None,
        output_schema: Mapping[str, Any] | None = None,
    ) -> Prompt:
        """A request of the turn over ``input`` (default: the history, normalised), with the
        base instructions (or ``instructions`` in their place), (``tools``) the session's
        tools, and the JSON Schema its answer must fit (``output_schema``; None asks for
        text)."""
        return prompt_of(
            self,
            input,
            tools=tools,
            model=model,
            instructions=instructions,
            purpose="turn",
            output_schema=output_schema,
        )


def prompt_of(
    view: TaskView,
    input: Iterable[p.ResponseItem] | None,
    *,
    tools: bool,
    model: str | None,
    instructions: str | None,
    purpose: str,
    provider: ProviderConfig | None = None,
    output_schema: Mapping[str, Any] | None = None,
) -> Prompt:
    """A request for ``view``'s turn over ``input`` (default: ``view.history``, normalised).

    A compaction's request (``purpose="compact"``) goes to ``config.compact_model`` when one
    is set, with ``provider``'s answer limit, and never asks for structured output: a summary
    is text, whatever the turn's answer must be.
    """
    wire: Sequence[Mapping[str, Any]] | None = None
    items: Sequence[p.ResponseItem]
    if input is None and view.wire is not None:
        # The history is its own normalisation: views of it, no copy, whatever its length.
        items, wire = view.history, view.wire
    else:
        items = tuple(normalize_for_prompt(view.history if input is None else input))
    compacting = purpose == "compact"
    config = view.config
    chosen = (config.compact_model if compacting else None) or model or view.settings.model
    return Prompt(
        model=chosen,
        instructions=view.instructions if instructions is None else instructions,
        input=items,
        wire_input=wire,
        tools=view.tools if tools else (),
        parallel_tool_calls=False,
        prompt_cache_key=view.session_id,
        agent_path=view.agent_path,
        effort=view.settings.effort,
        max_output_tokens=config.max_output_tokens(provider or view.provider),
        purpose="compact" if compacting else "turn",
        output_schema=None if compacting else output_schema,
    )


__all__ = ["TaskView", "prompt_of"]
