"""History normalisation, contextual messages and token accounting (docs/session.md)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay._base import _protocol as p
from relay._base._tokens import item_tokens, items_tokens
from relay._core._history import (
    ABORTED_OUTPUT,
    History,
    is_contextual,
    last_agent_text,
    missing_outputs,
    normalize_for_prompt,
)

CALL_A = p.FunctionCall("read_file", '{"path": "a"}', "call-a")
CALL_B = p.FunctionCall("list_dir", "{}", "call-b")
CUSTOM = p.CustomToolCall("call-c", "apply_patch", "*** Begin Patch")
USER = p.user_message("please read a")
ANSWER = p.assistant_message("done")
GHOST = p.GhostSnapshot("abc123")
OTHER = p.Other({"type": "web_search_call", "id": "ws"})


# ------------------------------------------------------------------ normalize_for_prompt


def test_a_well_formed_history_is_unchanged() -> None:
    items = [USER, CALL_A, p.FunctionCallOutput("call-a", "text of a"), ANSWER]
    assert normalize_for_prompt(items) == items


def test_a_call_without_output_gets_aborted_right_after_it() -> None:
    items = [USER, CALL_A, CALL_B, p.FunctionCallOutput("call-b", "listing"), ANSWER]
    assert normalize_for_prompt(items) == [
        USER,
        CALL_A,
        p.FunctionCallOutput("call-a", ABORTED_OUTPUT),
        CALL_B,
        p.FunctionCallOutput("call-b", "listing"),
        ANSWER,
    ]
    assert ABORTED_OUTPUT == "aborted"


def test_a_custom_call_without_output_gets_a_custom_output() -> None:
    assert normalize_for_prompt([CUSTOM]) == [
        CUSTOM,
        p.CustomToolCallOutput("call-c", "aborted"),
    ]


def test_a_call_answered_later_keeps_its_real_output() -> None:
    items = [CALL_A, USER, p.FunctionCallOutput("call-a", "late")]
    assert normalize_for_prompt(items) == items


def test_an_output_without_a_call_is_dropped() -> None:
    items = [
        USER,
        p.FunctionCallOutput("ghost-call", "x"),
        p.CustomToolCallOutput("ghost-custom", "y"),
        ANSWER,
    ]
    assert normalize_for_prompt(items) == [USER, ANSWER]


def test_ghost_snapshots_and_other_items_are_dropped() -> None:
    assert normalize_for_prompt([GHOST, USER, OTHER, ANSWER, GHOST]) == [USER, ANSWER]


def test_normalisation_does_not_modify_its_input() -> None:
    items = [CALL_A, GHOST]
    before = list(items)
    normalize_for_prompt(items)
    assert items == before


def _image_message(*parts: p.ContentPart) -> p.Message:
    return p.Message("user", parts, id="m1", metadata={"k": 1})


def test_images_are_kept_by_default() -> None:
    message = _image_message(p.InputText("see"), p.InputImage("data:image/png;base64,AA"))
    assert normalize_for_prompt([message]) == [message]
    assert normalize_for_prompt([message], images=True) == [message]


def test_images_are_dropped_when_the_model_takes_none() -> None:
    message = _image_message(
        p.InputText("see"), p.InputImage("https://x/1.png"), p.InputText(" this")
    )
    assert normalize_for_prompt([message], images=False) == [
        p.Message("user", (p.InputText("see"), p.InputText(" this")), id="m1", metadata={"k": 1})
    ]


def test_an_image_only_message_disappears_without_images() -> None:
    only_images = _image_message(p.InputImage("https://x/1.png"), p.InputImage("https://x/2"))
    assert normalize_for_prompt([USER, only_images, ANSWER], images=False) == [USER, ANSWER]
    assert normalize_for_prompt([USER, only_images, ANSWER], images=True) == [
        USER,
        only_images,
        ANSWER,
    ]


def test_a_message_without_images_is_the_same_object_without_images() -> None:
    assert normalize_for_prompt([USER], images=False)[0] is USER


def test_an_output_recorded_before_its_call_does_not_answer_it() -> None:
    items = [p.FunctionCallOutput("call-a", "early"), CALL_A]
    assert normalize_for_prompt(items) == [CALL_A, p.FunctionCallOutput("call-a", "aborted")]


def test_a_second_output_for_one_call_is_dropped() -> None:
    first = p.FunctionCallOutput("call-a", "first")
    items = [CALL_A, first, p.FunctionCallOutput("call-a", "again")]
    assert normalize_for_prompt(items) == [CALL_A, first]


# ------------------------------------------------------------------ missing_outputs


def test_missing_outputs_lists_unanswered_calls_in_call_order() -> None:
    items = [
        CALL_B,
        USER,
        CALL_A,
        p.FunctionCallOutput("call-a", "ok"),
        CUSTOM,
    ]
    assert missing_outputs(items) == [
        p.FunctionCallOutput("call-b", "aborted"),
        p.CustomToolCallOutput("call-c", "aborted"),
    ]


def test_missing_outputs_of_a_well_formed_history_is_empty() -> None:
    items = [
        CALL_A,
        p.FunctionCallOutput("call-a", "ok"),
        CUSTOM,
        p.CustomToolCallOutput("call-c", "ok"),
    ]
    assert missing_outputs(items) == []
    assert missing_outputs([]) == []


def test_appending_missing_outputs_makes_normalisation_a_no_op() -> None:
    items: list[p.ResponseItem] = [USER, CALL_A, CUSTOM]
    items.extend(missing_outputs(items))
    assert normalize_for_prompt(items) == items


# ------------------------------------------------------------------ contextual messages


@pytest.mark.parametrize(
    "text",
    [
        "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>",
        '<project_instructions path="/w/AGENTS.md">\nbe nice\n</project_instructions>',
        "<turn_aborted>\nstopped\n</turn_aborted>",
        "  \n<environment_context>\n</environment_context>",
    ],
    ids=["environment", "project", "turn-aborted", "leading-whitespace"],
)
def test_harness_messages_are_contextual(text: str) -> None:
    message = p.user_message(text)
    assert is_contextual(message)


@pytest.mark.parametrize(
    "item",
    [
        p.user_message("please fix the bug"),
        p.user_message("what does <environment_context> mean?"),
        p.Message("assistant", (p.OutputText("<environment_context>"),)),
        p.Message("developer", (p.InputText("<environment_context>"),)),
        p.FunctionCallOutput("c", "<turn_aborted>"),
        p.Message("user", (p.InputImage("https://x/1.png"),)),
    ],
    ids=["real", "marker-inside", "assistant", "developer", "tool-output", "image-only"],
)
def test_other_items_are_not_contextual(item: p.ResponseItem) -> None:
    assert not is_contextual(item)


def test_last_agent_text() -> None:
    second = p.Message("assistant", (p.OutputText("two "), p.OutputText("parts")))
    assert last_agent_text([USER, ANSWER, CALL_A, second, USER]) == "two parts"
    assert last_agent_text([USER, CALL_A]) is None


# ------------------------------------------------------------------ History accounting


def test_a_new_history_counts_its_items() -> None:
    items = [USER, ANSWER]
    history = History(items)
    assert list(history.items) == items
    assert len(history) == 2
    assert history.last_response_tokens == 0
    assert history.usage_tokens == items_tokens(items)
    assert History().usage_tokens == 0


def test_usage_is_last_response_plus_items_after_the_last_model_item() -> None:
    history = History()
    history.record(USER)
    assert history.usage_tokens == item_tokens(USER)

    history.record(CALL_A, from_model=True)
    assert history.tokens_since_model == 0
    history.response_completed(5_000)
    assert history.usage_tokens == 5_000

    output = p.FunctionCallOutput("call-a", "x" * 400)
    follow_up = p.user_message("and then?")
    history.record(output)
    history.record(follow_up)
    assert history.usage_tokens == 5_000 + item_tokens(output) + item_tokens(follow_up)

    history.record(ANSWER, from_model=True)
    history.response_completed(6_000)
    assert history.usage_tokens == 6_000


def test_a_model_item_resets_the_estimate_of_earlier_items() -> None:
    history = History()
    history.response_completed(100)
    history.record(p.user_message("x" * 1000))
    history.record(ANSWER, from_model=True)
    assert history.usage_tokens == 100
    history.record(USER)
    assert history.usage_tokens == 100 + item_tokens(USER)


def test_replace_resets_usage_to_the_estimate_of_the_new_items() -> None:
    history = History([USER])
    history.record(ANSWER, from_model=True)
    history.response_completed(90_000)
    summary = p.user_message("summary of the work")
    history.replace([USER, summary])
    assert list(history.items) == [USER, summary]
    assert history.last_response_tokens == 0
    assert history.usage_tokens == item_tokens(USER) + item_tokens(summary)
    assert history.estimated_tokens() == items_tokens([USER, summary])


def test_restore_sets_items_and_counters_without_estimating() -> None:
    history = History()
    history.restore(
        [USER, ANSWER, USER], last_response_tokens=1_234, tokens_since_model=56, items_since_model=1
    )
    assert (history.last_response_tokens, history.tokens_since_model) == (1_234, 56)
    assert history.usage_tokens == 1_290
    assert list(history.items_since_model()) == [USER]
    assert history.estimated_tokens() == items_tokens([USER, ANSWER, USER])


_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("record"), st.sampled_from([USER, ANSWER, CALL_A, GHOST, OTHER]), st.booleans()
        ),
        st.tuples(st.just("completed"), st.integers(min_value=0, max_value=10**6)),
        st.tuples(st.just("replace"), st.lists(st.sampled_from([USER, ANSWER, GHOST]), max_size=4)),
    ),
    max_size=25,
)


@given(_ops)
def test_accounting_matches_a_recount(ops: list[tuple[Any, ...]]) -> None:
    history = History()
    last_total = 0
    counted_from = 0
    for op in ops:
        if op[0] == "record":
            _, item, from_model = op
            history.record(item, from_model=from_model)
            if from_model:
                counted_from = len(history)
        elif op[0] == "completed":
            history.response_completed(op[1])
            last_total = op[1]
            counted_from = len(history)
        else:
            history.replace(op[1])
            last_total = 0
            counted_from = 0
        items = list(history.items)
        assert history.estimated_tokens() == items_tokens(items)
        assert history.last_response_tokens == last_total
        assert history.usage_tokens == last_total + items_tokens(items[counted_from:])


# ------------------------------------------------------------------ normalisation property


@st.composite
def _histories(draw: st.DrawFn) -> list[p.ResponseItem]:
    """Histories as a session records them: outputs come after their call, at most once."""
    items: list[p.ResponseItem] = []
    unanswered: list[p.ToolCall] = []
    for step in range(draw(st.integers(min_value=0, max_value=30))):
        kind = draw(
            st.sampled_from(["call", "custom", "answer", "orphan", "message", "ghost", "other"])
        )
        if kind == "call":
            call: p.ToolCall = p.FunctionCall("t", "{}", f"call-{step}")
            items.append(call)
            unanswered.append(call)
        elif kind == "custom":
            call = p.CustomToolCall(f"call-{step}", "t", "input")
            items.append(call)
            unanswered.append(call)
        elif kind == "answer" and unanswered:
            call = unanswered.pop(draw(st.integers(min_value=0, max_value=len(unanswered) - 1)))
            if isinstance(call, p.CustomToolCall):
                items.append(p.CustomToolCallOutput(call.call_id, f"out-{step}"))
            else:
                items.append(p.FunctionCallOutput(call.call_id, f"out-{step}"))
        elif kind == "orphan":
            items.append(p.FunctionCallOutput(f"orphan-{step}", "lost"))
        elif kind == "ghost":
            items.append(GHOST)
        elif kind == "other":
            items.append(OTHER)
        else:
            items.append(p.user_message(f"message {step}"))
    return items


def _is_call(item: p.ResponseItem) -> bool:
    return isinstance(item, p.FunctionCall | p.CustomToolCall)


def _is_output(item: p.ResponseItem) -> bool:
    return isinstance(item, p.FunctionCallOutput | p.CustomToolCallOutput)


@given(_histories(), st.booleans())
def test_every_call_is_followed_by_exactly_one_output(
    items: list[p.ResponseItem], images: bool
) -> None:
    out = normalize_for_prompt(items, images=images)
    for index, item in enumerate(out):
        if _is_call(item):
            assert isinstance(item, p.FunctionCall | p.CustomToolCall)
            later = [
                o
                for o in out[index + 1 :]
                if _is_output(o) and getattr(o, "call_id", None) == item.call_id
            ]
            assert len(later) == 1
            # A custom call is answered by a custom output, a function call by a function one.
            assert isinstance(later[0], p.CustomToolCallOutput) == isinstance(
                item, p.CustomToolCall
            )
        elif _is_output(item):
            call_id = getattr(item, "call_id", None)
            assert any(_is_call(c) and getattr(c, "call_id", None) == call_id for c in out[:index])
        assert not isinstance(item, p.GhostSnapshot | p.Other)
    # Nothing else is added or lost: the kept items are the input minus the dropped kinds,
    # in order, and the only additions are "aborted" outputs.
    kept = [
        i
        for i in items
        if not isinstance(i, p.GhostSnapshot | p.Other)
        and not (_is_output(i) and str(getattr(i, "call_id", "")).startswith("orphan-"))
    ]
    added = [i for i in out if i not in kept]
    assert [i for i in out if i in kept] == kept
    assert all(_is_output(i) and getattr(i, "output", None) == "aborted" for i in added)
    assert len(added) == len(missing_outputs(items))
    assert normalize_for_prompt(out, images=images) == out


# ----------------------------------------------------------------------------- frozen views


def test_a_frozen_view_keeps_showing_the_items_it_was_taken_with() -> None:
    history = History([USER, ANSWER])
    view, wire = history.frozen(), history.frozen_wire()
    history.record(CALL_A)
    history.record(p.FunctionCallOutput("call-a", "a"))
    assert list(view) == [USER, ANSWER] and len(view) == 2
    assert view == (USER, ANSWER) and view == [USER, ANSWER] and view != [USER]
    assert view[-1] is ANSWER and view[0:1] == [USER] and list(reversed(view)) == [ANSWER, USER]
    with pytest.raises(IndexError):
        view[2]
    assert wire == [history.wire_items()[0], history.wire_items()[1]]
    assert view + [CALL_A] == [USER, ANSWER, CALL_A]  # noqa: RUF005 (what is tested)
    later = history.frozen()
    assert later.after(view) == 2 and len(later) == 4
    history.replace([ANSWER])
    assert list(later) == [USER, ANSWER, CALL_A, p.FunctionCallOutput("call-a", "a")]
    assert history.frozen().after(later) is None


async def test_a_request_references_the_history_without_copying_it() -> None:
    # Each request used to copy the history into two tuples: work and memory proportional to
    # the history for every request. A request holds views now: the references to the first
    # item, and to its wire form, do not grow with the number of requests made (and kept).
    from relay import testing

    async with testing.open_test_session({"responses": []}) as t:
        for turn in range(3):
            await t.turn(f"question {turn}")
            await t.wait_for(lambda e: isinstance(e.msg, p.TurnComplete), turn + 1)
        history = t.session._services.state.history
        first, first_wire = history.items[0], history.wire_items()[0]
        before = sys.getrefcount(first), sys.getrefcount(first_wire)
        for turn in range(3, 10):
            await t.turn(f"question {turn}")
            await t.wait_for(lambda e: isinstance(e.msg, p.TurnComplete), turn + 1)
        assert len(t.model.prompts) == 10
        assert (sys.getrefcount(first), sys.getrefcount(first_wire)) == before


class _CountingList(list[int | None]):
    """A list of estimates that counts how many entries are read from it."""

    reads = 0

    def __getitem__(self, index: Any) -> Any:
        _CountingList.reads += 1
        return super().__getitem__(index)

    def __iter__(self) -> Any:
        for value in super().__iter__():
            _CountingList.reads += 1
            yield value


def test_estimating_a_growing_history_reads_each_estimate_once() -> None:
    history = History()
    history._estimates = _CountingList()
    _CountingList.reads = 0
    turns = 200
    for _ in range(turns):
        history.record(USER)
        history.record(ANSWER, from_model=True)
        assert history.estimated_tokens() == items_tokens(list(history.items))
    # A request per turn asks for the estimate of the whole history: the work is one read per
    # new item, not one per item per request.
    assert _CountingList.reads <= 2 * turns


def test_json_made_for_the_rollout_gives_the_same_estimates_and_wire_forms(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import relay._core._history as history_module
    from relay._base._codec import encode_response_item, to_json
    from relay._core._writer import payload_json

    image = p.Message("user", (p.InputText("see"), p.InputImage("data:image/png;base64,AAAA")))
    tagged = p.Message("user", (p.InputText("tagged"),), metadata={"origin": "hook"})
    items = [USER, CALL_A, ANSWER, image, OTHER, p.Compaction("c2VhbGVk"), tagged]
    encoded = 0

    def counting(item: p.ResponseItem) -> dict[str, Any]:
        nonlocal encoded
        encoded += 1
        return encode_response_item(item)

    monkeypatch.setattr(history_module, "encode_response_item", counting)
    plain, given = History(), History()
    for item in items:
        plain.record(item)
        given.record(item)
        data = to_json(item)
        given.known_json(item, data, payload_json(data))
    given_wire = given.wire_items()
    # Only the item with metadata is encoded again for the wire; the others reuse their JSON.
    assert encoded == 1
    assert given_wire == plain.wire_items()
    assert encoded == 1 + len(items)
    assert given.estimated_tokens() == plain.estimated_tokens() == items_tokens(items)
    assert given.tokens_since_model == plain.tokens_since_model
