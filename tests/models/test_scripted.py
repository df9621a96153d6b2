"""The embedded scripted model: its request log, its usage estimate over long sessions, and
its JSON replies."""

from __future__ import annotations

from typing import Any

import pytest

from relay import testing
from relay._base import _protocol as p
from relay._base._errors import ScriptError
from relay._core._history import Prefix
from relay._core._summary import summary_prefix, summary_text
from relay._models._script import UsageEstimator, extractive_summary, parse_model_script
from relay._models._scripted import REQUEST_LOG


async def _turns(t: testing.TestSession, count: int) -> None:
    for turn in range(count):
        await t.turn(f"question {turn}")
        await t.wait_for(lambda e: isinstance(e.msg, p.TurnComplete), turn + 1)


async def test_the_request_log_keeps_the_last_requests_and_counts_them_all() -> None:
    # A long session on the scripted model kept every request it made: memory grew with the
    # number of turns. The log is bounded; the count of requests goes on.
    model = testing.ScriptedModel({"responses": []}, request_log=3)
    async with testing.open_test_session(model=model) as t:
        await _turns(t, 5)
    texts = [body["input"][-1]["content"][0]["text"] for body in model.requests]
    assert texts == ["question 2", "question 3", "question 4"]
    assert len(model.prompts) == 3 and model.prompts[-1].input[-1] == p.user_message("question 4")
    assert model.requests.total == model.prompts.total == 5


async def test_the_request_log_is_bounded_by_default_and_can_keep_all_or_nothing() -> None:
    assert testing.ScriptedModel().requests.limit == REQUEST_LOG
    everything = testing.ScriptedModel({"responses": []}, request_log=None)
    nothing = testing.ScriptedModel({"responses": []}, request_log=0)
    for model in (everything, nothing):
        async with testing.open_test_session(model=model) as t:
            await _turns(t, 4)
    assert len(everything.requests) == 4 and len(everything.prompts) == 4
    assert nothing.requests == [] and nothing.prompts == [] and nothing.requests.total == 4


class _CountingList(list[Any]):
    """A list that counts the entries read from it by index."""

    reads = 0

    def __getitem__(self, index: Any) -> Any:
        _CountingList.reads += 1
        return super().__getitem__(index)


def test_the_usage_estimate_reads_only_the_items_a_request_adds() -> None:
    # It compared every item with the previous request's to find what was new: work
    # proportional to the history on every request. Views of one history share their prefix
    # by construction.
    history = _CountingList({"type": "message", "n": n} for n in range(10_000))
    estimator = UsageEstimator()
    first = estimator.estimate({"input": Prefix(history)}, ()).input_tokens
    history += [{"type": "message", "n": -1}, {"type": "message", "n": -2}]
    _CountingList.reads = 0
    second = estimator.estimate({"input": Prefix(history)}, ()).input_tokens
    assert _CountingList.reads == 2
    assert second == first + UsageEstimator().estimate({"input": history[-2:]}, ()).input_tokens
    # A different input (a compaction replaced the history) is estimated afresh.
    fresh = UsageEstimator().estimate({"input": history[:5]}, ()).input_tokens
    assert estimator.estimate({"input": history[:5]}, ()).input_tokens == fresh


def test_a_json_reply_is_a_message_of_its_value_written_as_json() -> None:
    script = parse_model_script({"responses": [{"json": {"city": "Zürich", "n": [1, 2.5, None]}}]})
    assert script.responses[0].output == (
        p.assistant_message('{"city": "Zürich", "n": [1, 2.5, null]}'),
    )
    with pytest.raises(ScriptError, match=r"^model script: responses\[0\]\.json: not JSON: "):
        parse_model_script({"responses": [{"json": float("nan")}]})


def _call(name: str, arguments: str, call_id: str) -> p.FunctionCall:
    return p.FunctionCall(name=name, arguments=arguments, call_id=call_id)


def test_the_fallback_summary_carries_an_earlier_note_and_lists_no_note_as_a_request() -> None:
    # After a second compaction the scripted model's summary listed the first one's note as
    # one of the user's requests, with the whole note inside: each compaction nested the last.
    first = extractive_summary(
        [
            p.user_message("read notes.txt"),
            _call("read_file", '{"path": "notes.txt"}', "c1"),
            _call("shell", '{"argv": ["sh", "check.sh"]}', "c2"),
            p.assistant_message("read it"),
        ],
        skip_last_user=False,
    )
    second = extractive_summary(
        [
            p.user_message("read notes.txt"),
            p.user_message(summary_text(first)),
            p.user_message("run it again"),
            _call("shell", '{"argv": ["sh", "check.sh"]}', "c3"),
            _call("read_file", '{"path": "todo.txt"}', "c4"),
            p.assistant_message("it passes"),
        ],
        skip_last_user=False,
    )
    assert summary_prefix() not in second
    requests = second.split("Files touched:")[0]
    assert requests == "Requests so far:\n- read notes.txt\n- run it again\n"
    assert "Files touched:\n- notes.txt\n- todo.txt\n" in second
    assert "Commands run:\n- sh check.sh\nLast answer: it passes" in second
