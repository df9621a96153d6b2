"""The loopback mock server, driven by the real SDK client over a real socket.

These tests use the real clock (sockets do not run in virtual time); they wait for observable
events (a request logged, a disconnect seen), never for a duration.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import openai
import pytest
import trio

from relay._base import _protocol as p
from relay._base._config import ProviderConfig
from relay._base._errors import ErrorCode, ModelError, StreamError
from relay._base._model import (
    CompactRequest,
    Completed,
    ModelClient,
    ModelEvent,
    OutputItemDone,
    OutputTextDelta,
    Prompt,
    ToolSpec,
)
from relay._models._responses import request_body
from relay._testing._mock_server import MockServer, main, open_mock_server
from relay._wire import open_http_client
from tests.model_scripts import numbered

API_KEY = "sk-socket-secret-987"
TOOL = ToolSpec(
    "read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}
)
PROMPT = Prompt(
    model="gpt-test",
    instructions="Be brief.",
    input=(p.user_message("what is in a.txt?"),),
    tools=(TOOL,),
    prompt_cache_key="session-1",
)

#: Guards every wait on the other side of a socket; never reached when things work.
GUARD_S = 20


def provider_for(server: MockServer, wire: str = "responses") -> ProviderConfig:
    assert server.base_url is not None
    return ProviderConfig(
        name="mock", base_url=server.base_url, wire_api="chat" if wire == "chat" else "responses"
    )


async def collect(client: ModelClient, prompt: Prompt = PROMPT) -> list[ModelEvent]:
    async with client.stream(prompt) as events:
        return [event async for event in events]


async def test_tool_call_reply_and_request_log(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    script = {
        "responses": [
            {
                "function_call": {
                    "name": "read_file",
                    "arguments": {"path": "a.txt"},
                    "call_id": "call_1",
                },
                "total_tokens": 42,
            }
        ]
    }
    with trio.fail_after(GUARD_S):
        async with open_mock_server(numbered(script), log_path=log) as server:
            assert server.base_url is not None
            assert server.base_url.startswith("http://127.0.0.1:")
            assert server.base_url.endswith("/v1")
            async with open_http_client(provider_for(server), api_key=API_KEY) as client:
                events = await collect(client)

    assert events == [
        OutputItemDone(p.FunctionCall("read_file", '{"path": "a.txt"}', "call_1")),
        Completed("resp-1", p.TokenUsage(total_tokens=42)),
    ]
    [logged] = server.requests
    assert logged["path"] == "/v1/responses"
    assert logged["query"] == {}
    headers = logged["headers"]
    assert "authorization" not in headers
    assert headers["x-relay-request"] == "turn"
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == "text/event-stream"
    body = logged["body"]
    assert body == request_body(PROMPT)
    assert body["model"] == "gpt-test"
    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "what is in a.txt?"}],
        }
    ]
    assert body["tools"] == [TOOL.to_wire()]
    assert body["tool_choice"] == "auto"
    assert body["parallel_tool_calls"] is False
    assert body["store"] is False
    assert body["stream"] is True
    assert body["prompt_cache_key"] == "session-1"
    assert "reasoning" not in body

    text = log.read_text(encoding="utf-8")
    assert API_KEY not in text
    assert [json.loads(line) for line in text.splitlines()] == server.requests


async def test_cancelling_a_stalled_stream_is_seen_as_a_disconnect() -> None:
    script = {"responses": [{"text": "this answer never arrives", "stall_ms": 600_000}]}
    streaming = trio.Event()
    with trio.fail_after(GUARD_S):
        async with (
            open_mock_server(numbered(script)) as server,
            open_http_client(provider_for(server), api_key=API_KEY) as client,
        ):

            async def consume() -> None:
                async with client.stream(PROMPT) as events:
                    streaming.set()
                    async for _ in events:
                        pass  # pragma: no cover - the server stalls before any

            async with trio.open_nursery() as nursery:
                nursery.start_soon(consume)
                await streaming.wait()
                assert server.disconnects == 0
                nursery.cancel_scope.cancel()
            await server.wait_disconnects(1)
    assert server.disconnects == 1
    assert len(server.requests) == 1


async def test_completed_answers_are_not_disconnects() -> None:
    with trio.fail_after(GUARD_S):
        async with (
            open_mock_server(numbered({"responses": ["one", "two"]})) as server,
            open_http_client(provider_for(server), api_key=None) as client,
        ):
            first = await collect(client)
            second = await collect(client)
    assert first[-2] == OutputItemDone(p.assistant_message("one", id="resp-1-msg-0"))
    assert second[-2] == OutputItemDone(p.assistant_message("two", id="resp-2-msg-0"))
    assert server.disconnects == 0


async def test_a_cut_drops_the_connection_mid_stream() -> None:
    script = {"responses": [{"text": "Hello there", "cut_after_events": 3}]}
    seen: list[ModelEvent] = []
    with trio.fail_after(GUARD_S):
        async with (
            open_mock_server(numbered(script)) as server,
            open_http_client(provider_for(server), api_key=API_KEY) as client,
        ):
            with pytest.raises(StreamError) as caught:
                async with client.stream(PROMPT) as events:
                    async for event in events:
                        seen.append(event)
    assert seen == [OutputTextDelta("resp-1-msg-0", "Hello ")]
    assert caught.value.message.startswith(
        "connection to the model server failed: RemoteProtocolError: peer closed connection"
    )


async def test_http_errors_with_retry_after() -> None:
    script = {
        "responses": [
            {
                "http_error": {
                    "status": 429,
                    "code": "rate_limit_exceeded",
                    "message": "Slow down.",
                    "retry_after": 1.5,
                }
            }
        ]
    }
    with trio.fail_after(GUARD_S):
        async with (
            open_mock_server(numbered(script)) as server,
            open_http_client(provider_for(server), api_key=API_KEY) as client,
        ):
            with pytest.raises(ModelError) as caught:
                await collect(client)
    assert caught.value.code is ErrorCode.SERVER_ERROR
    assert caught.value.retryable
    assert caught.value.retry_after == 1.5
    assert caught.value.message == "Slow down."


async def test_remote_compaction() -> None:
    output = [{"type": "compaction", "encrypted_content": "sealed"}]
    request = CompactRequest(
        model="gpt-test", instructions="Be brief.", input=(p.user_message("hi"),)
    )
    with trio.fail_after(GUARD_S):
        async with (
            open_mock_server(numbered({"compact": [{"output": output}]})) as server,
            open_http_client(provider_for(server), api_key=API_KEY) as client,
        ):
            body = await client.compact(request)
    assert body == {"output": output}
    assert server.requests[0]["path"] == "/v1/responses/compact"
    assert server.requests[0]["headers"]["x-relay-request"] == "compact"


async def test_chat_route() -> None:
    script = {
        "responses": [
            {
                "text": "Hi from chat",
                "usage": {"input_tokens": 4, "output_tokens": 3, "total_tokens": 7},
            }
        ]
    }
    with trio.fail_after(GUARD_S):
        async with (
            open_mock_server(numbered(script)) as server,
            open_http_client(provider_for(server, "chat"), api_key=None) as client,
        ):
            events = await collect(client)
    assert events[-2:] == [
        OutputItemDone(p.assistant_message("Hi from chat", id="chatcmpl-resp-1")),
        Completed("chatcmpl-resp-1", p.TokenUsage(4, 0, 3, 0, 7)),
    ]
    assert server.requests[0]["path"] == "/v1/chat/completions"
    assert server.requests[0]["body"]["stream_options"] == {"include_usage": True}


def sdk_client(server: MockServer) -> openai.AsyncOpenAI:
    """The openai SDK's own client, as a program of anyone's would make it."""
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


JSON_FORMAT = {
    "name": "city",
    "schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": True,
}


async def test_a_json_reply_answers_a_request_for_structured_output_on_both_routes() -> None:
    script = {"responses": [{"json": {"city": "Oslo"}}, {"json": {"city": "Bergen"}}]}
    with trio.fail_after(GUARD_S):
        async with open_mock_server(script) as server:
            client = sdk_client(server)
            stream = await client.responses.create(
                model="m",
                input="Which city?",
                text={"format": {"type": "json_schema", **JSON_FORMAT}},  # type: ignore[typeddict-item]
                stream=True,
            )
            texts = [e.delta async for e in stream if e.type == "response.output_text.delta"]
            chunks = await client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "Which city?"}],
                response_format={"type": "json_schema", "json_schema": JSON_FORMAT},  # type: ignore[typeddict-item]
                stream=True,
            )
            pieces = [c.choices[0].delta.content async for c in chunks if c.choices]
            await client.close()
    assert "".join(texts) == '{"city": "Oslo"}'
    assert "".join(piece or "" for piece in pieces) == '{"city": "Bergen"}'


@pytest.mark.parametrize(
    ("route", "format", "message"),
    [
        (
            "responses",
            {"type": "json_schema", "schema": {}},
            "Missing required parameter: 'text.format.name'.",
        ),
        (
            "responses",
            {"type": "json_schema", "name": "a city", "schema": {}},
            "Invalid 'text.format.name': letters, digits, '_' and '-', at most 64 of them.",
        ),
        (
            "responses",
            {"type": "json_schema", "name": "city"},
            "Missing required parameter: 'text.format.schema'.",
        ),
        (
            "responses",
            {"type": "xml"},
            "Invalid value for 'text.format.type': expected one of text, json_object, json_schema.",
        ),
        (
            "chat",
            {"type": "json_schema"},
            "Missing required parameter: 'response_format.json_schema'.",
        ),
        (
            "chat",
            {"type": "json_schema", "json_schema": {"name": "city", "strict": "yes"}},
            "Invalid type for 'response_format.json_schema.strict': expected a boolean.",
        ),
        (
            "chat",
            {"type": "json_schema", "json_schema": {"name": "city", "schema": {"type": "town"}}},
            "Invalid schema for response_format 'city': not a JSON Schema: 'town' is not valid "
            "under any of the given schemas (at $.type).",
        ),
    ],
)
async def test_a_response_format_openai_would_refuse_is_refused_naming_the_field(
    route: str, format: dict[str, Any], message: str
) -> None:
    with trio.fail_after(GUARD_S):
        async with open_mock_server({"responses": ["the first reply"]}) as server:
            client = sdk_client(server)
            with pytest.raises(openai.BadRequestError) as refused:
                if route == "chat":
                    await client.chat.completions.create(
                        model="m",
                        messages=[{"role": "user", "content": "hi"}],
                        response_format=format,  # type: ignore[arg-type]
                        stream=True,
                    )
                else:
                    await client.responses.create(
                        model="m",
                        input="hi",
                        text={"format": format},  # type: ignore[typeddict-item]
                        stream=True,
                    )
            # A refused request takes no reply: the next one gets the first.
            stream = await client.responses.create(model="m", input="hi", stream=True)
            texts = [e.delta async for e in stream if e.type == "response.output_text.delta"]
            await client.close()
    assert refused.value.status_code == 400
    assert refused.value.body == {
        "message": message,
        "type": "invalid_request_error",
        "code": None,
        "param": None,
    }
    assert "".join(texts) == "the first reply"


async def test_unknown_routes_and_methods() -> None:
    with trio.fail_after(GUARD_S):
        async with open_mock_server(numbered()) as server, httpx2.AsyncClient() as http:
            missing = await http.post(f"{server.base_url}/embeddings", json={"input": "x"})
            wrong = await http.get(f"{server.base_url}/responses")
            garbage = await http.post(f"{server.base_url}/responses", content=b"not json")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "no route for POST /v1/embeddings"
    assert wrong.status_code == 405
    assert garbage.status_code == 400
    assert [r["body"] for r in server.requests] == [{"input": "x"}, None, "not json"]


async def test_the_request_log_in_memory_keeps_the_latest_requests(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    with trio.fail_after(GUARD_S):
        async with (
            open_mock_server(log_path=log, keep_requests=2) as kept,
            open_mock_server(keep_requests=0) as none,
            open_mock_server(keep_requests=None) as every,
            httpx2.AsyncClient() as http,
        ):
            for n in range(5):
                for server in (kept, none, every):
                    await http.post(f"{server.base_url}/embeddings", json={"n": n})
            await none.wait_requests(5)
    assert [r["body"] for r in kept.requests] == [{"n": 3}, {"n": 4}]
    assert none.requests == []
    assert [r["body"] for r in every.requests] == [{"n": n} for n in range(5)]
    assert kept.request_count == none.request_count == every.request_count == 5
    # The file keeps every request.
    lines = log.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["body"] for line in lines] == [{"n": n} for n in range(5)]


async def test_relay_mock_server_keeps_no_request_in_memory(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": []}), encoding="utf-8")
    # The real ``main`` in a process of its own, which reports on its server when it stops.
    code = (
        "import sys\nimport relay._testing._mock_server as m\n"
        "made = []\n"
        "class Watched(m.MockServer):\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        super().__init__(*args, **kwargs)\n"
        "        made.append(self)\n"
        "m.MockServer = Watched\n"
        f"code = m.main({str(script)!r}, '127.0.0.1', 0, None)\n"
        "print(made[0].request_count, len(made[0].requests), flush=True)\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with trio.fail_after(GUARD_S):
        async with await anyio.open_process(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, env=env
        ) as process:
            assert process.stdout is not None
            output = b""
            while not output.endswith(b"\n"):
                output += await process.stdout.receive(1)
            base_url = output.decode().strip()
            async with httpx2.AsyncClient() as http:
                for n in range(3):
                    await http.post(f"{base_url}/embeddings", json={"n": n})
            process.send_signal(signal.SIGINT)
            output = b""
            async for chunk in process.stdout:
                output += chunk
            assert await process.wait() == 0
    assert output.decode().split() == ["3", "0"]


def test_main_rejects_an_unreadable_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(str(tmp_path / "missing.json"), "127.0.0.1", 0, None) == 2
    assert "cannot read model script" in capsys.readouterr().err


async def test_main_prints_its_url_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": [{"text": "served"}]}), encoding="utf-8")
    log = tmp_path / "log.jsonl"
    code = (
        "import sys\nfrom relay._testing._mock_server import main\n"
        f"sys.exit(main({str(script)!r}, '127.0.0.1', 0, {str(log)!r}))\n"
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with trio.fail_after(GUARD_S):
        async with await anyio.open_process(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, env=env
        ) as process:
            assert process.stdout is not None
            line = b""
            while not line.endswith(b"\n"):
                line += await process.stdout.receive(1)
            base_url = line.decode().strip()
            assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
            provider = ProviderConfig(name="cli", base_url=base_url)
            async with open_http_client(provider, api_key=API_KEY) as client:
                events = await collect(client)
            process.send_signal(signal.SIGINT)
            assert await process.wait() == 0
    served = events[-2]
    assert isinstance(served, OutputItemDone) and isinstance(served.item, p.Message)
    assert re.fullmatch(r"resp-[0-9a-f]{8}-1-msg-0", served.item.id or "")
    assert served == OutputItemDone(p.assistant_message("served", id=served.item.id))
    [logged] = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert logged["path"] == "/v1/responses"
    assert "authorization" not in logged["headers"]


# ------------------------------------------------------------------ a burst of connections

BURST = 300


def request_bytes(port: int) -> bytes:
    body = json.dumps({"model": "m", "input": [], "stream": True}).encode()
    head = (
        f"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


async def test_a_burst_of_connections_while_the_loop_is_busy_is_served_whole() -> None:
    """Many clients in the server's own event loop connect before it gets to accept any:
    each connection must be queued by the kernel at once. A short listen queue left the
    rest to SYN retransmissions, which under load ended in resets and connect timeouts."""
    limit = int(Path("/proc/sys/net/core/somaxconn").read_text())
    if limit <= BURST:
        pytest.skip(f"net.core.somaxconn is {limit}")
    script = {"responses": [{"text": f"answer {n}"} for n in range(BURST)]}
    async with open_mock_server(numbered(script)) as server:
        assert server.base_url is not None
        port = int(server.base_url.rsplit(":", 1)[1].removesuffix("/v1"))
        clients: list[socket.socket] = []
        try:
            # No await between the connects: the server cannot accept any of them meanwhile.
            for _ in range(BURST):
                client = socket.socket()
                client.setblocking(False)
                client.connect_ex(("127.0.0.1", port))
                clients.append(client)
            _, writable, _ = select.select([], clients, [], 0)
            established = [
                c for c in writable if c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
            ]
            assert len(established) == BURST
            answers: list[bytes] = []

            async def exchange(client: socket.socket) -> None:
                stream = trio.SocketStream(trio.socket.from_stdlib_socket(client))
                await stream.send_all(request_bytes(port))
                data = bytearray()
                while chunk := await stream.receive_some():
                    data += chunk
                answers.append(bytes(data))

            with trio.fail_after(120):
                async with trio.open_nursery() as nursery:
                    for client in clients:
                        nursery.start_soon(exchange, client)
        finally:
            for client in clients:
                client.close()
    assert len(answers) == BURST
    assert all(a.startswith(b"HTTP/1.1 200") and b"response.completed" in a for a in answers)
    assert len(server.requests) == BURST
