"""The thread store over ``relay app-server``: ``thread/list``, ``thread/read``,
``thread/loaded/list``, ``thread/name/set``, ``thread/archive``, ``thread/unarchive`` and
``thread/fork``, with ``model/list`` and ``config/read``; every line checked against Codex
0.169's schema (:mod:`.client`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.pipes import LineReader

from .client import TIMEOUT, AppServer, RpcFailed, app_server, write_script


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def turn(server: AppServer, thread: str, message: str) -> str:
    """Run one turn to its end; its id."""
    turn_id: str = server.call("turn/start", {"threadId": thread, "input": text(message)})["turn"][
        "id"
    ]
    server.next("turn/completed", threadId=thread)
    return turn_id


def echo_server(tmp_path: Path) -> list[str]:
    script = write_script(tmp_path / "model.json", fallback="echo")
    return ["--model-script", str(script)]


def test_list_is_newest_first_paginated_and_filtered(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    with app_server(*echo_server(tmp_path), cwd=tmp_path) as server:
        server.initialize()
        made = []
        for n, cwd in enumerate([tmp_path, other, tmp_path]):
            thread = server.start_thread(cwd=str(cwd))
            turn(server, thread, f"question {n}")
            made.append(thread)
        server.start_thread(cwd=str(tmp_path))  # no user message yet: not listed
        first = server.call("thread/list", {"limit": 2})
        assert [t["preview"] for t in first["data"]] == ["question 2", "question 1"]
        assert first["nextCursor"]
        rest = server.call("thread/list", {"limit": 2, "cursor": first["nextCursor"]})
        assert [t["id"] for t in rest["data"]] == [made[0]] and rest["nextCursor"] is None
        listed = first["data"][0]
        assert listed["id"] == made[2] and listed["cwd"] == str(tmp_path)
        assert listed["status"] == {"type": "idle"} and os.path.exists(listed["path"])
        here = server.call("thread/list", {"cwd": str(other)})["data"]
        assert [t["id"] for t in here] == [made[1]]
        assert server.call("thread/list", {"modelProviders": ["nobody"]})["data"] == []
        found = server.call("thread/list", {"searchTerm": "question 0"})["data"]
        assert [t["id"] for t in found] == [made[0]]
        assert server.call("thread/list", {"sectionId": "s"})["data"] == []
        oldest = server.call("thread/list", {"sortDirection": "asc", "limit": 1})["data"]
        assert [t["id"] for t in oldest] == [made[0]]
        assert server.close_input() == 0


def test_name_archive_and_read_survive_a_restart(tmp_path: Path) -> None:
    args = echo_server(tmp_path)
    with app_server(*args, cwd=tmp_path) as server:
        server.initialize()
        thread = server.start_thread(cwd=str(tmp_path))
        first = turn(server, thread, "hello")
        assert server.call("thread/loaded/list") == {"data": [thread], "nextCursor": None}
        assert server.call("thread/name/set", {"threadId": thread, "name": " Greeting "}) == {}
        assert server.next("thread/name/updated") == {"threadId": thread, "threadName": "Greeting"}
        blank = server.request("thread/name/set", {"threadId": thread, "name": "  "})
        assert server.error(blank)["message"].startswith("name: ")
        assert server.call("thread/archive", {"threadId": thread}) == {}
        assert server.next("thread/archived") == {"threadId": thread}
        assert server.call("thread/loaded/list")["data"] == []
        assert server.call("thread/list")["data"] == []
        assert server.close_input() == 0
    archived = list((Path(os.environ["RELAY_HOME"]) / "archived_sessions").glob("rollout-*"))
    assert [p.name.endswith(f"{thread}.jsonl") for p in archived if p.suffix == ".jsonl"] == [True]
    with app_server(*args, cwd=tmp_path) as server:
        server.initialize()
        listed = server.call("thread/list", {"archived": True})["data"]
        assert [(t["id"], t["name"], t["status"]) for t in listed] == [
            (thread, "Greeting", {"type": "notLoaded"})
        ]
        read = server.call("thread/read", {"threadId": thread, "includeTurns": True})["thread"]
        assert read["name"] == "Greeting" and read["preview"] == "hello"
        assert [t["id"] for t in read["turns"]] == [first]
        items = read["turns"][0]["items"]
        assert [i["type"] for i in items] == ["userMessage", "agentMessage"]
        assert items[1]["text"] == "echo: hello"
        back = server.call("thread/unarchive", {"threadId": thread})["thread"]
        assert server.next("thread/unarchived") == {"threadId": thread}
        assert back["name"] == "Greeting" and "archived_sessions" not in back["path"]
        assert [t["id"] for t in server.call("thread/list")["data"]] == [thread]
        again = server.request("thread/unarchive", {"threadId": thread})
        assert server.error(again)["code"] == -32602
        resumed = server.call("thread/resume", {"threadId": thread})["thread"]
        assert resumed["name"] == "Greeting"
        assert server.close_input() == 0


def test_read_of_a_thread_never_written_names_it(tmp_path: Path) -> None:
    with app_server(cwd=tmp_path) as server:
        server.initialize()
        with_error = server.request("thread/read", {"threadId": "nope"})
        assert server.error(with_error)["message"] == "threadId: no thread nope"
        try:
            server.call("thread/archive", {"threadId": "nope"})
        except RpcFailed as failed:
            assert failed.code == -32602
        else:
            raise AssertionError("archived a thread that does not exist")
        assert server.close_input() == 0


def test_fork_copies_the_history_up_to_a_turn_and_leaves_the_original(tmp_path: Path) -> None:
    with app_server(*echo_server(tmp_path), cwd=tmp_path) as server:
        server.initialize()
        thread = server.start_thread(cwd=str(tmp_path))
        first = turn(server, thread, "one")
        turn(server, thread, "two")
        server.call("thread/name/set", {"threadId": thread, "name": "Source"})
        original = Path(server.call("thread/read", {"threadId": thread})["thread"]["path"])
        before = original.read_bytes()
        fork = server.call("thread/fork", {"threadId": thread, "lastTurnId": first})
        forked = fork["thread"]
        started = server.next("thread/started")["thread"]
        assert started["id"] == forked["id"] != thread
        assert forked["forkedFromId"] == thread and forked["name"] == "Source"
        assert [t["id"] for t in forked["turns"]] == [first]
        assert forked["path"] != str(original)
        turn(server, forked["id"], "three")
        assert original.read_bytes() == before
        read = server.call("thread/read", {"threadId": forked["id"], "includeTurns": True})
        messages = [
            item.get("text") or item["content"][0]["text"]
            for t in read["thread"]["turns"]
            for item in t["items"]
        ]
        assert messages == ["one", "echo: one", "three", "echo: three"]
        missing = server.request("thread/fork", {"threadId": thread, "lastTurnId": "nope"})
        assert server.error(missing)["message"].startswith("lastTurnId: ")
        assert server.close_input() == 0


def test_model_list_and_config_read_give_the_configuration(tmp_path: Path) -> None:
    args = ["-c", "model=some-model", "-c", "approval_policy=untrusted"]
    with app_server(*args, cwd=tmp_path) as server:
        server.initialize()
        models = server.call("model/list")["data"]
        assert [(m["model"], m["isDefault"]) for m in models] == [("some-model", True)]
        config = server.call("config/read", {})["config"]
        assert config["model"] == "some-model" and config["approval_policy"] == "untrusted"
        unknown = server.request("model/list", {"modelProvider": "nobody"})
        assert server.error(unknown)["message"].startswith("modelProvider: ")
        assert server.close_input() == 0


def test_json_of_rollouts_is_what_the_server_wrote(tmp_path: Path) -> None:
    # The sidecar is JSON beside the rollout, and never matches a rollout's name.
    with app_server(*echo_server(tmp_path), cwd=tmp_path) as server:
        server.initialize()
        thread = server.start_thread(cwd=str(tmp_path))
        turn(server, thread, "hi")
        server.call("thread/name/set", {"threadId": thread, "name": "N"})
        path = Path(server.call("thread/read", {"threadId": thread})["thread"]["path"])
        assert server.close_input() == 0
    side = path.with_name(path.name.removesuffix(".jsonl") + ".thread.json")
    assert json.loads(side.read_text()) == {"name": "N"}


def test_a_fork_s_first_request_reuses_the_original_s_cached_prefix(tmp_path: Path) -> None:
    script = write_script(tmp_path / "model.json", fallback="echo")
    mock = subprocess.Popen(
        [sys.executable, "-m", "relay", "mock-server", "--script", str(script), "--prompt-cache"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert mock.stdout is not None
        base_url = LineReader(mock.stdout, timeout=TIMEOUT).readline().strip()
        args = [
            "-c", "model_provider=mock",
            "-c", "model=mock-model",
            "-c", "model_providers.mock.name=mock",
            "-c", f"model_providers.mock.base_url={json.dumps(base_url)}",
        ]  # fmt: skip
        with app_server(*args, cwd=tmp_path) as server:
            server.initialize()
            thread = server.start_thread(cwd=str(tmp_path))
            long = " ".join(f"word{n}" for n in range(1500))  # well past the cache's minimum
            server.call("turn/start", {"threadId": thread, "input": text(long)})
            usage = server.next("thread/tokenUsage/updated", threadId=thread)["tokenUsage"]
            server.next("turn/completed", threadId=thread)
            original = usage["last"]["inputTokens"]
            assert original > 1024
            forked = server.call("thread/fork", {"threadId": thread})["thread"]["id"]
            server.next("thread/started")
            server.call("turn/start", {"threadId": forked, "input": text("and then?")})
            usage = server.next("thread/tokenUsage/updated", threadId=forked)["tokenUsage"]
            server.next("turn/completed", threadId=forked)
            # The whole of the original's request is the fork's cached prefix (the cache
            # reports it in steps of 128 tokens).
            assert usage["last"]["cachedInputTokens"] > original - 128
            assert server.close_input() == 0
    finally:
        mock.terminate()
        mock.wait(timeout=TIMEOUT)
