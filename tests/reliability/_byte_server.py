"""A loopback model server that writes its HTTP by hand, byte for byte and at its own pace.

:mod:`._raw_server` answers with the bytes a test gives, but through hypercorn, which writes them
as well-formed HTTP at once. Some hostile servers are hostile in the HTTP itself or in its
timing: headers sent only after a long silence, an error body that never ends or comes one byte
at a time, valid events that never end the answer. A :class:`ByteServer` reads each request off
a real loopback socket and hands the connection to the test's handler, which writes what it
likes when it likes, and sees whether the client hung up. Under :func:`loopback_clock` its
waits take next to no real time.

Requests past the handlers given are answered from a model script, through the same
:func:`~relay._models._mock_transport.plan_exchange` the mock server uses. Every answer ends its
connection: one request per connection.
"""

from __future__ import annotations

import functools
import http
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio
import trio.testing

from relay._models._mock_transport import plan_exchange, request_json, script_from
from relay._models._responses import PURPOSE_HEADER

#: The most a request may hold, head and body.
_MAX_REQUEST = 16 * 1024 * 1024

#: Real seconds in which nothing happens before a virtual clock may jump, or before the server
#: is taken to have seen everything: what one end of a loopback socket writes is usually
#: readable at the other end at once, but on a loaded machine the kernel may take a moment.
SETTLE_S = 0.01


def loopback_clock() -> trio.testing.MockClock:
    """A virtual clock for a client and a :class:`ByteServer` in one process: it jumps to the
    next deadline only once nothing has happened for :data:`SETTLE_S` of real time."""
    return trio.testing.MockClock(autojump_threshold=SETTLE_S)


@attrs.frozen
class Request:
    """One request as the server read it."""

    path: str
    headers: dict[str, str]
    """Header names in lower case."""
    body: bytes


class Peer:
    """The server's end of one connection: it writes, waits, and notices a client that left."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self.left = False
        """Whether the client has hung up."""

    async def send(self, data: bytes) -> None:
        """Write ``data``, unless the client has hung up (then :attr:`left` says so)."""
        if self.left:
            return
        try:
            await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.left = True

    async def hung_up(self) -> bool:
        """Whether the client has hung up, once the server has seen everything that happened
        on the connection so far."""
        await trio.testing.wait_all_tasks_blocked(SETTLE_S)
        return self.left

    async def wait(self, seconds: float) -> bool:
        """Wait ``seconds``, or less if the client hangs up meanwhile; whether it has."""
        with trio.move_on_after(seconds):
            while not self.left:
                try:
                    data = await self._stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                self.left = not data
        return self.left


Handler = Callable[[Peer, Request], Awaitable[None]]


def head(status: int, headers: Sequence[tuple[str, str]] = ()) -> bytes:
    """A status line and headers, up to the blank line."""
    lines = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def chunk(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked body."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _read_request(stream: trio.SocketStream) -> Request | None:
    data = b""
    while b"\r\n\r\n" not in data:
        more = await stream.receive_some(65536)
        if not more or len(data) > _MAX_REQUEST:
            return None
        data += more
    raw_head, _, body = data.partition(b"\r\n\r\n")
    request_line, *lines = raw_head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < min(length, _MAX_REQUEST):
        more = await stream.receive_some(65536)
        if not more:
            return None
        body += more
    return Request(request_line.split(" ")[1], headers, body)


class ByteServer:
    """Answers request N with ``handlers[N - 1]``, and the requests after them from ``script``.

    Attributes:
        requests: every request, in order.
        peers: the connection of each request, in the same order.
        base_url: ``http://127.0.0.1:PORT/v1`` while serving.
    """

    def __init__(self, handlers: Sequence[Handler], script: Any = None) -> None:
        self.handlers = list(handlers)
        self.script = script_from(script or {"responses": [{"text": "Answered."}] * 3})
        self.requests: list[Request] = []
        self.peers: list[Peer] = []
        self.base_url = ""

    async def serve_connection(self, stream: trio.SocketStream) -> None:
        """Read one request from ``stream`` and answer it; then close the connection."""
        async with stream:
            try:
                request = await _read_request(stream)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if request is None:
                return
            peer = Peer(stream)
            self.requests.append(request)
            self.peers.append(peer)
            number = len(self.requests)
            handler = self.handlers[number - 1] if number <= len(self.handlers) else None
            await (handler or self.scripted)(peer, request)

    async def scripted(self, peer: Peer, request: Request) -> None:
        """The model script's answer to ``request``, at once."""
        purpose = request.headers.get(PURPOSE_HEADER, "turn")
        exchange = plan_exchange(
            self.script, request.path, request_json(request.body), purpose=purpose
        )
        await peer.send(head(exchange.status, [*exchange.headers, ("connection", "close")]))
        for frame in exchange.frames if exchange.frames is not None else (exchange.body,):
            await peer.send(frame)


@asynccontextmanager
async def serve_bytes(handlers: Sequence[Handler], script: Any = None) -> AsyncIterator[ByteServer]:
    """Run a :class:`ByteServer` on a free loopback port for the duration of the context."""
    server = ByteServer(handlers, script)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, server.serve_connection, 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        server.base_url = f"http://127.0.0.1:{port}/v1"
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
