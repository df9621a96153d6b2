"""What relay reads of a streamable-HTTP MCP server: each answer bounded, and the answers it
cannot read reported as such (docs/tools.md).

The SDK's transport reads a JSON answer whole, and an event stream an event at a time; relay
gives it an HTTP client whose every response body is read through :class:`BoundedBody`, at most
``tool_output_max_bytes`` for a JSON body and for each event of a stream. A body over it ends
with :class:`AnswerTooLarge`, which the transport takes for an answer it could not read (a JSON
body) or a stream that failed (an event stream): either way it fails the request the body was
the answer to, at once, and the connection goes on. :class:`Answers`, between the transport and
the client session, puts :class:`~._answers.Unreadable` in the error of that request, and in the
error the transport makes of an answer that is no message (``Failed to parse ...``): the call's
output then says why it could not be read, and the server is not taken for gone.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import mcp.types as mcp_types
from mcp.shared.message import SessionMessage

from ._answers import RequestId, Unreadable, over_bound, request_key, why_reported

#: How the SDK's transport words an answer it cannot parse (JSON body, event).
_PARSE_FAILURES = ("Failed to parse JSON response: ", "Failed to parse SSE message: ")
#: The end of an event of a stream (a blank line).
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class AnswerTooLarge(httpx2.SSEError, httpx2.StreamError):
    """A response body, or one event of it, over the bound: the SDK's transport fails the
    request it answers (a stream error for an event stream, a read error for a body)."""


class BoundedBody(httpx2.AsyncByteStream):
    """A response body read up to ``bound`` bytes (an event stream: each event)."""

    def __init__(
        self,
        inner: httpx2.AsyncByteStream,
        bound: int,
        *,
        events: bool,
        on_over: Any,
    ) -> None:
        self._inner = inner
        self._bound = bound
        self._events = events
        self._on_over = on_over

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        tail = b""
        async for chunk in self._inner:
            largest = size + len(chunk)
            if self._events:
                # Each event is counted on its own: a stream may be long, an event not.
                seen = tail + chunk
                ends = [len(tail), *(match.end() for match in _EVENT_END.finditer(seen))]
                if len(ends) > 1:
                    events = [b - a for a, b in itertools.pairwise(ends)]
                    largest = max(size + events[0], *events[1:], len(seen) - ends[-1])
                    size = len(seen) - ends[-1]
                else:
                    size = largest
                tail = seen[-3:]
            else:
                size = largest
            if largest > self._bound:
                self._on_over()
                raise AnswerTooLarge(over_bound(self._bound))
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class AnswerBook:
    """What the HTTP client of one connection saw: the requests whose answers were over the
    bound, by id."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.over: dict[RequestId, str] = {}

    async def bound_response(self, response: httpx2.Response) -> None:
        """An event hook of the client: ``response``'s body read through
        :class:`BoundedBody`."""
        request_id = _request_id(response.request)
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()

        def over() -> None:
            if request_id is not None:
                self.over[request_id] = over_bound(self.bound)

        response.stream = BoundedBody(
            response.stream,  # type: ignore[arg-type]
            self.bound,
            events=kind == "text/event-stream",
            on_over=over,
        )

    def unreadable(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        """``item`` with :class:`~._answers.Unreadable` in its error, when it is the error of
        a request whose answer could not be read."""
        if not isinstance(item, SessionMessage):
            return item
        message = item.message
        if not isinstance(message, mcp_types.JSONRPCError):
            return item
        error = message.error
        why = self.over.pop(request_key(message.id), None) if message.id is not None else None
        if why is None and error.code == mcp_types.PARSE_ERROR:
            for prefix in _PARSE_FAILURES:
                if error.message.startswith(prefix):
                    why = why_reported(error.message)
        if why is None:
            return item
        marked = mcp_types.ErrorData(code=error.code, message=error.message, data=Unreadable(why))
        return SessionMessage(message.model_copy(update={"error": marked}), item.metadata)


def _request_id(request: httpx2.Request) -> RequestId | None:
    """The JSON-RPC id of the request a POST carries, if it carries one."""
    if request.method != "POST":
        return None
    try:
        body = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    found = body.get("id") if isinstance(body, dict) else None
    return request_key(found) if isinstance(found, int | str) else None


class Answers:
    """The transport's stream of answers, as the client session reads it, each passed through
    :meth:`AnswerBook.unreadable`."""

    def __init__(self, inner: Any, book: AnswerBook) -> None:
        self._inner = inner
        self._book = book

    @property
    def last_context(self) -> Any:
        """The context the transport sent the last item in (the session runs handlers in
        it)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        return self._book.unreadable(await self._inner.receive())

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Answers:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Answers:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


__all__ = ["AnswerBook", "AnswerTooLarge", "Answers", "BoundedBody"]
