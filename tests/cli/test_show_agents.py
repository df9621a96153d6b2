"""``relay show`` of a session with sub-agents: the tree, each child's transcript under the
line that spawned it, read from its own rollout, and how its work ended.

The tree is a real session (``tests/cli/agent_trees.py``); the odd cases (a child's rollout
missing, moved with its parent, naming a file above it, not recorded, a child opened again by
a resume) are rollouts written as JSON lines.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from relay._cli._transcript import NESTED, render_transcript
from relay._rollout._reader import read_rollout
from tests.cli.agent_trees import AGENTS, tree_rollout


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The root's rollout of the tree (do not change its files: copy them)."""
    return tree_rollout(tmp_path_factory.mktemp("tree"))


def _raw(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _spawned(path: Path) -> dict[str, dict[str, Any]]:
    """The ``sub_agent_spawned`` payloads of a rollout, by the child's path."""
    return {
        line["payload"]["path"]: line["payload"]
        for line in _raw(path)
        if line["type"] == "event_msg" and line["payload"]["type"] == "sub_agent_spawned"
    }


def _show(path: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "relay", "show", str(path), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _block(lines: list[str], spawn_line: str) -> list[str]:
    """The lines nested under ``spawn_line``, up to its foot (``└``) at the same depth."""
    start = lines.index(spawn_line)
    indent = ""
    while spawn_line.startswith(indent + NESTED):
        indent += NESTED
    foot = next(
        i for i in range(start + 1, len(lines)) if lines[i].startswith(indent + "  └ agent ")
    )
    return lines[start + 1 : foot + 1]


def test_the_tree_is_shown_each_child_under_its_spawn_with_how_it_ended(tree: Path) -> None:
    out = _show(tree)
    lines = out.splitlines()
    root = _spawned(tree)
    child_one = Path(root["/root/1"]["rollout_path"])
    spawned = {**root, **_spawned(child_one)}
    assert spawned.keys() == AGENTS.keys()
    for path, (role, status, message) in AGENTS.items():
        depth = path.count("/") - 1
        indent = NESTED * (depth - 1)
        [spawn] = [line for line in lines if line.startswith(f"{indent}  ⑂ agent {path} spawned")]
        assert f"({role})" in spawn
        block = _block(lines, spawn)
        # Its own transcript comes first: its session's header, read from its rollout.
        assert block[0].startswith(f"{indent}{NESTED}● session {spawned[path]['agent_id']}")
        said = f": {message}" if message else ""
        assert block[-1].startswith(f"{indent}  └ agent {path} {status}{said}")
    # What each child did is in its block, at its depth.
    assert f"{NESTED}{NESTED}  model › The lexer is written." in lines
    assert f"{NESTED}  model › The old tests are in legacy/." in lines
    assert f"{NESTED}  ! error [bad_request]: the server refused it" in lines
    # The grandchild's transcript is inside its parent's block, not after it.
    parent_block = _block(lines, next(x for x in lines if x.startswith("  ⑂ agent /root/1 ")))
    assert f"{NESTED}{NESTED}  model › The lexer is written." in parent_block
    # The root's own lines are all there too, once.
    assert lines.count("  model › Three agents are at work.") == 1


def test_without_agents_only_the_parent_s_lines_are_shown(tree: Path) -> None:
    lines = list(render_transcript(read_rollout(tree), agents=False))
    assert not any(line.startswith(NESTED) for line in lines)
    assert "  ⑂ agent /root/2 completed: The old tests are in legacy/." in lines


def _copy_tree(tree: Path, to: Path, recorded: Path) -> Path:
    """The tree's files copied into ``to``, each rollout path they record made to point into
    ``recorded``; the root's copy."""
    to.mkdir()
    for path in tree.parent.glob("*.jsonl"):
        (to / path.name).write_text(path.read_text().replace(str(tree.parent), str(recorded)))
    return to / tree.name


def test_a_missing_child_rollout_is_said_and_the_rest_is_shown(tree: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    root = _copy_tree(tree, copy, copy)
    gone = copy / Path(_spawned(tree)["/root/2"]["rollout_path"]).name
    gone.unlink()
    lines = list(render_transcript(read_rollout(root)))
    spawn = next(line for line in lines if line.startswith("  ⑂ agent /root/2 spawned"))
    block = _block(lines, spawn)
    assert block[0] == f"{NESTED}(its rollout {gone} is missing: its transcript is not shown)"
    assert block[-1] == "  └ agent /root/2 completed: The old tests are in legacy/."
    assert f"{NESTED}  model › The parser is built." in lines
    assert f"{NESTED}{NESTED}  model › The lexer is written." in lines


def test_a_tree_moved_elsewhere_is_read_beside_the_root(tree: Path, tmp_path: Path) -> None:
    # The recorded paths lead to a directory that does not exist.
    root = _copy_tree(tree, tmp_path / "moved", tmp_path / "gone")
    lines = list(render_transcript(read_rollout(root)))
    assert f"{NESTED}{NESTED}  model › The lexer is written." in lines
    assert f"{NESTED}  model › The old tests are in legacy/." in lines
    assert not any("missing" in line for line in lines)


# --------------------------------------------------------------------------- written rollouts


def _write(path: Path, session: str, events: list[dict[str, Any]], **meta: Any) -> Path:
    lines = [{"type": "session_meta", "payload": {"id": session, "cwd": "/w", **meta}}]
    lines += [{"type": "event_msg", "payload": event} for event in events]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _turn(turn: str, *events: dict[str, Any]) -> list[dict[str, Any]]:
    started = {"type": "turn_started", "turn_id": turn, "model_context_window": None}
    done = {"type": "turn_complete", "turn_id": turn, "last_agent_message": None}
    return [{**started, "started_at": 0.0}, *events, {**done, "duration_ms": 1}]


def _spawn(agent: str, path: str, rollout: str | None, parent: str = "root") -> dict[str, Any]:
    return {
        "type": "sub_agent_spawned",
        "agent_id": agent,
        "path": path,
        "parent_id": parent,
        "depth": path.count("/") - 1,
        "role": "default",
        "model": "m",
        "prompt": "go",
        "rollout_path": rollout,
    }


def _ended(agent: str, path: str, status: str, message: str | None) -> dict[str, Any]:
    return {
        "type": "sub_agent_ended",
        "agent_id": agent,
        "path": path,
        "status": status,
        "message": message,
    }


def _error(message: str) -> dict[str, Any]:
    return {"type": "error", "message": message, "code": "bad_request"}


def test_a_rollout_naming_one_shown_above_ends_the_loop(tmp_path: Path) -> None:
    root = tmp_path / "root.jsonl"
    child = tmp_path / "child.jsonl"
    _write(root, "root", _turn("t1", _spawn("a", "/root/1", str(child))))
    # The child's rollout claims the root as its own child: shown once, then said.
    _write(child, "a", _turn("t1", _spawn("r", "/root/1/1", str(root), "a")), parent_id="root")
    lines = list(render_transcript(read_rollout(root)))
    assert (
        f"{NESTED}{NESTED}(its rollout {root} is shown above (a loop): its transcript is not shown)"
        in lines
    )
    assert "  └ agent /root/1: no end recorded (still at work when the parent stopped)" in lines


def test_a_child_without_a_rollout_and_one_opened_again(tmp_path: Path) -> None:
    root = tmp_path / "root.jsonl"
    events = _turn(
        "t1",
        _spawn("a", "/root/1", None),
        _ended("a", "/root/1", "interrupted", None),
    )
    # A resume opens the child again, and it ends a second time.
    events += _turn("t2", _spawn("a", "/root/1", None), _ended("a", "/root/1", "completed", "ok"))
    _write(root, "root", events)
    lines = list(render_transcript(read_rollout(root)))
    assert (
        f"{NESTED}(it kept no rollout (persistence was off): its transcript is not shown)" in lines
    )
    assert "  └ agent /root/1 completed: ok (the last of 2 runs)" in lines
    assert "  ⑂ agent /root/1 opened again (default)" in lines
    assert sum(1 for line in lines if line.startswith("  └ agent")) == 1


def test_a_child_s_control_characters_are_written_out(tmp_path: Path) -> None:
    root = tmp_path / "root.jsonl"
    child = _write(tmp_path / "child.jsonl", "a", _turn("t1", _error("bad \x1b[2J news")))
    _write(root, "root", _turn("t1", _spawn("a", "/root/1", str(child))))
    out = "\n".join(render_transcript(read_rollout(root)))
    assert "\x1b" not in out
    assert f"{NESTED}  ! error [bad_request]: bad \\x1b[2J news" in out.splitlines()
