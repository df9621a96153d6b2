"""relay eval's fact kinds, the recallable figure, and the compaction model its runs share."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio
import trio.testing

import relay
from relay._base._errors import ScriptError
from relay._base._model import Completed, ModelEvent, OutputItemDone, Prompt
from relay._eval._corpus import DEFAULT_KIND, load_case, parse_fact
from relay._eval._score import RunRecord, recallable_facts, render_table, summarize
from relay._eval._summaries import SharedSummaries, request_key


@pytest.mark.parametrize(
    ("data", "parsed"),
    [
        ("src/a.py", (DEFAULT_KIND, ["src/a.py"])),
        (["exit 1", "→ exit 1"], (DEFAULT_KIND, ["exit 1", "→ exit 1"])),
        ({"kind": "path", "text": "src/a.py"}, ("path", ["src/a.py"])),
        ({"kind": "exit_status", "forms": ["a", "b"]}, ("exit_status", ["a", "b"])),
        ({"kind": "path"}, None),
        ({"kind": "", "text": "x"}, None),
        ({"kind": "path", "text": "x", "forms": ["y"]}, None),
        ({"kind": "path", "text": "x", "colour": "red"}, None),
        ({"kind": 3, "text": "x"}, None),
        ([], None),
        ("", None),
    ],
)
def test_a_fact_is_a_string_a_list_or_a_kind_with_its_forms(data: Any, parsed: Any) -> None:
    assert parse_fact(data) == parsed


def test_a_case_with_a_malformed_fact_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "ops.jsonl").write_text("")
    (tmp_path / "probes.json").write_text(json.dumps({"facts": [{"kind": "path"}]}))
    with pytest.raises(ScriptError, match=r"probes\.json: each fact must be"):
        load_case(tmp_path)


def run(config: str, kinds: tuple[tuple[str, int, int], ...], repeat: int = 0) -> RunRecord:
    checked = sum(c for _, c, _ in kinds)
    kept = sum(k for _, _, k in kinds)
    return RunRecord("case", config, repeat, facts_checked=checked, facts_kept=kept, by_kind=kinds)


def test_retention_is_summarized_per_kind_and_shown_in_a_second_table() -> None:
    records = [
        run("a", (("path", 2, 2), ("log_line", 2, 1))),
        run("a", (("path", 2, 2), ("log_line", 2, 0)), repeat=1),
        run("b", (("path", 2, 0),)),
    ]
    summary = summarize(records, ["a", "b"])
    assert summary["a"]["retention_by_kind"]["path"]["mean"] == 1.0
    assert summary["a"]["retention_by_kind"]["log_line"] == {
        "mean": 0.25,
        "min": 0.0,
        "max": 0.5,
        "spread": 0.5,
    }
    assert set(summary["b"]["retention_by_kind"]) == {"path"}
    table = render_table(summary)
    assert "retention by kind" in table and "log_line" in table


def test_a_fact_in_a_masked_original_named_by_the_request_is_recallable() -> None:
    request = {"input": [{"type": "function_call_output", "output": "[masked; recall 'r1#ab']"}]}
    originals = {"r1#ab": "peak memory: 600 MiB", "r2#cd": "LIMIT = 7"}
    facts = ["peak memory: 600 MiB", "LIMIT = 7", ["nowhere", "else"]]
    assert recallable_facts(request, facts, originals) == ["peak memory: 600 MiB"]


# ------------------------------------------------------------------ the shared compaction model


class CountingModel:
    """A compaction model that answers each request with its number, and counts them."""

    def __init__(self, fail_first: bool = False) -> None:
        self.calls = 0
        self.fail_first = fail_first
        self.prompts: list[Prompt] = []

    @asynccontextmanager
    async def stream(self, prompt: Prompt) -> AsyncIterator[AsyncIterator[ModelEvent]]:
        self.calls += 1
        self.prompts.append(prompt)
        number = self.calls
        await trio.sleep(5)  # the model writes for a while
        if self.fail_first and number == 1:
            raise relay.ModelError("the server fell over", relay.ErrorCode.SERVER_ERROR)

        async def events() -> AsyncIterator[ModelEvent]:
            yield OutputItemDone(relay.assistant_message(f"summary {number}"))
            yield Completed(f"r{number}", None)

        yield events()

    async def compact(self, request: Any) -> Any:
        raise NotImplementedError


def prompt(cwd: str, text: str = "summarize", cache_key: str = "s1") -> Prompt:
    items = (relay.user_message(f"cwd {cwd}: {text}"),)
    return Prompt(model="q", instructions="i", input=items, prompt_cache_key=cache_key)


async def answer(shared: SharedSummaries, p: Prompt, cwd: str) -> str:
    run = shared.for_run(cwd)
    async with run.stream(p) as events:
        texts = [e.item.text() async for e in events if isinstance(e, OutputItemDone)]
    assert run.durations_ms == [5000]
    return texts[0]


async def test_a_repeated_request_is_answered_once_across_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = CountingModel()
    shared = SharedSummaries(model)
    results: list[str] = []

    async def one(cwd: str, key: str) -> None:
        results.append(await answer(shared, prompt(cwd, cache_key=key), cwd))

    async with anyio.create_task_group() as tg:  # two runs ask at once: one waits
        tg.start_soon(one, "/tmp/run-a", "session-a")
        tg.start_soon(one, "/tmp/run-b", "session-b")
    results.append(await answer(shared, prompt("/tmp/run-c"), "/tmp/run-c"))
    assert results == ["summary 1"] * 3
    assert (model.calls, shared.computed, shared.replayed) == (1, 1, 2)
    assert await answer(shared, prompt("/tmp/run-d", "other"), "/tmp/run-d") == "summary 2"


async def test_a_failed_request_is_not_remembered(autojump_clock: trio.testing.MockClock) -> None:
    model = CountingModel(fail_first=True)
    shared = SharedSummaries(model)
    with pytest.raises(relay.ModelError):
        await answer(shared, prompt("/w"), "/w")
    assert await answer(shared, prompt("/w"), "/w") == "summary 2"


async def test_a_request_answered_from_memory_is_read_by_the_server_before_a_measured_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Run b's summary request is run a's, answered from memory: before b's next request (the
    # first after its compaction, whose prefill is measured), the server reads b's summary
    # request, asked for one token, as it would have had b run alone.
    model = CountingModel()
    shared = SharedSummaries(model)
    summary, after = prompt("/w"), prompt("/w", "what next?")
    assert await answer(shared, summary, "/w") == "summary 1"
    run = shared.for_run("/w")
    async with run.stream(summary) as events:
        assert [e async for e in events]
    await run.warm_for(after)
    async with run.stream(after) as events:
        assert [e async for e in events]
    sent = [(p.input[0].text(), p.max_output_tokens) for p in model.prompts]  # type: ignore[union-attr]
    assert sent == [
        ("cwd /w: summarize", None),
        ("cwd /w: summarize", 1),
        ("cwd /w: what next?", None),
    ]
    assert run.warmed == 1
    # Nothing is sent again when the latest request was computed, or when the measured
    # request is itself answered from memory.
    await run.warm_for(prompt("/w", "later"))
    other = shared.for_run("/w")
    async with other.stream(summary) as events:
        assert [e async for e in events]
    await other.warm_for(after)
    assert (len(model.prompts), other.warmed) == (3, 0)


async def test_every_request_answered_from_memory_since_the_last_computed_one_is_read_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Run b repeats run a's turn and summary request, both answered from memory. A session
    # alone would have left both in the server's prompt cache (llama-server keeps earlier
    # prompts in memory): the turn's prompt holds the head the request after the compaction
    # begins with, the summary request does not. Both are read again, in order, before the
    # measured request; reading only the latest would leave the head unread.
    model = CountingModel()
    shared = SharedSummaries(model)
    turn, summary = prompt("/w", "run the tests"), prompt("/w")
    first = shared.for_run("/w")
    for p in (turn, summary):
        async with first.stream(p) as events:
            assert [e async for e in events]
    run = shared.for_run("/w")
    for p in (turn, summary):
        async with run.stream(p) as events:
            assert [e async for e in events]
    after = prompt("/w", "what next?")
    await run.warm_for(after)
    async with run.stream(after) as events:
        assert [e async for e in events]
    sent = [(p.input[0].text(), p.max_output_tokens) for p in model.prompts]  # type: ignore[union-attr]
    assert sent[2:] == [
        ("cwd /w: run the tests", 1),
        ("cwd /w: summarize", 1),
        ("cwd /w: what next?", None),
    ]
    assert run.warmed == 2
    # A computed request ends the list: what came before it the server has read.
    await run.warm_for(prompt("/w", "later"))
    assert (len(model.prompts), run.warmed) == (5, 2)


def test_the_key_leaves_out_what_differs_between_runs_of_one_case() -> None:
    assert request_key(prompt("/tmp/a", cache_key="x"), "/tmp/a") == request_key(
        prompt("/tmp/b", cache_key="y"), "/tmp/b"
    )
    assert request_key(prompt("/tmp/a"), "/tmp/a") != request_key(
        prompt("/tmp/a", "other"), "/tmp/a"
    )


class _Window:
    """What a probe reads of its session: the window number and the running turn."""

    def __init__(self) -> None:
        self.window_number = 0
        self.running_turn: str | None = None
        self.outputs: dict[str, str] = {}

    def snapshot(self) -> _Window:
        return self

    def statistics(self) -> _Window:
        return self


async def test_the_prefill_after_a_compaction_is_the_servers_not_a_led_replys(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The turn after a compaction opens with a led tool call (the case's own reply, which no
    # server reads): the request after it, the server's, is the one measured.
    from relay._eval._probe import ProbeModel
    from relay._models._scripted import ScriptedModel

    usage = {"input_tokens": 1500, "input_tokens_details": {"cached_tokens": 1024}}
    served = ScriptedModel({"responses": [{"text": "they pass", "usage": usage}]})
    lead = [{"function_call": {"name": "shell", "arguments": {"argv": ["true"]}}}]
    probe = ProbeModel(served, [], {}, scripted=False, lead={"rerun": lead})
    window = _Window()
    probe.session = window  # type: ignore[assignment]
    window.window_number, window.running_turn = 1, "rerun"
    for text in ("run the tests again", "the output"):
        async with probe.stream(prompt("/w", text)) as events:
            assert [e async for e in events]
    assert (probe.first_requests, probe.prefilled, probe.cached) == (1, 476, 1024)
