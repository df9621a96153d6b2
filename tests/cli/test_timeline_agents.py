"""The sub-agents on the timeline page (``relay show --html``): their data, read from the
root's rollout and each child's own, compared with the raw lines; the blocks under the turn
that spawned them and the lanes; a child's rollout missing; the page's bound on agents."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from relay._cli._agent_rollouts import Unread
from relay._cli._timeline import read_timeline, timeline_json
from relay._cli._timeline_agents import read_agents
from relay._cli._timeline_condense import condense
from relay._cli._timeline_page import render_page
from relay._rollout._reader import parse_rollout, read_rollout
from tests.cli.agent_trees import AGENTS, tree_rollout
from tests.cli.timelines import read_page


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tree_rollout(tmp_path_factory.mktemp("tree"))


def _raw(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _events(path: Path, kind: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (line["timestamp"], line["payload"])
        for line in _raw(path)
        if line["type"] == "event_msg" and line["payload"]["type"] == kind
    ]


def _page(path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "relay", "show", "--html", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_agents_data_is_the_tree_of_the_rollouts(tree: Path) -> None:
    data = read_page(_page(tree)).data()
    agents = data["agents"]
    assert [agent["path"] for agent in agents] == ["/root/1", "/root/1/1", "/root/2", "/root/3"]
    assert data["counts"]["agents"] == 4
    # Read independently: each parent's spawn and end lines, each child's own file.
    files = [tree]
    spawned: dict[str, tuple[str, dict[str, Any], Path]] = {}
    for parent in files:  # grows as children are found: the grandchild is in its parent's
        for time, spawn in _events(parent, "sub_agent_spawned"):
            spawned[spawn["path"]] = (time, spawn, parent)
            files.append(Path(spawn["rollout_path"]))
    assert len(files) == 5
    for agent in agents:
        time, spawn, parent = spawned[agent["path"]]
        role, status, message = AGENTS[agent["path"]]
        [end] = [e for _, e in _events(parent, "sub_agent_ended") if e["path"] == spawn["path"]]
        child = Path(spawn["rollout_path"])
        turn_ends = _events(child, "turn_complete") + _events(child, "turn_aborted")
        assert agent == agent | {
            "id": spawn["agent_id"],
            "parent_id": spawn["parent_id"],
            "depth": spawn["depth"],
            "role": role,
            "status": status,
            "message": end["message"],
            "prompt": spawn["prompt"],
            "spawned": time,
            "started": _raw(child)[0]["timestamp"],
            "ended": max(stamp for stamp, _ in turn_ends),
            "runs": 1,
            "rollout": spawn["rollout_path"],
            "rollout_state": "read",
            "turns": len(_events(child, "turn_started")),
            "errors": len(_events(child, "error")),
        }
        assert message is None or agent["message"] == message
        # The turn that spawned it: the parent's turn open at the spawn line.
        [(_, started)] = _events(parent, "turn_started")
        assert agent["turn_id"] == started["turn_id"]
        assert agent["started"] <= agent["ended"]
    by_path = {agent["path"]: agent for agent in agents}
    assert by_path["/root/1/1"]["parent_id"] == by_path["/root/1"]["id"]
    assert by_path["/root/1"]["parent_id"] == data["session"]["id"]
    assert by_path["/root/1"]["tool_calls"] == 1 and by_path["/root/3"]["model_calls"] == 0


def test_the_children_are_under_the_turn_that_spawned_them(tree: Path) -> None:
    html = _page(tree)
    shown = read_page(html)
    rows = shown.tables["turns"]
    # The turn's row, then the row of its children's blocks, nested as the tree is.
    assert rows[1][0] == "sub-1"
    nested = rows[2][0]
    for path, (role, status, _) in AGENTS.items():
        assert f"{path} {role} · {status}" in nested
    block = html[html.index('id="agent-root-1"') :]
    assert block.index('data-path="/root/1/1"') < block.index('data-path="/root/2"')
    assert "task: Write the lexer." in nested and "last message: the server refused it" in nested
    lanes = [attrs.get("data-path") for tag, attrs in shown.tags if attrs.get("class") == "lane"]
    assert lanes == ["/root", *AGENTS]
    assert "4 sub-agents" in html


def test_a_missing_child_is_said_on_the_page(tree: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in tree.parent.glob("*.jsonl"):
        (copy / path.name).write_text(path.read_text().replace(str(tree.parent), str(copy)))
    gone = next(Path(s["rollout_path"]) for _, s in _events(tree, "sub_agent_spawned"))
    (copy / gone.name).unlink()  # /root/1: its own child is not found either
    data = read_page(html := _page(copy / tree.name)).data()
    assert [(a["path"], a["rollout_state"]) for a in data["agents"]] == [
        ("/root/1", "missing"),
        ("/root/2", "read"),
        ("/root/3", "read"),
    ]
    assert data["agents"][0]["status"] == "completed"
    assert "its rollout is missing (<code>" in html


def _spawns(count: int) -> str:
    lines = [{"type": "session_meta", "payload": {"id": "root", "cwd": "/w"}}]
    for n in range(1, count + 1):
        spawn = {
            "type": "sub_agent_spawned",
            "agent_id": f"a{n}",
            "path": f"/root/{n}",
            "parent_id": "root",
            "depth": 1,
            "role": "worker",
            "model": "m",
            "rollout_path": None,
        }
        lines.append({"type": "event_msg", "payload": spawn})
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_the_page_lists_at_most_its_bound_of_agents() -> None:
    rollout = parse_rollout(_spawns(7))
    agents, total = read_agents(rollout, limit=3)
    assert ([a.path for a in agents], total) == (["/root/1", "/root/2", "/root/3"], 7)
    assert {a.rollout_state for a in agents} == {"not_recorded"}
    assert {a.status for a in agents} == {"running"}
    page = render_page(condense(read_timeline(rollout)))
    assert "Sub-agents (7)" in page


def test_a_load_function_reads_the_children() -> None:
    """The reading is pure given ``load``: children come from it, not from files."""
    child = parse_rollout(_spawns(0).replace('"root"', '"a1"'))
    asked: list[str] = []

    def load(spawned: Any, parent: Any) -> Any:
        asked.append(spawned.path)
        return child if spawned.path == "/root/1" else Unread("missing", "gone")

    timeline = read_timeline(parse_rollout(_spawns(2)), load=load)
    assert asked == ["/root/1", "/root/2"]
    assert [a.rollout_state for a in timeline.agents] == ["read", "missing"]
    assert timeline_json(timeline)["counts"]["agents"] == 2


def test_a_session_without_agents_has_no_section(tree: Path) -> None:
    rollout = read_rollout(tree)
    timeline = read_timeline(rollout, agents=False)
    assert timeline.agents == () and timeline.counts.agents == 0
    assert "Sub-agents" not in render_page(timeline)
