"""Approvals and structured output through ``relay app-server``: the real command over pipes,
the scripted model, every line checked against Codex 0.169's schema (:mod:`.client`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from .client import AppServer, app_server, write_script

SHELL = ("-c", "tools.shell=true")


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def shell(*argv: str, call_id: str) -> dict[str, Any]:
    return {
        "function_call": {"name": "shell", "arguments": {"argv": list(argv)}, "call_id": call_id}
    }


def asked(server: AppServer, thread: str) -> dict[str, Any]:
    """The next approval request of ``thread``, whole (its id answers it)."""
    return server.wait(
        lambda m: (
            m.get("method") == "item/commandExecution/requestApproval"
            and m["params"]["threadId"] == thread
        )
    )


def answer(server: AppServer, request: dict[str, Any], decision: str) -> None:
    server.send({"id": request["id"], "result": {"decision": decision}})


def untrusted_thread(server: AppServer, tmp_path: Path) -> str:
    server.initialize()
    started = server.call(
        "thread/start", {"cwd": str(tmp_path), "approvalPolicy": "untrusted", "ephemeral": True}
    )
    assert started["approvalPolicy"] == "untrusted"
    server.next("thread/started")
    thread: str = started["thread"]["id"]
    return thread


def test_an_accepted_command_runs(tmp_path: Path) -> None:
    script = write_script(tmp_path / "model.json", shell("touch", "made", call_id="c1"), "made it")
    with app_server("--model-script", str(script), *SHELL, cwd=tmp_path) as server:
        thread = untrusted_thread(server, tmp_path)
        turn = server.call("turn/start", {"threadId": thread, "input": text("go")})["turn"]
        started = server.next("item/started", threadId=thread)
        while started["item"]["type"] != "commandExecution":
            started = server.next("item/started", threadId=thread)
        request = asked(server, thread)
        params = request["params"]
        assert (params["turnId"], params["itemId"], params["command"]) == (
            turn["id"],
            "c1",
            "touch made",
        )
        assert params["cwd"] == str(tmp_path) and params["reason"]
        assert not (tmp_path / "made").exists()  # nothing runs before the decision
        answer(server, request, "accept")
        resolved = server.next("serverRequest/resolved", threadId=thread)
        assert resolved["requestId"] == request["id"]
        item = server.next("item/completed", threadId=thread)["item"]
        while item["type"] != "commandExecution":
            item = server.next("item/completed", threadId=thread)["item"]
        assert (item["status"], item["exitCode"]) == ("completed", 0)
        assert (tmp_path / "made").exists()
        done = server.next("turn/completed", threadId=thread)["turn"]
        assert done["status"] == "completed" and done["items"][0]["text"] == "made it"
        assert server.close_input() == 0


def test_a_declined_command_does_not_run_and_the_turn_goes_on(tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "model.json", shell("touch", "made", call_id="c1"), "I was not allowed"
    )
    with app_server("--model-script", str(script), *SHELL, cwd=tmp_path) as server:
        thread = untrusted_thread(server, tmp_path)
        server.call("turn/start", {"threadId": thread, "input": text("go")})
        answer(server, asked(server, thread), "decline")
        item = server.next("item/completed", threadId=thread)["item"]
        while item["type"] != "commandExecution":
            item = server.next("item/completed", threadId=thread)["item"]
        assert (item["id"], item["status"], item["exitCode"]) == ("c1", "declined", None)
        done = server.next("turn/completed", threadId=thread)["turn"]
        assert done["status"] == "completed" and done["items"][0]["text"] == "I was not allowed"
        assert not (tmp_path / "made").exists()
        assert server.close_input() == 0


def test_cancel_ends_the_turn_and_accept_for_session_asks_once(tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "model.json",
        shell("touch", "never", call_id="c1"),
        shell("touch", "a", call_id="c2"),
        shell("touch", "a", call_id="c3"),
        "twice",
    )
    with app_server("--model-script", str(script), *SHELL, cwd=tmp_path) as server:
        thread = untrusted_thread(server, tmp_path)
        server.call("turn/start", {"threadId": thread, "input": text("one")})
        answer(server, asked(server, thread), "cancel")
        ended = server.next("turn/completed", threadId=thread)["turn"]
        assert ended["status"] == "interrupted"
        server.call("turn/start", {"threadId": thread, "input": text("two")})
        answer(server, asked(server, thread), "acceptForSession")
        done = server.next("turn/completed", threadId=thread)["turn"]
        assert done["status"] == "completed"
        requests = [m for m in server.seen if m.get("method", "").endswith("requestApproval")]
        assert [m["params"]["itemId"] for m in requests] == ["c1", "c2"]
        assert (tmp_path / "a").exists() and not (tmp_path / "never").exists()
        assert server.close_input() == 0


def test_an_interrupt_resolves_the_request_it_leaves_unanswered(tmp_path: Path) -> None:
    script = write_script(tmp_path / "model.json", shell("touch", "x", call_id="c1"))
    with app_server("--model-script", str(script), *SHELL, cwd=tmp_path) as server:
        thread = untrusted_thread(server, tmp_path)
        turn = server.call("turn/start", {"threadId": thread, "input": text("go")})["turn"]
        request = asked(server, thread)
        server.call("turn/interrupt", {"threadId": thread, "turnId": turn["id"]})
        assert server.next("serverRequest/resolved")["requestId"] == request["id"]
        assert server.next("turn/completed", threadId=thread)["turn"]["status"] == "interrupted"
        answer(server, request, "accept")  # too late: answers nothing, runs nothing
        server.call("thread/compact/start", {"threadId": thread})
        server.next("turn/completed", threadId=thread)
        assert not (tmp_path / "x").exists()
        assert not [m for m in server.seen if m.get("method") == "error"]
        assert server.close_input() == 0


def test_output_schema_asks_for_json_that_fits(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    script = write_script(
        tmp_path / "model.json", {"json": {"answer": 42}}, {"json": {"answer": "x"}}
    )
    with app_server("--model-script", str(script), cwd=tmp_path) as server:
        server.initialize()
        thread = server.start_thread()
        ask = {"threadId": thread, "input": text("how many?"), "outputSchema": schema}
        server.call("turn/start", ask)
        done = server.next("turn/completed", threadId=thread)["turn"]
        assert done["status"] == "completed"
        assert done["items"][0]["text"] == '{"answer": 42}'
        server.call("turn/start", ask)
        failed = server.next("turn/completed", threadId=thread)["turn"]
        assert failed["status"] == "failed" and "answer" in failed["error"]["message"]
        bad = server.error(
            server.request("turn/start", {**ask, "outputSchema": {"type": "no such type"}})
        )
        assert bad["code"] == -32602 and bad["message"].startswith("outputSchema: ")
        assert server.close_input() == 0


@pytest.mark.parametrize("decision", ["accept", "decline"])
def test_two_threads_ask_apart(tmp_path: Path, decision: str) -> None:
    # Each thread's session has its own model: the same call is asked about in both, and each
    # answer reaches its own thread's call alone.
    script = write_script(tmp_path / "model.json", shell("touch", "f", call_id="c1"), "end")
    with app_server("--model-script", str(script), *SHELL, cwd=tmp_path) as server:
        first = untrusted_thread(server, tmp_path)
        started = server.call("thread/start", {"approvalPolicy": "untrusted", "ephemeral": True})[
            "thread"
        ]["id"]
        for thread in (first, started):
            server.call("turn/start", {"threadId": thread, "input": text("go")})
        one, two = asked(server, first), asked(server, started)
        assert one["id"] != two["id"]
        answer(server, two, decision)
        answer(server, one, "accept")
        statuses = {}
        for _ in range(2):
            item = server.next("item/completed")
            while item["item"]["type"] != "commandExecution":
                item = server.next("item/completed")
            statuses[item["threadId"]] = item["item"]["status"]
        assert statuses == {
            first: "completed",
            started: "completed" if decision == "accept" else "declined",
        }
        assert server.close_input() == 0


@pytest.mark.slow  # an MCP server of its own
def test_mcp_tool_calls_are_mcp_items_and_asked_about_as_commands(tmp_path: Path) -> None:
    server_script = Path(__file__).resolve().parent.parent / "mcp" / "mcp_server.py"
    script = write_script(
        tmp_path / "model.json",
        {"function_call": {"name": "mcp__test__echo", "arguments": {"text": "hi"}, "call_id": "e"}},
        {
            "function_call": {
                "name": "mcp__test__fail",
                "arguments": {"message": "no"},
                "call_id": "f",
            }
        },
        "done",
    )
    mcp = (
        "-c", f"mcp_servers.test.command={json.dumps(sys.executable)}",
        "-c", f"mcp_servers.test.args=[{json.dumps(str(server_script))}]",
        "-c", 'mcp_servers.test.approval="always"',
    )  # fmt: skip
    with app_server("--model-script", str(script), *mcp, cwd=tmp_path) as server:
        server.initialize()
        thread = server.start_thread()
        server.call("turn/start", {"threadId": thread, "input": text("go")})
        first = asked(server, thread)
        assert first["params"]["command"] == 'test.echo {"text": "hi"}'
        answer(server, first, "accept")
        answer(server, asked(server, thread), "accept")
        seen = server.until("turn/completed", threadId=thread)
        calls = [
            m["params"]["item"]
            for m in seen
            if m.get("method") == "item/completed" and m["params"]["item"]["type"] == "mcpToolCall"
        ]
        assert [(c["server"], c["tool"], c["arguments"], c["status"]) for c in calls] == [
            ("test", "echo", {"text": "hi"}, "completed"),
            ("test", "fail", {"message": "no"}, "failed"),
        ]
        assert calls[0]["result"] == {"content": [{"type": "text", "text": "hi"}]}
        assert "no" in calls[1]["error"]["message"]
        assert server.close_input() == 0
