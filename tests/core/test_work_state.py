"""The work-state record: pure functions, no event loop."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

import relay
from relay._core._budget import share_of_window as work_state_budget
from relay._core._work_state import (
    WorkEntry,
    WorkState,
    command_run,
    content_hash,
    file_read,
    line_shape,
    tool_failed,
)
from tests.hypothesis_profiles import examples


def test_an_entry_states_path_size_hash_argv_and_exit_code() -> None:
    read = file_read("src/parser.py", 2341, b"def parse(): ...\n")
    assert read == WorkEntry(
        "read",
        f"src/parser.py (2341 bytes, sha256 {content_hash(b'def parse(): ...' + bytes([10]))})",
        key="src/parser.py",
    )
    assert command_run(["pytest", "-q", "tests"], 1).text == "pytest -q tests → exit 1"
    assert command_run(["sleep", "99"], None).text == "sleep 99 → timed out"
    assert (
        tool_failed("read_file", "no such file: x.py\nmore").text
        == 'read_file: "no such file: x.py"'
    )


def test_a_second_read_of_a_file_replaces_the_first_and_is_newest() -> None:
    record = WorkState()
    record.add(file_read("a.py", 1, b"a"))
    record.add(command_run(["make"], 0))
    record.add(file_read("a.py", 2, b"ab"))
    assert [e.text for e in record.entries] == [
        "make → exit 0",
        f"a.py (2 bytes, sha256 {content_hash(b'ab')})",
    ]


def test_runs_of_one_command_are_one_entry_that_keeps_an_earlier_failure() -> None:
    record = WorkState()
    record.add(command_run(["make"], 0))
    record.add(command_run(["make", "check"], 0))
    record.add(command_run(["make"], 2))
    record.add(command_run(["make"], 0))
    assert [e.text for e in record.entries] == [
        "make check → exit 0",
        "make → exit 0; earlier run: exit 2",
    ]


def test_the_record_takes_at_most_a_tenth_of_a_known_window() -> None:
    assert work_state_budget(2_000, None) == 2_000
    assert work_state_budget(2_000, 128_000) == 2_000
    assert work_state_budget(2_000, 4_096) == 409
    # A server that counts 1.6 tokens per estimated one: fewer estimated tokens fit.
    assert work_state_budget(2_000, 4_096, 1.6) == 256
    assert work_state_budget(2_000, 4_096, 0.5) == 409
    assert work_state_budget(2_000, 5) == 0


@settings(max_examples=examples(100))
@given(
    st.lists(st.builds(WorkEntry, st.text(min_size=1), st.text(), st.none() | st.text())),
    st.lists(st.text()),
)
def test_the_record_round_trips_through_json(entries: list[WorkEntry], pinned: list[str]) -> None:
    record = WorkState(entries, pinned)
    assert WorkState.from_json(record.to_json()) == record


def test_malformed_json_parts_are_skipped() -> None:
    data = {
        "entries": [{"kind": "read"}, 3, {"kind": "read", "text": "a", "key": 4}],
        "pinned": [1, "x"],
    }
    assert WorkState.from_json(data) == WorkState([WorkEntry("read", "a")], ["x"])


def test_work_entry_is_public() -> None:
    assert relay.lowlevel.WorkEntry is WorkEntry


_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|[0-9a-fA-F]{8,}|\d+(?:[.,]\d+)*")
_shape_chars = st.text(alphabet=st.sampled_from("0123456789abcdefxXgG.,: -٣\t"), max_size=40)


@given(st.one_of(_shape_chars, st.text(max_size=40)))
def test_a_line_shape_masks_numbers_as_the_pattern_that_describes_them(line: str) -> None:
    """The shape is made without a regular expression (no regex reads a tool's output in the
    core); this one states what it masks."""
    assert line_shape(line) == " ".join(_NUMBERS.sub("#", line).split())
