"""An asyncio web endpoint that runs a turn and streams its events as server-sent events.

`POST /turn` with a JSON body `{"text": ...}` answers `text/event-stream`: one `data:` line per
relay event, until the turn ends. The program serves on 127.0.0.1, asks itself one question
with an HTTP client, prints what streamed back and exits.
"""

import asyncio
import json
import socket
from typing import Any

import httpx2
from hypercorn.asyncio import serve
from hypercorn.config import Config as ServerConfig

import relay


class TurnEndpoint:
    """A minimal ASGI app around one relay session."""

    def __init__(self, session: relay.Session) -> None:
        self.session = session
        self.events = session.events()
        self.lock = asyncio.Lock()  # one turn at a time: the session's events have one reader

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http" or scope["path"] != "/turn":
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        text = json.loads(body)["text"]
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        async with self.lock:
            turn_id = await self.session.submit(relay.UserTurn(items=[relay.Text(text)]))
            async for event in self.events:
                frame = f"data: {json.dumps(relay.lowlevel.to_json(event))}\n\n".encode()
                await send({"type": "http.response.body", "body": frame, "more_body": True})
                if event.id == turn_id and isinstance(
                    event.msg, relay.TurnComplete | relay.TurnAborted
                ):
                    break
        await send({"type": "http.response.body", "body": b""})


async def main() -> None:
    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))
    async with relay.open_session(config) as session:
        # Listen on a free loopback port first, then hand the socket to the server, so the
        # client below can connect at once.
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        server_config = ServerConfig()
        server_config.bind = [f"fd://{listener.fileno()}"]
        server_config.accesslog = None
        server_config.loglevel = "WARNING"
        stop = asyncio.Event()
        server = asyncio.create_task(
            serve(TurnEndpoint(session), server_config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]
        )
        async with (
            httpx2.AsyncClient() as client,
            client.stream(
                "POST", f"http://127.0.0.1:{port}/turn", json={"text": "hello over HTTP"}
            ) as response,
        ):
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    msg = json.loads(line[6:])["msg"]
                    print(msg["type"], msg.get("last_agent_message", ""))
        stop.set()
        await server
        listener.detach()  # the server owned the descriptor and has closed it


if __name__ == "__main__":
    asyncio.run(main())
