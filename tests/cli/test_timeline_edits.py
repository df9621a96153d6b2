"""The timeline page's patches and plans (docs/timeline.md): each ``apply_patch`` call with the
files its ``patch_apply_end`` says it changed and their diffs, bounded and escaped, and each
turn's latest plan. Rollouts are written as JSON lines (:func:`edits_rollout`); the expected
values are read from those lines here, independently of relay's reader."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay._base import _protocol as p
from relay._cli._timeline import read_timeline, timeline_json
from relay._cli._timeline_condense import (
    DIFF_LINES,
    DIFFS_BUDGET,
    PATCH_FILES,
    SHORT_DIFF_CHARS,
    condense,
)
from relay._cli._timeline_edits import cut_diff, diff_figures, file_diff
from relay._cli._timeline_page import render_page
from relay._rollout._reader import parse_rollout
from tests.cli.test_timeline import HOSTILE, assert_fetches_nothing
from tests.cli.timelines import APP_DIFF, Page, edits_rollout, read_page


def page_of(text: str) -> Page:
    return read_page(render_page(condense(read_timeline(parse_rollout(text)))))


def patch_ends(text: str) -> dict[str, dict[str, Any]]:
    """Each ``patch_apply_end`` of the raw lines, by call id."""
    found = {}
    for raw in text.splitlines():
        payload = json.loads(raw)["payload"]
        if payload.get("type") == "patch_apply_end":
            found[payload["call_id"]] = payload
    return found


def test_each_patch_goes_with_its_call_with_every_file_and_its_diff() -> None:
    text = edits_rollout()
    data = page_of(text).data()
    ends = patch_ends(text)
    by_call = {tool["call_id"]: tool for tool in data["tool_calls"]}
    assert set(by_call) == {"p1", "p2", "s1"}
    assert by_call["s1"]["patch"] is None
    for call_id, end in ends.items():
        patch = by_call[call_id]["patch"]
        assert (patch["success"], patch["message"]) == (end["success"], end["message"])
        assert patch["files"] == len(end["changes"])
        assert [
            {k: c[k] for k in ("path", "kind", "move_path", "diff")} for c in patch["changes"]
        ] == end["changes"]
        assert not any(c["diff_cut"] for c in patch["changes"])
    [app, notes, moved, gone] = by_call["p1"]["patch"]["changes"]
    assert (app["added"], app["removed"], app["lines"]) == (1, 1, 5)
    assert (notes["added"], notes["removed"]) == (2, 0)
    assert moved["move_path"] == "/w/new.txt" and (gone["added"], gone["removed"]) == (0, 1)
    assert (data["counts"]["patches"], data["counts"]["patches_failed"]) == (2, 1)


def test_a_patch_written_before_its_call_still_goes_with_it() -> None:
    def patches(text: str) -> list[Any]:
        return [tool["patch"] for tool in page_of(text).data()["tool_calls"]]

    assert patches(edits_rollout(patches_first=True)) == patches(edits_rollout())


def test_the_tool_calls_table_shows_each_file_and_its_diff_lines() -> None:
    page = page_of(edits_rollout())
    tools = page.tables["tool-calls"]
    applied, failed, shell = (row[4] for row in tools[1:])
    assert applied.startswith("patch applied: 4 files")
    # Paths inside the session's folder are shown relative to it, with what changed.
    for shown in ("M src/app.py (+1 −1)", "A notes.md (+2)", "M old.txt → new.txt", "D gone.txt"):
        assert shown in applied
    assert failed.startswith("patch not applied: 1 file")
    assert "the lines to replace were not found" in failed
    assert shell == ""
    # Every diff line is a block of its own, classed by what it does.
    kinds = {"add", "del", "hunk", "ctx", "meta"}
    classes = [
        found["class"] for tag, found in page.tags if tag == "span" and found.get("class") in kinds
    ]
    assert classes[:5] == ["hunk", "ctx", "del", "add", "ctx"]
    assert classes.count("add") == 1 + 2 + 1 + 1  # app.py, notes.md, new.txt; app.py again
    assert "-print('old')" in applied and "+print('new')" in applied
    # The diffs are behind <details>, closed: the page opens short.
    assert sum(1 for tag, found in page.tags if found.get("class") == "patch") == 5
    assert not any(tag == "details" and "open" in found for tag, found in page.tags)
    assert "2 patches, 1 not applied" in render_page(
        condense(read_timeline(parse_rollout(edits_rollout())))
    )


def test_a_diff_is_escaped_and_fetches_nothing() -> None:
    hostile = "@@ -1 +1 @@\n-" + HOSTILE + "\n+\x1b[2J" + HOSTILE + "</pre></td></table>\n"
    text = edits_rollout(app_diff=hostile)
    page = page_of(text)
    assert_fetches_nothing(page)
    own = [text for found, text in page.scripts if found.get("type") != "application/json"]
    assert len(own) == 2 and not any("alert" in text for text in own)
    # The data keeps the diff as it was; the table shows it as text, controls written out.
    [change, *_] = page.data()["tool_calls"][0]["patch"]["changes"]
    assert change["diff"] == hostile
    cell = page.tables["tool-calls"][1][4]
    assert "-" + " ".join(HOSTILE.split()) in cell and "+\\x1b[2J</script>" in cell
    assert len(page.tables["tool-calls"]) == 4  # the table was not ended early


def test_a_long_diff_is_cut_with_a_note() -> None:
    body = "".join(f"+line {n}\n" for n in range(1000))
    long_diff = "@@ -0,0 +1,1000 @@\n" + body
    html = render_page(condense(read_timeline(parse_rollout(edits_rollout(app_diff=long_diff)))))
    data = read_page(html).data()
    [change, *_] = data["tool_calls"][0]["patch"]["changes"]
    assert change["diff_cut"] is True
    assert change["diff"] == "".join(long_diff.splitlines(keepends=True)[:DIFF_LINES])
    # The figures are those of the whole diff.
    assert (change["added"], change["lines"]) == (1000, 1001)
    assert f"Cut here: {DIFF_LINES:,} of its 1,001 lines are shown." in html
    # The whole timeline keeps it whole; only the page's is cut.
    whole = read_timeline(parse_rollout(edits_rollout(app_diff=long_diff)))
    assert whole.tool_calls[0].patch is not None
    assert whole.tool_calls[0].patch.changes[0].diff == long_diff


@pytest.mark.slow  # about two seconds: 2,000 patches read and drawn
def test_many_large_diffs_make_a_small_page_keeping_the_first_and_last() -> None:
    # 2,000 patches of a 200-line diff each (30 MB of diffs).
    diff = "@@ -1 +1,200 @@\n" + "".join(f"+{'x' * 140} {n}\n" for n in range(200))
    lines = edits_rollout(app_diff=diff).splitlines()
    [end] = [n for n, line in enumerate(lines) if '"patch_apply_end", "call_id": "p1"' in line]
    call = end - 1
    assert '"function_call", "name": "apply_patch"' in lines[call]
    one_file = json.loads(lines[end])
    one_file["payload"]["changes"] = one_file["payload"]["changes"][:1]
    copies = []
    for number in range(2000):
        copies.append(lines[call].replace('"p1"', f'"c{number}"'))
        copies.append(json.dumps(one_file).replace('"p1"', f'"c{number}"'))
    text = "\n".join(lines[:call] + copies + lines[call:]) + "\n"
    html = render_page(condense(read_timeline(parse_rollout(text))))
    data = read_page(html).data()
    assert data["counts"]["patches"] == 2002
    changes = [c for tool in data["tool_calls"] if tool["patch"] for c in tool["patch"]["changes"]]
    assert len(changes) == 2000 + 4 + 1
    kept = [c for c in changes if c["diff"]]
    assert len(kept) == DIFFS_BUDGET // SHORT_DIFF_CHARS
    assert all(len(c["diff"]) <= SHORT_DIFF_CHARS for c in kept)
    assert all(c["diff_cut"] == (c["lines"] == 201) for c in kept)
    assert sum(len(c["diff"]) for c in changes) <= DIFFS_BUDGET
    # The first and the last are kept; the page (each diff in its data and its table, and a
    # row per call) stays a few MB.
    assert changes[0]["diff"] and changes[-1]["diff"]
    assert "(diff not kept)" in html
    assert len(html.encode()) < 4_000_000


def test_a_patch_of_many_files_lists_the_first() -> None:
    change = p.FileChange("/w/a.txt", p.ChangeKind.ADD, "@@ -0,0 +1 @@\n+a\n")
    end = p.PatchApplyEnd("p1", "t1", True, [change] * (PATCH_FILES + 5), "done")
    text = edits_rollout().replace(
        json.dumps(patch_ends(edits_rollout())["p1"]),
        json.dumps({"type": "patch_apply_end", **_plain(end)}),
    )
    html = render_page(condense(read_timeline(parse_rollout(text))))
    patch = read_page(html).data()["tool_calls"][0]["patch"]
    assert (patch["files"], len(patch["changes"])) == (PATCH_FILES + 5, PATCH_FILES)
    assert "5 more files are not listed." in html


def _plain(end: p.PatchApplyEnd) -> dict[str, Any]:
    data = attrs.asdict(end)
    data["changes"] = [{**attrs.asdict(c), "kind": c.kind.value} for c in end.changes]
    return data


def test_a_short_session_with_patches_is_not_condensed() -> None:
    timeline = read_timeline(parse_rollout(edits_rollout()))
    assert condense(timeline) == timeline


# --------------------------------------------------------------------------- cutting


@given(
    st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=30), max_size=40),
    st.integers(1, 50),
    st.integers(1, 400),
)
def test_a_cut_diff_is_a_bounded_prefix_of_it(lines: list[str], max_lines: int, chars: int) -> None:
    diff = "".join(line.replace("\n", "").replace("\r", "") + "\n" for line in lines)
    change = file_diff(p.FileChange("/w/a", p.ChangeKind.UPDATE, diff))
    cut = cut_diff(change, max_lines, chars)
    assert diff.startswith(cut.diff)
    assert (len(cut.diff) <= chars and len(cut.diff.splitlines()) <= max_lines) or cut == change
    assert cut.diff_cut == (cut.diff != diff)
    # The figures stay those of the whole diff.
    assert (cut.added, cut.removed, cut.lines) == (change.added, change.removed, change.lines)


def test_diff_figures_count_hunk_lines_only() -> None:
    assert diff_figures(APP_DIFF) == (1, 1, 5)
    headed = "--- a/x\n+++ b/x\n" + APP_DIFF
    assert diff_figures(headed) == (1, 1, 7)
    assert diff_figures("") == (0, 0, 0)


# --------------------------------------------------------------------------- plans


def test_each_turn_s_latest_plan_is_listed() -> None:
    text = edits_rollout()
    updates = [json.loads(raw)["payload"] for raw in text.splitlines() if '"plan_update"' in raw]
    page = page_of(text)
    data = page.data()
    assert data["counts"]["plan_updates"] == len(updates) == 3
    latest = {u["turn_id"]: u for u in updates}
    assert [(plan["turn_id"], plan["steps"], plan["explanation"]) for plan in data["plans"]] == [
        (turn, u["plan"], u["explanation"]) for turn, u in latest.items()
    ]
    assert [plan["updates"] for plan in data["plans"]] == [2, 1]
    rows = page.tables["plans"]
    assert rows[0] == ["turn", "updated", "updates", "plan", "why"]
    assert rows[1][0] == "t1"
    assert "completed read the code" in rows[1][3] and "completed fix it" in rows[1][3]
    assert rows[2][3:] == ["pending check", "one more look"]


def test_a_session_without_plans_or_patches_has_no_such_section() -> None:
    text = "\n".join(
        line
        for line in edits_rollout().splitlines()
        if '"plan_update"' not in line and '"patch_apply_end"' not in line
    )
    page = page_of(text)
    assert "plans" not in page.tables
    assert all(tool["patch"] is None for tool in page.data()["tool_calls"])
    assert page.data()["plans"] == []


def test_the_page_data_is_plain_json() -> None:
    data = timeline_json(condense(read_timeline(parse_rollout(edits_rollout()))))
    assert json.loads(json.dumps(data)) == data
    assert data["format"] == "relay-timeline/1"
