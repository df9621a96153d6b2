"""What a session learns of how its server counts tokens survives a resume (docs/rollout.md,
docs/session.md): a session run one process per turn, as the TypeScript SDK runs ``relay exec
… resume``, scales its estimates as one process does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from relay import testing
from relay._base._codec import from_json, to_json
from relay._base._rollout_lines import GeneratedIds
from relay._base._tokens import MAX_TOKEN_RATIO
from relay._rollout._reader import parse_rollout, read_rollout
from relay._rollout._resume import reconstruct, restored_ratio

from .test_resume import open_resumed, rollout_config, rollout_path, run_ops
from .test_rollout_reader import meta, raw, text_of

# ----------------------------------------------------------------------------- pure


def test_an_ids_line_carries_the_ratio_only_when_there_is_one() -> None:
    assert to_json(GeneratedIds(3, 7)) == {"submission": 3, "item": 7}
    assert to_json(GeneratedIds(3, 7, 3.8775)) == {
        "submission": 3,
        "item": 7,
        "token_ratio": 3.8775,
    }
    # A line written before the ratio was recorded reads as no calibration.
    assert from_json({"submission": 3, "item": 7}, GeneratedIds) == GeneratedIds(3, 7)


def ids(submission: int, item: int, ratio: float | None = None) -> str:
    payload: dict[str, Any] = {"submission": submission, "item": item}
    if ratio is not None:
        payload["token_ratio"] = ratio
    return raw("ids", payload)


@pytest.mark.parametrize("for_resume", [False, True])
def test_a_resume_takes_the_ratio_of_the_last_ids_line(for_resume: bool) -> None:
    data = text_of(meta(), ids(1, 2, 3.5), ids(2, 5, 2.25))
    assert reconstruct(parse_rollout(data, for_resume=for_resume)).token_ratio == 2.25
    # The last line says there is none (the estimate matched again): none it is.
    data = text_of(meta(), ids(1, 2, 3.5), ids(2, 5))
    assert reconstruct(parse_rollout(data, for_resume=for_resume)).token_ratio == 1.0
    assert reconstruct(parse_rollout(text_of(meta()))).token_ratio == 1.0


@given(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)))
def test_a_restored_ratio_is_one_calibration_could_have_made(recorded: float | None) -> None:
    ratio = restored_ratio(recorded)
    assert 1.0 <= ratio <= MAX_TOKEN_RATIO
    if recorded is not None and 1.0 <= recorded <= MAX_TOKEN_RATIO:
        assert ratio == recorded


# ----------------------------------------------------------------------------- a session

# A reply whose server counted four times what relay estimates of the request.
COUNTED = {"text": "big", "usage": {"input_tokens": 40_000, "output_tokens": 1}}


async def test_a_resumed_session_scales_its_estimates_as_the_live_one_did(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = rollout_config(tmp_path)
    async with testing.open_test_session({"responses": [COUNTED]}, config=config) as t:
        await run_ops(t, ("turn", "count me"))
    learned = t.session.snapshot().token_ratio
    assert learned > 1.0
    assert reconstruct(read_rollout(rollout_path(t))).token_ratio == learned
    async with open_resumed(rollout_path(t), config=config) as r:
        assert r.session.snapshot().token_ratio == learned
        await run_ops(r, ("turn", "again"))
    # The resumed run's server counted as relay estimated: that, too, is what a resume reads.
    assert r.session.snapshot().token_ratio == 1.0
    assert reconstruct(read_rollout(rollout_path(t))).token_ratio == 1.0


# ----------------------------------------------------------------------------- processes

WINDOW = 4096


def server_count(body: dict[str, Any]) -> int:
    """The prompt's tokens as a small model's tokenizer counts them: a token per digit, a
    quarter of one per other character (relay's estimate: a quarter of one for each)."""
    text = json.dumps(body.get("tools", []))
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            text += content
        elif isinstance(content, list):
            text += "".join(str(part.get("text", "")) for part in content)
    digits = sum(ch.isdigit() for ch in text)
    return digits + (len(text) - digits) // 4


class CountingServer(ThreadingHTTPServer):
    """A chat-completions server that counts prompts like llama-server and refuses, as it
    does, one longer than its window; every answer is ``OK.``."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.counts: list[int] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: CountingServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        tokens = server_count(body)
        self.server.counts.append(tokens)
        if tokens > WINDOW:
            self._refuse(tokens)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "smollm2"}
        delta = {"role": "assistant", "content": "OK."}
        usage = {"prompt_tokens": tokens, "completion_tokens": 2, "total_tokens": tokens + 2}
        for frame in (
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {**base, "choices": [], "usage": usage},
        ):
            self.wfile.write(b"data: " + json.dumps(frame).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")

    def _refuse(self, tokens: int) -> None:
        error = {
            "code": 400,
            "message": f"request ({tokens} tokens) exceeds the available context size "
            f"({WINDOW} tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": tokens,
            "n_ctx": WINDOW,
        }
        data = json.dumps({"error": error}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def counting_server() -> Iterator[CountingServer]:
    server = CountingServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def write_home(home: Path, server: CountingServer) -> None:
    home.mkdir()
    (home / "config.toml").write_text(
        'model = "smollm2"\n'
        'model_provider = "llama"\n'
        f"model_context_window = {WINDOW}\n"
        'base_instructions = "You are a helpful assistant."\n'
        "[model_providers.llama]\n"
        'name = "llama"\n'
        f'base_url = "{server.base_url}"\n'
        'wire_api = "chat"\n'
        "stream_max_retries = 0\n"
        "request_max_retries = 0\n"
    )


def relay_exec(home: Path, cwd: Path, *args: str) -> list[dict[str, Any]]:
    environment = {name: value for name, value in os.environ.items() if name != "OPENAI_API_KEY"}
    environment["RELAY_HOME"] = str(home)
    done = subprocess.run(
        # Without Codex's default tools, so that its requests are those of `relay run`.
        [
            sys.executable,
            "-m",
            "relay",
            "exec",
            "--experimental-json",
            "-c",
            "tools.apply_patch=false",
            "-c",
            "tools.update_plan=false",
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def outcome(stream: list[dict[str, Any]]) -> str:
    (end,) = [e for e in stream if e["type"] in ("turn.completed", "turn.failed")]
    if end["type"] == "turn.failed":
        return f"failed: {end['error']['message']}"
    (message,) = [
        e["item"]["text"]
        for e in stream
        if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"
    ]
    return str(message)


def digits(count: int) -> str:
    return "".join(str(n % 10) for n in range(count))


SHORT_TURNS = ("Capital of France?", "And of Spain?", "And of Italy?")


@pytest.mark.slow  # processes of its own
def test_one_process_per_turn_recovers_from_a_long_message_as_one_process_does(
    tmp_path: Path, counting_server: CountingServer
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    write_home(home, counting_server)
    work.mkdir()
    # 6,000 digits: 1,500 tokens to relay's estimate, 6,000 to the server, over its window.
    first = relay_exec(home, work, "Repeat these digits: " + digits(6000))
    assert "no longer fits the model's context window" in outcome(first)
    thread = first[0]["thread_id"]
    later = [outcome(relay_exec(home, work, "resume", thread, text)) for text in SHORT_TURNS]
    # Each later process compacts (the window was full) or answers, as one process would.
    assert later == ["OK."] * len(SHORT_TURNS)
    assert max(counting_server.counts[-len(SHORT_TURNS) :]) <= WINDOW
    # The same turns in one process, and the server's counts of every request: the same.
    per_process = list(counting_server.counts)
    counting_server.counts.clear()
    assert one_process(home, work, ["Repeat these digits: " + digits(6000), *SHORT_TURNS]) == [
        outcome(first),
        *later,
    ]
    assert counting_server.counts == per_process


def one_process(home: Path, cwd: Path, texts: list[str]) -> list[str]:
    """The outcome of each of these turns, run by one ``relay run``."""
    ops = []
    for number, text in enumerate(texts, 1):
        turn = {"type": "user_turn", "items": [{"type": "text", "text": text}]}
        ops.append(json.dumps({"id": f"t{number}", "op": turn}))
        ops.append(json.dumps({"wait_for": {"type": "turn_complete", "count": number}}))
    environment = {name: value for name, value in os.environ.items() if name != "OPENAI_API_KEY"}
    environment["RELAY_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-m", "relay", "run", "--json", "-"],
        input="\n".join(ops) + "\n",
        cwd=cwd,
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )
    events = [json.loads(line) for line in done.stdout.splitlines()]
    outcomes = []
    for number in range(1, len(texts) + 1):
        mine = [e["msg"] for e in events if e["id"] == f"t{number}"]
        errors = [m["message"] for m in mine if m["type"] == "error"]
        (end,) = [m for m in mine if m["type"] == "turn_complete"]
        outcomes.append(f"failed: {errors[-1]}" if errors else str(end["last_agent_message"]))
    return outcomes
