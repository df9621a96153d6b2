"""The embedded ``scripted`` provider: a model that runs in-process from a model script.

It goes through the same request body builder and stream parser as the HTTP wire, and its
scripted HTTP errors through the same classification, so a session cannot tell it from a server
except by speed. It never imports the openai SDK.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio

from .._base._errors import StreamError
from .._base._model import CompactRequest, ModelEvent, Prompt
from ._responses import ResponseStreamParser, compact_request_body, request_body
from ._script import ModelScript, ReplyPlan, load_model_script, parse_model_script

T = TypeVar("T")


#: How many requests a :class:`ScriptedModel` remembers by default.
REQUEST_LOG = 100


class RequestLog(list[T]):
    """A list that keeps only its last ``limit`` entries (None: every entry)."""

    def __init__(self, limit: int | None) -> None:
        super().__init__()
        self.limit = limit
        self.total = 0
        """How many entries were ever appended."""

    def append(self, entry: T) -> None:
        self.total += 1
        if self.limit is not None:
            if self.limit <= 0:
                return
            if len(self) >= self.limit:
                del self[0]
        super().append(entry)


class ScriptedModel:
    """An in-process model driven by a model script (docs/model-script.md).

    It remembers the last ``request_log`` requests (default 100; None: all of them), so that
    a long session run on it keeps constant memory; each request's ``input`` is a read-only
    view of the session's history, not a copy.

    Attributes:
        requests: the JSON body of the last ``/responses`` requests, in order
            (``requests.total`` counts them all).
        prompts: the :class:`Prompt` of the same requests, in order.
        compact_requests: the JSON body of the last ``/responses/compact`` requests.
    """

    def __init__(
        self,
        script: ModelScript | Mapping[str, Any] | str | Path | None = None,
        *,
        request_log: int | None = REQUEST_LOG,
    ):
        if script is None:
            self.script = ModelScript()
        elif isinstance(script, ModelScript):
            self.script = script
        elif isinstance(script, Mapping):
            self.script = parse_model_script(script)
        else:
            self.script = load_model_script(script)
        self.requests: RequestLog[dict[str, Any]] = RequestLog(request_log)
        self.prompts: RequestLog[Prompt] = RequestLog(request_log)
        self.compact_requests: RequestLog[dict[str, Any]] = RequestLog(request_log)

    @asynccontextmanager
    async def stream(self, prompt: Prompt) -> AsyncIterator[AsyncIterator[ModelEvent]]:
        body = request_body(prompt, shared_input=True)
        self.requests.append(body)
        self.prompts.append(prompt)
        plan = self.script.for_agent(prompt.agent_path).plan(body, purpose=prompt.purpose)
        if plan.delay_ms:
            await anyio.sleep(plan.delay_ms / 1000)
        if plan.http_error is not None:
            raise plan.http_error.to_error()
        yield _play(plan)

    async def compact(self, request: CompactRequest) -> Any:
        body = compact_request_body(request)
        self.compact_requests.append(body)
        reply = self.script.plan_compact(body)
        if reply.delay_ms:
            await anyio.sleep(reply.delay_ms / 1000)
        if reply.http_error is not None:
            raise reply.http_error.to_error()
        return reply.body


async def _play(plan: ReplyPlan) -> AsyncIterator[ModelEvent]:
    parser = ResponseStreamParser()
    for index, event in enumerate(plan.events):
        if plan.cut_after_events is not None and index >= plan.cut_after_events:
            raise StreamError("connection closed before response.completed")
        if plan.stall_ms and index:
            await anyio.sleep(plan.stall_ms / 1000)
        for model_event in parser.feed(event):
            yield model_event
    parser.finish()
