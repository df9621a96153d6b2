"""The Responses wire (docs/session.md): streamed ``POST /responses`` and remote compaction."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import httpx2

from .._base import _json
from .._base._model import CompactRequest, ModelEvent, Prompt
from .._base._secret import redact_json
from .._models._responses import (
    PURPOSE_HEADER,
    ResponseStreamParser,
    compact_request_body,
    request_body,
)
from ._body import read_bounded
from ._errors import FAILURES, translate
from .base import EventReader, WireClient, first_event_timeout, took_too_long


class ResponsesClient(WireClient):
    """The Responses wire (docs/session.md): streamed ``POST /responses`` and remote compaction."""

    def stream(self, prompt: Prompt) -> AbstractAsyncContextManager[AsyncIterator[ModelEvent]]:
        """Send ``prompt``; the context yields its events (see :class:`ModelClient`)."""
        body = request_body(prompt)
        return self._stream("/responses", body, prompt.purpose, self._events, prompt.agent_path)

    async def _events(self, reader: EventReader) -> AsyncGenerator[ModelEvent]:
        parser = ResponseStreamParser()
        async for event in reader:
            for model_event in self._checked(parser.feed, event):
                yield model_event
            if parser.completed:
                break
        parser.finish()
        reader.answered = True

    async def compact(self, request: CompactRequest) -> Any:
        """``POST /responses/compact``, once; returns the JSON body of the answer, unchecked.

        Retries belong to the caller (:meth:`relay.lowlevel.BackendContext.remote_compact`), as for
        streams. Every string of the answer is redacted: an answer that fails validation is
        quoted in the error that reports it. The answer's headers must come within
        ``stream_first_event_timeout_ms`` of the request (the server works out the whole
        answer before it sends them), and the whole answer within ``stream_max_duration_ms``.
        """
        provider = self._provider
        first_by, end_by = self._deadlines()
        try:
            with anyio.CancelScope(deadline=end_by) as whole:
                with anyio.move_on_at(first_by) as first:
                    response = await self._sdk.post(
                        "/responses/compact",
                        body=compact_request_body(request),
                        cast_to=httpx2.Response,
                        stream=True,
                        options={"headers": {PURPOSE_HEADER: "compact"}},
                    )
                if first.cancelled_caught:
                    raise first_event_timeout(provider, "answer")
                # Read with a bound: the SDK would hold whatever the server sends.
                body = await read_bounded(response, provider.max_response_bytes)
        except FAILURES as exc:
            raise self.capped(translate(exc, secret=self._secret)) from exc
        if whole.cancelled_caught:
            raise took_too_long(provider)
        try:
            answer: object = _json.loads(body)
        except ValueError:
            # Not JSON: the text is the answer, which the caller's validation reports.
            answer = body.decode("utf-8", "replace")
        try:
            return redact_json(answer, self._secret)
        except RecursionError:
            return "an answer nested too deeply to be read"
