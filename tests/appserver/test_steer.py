"""``turn/steer`` over ``relay app-server``: input for the running turn, which its next step
takes; a steer for another turn is an error naming it."""

from __future__ import annotations

from pathlib import Path

from .client import app_server, write_script
from .test_approvals import SHELL, answer, asked, shell, text, untrusted_thread


def test_a_steer_lands_in_the_running_turn(tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "model.json", shell("touch", "made", call_id="c1"), fallback="echo"
    )
    with app_server("--model-script", str(script), *SHELL, cwd=tmp_path) as server:
        thread = untrusted_thread(server, tmp_path)
        turn = server.call("turn/start", {"threadId": thread, "input": text("go")})["turn"]
        request = asked(server, thread)  # the turn waits for the decision: it is running
        wrong = server.request(
            "turn/steer", {"threadId": thread, "expectedTurnId": "other", "input": text("x")}
        )
        error = server.error(wrong)
        # As Codex: an invalid request, naming the turn.
        assert error["code"] == -32600
        assert error["message"].startswith("expectedTurnId: turn other is not running")
        assert turn["id"] in error["message"]
        steer = {"threadId": thread, "expectedTurnId": turn["id"], "input": text("also this")}
        assert server.call("turn/steer", steer) == {"turnId": turn["id"]}
        answer(server, request, "accept")
        done = server.next("turn/completed", threadId=thread)["turn"]
        assert done["id"] == turn["id"] and done["status"] == "completed"
        assert done["items"][-1]["text"] == "echo: also this"
        late = server.request("turn/steer", steer)
        assert f"turn {turn['id']} is not running" in server.error(late)["message"]
        assert server.close_input() == 0
