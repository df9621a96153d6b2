"""A ``turn/start`` that sets ``approvalPolicy`` or ``sandboxPolicy``: applied to that turn and
the later ones, as Codex does, through the session's gate (docs/approvals.md)."""

from __future__ import annotations

from pathlib import Path

import attrs

from relay._appserver._params import SandboxAsked
from relay._appserver._threads import sandbox_difference
from relay._base._config import Config
from relay._base._sandbox_config import SandboxWorkspaceWrite

from .client import app_server, write_script
from .test_approvals import SHELL, shell, text, untrusted_thread


def workspace(tmp_path: Path, *roots: str, network: bool = False) -> Config:
    write = SandboxWorkspaceWrite(writable_roots=list(roots), network_access=network)
    return attrs.evolve(
        Config(), sandbox_mode="workspace-write", sandbox_workspace_write=write, cwd=str(tmp_path)
    )


def test_the_cwd_in_writable_roots_is_the_session_s_own_sandbox(tmp_path: Path) -> None:
    config = workspace(tmp_path)
    asked = SandboxAsked("workspace-write", (str(tmp_path),), False)
    assert sandbox_difference(config, asked, str(tmp_path)) is None


def test_a_difference_names_what_differs_not_the_mode(tmp_path: Path) -> None:
    config = workspace(tmp_path)
    other = tmp_path / "other"
    roots = sandbox_difference(
        config, SandboxAsked("workspace-write", (str(other),), False), str(tmp_path)
    )
    assert roots is not None and "writableRoots" in roots and str(other) in roots
    assert "sandbox is 'workspace-write'" not in roots
    network = sandbox_difference(config, SandboxAsked("workspace-write", (), True), str(tmp_path))
    assert network is not None and "networkAccess" in network
    mode = sandbox_difference(config, SandboxAsked("read-only"), str(tmp_path))
    assert mode is not None and "'read-only'" in mode


def test_a_turn_s_policy_holds_for_it_and_the_later_turns(tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "model.json",
        shell("touch", "one", call_id="c1"),
        "first",
        shell("touch", "two", call_id="c2"),
        "second",
    )
    with app_server("--model-script", str(script), *SHELL, cwd=tmp_path) as server:
        thread = untrusted_thread(server, tmp_path)
        loosen = {"threadId": thread, "input": text("go"), "approvalPolicy": "never"}
        server.call("turn/start", loosen)
        assert server.next("turn/completed", threadId=thread)["turn"]["status"] == "completed"
        server.call("turn/start", {"threadId": thread, "input": text("again")})
        assert server.next("turn/completed", threadId=thread)["turn"]["status"] == "completed"
        assert (tmp_path / "one").exists() and (tmp_path / "two").exists()
        assert not [
            m for m in server.seen if m.get("method") == "item/commandExecution/requestApproval"
        ]
        assert server.close_input() == 0


def test_a_sandbox_policy_listing_the_cwd_is_not_refused(tmp_path: Path) -> None:
    script = write_script(tmp_path / "model.json", "ok")
    with app_server("--model-script", str(script), cwd=tmp_path) as server:
        server.initialize()
        thread = server.start_thread(cwd=str(tmp_path), sandbox="workspace-write")
        policy = {
            "type": "workspaceWrite",
            "writableRoots": [str(tmp_path)],
            "networkAccess": False,
        }
        ask = {"threadId": thread, "input": text("hi"), "sandboxPolicy": policy}
        assert server.call("turn/start", ask)["turn"]["status"] == "inProgress"
        assert server.next("turn/completed", threadId=thread)["turn"]["status"] == "completed"
        assert server.close_input() == 0
