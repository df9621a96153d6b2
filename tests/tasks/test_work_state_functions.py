"""Where a compaction places the work-state record, how it renders, and masking: pure
functions, no event loop."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from relay._base import _protocol as p
from relay._base._tokens import approx_tokens
from relay._core._history import is_contextual
from relay._core._summary import summary_prefix
from relay._core._work_state import (
    WorkEntry,
    WorkState,
    command_run,
    content_hash,
    file_read,
    tool_failed,
)
from relay.tasks.compaction._history import (
    MASK_MARKER,
    WORK_STATE_MARKER,
    carry_work_state,
    mask_old_outputs,
    mask_reference,
    masking_suffices,
    render_work_state,
)
from tests.hypothesis_profiles import examples

SUMMARY = p.user_message(summary_prefix() + "\nWe fixed the parser.")


def _tool_exchange(call_id: str, name: str, output: str) -> list[p.ResponseItem]:
    return [p.FunctionCall(name, "{}", call_id), p.FunctionCallOutput(call_id, output)]


def test_the_record_renders_grouped_by_kind_in_one_contextual_message() -> None:
    entries = [
        command_run(["pytest"], 1),
        file_read("a.py", 3, b"abc"),
        tool_failed("shell", "cannot start 'nope'"),
        WorkEntry("deploy", "staging ← build 41"),
    ]
    text = render_work_state(entries, 2_000)
    assert text is not None
    lines = text.splitlines()
    assert lines[0] == WORK_STATE_MARKER and lines[-1] == "</work_state>"
    assert lines[2:] == [
        "Files read:",
        f"- a.py (3 bytes, sha256 {content_hash(b'abc')})",
        "Commands run:",
        "- pytest → exit 1",
        "Tool errors:",
        "- shell: \"cannot start 'nope'\"",
        "Deploy:",
        "- staging ← build 41",
        "</work_state>",
    ]
    assert is_contextual(p.user_message(text))


def test_nothing_to_render_is_none() -> None:
    assert render_work_state([], 2_000) is None


def test_over_budget_the_oldest_entries_are_folded_into_counts() -> None:
    entries = [file_read(f"src/m{i}.py", i, bytes([i])) for i in range(200)]
    entries.append(command_run(["pytest"], 0))
    text = render_work_state(entries, 300)
    assert text is not None
    assert approx_tokens(text) <= 300
    assert "src/m199.py" in text and "pytest → exit 0" in text
    assert "src/m0.py" not in text
    listed = sum(1 for line in text.splitlines() if line.startswith("- src/m"))
    assert f"Earlier, not listed: {200 - listed} files read." in text


@settings(max_examples=examples(100))
@given(
    st.lists(
        st.builds(
            WorkEntry,
            st.sampled_from(["read", "list", "command", "error", "custom_kind"]),
            st.text(min_size=1, max_size=80),
        ),
        max_size=60,
    ),
    st.integers(min_value=120, max_value=3_000),
)
def test_a_rendering_fits_its_budget_or_has_folded_everything(
    entries: list[WorkEntry], budget: int
) -> None:
    text = render_work_state(entries, budget)
    if not entries:
        assert text is None
        return
    assert text is not None
    listed = sum(1 for line in text.splitlines() if line.startswith("- "))
    assert approx_tokens(text) <= budget or listed == 0
    # What is listed is always the newest entries.
    if listed:
        assert entries[-1].text.splitlines()[0] in text


def test_pinned_messages_and_the_record_go_before_the_summary() -> None:
    record = WorkState([command_run(["make"], 0)], ["Never touch vendor/.", "Keep Python 3.9"])
    kept = p.user_message("Keep Python 3.9")
    out = carry_work_state([kept, SUMMARY], record, 2_000, include_entries=True)
    assert [item.text() for item in out if isinstance(item, p.Message)][:2] == [
        "Keep Python 3.9",
        "Never touch vendor/.",
    ]
    assert out[-1] == SUMMARY
    assert isinstance(out[2], p.Message) and out[2].text().startswith(WORK_STATE_MARKER)
    assert len(out) == 4


def test_a_compaction_item_stays_last_and_without_entries_only_pins_are_carried() -> None:
    compaction = p.Compaction("opaque")
    record = WorkState([command_run(["make"], 0)], ["Never touch vendor/."])
    out = carry_work_state([compaction], record, 2_000, include_entries=False)
    assert out == [p.user_message("Never touch vendor/."), compaction]


def test_a_fresh_window_gets_the_record_at_its_end() -> None:
    context = p.user_message("<environment_context>…</environment_context>")
    record = WorkState([command_run(["make"], 0)])
    out = carry_work_state([context], record, 2_000, include_entries=True)
    assert out[0] == context and out[1].text().startswith(WORK_STATE_MARKER)  # type: ignore[union-attr]


def test_an_empty_record_changes_nothing() -> None:
    history: list[p.ResponseItem] = [p.user_message("hi"), SUMMARY]
    assert carry_work_state(history, WorkState(), 2_000, include_entries=True) == history


def test_a_refused_summary_leaves_the_record_in_its_place_and_nothing_beside_it() -> None:
    record = WorkState([command_run(["make"], 2)], ["Never touch vendor/."])
    kept = p.user_message("Fix the build.")
    fallback = p.user_message(summary_prefix() + "\nNo summary: the answers were not summaries.")
    out = carry_work_state([kept, fallback], record, 2_000, include_entries=True, refused=True)
    texts = [item.text() for item in out if isinstance(item, p.Message)]
    assert texts[:2] == ["Fix the build.", "Never touch vendor/."]
    assert texts[2].startswith(WORK_STATE_MARKER) and "- make → exit 2" in texts[2]
    assert len(out) == 3, "the summary that stood for the model's is left out"


def test_a_refused_summary_stays_when_there_is_no_record_to_stand_for_it() -> None:
    fallback = p.user_message(summary_prefix() + "\nNo summary: the answers were not summaries.")
    history: list[p.ResponseItem] = [p.user_message("hi"), fallback]
    pinned = WorkState([], ["Never touch vendor/."])
    for record in (WorkState(), pinned):
        out = carry_work_state(history, record, 2_000, include_entries=True, refused=True)
        assert out[-1] == fallback


def test_old_outputs_are_masked_and_recent_ones_kept() -> None:
    old = "x" * 40_000
    recent = "y" * 4_000
    items = [
        p.user_message("go"),
        *_tool_exchange("c1", "read_file", old),
        *_tool_exchange("c2", "shell", recent),
    ]
    out, masked = mask_old_outputs(items, keep_recent_tokens=2_000)
    reference = mask_reference("c1", old)
    assert masked == {reference: old}
    assert reference.startswith("c1#")
    placeholder = out[2]
    assert isinstance(placeholder, p.FunctionCallOutput)
    assert placeholder.output == (
        f"{MASK_MARKER} read_file, 40000 bytes, about 10000 tokens; "
        f'call recall with reference "{reference}" for the exact output]'
    )
    assert out[4] == items[4]
    # Masking again masks nothing more: a placeholder is never masked.
    again, more = mask_old_outputs(out, keep_recent_tokens=0)
    assert more == {mask_reference("c2", recent): recent} and again[2] == placeholder


def test_a_reference_names_one_output_even_when_call_ids_repeat() -> None:
    items = [
        *_tool_exchange("c", "read_file", "a" * 4_000),
        *_tool_exchange("c", "shell", "b" * 4_000),
    ]
    _, masked = mask_old_outputs(items, keep_recent_tokens=0)
    assert list(masked.values()) == ["a" * 4_000, "b" * 4_000]
    assert mask_reference("c", "a") != mask_reference("c", "b")
    assert mask_reference("c", "a") == mask_reference("c", "a")


def test_an_output_shorter_than_its_placeholder_stays() -> None:
    items = [*_tool_exchange("c1", "shell", "ok"), p.user_message("z" * 8_000)]
    assert mask_old_outputs(items, keep_recent_tokens=10)[1] == {}


@settings(max_examples=examples(100))
@given(
    st.lists(st.integers(min_value=0, max_value=20_000), max_size=20),
    st.integers(min_value=0, max_value=40_000),
)
def test_masking_keeps_the_recent_suffix_and_only_touches_outputs(
    sizes: list[int], keep: int
) -> None:
    items: list[p.ResponseItem] = []
    for index, size in enumerate(sizes):
        items += _tool_exchange(f"c{index}", "read_file", "o" * size)
    out, masked = mask_old_outputs(items, keep)
    assert len(out) == len(items)
    for before, after in zip(items, out, strict=True):
        if before != after:
            assert isinstance(before, p.FunctionCallOutput)
            assert isinstance(after, p.FunctionCallOutput)
            assert masked[mask_reference(before.call_id, before.output)] == before.output
            assert after.output.startswith(MASK_MARKER)


def test_masking_suffices_only_with_the_margin() -> None:
    assert masking_suffices(900, 1_000, 10)
    assert not masking_suffices(901, 1_000, 10)
    assert masking_suffices(999, 1_000, 0)
