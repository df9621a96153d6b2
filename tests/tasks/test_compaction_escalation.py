"""The loop guard's decision: a pure function of what the turn tried."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from relay.tasks.compaction._auto import Step, TurnCompactions, loop_message, next_step
from tests.hypothesis_profiles import examples


def test_a_first_compaction_is_a_summary() -> None:
    assert next_step(compactions=0, cap=3, stalled=[], masking=True) is Step.SUMMARY
    assert next_step(compactions=0, cap=3, stalled=[], masking=False) is Step.SUMMARY


def test_after_a_stalled_summary_masking_then_a_fresh_window_then_give_up() -> None:
    stalled: list[Step] = [Step.SUMMARY]
    assert next_step(compactions=1, cap=9, stalled=stalled, masking=True) is Step.MASK
    stalled.append(Step.MASK)
    assert next_step(compactions=2, cap=9, stalled=stalled, masking=True) is Step.FRESH_WINDOW
    stalled.append(Step.FRESH_WINDOW)
    assert next_step(compactions=3, cap=9, stalled=stalled, masking=True) is Step.GIVE_UP


def test_without_masking_a_stalled_summary_goes_to_a_fresh_window() -> None:
    assert next_step(compactions=1, cap=3, stalled=[Step.SUMMARY], masking=False) is (
        Step.FRESH_WINDOW
    )


def test_the_cap_ends_it_whatever_was_tried() -> None:
    assert next_step(compactions=3, cap=3, stalled=[], masking=True) is Step.GIVE_UP


@settings(max_examples=examples(200))
@given(
    st.integers(min_value=1, max_value=6),
    st.booleans(),
    st.lists(st.booleans(), min_size=1, max_size=30),
)
def test_a_turn_never_runs_more_compactions_than_the_cap(
    cap: int, masking: bool, progress: list[bool]
) -> None:
    """Whatever each attempt achieves, following the decisions never exceeds the cap, and a
    step that stalled is never tried again."""
    ledger = TurnCompactions()
    for made_progress in progress:
        step = next_step(compactions=ledger.count, cap=cap, stalled=ledger.stalled, masking=masking)
        if step is Step.GIVE_UP:
            break
        assert step not in ledger.stalled
        ledger.count += 1
        if not made_progress:
            ledger.stalled.append(step)
    assert ledger.count <= cap


def test_the_loop_message_says_what_was_tried() -> None:
    ledger = TurnCompactions(3, [Step.SUMMARY], ["summary compaction: 900 → 950 tokens"])
    message = loop_message(ledger, 800, 3)
    assert "max_auto_compactions_per_turn = 3" in message
    assert "summary compaction: 900 → 950 tokens" in message
