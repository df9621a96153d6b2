"""llama-server's answers, byte for byte, served to the real wire clients in virtual time.

The shapes are those ``llama-server`` (llama.cpp, SmolLM2-135M, ``--ctx-size 2048``) sends
over a socket: headers at once and the first event only after the whole prompt is read; chat
frames with ``data:`` lines only and a ``[DONE]`` end; Responses frames with ``event:`` lines,
no ``[DONE]``, ``timings`` next to ``response``; a cut answer that is still ``completed`` on the
Responses wire; an overflow refused with status 400, an integer ``code``, the kind in ``type``,
the server's own ``n_prompt_tokens`` and ``Connection: close``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import attrs
import httpx2

MODEL_PATH = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"

STREAM_HEADERS = (
    ("Server", "llama.cpp"),
    ("Access-Control-Allow-Origin", ""),
    ("X-Accel-Buffering", "no"),
    ("Content-Type", "text/event-stream"),
    ("Keep-Alive", "timeout=5, max=100"),
)


@attrs.frozen
class Answer:
    """One answer: a status, headers and body chunks, with a wait before the first chunk."""

    status: int
    headers: tuple[tuple[str, str], ...]
    chunks: tuple[bytes, ...]
    prompt_s: float = 0.0
    """Seconds between the headers and the first chunk (the server reads the prompt)."""


def _frame(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def chat_answer(
    pieces: Sequence[str],
    *,
    finish: str,
    prompt_tokens: int,
    prompt_s: float = 0.0,
) -> Answer:
    """A streamed chat completion as llama-server sends it."""
    base = {
        "created": 1796064114,
        "id": "chatcmpl-DmkiDYb8m9vFgp0dh7LrN69X7cnGCuoR",
        "model": MODEL_PATH,
        "system_fingerprint": "b1-0c1e570",
        "object": "chat.completion.chunk",
    }

    def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
        choice = {"finish_reason": reason, "index": 0, "delta": delta}
        return _frame({"choices": [choice], **base})

    frames = [chunk({"role": "assistant", "content": None})]
    frames += [chunk({"content": piece}) for piece in pieces]
    frames.append(chunk({}, finish))
    usage = {
        "completion_tokens": len(pieces),
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + len(pieces),
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    timings = {"cache_n": 0, "prompt_n": prompt_tokens, "predicted_n": len(pieces)}
    frames.append(_frame({"choices": [], **base, "usage": usage, "timings": timings}))
    frames.append(b"data: [DONE]\n\n")
    return Answer(200, STREAM_HEADERS, tuple(frames), prompt_s)


def responses_answer(pieces: Sequence[str], *, prompt_tokens: int, prompt_s: float = 0.0) -> Answer:
    """A streamed response as llama-server sends it: ``completed`` even when cut."""
    rid = "resp_ocsalIxUgHpFdTe3mISFBM6Jt8tdykVp"
    mid = "msg_Je6SCnocFVhPCnF1lAEfCoevzY5hV4ET"
    text = "".join(pieces)
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
    item = {"type": "message", "status": "completed", "id": mid, "content": [part]}
    item["role"] = "assistant"
    frames = [
        _frame(
            {"type": "response.created", "response": {"id": rid, "object": "response",
                                                      "status": "in_progress"}},
            "response.created",
        ),
        _frame(
            {"type": "response.in_progress", "response": {"id": rid, "object": "response",
                                                          "status": "in_progress"}},
            "response.in_progress",
        ),
        _frame(
            {"type": "response.output_item.added",
             "item": {"content": [], "id": mid, "role": "assistant", "status": "in_progress",
                      "type": "message"}},
            "response.output_item.added",
        ),
    ]  # fmt: skip
    frames += [
        _frame(
            {"type": "response.output_text.delta", "item_id": mid, "delta": piece},
            "response.output_text.delta",
        )
        for piece in pieces
    ]
    frames.append(
        _frame({"type": "response.output_item.done", "item": item}, "response.output_item.done")
    )
    usage = {
        "input_tokens": prompt_tokens,
        "output_tokens": len(pieces),
        "total_tokens": prompt_tokens + len(pieces),
        "input_tokens_details": {"cached_tokens": 0},
    }
    completed = {
        "type": "response.completed",
        "response": {"id": rid, "object": "response", "created_at": 1796064171,
                     "status": "completed", "model": MODEL_PATH, "output": [item],
                     "usage": usage},
        "timings": {"cache_n": 0, "prompt_n": prompt_tokens, "predicted_n": len(pieces)},
    }  # fmt: skip
    frames.append(_frame(completed, "response.completed"))
    return Answer(200, STREAM_HEADERS, tuple(frames), prompt_s)


def overflow_answer(n_prompt_tokens: int, n_ctx: int) -> Answer:
    """The refusal of a prompt longer than the window (the same on both wires)."""
    body = {
        "error": {
            "code": 400,
            "message": f"request ({n_prompt_tokens} tokens) exceeds the available context size "
            f"({n_ctx} tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": n_prompt_tokens,
            "n_ctx": n_ctx,
        }
    }
    headers = (
        ("Server", "llama.cpp"),
        ("Access-Control-Allow-Origin", ""),
        ("Content-Type", "application/json; charset=utf-8"),
        ("Connection", "close"),
    )
    return Answer(400, headers, (json.dumps(body, separators=(",", ":")).encode(),))


class CapturedServer(httpx2.AsyncBaseTransport):
    """Answers requests in order with the given answers; the last one repeats.

    Attributes:
        bodies: the JSON body of every request, in order.
    """

    def __init__(self, answers: Sequence[Answer | Callable[[dict[str, Any]], Answer]]):
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(await request.aread())
        self.bodies.append(body)
        answer = self.answers[min(len(self.bodies), len(self.answers)) - 1]
        if callable(answer):
            answer = answer(body)
        return httpx2.Response(answer.status, headers=list(answer.headers), content=_play(answer))


async def _play(answer: Answer) -> AsyncIterator[bytes]:
    if answer.prompt_s:
        await anyio.sleep(answer.prompt_s)
    for chunk in answer.chunks:
        yield chunk
