"""The response items that make up a history, their content, and token usage.

Frozen attrs classes, joined in ``TypeAlias`` unions; the protocol (:mod:`._protocol`) builds
its ops and events on them and re-exports them, and the codec in :mod:`._codec` is generated
from both. Nothing here knows about JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs


def as_tuple(value: Sequence[Any]) -> tuple[Any, ...]:
    if isinstance(value, str | bytes | Mapping):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return tuple(value)


def items_of(*types: type) -> Any:
    return attrs.validators.deep_iterable(attrs.validators.instance_of(types))


is_str = attrs.validators.instance_of(str)
optional_str = attrs.validators.optional(is_str)


# --------------------------------------------------------------------------- response items


@attrs.frozen
class InputText:
    """Text written by a user or the harness."""

    text: str = attrs.field(validator=is_str)
    """The text."""


@attrs.frozen
class OutputText:
    """Text written by the model."""

    text: str = attrs.field(validator=is_str)
    """The text."""


@attrs.frozen
class InputImage:
    """An image given to the model."""

    image_url: str = attrs.field(validator=is_str)
    """A URL or a ``data:`` URL."""


ContentPart: TypeAlias = InputText | OutputText | InputImage

Role: TypeAlias = Literal["user", "assistant", "developer", "system"]
ROLES: tuple[Role, ...] = ("user", "assistant", "developer", "system")


@attrs.frozen
class Message:
    """A message of the conversation."""

    role: Role = attrs.field(validator=attrs.validators.in_(ROLES))
    """Who wrote it."""
    content: tuple[ContentPart, ...] = attrs.field(
        converter=as_tuple, validator=items_of(InputText, OutputText, InputImage)
    )
    """The parts of the message, in order."""
    id: str | None = None
    """The id the model gave the item, if any."""
    metadata: Mapping[str, Any] | None = None
    """Harness-only data, never sent to a model; compaction carries it over for user messages."""

    def text(self) -> str:
        """The text parts joined, without images."""
        return "".join(
            part.text for part in self.content if isinstance(part, InputText | OutputText)
        )


@attrs.frozen
class SummaryText:
    """One part of a reasoning summary."""

    text: str
    """The text."""


@attrs.frozen
class ReasoningText:
    """Raw reasoning text, when a server returns it."""

    text: str
    """The text."""


@attrs.frozen
class Reasoning:
    """The model's reasoning: a summary and, opaquely, its encrypted content."""

    id: str
    """Item id."""
    summary: tuple[SummaryText, ...] = attrs.field(converter=as_tuple, factory=tuple)
    """Summary parts."""
    content: tuple[ReasoningText, ...] | None = attrs.field(
        default=None, converter=attrs.converters.optional(as_tuple)
    )
    """Raw reasoning parts, if returned."""
    encrypted_content: str | None = None
    """Opaque reasoning state to send back."""


@attrs.frozen
class FunctionCall:
    """A tool call requested by the model."""

    name: str = attrs.field(validator=is_str)
    """Tool name."""
    arguments: str = attrs.field(validator=is_str)
    """JSON-encoded arguments, as the model wrote them."""
    call_id: str = attrs.field(validator=is_str)
    """Id that pairs the call with its output."""
    id: str | None = None
    """Item id."""


@attrs.frozen
class FunctionCallOutput:
    """The result of a tool call."""

    call_id: str = attrs.field(validator=is_str)
    """Id of the call this answers."""
    output: str = attrs.field(validator=is_str)
    """What the tool returned."""


@attrs.frozen
class CustomToolCall:
    """A free-form tool call requested by the model."""

    call_id: str
    """Id that pairs the call with its output."""
    name: str
    """Tool name."""
    input: str
    """Raw input."""
    id: str | None = None
    """Item id."""


@attrs.frozen
class CustomToolCallOutput:
    """The result of a free-form tool call."""

    call_id: str
    """Id of the call this answers."""
    output: str
    """What the tool returned."""


@attrs.frozen
class Compaction:
    """A server-side compaction of the history (opaque to relay)."""

    encrypted_content: str
    """Opaque state that stands for the compacted history."""
    id: str | None = None
    """Item id."""


@attrs.frozen
class GhostSnapshot:
    """A harness-only record of the workspace state; never sent to a model."""

    ref: str
    """What the snapshot refers to (for example a commit id)."""


@attrs.frozen
class Other:
    """An item of a type relay does not know, kept opaque and never sent back."""

    raw: Mapping[str, Any]
    """The item as it arrived."""


ResponseItem: TypeAlias = (
    Message
    | Reasoning
    | FunctionCall
    | FunctionCallOutput
    | CustomToolCall
    | CustomToolCallOutput
    | Compaction
    | GhostSnapshot
    | Other
)

ToolCall: TypeAlias = FunctionCall | CustomToolCall
ToolOutput: TypeAlias = FunctionCallOutput | CustomToolCallOutput


def user_message(text: str, *, metadata: Mapping[str, Any] | None = None) -> Message:
    """A user message with one text part."""
    return Message("user", (InputText(text),), metadata=metadata)


def assistant_message(text: str, *, id: str | None = None) -> Message:
    """An assistant message with one text part."""
    return Message("assistant", (OutputText(text),), id=id)


# --------------------------------------------------------------------------- token usage


@attrs.frozen
class TokenUsage:
    """Token counts of one or more responses."""

    input_tokens: int = 0
    """Prompt tokens."""
    cached_input_tokens: int = 0
    """Prompt tokens served from the cache."""
    output_tokens: int = 0
    """Generated tokens."""
    reasoning_output_tokens: int = 0
    """Generated tokens spent on reasoning."""
    total_tokens: int = 0
    """Prompt plus generated tokens."""

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input_tokens + other.input_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_output_tokens + other.reasoning_output_tokens,
            self.total_tokens + other.total_tokens,
        )

    def __sub__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input_tokens - other.input_tokens,
            self.cached_input_tokens - other.cached_input_tokens,
            self.output_tokens - other.output_tokens,
            self.reasoning_output_tokens - other.reasoning_output_tokens,
            self.total_tokens - other.total_tokens,
        )


@attrs.frozen
class TokenUsageInfo:
    """What a ``token_count`` event reports."""

    total_token_usage: TokenUsage
    """Usage summed over the session's responses."""
    last_token_usage: TokenUsage
    """Usage of the last response; ``total_tokens`` is the current context size."""
    model_context_window: int | None
    """The model's context window, if known."""
    estimated: bool = False
    """``last_token_usage.total_tokens`` is relay's estimate of the context (after a
    compaction, scaled by the server's last count), not a server's count."""
