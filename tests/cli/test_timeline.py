"""``relay show --html``: the session timeline page (docs/timeline.md).

The page's data is checked against the rollout it was made from, read independently here (the
raw JSON lines); the page fetches nothing; a 10,000-turn session makes a page of a few hundred
kilobytes; the example page in the docs is what the example session makes. In a real browser:
``tests/cli/test_timeline_browser.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from relay._cli._timeline import read_timeline, timeline_json
from relay._cli._timeline_condense import (
    EVENTFUL_TURNS,
    FULL_TURNS,
    MAX_ENTRIES,
    MAX_POINTS,
    condense,
    kept_turns,
    sample_calls,
)
from relay._cli._timeline_page import render_page
from relay._core._summary import summary_prefix
from relay._html import Chart, Series, json_script, nice_ticks, svg_chart
from relay._rollout._reader import parse_rollout, read_rollout
from relay._rollout._resume import reconstruct
from tests.cli.timelines import LIMIT, Page, eventful_rollout, long_rollout, read_page

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def eventful(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return eventful_rollout(tmp_path_factory.mktemp("timeline"))


def page_of(path: Path) -> str:
    return render_page(condense(read_timeline(read_rollout(path))))


def raw_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def events(lines: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    return [(r["payload"], r["timestamp"]) for r in lines if r["type"] == "event_msg"]


# --------------------------------------------------------------------------- the data


def expected_turns(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Turns read from the raw lines: ids in order, how each ended."""
    turns: list[dict[str, Any]] = []
    failed = False
    for payload, time in events(lines):
        kind = payload["type"]
        if kind == "turn_started":
            turns.append({"id": payload["turn_id"], "started": time})
            failed = False
        elif kind == "error":
            failed = True
        elif kind == "turn_complete":
            turns[-1] |= {"ended": time, "outcome": "failed" if failed else "completed"}
        elif kind == "turn_aborted":
            turns[-1] |= {"ended": time, "outcome": "aborted", "reason": payload["reason"]}
    return turns


def test_the_page_data_matches_its_rollout(eventful: Path) -> None:
    lines = raw_lines(eventful)
    page = read_page(page_of(eventful))
    data = page.data()
    assert data["format"] == "relay-timeline/1"

    turns = expected_turns(lines)
    assert [t["id"] for t in data["turns"]] == [t["id"] for t in turns]
    for shown, expected in zip(data["turns"], turns, strict=True):
        assert shown["started"] == expected["started"]
        assert shown["ended"] == expected["ended"]
        assert shown["outcome"] == expected["outcome"]
        assert shown["reason"] == expected.get("reason")
    assert [t["outcome"] for t in data["turns"]].count("failed") == 1
    assert data["collapsed"] == []

    counts = [(p, t) for p, t in events(lines) if p["type"] == "token_count" and p["info"]]
    assert len(data["model_calls"]) == data["counts"]["model_calls"] == len(counts)
    assert data["sampled"] is False
    for call, (payload, time) in zip(data["model_calls"], counts, strict=True):
        last = payload["info"]["last_token_usage"]
        assert call["time"] == time
        assert call["context_tokens"] == last["total_tokens"]
        assert call["input_tokens"] == last["input_tokens"]
        assert call["output_tokens"] == last["output_tokens"]
        assert call["total_tokens"] == last["total_tokens"]
        assert call["session_tokens"] == payload["info"]["total_token_usage"]["total_tokens"]
        assert call["estimated"] == payload["info"]["estimated"]
        assert call["window"] == payload["info"]["model_context_window"]
        assert call["limit"] == LIMIT
    assert data["session"]["auto_compact_token_limit"] == LIMIT

    compacted = [r for r in lines if r["type"] == "compacted"]
    assert len(data["compactions"]) == data["counts"]["compactions"] == len(compacted) == 3
    prefix = summary_prefix() + "\n"
    for shown, line in zip(data["compactions"], compacted, strict=True):
        receipt = line["payload"]["receipt"]
        assert shown["time"] == line["timestamp"]
        for key in ("backend", "trigger", "tokens_before", "tokens_after", "duration_ms"):
            assert shown[key] == receipt[key], key
        assert shown["background"] == receipt.get("background", False)
        message = line["payload"]["message"]
        assert shown["summary"] == (message.removeprefix(prefix) or None)
        assert shown["masked_outputs"] == len(line["payload"].get("masked_outputs", {}))
    assert [(c["backend"], c["trigger"]) for c in data["compactions"]] == [
        ("masked", "manual"),
        ("local", "manual"),
        ("masked", "pre_turn"),
    ]
    assert data["compactions"][1]["summary"] == "Summary: the log and the notes were read."

    calls = [
        r["payload"]
        for r in lines
        if r["type"] == "response_item" and r["payload"]["type"] == "function_call"
    ]
    masked = {
        reference.rpartition("#")[0]
        for line in compacted
        for reference in line["payload"].get("masked_outputs", {})
    }
    recalled = {
        json.loads(call["arguments"])["reference"].rpartition("#")[0]
        for call in calls
        if call["name"] == "recall"
    }
    assert [(t["name"], t["call_id"]) for t in data["tool_calls"]] == [
        (call["name"], call["call_id"]) for call in calls
    ]
    for tool in data["tool_calls"]:
        assert tool["masked"] == (tool["call_id"] in masked)
        assert tool["recalled"] == (tool["call_id"] in recalled)
    assert {t["call_id"] for t in data["tool_calls"] if t["masked"]} == {"call-log", "call-recall"}
    assert {t["call_id"] for t in data["tool_calls"] if t["recalled"]} == {"call-log"}
    assert data["counts"]["masked"] == 2
    assert data["counts"]["recalled"] == 1

    errors = [p for p, _ in events(lines) if p["type"] == "error"]
    assert [(e["code"], e["message"]) for e in data["errors"]] == [
        (e["code"], e["message"]) for e in errors
    ]
    assert data["errors"][0]["turn_id"] == "sub-5"
    aborted = [p for p, _ in events(lines) if p["type"] == "turn_aborted"]
    assert [(i["turn_id"], i["reason"]) for i in data["interrupts"]] == [
        (a["turn_id"], a["reason"]) for a in aborted
    ]
    assert data["interrupts"] == [
        data["interrupts"][0] | {"turn_id": "sub-6", "reason": "interrupted"}
    ]

    record = reconstruct(read_rollout(eventful)).work_state.to_json()
    assert data["work_state"] == record
    assert data["work_state"]["pinned"] == ["Fetch the build log."]
    assert [(e["kind"], e["key"]) for e in data["work_state"]["entries"]] == [
        ("read", "notes.txt"),
        ("answer", "latest"),  # the model's latest answer
    ]


def test_the_tables_say_the_figures_as_text(eventful: Path) -> None:
    page = read_page(page_of(eventful))
    data = page.data()
    turns = page.tables["turns"]
    assert turns[0][:4] == ["turn", "started", "took", "outcome"]
    assert [(row[0], row[3]) for row in turns[1:]] == [
        (t["id"], t["outcome"] + (f" ({t['reason']})" if t["reason"] else ""))
        for t in data["turns"]
    ]
    compactions = page.tables["compactions"]
    assert [row[3:6] for row in compactions[1:]] == [
        [c["trigger"], c["backend"], f"{c['tokens_before']:,} → {c['tokens_after']:,}"]
        for c in data["compactions"]
    ]
    # The summary is there, behind a <details> a reader opens.
    assert "Summary: the log and the notes were read." in compactions[2][-1]
    tools = page.tables["tool-calls"]
    assert [row[2] for row in tools[1:]] == ["call-log", "call-notes", "call-recall", "nap"]
    assert "masked by #1" in tools[1][4] and "recalled" in tools[1][4]
    assert "recalls call-log#" in tools[3][4]
    problems = page.tables["problems"]
    assert [row[2] for row in problems[1:]] == ["error: bad_request", "aborted: interrupted"]


def test_the_chart_draws_every_point_and_marks_every_compaction(eventful: Path) -> None:
    html = page_of(eventful)
    page = read_page(html)
    data = page.data()
    [line] = [found for tag, found in page.tags if found.get("id") == "context-line"]
    assert len(str(line["points"]).split()) == len(data["model_calls"])
    links = [found["href"] for tag, found in page.tags if tag == "a"]
    for number in range(1, len(data["compactions"]) + 1):
        assert f"#compaction-{number}" in links
        assert any(found.get("id") == f"compaction-{number}" for _, found in page.tags)
    assert "#error-1" in links and "#interrupt-1" in links


# --------------------------------------------------------------------------- no fetch


HOSTILE = '</script><script>alert(1)</script><img src="https://example.com/x.png"> <!-- \u2028'


def assert_fetches_nothing(page: Page) -> None:
    """No element that loads anything, no URL in an attribute but same-page anchors, no URL in
    a style, no script API that fetches, and a policy that forbids fetching."""
    loaders = {"link", "img", "iframe", "object", "embed", "video", "audio", "source", "base"}
    assert [tag for tag, _ in page.tags if tag in loaders] == []
    for tag, found in page.tags:
        for name in ("src", "href", "action", "srcset", "poster", "data", "xlink:href"):
            value = found.get(name)
            assert value is None or value.startswith("#"), (tag, name, value)
        assert "url(" not in str(found.get("style", ""))
    for style in page.styles:
        assert "url(" not in style and "@import" not in style
    for found, script in page.scripts:
        if found.get("type") == "application/json":
            continue
        assert "src" not in found
        for api in ("fetch(", "XMLHttpRequest", "import(", "WebSocket", "EventSource", "http"):
            assert api not in script
    policies = [
        found["content"]
        for tag, found in page.tags
        if tag == "meta" and found.get("http-equiv") == "Content-Security-Policy"
    ]
    assert policies and "default-src 'none'" in str(policies[0])


def test_the_page_fetches_nothing_even_when_the_session_wrote_html(tmp_path: Path) -> None:
    text = long_rollout(12, compact_every=5)
    text = text.replace("step 3", HOSTILE.replace('"', '\\"')).replace(
        "summary after turn 5", HOSTILE.replace('"', '\\"')
    )
    rollout = parse_rollout(text)
    assert not rollout.notes
    page = read_page(render_page(condense(read_timeline(rollout))))
    assert_fetches_nothing(page)
    # The session's text is data: the only scripts are the page's own.
    own = [text for found, text in page.scripts if found.get("type") != "application/json"]
    assert len(own) == 2 and not any("alert" in text for text in own)
    data = page.data()
    assert data["turns"][2]["input"] == " ".join(HOSTILE.split())
    assert data["compactions"][0]["summary"] == HOSTILE


def test_embedded_json_cannot_end_its_script() -> None:
    data = {"text": HOSTILE, "nested": ["</SCRIPT >", "&amp;", "\u2029"]}
    html = json_script("d", data)
    assert html.count("</script>") == 1 and html.endswith("</script>")
    assert "<!--" not in html
    assert read_page(html).data("d") == data


def test_the_example_page_fetches_nothing() -> None:
    assert_fetches_nothing(read_page(EXAMPLE_PAGE.read_text()))


# --------------------------------------------------------------------------- long sessions


@pytest.mark.slow  # about a second to write, read and render 150,000 lines
def test_a_ten_thousand_turn_session_makes_a_small_page() -> None:
    text = long_rollout(10_000)
    timeline = read_timeline(parse_rollout(text))
    html = render_page(condense(timeline))
    assert len(html.encode()) < 3_000_000
    data = read_page(html).data()
    counts = data["counts"]
    assert counts["turns"] == 10_000
    assert counts["compactions"] == len(data["compactions"]) == 20
    assert counts["errors"] == len(data["errors"]) == 3
    assert counts["interrupts"] == len(data["interrupts"]) == 4
    # Every turn is listed or in a collapsed stretch, in order, each once.
    listed = len(data["turns"]) + sum(s["turns"] for s in data["collapsed"])
    assert listed == 10_000
    assert len(data["turns"]) < 200
    # Every compaction, error and abort has its points; the rest is sampled.
    assert data["sampled"] is True
    assert len(data["model_calls"]) <= MAX_POINTS + 100
    drawn = {call["index"] for call in data["model_calls"]}
    for mark in data["compactions"] + data["errors"] + data["interrupts"]:
        near = {mark["at_call"] - 1, mark["at_call"]} & set(range(counts["model_calls"]))
        assert near and near <= drawn
    peak = max(call.context_tokens for call in timeline.model_calls)
    assert max(call["context_tokens"] for call in data["model_calls"]) == peak
    # The collapsed stretches say so as text.
    assert re.search(r"turns <code>sub-\d+</code> – <code>sub-\d+</code>: [\d,]+ turns, no", html)


@pytest.mark.slow  # 100,000 turns: about 1.5 million lines to write, read and render
@pytest.mark.parametrize("each", ["warning", "error"])
def test_a_warning_or_an_error_in_each_of_100_000_turns_makes_a_small_page(each: str) -> None:
    every = {"warn_every": 1} if each == "warning" else {"fail_every": 1, "abort_every": 10**6}
    html = render_page(condense(read_timeline(parse_rollout(long_rollout(100_000, **every)))))
    assert len(html.encode()) < 2_000_000
    page = read_page(html)
    data = page.data()
    counts = data["counts"]
    assert counts["turns"] == 100_000
    assert counts[f"{each}s"] == 100_000
    listed = data[f"{each}s"]
    assert 0 < len(listed) <= MAX_ENTRIES
    # The first and the last are listed, the rest are counted.
    assert listed[0]["turn_id"] == "sub-1" and listed[-1]["turn_id"] == "sub-100000"
    assert len(data["turns"]) + sum(s["turns"] for s in data["collapsed"]) == 100_000
    assert len(data["turns"]) <= 10 * EVENTFUL_TURNS
    if each == "error":
        held = sum(s["errors"] for s in data["collapsed"]) + sum(t["errors"] for t in data["turns"])
        assert held == 100_000
        assert re.search(r"[\d,]+ turns, [\d,]+ compactions, [\d,]+ errors \(", html)
    left_out = 100_000 - len(listed)
    what = "warnings" if each == "warning" else "errors and aborted turns"
    assert f"{left_out:,} {what} are not listed" in html


def test_a_short_session_is_not_condensed(eventful: Path) -> None:
    timeline = read_timeline(read_rollout(eventful))
    assert condense(timeline) == timeline
    assert len(timeline.turns) < FULL_TURNS


def test_uneventful_stretches_collapse_and_eventful_turns_stay() -> None:
    timeline = read_timeline(parse_rollout(long_rollout(60, compact_every=25, fail_every=40)))
    keep = kept_turns(timeline.turns)
    ids = [turn.id for turn, kept in zip(timeline.turns, keep, strict=True) if kept]
    for eventful_turn in ("sub-25", "sub-40", "sub-50"):
        assert eventful_turn in ids
    condensed = condense(timeline, full_turns=10)
    assert [s.turns for s in condensed.collapsed] == [18, 10, 5]
    assert len(condensed.turns) + sum(s.turns for s in condensed.collapsed) == 60
    first = condensed.collapsed[0]
    assert (first.first, first.last, first.at) == ("sub-5", "sub-22", 4)
    # Tool calls are kept for the listed turns; the counts keep the whole.
    shown = {turn.id for turn in condensed.turns}
    assert {tool.turn_id for tool in condensed.tool_calls} <= shown
    assert condensed.counts == timeline.counts


def test_sampling_keeps_the_ends_the_marks_and_the_extremes() -> None:
    timeline = read_timeline(parse_rollout(long_rollout(400, compact_every=150)))
    calls = timeline.model_calls
    marks = [c.at_call for c in timeline.compactions]
    sampled = sample_calls(calls, marks, 40)
    indexes = [call.index for call in sampled]
    assert indexes == sorted(set(indexes))
    assert {0, len(calls) - 1} <= set(indexes)
    for mark in marks:
        assert {mark - 1, mark} <= set(indexes)
    assert len(sampled) <= 40 + 2 * len(marks) + 2
    assert max(c.context_tokens for c in sampled) == max(c.context_tokens for c in calls)
    assert sample_calls(calls, marks, len(calls)) == list(calls)


# --------------------------------------------------------------------------- odd rollouts


def test_an_unfinished_turn_and_an_old_rollout_without_a_limit() -> None:
    text = long_rollout(3)
    text = text.replace(', "auto_compact_token_limit": 115200', "")
    # Cut the file inside the last turn, as a crash would.
    text = text[: text.rindex('{"timestamp"', 0, text.index('"turn_complete", "turn_id": "sub-3"'))]
    timeline = read_timeline(parse_rollout(text))
    assert [turn.outcome for turn in timeline.turns] == ["completed", "completed", "unfinished"]
    assert timeline.turns[-1].ended is None
    assert timeline.session.auto_compact_token_limit is None
    html = render_page(condense(timeline))
    assert "records no auto-compaction limit" in html
    assert read_page(html).data()["turns"][-1]["outcome"] == "unfinished"


def test_a_rollout_with_no_model_call_still_makes_a_page() -> None:
    text = long_rollout(1).splitlines()
    text = [line for line in text if '"token_count"' not in line]
    page = read_page(render_page(condense(read_timeline(parse_rollout("\n".join(text))))))
    assert page.data()["model_calls"] == []
    assert not any(found.get("id") == "context-line" for _, found in page.tags)


def test_chart_helpers() -> None:
    assert nice_ticks(2500) == [0, 500, 1000, 1500, 2000, 2500]
    assert nice_ticks(3, 10, whole=True) == [0, 1, 2, 3]
    svg = svg_chart(
        Chart(
            x_max=4,
            y_max=100,
            series=[
                Series("limit", [(0, 80), (1, 80), (2, None), (3, 60), (4, 60)], "#000", "step")
            ],
        )
    )
    # One run per value, broken where the value is unknown, held to the end of the axis.
    [path] = re.findall(r' d="([^"]*)"', svg)
    assert path.count("M") == 2 and path.count("H") == 2


# --------------------------------------------------------------------------- the command


def relay(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "relay", *args], capture_output=True, timeout=60, check=False
    )


@pytest.mark.slow  # a relay process of its own
def test_relay_show_html_writes_the_page(eventful: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(eventful.read_text() + "not json\n")
    result = relay("show", "--html", str(bad))
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode().startswith(f"relay: warning: {bad} line ")
    page = read_page(result.stdout.decode())
    assert page.data()["turns"] == read_page(page_of(eventful)).data()["turns"]
    assert len(page.data()["notes"]) == 1
    missing = relay("show", "--html", str(tmp_path / "missing.jsonl"))
    assert missing.returncode == 2
    assert missing.stdout == b""
    assert missing.stderr.decode().startswith("relay: cannot read rollout file")


# --------------------------------------------------------------------------- the example page

EXAMPLES = ROOT / "examples"
EXAMPLE_ROLLOUT = ROOT / "docs" / "examples" / "auto_compact.rollout.jsonl"
EXAMPLE_PAGE = ROOT / "docs" / "examples" / "auto_compact.html"


def test_the_example_page_is_the_page_of_the_example_rollout() -> None:
    # As scripts/timeline-example renders it: from the folder of the rollout.
    rollout = parse_rollout(EXAMPLE_ROLLOUT.read_bytes(), path=Path(EXAMPLE_ROLLOUT.name))
    assert render_page(condense(read_timeline(rollout))) == EXAMPLE_PAGE.read_text()


#: What differs from one run of the example to the next: times, ids, paths, durations.
VARIES = {"time", "started", "ended", "created", "id", "cwd", "rollout", "duration_ms"}


#: How far a token figure may move with the machine: every request carries the environment
#: context (the checkout's path, the shell, the date and the zone), whose length differs from
#: one clone to the next, and the session's figures add up several requests.
TOKEN_SLACK = 256


def steady(data: Any) -> Any:
    """``data`` without what :data:`VARIES`."""
    if isinstance(data, dict):
        return {k: steady(v) for k, v in data.items() if k not in VARIES}
    if isinstance(data, list):
        return [steady(v) for v in data]
    return data


def is_token_figure(key: str) -> bool:
    return key.endswith("_tokens") or key.startswith("tokens_")


def settle(made: Any, committed: Any) -> Any:
    """``made``, each token figure near ``committed``'s (see :data:`TOKEN_SLACK`) taken from it."""
    if isinstance(made, dict) and isinstance(committed, dict):
        return {
            key: (
                committed[key]
                if key in committed
                and is_token_figure(key)
                and isinstance(value, int)
                and isinstance(committed[key], int)
                and abs(value - committed[key]) <= TOKEN_SLACK
                else settle(value, committed.get(key))
            )
            for key, value in made.items()
        }
    if isinstance(made, list) and isinstance(committed, list) and len(made) == len(committed):
        return [settle(a, b) for a, b in zip(made, committed, strict=True)]
    return made


def test_settle_takes_only_near_token_figures() -> None:
    committed = {"input_tokens": 307, "tokens_after": 380, "turns": [{"total_tokens": 10}], "n": 3}
    made = {
        "input_tokens": 312,
        "tokens_after": 380 + TOKEN_SLACK + 1,
        "turns": [{"total_tokens": 11}],
        "n": 4,
    }
    assert settle(made, committed) == {
        "input_tokens": 307,
        "tokens_after": 380 + TOKEN_SLACK + 1,
        "turns": [{"total_tokens": 10}],
        "n": 4,
    }


@pytest.mark.slow  # runs the example in a relay process
def test_the_example_rollout_is_what_the_example_makes(tmp_path: Path) -> None:
    """Regenerate with ``scripts/timeline-example`` when this fails after a change."""
    result = subprocess.run(
        [str(ROOT / "scripts" / "timeline-example"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert result.returncode == 0, result.stderr
    made = read_page(page_of(tmp_path / "auto_compact.rollout.jsonl")).data()
    committed = read_page(EXAMPLE_PAGE.read_text()).data()
    assert steady(settle(made, committed)) == steady(committed)
    assert [t["id"] for t in made["turns"]] == ["t1", "t2", "t3"]


def test_timeline_json_is_plain_data(eventful: Path) -> None:
    data = timeline_json(condense(read_timeline(read_rollout(eventful))))
    assert json.loads(json.dumps(data)) == data
    assert list(data)[:3] == ["format", "session", "counts"]


def test_a_custom_op_s_turn_has_the_op_as_its_input() -> None:
    from relay._base import _protocol as p
    from tests.rollout.test_rollout_reader import event, meta, raw, text_of

    text = text_of(
        meta(),
        raw("op", {"id": "r1", "op": {"type": "review", "path": "a.py"}}),
        event(p.TurnStarted("r1", None, 0.0)),
        raw("op", {"id": "r2", "op": {"type": "lint"}}),
        event(p.TurnComplete("r1", None, 1)),
        event(p.TurnStarted("r2", None, 1.0)),
        event(p.TurnComplete("r2", None, 1)),
    )
    timeline = read_timeline(parse_rollout(text))
    assert [turn.input for turn in timeline.turns] == ["review (path='a.py')", "lint"]
