"""A real loopback model server driven by a model script (``relay mock-server``).

The script format is described in docs/model-script.md.

It answers what :class:`~relay._models._mock_transport.ScriptedTransport` answers in-process, over a
real socket: hypercorn (with its trio worker) serves a small hand-written ASGI application.
Routes, under ``/v1``: ``POST /responses`` (server-sent events), ``POST /responses/compact``
(JSON) and ``POST /chat/completions`` (streamed chat chunks).

A scripted ``cut_after_events`` ends the application without finishing the body, which makes
hypercorn drop the connection, as a server that crashes mid-stream would. Every request is
logged (path, query, headers without credentials, JSON body): the latest ``keep_requests`` of
them in :attr:`MockServer.requests` (1,000 by default, all with None, none with 0; a long
conversation sends its whole history with every request, so an unbounded log grows with the
square of its length), and, optionally, every one as a JSON line in a file. ``relay
mock-server``, where nothing can read the log in memory, keeps none there. A client that goes
away before its answer is complete is counted in :attr:`MockServer.disconnects`.

The server runs on trio only (hypercorn's trio worker).
"""

from __future__ import annotations

import collections
import functools
import json
import signal
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.abc
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve
from hypercorn.typing import (
    ASGIReceiveCallable,
    ASGISendCallable,
    HTTPScope,
    LifespanScope,
    Scope,
)

from .._base._errors import ScriptError
from .._models._mock_transport import (
    Exchange,
    plan_exchange,
    problem_exchange,
    request_json,
    request_log_entry,
    script_from,
)
from .._models._prompt_cache import PromptCache
from .._models._responses import AGENT_HEADER, PURPOSE_HEADER
from .._models._script import ModelScript, load_model_script

__all__ = ["MockServer", "main", "open_mock_server", "serve_mock"]

ScriptSource = ModelScript | Mapping[str, Any] | str | Path | None

#: How many request log records a server keeps in memory unless told otherwise.
DEFAULT_KEPT_REQUESTS = 1_000

#: Connections the kernel queues for the server before it accepts them (capped by the kernel).
_LISTEN_BACKLOG = 65_535


class MockServer:
    """The state of a mock model server: its script, its request log, its disconnects.

    Make it inside the event loop; run it with :meth:`serve` (or use :func:`open_mock_server`).

    Attributes:
        script: the model script being played; it advances with each request.
        request_count: how many requests arrived.
        disconnects: how many clients went away before their answer was complete.
        base_url: ``http://HOST:PORT/v1`` once the server listens, else None.

    Args:
        script: what to answer.
        log_path: append every request's log record to this file, as a JSON line.
        keep_requests: how many of the latest log records :attr:`requests` holds (None: all).
        prompt_cache: report, in each answer's usage, the tokens of the request a prompt cache
            keyed by ``prompt_cache_key`` would hold (:mod:`relay._models._prompt_cache`).
    """

    def __init__(
        self,
        script: ScriptSource = None,
        *,
        log_path: str | Path | None = None,
        keep_requests: int | None = DEFAULT_KEPT_REQUESTS,
        prompt_cache: bool = False,
    ):
        self.script = script_from(script)
        self.prompt_cache = PromptCache() if prompt_cache else None
        self.request_count = 0
        self._kept: collections.deque[dict[str, Any]] = collections.deque(maxlen=keep_requests)
        self.disconnects = 0
        self.base_url: str | None = None
        self._log_path = Path(log_path) if log_path is not None else None
        self._log_file: IO[str] | None = None
        self._changed = anyio.Event()

    # ------------------------------------------------------------------ observing

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The log records of the latest requests (see ``keep_requests``), oldest first."""
        return list(self._kept)

    async def wait_requests(self, count: int = 1) -> None:
        """Wait until at least ``count`` requests have arrived."""
        while self.request_count < count:
            await self._changed.wait()

    async def wait_disconnects(self, count: int = 1) -> None:
        """Wait until at least ``count`` clients went away before their answer was complete."""
        while self.disconnects < count:
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def _record(self, entry: dict[str, Any]) -> None:
        self.request_count += 1
        if self._kept.maxlen != 0:
            self._kept.append(entry)
        if self._log_file is not None:
            self._log_file.write(json.dumps(entry, ensure_ascii=False) + "\n")
            self._log_file.flush()
        self._notify()

    def _open_log(self) -> None:
        if self._log_path is not None and self._log_file is None:
            self._log_file = self._log_path.open("a", encoding="utf-8")

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    # ------------------------------------------------------------------ serving

    async def serve(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host:port`` (0: any free port) until cancelled.

        Reports the base URL (``http://HOST:PORT/v1``) through ``task_status`` once listening.
        """
        config = HypercornConfig()
        config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
        config.accesslog = None
        config.loglevel = "WARNING"
        # In process, the server shares its event loop with its clients, and hundreds of them
        # can connect before the loop comes back to accept: every connection must wait in the
        # kernel's queue. With hypercorn's 100, the rest were left to SYN retransmissions and
        # ended, under load, in resets and connect timeouts. The kernel caps this at
        # net.core.somaxconn.
        config.backlog = _LISTEN_BACKLOG
        self._open_log()
        try:
            async with trio.open_nursery() as nursery:
                binds: list[str] = await nursery.start(
                    functools.partial(hypercorn_serve, self._app, config, mode="asgi")
                )
                self.base_url = f"{binds[0]}/v1"
                task_status.started(self.base_url)
        finally:
            self.base_url = None
            self._close_log()

    async def _app(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(scope, receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _http(
        self, scope: HTTPScope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        arrived = time.time()
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.disconnects += 1
                self._notify()
                return
            if message["type"] == "http.request":
                body += message.get("body", b"")
                if not message.get("more_body", False):
                    break
        headers = [
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]
        ]
        path = scope["path"]
        query = urllib.parse.parse_qsl(scope["query_string"].decode("latin-1"))
        self._record(
            request_log_entry(path, headers, bytes(body), query=query, received_at=arrived)
        )
        purpose = next((value for name, value in headers if name.lower() == PURPOSE_HEADER), "turn")
        agent = next((value for name, value in headers if name.lower() == AGENT_HEADER), None)
        if scope["method"] != "POST":
            exchange = problem_exchange(405, f"only POST is served, not {scope['method']}")
        else:
            exchange = plan_exchange(
                self.script,
                path,
                request_json(bytes(body)),
                purpose=purpose,
                cache=self.prompt_cache,
                agent=agent,
            )

        # hypercorn reports ``http.disconnect`` for a finished answer too, from inside the
        # send of its last message; a disconnect counts only while that send is not reached.
        finishing = False
        disconnected = False

        def finish() -> None:
            nonlocal finishing
            finishing = True

        async with anyio.create_task_group() as watch:

            async def wait_for_disconnect() -> None:
                nonlocal disconnected
                while (await receive())["type"] != "http.disconnect":
                    pass
                if not finishing:
                    disconnected = True
                    watch.cancel_scope.cancel()

            watch.start_soon(wait_for_disconnect)
            await _send_exchange(exchange, send, finish)
            watch.cancel_scope.cancel()
        if disconnected:
            self.disconnects += 1
            self._notify()


async def _lifespan(
    scope: LifespanScope, receive: ASGIReceiveCallable, send: ASGISendCallable
) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _send_exchange(
    exchange: Exchange, send: ASGISendCallable, finish: Callable[[], None]
) -> None:
    """Send ``exchange``; ``finish`` is called just before the message that completes it."""
    if exchange.delay_ms:
        await anyio.sleep(exchange.delay_ms / 1000)
    await send(
        {
            "type": "http.response.start",
            "status": exchange.status,
            "headers": [(name.encode(), value.encode()) for name, value in exchange.headers],
            "trailers": False,
        }
    )
    if exchange.frames is None:
        finish()
        await send({"type": "http.response.body", "body": exchange.body, "more_body": False})
        return
    for index, frame in enumerate(exchange.frames):
        if exchange.cut_after is not None and index >= exchange.cut_after:
            # Returning with the body unfinished makes hypercorn close the connection.
            finish()
            return
        if exchange.stall_ms and index:
            await anyio.sleep(exchange.stall_ms / 1000)
        await send({"type": "http.response.body", "body": frame, "more_body": True})
    finish()
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def serve_mock(
    script: ScriptSource,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    log_path: str | Path | None = None,
    keep_requests: int | None = DEFAULT_KEPT_REQUESTS,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``script`` on ``host:port`` until cancelled; reports the base URL when listening."""
    server = MockServer(script, log_path=log_path, keep_requests=keep_requests)
    await server.serve(host, port, task_status=task_status)


@asynccontextmanager
async def open_mock_server(
    script: ScriptSource = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    log_path: str | Path | None = None,
    keep_requests: int | None = DEFAULT_KEPT_REQUESTS,
    prompt_cache: bool = False,
) -> AsyncIterator[MockServer]:
    """Run a mock server for the duration of the context; yields it once it listens.

    See :class:`MockServer` for the arguments.
    """
    server = MockServer(
        script, log_path=log_path, keep_requests=keep_requests, prompt_cache=prompt_cache
    )
    async with anyio.create_task_group() as tasks:
        await tasks.start(server.serve, host, port)
        try:
            yield server
        finally:
            tasks.cancel_scope.cancel()


def main(
    script_path: str,
    host: str = "127.0.0.1",
    port: int = 0,
    log: str | None = None,
    prompt_cache: bool = False,
) -> int:
    """``relay mock-server``: serve a model script until Ctrl-C.

    Prints the base URL on one line of stdout when ready. Returns the exit code: 0 after
    Ctrl-C, 2 for an unreadable script, 1 when the server cannot listen.
    """
    try:
        script = load_model_script(script_path)
    except ScriptError as exc:
        print(f"relay mock-server: {exc}", file=sys.stderr)
        return 2

    async def run() -> None:
        # Nothing reads a request log in this process's memory: ``--log`` is the one to keep.
        server = MockServer(script, log_path=log, keep_requests=0, prompt_cache=prompt_cache)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                base_url = await nursery.start(server.serve, host, port)
                print(base_url, flush=True)
                async for _ in signals:
                    break
                nursery.cancel_scope.cancel()

    try:
        trio.run(run)
    except (OSError, ExceptionGroup) as exc:
        error = _os_error(exc)
        if error is None:
            raise
        print(f"relay mock-server: cannot listen on {host}:{port}: {error}", file=sys.stderr)
        return 1
    return 0


def _os_error(exc: BaseException) -> OSError | None:
    """The OSError that ``exc`` is, or that a group of nurseries wrapped alone, else None."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, OSError) else None
