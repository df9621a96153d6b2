"""Floor: one streamed ``POST /responses`` with asyncio and h11, in a process of its own.

``python bench/floors/asyncio_h11.py BASE_URL``: the least a Python process that makes one model
request must pay (start-up, imports, one loopback request, the whole response read), set
beside ``relay run``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from urllib.parse import urlsplit

import h11

BODY = json.dumps(
    {
        "model": "mock-model",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "hello"}],
            }
        ],
        "stream": True,
    }
).encode()


async def main(url: str) -> None:
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    conn = h11.Connection(h11.CLIENT)
    headers = [
        ("Host", parts.netloc),
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(BODY))),
    ]
    writer.write(
        conn.send(
            h11.Request(
                method="POST", target=parts.path.rstrip("/") + "/responses", headers=headers
            )
        )
    )
    writer.write(conn.send(h11.Data(data=BODY)))
    writer.write(conn.send(h11.EndOfMessage()))
    await writer.drain()
    received = 0
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(65536))
        elif isinstance(event, h11.Response) and event.status_code != 200:
            sys.exit(f"status {event.status_code}")
        elif isinstance(event, h11.Data):
            received += len(event.data)
        elif isinstance(event, h11.EndOfMessage):
            break
    writer.close()
    await writer.wait_closed()
    if not received:
        sys.exit("empty response")


asyncio.run(main(sys.argv[1]))
