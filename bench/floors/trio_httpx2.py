"""Floor: one streamed ``POST /responses`` with trio and httpx2, in a process of its own.

``python bench/floors/trio_httpx2.py BASE_URL``: the least a Python process that makes one model
request must pay (start-up, imports, one loopback request, the whole response read), set
beside ``relay run``.
"""

from __future__ import annotations

import sys

import httpx2
import trio

BODY = {
    "model": "mock-model",
    "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}
    ],
    "stream": True,
}


async def main(url: str) -> None:
    async with (
        httpx2.AsyncClient() as client,
        client.stream("POST", url.rstrip("/") + "/responses", json=BODY) as response,
    ):
        response.raise_for_status()
        received = 0
        async for chunk in response.aiter_bytes():
            received += len(chunk)
    if not received:
        sys.exit("empty response")


trio.run(main, sys.argv[1])
