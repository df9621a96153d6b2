"""What both wires share: the deadlines of a streamed request, the event reader of its body
(idle timeout, failures translated) and the SDK client with its provider and secret.

A streamed request has three deadlines (docs/session.md), each one cancel scope around its
span: ``stream_max_duration_ms`` around the whole request, from sending it to the end of the
answer; ``stream_first_event_timeout_ms`` from sending it to its first event (the connection,
the response headers, an error body, the first event); and the idle timeout between two
events. The error body of an error status has a bound of its own (:mod:`._body`).
"""

from __future__ import annotations

import collections
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx2

from .._base import _json
from .._base._config import ProviderConfig
from .._base._errors import ModelError, StreamError
from .._base._model import ModelEvent
from .._base._secret import redact
from .._models._responses import AGENT_HEADER, PURPOSE_HEADER, with_server_counts
from ._body import body_too_large, open_body
from ._errors import FAILURES, redact_error, translate, with_message
from ._sdk import APIStatusError, AsyncOpenAI
from ._sse import ServerSentEvent, SseDecoder, TooLarge

#: How long to wait for the end of a stream after its terminal event.
_DRAIN_S = 1.0

#: How much of a body that is not an event stream an error quotes.
_QUOTED_BYTES = 200


def first_event_timeout(provider: ProviderConfig, what: str = "event") -> StreamError:
    """The error of a request whose first ``what`` did not come in time."""
    return StreamError(
        f"first-event timeout: no {what} from the model server within "
        f"{provider.stream_first_event_timeout_ms} ms of the request"
    )


def took_too_long(provider: ProviderConfig) -> StreamError:
    """The error of a request that outlasted ``stream_max_duration_ms``."""
    return StreamError(
        f"the model server's answer took longer than {provider.stream_max_duration_ms} ms "
        "(stream_max_duration_ms)"
    )


class EventReader:
    """The JSON objects of a streamed response body, with an idle timeout, failures translated.

    Not an async generator on purpose: it holds no frame that would need finalising when the
    caller stops early. Chat streams end with a ``[DONE]`` frame; nothing after it is read.
    The wait for the first event is the caller's to bound (:meth:`wait_first`); the idle
    timeout runs between events.
    """

    def __init__(
        self,
        chunks: AsyncIterator[bytes],
        *,
        idle_s: float,
        secret: str | None,
        provider: ProviderConfig | None = None,
    ):
        self._chunks = chunks
        self._idle_s = idle_s
        self._secret = secret
        limits = provider or ProviderConfig(name="")
        self._decoder = SseDecoder(
            max_line=limits.stream_max_line_bytes, max_event=limits.stream_max_event_bytes
        )
        self._max_body = limits.max_response_bytes
        self._body_size = 0
        self._pending: collections.deque[ServerSentEvent] = collections.deque()
        self._ended = False
        self.answered = False
        """Set by the wire once the answer is complete: what follows it may be drained."""

    def __aiter__(self) -> EventReader:
        return self

    async def wait_first(self) -> None:
        """Read until the first event has arrived (or the stream ended), without a deadline
        of its own: the caller's scope bounds the wait."""
        await self._fill()

    async def _fill(self) -> None:
        """Read until an event is pending or the stream ended."""
        while not self._pending and not self._ended:
            try:
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                self._ended = True
            except FAILURES as exc:
                raise translate(exc, secret=self._secret) from exc
            else:
                self._body_size += len(chunk)
                if self._body_size > self._max_body:
                    raise StreamError(body_too_large(self._max_body))
                try:
                    self._pending.extend(self._decoder.feed(chunk))
                except UnicodeDecodeError as exc:
                    raise translate(exc, secret=self._secret) from exc
                except TooLarge as exc:
                    raise StreamError(str(exc)) from exc

    async def __anext__(self) -> Mapping[str, Any]:
        # The idle timeout runs from the previous event: keep-alive comments do not reset it.
        with anyio.move_on_after(self._idle_s) as idle:
            await self._fill()
        if idle.cancelled_caught:
            raise StreamError(
                f"idle timeout: no event from the model server for {self._idle_s * 1000:g} ms"
            )
        if not self._pending:
            raise StopAsyncIteration
        sse = self._pending.popleft()
        if sse.data == "[DONE]":
            self._ended = True
            self._pending.clear()
            raise StopAsyncIteration
        try:
            parsed: object = _json.loads(sse.data)
        except ValueError as exc:
            raise translate(exc, secret=self._secret) from exc
        if not isinstance(parsed, Mapping):
            raise StreamError(
                f"malformed event from the model server: expected a JSON object, "
                f"got {type(parsed).__name__}"
            )
        event: Mapping[str, Any] = parsed
        if "type" not in event and sse.event is not None:
            event = {"type": sse.event, **event}
        return event

    async def drain(self) -> None:
        """Read what follows the end of the answer, so that the connection can be reused.

        The answer is complete at this point: a failure, or a server that keeps the stream
        open, changes nothing about it, so the wait is short and errors are ignored.
        """
        with anyio.move_on_after(_DRAIN_S):
            try:
                async for _ in self._chunks:
                    pass
            except FAILURES:
                pass


class WireClient:
    """What both wires share: the SDK client, the provider and the secret to keep out."""

    def __init__(self, sdk: AsyncOpenAI, provider: ProviderConfig, *, secret: str | None):
        self._sdk = sdk
        self._provider = provider
        self._secret = secret

    @property
    def provider(self) -> ProviderConfig:
        """The provider this client talks to."""
        return self._provider

    def _deadlines(self) -> tuple[float, float]:
        """When a request sent now must have its first event, and when its whole answer."""
        sent = anyio.current_time()
        return (
            sent + self._provider.stream_first_event_timeout_ms / 1000,
            sent + self._provider.stream_max_duration_ms / 1000,
        )

    @asynccontextmanager
    async def _stream(
        self,
        path: str,
        body: Mapping[str, Any],
        purpose: str,
        play: Callable[[EventReader], AsyncGenerator[ModelEvent]],
        agent: str | None = None,
    ) -> AsyncIterator[AsyncIterator[ModelEvent]]:
        """POST ``body`` to ``path`` as a streamed request; yields ``play``'s model events.

        ``play`` sets :attr:`EventReader.answered` once the answer is complete; what follows
        is then drained, after the request's deadline. ``agent``: a sub-agent's path, sent as a
        header.
        """
        provider = self._provider
        first_by, end_by = self._deadlines()
        async with AsyncExitStack() as stack:
            with anyio.CancelScope(deadline=end_by) as whole:
                with anyio.move_on_at(first_by) as first:
                    response = await self._post(path, body, purpose, agent)
                    # The SDK hands back the raw response: its own event iterator leaves async
                    # generators unclosed when a stream ends early (or at ``[DONE]``), and
                    # every layer here must be closed when the caller leaves.
                    chunks = await stack.enter_async_context(open_body(response))
                    await self._check_event_stream(response, chunks)
                    reader = EventReader(
                        chunks,
                        idle_s=provider.stream_idle_timeout_ms / 1000,
                        secret=self._secret,
                        provider=provider,
                    )
                    await reader.wait_first()
                if first.cancelled_caught:
                    raise first_event_timeout(provider)
                events = play(reader)
                try:
                    yield events
                except ModelError as exc:
                    capped = self.capped(exc)
                    if capped is exc:
                        raise
                    raise capped from exc
                finally:
                    await events.aclose()
            if whole.cancelled_caught:
                raise took_too_long(provider)
            if reader.answered:
                await reader.drain()

    async def _post(
        self, path: str, body: Mapping[str, Any], purpose: str, agent: str | None = None
    ) -> httpx2.Response:
        """Send ``body`` to ``path`` as a streamed request; the response, once its headers
        have come (an error status is raised, translated)."""
        headers = {PURPOSE_HEADER: purpose, "Accept": "text/event-stream"}
        if agent is not None:
            headers[AGENT_HEADER] = agent
        try:
            return await self._sdk.post(
                path,
                body=dict(body),
                cast_to=httpx2.Response,
                stream=True,
                options={"headers": headers},
            )
        except FAILURES as exc:
            error = translate(exc, secret=self._secret)
            if isinstance(exc, APIStatusError):
                error = with_server_counts(error, exc.body)
            raise self.capped(error) from exc

    async def _check_event_stream(
        self, response: httpx2.Response, chunks: AsyncIterator[bytes]
    ) -> None:
        """Raise a :class:`StreamError` saying what arrived when the answer is not an event
        stream (an HTML page from a proxy, a JSON document): the content type and the
        beginning of the body."""
        content_type = response.headers.get("content-type")
        if content_type is None:
            return
        media = content_type.partition(";")[0].strip().lower()
        if media == "text/event-stream":
            return
        start = b""
        with anyio.move_on_after(self._provider.stream_idle_timeout_ms / 1000):
            try:
                async for chunk in chunks:
                    start += chunk
                    if len(start) >= _QUOTED_BYTES:
                        break
            except FAILURES:
                pass
        text = " ".join(start[:_QUOTED_BYTES].decode("utf-8", "replace").split())
        quoted = redact(text, self._secret)
        raise StreamError(
            f"the model server answered with {media or 'an empty content type'} instead of "
            f"an event stream (HTTP {response.status_code})" + (f": {quoted}" if quoted else "")
        )

    def capped(self, error: ModelError) -> ModelError:
        """``error`` with its retry-after cut to the provider's ``max_retry_after_ms``; the
        message then says what the server asked for."""
        limit = self._provider.max_retry_after_ms / 1000
        if error.retry_after is None or error.retry_after <= limit:
            return error
        message = (
            f"{error.message} (the server asked to wait {error.retry_after:g} s, more than "
            f"the provider's max_retry_after_ms of {limit:g} s)"
        )
        return with_message(error, message, retry_after=limit)

    def _checked(
        self, feed: Callable[[Mapping[str, Any]], list[ModelEvent]], event: Mapping[str, Any]
    ) -> list[ModelEvent]:
        """``feed(event)``, with the secret kept out of the errors the server reported and
        their retry-after capped."""
        try:
            return feed(event)
        except RecursionError:
            raise StreamError(
                "malformed event from the model server: nested too deeply to be read"
            ) from None
        except ModelError as exc:
            redacted = self.capped(redact_error(exc, self._secret))
            if redacted is exc:
                raise
            raise redacted from exc
