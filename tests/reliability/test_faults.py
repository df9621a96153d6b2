"""Fault injection over the real loopback server (docs/session.md,
docs/compaction.md, docs/rollout.md).

Every fault of :data:`tests.reliability._faults.FAULTS` is served over a real socket to a
session that talks to it through the openai SDK: HTTP 500, 503, 429 with retry-after, quota
429, 401, 400 context length, in-stream ``error``, ``response.failed``, ``response.incomplete``,
a cut connection, a stall past the idle timeout, invalid SSE JSON, retries running out, and
compaction answers that are garbage. For each: the faulted op reports exactly the documented
events and names the fault, the next op works, the rollout holds everything the session did,
the invariants hold, a failed compaction changed nothing, and the API key appears nowhere.

These tests use the real clock (sockets do not run in virtual time); every wait is for an
observable event, under a guard that working code never reaches.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import relay
from relay._base._codec import to_json
from tests.reliability._faults import FAULTS, Fault, expected_table, run_fault

CANARY = "sk-fault-canary-3f9c1d2e"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"


@pytest.mark.parametrize("fault", FAULTS, ids=[fault.name for fault in FAULTS])
async def test_fault_is_reported_recovered_from_and_recorded(fault: Fault, tmp_path: Path) -> None:
    seen = await run_fault(fault, tmp_path, api_key=CANARY)

    assert seen.summary == fault.expected
    assert seen.answered is fault.answered
    assert seen.next_ok, "the op after the fault did not work"
    assert seen.invariant_problem is None, seen.invariant_problem
    assert seen.rollout_problem is None, seen.rollout_problem
    assert not seen.history_changed, "a failed compaction changed the history"
    assert seen.duration_ms >= fault.min_duration_ms
    said = [
        text
        for event in seen.events
        for text in (
            [event.msg.message]
            if isinstance(event.msg, relay.ErrorEvent)
            else [event.msg.detail]
            if isinstance(event.msg, relay.StreamErrorEvent)
            else []
        )
    ]
    assert any(fault.says in text for text in said), said
    everything = (
        json.dumps([to_json(event) for event in seen.events])
        + json.dumps(list(seen.server_log))
        + seen.rollout_text
    )
    assert CANARY not in everything
    assert all("authorization" not in entry["headers"] for entry in seen.server_log)


def test_docs_show_the_fault_table_these_tests_assert() -> None:
    assert expected_table() in DOCS.read_text(encoding="utf-8")
