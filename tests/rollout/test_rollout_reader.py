"""Reading rollouts: typed lines, a truncated last line, malformed lines, ``relay show``."""

from __future__ import annotations

import gc
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import relay
from relay import testing
from relay._base import _protocol as p
from relay._base._rollout_lines import Compacted, SessionMeta, TurnContext, WorldState
from relay._cli._transcript import render_transcript
from relay._rollout._lines import (
    CompactedLine,
    EventMsgLine,
    ResponseItemLine,
    RolloutNote,
    SessionMetaLine,
    TurnContextLine,
    WorldStateLine,
)
from relay._rollout._reader import _parse, parse_rollout, read_rollout
from relay._rollout._resume import reconstruct

TS = "2026-01-02T03:04:05.000Z"
WORLD = {"cwd": "/w", "shell": "bash", "current_date": "2026-01-02", "timezone": "UTC"}
META = {
    "id": "s-1",
    "created": "2026-01-02T03:04:05+00:00",
    "cwd": "/w",
    "model": "scripted",
    "model_provider": "scripted",
    "relay_version": "0.1.0",
}


# ----------------------------------------------------------------------------- line builders


def raw(kind: str, payload: Any) -> str:
    return json.dumps({"timestamp": TS, "type": kind, "payload": payload}, ensure_ascii=False)


def meta(session_id: str = "s-1") -> str:
    return raw("session_meta", {**META, "id": session_id})


def item(value: p.ResponseItem) -> str:
    return raw("response_item", relay.lowlevel.to_json(value))


def event(msg: p.EventMsg) -> str:
    return raw("event_msg", relay.lowlevel.to_json(msg))


def turn_context(
    world: dict[str, str] | None = None, *, model: str = "scripted", cwd: str = "/w"
) -> str:
    payload = {"model": model, "cwd": cwd, "effort": None, "instructions_hash": "0123456789abcdef"}
    return raw("turn_context", {**payload, "world": world or WORLD})


def world_state(world: dict[str, str] | None = None) -> str:
    return raw("world_state", world or WORLD)


def compacted(
    history: list[p.ResponseItem] | None,
    message: str = "",
    *,
    window_number: int | None = None,
    receipt: p.CompactionReceipt | None = None,
    work_state: dict[str, Any] | None = None,
    masked_outputs: dict[str, str] | None = None,
) -> str:
    payload: dict[str, Any] = {"message": message}
    if history is not None:
        payload["replacement_history"] = [relay.lowlevel.to_json(i) for i in history]
    if window_number is not None:
        payload |= {
            "window_number": window_number,
            "first_window_id": "w0",
            "previous_window_id": f"w{window_number - 1}",
            "window_id": f"w{window_number}",
        }
    if receipt is not None:
        payload["receipt"] = relay.lowlevel.to_json(receipt)
    if work_state is not None:
        payload["work_state"] = work_state
    if masked_outputs is not None:
        payload["masked_outputs"] = masked_outputs
    return raw("compacted", payload)


def text_of(*lines: str) -> str:
    return "".join(line + "\n" for line in lines)


def token_count(last: int, total: int | None = None, window: int | None = None) -> str:
    usage = p.TokenUsage(total_tokens=last)
    overall = p.TokenUsage(total_tokens=total if total is not None else last)
    return event(p.TokenCount(p.TokenUsageInfo(overall, usage, window)))


RECEIPT = p.CompactionReceipt(p.CompactionTrigger.MANUAL, "local", 900, 120, 15)


# ----------------------------------------------------------------------------- parsing


def test_every_line_type_is_parsed_into_its_class() -> None:
    user = p.user_message("héllo ✓")
    text = text_of(
        meta(),
        event(p.TurnStarted("t1", None, 1.5)),
        item(user),
        world_state(),
        turn_context(),
        compacted([user], "the summary", window_number=1, receipt=RECEIPT),
    )
    rollout = parse_rollout(text)
    world = WorldState("/w", "bash", "2026-01-02", "UTC")
    assert rollout.notes == ()
    assert rollout.meta == SessionMeta(
        "s-1", "2026-01-02T03:04:05+00:00", "/w", "scripted", "scripted", "0.1.0"
    )
    assert rollout.lines == (
        SessionMetaLine(1, TS, rollout.meta),
        EventMsgLine(2, TS, p.TurnStarted("t1", None, 1.5)),
        ResponseItemLine(3, TS, user),
        WorldStateLine(4, TS, world),
        TurnContextLine(5, TS, TurnContext("scripted", "/w", None, "0123456789abcdef", world)),
        CompactedLine(6, TS, Compacted("the summary", (user,), 1, "w0", "w0", "w1", RECEIPT)),
    )


async def test_a_live_rollout_reads_back_as_the_session_recorded_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = relay.Config(rollout=relay.RolloutConfig(dir=str(tmp_path)))
    script = {
        "responses": [
            {"function_call": {"name": "list_dir", "arguments": {}, "call_id": "c1"}},
            {"text": "listed"},
        ]
    }
    async with testing.open_test_session(script, config=config) as t:
        await t.turn("list it")
        await t.wait_for(relay.TurnComplete)
        await t.submit(relay.Compact())
        await t.wait_for(relay.TurnComplete, 2)
        path = t.session.rollout.path  # type: ignore[union-attr]
        before_compaction = None
        for msg in t.recorder.msgs:
            if isinstance(msg, relay.ItemCompleted) and isinstance(
                msg.item, relay.ContextCompactionItem
            ):
                before_compaction = msg.item.receipt
        history = list(t.session.history.items)
    rollout = read_rollout(path)
    assert rollout.notes == ()
    assert rollout.path == path
    assert rollout.meta is not None and rollout.meta.id == t.session.id
    assert [line.number for line in rollout.lines] == list(range(1, len(rollout.lines) + 1))
    (last_compaction,) = [
        line.compacted for line in rollout.lines if isinstance(line, CompactedLine)
    ]
    assert last_compaction.replacement_history == tuple(history)
    assert last_compaction.receipt == before_compaction
    assert last_compaction.window_number == 1
    events = [line.msg for line in rollout.lines if isinstance(line, EventMsgLine)]
    assert events[-1] == relay.ShutdownComplete()


def test_a_cut_at_any_byte_reads_as_a_prefix_with_at_most_a_truncation_note() -> None:
    # A crash can stop the file anywhere: every prefix must read as a prefix of the lines.
    full = text_of(
        meta(),
        item(p.user_message("naïve café ✓ — 日本語")),
        item(p.assistant_message("ok")),
        token_count(40),
    ).encode("utf-8")
    complete = parse_rollout(full).lines
    line_ends = [i + 1 for i, byte in enumerate(full) if byte == ord("\n")]
    for cut in range(len(full) + 1):
        rollout = parse_rollout(full[:cut])
        whole_lines = sum(1 for end in line_ends if end <= cut)
        partial = cut not in line_ends and cut != 0
        assert rollout.lines[:whole_lines] == complete[:whole_lines], cut
        # The last, unterminated line is used only if it happens to be complete JSON.
        assert len(rollout.lines) - whole_lines in ((0, 1) if partial else (0,)), cut
        if len(rollout.lines) == whole_lines and partial:
            assert (
                RolloutNote(
                    whole_lines + 1,
                    "incomplete last line (the session stopped while writing it); ignored",
                    truncated=True,
                )
                in rollout.notes
            )
        assert all(note.truncated for note in rollout.notes if note.line > 1), cut


def test_malformed_lines_are_skipped_with_notes_naming_them() -> None:
    user = p.user_message("kept")
    data = (
        text_of(
            meta(),
            "this is not json",
            "[1, 2, 3]",
            json.dumps({"timestamp": TS, "type": "response_item"}),
            raw("teleport", {}),
            raw("response_item", {"type": "message", "content": []}),
            raw("event_msg", {"type": "levitated"}),
            raw("turn_context", {"cwd": "/w"}),
            json.dumps({"type": "response_item", "payload": relay.lowlevel.to_json(user)}),
            meta("s-2"),
            "",
            raw("compacted", {"replacement_history": []}),
            raw("world_state", {"cwd": "/w"}),
        ).encode()
        + b'{"timestamp": "\xff\xfe"}\n'
    )
    rollout = parse_rollout(data)
    assert [str(note) for note in rollout.notes] == [
        "line 2: not valid JSON (Expecting value at column 1); ignored",
        "line 3: expected a JSON object, got list; ignored",
        "line 4: missing field 'payload'; ignored",
        "line 5: unknown line type 'teleport'; ignored",
        "line 6: invalid response_item: invalid 'message': required field missing @ $.role; "
        "ignored",
        "line 7: invalid event_msg: unknown type 'levitated' (expected one of: agent_message, "
        "agent_message_delta, apply_patch_approval_request, background_event, "
        "context_compacted, error, exec_approval_request, exec_command_output_delta, "
        "hook_completed, hook_started, item_completed, item_started, patch_apply_begin, "
        "patch_apply_end, plan_update, reasoning_summary_delta, session_configured, "
        "session_resumed, shutdown_complete, stream_error, sub_agent_ended, "
        "sub_agent_spawned, token_count, turn_aborted, turn_complete, turn_diff, turn_started, "
        "user_message, warning, work_state_noted); "
        "ignored",
        "line 8: invalid turn_context: required field 'model' missing; ignored",
        "line 9: no timestamp",
        "line 10: session_meta after the start of the rollout; ignored",
        "line 12: invalid compacted: required field 'message' missing; ignored",
        "line 13: invalid world_state: required field missing @ $.shell; required field missing "
        "@ $.current_date; required field missing @ $.timezone; ignored",
        "line 14: not UTF-8 text; ignored",
    ]
    assert not any(note.truncated for note in rollout.notes)
    assert rollout.meta is not None and rollout.meta.id == "s-1"
    assert [line.number for line in rollout.lines] == [1, 9]
    assert rollout.lines[1] == ResponseItemLine(9, None, user)


def test_a_rollout_without_session_meta_parses_with_a_note() -> None:
    rollout = parse_rollout(text_of(item(p.user_message("orphan")), turn_context()))
    assert rollout.meta is None
    assert [str(n) for n in rollout.notes] == [
        "line 1: the rollout does not start with a session_meta line, so the session it "
        "belongs to is unknown"
    ]
    assert len(rollout.lines) == 2
    empty = parse_rollout(b"")
    assert empty.meta is None and empty.lines == ()
    assert [str(n) for n in empty.notes] == ["line 1: no session_meta line: the rollout is empty"]


def test_compacted_lines_old_style_and_with_bad_parts() -> None:
    data = text_of(
        meta(),
        compacted(None, "old summary"),
        raw("compacted", {"message": "m", "replacement_history": [{"type": "message"}]}),
        raw("compacted", {"message": "m", "replacement_history": "nope", "window_number": "x"}),
        raw("compacted", {"message": "m", "replacement_history": [], "receipt": {"trigger": 1}}),
    )
    rollout = parse_rollout(data)
    lines = [line for line in rollout.lines if isinstance(line, CompactedLine)]
    assert [(line.number, line.compacted.replacement_history) for line in lines] == [
        (2, None),
        (3, None),
        (4, None),
        (5, ()),
    ]
    assert lines[0].compacted == Compacted("old summary")
    rebuilt = "the history is rebuilt from the user messages and the summary instead"
    assert [str(note) for note in rollout.notes] == [
        "line 3: compacted: invalid replacement_history[0]: invalid 'message': required field "
        f"missing @ $.role; required field missing @ $.content; {rebuilt}",
        f"line 4: compacted: replacement_history is not a list; {rebuilt}",
        "line 4: invalid compacted: 'window_number' should be int, got str; ignored",
        "line 5: compacted: invalid receipt: expected one of: manual, pre_turn, mid_turn, "
        "model_downshift, post_turn, model_requested; got 1 @ $.trigger; required field "
        "missing @ $.backend; required field "
        "missing @ $.tokens_before; required field missing @ $.tokens_after; required field "
        "missing @ $.duration_ms; receipt ignored",
    ]


def test_a_line_cut_by_a_crash_before_a_resume_is_named_as_such() -> None:
    # After a resume the cut line is no longer the last one: the writer started a new line.
    cut = item(p.user_message("a long message"))[:30]
    rollout = parse_rollout(text_of(meta(), cut, event(p.TurnStarted("t1", None, 0.0))))
    assert [str(n) for n in rollout.notes] == [
        "line 2: incomplete line (cut short by a crash before the session was resumed); ignored"
    ]
    assert [line.number for line in rollout.lines] == [1, 3]


def test_a_complete_last_line_without_its_newline_is_kept() -> None:
    rollout = parse_rollout(text_of(meta()) + item(p.user_message("x")))
    assert rollout.notes == () and len(rollout.lines) == 2


def test_reading_for_a_resume_decodes_only_what_resuming_needs() -> None:
    user = p.user_message("u")
    data = text_of(
        meta(),
        item(p.user_message("before")),
        "garbage",
        turn_context(model="old"),
        token_count(10),
        compacted([user], window_number=1),
        turn_context(model="newer"),
        raw("response_item", {"type": "message"}),
        token_count(20),
        event(p.TurnStarted("sub-9", None, 0.0)),
        compacted([user, user], window_number=2),
        item(p.assistant_message("after")),
        raw("response_item", {"type": "message"}),
        world_state(),
        event(p.TurnStarted("sub-3", None, 0.0)),
        token_count(30),
        event(p.ErrorEvent("e", relay.ErrorCode.STREAM)),
        event(p.TurnComplete("t2", None, 1)),
    )
    rollout = parse_rollout(data, for_resume=True)
    # The turn_started with the highest generated id is read wherever it is: resumed ids go on
    # after it.
    assert [line.number for line in rollout.lines] == [1, 6, 7, 9, 10, 11, 12, 16, 17]
    # JSON problems are reported everywhere, payload problems only where lines are decoded.
    assert [note.line for note in rollout.notes] == [3, 13]
    assert [line.number for line in parse_rollout(data).lines] == [
        *(1, 2, 4, 5, 6, 7, 9, 10, 11, 12),
        *range(14, 19),
    ]
    # A file without any replacement history is read whole.
    whole = text_of(meta(), item(user), turn_context(), item(user))
    assert parse_rollout(whole, for_resume=True) == parse_rollout(whole)


def _long_rollout(turns: int) -> str:
    lines = [meta()]
    for index in range(turns):
        lines += [
            event(p.TurnStarted(f"t{index}", None, 0.0)),
            turn_context(),
            item(p.user_message(f"question {index}")),
            item(p.FunctionCall("lookup", '{"key": "k"}', f"c{index}")),
            item(p.FunctionCallOutput(f"c{index}", "value")),
            item(p.assistant_message(f"answer {index}")),
            token_count(100 + index),
            event(p.TurnComplete(f"t{index}", None, 1)),
        ]
    return text_of(*lines)


# Slow tier: its full collections walk the heap of the whole run, not this test's.
@pytest.mark.slow
def test_parsing_runs_no_cyclic_collection() -> None:
    # Collections during a parse walk the heap (the older ones all of it) and free nothing: a
    # long rollout read in a large process cost several times what it cost in a fresh one.
    # What the parse allocated is seen by at most one collection, once it is over.
    data = _long_rollout(2_000).encode()
    collections: list[bool] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(for_resume)

    for for_resume in (True, False):
        gc.collect()
        gc.callbacks.append(count)
        try:
            rollout = parse_rollout(data, for_resume=for_resume)
        finally:
            gc.callbacks.remove(count)
        assert len(rollout.lines) > 8_000
    assert collections in ([], [True, False], [True], [False])
    assert gc.isenabled()


# Slow tier: the scan of every live object grows with the heap of the whole run, not this test.
@pytest.mark.slow
def test_reading_for_a_resume_holds_only_the_records_it_still_needs() -> None:
    # Memory follows what a resume keeps, not the file: once the last line is read, no
    # record of an event line is alive (only the count decoded at the end is kept).
    alive: list[int] = []

    def lines() -> Iterator[bytes]:
        yield from io.BytesIO(_long_rollout(500).encode())
        gc.collect()
        alive.append(sum(_is_event_record(obj) for obj in gc.get_objects()))

    rollout = _parse(lines(), None, for_resume=True)
    # The last record read, the last two token counts and the last turn_started.
    assert alive[0] <= 4
    # Every item, the last turn_started, turn_context and token_count; no other event.
    assert sum(isinstance(line, ResponseItemLine) for line in rollout.lines) == 2_000
    kinds = [
        (type(line), type(line.msg).__name__ if isinstance(line, EventMsgLine) else "")
        for line in rollout.lines
        if not isinstance(line, ResponseItemLine)
    ]
    assert kinds == [
        (SessionMetaLine, ""),
        (EventMsgLine, "TurnStarted"),
        (TurnContextLine, ""),
        (EventMsgLine, "TokenCount"),
    ]


def _is_event_record(obj: object) -> bool:
    return isinstance(obj, dict) and obj.get("type") == "event_msg" and "payload" in obj


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["message", "function_call", "function_call_output", "other"])},
        optional={
            "role": st.sampled_from(["user", "assistant", "developer", "system", "tool", 3]),
            "content": st.lists(
                st.fixed_dictionaries(
                    {
                        "type": st.sampled_from(["input_text", "output_text", "input_image"]),
                        "text": st.one_of(st.text(max_size=5), st.integers(), st.just("\ud800")),
                    },
                    optional={"image_url": st.just("data:"), "extra": st.none()},
                ),
                max_size=3,
            ),
            "id": st.one_of(st.none(), st.text(max_size=3), st.integers()),
            "name": st.one_of(st.text(max_size=3), st.none()),
            "arguments": st.one_of(st.text(max_size=3), st.just("\udfff"), st.booleans()),
            "call_id": st.one_of(st.text(max_size=3), st.integers()),
            "output": st.one_of(st.text(max_size=3), st.none()),
            "metadata": st.one_of(st.none(), st.just({"k": 1})),
            "status": st.just("completed"),
        },
    )
)
def test_an_item_line_decodes_as_the_codec_decodes_its_payload(payload: dict[str, Any]) -> None:
    try:
        expected: Any = relay.lowlevel.from_json(payload, p.ResponseItem)
    except relay.DecodeError:
        expected = None
    # Escaped, as JSON may carry a lone surrogate that no UTF-8 file can hold raw.
    line = json.dumps({"timestamp": TS, "type": "response_item", "payload": payload})
    rollout = parse_rollout(text_of(meta(), line))
    if expected is None:
        assert len(rollout.lines) == 1 and [n.line for n in rollout.notes] == [2]
    else:
        assert rollout.notes == ()
        assert rollout.lines[1] == ResponseItemLine(2, TS, expected)


@pytest.mark.parametrize("make", ["missing", "directory"])
def test_a_file_that_cannot_be_read_is_a_rollout_error(tmp_path: Path, make: str) -> None:
    target = tmp_path / "rollout.jsonl"
    if make == "directory":
        target.mkdir()
    with pytest.raises(relay.RolloutError, match=r"cannot read rollout file .*rollout\.jsonl"):
        read_rollout(target)


# ----------------------------------------------------------------------------- transcript

SAMPLE = [
    meta(),
    event(p.TurnStarted("t1", 8000, 0.0)),
    item(p.user_message("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>")),
    world_state(),
    turn_context(),
    item(p.user_message("read the notes")),
    item(p.FunctionCall("read_file", '{"path": "notes.txt"}', "c1")),
    item(p.FunctionCallOutput("c1", "\n".join(f"line {i}" for i in range(1, 9)))),
    item(p.assistant_message("The notes say hello.\nThat is all.")),
    token_count(1200, 1500, 8000),
    event(p.TurnComplete("t1", "The notes say hello.", 42)),
    event(p.TurnStarted("c1", 8000, 1.0)),
    compacted(
        [p.user_message("read the notes"), p.user_message(relay.lowlevel.summary_text("S"))],
        relay.lowlevel.summary_text("The user asked to read notes.txt.\nDone."),
        window_number=1,
        receipt=RECEIPT,
    ),
    world_state(),
    token_count(120, 1900, 8000),
    event(p.WarningEvent("compacted")),
    event(p.TurnComplete("c1", None, 15)),
    event(p.TurnStarted("t2", 8000, 2.0)),
    turn_context(model="other", cwd="/w"),
    item(p.user_message("again")),
    event(p.ErrorEvent("boom", relay.ErrorCode.SERVER_ERROR)),
    event(p.TurnAborted("t2", p.AbortReason.INTERRUPTED, 7)),
    event(p.ShutdownComplete()),
    event(p.TurnStarted("sub-1", None, 3.0)),
    item(p.user_message("after the resume")),
]


def test_the_transcript_shows_turns_tools_checkpoints_and_tokens() -> None:
    lines = list(render_transcript(parse_rollout(text_of(*SAMPLE))))
    assert lines == [
        "session s-1 (created 2026-01-02T03:04:05+00:00; scripted via scripted, relay 0.1.0)",
        "cwd /w",
        "",
        "▶ turn t1 · 2026-01-02 03:04:05",
        "  context › <environment_context>",
        "  you › read the notes",
        '  ⚙ read_file {"path": "notes.txt"}  [c1]',
        "    ↳ line 1",
        "    ↳ line 2",
        "    ↳ line 3",
        "    ↳ line 4",
        "    ↳ line 5",
        "    ↳ line 6",
        "    ↳ … 2 more lines",
        "  model › The notes say hello.",
        "          That is all.",
        "  · tokens: 1200 in context (15% of 8000), 1500 used so far",
        "✓ turn t1 complete in 42 ms",
        "",
        "▶ turn c1 · 2026-01-02 03:04:05",
        "  ━━ checkpoint #1: ~900 → ~120 tokens (local, manual, 15 ms)",
        "     history replaced by 2 items",
        "     │ The user asked to read notes.txt.",
        "     │ Done.",
        "  · tokens: 120 in context (1% of 8000), 1900 used so far",
        "  ⚠ compacted",
        "✓ turn c1 complete in 15 ms",
        "",
        "▶ turn t2 · 2026-01-02 03:04:05",
        "  ⚙ settings: model other, cwd /w",
        "  you › again",
        "  ! error [server_error]: boom",
        "✗ turn t2 aborted (interrupted) after 7 ms",
        "■ session shut down",
        "",
        "↺ resumed",
        "",
        "▶ turn sub-1 · 2026-01-02 03:04:05",
        "  you › after the resume",
        "⚡ turn sub-1 has not ended (the session stopped, or still runs)",
    ]


def test_the_transcript_marks_a_turn_cut_short_by_a_crash() -> None:
    data = text_of(
        meta(),
        event(p.TurnStarted("t1", None, 0.0)),
        item(p.user_message("first")),
        event(p.TurnStarted("sub-1", None, 1.0)),
        event(p.TurnComplete("sub-1", None, 1)),
    )
    lines = list(render_transcript(parse_rollout(data)))
    assert lines[2:] == [
        "",
        "▶ turn t1 · 2026-01-02 03:04:05",
        "  you › first",
        "⚡ turn t1 never ended: the session stopped",
        "",
        "↺ resumed",
        "",
        "▶ turn sub-1 · 2026-01-02 03:04:05",
        "✓ turn sub-1 complete in 1 ms",
    ]


def test_the_transcript_shows_each_session_configured_as_one_header_line() -> None:
    def configured(resumed: bool) -> str:
        return event(
            p.SessionConfigured("s-1", "gpt-x", "ollama", 8000, "/w", "/r.jsonl", "0.1.0", resumed)
        )

    data = text_of(
        meta(),
        configured(False),
        event(p.TurnStarted("t1", None, 0.0)),
        event(p.TurnComplete("t1", None, 1)),
        event(p.ShutdownComplete()),
        configured(True),
        event(p.TurnStarted("sub-2", None, 1.0)),
    )
    assert list(render_transcript(parse_rollout(data))) == [
        "● session s-1 · gpt-x via ollama (8000 tokens) · cwd /w · /r.jsonl · relay 0.1.0",
        "",
        "▶ turn t1 · 2026-01-02 03:04:05",
        "✓ turn t1 complete in 1 ms",
        "■ session shut down",
        "",
        "↺ resumed session s-1 · gpt-x via ollama (8000 tokens) · cwd /w · /r.jsonl · relay 0.1.0",
        "",
        "▶ turn sub-2 · 2026-01-02 03:04:05",
        "⚡ turn sub-2 has not ended (the session stopped, or still runs)",
    ]


def test_an_op_is_shown_in_its_own_turn_even_when_it_was_queued() -> None:
    data = text_of(
        meta(),
        raw("op", {"id": "r1", "op": {"type": "review", "path": "a.py"}}),
        event(p.TurnStarted("r1", None, 0.0)),
        raw("op", {"id": "r2", "op": {"type": "review", "path": "b.py"}}),
        event(p.TurnComplete("r1", None, 1)),
        event(p.TurnStarted("r2", None, 1.0)),
        event(p.TurnComplete("r2", None, 1)),
        raw("op", {"id": "r3", "op": {"type": "lint"}}),
    )
    assert list(render_transcript(parse_rollout(data)))[2:] == [
        "",
        "▶ turn r1 · 2026-01-02 03:04:05",
        "» review (path='a.py')",
        "✓ turn r1 complete in 1 ms",
        "",
        "▶ turn r2 · 2026-01-02 03:04:05",
        "» review (path='b.py')",
        "✓ turn r2 complete in 1 ms",
        "» lint (its turn never started)",
    ]


def test_tool_output_and_messages_keep_their_indentation() -> None:
    code = "def f():\n    if x:\n        return 1"
    data = text_of(
        meta(),
        event(p.TurnStarted("t1", None, 0.0)),
        item(p.FunctionCall("read_file", "{}", "c1")),
        item(p.FunctionCallOutput("c1", code + "\n")),
        item(p.assistant_message("Like this:\n    x  =  1")),
    )
    assert list(render_transcript(parse_rollout(data)))[5:] == [
        "    ↳ def f():",
        "    ↳     if x:",
        "    ↳         return 1",
        "  model › Like this:",
        "              x  =  1",
        "⚡ turn t1 has not ended (the session stopped, or still runs)",
    ]


def test_an_old_style_checkpoint_is_shown_without_a_receipt() -> None:
    lines = list(render_transcript(parse_rollout(text_of(meta(), compacted(None, "S")))))
    assert lines[2:] == [
        "  ━━ checkpoint",
        "     (old-style record: the history is rebuilt from the summary)",
        "     │ S",
    ]


# ----------------------------------------------------------------------------- relay show


def run_relay(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "relay", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(os.environ),
        timeout=60,
        check=False,
    )


def test_relay_show_prints_the_transcript(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_text(text_of(*SAMPLE))
    result = run_relay("show", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    expected = list(render_transcript(parse_rollout(text_of(*SAMPLE))))
    assert result.stdout.splitlines() == expected


def test_relay_show_warns_about_malformed_lines_on_stderr(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(
        text_of(SAMPLE[0], "garbage", raw("teleport", {}), *SAMPLE[1:3]).encode()
        + SAMPLE[3][:20].encode()
    )
    result = run_relay("show", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"relay: warning: {path} line 2: not valid JSON (Expecting value at column 1); ignored",
        f"relay: warning: {path} line 3: unknown line type 'teleport'; ignored",
        f"relay: warning: {path} line 6: incomplete last line (the session stopped while "
        "writing it); ignored",
    ]
    assert "▶ turn t1" in result.stdout


def test_relay_show_without_session_meta_still_shows_what_it_can(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_text(text_of(*SAMPLE[1:3]))
    result = run_relay("show", str(path))
    assert result.returncode == 0
    assert "line 1: the rollout does not start with a session_meta line" in result.stderr
    assert result.stdout.splitlines()[0] == f"session unknown ({path} has no session_meta line)"
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("make", ["missing", "directory"])
def test_relay_show_exits_2_for_an_unreadable_file(tmp_path: Path, make: str) -> None:
    target = tmp_path / "rollout.jsonl"
    if make == "directory":
        target.mkdir()
    result = run_relay("show", str(target))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"relay: cannot read rollout file {target}: ")
    assert "Traceback" not in result.stderr


BACKGROUND_STARTED = (
    "Compacting the conversation in the background (local) from a snapshot of 3 items."
)
BACKGROUND_DROPPED = (
    "Dropped the background compaction of a snapshot taken 40 ms ago: "
    "the history changed since its snapshot."
)
BACKGROUND_RECEIPT = p.CompactionReceipt(
    trigger=relay.CompactionTrigger.POST_TURN,
    backend="local",
    tokens_before=900,
    tokens_after=120,
    duration_ms=30,
    background=True,
    snapshot_age_ms=40,
    installed_at=relay.CompactionTrigger.PRE_TURN,
)


def test_a_resume_reads_a_background_install_with_its_receipt() -> None:
    data = text_of(
        meta(),
        item(p.user_message("u")),
        event(p.BackgroundEvent(BACKGROUND_STARTED)),
        item(p.assistant_message("a")),
        compacted([p.user_message("S"), p.user_message("u")], "S", receipt=BACKGROUND_RECEIPT),
        event(p.BackgroundEvent(BACKGROUND_DROPPED)),
        item(p.user_message("after")),
    )
    full = parse_rollout(data)
    resume = parse_rollout(data, for_resume=True)
    receipts = [
        line.compacted.receipt
        for line in resume.lines
        if isinstance(line, CompactedLine) and line.compacted.receipt
    ]
    assert receipts == [BACKGROUND_RECEIPT]
    assert receipts[0].background and receipts[0].snapshot_age_ms == 40
    assert receipts[0].installed_at is relay.CompactionTrigger.PRE_TURN
    assert reconstruct(resume) == reconstruct(full)
    assert [m.content for m in reconstruct(resume).history if isinstance(m, p.Message)] == [
        p.user_message("S").content,
        p.user_message("u").content,
        p.user_message("after").content,
    ]


_LINES = st.sampled_from(
    [
        item(p.user_message("u")),
        item(p.assistant_message("a")),
        item(p.FunctionCall("f", "{}", "c")),
        raw("response_item", {"type": "message"}),
        turn_context(),
        turn_context(model="other"),
        world_state(),
        token_count(10),
        token_count(8000, 9000, 8000),
        event(p.ErrorEvent("full", relay.ErrorCode.CONTEXT_WINDOW_EXCEEDED)),
        event(p.ErrorEvent("e", relay.ErrorCode.STREAM)),
        event(p.TurnStarted("t", None, 0.0)),
        event(p.TurnStarted("sub-5", None, 0.0)),
        event(p.TurnStarted("sub-2", None, 0.0)),
        compacted([p.user_message("kept")], "S", window_number=1),
        compacted([], "S"),
        compacted(None, "old style"),
        raw("compacted", {"replacement_history": [{"type": "message"}], "message": "bad"}),
        raw("compacted", {"replacement_history": []}),
        event(p.WorkStateNoted("read", "a.py (3 bytes, sha256 00)", "a.py")),
        event(p.WorkStateNoted("read", "a.py (5 bytes, sha256 11)", "a.py")),
        event(p.WorkStateNoted("command", "make → exit 2")),
        event(p.WorkStateNoted("pinned", "keep the tests green")),
        compacted(
            [p.user_message("kept")],
            "S",
            work_state={"entries": [{"kind": "read", "text": "b.py", "key": "b.py"}], "pinned": []},
        ),
        compacted(None, "old style", work_state={"entries": [], "pinned": ["pinned before"]}),
        compacted([p.user_message("kept")], masked_outputs={"c": "the whole output"}),
        compacted(None, "old style", masked_outputs={"c": "another original", "d": "more"}),
        event(p.BackgroundEvent(BACKGROUND_STARTED)),
        event(p.BackgroundEvent(BACKGROUND_DROPPED)),
        compacted(
            [p.user_message("kept"), p.user_message("since the snapshot")],
            "S",
            window_number=2,
            receipt=BACKGROUND_RECEIPT,
        ),
        compacted(
            [p.user_message("since the snapshot")],
            "S",
            receipt=BACKGROUND_RECEIPT,
            work_state={"entries": [{"kind": "command", "text": "make → exit 0"}], "pinned": []},
        ),
        meta(),
        "not json",
        "",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINES, max_size=30))
@example(  # an item that does not decode leaves the next count the installation's
    [
        compacted([p.user_message("kept")], "S", window_number=1),
        raw("response_item", {"type": "message"}),
        token_count(10),
        token_count(10),
    ]
)
def test_reading_for_a_resume_keeps_what_a_full_read_gives_a_resume(lines: list[str]) -> None:
    data = text_of(meta(), *lines)
    full = parse_rollout(data)
    resume = parse_rollout(data, for_resume=True)
    assert resume.meta == full.meta
    # In file order (a compaction's record and outputs are dicts: lines are not hashable).
    remaining = iter(full.lines)
    assert all(any(line == other for other in remaining) for line in resume.lines)
    assert set(resume.notes) <= set(full.notes)
    # JSON problems are reported either way; so are those of every compaction and
    # session_meta line, which a resume always reads.
    numbered = ["session_meta", *lines]
    for note in full.notes:
        text = numbered[note.line - 1]
        if note.message.startswith(("not valid JSON", "expected a JSON object")) or any(
            f'"type": "{kind}"' in text for kind in ("compacted", "session_meta")
        ):
            assert note in resume.notes
    if full.meta is not None:
        assert reconstruct(resume) == reconstruct(full)
