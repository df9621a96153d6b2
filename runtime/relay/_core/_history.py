"""The history: recording, prompt normalisation and token accounting.

The pure functions here decide what a model sees; :class:`History` is the session's mutable
list of items with a per-item token estimate cache, so that accounting after each response costs
work proportional to what the response added (docs/session.md).

Invariant kept by :class:`History`: ``estimates[i]`` is None or the approximate token count of
``items[i]`` (an item is estimated when a count first needs it), and ``tokens_since_model`` is
the sum of estimates of the items recorded after the last model-generated item (or since the
last reset).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, Generic, TypeVar, overload

import attrs

from .._base import _protocol as p
from .._base._codec import encode_response_item
from .._base._tokens import item_tokens

#: Markers that make a user message contextual (harness-written, never a real user message).
CONTEXTUAL_MARKERS = (
    "<environment_context>",
    "<project_instructions",
    "<turn_aborted>",
    "<context_window>",
    "<work_state>",
    "<recent_reads>",
    "<subagent_notification>",
)

ABORTED_OUTPUT = "aborted"

T = TypeVar("T")


class Prefix(Sequence[T], Generic[T]):
    """A read-only view of the first entries of a list that is only ever appended to.

    What it shows never changes, so it stands for a copy of them without copying: a request
    holds the history this way, in time and memory independent of the history's length.
    """

    __slots__ = ("_base", "_length")

    def __init__(self, base: list[T], length: int | None = None) -> None:
        self._base = base
        self._length = len(base) if length is None else length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return self._base[: self._length][index]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("index out of range")
        return self._base[index]

    def __iter__(self) -> Iterator[T]:
        return islice(self._base, self._length)

    def __add__(self, other: Iterable[T]) -> list[T]:
        # As on the JSON ``input`` a view stands for: concatenation gives a list.
        return [*self, *other]

    def __radd__(self, other: Iterable[T]) -> list[T]:
        return [*other, *self]

    def after(self, earlier: Sequence[Any]) -> int | None:
        """How many leading entries ``earlier`` shares with this view, when that is known
        without comparing them (a view of the same list); else None."""
        if isinstance(earlier, Prefix) and earlier._base is self._base:
            return min(earlier._length, self._length)
        return None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Prefix) and other._base is self._base:
            return other._length == self._length
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(other) == self._length and all(
                a == b for a, b in zip(self, other, strict=True)
            )
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Prefix({list(self)!r})"


class HistoryView(Prefix[p.ResponseItem]):
    """The conversation history at one moment, as a session shows it
    (:attr:`relay.Session.history`): a sequence of its items, oldest first, with the usage
    figures the session compares with its limit. Nothing in it changes afterwards."""

    __slots__ = ("last_response_tokens", "tokens_since_model")

    def __init__(
        self, base: list[p.ResponseItem], *, last_response_tokens: int, tokens_since_model: int
    ) -> None:
        super().__init__(base)
        self.last_response_tokens = last_response_tokens
        """``total_tokens`` of the last completed response (0 after a compaction)."""
        self.tokens_since_model = tokens_since_model
        """Estimated tokens of the items recorded after the last model-generated item."""

    @property
    def items(self) -> Sequence[p.ResponseItem]:
        """The items, oldest first (the view itself)."""
        return self

    @property
    def usage_tokens(self) -> int:
        """Usage as compared with the auto-compaction limit (before calibration)."""
        return self.last_response_tokens + self.tokens_since_model

    def __repr__(self) -> str:
        return f"HistoryView({list(self)!r})"


def is_contextual(item: p.ResponseItem) -> bool:
    """Whether ``item`` is a user message written by the harness (context, abort marker)."""
    if not (isinstance(item, p.Message) and item.role == "user"):
        return False
    text = item.text().lstrip()
    return text.startswith(CONTEXTUAL_MARKERS)


def call_id_of(item: p.ResponseItem) -> str | None:
    """The call id of a tool call or tool output, else None."""
    if isinstance(
        item, p.FunctionCall | p.CustomToolCall | p.FunctionCallOutput | p.CustomToolCallOutput
    ):
        return item.call_id
    return None


def _output_for(call: p.ToolCall, output: str) -> p.ToolOutput:
    if isinstance(call, p.CustomToolCall):
        return p.CustomToolCallOutput(call.call_id, output)
    return p.FunctionCallOutput(call.call_id, output)


def missing_outputs(items: Sequence[p.ResponseItem]) -> list[p.ToolOutput]:
    """Synthetic ``"aborted"`` outputs for the calls in ``items`` that have none, in call order."""
    answered = {
        item.call_id
        for item in items
        if isinstance(item, p.FunctionCallOutput | p.CustomToolCallOutput)
    }
    return [
        _output_for(item, ABORTED_OUTPUT)
        for item in items
        if isinstance(item, p.FunctionCall | p.CustomToolCall) and item.call_id not in answered
    ]


def normalize_for_prompt(
    items: Iterable[p.ResponseItem], *, images: bool = True
) -> list[p.ResponseItem]:
    """The history as a model may see it (docs/session.md).

    Every call without an output gets an ``"aborted"`` output right after it; outputs without a
    call are dropped; ``ghost_snapshot`` and ``other`` items are dropped; images are dropped
    when the model takes none.
    """
    source = [item for item in items if not isinstance(item, p.GhostSnapshot | p.Other)]
    # A call is answered by the first output with its call id that comes after it; any other
    # output (before its call, or a second one) has no call to answer and is dropped.
    waiting: dict[str, int] = {}
    answered: set[int] = set()
    answers: set[int] = set()
    for index, item in enumerate(source):
        if isinstance(item, p.FunctionCall | p.CustomToolCall):
            waiting[item.call_id] = index
        elif isinstance(item, p.FunctionCallOutput | p.CustomToolCallOutput):
            call_index = waiting.pop(item.call_id, None)
            if call_index is not None:
                answered.add(call_index)
                answers.add(index)
    out: list[p.ResponseItem] = []
    for index, item in enumerate(source):
        if isinstance(item, p.FunctionCallOutput | p.CustomToolCallOutput):
            if index not in answers:
                continue
        elif (
            not images
            and isinstance(item, p.Message)
            and any(isinstance(c, p.InputImage) for c in item.content)
        ):
            kept = tuple(c for c in item.content if not isinstance(c, p.InputImage))
            if not kept:
                continue
            item = attrs.evolve(item, content=kept)
        out.append(item)
        if isinstance(item, p.FunctionCall | p.CustomToolCall) and index not in answered:
            out.append(_output_for(item, ABORTED_OUTPUT))
    return out


def last_agent_text(items: Iterable[p.ResponseItem]) -> str | None:
    """The text of the last assistant message in ``items``, or None."""
    last: str | None = None
    for item in items:
        if isinstance(item, p.Message) and item.role == "assistant":
            last = item.text()
    return last


class History:
    """The session's conversation history with cached token estimates and wire forms.

    It also knows, as it records, whether the history is *regular*: every call answered by a
    later output, no output without an earlier call, no harness-only item. A regular history
    is its own normalisation, so building a prompt needs no walk over it.
    """

    def __init__(self, items: Iterable[p.ResponseItem] = ()) -> None:
        self._items: list[p.ResponseItem] = []
        # None until asked for: a restored history is not estimated until something needs it.
        self._estimates: list[int | None] = []
        # The sum of the estimates of items [0, _estimated_upto): estimates never change once
        # made, so a growing history adds only its new items to the total.
        self._estimated_total = 0
        self._estimated_upto = 0
        # Wire forms of the first len(_wire) items; the rest are encoded when asked for.
        self._wire: list[dict[str, Any]] = []
        self._unanswered: set[str] = set()
        self._irregular = 0
        self.last_response_tokens = 0
        """``total_tokens`` of the last completed response (0 after a reset)."""
        self._since_model_start = 0
        # The estimate of items [_since_model_start, _counted_upto); the rest is added when
        # tokens_since_model is read, so each item is estimated at most once, and only if a
        # count needs it (a replayed rollout estimates only what follows its last model item).
        self._since_model_tokens = 0
        self._counted_upto = 0
        self.replace(items)

    @property
    def items(self) -> Sequence[p.ResponseItem]:
        """The items, oldest first (a read-only view: record through the methods)."""
        return self._items

    def __len__(self) -> int:
        return len(self._items)

    @property
    def tokens_since_model(self) -> int:
        """Estimated tokens of items recorded after the last model-generated item."""
        items, estimates = self._items, self._estimates
        for index in range(self._counted_upto, len(items)):
            estimate = estimates[index]
            if estimate is None:
                estimate = estimates[index] = item_tokens(items[index])
            self._since_model_tokens += estimate
        self._counted_upto = len(items)
        return self._since_model_tokens

    @tokens_since_model.setter
    def tokens_since_model(self, tokens: int) -> None:
        self._since_model_tokens = tokens
        self._counted_upto = len(self._items)

    def _reset_since_model(self, start: int) -> None:
        self._since_model_start = start
        self._since_model_tokens = 0
        self._counted_upto = start

    def record(self, item: p.ResponseItem, *, from_model: bool = False) -> None:
        """Append an item; ``from_model`` marks items the model generated."""
        self._items.append(item)
        self._estimates.append(None)
        self._track(item)
        if from_model:
            self._reset_since_model(len(self._items))

    def known_json(self, item: p.ResponseItem, data: dict[str, Any], text: str) -> None:
        """The JSON of the item just recorded and its text, made for the rollout: its wire
        form and estimate come from them instead of encoding it again.

        Only an item without ``metadata`` qualifies (its wire form leaves that out).
        """
        items = self._items
        if not items or items[-1] is not item or "metadata" in data:
            return
        index = len(items) - 1
        if self._estimates[index] is None:
            self._estimates[index] = item_tokens(item, text)
        if len(self._wire) == index:
            self._wire.append(data)

    def response_completed(self, total_tokens: int) -> None:
        """Note the ``total_tokens`` a completed response reported."""
        self.last_response_tokens = total_tokens
        self._reset_since_model(len(self._items))

    def items_since_model(self) -> Sequence[p.ResponseItem]:
        """The items recorded after the last model-generated item (or the last reset)."""
        return self._items[self._since_model_start :]

    def replace(self, items: Iterable[p.ResponseItem]) -> None:
        """Replace every item; usage becomes the estimate of the new items."""
        self._items = list(items)
        self._estimates = [None] * len(self._items)
        self._estimated_total = self._estimated_upto = 0
        self._wire = []
        self._unanswered = set()
        self._irregular = 0
        for item in self._items:
            self._track(item)
        self.last_response_tokens = 0
        self._reset_since_model(0)

    def restore(
        self,
        items: Iterable[p.ResponseItem],
        *,
        last_response_tokens: int,
        tokens_since_model: int,
        items_since_model: int,
    ) -> None:
        """Replace every item and set the usage counters as a rollout recorded them (resume).

        ``items_since_model`` is how many of the last items came after the last model item.
        The items' estimates are left to be computed when first needed.
        """
        self._items = list(items)
        self._estimates = [None] * len(self._items)
        self._estimated_total = self._estimated_upto = 0
        self._wire = []
        self._unanswered = set()
        self._irregular = 0
        for item in self._items:
            self._track(item)
        self.last_response_tokens = last_response_tokens
        self.tokens_since_model = tokens_since_model
        self._since_model_start = max(0, len(self._items) - items_since_model)

    def _track(self, item: p.ResponseItem) -> None:
        match item:
            case p.FunctionCall(call_id=call_id) | p.CustomToolCall(call_id=call_id):
                if call_id in self._unanswered:
                    self._irregular += 1  # a call id used twice
                self._unanswered.add(call_id)
            case p.FunctionCallOutput(call_id=call_id) | p.CustomToolCallOutput(call_id=call_id):
                if call_id in self._unanswered:
                    self._unanswered.discard(call_id)
                else:
                    self._irregular += 1
            case p.GhostSnapshot() | p.Other():
                self._irregular += 1
            case _:
                pass

    @property
    def regular(self) -> bool:
        """Whether :func:`normalize_for_prompt` would return the items unchanged (with images)."""
        return not self._unanswered and not self._irregular

    def wire_items(self) -> list[dict[str, Any]]:
        """The wire form of every item, encoded once per item (shared: do not mutate)."""
        wire = self._wire
        # Items are only appended (or all replaced), so the cache is a prefix to extend.
        wire.extend(encode_response_item(item) for item in self._items[len(wire) :])
        return wire

    def frozen(self) -> Prefix[p.ResponseItem]:
        """The items as they are now, in time independent of their number.

        The list of items is only appended to (:meth:`replace` and :meth:`restore` start a
        new one), so a view of its current length never changes.
        """
        return Prefix(self._items)

    def view(self) -> HistoryView:
        """The items and usage figures as they are now (see :meth:`frozen`)."""
        return HistoryView(
            self._items,
            last_response_tokens=self.last_response_tokens,
            tokens_since_model=self.tokens_since_model,
        )

    def frozen_wire(self) -> Prefix[dict[str, Any]]:
        """:meth:`wire_items` as they are now (see :meth:`frozen`)."""
        return Prefix(self.wire_items())

    @property
    def usage_tokens(self) -> int:
        """Usage compared with the auto-compaction limit (docs/session.md)."""
        return self.last_response_tokens + self.tokens_since_model

    def estimated_tokens(self) -> int:
        """The estimate of every item, from the cache; each item is added to it once."""
        items, estimates = self._items, self._estimates
        total = self._estimated_total
        for index in range(self._estimated_upto, len(items)):
            estimate = estimates[index]
            if estimate is None:
                estimate = estimates[index] = item_tokens(items[index])
            total += estimate
        self._estimated_total, self._estimated_upto = total, len(items)
        return total
