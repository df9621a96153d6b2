"""Resume: the pure reconstruction, resumed sessions, ``relay resume`` (docs/rollout.md)."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import relay
from relay import testing
from relay._base import _protocol as p
from relay._base._tokens import items_tokens
from relay._core._context import TurnSettings, WorldState
from relay._core._history import History
from relay._core._state import ResumedState
from relay._core._summary import ghost_snapshots, real_user_messages, summary_prefix
from relay._rollout._reader import parse_rollout, read_rollout
from relay._rollout._resume import is_model_output, rebuild_compacted_history, reconstruct
from tests.sessions import codex_compacted_history

from .test_rollout_reader import (
    WORLD,
    compacted,
    event,
    item,
    meta,
    raw,
    text_of,
    token_count,
    turn_context,
    world_state,
)

W = WorldState(**WORLD)
OTHER_WORLD = {**WORLD, "cwd": "/elsewhere"}
U1, U2, U3 = (p.user_message(f"user {n}") for n in (1, 2, 3))
A1, A2 = p.assistant_message("answer 1"), p.assistant_message("answer 2")


def state_of(*lines: str) -> ResumedState:
    """The state rebuilt from these lines (after a ``session_meta`` line).

    Every test also checks that reading only what resuming needs (``for_resume``, as
    ``resume_session`` reads) rebuilds the same state as reading everything.
    """
    data = text_of(meta(), *lines)
    state = reconstruct(parse_rollout(data))
    assert reconstruct(parse_rollout(data, for_resume=True)) == state
    return state


# ----------------------------------------------------------------------------- pure: history


def test_items_are_replayed_after_the_newest_replacement_history() -> None:
    summary = p.user_message(relay.lowlevel.summary_text("S1"))
    state = state_of(
        item(U1),
        item(A1),
        compacted([U1, summary], relay.lowlevel.summary_text("S1"), window_number=1),
        item(U2),
        compacted([U1, U2, p.user_message(relay.lowlevel.summary_text("S2"))], window_number=2),
        item(U3),
        item(A2),
    )
    assert state.session_id == "s-1"
    assert state.history == (U1, U2, p.user_message(relay.lowlevel.summary_text("S2")), U3, A2)


def test_an_old_style_compacted_line_is_rebuilt_as_the_local_backend_builds_it() -> None:
    ghost = p.GhostSnapshot("g1")
    context = p.user_message("<environment_context>\n</environment_context>")
    long_message = p.user_message("x" * 100_000)
    history = [context, U1, ghost, A1, long_message, U2]
    state = state_of(
        *(item(i) for i in history), compacted(None, relay.lowlevel.summary_text("S")), item(U3)
    )
    expected = relay.lowlevel.build_compacted_history(
        real_user_messages(history),
        "S",
        ghosts=ghost_snapshots(history),
    )
    assert state.history == (*expected, U3)
    # The 20,000-token budget applied, newest first: U2 whole, the long message truncated to
    # what was left, and U1 (older) dropped.
    assert state.history[1:3] == (U2, ghost)
    assert 19_900 < items_tokens(state.history[:2]) < 20_100
    assert U1 not in state.history


def test_an_old_style_line_after_a_base_uses_the_messages_collected_since() -> None:
    base = [U1, p.user_message(relay.lowlevel.summary_text("S1"))]
    state = state_of(
        item(U3),
        compacted(base, window_number=1),
        item(U2),
        item(A1),
        compacted(None, "plain summary without the prefix"),
    )
    # The earlier summary is not a real user message; U3 was replaced by the base.
    assert state.history == (
        U1,
        U2,
        p.user_message(relay.lowlevel.summary_text("plain summary without the prefix")),
    )
    assert rebuild_compacted_history([U1], "") == [
        U1,
        p.user_message(relay.lowlevel.summary_text("")),
    ]


def test_without_any_compaction_every_item_is_replayed() -> None:
    assert state_of(item(U1), item(A1), item(U2)).history == (U1, A1, U2)
    assert state_of().history == ()


# ----------------------------------------------------------------------------- pure: context


def test_the_reference_context_is_the_latest_turn_context() -> None:
    state = state_of(item(U1), world_state(), turn_context(), item(A1), turn_context(OTHER_WORLD))
    assert state.reference_world == WorldState(**OTHER_WORLD)


def test_a_compaction_that_cleared_the_reference_context_leaves_none() -> None:
    # Manual and pre-turn compactions: compacted + world_state, no turn_context.
    state = state_of(turn_context(), compacted([U1]), world_state())
    assert state.reference_world is None


def test_a_compaction_that_kept_the_reference_context_is_followed_by_turn_context() -> None:
    # Mid-turn compaction: compacted + world_state + turn_context.
    state = state_of(turn_context(), compacted([U1]), world_state(), turn_context(OTHER_WORLD))
    assert state.reference_world == WorldState(**OTHER_WORLD)


def test_the_next_turn_records_the_reference_context_again_after_a_clearing_compaction() -> None:
    state = state_of(
        turn_context(),
        compacted([U1]),
        world_state(),
        item(p.user_message("<environment_context>…</environment_context>")),
        world_state(),
        turn_context(),
        item(U2),
    )
    assert state.reference_world == W


def test_defaults_come_from_the_latest_turn_context() -> None:
    state = state_of(turn_context(model="m1", cwd="/a"), compacted([]), turn_context(cwd="/b"))
    assert state.defaults == TurnSettings("scripted", "/b")
    assert state_of(item(U1)).defaults is None


def test_window_fields_come_from_the_last_compaction() -> None:
    state = state_of(compacted([U1], window_number=1), compacted([U2], window_number=2))
    assert (state.window_number, state.first_window_id) == (2, "w0")
    assert (state.previous_window_id, state.window_id) == ("w1", "w2")
    # An old-style line has no window fields: it counts, and opens a window with a new id.
    state = state_of(compacted([U1], window_number=1), compacted(None, "S"))
    assert (state.window_number, state.first_window_id) == (2, "w0")
    assert (state.previous_window_id, state.window_id) == ("w1", None)
    assert state_of().window_number == 0 and state_of().window_id is None


# ----------------------------------------------------------------------------- pure: tokens


def test_usage_is_the_last_response_plus_what_was_recorded_since() -> None:
    output = p.FunctionCallOutput("c1", "some output")
    state = state_of(
        item(U1),
        item(p.FunctionCall("read_file", "{}", "c1")),
        token_count(500, 700),
        item(output),
    )
    assert state.last_response_tokens == 500
    assert state.tokens_since_model == items_tokens([output])
    assert state.total_usage == p.TokenUsage(total_tokens=700)


def test_a_compaction_resets_usage_to_the_estimate_of_its_history() -> None:
    new_history = [U1, p.user_message(relay.lowlevel.summary_text("S"))]
    state = state_of(
        item(U2),
        token_count(5000, 5000),
        compacted(new_history),
        world_state(),
        token_count(items_tokens(new_history), 5300),  # the installation's count
        item(U3),
    )
    assert state.last_response_tokens == 0
    assert state.tokens_since_model == items_tokens([*new_history, U3])
    assert state.total_usage == p.TokenUsage(total_tokens=5300)


def test_the_window_full_count_of_a_context_window_error_counts_the_history_as_full() -> None:
    # As live: after an overflow the history fills the window, so the next turn compacts first.
    error = p.ErrorEvent("too long", relay.ErrorCode.CONTEXT_WINDOW_EXCEEDED)
    state = state_of(
        item(U1), item(A1), token_count(300), item(U2), token_count(8000), event(error)
    )
    assert state.last_response_tokens == 8000
    assert state.tokens_since_model == 0


def test_model_output_kinds() -> None:
    assert [
        is_model_output(i)
        for i in [
            A1,
            U1,
            p.Message("developer", (p.InputText("d"),)),
            p.FunctionCall("f", "{}", "c"),
            p.FunctionCallOutput("c", "o"),
            p.CustomToolCallOutput("c", "o"),
            p.Reasoning("r"),
            p.Compaction("enc"),
            p.GhostSnapshot("g"),
            p.Other({"type": "web_search_call"}),
        ]
    ] == [True, False, False, True, False, False, True, True, False, True]


def test_a_rollout_without_session_meta_cannot_be_resumed() -> None:
    rollout = parse_rollout(text_of(item(U1)))
    with pytest.raises(relay.RolloutError, match="does not start with a session_meta line"):
        reconstruct(rollout)


# ----------------------------------------------------------------------------- pure: property

_texts = st.text(alphabet="abcxyz é", min_size=0, max_size=12)
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("user"), _texts),
        st.tuples(st.just("response"), _texts, st.integers(0, 10_000)),
        st.tuples(st.just("tool"), _texts),
        st.tuples(st.just("ghost"), _texts),
        st.tuples(st.just("compact"), _texts),
        st.tuples(st.just("compact_old"), _texts),
        st.tuples(st.just("context"), st.sampled_from([WORLD, OTHER_WORLD])),
        st.tuples(st.just("window_full"), st.sampled_from([None, 8000])),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(_ops)
def test_reconstruction_equals_a_full_replay_with_a_live_history(ops: list[Any]) -> None:
    # The naive replay starts at the first line and keeps usage in a real History object.
    lines: list[str] = []
    live = History()
    reference: dict[str, str] | None = None
    for n, op in enumerate(ops):
        match op:
            case ("user", text):
                live.record(p.user_message(text))
                lines.append(item(p.user_message(text)))
            case ("response", text, total):
                answer = p.assistant_message(text)
                live.record(answer, from_model=True)
                live.response_completed(total)
                lines += [item(answer), token_count(total)]
            case ("tool", text):
                output = p.FunctionCallOutput(f"call-{n}", text)
                live.record(output)
                lines.append(item(output))
            case ("ghost", text):
                live.record(p.GhostSnapshot(text))
                lines.append(item(p.GhostSnapshot(text)))
            case ("compact" | "compact_old" as kind, text):
                new = relay.lowlevel.build_compacted_history(
                    real_user_messages(live.items),
                    text,
                    ghosts=ghost_snapshots(live.items),
                )
                live.replace(new)
                reference = None
                replacement = new if kind == "compact" else None
                lines += [compacted(replacement, relay.lowlevel.summary_text(text)), world_state()]
                lines.append(token_count(live.usage_tokens))
            case ("context", world):
                reference = world
                lines.append(turn_context(world))
            case ("window_full", window):
                # The session counts the history as full, shows it, then fails.
                shown = window or live.usage_tokens
                live.response_completed(shown)
                error = p.ErrorEvent("too long", relay.ErrorCode.CONTEXT_WINDOW_EXCEEDED)
                lines += [token_count(shown, window=window), event(error)]
    state = state_of(*lines)
    assert list(state.history) == list(live.items)
    assert state.reference_world == (WorldState(**reference) if reference else None)
    assert (state.last_response_tokens, state.tokens_since_model) == (
        live.last_response_tokens,
        live.tokens_since_model,
    )


# ----------------------------------------------------------------------------- sessions


def rollout_config(tmp_path: Path, **kwargs: Any) -> relay.Config:
    return relay.Config(rollout=relay.RolloutConfig(dir=str(tmp_path / "sessions")), **kwargs)


@asynccontextmanager
async def open_resumed(
    path: Path, script: dict[str, Any] | None = None, *, config: relay.Config
) -> AsyncIterator[testing.TestSession]:
    """Like ``open_test_session``, resuming the session recorded at ``path``."""
    model = testing.ScriptedModel(script)
    async with (
        relay.resume_session(
            path, config, model=model, clock=testing.fixed_clock, rng=random.Random(0)
        ) as session,
        testing.recording(session) as recorder,
    ):
        resumed = testing.TestSession(session, model, recorder)
        try:
            yield resumed
        finally:
            with trio.CancelScope(shield=True):
                await resumed.shutdown()


async def run_ops(t: testing.TestSession, *ops: tuple[str, str | None]) -> None:
    """Run turns and compactions one after the other, each to its end."""
    done = sum(isinstance(m, relay.TurnComplete | relay.TurnAborted) for m in t.recorder.msgs)
    for kind, arg in ops:
        if kind == "turn":
            await t.turn(arg or "")
        else:
            await t.submit(relay.Compact(instructions=arg))
        done += 1
        await t.wait_for(testing.turn_ended, done)


def rollout_path(t: testing.TestSession) -> Path:
    assert t.session.rollout is not None
    return t.session.rollout.path


def assert_restores(session: relay.Session, path: Path) -> ResumedState:
    """The state rebuilt from the file is the state the live session ended with."""
    state = reconstruct(read_rollout(path))
    assert state.session_id == session.id
    assert list(state.history) == list(session.history.items)
    assert state.reference_world == session.snapshot().reference_world
    assert state.defaults == session.snapshot().defaults
    if state.window_number:
        assert (
            state.window_number,
            state.first_window_id,
            state.previous_window_id,
            state.window_id,
        ) == (
            session.snapshot().window_number,
            session.snapshot().first_window_id,
            session.snapshot().previous_window_id,
            session.snapshot().window_id,
        )
    assert (state.last_response_tokens, state.tokens_since_model) == (
        session.history.last_response_tokens,
        session.history.tokens_since_model,
    )
    assert state.total_usage == session.snapshot().total_usage
    return state


async def test_compact_resume_preserves_model_history_view(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = rollout_config(tmp_path)
    live_script = {"responses": [{"text": "a1"}, {"text": "SUMMARY"}, {"text": "a2"}]}
    async with testing.open_test_session(live_script, config=config) as t:
        await run_ops(t, ("turn", "first"), ("compact", None), ("turn", "second"))
    last_before = t.model.requests[-1]["input"]
    async with open_resumed(rollout_path(t), {"responses": [{"text": "a3"}]}, config=config) as r:
        assert list(r.session.history.items) == list(t.session.history.items)
        await run_ops(r, ("turn", "third"))
    first_after = r.model.requests[0]["input"]
    assert first_after[: len(last_before)] == last_before
    assert first_after[len(last_before) :] == [
        relay.lowlevel.encode_response_item(t.session.history.items[-1]),
        relay.lowlevel.encode_response_item(p.user_message("third")),
    ]
    assert r.session.id == t.session.id


async def test_resume_after_two_compactions_sends_the_latest_summary_only(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = codex_compacted_history(rollout_config(tmp_path))
    live_script = {
        "responses": [
            {"text": "a1"},
            {"text": "SUMMARY ONE"},
            {"text": "a2"},
            {"text": "SUMMARY TWO"},
        ]
    }
    async with testing.open_test_session(live_script, config=config) as t:
        await run_ops(
            t, ("turn", "first"), ("compact", None), ("turn", "second"), ("compact", None)
        )
    async with open_resumed(rollout_path(t), config=config) as r:
        await run_ops(r, ("turn", "third"))
    (request,) = r.model.requests
    summaries = [text for text in testing.user_texts(request) if text.startswith(summary_prefix())]
    assert summaries == [relay.lowlevel.summary_text("SUMMARY TWO")]
    assert [
        text for text in testing.user_texts(request) if "<environment_context>" not in text
    ] == [
        "first",
        "second",
        relay.lowlevel.summary_text("SUMMARY TWO"),
        "third",
    ]
    assert r.session.snapshot().window_number == 2


async def test_resumed_usage_is_the_usage_the_session_ended_with(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = rollout_config(tmp_path, model_auto_compact_token_limit=1000)
    script = {"responses": [{"text": "big", "total_tokens": 5000}]}
    async with testing.open_test_session(script, config=config) as t:
        await run_ops(t, ("turn", "first"))
    assert t.session.history.usage_tokens == 5000
    async with open_resumed(rollout_path(t), config=config) as r:
        assert r.session.history.usage_tokens == 5000
        assert r.session.snapshot().total_usage == t.session.snapshot().total_usage


async def test_a_session_that_ended_over_its_limit_compacts_before_its_first_request(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = codex_compacted_history(rollout_config(tmp_path, model_auto_compact_token_limit=1000))
    script = {"responses": [{"text": "big", "total_tokens": 5000}]}
    async with testing.open_test_session(script, config=config) as t:
        await run_ops(t, ("turn", "first"))
    resumed_script = {"responses": [{"text": "SUMMARY"}, {"text": "small"}]}
    async with open_resumed(rollout_path(t), resumed_script, config=config) as r:
        await run_ops(r, ("turn", "second"))
    assert [prompt.purpose for prompt in r.model.prompts] == ["compact", "turn"]
    assert "second" not in testing.user_texts(r.model.requests[0])
    follow_up = [
        u for u in testing.user_texts(r.model.requests[1]) if "<environment_context>" not in u
    ]
    assert follow_up == ["first", relay.lowlevel.summary_text("SUMMARY"), "second"]
    completed = [
        m.item.receipt
        for m in r.recorder.msgs
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.ContextCompactionItem)
    ]
    assert [rc.trigger for rc in completed if rc] == [relay.CompactionTrigger.PRE_TURN]


SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any], list[tuple[str, str | None]]]] = {
    "tools and turns": (
        {},
        {
            "responses": [
                {"function_call": {"name": "list_dir", "arguments": {}, "call_id": "c1"}},
                {"text": "listed"},
                {"text": "plain"},
            ]
        },
        [("turn", "list"), ("turn", "again")],
    ),
    "manual compaction clears the reference context": (
        {"developer_instructions": "Be brief."},
        {},
        [("turn", "one"), ("compact", None)],
    ),
    "turn after a manual compaction": (
        {},
        {},
        [("turn", "one"), ("compact", "keep names"), ("turn", "two"), ("turn", "three")],
    ),
    "mid-turn compaction keeps the reference context": (
        {"model_auto_compact_token_limit": 1000, "developer_instructions": "Dev."},
        {
            "responses": [
                {
                    "function_call": {"name": "sleep", "arguments": {"seconds": 0}, "call_id": "c"},
                    "total_tokens": 5000,
                },
                {"text": "SUMMARY"},
                {"text": "done"},
            ]
        },
        [("turn", "work")],
    ),
    "context window exceeded": (
        {"model_context_window": 50_000},
        {
            "responses": [
                {"text": "ok"},
                {"http_error": {"status": 400, "code": "context_length_exceeded"}},
            ]
        },
        [("turn", "one"), ("turn", "two")],
    ),
    "pre-turn compaction": (
        {"model_auto_compact_token_limit": 1000},
        {"responses": [{"text": "big", "total_tokens": 5000}, {"text": "S"}, {"text": "x"}]},
        [("turn", "one"), ("turn", "two")],
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_the_rollout_restores_the_state_the_live_session_ended_with(
    name: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    overrides, script, ops = SCENARIOS[name]
    config = rollout_config(tmp_path, **overrides)
    async with testing.open_test_session(script, config=config) as t:
        await run_ops(t, *ops)
    assert_restores(t.session, rollout_path(t))
    # The resumed session starts from exactly that state, and a second resume agrees.
    async with open_resumed(rollout_path(t), config=config) as r:
        assert list(r.session.history.items) == list(t.session.history.items)
        assert r.session.history.usage_tokens == t.session.history.usage_tokens
        await run_ops(r, ("turn", "after"))
    assert_restores(r.session, rollout_path(t))


async def test_an_interrupted_turn_resumes_with_its_marker_and_outputs(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = rollout_config(tmp_path)
    script = {
        "responses": [
            {"function_call": {"name": "sleep", "arguments": {"seconds": 60}, "call_id": "c1"}}
        ]
    }
    async with testing.open_test_session(script, config=config) as t:
        await t.turn("wait")
        await t.wait_for(testing.tool_call_started)
        await t.submit(relay.Interrupt())
        await t.wait_for(relay.TurnAborted)
    state = assert_restores(t.session, rollout_path(t))
    assert state.history[-2] == p.FunctionCallOutput("c1", "aborted")
    assert state.history[-1].text().startswith("<turn_aborted>")  # type: ignore[union-attr]


async def test_a_resumed_session_appends_to_the_same_file(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = rollout_config(tmp_path)
    async with testing.open_test_session(config=config) as t:
        await run_ops(t, ("turn", "one"))
    path = rollout_path(t)
    async with open_resumed(path, config=config) as r:
        assert r.session.rollout is not None and r.session.rollout.path == path
        await run_ops(r, ("turn", "two"))
    assert list((tmp_path / "sessions").rglob("*.jsonl")) == [path]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["type"] for line in lines].count("session_meta") == 1
    assert [line["payload"]["type"] for line in lines if line["type"] == "event_msg"].count(
        "shutdown_complete"
    ) == 2
    assert_restores(r.session, path)


async def test_problems_in_the_rollout_follow_the_session_configured_of_the_resumed_session(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = rollout_config(tmp_path)
    async with testing.open_test_session(config=config) as t:
        await run_ops(t, ("turn", "one"))
    path = rollout_path(t)
    written = len(path.read_text().splitlines())
    with path.open("a") as file:
        file.write("garbage\n" + item(p.user_message("cut short"))[:25])
    async with open_resumed(path, config=config) as r:
        await run_ops(r, ("turn", "two"))
    garbage, cut = written + 1, written + 2
    assert [(e.id, e.msg) for e in r.recorder.events[:3]] == [
        (
            "session",
            relay.SessionConfigured(
                t.session.id,
                "scripted",
                "scripted",
                None,
                t.session.snapshot().defaults.cwd,
                str(path),
                relay.__version__,
                resumed=True,
            ),
        ),
        (
            "resume",
            relay.WarningEvent(
                f"{path} line {garbage}: not valid JSON (Expecting value at column 1); ignored"
            ),
        ),
        (
            "resume",
            relay.WarningEvent(
                f"{path} line {cut}: incomplete last line (the session stopped while writing "
                "it); ignored"
            ),
        ),
    ]
    assert r.recorder.types()[3] == "turn_started"
    assert list(r.session.history.items)[: len(t.session.history.items)] == list(
        t.session.history.items
    )


def recorded_with(path: Path, provider: str, model: str) -> str:
    """Write a rollout that only says which session it is and what it ran on."""
    meta = {"id": "s-rec", "cwd": str(path.parent), "model": model, "model_provider": provider}
    text = json.dumps({"timestamp": "2026-01-02T03:04:05.000Z", "type": "session_meta",
                       "payload": meta}) + "\n"  # fmt: skip
    path.write_text(text)
    return text


async def test_resume_session_without_a_config_goes_on_with_the_recorded_model(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    path = tmp_path / "rollout.jsonl"
    recorded_with(path, "scripted", "gpt-recorded")
    async with relay.resume_session(path) as session:
        first = await anext(session.events())
    assert isinstance(first.msg, relay.SessionConfigured)
    assert (first.msg.model, first.msg.model_provider, first.msg.resumed) == (
        "gpt-recorded",
        "scripted",
        True,
    )


async def test_resume_session_without_a_config_refuses_a_provider_it_cannot_build(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    path = tmp_path / "rollout.jsonl"
    before = recorded_with(path, "mine", "gpt-recorded")
    with pytest.raises(relay.ConfigError, match="recorded with model_provider 'mine'"):
        async with relay.resume_session(path):
            pass
    assert path.read_text() == before


async def test_resume_session_model_name_replaces_the_recorded_model(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = rollout_config(tmp_path)
    async with testing.open_test_session(config=attrs.evolve(config, model="gpt-old")) as t:
        await run_ops(t, ("turn", "one"))
    path = rollout_path(t)
    model = testing.ScriptedModel(None)
    async with relay.resume_session(path, config, model=model, model_name="gpt-new") as session:
        events = session.events()
        first = await anext(events)
        await session.submit(relay.UserTurn(items=[relay.Text("two")]))
        async for event in events:
            if isinstance(event.msg, relay.TurnComplete):
                break
    assert isinstance(first.msg, relay.SessionConfigured) and first.msg.model == "gpt-new"
    assert [request["model"] for request in model.requests] == ["gpt-new"]


async def test_resume_session_refuses_a_rollout_without_session_meta(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    path = tmp_path / "orphan.jsonl"
    path.write_text(text_of(item(U1)))
    with pytest.raises(relay.RolloutError, match=r"orphan\.jsonl: cannot resume"):
        async with relay.resume_session(path, rollout_config(tmp_path)):
            pass  # pragma: no cover
    with pytest.raises(relay.RolloutError, match="cannot read rollout file"):
        async with relay.resume_session(tmp_path / "missing.jsonl"):
            pass  # pragma: no cover


# ----------------------------------------------------------------------------- relay resume


def run_relay(
    *args: str, stdin: str = "", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "relay", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(os.environ),
        timeout=60,
        check=False,
    )


def turn_line(text: str) -> str:
    return json.dumps({"op": {"type": "user_turn", "items": [{"type": "text", "text": text}]}})


def test_relay_resume_continues_the_session_in_the_same_file(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    first = run_relay(
        "run", "-", "--rollout-dir", str(sessions), stdin=turn_line("one"), cwd=tmp_path
    )
    assert first.returncode == 0, first.stderr
    (path,) = sessions.rglob("*.jsonl")
    script = tmp_path / "more.jsonl"
    script.write_text(turn_line("two") + "\n")
    second = run_relay("resume", str(path), str(script), cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stderr == ""
    events = [json.loads(line) for line in second.stdout.splitlines()]
    assert events[-1]["msg"]["type"] == "shutdown_complete"
    completes = [e["msg"] for e in events if e["msg"]["type"] == "turn_complete"]
    assert [m["last_agent_message"] for m in completes] == ["echo: two"]
    state = reconstruct(read_rollout(path))
    assert [i.text() for i in state.history if isinstance(i, p.Message)][-3:] == [
        "echo: one",
        "two",
        "echo: two",
    ]
    assert list(sessions.rglob("*.jsonl")) == [path]


def test_relay_resume_warns_about_malformed_lines_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    content = (
        text_of(
            meta(),
            item(U1),
            "{oops",
            raw("teleport", {"x": 1}),
            compacted(None, "an old-style summary"),
            item(A1),
            '{"type": "compacted"}',
        )
        + item(U2)[:40]
    )
    path.write_text(content)
    result = run_relay(
        "resume", str(path), "-", "-c", "cwd=" + str(tmp_path), stdin=turn_line("hi")
    )
    assert result.returncode == 0, result.stderr
    notes = [
        "line 3: not valid JSON (Expecting property name enclosed in double quotes at column "
        "2); ignored",
        "line 4: unknown line type 'teleport'; ignored",
        "line 7: missing field 'payload'; ignored",
        "line 8: incomplete last line (the session stopped while writing it); ignored",
    ]
    assert result.stderr.splitlines() == [f"relay: warning: {path} {note}" for note in notes]
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert (events[0]["id"], events[0]["msg"]["type"]) == ("session", "session_configured")
    assert [(e["id"], e["msg"]) for e in events[1:5]] == [
        ("resume", {"type": "warning", "message": f"{path} {note}"}) for note in notes
    ]
    assert events[5]["msg"]["type"] == "turn_started"
    # The old-style compaction was rebuilt; the resumed turn was appended after it.
    history = reconstruct(read_rollout(path)).history
    assert history[:3] == (
        U1,
        p.user_message(relay.lowlevel.summary_text("an old-style summary")),
        A1,
    )
    assert [i.text() for i in history[3:] if isinstance(i, p.Message)][-2:] == ["hi", "echo: hi"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read rollout file"),
        ("", "cannot resume: the rollout does not start with a session_meta line"),
        ("turn", "cannot resume: the rollout does not start with a session_meta line"),
    ],
)
def test_relay_resume_exits_2_for_a_rollout_it_cannot_resume(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "rollout.jsonl"
    if content is not None:
        path.write_text(text_of(item(U1)) if content else "")
    result = run_relay("resume", str(path), "-", stdin=turn_line("hi"))
    assert result.returncode == 2
    assert result.stdout == ""
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    if content is not None:
        assert path.read_text() == (text_of(item(U1)) if content else "")


@pytest.mark.slow  # two relay processes
def test_item_ids_stay_unique_in_a_rollout_across_resumes(tmp_path: Path) -> None:
    """The scripted model numbers its responses in each process; after a resume the ids it
    gives must not repeat those already in the rollout."""
    sessions = tmp_path / "sessions"
    model = tmp_path / "model.json"
    model.write_text(json.dumps({"responses": ["first answer", "second answer"]}))
    first = run_relay(
        "run",
        "-",
        "--rollout-dir",
        str(sessions),
        "--model-script",
        str(model),
        stdin=turn_line("one"),
        cwd=tmp_path,
    )
    assert first.returncode == 0, first.stderr
    (path,) = sessions.rglob("*.jsonl")
    script = tmp_path / "more.jsonl"
    script.write_text(turn_line("two") + "\n")
    second = run_relay("resume", str(path), str(script), "--model-script", str(model))
    assert second.returncode == 0, second.stderr
    ids = [
        line["payload"]["id"]
        for line in map(json.loads, path.read_text().splitlines())
        if line["type"] == "response_item" and line["payload"].get("id")
    ]
    assert len(ids) >= 2
    assert len(ids) == len(set(ids)), ids


def test_resume_session_takes_every_keyword_open_session_takes() -> None:
    import inspect

    opened = inspect.signature(relay.open_session).parameters
    resumed = inspect.signature(relay.resume_session).parameters
    missing = [name for name in opened if name not in resumed]
    assert missing == []
    for name, parameter in opened.items():
        if name == "config":
            continue
        same = resumed[name]
        assert (same.kind, same.default, same.annotation) == (
            parameter.kind,
            parameter.default,
            parameter.annotation,
        ), name


@attrs.frozen
class _Shout(relay.SessionTask):
    text: str

    @property
    def kind(self) -> str:
        return "shout"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        ctx.emit(relay.AgentMessage(self.text.upper()))
        return None


def _shout(op: relay.CustomOp) -> _Shout:
    return _Shout(str(op.fields.get("text", "")))


async def test_a_session_that_ran_a_custom_op_resumes_with_tasks_given_to_resume_session(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = relay.Config(rollout=relay.RolloutConfig(dir=str(tmp_path)))
    async with relay.open_session(config, tasks={"shout": _shout}) as session:
        answer = await session.ask("hi")
        assert answer.message == "echo: hi"
        rollout = session.rollout
        assert rollout is not None
        await session.submit(relay.CustomOp("shout", {"text": "loud"}))
        await session.wait_idle()
    with pytest.raises(relay.ConfigError, match=re.escape("resume_session(tasks=...)")):
        async with relay.resume_session(rollout.path, config):
            pass
    async with relay.resume_session(rollout.path, config, tasks={"shout": _shout}) as resumed:
        await resumed.submit(relay.CustomOp("shout", {"text": "again"}))
        await resumed.wait_idle()
        said = [m.text() for m in resumed.history if isinstance(m, relay.Message)]
        assert said[-2:] == ["hi", "echo: hi"]
        assert resumed.statistics().running_turn is None
    with pytest.raises(relay.ConfigError, match="is not the id of the session"):
        async with relay.resume_session(rollout.path, config, session_id="another"):
            pass
