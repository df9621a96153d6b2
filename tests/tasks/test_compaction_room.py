"""The room a compaction leaves for the messages it keeps: what it places beside them (the
work-state record, the files read) is reserved at its size, so the new context stays under the
auto-compaction limit and no message is dropped for room that nothing takes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio.testing
from hypothesis import given
from hypothesis import strategies as st

import relay
from relay import testing
from relay._base._tokens import approx_tokens, item_tokens
from relay._core._budget import auto_compact_limit
from relay._core._sampling import reads_bound
from relay._core._work_state import RECORD_FRAME_BYTES, record_bound
from relay.tasks.compaction._history import recent_reads, render_work_state
from relay.testing import turn_ended

WINDOW, ANSWER = 2048, 100


def small_window(tmp_path: Path, *, work_state: bool, reads: int) -> relay.Config:
    return relay.Config(
        model_context_window=WINDOW,
        model_max_output_tokens=ANSWER,
        features=relay.Features(work_state=work_state),
        recent_reads_token_budget=reads,
        cwd=str(tmp_path),
        rollout=relay.RolloutConfig(enabled=False),
    )


def receipts(t: testing.TestSession) -> list[relay.CompactionReceipt]:
    return [
        e.msg.item.receipt
        for e in t.recorder.events
        if isinstance(e.msg, relay.ItemCompleted)
        and isinstance(e.msg.item, relay.ContextCompactionItem)
        and e.msg.item.receipt
    ]


def user_texts(body: dict[str, Any]) -> list[str]:
    return [
        item["content"][0]["text"]
        for item in body["input"]
        if item["type"] == "message" and item["role"] == "user"
    ]


async def test_the_files_placed_back_count_in_the_room_of_the_kept_messages(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    (tmp_path / "a.py").write_text("VALUE = 1\n" * 60)  # about 150 tokens
    read = {"function_call": {"name": "read_file", "arguments": {"path": "a.py"}}}
    script = {"responses": [read, "Read it.", "Noted.", "SUMMARY", "Done."]}
    config = small_window(tmp_path, work_state=False, reads=1000)
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("Read a.py.", "word " * 1400)  # the second message fills the window
        await t.submit(relay.Compact(), id="compact")
        await t.wait_for(turn_ended, 3)
        await t.turns("Go on.")
    [receipt] = receipts(t)
    limit = auto_compact_limit(None, WINDOW, reserved_output=ANSWER)
    assert receipt.tokens_after <= limit
    # The file is placed back and the long message is kept, cut to what room is left.
    after = user_texts(t.model.requests[-1])
    assert any(text.startswith("<recent_reads>") for text in after)
    assert any(text.startswith("word word") for text in after)


async def kept_after_compaction(config: relay.Config) -> str:
    """The long first message as the request after a compaction holds it."""
    script = {"responses": ["Noted.", "SUMMARY", "Done."]}
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("word " * 1400)
        await t.submit(relay.Compact(), id="compact")
        await t.wait_for(turn_ended, 2)
        await t.turns("Go on.")
    [receipt] = receipts(t)
    assert receipt.tokens_after <= auto_compact_limit(None, WINDOW, reserved_output=ANSWER)
    [kept] = [text for text in user_texts(t.model.requests[-1]) if text.startswith("word")]
    return kept


async def test_a_short_record_takes_only_its_own_room_from_the_kept_messages(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    without = await kept_after_compaction(small_window(tmp_path, work_state=False, reads=0))
    with_record = await kept_after_compaction(small_window(tmp_path, work_state=True, reads=0))
    # The record holds one short answer (about 80 tokens with its frame), not its whole budget
    # (a tenth of the window, 204 tokens): the message loses no more than the record takes.
    assert len(without) - len(with_record) < 4 * 100


# -------------------------------------------------------------- the bounds, without a session

texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=200)
kinds = st.sampled_from(["read", "list", "command", "error", "answer", "deploy_step"])


@given(st.lists(st.builds(relay.lowlevel.WorkEntry, kinds, texts), max_size=12))
def test_the_records_bound_holds_the_record_as_it_is_rendered(entries: list[Any]) -> None:
    rendered = render_work_state(entries, budget=10**9)
    counted = item_tokens(relay.user_message(rendered)) if rendered is not None else 0
    assert record_bound(entries) >= counted


def test_the_records_frame_is_counted_as_it_is_written() -> None:
    # The bound is only as tight as its frame: a frame that grows past it would overflow the
    # room kept for the record, one that shrinks leaves that room unused.
    frame = render_work_state([relay.lowlevel.WorkEntry("x", "")], budget=10**9)
    assert frame is not None
    # Less its one heading and its one empty entry, "X:\n- \n" with JSON's two-byte newlines.
    counted = item_tokens(relay.user_message(frame)) * 4
    assert counted - 3 <= RECORD_FRAME_BYTES + 8 <= counted


@given(st.lists(st.tuples(st.text(min_size=1, max_size=40), texts), max_size=6))
def test_the_reads_bound_holds_the_files_as_they_are_placed_back(
    reads: list[tuple[str, str]],
) -> None:
    history: list[relay.ResponseItem] = []
    for number, (path, output) in enumerate(reads):
        arguments = json.dumps({"path": path})
        history.append(relay.FunctionCall("read_file", arguments, f"call-{number}"))
        history.append(relay.FunctionCallOutput(f"call-{number}", output))
    placed = recent_reads(history, budget=10**9)
    expected = approx_tokens(placed.text()) if isinstance(placed, relay.Message) else 0
    assert reads_bound(history) >= expected


def test_the_reads_bound_holds_the_files_an_earlier_compaction_placed_back() -> None:
    call = relay.FunctionCall("read_file", json.dumps({"path": "a.py"}), "call-1")
    first = recent_reads([call, relay.FunctionCallOutput("call-1", "A = 1\n" * 300)], 10**9)
    assert first is not None
    # After that compaction the file is in its message alone; the next one places it back.
    again = recent_reads([first, relay.user_message("next")], budget=10**9)
    assert again is not None
    assert reads_bound([first, relay.user_message("next")]) >= approx_tokens(again.text())
