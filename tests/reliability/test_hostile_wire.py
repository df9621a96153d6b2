"""Hostile model servers that misbehave in the HTTP itself or in its timing, each over a real
loopback socket (:mod:`._byte_server`), in virtual time.

An error body that never ends (compressed, so that little on the wire is much once decoded) or
that comes one byte at a time; an answer of valid but empty events that never ends; response
headers that come only after a long silence. Each must end in a clear error within its bound,
with the client hanging up, however long the server would go on.
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import pytest
import trio

import relay
from relay import testing
from relay._base import _protocol as p
from relay._base._config import ProviderConfig
from relay._base._errors import ErrorCode, ModelError, StreamError
from relay._base._model import CompactRequest, ModelClient, ModelEvent, Prompt
from relay._base._tokens import ApproxEstimator
from relay._models._mock_transport import SSE_HEADERS, chat_frame, sse_frame
from relay._wire import open_http_client
from relay._wire._body import error_body
from tests.invariants import check_event_invariants
from tests.reliability._byte_server import Peer, Request, chunk, head, serve_bytes
from tests.reliability._byte_server import loopback_clock as virtual_clock

API_KEY = "sk-test-0123456789abcdef"
#: Virtual seconds: a client that never gives up fails the test here.
GUARD_S = 3_600
MIB = 1024 * 1024
PROMPT = Prompt(model="gpt-test", instructions="Be brief.", input=(p.user_message("hi"),))
COMPACT = CompactRequest(model="gpt-test", instructions="Be brief.", input=PROMPT.input)


@pytest.fixture
def loopback_clock() -> trio.testing.MockClock:
    return virtual_clock()


def provider(base_url: str, wire: str = "responses", **fields: Any) -> ProviderConfig:
    return ProviderConfig(name="hostile", base_url=base_url, wire_api=wire, **fields)  # type: ignore[arg-type]


async def collect(client: ModelClient) -> list[ModelEvent]:
    async with client.stream(PROMPT) as events:
        return [event async for event in events]


async def failure(table: ProviderConfig, call: str = "stream") -> ModelError:
    """The error of one request (a stream, or a compaction) to ``table``'s server."""
    with trio.fail_after(GUARD_S):
        async with open_http_client(table, api_key=API_KEY) as client:
            with pytest.raises(ModelError) as caught:
                if call == "compact":
                    await client.compact(COMPACT)
                else:
                    await collect(client)
    return caught.value


# ---------------------------------------------------------------------------- error bodies


async def test_an_endless_gzip_bomb_on_an_error_status_is_read_to_a_bound(
    loopback_clock: trio.abc.Clock,
) -> None:
    # Each chunk is about 1 KiB on the wire and 1 MiB once decoded; the body never ends.
    chunks_sent: list[int] = []

    async def bomb(peer: Peer, request: Request) -> None:
        headers = [
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
            ("transfer-encoding", "chunked"),
        ]
        await peer.send(head(500, headers))
        compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        data = compressor.compress(b'{"error": {"message": "')
        sent = 0
        while not peer.left and sent < 16:
            data += compressor.compress(b"x" * MIB) + compressor.flush(zlib.Z_SYNC_FLUSH)
            await peer.send(chunk(data))
            data = b""
            sent += 1
            await peer.wait(1)
        chunks_sent.append(sent)
        await peer.wait(GUARD_S)

    async with serve_bytes([bomb]) as server:
        error = await failure(provider(server.base_url))
        assert await server.peers[0].hung_up()
    assert chunks_sent == [1]
    assert error.code is ErrorCode.SERVER_ERROR and error.retryable
    assert error.message == ('{"error": {"message": "' + "x" * MIB)[:500] + "…"


async def test_a_compressed_error_body_is_read_as_json(loopback_clock: trio.abc.Clock) -> None:
    body = gzip.compress(json.dumps({"error": {"message": "No.", "code": "invalid"}}).encode())

    async def refuse(peer: Peer, request: Request) -> None:
        headers = [
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
            ("content-length", str(len(body))),
        ]
        await peer.send(head(400, headers) + body)
        await peer.wait(GUARD_S)

    async with serve_bytes([refuse]) as server:
        error = await failure(provider(server.base_url))
    assert error.code is ErrorCode.BAD_REQUEST and not error.retryable
    assert error.message == "No."


@pytest.mark.parametrize(
    ("raw", "content_type", "expected"),
    [
        (b'{"error": {"message": "No."}}', "application/json", {"message": "No."}),
        (b'{"message": "Flat."}', "application/json", {"message": "Flat."}),
        (b"  upstream down \n", "text/plain", "upstream down"),
        (b'{"error": {"message": "cut', "application/json", '{"error": {"message": "cut'),
        (b"caf\xe9", "text/plain; charset=latin-1", "café"),
        (b"caf\xe9", "text/plain; charset=no-such-charset", "caf\ufffd"),
        (b"[" * 8192, "application/json", "[" * 8192),
        (b"", "text/plain", ""),
        (None, "application/json", None),
    ],
    ids=["nested", "flat", "text", "cut", "latin-1", "unknown-charset", "deep", "empty", "late"],
)
def test_an_error_body_is_read_as_the_sdk_would(
    raw: bytes | None, content_type: str, expected: object
) -> None:
    response = httpx2.Response(500, headers={"content-type": content_type})
    assert error_body(response, raw) == expected


async def test_an_error_body_that_trickles_ends_at_its_deadline(
    loopback_clock: trio.abc.Clock,
) -> None:
    # One byte every 2 s of a body of a million: every byte would restart a per-read timeout.
    async def trickle(peer: Peer, request: Request) -> None:
        headers = [("content-type", "application/json"), ("content-length", "1000000")]
        await peer.send(head(500, headers) + b'{"error": ')
        while not await peer.wait(2):
            await peer.send(b" ")

    async with serve_bytes([trickle]) as server:
        error = await failure(provider(server.base_url))
        assert await server.peers[0].hung_up()
    assert error.code is ErrorCode.SERVER_ERROR and error.retryable
    assert error.message == "HTTP 500; the model server did not send its error body within 10 s"


# ---------------------------------------------------------------------------- deadlines


def empty_events(wire: str) -> Callable[[Peer, Request], Awaitable[None]]:
    """A server that answers with valid events that say nothing, one a minute, forever."""
    if wire == "chat":
        frame = chat_frame({"id": "c1", "object": "chat.completion.chunk", "choices": []})
    else:
        frame = sse_frame({"type": "response.in_progress", "response": {"id": "r1"}})

    async def answer(peer: Peer, request: Request) -> None:
        await peer.send(head(200, SSE_HEADERS))
        while not peer.left:
            await peer.send(frame)
            await peer.wait(60)

    return answer


@pytest.mark.parametrize(
    ("wire", "limit_ms"),
    [("responses", None), ("chat", None), ("responses", 60_000)],
    ids=["responses-default", "chat-default", "responses-60s"],
)
async def test_an_answer_of_empty_events_ends_at_the_longest_duration(
    wire: str, limit_ms: int | None, loopback_clock: trio.abc.Clock
) -> None:
    fields = {} if limit_ms is None else {"stream_max_duration_ms": limit_ms}
    async with serve_bytes([empty_events(wire)]) as server:
        start = trio.current_time()
        error = await failure(provider(server.base_url, wire, **fields))
        elapsed = trio.current_time() - start
        assert await server.peers[0].hung_up()
    expected_ms = limit_ms or 1_800_000
    assert isinstance(error, StreamError) and error.retryable
    assert error.message == (
        f"the model server's answer took longer than {expected_ms} ms (stream_max_duration_ms)"
    )
    assert elapsed == pytest.approx(expected_ms / 1000)


async def test_a_turn_of_empty_events_is_retried_and_answered(
    loopback_clock: trio.abc.Clock,
) -> None:
    async with serve_bytes([empty_events("responses")]) as server:
        config = relay.Config(
            model="gpt-test",
            model_provider="hostile",
            model_providers={"hostile": provider(server.base_url, stream_max_duration_ms=60_000)},
            rollout=relay.RolloutConfig(enabled=False),
        )
        with trio.fail_after(GUARD_S):
            async with (
                relay.open_session(
                    config, clock=testing.fixed_clock, rng=random.Random(0),
                    estimator=ApproxEstimator(),
                ) as session,
                testing.recording(session) as recorder,
            ):  # fmt: skip
                await session.submit(relay.UserTurn(items=[relay.Text("hi")]))
                await recorder.wait_for(relay.TurnComplete)
                await session.submit(relay.Shutdown())
                await recorder.wait_for(relay.ShutdownComplete)
    check_event_invariants(recorder.events, finished=True)
    retries = [e.msg for e in recorder.events if isinstance(e.msg, relay.StreamErrorEvent)]
    assert [r.detail for r in retries] == [
        "the model server's answer took longer than 60000 ms (stream_max_duration_ms)"
    ]
    answers = [e.msg.message for e in recorder.events if isinstance(e.msg, relay.AgentMessage)]
    assert answers == ["Answered."]


@pytest.mark.parametrize("call", ["responses", "chat", "compact"])
async def test_headers_after_a_long_prefill_end_at_the_first_event_timeout(
    call: str, loopback_clock: trio.abc.Clock
) -> None:
    # Like llama-server, whose headers come only once the prompt is read: 8 s here.
    headers_sent: list[bool] = []

    async def prefill(peer: Peer, request: Request) -> None:
        if await peer.wait(8):
            headers_sent.append(False)
            return
        headers_sent.append(True)
        await server.scripted(peer, request)

    script = {"responses": [{"text": "Late."}], "compact": [{"output": []}]}
    wire = "chat" if call == "chat" else "responses"
    async with serve_bytes([prefill], script) as server:
        table = provider(server.base_url, wire, stream_first_event_timeout_ms=2_000)
        start = trio.current_time()
        error = await failure(table, "compact" if call == "compact" else "stream")
        elapsed = trio.current_time() - start
    assert headers_sent == [False]
    assert isinstance(error, StreamError) and error.retryable
    what = "answer" if call == "compact" else "event"
    assert error.message == (
        f"first-event timeout: no {what} from the model server within 2000 ms of the request"
    )
    assert elapsed == pytest.approx(2.0)
