"""Text that UTF-8 cannot carry, at ``relay app-server``'s edges (docs/decisions.md, "Text
that UTF-8 cannot carry"): a lone surrogate a client sends is refused naming the field, one a
model sends is carried as U+FFFD, and the thread goes on either way. The real command over
pipes, every line checked against the schema (:mod:`.client`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .client import app_server, mock_server, write_script


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def answer(value: str) -> dict[str, Any]:
    return {
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "id": "msg-1",
                "content": [{"type": "output_text", "text": value}],
            }
        ]
    }


def completed_turn(server: Any, thread: str, ask: str) -> dict[str, Any]:
    """``turn/start`` of ``ask``; its ``turn/completed`` params."""
    server.call("turn/start", {"threadId": thread, "input": text(ask)})
    ended: dict[str, Any] = server.next("turn/completed", threadId=thread)
    return ended


def test_a_lone_surrogate_in_turn_input_is_refused_naming_the_field(tmp_path: Path) -> None:
    script = write_script(tmp_path / "model.json", answer("Fine."))
    with app_server("--model-script", str(script), cwd=tmp_path) as server:
        server.initialize()
        thread = server.start_thread(cwd=str(tmp_path))
        # The client's JSON escapes it: "hi \ud800 there".
        asked = server.request("turn/start", {"threadId": thread, "input": text("hi \ud800 there")})
        error = server.error(asked)
        assert error["code"] == -32602
        assert error["message"] == (
            "input[0].text: holds a lone surrogate (\\ud800 at character 3), which is no "
            "character: UTF-8 cannot carry it"
        )
        refused = server.error(server.request("thread/start", {"cwd": "/tmp/\udc80"}))
        assert refused["code"] == -32602 and refused["message"].startswith("cwd: ")
        # The thread goes on: its next turn runs and completes.
        ended = completed_turn(server, thread, "hi")
        assert ended["turn"]["status"] == "completed"
        assert ended["turn"]["items"][-1]["text"] == "Fine."
        assert server.close_input() == 0


def test_a_lone_surrogate_from_the_model_server_is_carried_as_a_replacement(
    tmp_path: Path,
) -> None:
    # relay's mock model server streams the reply as JSON, the surrogate escaped.
    script = write_script(tmp_path / "model.json", {"text": "bad \ud800 answer"}, "Second.")
    with (
        mock_server(script) as model,
        app_server(*model, cwd=tmp_path) as server,
    ):
        server.initialize()
        thread = server.start_thread(cwd=str(tmp_path))
        first = completed_turn(server, thread, "one")
        assert first["turn"]["status"] == "completed", first
        assert first["turn"]["items"][-1]["text"] == "bad \ufffd answer"
        second = completed_turn(server, thread, "two")
        assert second["turn"]["status"] == "completed", second
        assert second["turn"]["items"][-1]["text"] == "Second."
        assert server.close_input() == 0
