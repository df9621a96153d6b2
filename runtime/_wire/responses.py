"""The Responses wire (docs/session.md): streamed ``POST /responses`` and remote compaction."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

from .._model import CompactRequest, ModelEvent, Prompt
from .._responses import PURPOSE_HEADER, ResponseStreamParser, compact_request_body, request_body
from ._errors import FAILURES, translate
from .base import EventReader, WireClient


class ResponsesClient(WireClient):
    """The Responses wire (docs/session.md): streamed ``POST /responses`` and remote compaction."""

    def stream(self, prompt: Prompt) -> AbstractAsyncContextManager[AsyncIterator[ModelEvent]]:
        """Send ``prompt``; the context yields its events (see :class:`ModelClient`)."""
        return self._stream("/responses", request_body(prompt), prompt.purpose, self._events)

    async def _events(self, reader: EventReader) -> AsyncGenerator[ModelEvent]:
        parser = ResponseStreamParser()
        async for event in reader:
            for model_event in self._checked(parser.feed, event):
                yield model_event
            if parser.completed:
                break
        parser.finish()
        await reader.drain()

    async def compact(self, request: CompactRequest) -> Any:
        """``POST /responses/compact``, once; returns the JSON body of the answer, unchecked.

        Retries belong to the caller (:meth:`relay.lowlevel.TaskContext.remote_compact`), as for
        streams.
        """
        try:
            return await self._sdk.post(
                "/responses/compact",
                body=compact_request_body(request),
                cast_to=object,
                options={"headers": {PURPOSE_HEADER: "compact"}},
            )
        except FAILURES as exc:
            raise translate(exc, secret=self._secret) from exc
