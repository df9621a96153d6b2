"""The sub-agents on the timeline page as a person sees it: headless Chromium with no network
(see tests/cli/test_timeline_browser.py for when it is skipped)."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay._cli._timeline import read_timeline
from relay._cli._timeline_condense import condense
from relay._cli._timeline_page import render_page
from relay._rollout._reader import read_rollout
from tests.browser import evaluate, find_chromium
from tests.cli.agent_trees import AGENTS, tree_rollout

pytestmark = pytest.mark.slow  # each test starts a browser: a second or two

#: The blocks and lanes as laid out: where each block is, and each lane's bar.
READ_AGENTS = """(() => {
  const box = (el) => { const r = el.getBoundingClientRect();
    return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width}; };
  const turn = document.getElementById("turn-sub-1");
  const blocks = {};
  document.querySelectorAll("div.agent").forEach((el) => {
    const parent = el.parentElement.closest("div.agent");
    blocks[el.dataset.path] = {
      box: box(el), parent: parent ? parent.dataset.path : null,
      row: el.closest("tr").previousElementSibling === turn,
      visible: el.offsetHeight > 0 && getComputedStyle(el).visibility === "visible",
    };
  });
  const lanes = {};
  document.querySelectorAll("#agent-lanes .lane").forEach((el) => {
    const bar = el.querySelector(".bar");
    lanes[el.dataset.path] = {
      track: box(el.querySelector(".track")), bar: bar ? box(bar) : null,
      color: bar ? getComputedStyle(bar).backgroundColor : null,
    };
  });
  return {errors: document.documentElement.getAttribute("data-errors"), blocks, lanes};
})()"""


@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


def test_the_tree_is_drawn_as_nested_blocks_and_lanes(chromium: str, tmp_path: Path) -> None:
    rollout = tree_rollout(tmp_path / "tree")
    path = tmp_path / "tree.html"
    path.write_text(render_page(condense(read_timeline(read_rollout(rollout)))))
    shown = evaluate(chromium, path, READ_AGENTS)
    assert shown["errors"] is None
    blocks, lanes = shown["blocks"], shown["lanes"]
    assert blocks.keys() == AGENTS.keys()
    for agent, block in blocks.items():
        # Each block is seen, in the row under the turn that spawned it (the grandchild inside
        # its parent's block, indented further).
        assert block["visible"] and block["row"], agent
        parent = agent.rpartition("/")[0]
        assert block["parent"] == (parent if parent != "/root" else None)
        if block["parent"]:
            assert block["box"]["left"] > blocks[parent]["box"]["left"]
            assert blocks[parent]["box"]["top"] < block["box"]["top"]
            assert block["box"]["bottom"] <= blocks[parent]["box"]["bottom"]
    assert list(lanes) == ["/root", *AGENTS]
    session = lanes["/root"]["bar"]
    for agent in AGENTS:
        bar, track = lanes[agent]["bar"], lanes[agent]["track"]
        # A bar of some width, on the track, starting within the session's own.
        assert bar["width"] > 0
        assert track["left"] - 0.5 <= bar["left"] and bar["right"] <= track["right"] + 0.5
        assert session["left"] - 0.5 <= bar["left"] <= session["right"] + 0.5
    # A child starts after its parent does; a status has its own colour.
    assert lanes["/root/1/1"]["bar"]["left"] >= lanes["/root/1"]["bar"]["left"]
    assert lanes["/root/1"]["bar"]["left"] >= session["left"]
    assert lanes["/root/3"]["color"] != lanes["/root/2"]["color"] == lanes["/root/1"]["color"]
