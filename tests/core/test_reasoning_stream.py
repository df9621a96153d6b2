"""A reasoning summary streams as the server sends it (``reasoning_summary_delta``), between its
item's start and its end, from the Responses stream's ``response.reasoning_summary_text.delta``."""

from __future__ import annotations

import relay
from relay import testing
from relay._base import _protocol as p
from relay._base._model import SummaryTextDelta
from relay._models._responses import ResponseStreamParser


def test_the_parser_reads_summary_deltas() -> None:
    parser = ResponseStreamParser()
    event = {
        "type": "response.reasoning_summary_text.delta",
        "item_id": "rs_1",
        "summary_index": 1,
        "delta": "Thin",
    }
    assert parser.feed(event) == [SummaryTextDelta("rs_1", "Thin", 1)]
    assert parser.feed({**event, "summary_index": True}) == [SummaryTextDelta("rs_1", "Thin", 0)]


async def test_a_summary_streams_between_its_items_start_and_end() -> None:
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [
            {"type": "summary_text", "text": "Look first."},
            {"type": "summary_text", "text": "Then answer."},
        ],
    }
    script = {
        "responses": [
            {
                "output": [
                    reasoning,
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "ok"}],
                    },
                ]
            }
        ]
    }
    async with testing.open_test_session(script) as t:
        await t.turns("go")
    msgs = [
        m
        for m in t.recorder.msgs
        if isinstance(m, p.ReasoningSummaryDelta)
        or (
            isinstance(m, relay.ItemStarted | relay.ItemCompleted)
            and isinstance(m.item, p.ReasoningItem)
        )
    ]
    assert isinstance(msgs[0], relay.ItemStarted) and isinstance(msgs[-1], relay.ItemCompleted)
    deltas = [m for m in msgs[1:-1] if isinstance(m, p.ReasoningSummaryDelta)]
    assert len(deltas) == len(msgs) - 2 and len(deltas) >= 2
    parts = ["".join(d.delta for d in deltas if d.summary_index == i) for i in (0, 1)]
    assert parts == ["Look first.", "Then answer."]
    assert msgs[-1].item == p.ReasoningItem("rs_1", ("Look first.", "Then answer."))
