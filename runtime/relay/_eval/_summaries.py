"""The summaries of a real compaction model, shared by the runs of one ``relay eval``; and
the turns of a live case, likewise.

When a configuration sends compaction summaries to a model of their own
(``compact_model_provider``, docs/compaction.md), every run of the matrix talks to it through
one client, and a summary request identical to one already answered gets that answer again
instead of a second computation. Runs of one case under configurations that differ only in
what happens *after* a compaction (the work-state record, the files placed back) send the same
first summary request, byte for byte; the model samples greedily, so the answer would be the
same, and computing it once is what keeps a real-model run of the corpus within its hour.

Each run sees the duration the computation took, replayed or not: the latency figure is the
request's at the model server, the wait for a free slot included.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import attrs

from .._base._config import Config, ProviderConfig
from .._base._model import CompactRequest, ModelClient, ModelEvent, Prompt
from .._models._responses import request_body
from .._open import open_model_client


def request_key(prompt: Prompt, cwd: str | None = None) -> str:
    """What identifies a request: the SHA-256 of its body, keys sorted, without what differs
    between two runs of one case and no model reads as content: the session's cache key, the
    ids of the items (a scripted model's ids differ from one run to the next), and the run's
    working directory ``cwd`` (each run works in a copy of its own)."""
    body = dict(request_body(prompt))
    body.pop("prompt_cache_key", None)
    body["input"] = [
        {k: v for k, v in item.items() if k != "id"} if isinstance(item, Mapping) else item
        for item in body.get("input", [])
    ]
    text = json.dumps(body, sort_keys=True, ensure_ascii=False)
    if cwd:
        text = text.replace(json.dumps(cwd)[1:-1], "<cwd>")
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


@attrs.define
class _Answer:
    events: list[ModelEvent]
    duration_ms: int


@attrs.define
class SharedSummaries:
    """One compaction model's client for every run, answering a repeated request from memory.

    Only a request that completed is remembered; one that failed is asked again by the next
    run that sends it. Two runs that send the same request at once wait for one answer.
    """

    inner: ModelClient
    answers: dict[str, _Answer] = attrs.field(factory=dict)
    _pending: dict[str, anyio.Event] = attrs.field(factory=dict)
    computed: int = 0
    """Requests the model answered."""
    replayed: int = 0
    """Requests answered from memory."""

    def for_run(self, cwd: str | None = None) -> RunSummaries:
        """The client of one run working in ``cwd``: it keeps the duration of each of its
        summary requests."""
        return RunSummaries(self, cwd)

    def knows(self, prompt: Prompt, cwd: str | None = None) -> bool:
        """Whether ``prompt`` would be answered from memory."""
        return request_key(prompt, cwd) in self.answers

    async def answer(
        self, prompt: Prompt, cwd: str | None = None
    ) -> tuple[list[ModelEvent], int, bool]:
        """The events of ``prompt``'s answer, how long computing them took, and whether they
        came from memory."""
        key = request_key(prompt, cwd)
        while True:
            if key in self.answers:
                self.replayed += 1
                known = self.answers[key]
                return known.events, known.duration_ms, True
            waiting = self._pending.get(key)
            if waiting is None:
                break
            await waiting.wait()
        done = self._pending[key] = anyio.Event()
        try:
            started = anyio.current_time()
            async with self.inner.stream(prompt) as events:
                collected = [event async for event in events]
            duration = round((anyio.current_time() - started) * 1000)
            self.answers[key] = _Answer(collected, duration)
            self.computed += 1
            return collected, duration, False
        finally:
            del self._pending[key]
            done.set()


@attrs.define
class RunSummaries:
    """A run's view of :class:`SharedSummaries` (a :class:`~relay.lowlevel.ModelClient`)."""

    shared: SharedSummaries
    cwd: str | None = None
    """The run's working directory."""
    durations_ms: list[int] = attrs.field(factory=list)
    """Each request of the run, in order: how long the model took to answer it."""
    compact_durations_ms: list[int] = attrs.field(factory=list)
    """The same, of its summary requests alone."""
    unread: list[Prompt] = attrs.field(factory=list)
    """The run's requests since its latest computed one, in order: each was answered from
    memory, and the server never read it."""
    warmed: int = 0
    """Requests sent again for the server's prompt cache (:meth:`warm_for`)."""

    async def warm_for(self, prompt: Prompt) -> None:
        """Before ``prompt`` goes to the server, let the server read the run's requests that
        were answered from memory since its latest computed one, in order, each sent with an
        answer limit of one token. A server's prompt cache then holds what this run alone
        would have left there (llama-server keeps earlier prompts besides the latest), and
        what ``prompt`` reads anew is measured against it (the first request after a
        compaction, docs/eval.md). Nothing is sent when ``prompt`` itself will be answered
        from memory, or the latest request was computed."""
        if not self.unread or self.shared.knows(prompt, self.cwd):
            return
        unread, self.unread = self.unread, []
        for earlier in unread:
            limited = attrs.evolve(earlier, max_output_tokens=1)
            async with self.shared.inner.stream(limited) as events:
                async for _ in events:
                    pass
            self.warmed += 1

    @asynccontextmanager
    async def stream(self, prompt: Prompt) -> AsyncIterator[AsyncIterator[ModelEvent]]:
        events, duration, replayed = await self.shared.answer(prompt, self.cwd)
        self.unread = [*self.unread, prompt] if replayed else []
        self.durations_ms.append(duration)
        if prompt.purpose == "compact":
            self.compact_durations_ms.append(duration)

        async def replay() -> AsyncIterator[ModelEvent]:
            for event in events:
                yield event

        yield replay()

    async def compact(self, request: CompactRequest) -> Any:
        return await self.shared.inner.compact(request)


@asynccontextmanager
async def open_shared_summaries(
    configs: Mapping[str, Config], *, turns: bool = False
) -> AsyncIterator[dict[str, SharedSummaries]]:
    """One :class:`SharedSummaries` per compaction provider the configurations name (by
    configuration name), each over one HTTP client for the whole evaluation, opened as a
    session opens it. ``turns``: per provider that answers the turns instead (a live case's
    turns, and the summaries a configuration sends to the same provider)."""
    by_provider: dict[tuple[str, str | None], SharedSummaries] = {}
    out: dict[str, SharedSummaries] = {}
    async with AsyncExitStack() as stack:
        for name, config in configs.items():
            if not turns and not config.separate_compaction_provider:
                continue
            provider: ProviderConfig = config.provider() if turns else config.compaction_provider()
            if provider.base_url is None:
                continue  # the embedded scripted model: nothing to share
            key = (provider.name, provider.base_url)
            if key not in by_provider:
                client = await stack.enter_async_context(open_model_client(config, provider))
                by_provider[key] = SharedSummaries(client)
            out[name] = by_provider[key]
        yield out


__all__ = ["RunSummaries", "SharedSummaries", "open_shared_summaries", "request_key"]
