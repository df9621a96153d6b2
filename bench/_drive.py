"""Models and drivers the benchmarks share: canned replies, a zero-cost model, a turn driver.

Two in-process models stand behind the measured sessions:

- relay's own :class:`relay.testing.ScriptedModel`, fed a model script whose replies are all
  written out (with ``total_tokens``), so that it does no work proportional to the history
  beyond encoding the request body, as any wire must;
- :class:`CannedModel`, which hands back model events built in advance and looks at nothing:
  the cheapest model a session can have, the same behaviour the OpenAI Agents SDK is given in
  :mod:`bench.peer_agents`.
"""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import relay
from relay.lowlevel import (
    Completed,
    OutputItemDone,
    OutputTextDelta,
)
from relay.testing import fixed_clock

#: The user's requests of the turn benchmarks (cycled).
QUESTIONS = (
    "Which build backend does this project use?",
    "List the files under runtime/ that deal with compaction.",
    "Summarise what the last test run printed.",
)

#: The text every scripted answer starts with.
ANSWER = "The project builds with hatchling; the wheel ships runtime, tasks and the templates."

#: The tool of the multi-turn scenario.
TOOL_NAME = "lookup"
TOOL_OUTPUT = "hatchling>=1.25 (build-system.requires)"


def config(**rollout: Any) -> relay.Config:
    """A session configuration: the scripted provider, no rollout unless asked."""
    enabled = bool(rollout.pop("enabled", False))
    return relay.Config(rollout=relay.RolloutConfig(enabled=enabled, **rollout))


def text_reply(index: int, *, tokens: int = 0) -> dict[str, Any]:
    """A model-script reply: one assistant message, with its usage."""
    return {"text": f"{ANSWER} ({index})", "total_tokens": tokens or 400 + 60 * index}


def turn_script(turns: int) -> dict[str, Any]:
    """A model script with one written-out reply per turn."""
    return {"responses": [text_reply(i) for i in range(turns)]}


def scenario_script() -> dict[str, Any]:
    """The multi-turn scenario: a text turn, then a tool call and its follow-up."""
    return {
        "responses": [
            {"text": "Hello! What should I look at?", "total_tokens": 300},
            {
                "function_call": {
                    "name": TOOL_NAME,
                    "arguments": {"key": "build-backend"},
                    "call_id": "call-1",
                },
                "total_tokens": 360,
            },
            {"text": f"The build uses {TOOL_OUTPUT}.", "total_tokens": 420},
        ]
    }


async def _lookup(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
    del args, ctx
    return TOOL_OUTPUT


def lookup_tool() -> relay.Tool:
    """The scenario's tool: answers a constant."""
    return relay.Tool(
        TOOL_NAME,
        "Look a key up in the project's build configuration.",
        {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
        _lookup,
    )


def canned_text(index: int, text: str, tokens: int) -> list[relay.lowlevel.ModelEvent]:
    """The model events of a text answer: two deltas, the item, completion."""
    item_id = f"msg-{index}"
    half = len(text) // 2
    return [
        OutputTextDelta(item_id, text[:half]),
        OutputTextDelta(item_id, text[half:]),
        OutputItemDone(relay.assistant_message(text, id=item_id)),
        Completed(f"resp-{index}", relay.TokenUsage(total_tokens=tokens)),
    ]


def canned_call(
    index: int, name: str, arguments: str, call_id: str
) -> list[relay.lowlevel.ModelEvent]:
    """The model events of a tool call."""
    return [
        OutputItemDone(relay.FunctionCall(name, arguments, call_id)),
        Completed(f"resp-{index}", relay.TokenUsage(total_tokens=360)),
    ]


def canned_scenario() -> list[list[relay.lowlevel.ModelEvent]]:
    """:func:`scenario_script` as canned model events."""
    return [
        canned_text(0, "Hello! What should I look at?", 300),
        canned_call(1, TOOL_NAME, '{"key": "build-backend"}', "call-1"),
        canned_text(2, f"The build uses {TOOL_OUTPUT}.", 420),
    ]


class CannedModel:
    """A :class:`relay.lowlevel.ModelClient` replaying prepared events, cycling through them."""

    def __init__(self, replies: Sequence[Sequence[relay.lowlevel.ModelEvent]]) -> None:
        self._replies = [list(reply) for reply in replies]
        self._next = 0

    @asynccontextmanager
    async def stream(self, prompt: relay.lowlevel.Prompt) -> AsyncIterator[AsyncIterator[Any]]:
        del prompt
        reply = self._replies[self._next % len(self._replies)]
        self._next += 1
        yield _replay(reply)

    async def compact(self, request: relay.lowlevel.CompactRequest) -> Any:
        raise NotImplementedError("the canned model has no remote compaction")


async def _replay(
    events: Iterable[relay.lowlevel.ModelEvent],
) -> AsyncIterator[relay.lowlevel.ModelEvent]:
    for event in events:
        yield event


def open_bench_session(
    model: relay.lowlevel.ModelClient,
    *,
    tools: Iterable[relay.Tool] = (),
    cfg: relay.Config | None = None,
    tasks: Mapping[str, Any] | None = None,
    compactor: Any = None,
) -> Any:
    """A session on ``model`` with a fixed clock and a seeded jitter."""
    return relay.open_session(
        cfg or config(),
        model=model,
        tools=tools,
        clock=fixed_clock,
        rng=random.Random(0),
        tasks=tasks,
        compactor=compactor,
    )


class TurnDriver:
    """Submits ops to one session and times them against the events they cause.

    It is the session's only event reader; events of other turns are read and dropped.
    """

    def __init__(self, session: relay.Session) -> None:
        self.session = session
        self._events = session.events()

    async def next_event(self) -> relay.Event:
        """The next event of the session."""
        return await anext(self._events)

    async def wait_for(self, cls: type[Any], turn_id: str | None = None) -> relay.Event:
        """Read events until one of ``cls`` (of ``turn_id``, if given) arrives."""
        while True:
            event = await anext(self._events)
            if isinstance(event.msg, cls) and (turn_id is None or event.id == turn_id):
                return event

    async def turn(self, text: str) -> float:
        """Submit a user turn; seconds until its ``turn_complete``."""
        start = time.perf_counter()
        turn_id = await self.session.submit(relay.UserTurn(items=[relay.Text(text)]))
        await self.wait_for(relay.TurnComplete, turn_id)
        return time.perf_counter() - start

    async def compact(self) -> float:
        """Submit a ``compact``; seconds until its ``turn_complete``."""
        start = time.perf_counter()
        turn_id = await self.session.submit(relay.Compact())
        await self.wait_for(relay.TurnComplete, turn_id)
        return time.perf_counter() - start
