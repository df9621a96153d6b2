"""The model of one ``relay eval`` run: it passes the session's requests on and scores them.

:class:`ProbeModel` wraps the run's model client and checks the first request after each
compaction for the case's facts (retention, per fact kind, and what ``recall`` could bring
back) and for what the server had to read of it (the tokens it prefilled and those its prompt
cache held), keeps the summaries each compaction installed, plays the replies that open a
turn of a live case (``lead.json``), and on a scripted case answers the questions asked after
the session from the context they find (:func:`~._score.oracle_answer`). The scoring itself is
in ``_score.py``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from .._base._codec import encode_response_item
from .._base._model import CompactRequest, Completed, ModelClient, ModelEvent, Prompt
from .._core._hooks import HookInput
from .._core._session import Session
from .._core._summary import summary_prefix
from .._models._responses import request_body
from .._models._scripted import ScriptedModel
from ._corpus import DEFAULT_KIND, INJECTION
from ._score import (
    Fact,
    PatternTimeout,
    fact_name,
    missing_facts,
    oracle_answer,
    recallable_facts,
)
from ._summaries import RunSummaries


class ProbeModel:
    """The model of one run: it passes requests on and checks the first one after each
    compaction for the case's facts.

    On a scripted case compaction requests go to a script-less scripted model (its summary is
    a deterministic extract), so every configuration plays the case's script in step, and the
    questions asked after the session, once the script is spent, are answered by
    :func:`oracle_answer`.
    """

    def __init__(
        self,
        inner: ModelClient,
        facts: Sequence[Fact],
        questions: Mapping[str, str],
        *,
        scripted: bool,
        kinds: Sequence[str] = (),
        lead: Mapping[str, Sequence[Any]] | None = None,
    ) -> None:
        self.inner = inner
        self.kinds = {fact_name(f): k for f, k in zip(facts, kinds, strict=False)}
        # Injection facts are looked for in the summaries and the answers, not kept.
        facts = [f for f in facts if self.kinds.get(fact_name(f)) != INJECTION]
        self.lead = {turn: list(replies) for turn, replies in (lead or {}).items()}
        self.prefilled = 0
        """Tokens the server read anew (not from its prompt cache) for the first request
        after each compaction."""
        self.cached = 0
        """Tokens of those requests its prompt cache held."""
        self.first_requests = 0
        """First requests after a compaction whose usage the server reported."""
        self._unmeasured = False
        """A compaction's first request was a led reply, which no server read: the next
        request is the one measured."""
        self.by_kind: dict[str, list[int]] = {}
        """Per fact kind: ``[checked, kept]``."""
        self.recallable = 0
        """Facts lost from the context that ``recall`` can bring back: the original of a
        masked output whose reference the request names holds them."""
        self.summaries: list[str] = []
        """The summary each compaction installed, in order (what the first request after it
        carries as a summary)."""
        self.summarizer: ModelClient = ScriptedModel() if scripted else inner
        self.scripted = scripted
        self.facts = facts
        self.session: Session | None = None
        self.window = 0
        self.checked = 0
        self.kept = 0
        self.missing: dict[str, None] = {}
        self.seen: dict[str, None] = {}
        self.questions = questions
        self.failures: list[str] = []
        """What went wrong in the reader (an ``expect`` given up)."""

    def _note(self, body: Mapping[str, Any]) -> None:
        absent = set(missing_facts(body, self.facts))
        self.seen.update(dict.fromkeys(n for f in self.facts if (n := fact_name(f)) not in absent))

    async def before_compaction(self, _: HookInput) -> None:
        """Note the facts the history holds as a compaction starts (a tool output that arrived
        just before it was in no request yet)."""
        if self.session is not None:
            items = [encode_response_item(i) for i in self.session.history]
            self._note({"input": items})

    def _check(self, body: Mapping[str, Any]) -> bool:
        """Score ``body`` when it is the first request after a compaction; whether it was."""
        if self.session is None:
            return False
        window = self.session.snapshot().window_number
        if window == self.window:
            return False
        self.window = window
        # Only what the session had seen can be kept: a fact of a later step is not checked yet.
        known = [fact for fact in self.facts if fact_name(fact) in self.seen]
        lost = missing_facts(body, known)
        self.checked += len(known)
        self.kept += len(known) - len(lost)
        self.missing.update(dict.fromkeys(lost))
        self.recallable += len(
            recallable_facts(
                body, [f for f in known if fact_name(f) in lost], self.session.snapshot().outputs
            )
        )
        for fact in known:
            name = fact_name(fact)
            counts = self.by_kind.setdefault(self.kinds.get(name, DEFAULT_KIND), [0, 0])
            counts[0] += 1
            counts[1] += name not in lost
        self.summaries += [
            s for s in summaries_in(body.get("input", [])) if s not in self.summaries
        ]
        return True

    def _led(self) -> ModelClient | None:
        """The scripted model of the next reply that opens the running turn, if any."""
        if self.session is None:
            return None
        replies = self.lead.get(self.session.statistics().running_turn or "")
        if not replies:
            return None
        return ScriptedModel({"responses": [replies.pop(0)]})

    def _count(self, event: ModelEvent) -> None:
        if isinstance(event, Completed) and event.usage is not None:
            usage = event.usage
            self.first_requests += 1
            self.cached += usage.cached_input_tokens
            self.prefilled += max(usage.input_tokens - usage.cached_input_tokens, 0)

    @asynccontextmanager
    async def stream(self, prompt: Prompt) -> AsyncIterator[AsyncIterator[ModelEvent]]:
        if prompt.purpose == "compact":
            async with self.summarizer.stream(prompt) as events:
                yield events
            return
        body = request_body(prompt)
        first = self._check(body)
        self._note(body)
        led = self._led()
        target = led or self.inner
        # The prefill after a compaction is the server's: a led reply is the case's own, so
        # the first request after it that goes to the model is measured instead.
        measured = (first or self._unmeasured) and led is None
        self._unmeasured = (first or self._unmeasured) and led is not None
        items = body.get("input", [])
        asked = _user_text(items[-1]) if items else None
        expect = self.questions.get(asked) if asked is not None else None
        if asked is not None and expect is not None and self.scripted and _spent(self.inner):
            context = json.dumps(items[:-1], ensure_ascii=False)
            try:
                answer = oracle_answer(context, expect)
            except PatternTimeout as exc:
                number = list(self.questions).index(asked) + 1
                self.failures.append(f"question {number}: {exc}")
                answer = "I no longer know."
            target = ScriptedModel({"responses": [answer]})
        if measured and isinstance(target, RunSummaries):
            await target.warm_for(prompt)
        async with target.stream(prompt) as events:
            if not measured:
                yield events
                return

            async def counted() -> AsyncIterator[ModelEvent]:
                async for event in events:
                    self._count(event)
                    yield event

            yield counted()

    async def compact(self, request: CompactRequest) -> Any:
        return await self.summarizer.compact(request)


def summaries_in(items: Sequence[Any]) -> list[str]:
    """The summaries a request's input carries (user messages that hand a summary over)."""
    return [
        text.removeprefix(prefix)
        for item in items
        if (text := _user_text(item)) is not None
        and text.startswith(prefix := summary_prefix() + "\n")
    ]


def _user_text(item: Any) -> str | None:
    if not isinstance(item, Mapping) or item.get("role") != "user":
        return None
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(c.get("text", "")) for c in content if isinstance(c, Mapping))
    return None


def _spent(model: ModelClient) -> bool:
    script = getattr(model, "script", None)
    return script is None or script.next_response >= len(script.responses)


__all__ = ["ProbeModel", "summaries_in"]
