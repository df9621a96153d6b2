"""Pinned messages cannot take the session's window: a pin too large for its share is refused,
an error caused by pins names them, and ``unpin`` releases them, for good (a resume too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._core._work_state import PIN_SHARE_PERCENT, pin_refusal

WINDOW = 8_000


def config(rollout: Path | None = None, **fields: Any) -> relay.Config:
    return relay.Config(
        **{"model_context_window": WINDOW, **fields},
        rollout=relay.RolloutConfig(enabled=rollout is not None, dir=str(rollout or ".")),
    )


def pinned_turn(text: str) -> relay.UserTurn:
    return relay.UserTurn(items=[relay.Text(text)], pin=True)


def noted(t: testing.TestSession, kind: str) -> list[str]:
    return [m.text for m in t.recorder.of_type(relay.WorkStateNoted) if m.kind == kind]


async def test_a_pin_too_large_for_its_share_of_the_window_is_refused_and_the_turn_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    big = "keep this rule in mind. " * 600  # about 3,600 tokens: over a quarter of 8,000
    async with testing.open_test_session({"responses": ["ok"]}, config=config()) as t:
        await t.submit(pinned_turn(big), id="t1")
        await t.wait_for(relay.TurnComplete)
        pinned = list(t.session.snapshot().work_state.pinned)
    assert pinned == []
    assert noted(t, "pinned") == []
    (warning,) = t.recorder.of_type(relay.WarningEvent)
    assert "not pinned" in warning.message
    assert "keep this rule in mind." in warning.message  # the pin is named
    assert f"{WINDOW * PIN_SHARE_PERCENT // 100} tokens" in warning.message
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "ok"


async def test_pins_that_fit_are_kept(autojump_clock: trio.testing.MockClock) -> None:
    async with testing.open_test_session({"responses": ["a", "b"]}, config=config()) as t:
        await t.submit(pinned_turn("Always answer in French."), id="t1")
        await t.wait_for(relay.TurnComplete)
        await t.submit(pinned_turn("Never touch prod."), id="t2")
        await t.wait_for(relay.TurnComplete, 2)
        pinned = list(t.session.snapshot().work_state.pinned)
    assert pinned == ["Always answer in French.", "Never touch prod."]
    assert t.recorder.of_type(relay.WarningEvent) == []


async def test_unpin_releases_one_pin_or_all_and_a_resume_keeps_them_released(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    model = testing.ScriptedModel({"responses": ["a", "b", "c"]})
    async with (
        relay.open_session(config(tmp_path), model=model) as session,
        testing.recording(session) as recorder,
    ):
        for number, text in enumerate(["Rule one.", "Rule two.", "Rule three."], 1):
            await session.submit(pinned_turn(text))
            await recorder.wait_for(relay.TurnComplete, number)
        await session.submit(relay.Unpin("Rule two."))
        await session.submit(relay.Unpin("no such pin"), id="u2")
        await trio.testing.wait_all_tasks_blocked()
        after_one = list(session.snapshot().work_state.pinned)
    assert after_one == ["Rule one.", "Rule three."]
    errors = [(e.id, e.msg) for e in recorder.events if isinstance(e.msg, relay.ErrorEvent)]
    assert [(i, m.code) for i, m in errors] == [("u2", relay.ErrorCode.INVALID_OP)]
    assert "no pinned message" in errors[0][1].message
    rollout = next(tmp_path.rglob("*.jsonl"))
    async with relay.resume_session(rollout, config(tmp_path), model=model) as resumed:
        assert list(resumed.snapshot().work_state.pinned) == ["Rule one.", "Rule three."]
        await resumed.submit(relay.Unpin())
        await trio.testing.wait_all_tasks_blocked()
        assert list(resumed.snapshot().work_state.pinned) == []
        await resumed.submit(relay.Shutdown())
    async with relay.resume_session(rollout, config(tmp_path), model=model) as again:
        assert list(again.snapshot().work_state.pinned) == []
        await again.submit(relay.Shutdown())


async def test_a_window_filled_by_pins_names_them_in_the_error(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """Pins that fit a large window, then a resume on a small one: the error says the pins are
    the cause and how to release them."""
    pin = "Remember the whole design document: " + "detail " * 2_500  # about 2,500 tokens
    model = testing.ScriptedModel({"responses": ["ok"]})
    async with (
        relay.open_session(config(tmp_path, model_context_window=100_000), model=model) as s,
        testing.recording(s) as recorder,
    ):
        await s.submit(pinned_turn(pin))
        await recorder.wait_for(relay.TurnComplete)
    rollout = next(tmp_path.rglob("*.jsonl"))
    small = config(tmp_path, model_context_window=2_000)
    async with (
        relay.resume_session(rollout, small, model=model) as resumed,
        testing.recording(resumed) as recorder,
    ):
        await resumed.submit(relay.UserTurn(items=[relay.Text("go on")]))
        await recorder.wait_for(relay.TurnComplete)
    errors = recorder.of_type(relay.ErrorEvent)
    assert errors, "the window cannot hold the pinned message"
    message = errors[-1].message
    assert "pinned" in message and "Remember the whole design document" in message
    assert "unpin" in message


# ------------------------------------------------------------------ without a session


@pytest.mark.parametrize(
    ("window", "pinned", "text", "refused"),
    [
        (None, [], "x" * 400_000, False),  # no known window: nothing to measure against
        (8_000, [], "x" * 4 * 1_900, False),
        (8_000, [], "x" * 4 * 2_100, True),
        (8_000, ["y" * 4 * 1_500], "x" * 4 * 600, True),  # together over the share
    ],
)
def test_pin_refusal(window: int | None, pinned: list[str], text: str, refused: bool) -> None:
    reason = pin_refusal(text, pinned, window)
    assert (reason is not None) == refused
