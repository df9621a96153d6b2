"""Response bodies, read with bounds: the whole of a successful answer up to
``max_response_bytes``, and a few KiB of an error answer within a deadline of its own.

Every bound counts decoded bytes: the HTTP client decodes a compressed body piece by piece
(gzip and deflate at most 1 MiB at a time), and reading stops at the first piece past the
bound, so a small body that decompresses to gigabytes costs no more than one piece.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2

from .._base import _json
from .._base._errors import StreamError
from ._errors import ErrorAnswer

#: Bound on closing a response, which runs shielded from cancellation.
_CLOSE_S = 0.5

#: How much of an error answer's body is read, once decoded: a server's error object is a
#: few hundred bytes, and an error message quotes at most 500 characters of it.
ERROR_BODY_BYTES = 8 * 1024

#: How long the body of an error answer may take to arrive, from its status line: a server
#: has its error object ready when it sends the status.
ERROR_BODY_S = 10.0


def body_too_large(limit: int) -> str:
    """The error message for a response body past ``limit`` bytes, once decompressed."""
    return (
        f"the model server's answer is larger than {limit} bytes once decompressed "
        "(max_response_bytes)"
    )


@asynccontextmanager
async def open_body(response: httpx2.Response) -> AsyncIterator[AsyncIterator[bytes]]:
    """The decoded body of a streamed response; on exit the byte iterator and the response
    are closed, whatever happened, so that the connection is released."""
    chunks = response.aiter_bytes()
    try:
        yield chunks
    finally:
        with anyio.move_on_after(_CLOSE_S, shield=True):
            try:
                await chunks.aclose()
            finally:
                await response.aclose()


async def read_bounded(response: httpx2.Response, limit: int) -> bytes:
    """The whole (decompressed) body of a streamed ``response``, at most ``limit`` bytes.

    Raises:
        StreamError: the body is larger.
    """
    body = bytearray()
    async with open_body(response) as chunks:
        async for chunk in chunks:
            body += chunk
            if len(body) > limit:
                raise StreamError(body_too_large(limit))
    return bytes(body)


async def read_error_body(
    response: httpx2.Response, *, limit: int = ERROR_BODY_BYTES, within_s: float = ERROR_BODY_S
) -> bytes | None:
    """At most the first ``limit`` decoded bytes of ``response``'s body, then the response is
    closed; None when the body, up to the bound, did not arrive within ``within_s``. A body
    cut by a broken connection is what arrived of it."""
    body = bytearray()
    with anyio.move_on_after(within_s) as late:
        async with open_body(response) as chunks:
            try:
                async for chunk in chunks:
                    body += chunk
                    if len(body) >= limit:
                        break
            except httpx2.HTTPError:
                pass
    if late.cancelled_caught:
        return None
    return bytes(body[:limit])


def error_body(response: httpx2.Response, raw: bytes | None) -> object:
    """What the SDK would make of an error body: the error object of a JSON body (its
    ``error`` member, when it has one), else the text; None for no body."""
    if raw is None:
        return None
    try:
        text = raw.decode(response.charset_encoding or "utf-8", "replace").strip()
    except LookupError:
        text = raw.decode("utf-8", "replace").strip()
    try:
        parsed: object = _json.loads(text)
    except ValueError:
        return text
    if isinstance(parsed, dict):
        return parsed.get("error", parsed)
    return parsed


async def read_error_answer(response: httpx2.Response) -> None:
    """A response hook: an error status (4xx, 5xx) becomes :class:`ErrorAnswer`, its body read
    by :func:`read_error_body`.

    Left to the SDK, the body of an error answer would be read whole, without a bound on its
    size or its duration. Raised from the hook, the error reaches relay before the SDK reads
    anything: the SDK passes its own exceptions on as they are.
    """
    if response.status_code < 400:
        return
    raw = await read_error_body(response)
    raise ErrorAnswer(response, error_body(response, raw), late=raw is None, within_s=ERROR_BODY_S)
