"""``relay app-server`` as a client meets it: the real command over pipes, the scripted model,
every line it writes checked against Codex 0.169's schema (:mod:`.client`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .client import RpcFailed, app_server, mock_server, write_script

HELLO = {
    "output": [
        {"type": "reasoning", "id": "rs-1", "summary": [{"type": "summary_text", "text": "Hm."}]},
        {
            "type": "message",
            "role": "assistant",
            "id": "msg-1",
            "content": [{"type": "output_text", "text": "Hello there."}],
        },
    ]
}


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def methods(messages: list[dict[str, Any]]) -> list[str]:
    return [m.get("method", "answer") for m in messages]


def test_one_turn_answers_then_streams_the_turn(tmp_path: Path) -> None:
    script = write_script(tmp_path / "model.json", HELLO)
    with app_server("--model-script", str(script), cwd=tmp_path) as server:
        server.initialize()
        thread = server.start_thread(cwd=str(tmp_path))
        ask = server.request("turn/start", {"threadId": thread, "input": text("hi")})
        seen = server.until("turn/completed")
        assert methods(seen) == [
            "answer",
            "turn/started",
            "item/started",
            "item/completed",
            "item/started",
            # The reasoning summary streams as the server sends it.
            "item/reasoning/summaryPartAdded",
            *["item/reasoning/summaryTextDelta"] * 2,
            "item/completed",
            "item/started",
            *["item/agentMessage/delta"] * 2,
            "item/completed",
            "thread/tokenUsage/updated",
            "turn/completed",
        ]
        turn = seen[0]["result"]["turn"]
        assert seen[0]["id"] == ask and turn["status"] == "inProgress"
        items = [m["params"]["item"] for m in seen if m.get("method") == "item/completed"]
        assert [item["type"] for item in items] == ["userMessage", "reasoning", "agentMessage"]
        assert items[0]["content"] == [{"type": "text", "text": "hi", "text_elements": []}]
        assert items[1]["summary"] == ["Hm."]
        assert items[2] == {"type": "agentMessage", "id": "msg-1", "text": "Hello there."}
        deltas = [
            m["params"]["delta"] for m in seen if m.get("method") == "item/agentMessage/delta"
        ]
        assert "".join(deltas) == "Hello there."
        ended = seen[-1]["params"]
        assert ended["threadId"] == thread
        assert ended["turn"]["id"] == turn["id"]
        assert ended["turn"]["status"] == "completed"
        assert ended["turn"]["error"] is None
        assert ended["turn"]["items"] == [items[2]]
        assert all(
            m["params"]["threadId"] == thread
            and m["params"].get("turnId", turn["id"]) == turn["id"]
            for m in seen[1:]
        )
        assert server.close_input() == 0


def test_bad_lines_are_answered_and_the_server_reads_on(tmp_path: Path) -> None:
    with app_server(cwd=tmp_path) as server:
        server.send_raw("this is not json\n")
        server.send_raw("[1, 2]\n")
        server.send_raw('{"id": 7, "method": "no/such/method"}\n')
        answer = server.call("initialize", {"clientInfo": {"name": "x", "version": "1"}})
        assert answer["platformFamily"] == "unix"
        not_json, batch, unknown = server.seen[:3]
        assert not_json["id"] is None and not_json["error"]["code"] == -32700
        assert batch["id"] is None and batch["error"]["code"] == -32600
        assert unknown == {
            "id": 7,
            "error": {"code": -32601, "message": "unknown method: no/such/method"},
        }
        assert server.close_input() == 0


#: Requests whose params are wrong, each with the field its error names.
BAD_PARAMS = [
    ("thread/start", {"cwd": 5}, "cwd"),
    ("thread/start", {"approvalPolicy": "sometimes"}, "approvalPolicy"),
    ("thread/start", {"modelProvider": "nobody"}, "modelProvider"),
    ("turn/start", {"input": text("hi")}, "threadId"),
    ("turn/start", {"threadId": "nope", "input": text("hi")}, "threadId"),
    (
        "turn/start",
        {"threadId": "t", "input": [{"type": "audio", "url": "x"}]},
        "input[0].type",
    ),
    ("turn/start", {"threadId": "t", "input": []}, "input"),
    ("turn/interrupt", {"threadId": "t"}, "turnId"),
    ("thread/resume", {"threadId": "no-such-thread"}, "threadId"),
    ("thread/compact/start", [], "params"),
]


def test_bad_params_are_refused_naming_the_field(tmp_path: Path) -> None:
    with app_server(cwd=tmp_path) as server:
        server.initialize()
        for method, params, field in BAD_PARAMS:
            error = server.error(server.request(method, params))
            assert error["code"] == -32602, (method, params, error)
            assert error["message"].startswith(f"{field}: "), (method, params, error)
        assert server.close_input() == 0


def test_methods_without_a_counterpart_are_refused_as_unsupported(tmp_path: Path) -> None:
    with app_server(cwd=tmp_path) as server:
        server.initialize()
        for method in ("account/read", "account/login/start", "fuzzyFileSearch", "plugin/list"):
            with pytest.raises(RpcFailed) as refused:
                server.call(method, {})
            assert refused.value.code == -32601
            assert refused.value.message.startswith(f"unsupported method: {method} ")
        assert server.close_input() == 0


def test_a_request_before_initialize_is_refused(tmp_path: Path) -> None:
    with app_server(cwd=tmp_path) as server:
        error = server.error(server.request("thread/start", {}))
        assert error["code"] == -32600 and "initialize" in error["message"]
        server.initialize()
        again = server.error(
            server.request("initialize", {"clientInfo": {"name": "a", "version": "1"}})
        )
        assert again["code"] == -32600 and "already initialized" in again["message"]
        assert server.close_input() == 0


@pytest.mark.slow  # three processes
def test_two_threads_run_at_once_each_its_own_session(tmp_path: Path) -> None:
    # The mock server's replies go out in order: the first thread's turn waits in a tool call
    # while the second thread's turn runs to its end.
    script = write_script(
        tmp_path / "model.json",
        {"function_call": {"name": "sleep", "arguments": {"seconds": 3600}}},
        "second answer",
    )
    with mock_server(script) as model, app_server(*model, cwd=tmp_path) as server:
        server.initialize()
        first = server.start_thread()
        second = server.start_thread()
        assert first != second
        turn = server.call("turn/start", {"threadId": first, "input": text("one")})["turn"]
        call = server.next("item/started", threadId=first)
        while call["item"]["type"] != "dynamicToolCall":
            call = server.next("item/started", threadId=first)
        assert call["item"]["tool"] == "sleep" and call["item"]["status"] == "inProgress"
        server.call("turn/start", {"threadId": second, "input": text("two")})
        done = server.next("turn/completed", threadId=second)
        assert done["turn"]["status"] == "completed"
        assert done["turn"]["items"][0]["text"] == "second answer"
        server.call("turn/interrupt", {"threadId": first, "turnId": turn["id"]})
        ended = server.next("turn/completed", threadId=first)
        assert ended["turn"]["id"] == turn["id"] and ended["turn"]["status"] == "interrupted"
        assert server.close_input() == 0


def test_a_thread_on_the_scripted_model_loads_no_http_stack_nor_other_shells(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path / "model.json", "hello")
    code = f"""
import json, sys
sys.argv = ["relay", "app-server", "--model-script", {str(script)!r}]
from relay._cli._main import main
status = main()
loaded = sorted(name for name, module in sys.modules.items() if module is not None)
print(json.dumps([status, loaded]))
"""
    requests = [
        {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}},
        {"id": 2, "method": "thread/start", "params": {"ephemeral": True}},
    ]
    result = subprocess.run(
        [sys.executable, "-c", code],
        input="".join(json.dumps(r) + "\n" for r in requests),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    status, loaded = json.loads(result.stdout.splitlines()[-1])
    assert status == 0
    assert "thread/started" in result.stdout
    unused = ("relay._wire", "relay._drive", "relay._eval", "relay._cluster", "relay._testing")
    unused += ("relay._mcp", "openai", "hypercorn", "mcp", "ray")
    assert [m for m in loaded if any(m == u or m.startswith(f"{u}.") for u in unused)] == []
