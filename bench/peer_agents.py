"""Peer: the same multi-turn scenario run by relay and by the OpenAI Agents SDK.

The scenario has two user turns and three model responses: a text answer; then a tool call,
the tool's run, and a follow-up answer. Both runtimes get the same behaviour from a model that
hands back responses built in advance and looks at nothing (relay: :class:`CannedModel`; the
SDK: :class:`CannedAgentsModel`, on its ``Model`` interface), so what is compared is the
runtimes. relay is also run on its own scripted model, and on asyncio as well as trio, since
the SDK runs on asyncio. The SDK's tracing is switched off (relay has none).

One sample is one scenario in a fresh conversation (the relay session is opened before the
clock starts and closed after it stops; the SDK's agent is built once).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import anyio

import relay
from relay.testing import ScriptedModel

from ._core import Better, Figure, Options, Target, ms
from ._drive import (
    TOOL_OUTPUT,
    CannedModel,
    TurnDriver,
    canned_scenario,
    lookup_tool,
    open_bench_session,
    scenario_script,
)

GROUP = "peer: OpenAI Agents SDK"
#: docs/benchmarks.md: turn throughput ≥ 2× the SDK's, i.e. scenario time ≤ 0.5× the SDK's.
PEER_TARGET = Target("≥ 2× throughput (time ≤ 0.5× peer)", 0.5, Better.LOWER)

FIRST = "Hello!"
SECOND = "Which build backend does the project use? Look it up."


async def _relay_scenario(model: relay.lowlevel.ModelClient) -> float:
    async with open_bench_session(model, tools=[lookup_tool()]) as session:
        driver = TurnDriver(session)
        start = time.perf_counter()
        await driver.turn(FIRST)
        await driver.turn(SECOND)
        elapsed = time.perf_counter() - start
        outputs = [i for i in session.history.items if isinstance(i, relay.FunctionCallOutput)]
        if [o.output for o in outputs] != [TOOL_OUTPUT]:
            raise AssertionError(f"the relay scenario ran its tool wrongly: {outputs!r}")
        return elapsed


async def _relay_samples(count: int, canned: bool) -> list[float]:
    out = []
    for _ in range(count):
        model = CannedModel(canned_scenario()) if canned else ScriptedModel(scenario_script())
        out.append(await _relay_scenario(model))
    return out


def _relay(count: int, *, canned: bool, backend: str) -> list[float]:
    async def main() -> list[float]:
        await _relay_samples(3, canned)  # warm-up
        return await _relay_samples(count, canned)

    return anyio.run(main, backend=backend)


def _agents_runner(count: int, *, streamed: bool) -> list[float]:
    import asyncio

    from agents import Agent, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)

    @function_tool
    def lookup(key: str) -> str:
        """Look a key up in the project's build configuration."""
        del key
        return TOOL_OUTPUT

    async def scenario() -> float:
        agent = Agent(
            name="bench",
            instructions="You are a coding agent.",
            tools=[lookup],
            model=CannedAgentsModel(),
        )
        start = time.perf_counter()
        if streamed:
            first = Runner.run_streamed(agent, FIRST)
            async for _ in first.stream_events():
                pass
            second = Runner.run_streamed(
                agent, [*first.to_input_list(), {"role": "user", "content": SECOND}]
            )
            async for _ in second.stream_events():
                pass
            answer = second.final_output
        else:
            result = await Runner.run(agent, FIRST)
            result = await Runner.run(
                agent, [*result.to_input_list(), {"role": "user", "content": SECOND}]
            )
            answer = result.final_output
        elapsed = time.perf_counter() - start
        if TOOL_OUTPUT not in str(answer):
            raise AssertionError(f"the SDK scenario ended with {answer!r}")
        return elapsed

    async def main() -> list[float]:
        for _ in range(3):
            await scenario()
        return [await scenario() for _ in range(count)]

    return asyncio.run(main())


def _canned_responses() -> list[Any]:
    from agents import ModelResponse, Usage
    from agents.testing import assistant_message, function_call

    return [
        ModelResponse(
            output=[assistant_message("Hello! What should I look at?", item_id="msg-0")],
            usage=Usage(requests=1, input_tokens=250, output_tokens=50, total_tokens=300),
            response_id="resp-0",
        ),
        ModelResponse(
            output=[function_call("lookup", {"key": "build-backend"}, call_id="call-1")],
            usage=Usage(requests=1, input_tokens=330, output_tokens=30, total_tokens=360),
            response_id="resp-1",
        ),
        ModelResponse(
            output=[assistant_message(f"The build uses {TOOL_OUTPUT}.", item_id="msg-2")],
            usage=Usage(requests=1, input_tokens=380, output_tokens=40, total_tokens=420),
            response_id="resp-2",
        ),
    ]


def _canned_streams(responses: list[Any]) -> list[list[Any]]:
    """The stream events of each canned response: text deltas, then ``response.completed``."""
    from openai.types.responses import (
        Response,
        ResponseCompletedEvent,
        ResponseCreatedEvent,
        ResponseOutputMessage,
        ResponseTextDeltaEvent,
        ResponseUsage,
    )
    from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

    streams = []
    for index, canned in enumerate(responses):
        usage = ResponseUsage(
            input_tokens=canned.usage.input_tokens,
            output_tokens=canned.usage.output_tokens,
            total_tokens=canned.usage.total_tokens,
            input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        )

        def response(output: list[Any], status: Any, usage: Any = None, index: int = index) -> Any:
            return Response(
                id=f"resp-{index}",
                created_at=0,
                model="canned",
                object="response",
                output=output,
                tool_choice="auto",
                tools=[],
                top_p=None,
                parallel_tool_calls=False,
                status=status,
                usage=usage,
            )

        events: list[Any] = [
            ResponseCreatedEvent(
                type="response.created",
                response=response([], "in_progress"),
                sequence_number=0,
            )
        ]
        for item in canned.output:
            if isinstance(item, ResponseOutputMessage):
                text = item.content[0].text  # type: ignore[union-attr]
                half = len(text) // 2
                for piece in (text[:half], text[half:]):
                    events.append(
                        ResponseTextDeltaEvent(
                            type="response.output_text.delta",
                            item_id=item.id,
                            output_index=0,
                            content_index=0,
                            delta=piece,
                            logprobs=[],
                            sequence_number=len(events),
                        )
                    )
        events.append(
            ResponseCompletedEvent(
                type="response.completed",
                response=response(list(canned.output), "completed", usage),
                sequence_number=len(events),
            )
        )
        streams.append(events)
    return streams


def _canned_model_class() -> type:
    from agents.models.interface import Model

    class _CannedAgentsModel(Model):
        """The SDK's ``Model`` interface answering with responses built in advance."""

        def __init__(self) -> None:
            self._responses = _canned_responses()
            self._streams = _canned_streams(self._responses)
            self._next = 0

        def _index(self) -> int:
            index = self._next % len(self._responses)
            self._next += 1
            return index

        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            return self._responses[self._index()]

        async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            for event in self._streams[self._index()]:
                yield event

    return _CannedAgentsModel


def CannedAgentsModel() -> Any:
    """A canned model for the SDK (its class is built when the SDK is importable)."""
    global _canned_class
    if _canned_class is None:
        _canned_class = _canned_model_class()
    return _canned_class()


_canned_class: type | None = None


def run(opts: Options) -> list[Figure]:
    """The scenario on relay (canned and scripted model; trio and asyncio) and on the SDK."""
    count = opts.count(max(5, opts.repeat * 5), 3)
    relay_canned_asyncio = ms(_relay(count, canned=True, backend="asyncio"))
    relay_canned_trio = ms(_relay(count, canned=True, backend="trio"))
    relay_scripted_asyncio = ms(_relay(count, canned=False, backend="asyncio"))
    relay_scripted_trio = ms(_relay(count, canned=False, backend="trio"))
    try:
        import agents

        version = getattr(agents, "__version__", "?")
        peer = ms(_agents_runner(count, streamed=False))
        peer_streamed = ms(_agents_runner(count, streamed=True))
    except ImportError as exc:
        opts.note(
            f"openai-agents is not installed ({exc}); the peer comparison was skipped "
            "(pip install -e '.[bench]')."
        )
        return [
            Figure(GROUP, "relay, canned model, asyncio: scenario", "ms", relay_canned_asyncio),
            Figure(GROUP, "relay, canned model, trio: scenario", "ms", relay_canned_trio),
        ]
    peer_fig = Figure(GROUP, f"openai-agents {version} Runner.run: scenario", "ms", peer)
    peer_streamed_fig = Figure(
        GROUP, f"openai-agents {version} Runner.run_streamed: scenario", "ms", peer_streamed
    )
    # The SDK's faster mode is the bar relay is held to.
    bar = min(peer_fig.median, peer_streamed_fig.median)
    bar_name = "openai-agents (faster mode)"
    return [
        peer_fig,
        peer_streamed_fig,
        Figure(
            GROUP,
            "relay, canned model, asyncio: scenario",
            "ms",
            relay_canned_asyncio,
            ref_name=bar_name,
            ref_value=bar,
            ratio_target=PEER_TARGET,
        ),
        Figure(
            GROUP,
            "relay, canned model, trio: scenario",
            "ms",
            relay_canned_trio,
            ref_name=bar_name,
            ref_value=bar,
            ratio_target=PEER_TARGET,
        ),
        Figure(
            GROUP,
            "relay, scripted model, asyncio: scenario",
            "ms",
            relay_scripted_asyncio,
            ref_name=bar_name,
            ref_value=bar,
        ),
        Figure(
            GROUP,
            "relay, scripted model, trio: scenario",
            "ms",
            relay_scripted_trio,
            ref_name=bar_name,
            ref_value=bar,
        ),
    ]
