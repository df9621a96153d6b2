"""The model client interface: what a turn asks of a model, and what it gets back.

A :class:`ModelClient` turns a :class:`Prompt` into a stream of :class:`ModelEvent` values and
raises :class:`~relay.ModelError` when the request fails. Retries are not the client's
business: the session's sampling owns them, so that the embedded scripted model and the HTTP
wires fail and recover in the same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol, TypeAlias

import attrs

from . import _protocol as p


@attrs.frozen
class ToolSpec:
    """A tool as the model sees it."""

    name: str
    """Tool name."""
    description: str
    """What it does, for the model."""
    parameters: Mapping[str, Any]
    """JSON schema of its arguments."""

    def to_wire(self) -> dict[str, Any]:
        """The Responses API form of the tool."""
        return {
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
            "strict": False,
        }


@attrs.frozen
class Prompt:
    """One model request."""

    model: str
    """Model name."""
    instructions: str
    """The request's ``instructions``."""
    input: Sequence[p.ResponseItem]
    """The normalised history (read-only: it may be a view of the session's own)."""
    tools: tuple[ToolSpec, ...] = ()
    """Tools the model may call."""
    parallel_tool_calls: bool = False
    """Whether the model may ask for several calls at once."""
    tool_choice: Literal["auto", "none"] = "auto"
    """``none``: the tools are sent (the request begins as a turn's does) but the model may
    call none of them."""
    prompt_cache_key: str = ""
    """Stable per session."""
    effort: str | None = None
    """Reasoning effort, if set."""
    trailing_input: tuple[Mapping[str, Any], ...] = ()
    """Raw wire items appended after ``input`` (e.g. ``compaction_trigger``)."""
    max_output_tokens: int | None = None
    """The longest answer to ask for, in tokens; None sends no limit."""
    purpose: Literal["turn", "compact"] = "turn"
    """Why the request is made; sent as a header so that test servers can tell."""
    agent_path: str | None = None
    """A sub-agent's place in its tree (None: a root); sent as a header, so that a test server
    can script each agent of a tree."""
    output_schema: Mapping[str, Any] | None = attrs.field(default=None, hash=False)
    """The JSON Schema the answer must fit (a turn's ``final_output_json_schema``), sent as
    the Responses API's ``text.format`` or Chat Completions' ``response_format``; None asks
    for text."""
    wire_input: Sequence[Mapping[str, Any]] | None = attrs.field(default=None, eq=False, repr=False)
    """``input`` already in wire form (shared, read-only), when the caller has it cached."""


#: The reason of an answer cut at the answer limit, on every wire and the scripted model.
CUT_AT_LIMIT = "max_output_tokens"


@attrs.frozen
class OutputTextDelta:
    """A piece of an assistant message."""

    item_id: str
    """The message's item id."""
    delta: str
    """The new text."""


@attrs.frozen
class SummaryTextDelta:
    """A piece of a reasoning summary."""

    item_id: str
    """The reasoning item's id."""
    delta: str
    """The new text."""
    summary_index: int = 0
    """Which part of the summary it extends."""


@attrs.frozen
class OutputItemDone:
    """A complete output item."""

    item: p.ResponseItem
    """The item."""


@attrs.frozen
class Completed:
    """The response completed."""

    response_id: str
    """The server's response id."""
    usage: p.TokenUsage | None
    """Token usage, when the server reported it."""
    incomplete: str | None = None
    """Why the answer was cut short (``max_output_tokens``), when the server said it was."""


ModelEvent: TypeAlias = OutputTextDelta | SummaryTextDelta | OutputItemDone | Completed


@attrs.frozen
class CompactRequest:
    """A remote compaction request (``POST /responses/compact``)."""

    model: str
    """Model name."""
    instructions: str
    """The session's base instructions."""
    input: Sequence[p.ResponseItem]
    """The history, fitted to the window."""
    tools: tuple[ToolSpec, ...] = ()
    """The session's tools."""
    parallel_tool_calls: bool = False
    """As for a normal request."""
    effort: str | None = None
    """Reasoning effort, if set."""

    @classmethod
    def of(cls, prompt: Prompt) -> CompactRequest:
        """The compaction request over a prompt's model, instructions, input and tools."""
        return cls(
            model=prompt.model,
            instructions=prompt.instructions,
            input=prompt.input,
            tools=prompt.tools,
            parallel_tool_calls=prompt.parallel_tool_calls,
            effort=prompt.effort,
        )


class ModelClient(Protocol):
    """A connection to a model, open for the life of a session."""

    def stream(self, prompt: Prompt) -> AbstractAsyncContextManager[AsyncIterator[ModelEvent]]:
        """Send ``prompt``; the context yields the response's events.

        Raises:
            ModelError: the request failed (before or during the stream). A stream that ends
                without :class:`Completed` raises :class:`~relay.StreamError`.
        """
        ...

    async def compact(self, request: CompactRequest) -> Any:
        """Send a remote compaction request and return the JSON body of the answer."""
        ...
