"""What a compaction keeps besides its summary, as plain functions: the lines of a long
repetitive output that stood out, the model's latest answer, the files read placed back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import assume, given
from hypothesis import strategies as st

import relay
from relay import testing, user_message
from relay._core._work_state import (
    STANDOUT_MAX,
    line_shape,
    lines_that_stood_out,
    standout_lines,
)
from relay.tasks._steps import (
    ANSWER_CHARS,
    ECHO_SCAN,
    REPEATED_WORDS,
    latest_answer,
    latest_asked,
)
from relay.tasks.compaction._history import (
    MASK_MARKER,
    RECENT_READS_MARKER,
    placed_reads,
    recent_reads,
)
from relay.tasks.compaction._summary_check import written_tool_call


def build_log(lines: int, planted: dict[int, str]) -> str:
    out = []
    for n in range(lines):
        out.append(
            planted.get(
                n, f"[{n:04d}] step {n} took {n * 7 % 90} ms, cache {'hit' if n % 3 else 'miss'}"
            )
        )
    return "\n".join(out)


def test_the_one_line_unlike_the_others_stands_out() -> None:
    log = build_log(240, {120: "[0120] peak memory while processing invoices: 600 MiB"})
    assert standout_lines(log) == ["[0120] peak memory while processing invoices: 600 MiB"]


def test_numbers_hex_ids_and_spacing_do_not_make_lines_unlike() -> None:
    assert line_shape("took  12 ms at 0x7ffe, id deadbeef99") == line_shape(
        "took 4 ms at 0x1, id 0123456789"
    )


@pytest.mark.parametrize(
    "output",
    [
        build_log(10, {5: "ERROR disk full"}),  # too short to have a pattern
        "\n".join(f"def function_{chr(97 + n)}(): return '{chr(97 + n) * n}'" for n in range(26)),
        build_log(100, {n: f"unique line {chr(65 + n)}" for n in range(STANDOUT_MAX + 1)}),
    ],
    ids=["short", "source-file", "too-many"],
)
def test_an_output_without_a_pattern_has_no_standout_line(output: str) -> None:
    assert standout_lines(output) == []


@given(st.lists(st.integers(0, 9_999), min_size=20, max_size=200))
def test_a_purely_repetitive_output_has_none(numbers: list[int]) -> None:
    assert standout_lines("\n".join(f"step {n} took {n % 97} ms" for n in numbers)) == []


def test_stood_out_lines_become_record_entries_named_by_their_source() -> None:
    log = build_log(60, {30: "WARNING: retries exhausted for shard 7"})
    (entry,) = lines_that_stood_out("logs/build.log", log)
    assert (entry.kind, entry.text) == (
        "line",
        'logs/build.log: "WARNING: retries exhausted for shard 7"',
    )


def test_the_latest_answer_is_one_line_and_keeps_its_end() -> None:
    short = latest_answer("Decision: we add a test first.\n\nThen we fix it.")
    assert short is not None and short.text == "Decision: we add a test first. Then we fix it."
    assert short.key == "latest"
    long = latest_answer("x" * 2_000 + " Decision: keep the API.")
    assert long is not None and len(long.text) == ANSWER_CHARS
    assert long.text.endswith("Decision: keep the API.") and long.text.startswith("…")
    assert latest_answer("  \n ") is None


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "shell", "arguments": {"argv": ["sh", "tools/check.sh"]}}',
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>',
        '"test", "package", "install", ' * 40,
        "I will run the tests. " * 30,
    ],
)
def test_an_answer_that_is_a_call_or_a_loop_is_not_kept(text: str) -> None:
    # A small model's answer was a tool call written as text, or the same words until its
    # answer limit: the record kept 600 characters of it as "the model's latest answer".
    assert latest_answer(text) is None


@given(st.text(min_size=1, max_size=400).filter(lambda text: bool(text.split())))
def test_a_short_answer_of_any_words_is_kept(text: str) -> None:
    assume(not written_tool_call(text))
    words = text.split()
    assume(len(words) < REPEATED_WORDS or len(set(words)) == len(words))
    entry = latest_answer(text)
    assert entry is not None and entry.text == " ".join(words)


ASKED = (
    "We are working on the billing service. Constraint: never change anything under "
    "migrations/. Decision: we store money as integer cents. Acknowledge in one sentence.\n"
    "Read config/limits.py and tell me what MAX_RETRIES is set to."
)


@pytest.mark.parametrize(
    "text",
    [
        # A small model answered the user's first message with the message itself.
        "We are working on the billing service. Constraint: never change anything under "
        "migrations/. Decision: we store money as integer cents. Acknowledge in one sentence.",
        "Read config/limits.py and tell me what MAX_RETRIES is set to.",
    ],
)
def test_an_answer_that_repeats_what_the_user_asked_is_not_kept(text: str) -> None:
    # The user's messages are kept verbatim: an echo of one in the record says nothing new.
    assert latest_answer(text, ASKED) is None
    assert latest_answer(text) is not None


@pytest.mark.parametrize(
    "text",
    [
        "MAX_RETRIES is set to 7.",
        "MAX_RETRIES is set to 7 in config/limits.py.",
        "Understood: we store money as integer cents and leave migrations/ alone.",
    ],
)
def test_an_answer_in_the_users_words_that_adds_its_own_is_kept(text: str) -> None:
    entry = latest_answer(text, ASKED)
    assert entry is not None and entry.text == text


@pytest.mark.parametrize("sizes", [(), (10,), (30_000, 30_000, 5), (ECHO_SCAN - 1, 1, 3)])
def test_what_an_answer_is_compared_with_is_the_tail_of_the_users_messages(
    sizes: tuple[int, ...],
) -> None:
    history: list[relay.ResponseItem] = []
    for number, size in enumerate(sizes):
        history += [user_message(str(number) * size), relay.assistant_message("ok " * 9)]
    whole = "\n".join(str(number) * size for number, size in enumerate(sizes))
    assert latest_asked(history) == whole[-ECHO_SCAN:]


def read(call_id: str, path: str, output: str) -> list[relay.ResponseItem]:
    return [
        relay.FunctionCall("read_file", json.dumps({"path": path}), call_id),
        relay.FunctionCallOutput(call_id, output),
    ]


def test_recent_reads_places_back_the_newest_read_of_each_file_that_fits() -> None:
    history = [
        user_message("go"),
        *read("1", "src/a.py", "A = 1\n"),
        *read("2", "logs/big.log", "x" * 40_000),  # over the budget: left out
        *read("3", "src/b.py", "B = 2\n"),
        *read("4", "src/a.py", "A = 3\n"),  # the newer read of src/a.py
        *read("5", "gone.py", "error: cannot read gone.py: No such file"),
    ]
    message = recent_reads(history, 500)
    assert isinstance(message, relay.Message)
    text = message.text()
    assert text.startswith(RECENT_READS_MARKER)
    assert "--- src/a.py ---\nA = 3" in text and "A = 1" not in text
    assert "--- src/b.py ---\nB = 2" in text
    assert "big.log" not in text and "gone.py" not in text
    assert text.index("src/a.py") < text.index("src/b.py"), "newest first"


def test_masked_outputs_and_a_zero_budget_place_nothing_back() -> None:
    masked = read("1", "src/a.py", f"{MASK_MARKER} read_file, 9 bytes]")
    assert recent_reads(masked, 500) is None
    assert recent_reads(read("1", "src/a.py", "A = 1"), 0) is None


# ------------------------------------------------------------------ through a session


def recording(work: Path) -> relay.Config:
    """A session in ``work`` that keeps the record and places back up to 500 tokens of files."""
    return relay.Config(
        cwd=str(work),
        features=relay.Features(work_state=True),
        recent_reads_token_budget=500,
        rollout=relay.RolloutConfig(enabled=False),
    )


async def test_a_compaction_keeps_the_stood_out_line_the_latest_answer_and_the_reads(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    work = tmp_path
    (work / "build.log").write_text(build_log(200, {100: "peak memory: 600 MiB"}))
    (work / "app.py").write_text("LIMIT = 7\n")
    script = {
        "responses": [
            {"function_call": {"name": "read_file", "arguments": {"path": "build.log"}}},
            {"function_call": {"name": "read_file", "arguments": {"path": "app.py"}}},
            "Decision: raise LIMIT after a test.",
            "the summary",
            "ok",
        ]
    }
    async with testing.open_test_session(script, config=recording(work)) as t:
        await t.turns("look")
        await t.submit(relay.Compact())
        await t.wait_for(relay.TurnComplete, 2)
        await t.turns("go on")
    after = "\n".join(testing.user_texts(t.model.requests[-1]))
    assert 'build.log: "peak memory: 600 MiB"' in after
    assert "Decision: raise LIMIT after a test." in after
    assert "--- app.py ---\nLIMIT = 7" in after
    assert "--- build.log ---" not in after, "the log is over the budget"


async def test_an_echo_of_the_users_message_does_not_replace_the_answer_before(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    task = "We are working on billing. Decision: money is stored as integer cents. Acknowledge."
    script = {"responses": ["Noted: integer cents.", task, "the summary", "ok"]}
    async with testing.open_test_session(script, config=recording(tmp_path)) as t:
        await t.turns("Decision: money is integer cents. Acknowledge.", task)
        await t.submit(relay.Compact())
        await t.wait_for(relay.TurnComplete, 3)
        await t.turns("go on")
    after = "\n".join(testing.user_texts(t.model.requests[-1]))
    assert "- Noted: integer cents." in after
    assert after.count("Acknowledge.") == 2, "each of the user's messages once, no echo"


RUNNER_OUTPUTS = Path(__file__).parents[1] / "core" / "runner_outputs"
EXPECTED = json.loads((RUNNER_OUTPUTS / "expected.json").read_text(encoding="utf-8"))
RERUN = sorted(name.split(".")[0] for name in EXPECTED if name.endswith(".pass.txt"))


@pytest.mark.parametrize("runner", RERUN)
async def test_after_a_compaction_the_request_names_the_failure_a_rerun_fixed(
    tmp_path: Path, runner: str
) -> None:
    # A check script that prints a real runner's output: failing, then (fixed) passing.
    (tmp_path / "check.sh").write_text('cat out.txt; exit "$(cat code)"\n')
    (tmp_path / "out.txt").write_text((RUNNER_OUTPUTS / f"{runner}.fail.txt").read_text())
    (tmp_path / "code").write_text("1")
    run = {"function_call": {"name": "shell", "arguments": {"command": ["sh", "check.sh"]}}}
    script = {"responses": [run, "It fails.", run, "It passes.", "the summary", "ok"]}
    config = relay.Config(
        cwd=str(tmp_path), tools={"shell": True}, rollout=relay.RolloutConfig(enabled=False)
    )
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("run the checks")
        (tmp_path / "out.txt").write_text((RUNNER_OUTPUTS / f"{runner}.pass.txt").read_text())
        (tmp_path / "code").write_text("0")
        await t.turns("run them again")
        await t.submit(relay.Compact(), id="compact")
        await t.wait_for(testing.turn_ended, 3)
        await t.turns("go on")
    [request] = [r for r in t.model.requests if testing.user_texts(r)[-1:] == ["go on"]]
    after = "\n".join(testing.user_texts(request))
    [entry] = [line for line in after.splitlines() if "sh check.sh →" in line]
    assert "sh check.sh → exit 0" in entry and "earlier run: exit 1; found: " in entry
    assert EXPECTED[f"{runner}.fail.txt"]["failed"][0] in entry


def test_the_files_placed_back_are_the_harnesss_message_not_the_users() -> None:
    message = recent_reads(read("1", "src/a.py", "A = 1\n"), 500)
    assert message is not None
    assert relay.lowlevel.message_kind(message) == "contextual"


def test_an_earlier_compactions_files_are_placed_back_again_newer_reads_first() -> None:
    first = recent_reads([*read("1", "src/a.py", "A = 1\n"), *read("2", "b.md", "--- x\n")], 500)
    assert first is not None
    # After that compaction the reads are gone from the history but for its message; a newer
    # read of one of its files stands for it.
    history = [first, user_message("next"), *read("3", "src/a.py", "A = 2\n")]
    again = recent_reads(history, 500)
    assert again is not None
    text = again.text()
    assert "--- src/a.py ---\nA = 2\n" in text and "A = 1" not in text
    assert "--- b.md ---\n--- x\n" in text
    assert text.index("src/a.py") < text.index("b.md"), "newest first"
    # Placed back from its own message alone, it is the same text.
    assert recent_reads([first, user_message("next")], 500) == first


async def test_a_second_compaction_places_the_files_read_back_once_after_the_record(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    (tmp_path / "app.py").write_text("LIMIT = 7\n")
    script = {
        "responses": [
            {"function_call": {"name": "read_file", "arguments": {"path": "app.py"}}},
            "LIMIT is 7.",
            "the summary",
            "noted",
            "the second summary",
            "ok",
        ]
    }
    async with testing.open_test_session(script, config=recording(tmp_path)) as t:
        await t.turns("look")
        await t.submit(relay.Compact())
        await t.wait_for(relay.TurnComplete, 2)
        await t.turns("next")
        await t.submit(relay.Compact())
        await t.wait_for(relay.TurnComplete, 4)
        await t.turns("go on")
    texts = testing.user_texts(t.model.requests[-1])
    [record] = [n for n, text in enumerate(texts) if text.startswith("<work_state>")]
    listed, placed = texts[record].split(f"\n{RECENT_READS_MARKER}\n")
    assert "--- app.py ---\nLIMIT = 7" in placed, "the file follows the record, in its message"
    assert "app.py" not in listed, "and the record does not list it again"
    assert sum(text.count("LIMIT = 7") for text in texts) == 1
    assert texts.index("next") < record, "the user's messages come before both"


def _not_a_heading(text: str) -> bool:
    return not any(line.startswith("--- ") and line.endswith(" ---") for line in text.split("\n"))


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=30).filter(lambda p: "\n" not in p and "\r" not in p),
        st.text(min_size=1, max_size=200).filter(_not_a_heading),
        min_size=1,
        max_size=5,
    )
)
def test_the_files_placed_back_read_back_as_they_were(files: dict[str, str]) -> None:
    history = [
        item for n, (path, text) in enumerate(files.items()) for item in read(str(n), path, text)
    ]
    placed = [(p, t) for p, t in files.items() if not t.startswith((MASK_MARKER, "error: "))]
    message = recent_reads(history, 10**6)
    assert (message is None) == (not placed)
    if message is not None:
        assert placed_reads(message.text()) == list(reversed(placed))
