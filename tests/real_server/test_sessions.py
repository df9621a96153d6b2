"""Sessions against a real model server over both wires: what works today.

Nothing here depends on what the model says, only on the shape of what relay reports: the
answer streams and ends, the server's usage is read, the history reaches the server, a
compaction installs, an interrupt closes the connection, a resumed session carries on.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

import relay

from ._live import WIRES, agent_text, compaction_receipts, deltas, open_live_session
from .conftest import RealServer

pytestmark = pytest.mark.real_server

#: Prompts a small model answers in a sentence or two, ending on its own.
SHORT = ("What is the capital of France?", "What is 2 + 2?", "What is 3 + 5?")

#: A prompt that keeps a small model writing far past the first deltas.
LONG = "Count from 1 to 300, one number per line."


def completed_message(live_events: list[relay.TurnComplete]) -> str | None:
    (complete,) = live_events
    return complete.last_agent_message


@pytest.mark.parametrize("wire", WIRES)
async def test_an_answer_streams_and_the_servers_usage_is_read(
    real_server: RealServer, tmp_path: Path, wire: str
) -> None:
    start = real_server.log_size()
    async with open_live_session(real_server.config(wire, tmp_path)) as live:
        await live.turn(SHORT[0], id="t1")
    assert live.types("t1")[0] == "turn_started"
    assert live.types("t1")[-1] == "turn_complete"
    assert not live.msgs("t1", relay.ErrorEvent)
    assert not live.msgs("t1", relay.StreamErrorEvent)
    pieces = deltas(live, "t1")
    assert len(pieces) >= 2, "the answer arrived in one piece, not streamed"
    text = "".join(pieces)
    assert text and text == agent_text(live, "t1")
    assert completed_message(live.msgs("t1", relay.TurnComplete)) == text
    (usage,) = live.usage("t1")
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    if real_server.managed:
        # The usage is the server's own count, as its log shows it: the prompt tokens it read
        # plus those it found in its cache, and the tokens it generated.
        log = await real_server.settled_log(start)
        ((read, generated),) = TIMINGS.findall(log)
        assert usage.input_tokens == usage.cached_input_tokens + int(read)
        assert usage.output_tokens == int(generated)


TIMINGS = re.compile(
    r"prompt eval time = +[0-9.]+ ms / +(\d+) tokens.*\n"
    r".*\| +eval time = +[0-9.]+ ms / +(\d+) tokens"
)


@pytest.mark.parametrize("wire", WIRES)
async def test_each_turn_sends_the_whole_conversation(
    real_server: RealServer, tmp_path: Path, wire: str
) -> None:
    async with open_live_session(real_server.config(wire, tmp_path)) as live:
        for number, text in enumerate(SHORT, 1):
            await live.turn(text, id=f"t{number}")
    for number in (1, 2, 3):
        assert live.types(f"t{number}")[-1] == "turn_complete"
        assert agent_text(live, f"t{number}")
    usages = [live.usage(f"t{number}")[-1] for number in (1, 2, 3)]
    # The server counted every earlier question and answer in each later prompt.
    for earlier, later in itertools.pairwise(usages):
        assert later.input_tokens > earlier.input_tokens + earlier.output_tokens


def compacted_lines(path: Path) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line["payload"] for line in lines if line["type"] == "compacted"]


@pytest.mark.parametrize("wire", WIRES)
async def test_a_manual_local_compaction_installs_and_the_session_goes_on(
    real_server: RealServer, tmp_path: Path, wire: str
) -> None:
    async with open_live_session(real_server.config(wire, tmp_path)) as live:
        await live.turn(SHORT[0], id="t1")
        await live.compact(id="c1")
        await live.turn(SHORT[1], id="t2")
        path = live.rollout_path()
    assert not live.msgs("c1", relay.ErrorEvent)
    assert "context_compacted" in live.types("c1")
    (receipt,) = compaction_receipts(live, "c1")
    assert receipt.trigger is relay.CompactionTrigger.MANUAL
    assert receipt.backend == "local"
    (compacted,) = compacted_lines(path)
    history = compacted["replacement_history"]
    assert isinstance(history, list)
    texts = [part["text"] for item in history for part in item.get("content", [])]
    # The question survives, the answer is replaced by the summary, which comes last.
    assert SHORT[0] in texts
    assert not any(item.get("role") == "assistant" for item in history)
    assert history[-1]["role"] == "user" and texts[-1] != SHORT[0]
    assert live.types("t2")[-1] == "turn_complete"
    assert agent_text(live, "t2")


@pytest.mark.parametrize("wire", WIRES)
async def test_an_automatic_compaction_runs_before_a_turn_over_the_limit(
    real_server: RealServer, tmp_path: Path, wire: str
) -> None:
    # Any first exchange is over a limit of 50 tokens: the instructions alone are more.
    config = real_server.config(wire, tmp_path, model_auto_compact_token_limit=50)
    async with open_live_session(config) as live:
        await live.turn(SHORT[0], id="t1")
        await live.turn(SHORT[1], id="t2")
    assert not live.msgs("t1", relay.ContextCompacted)
    # The summary is asked of the real model before the turn. No history can get under a
    # limit the instructions alone exceed: neither the summary nor the fresh window the loop
    # guard tries next would make the context smaller, so neither is installed, each says so,
    # and the turn ends with compaction_loop, whatever the model wrote.
    assert not compaction_receipts(live, "t2")
    warnings = [w.message for w in live.msgs("t2", relay.WarningEvent)]
    assert len(warnings) == 2
    assert all(w.startswith("Nothing was changed") for w in warnings)
    errors = live.msgs("t2", relay.ErrorEvent)
    assert [e.code for e in errors] == [relay.ErrorCode.COMPACTION_LOOP]
    assert "summary compaction: not installed" in errors[0].message
    assert live.types("t2")[-1] == "turn_complete"


@pytest.mark.parametrize("wire", WIRES)
async def test_an_interrupt_closes_the_stream_and_the_server_stops(
    managed_server: RealServer, tmp_path: Path, wire: str
) -> None:
    start = managed_server.log_size()
    async with open_live_session(managed_server.config(wire, tmp_path)) as live:
        await live.session.submit(relay.UserTurn(items=[relay.Text(LONG)]), id="t1")
        await live.wait_for(relay.AgentMessageDelta, 3)
        await live.session.submit(relay.Interrupt(), id="i1")
        aborted = await live.wait_for(relay.TurnAborted)
        # The server has one slot: this turn is answered only once the first one is released.
        await live.turn(SHORT[0], id="t2")
    assert isinstance(aborted.msg, relay.TurnAborted)
    assert aborted.msg.reason is relay.AbortReason.INTERRUPTED
    assert live.types("t2")[-1] == "turn_complete"
    log = await managed_server.settled_log(start)
    # The server saw the closed connection and cancelled the task that was generating...
    (cancelled,) = CANCELLED.findall(log)
    # ... which ended without finishing (a finished task prints its timings), long before its
    # answer limit: the tokens it held, prompt included, are fewer than the next turn's prompt
    # (which holds that prompt and the part of the answer relay got) and half the limit.
    assert f"task {cancelled} | prompt eval time" not in log
    released = dict(RELEASED.findall(log))
    next_prompt = live.usage("t2")[-1].input_tokens
    assert int(released[cancelled]) < next_prompt + (managed_server.answer_limit or 0) // 2


CANCELLED = re.compile(r"cancel task, id_task = (\d+)")
RELEASED = re.compile(r"task (\d+) \| stop processing: n_tokens = (\d+)")


@pytest.mark.parametrize("wire", WIRES)
async def test_a_resumed_session_continues_the_conversation(
    real_server: RealServer, tmp_path: Path, wire: str
) -> None:
    config = real_server.config(wire, tmp_path)
    async with open_live_session(config) as first:
        await first.turn(SHORT[0], id="t1")
        path = first.rollout_path()
    async with open_live_session(config, resume=path) as resumed:
        await resumed.turn(SHORT[1], id="t2")
    (before,) = first.usage("t1")
    (after,) = resumed.usage("t2")
    assert resumed.types("t2")[-1] == "turn_complete"
    assert after.input_tokens > before.input_tokens + before.output_tokens
    assert resumed.session.id == first.session.id
