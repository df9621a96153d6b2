"""Masking and ``recall``: every masked output comes back byte for byte, live, after a resume,
and after a crash that left the outputs recorded but never masked."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import relay
from relay import testing
from relay.tasks.compaction._history import (
    MASK_MARKER,
    mask_reference,
)
from relay.testing import turn_ended
from tests.hypothesis_profiles import examples


def emit_tool(outputs: list[str]) -> relay.Tool:
    """A tool whose n-th output is ``outputs[n]`` (what a command or file would have given)."""

    async def emit(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
        return outputs[int(args["n"])]

    return relay.Tool("emit", "Emit an output.", {"type": "object"}, emit)


def config(rollout: Path, **fields: Any) -> relay.Config:
    return relay.Config(
        features=relay.Features(tool_output_masking=True, token_budget=True),
        mask_keep_recent_tokens=0,
        rollout=relay.RolloutConfig(dir=str(rollout)),
        **fields,
    )


def work_script(count: int, then: list[Any] | None = None) -> dict[str, Any]:
    calls = [
        {"function_call": {"name": "emit", "arguments": {"n": n}, "call_id": f"out-{n}"}}
        for n in range(count)
    ]
    return {"responses": [*calls, "Done.", *(then or [])]}


async def drive(opened: Any, recorder: testing.EventRecorder, ops: list[relay.Op]) -> relay.Session:
    async with opened as session, anyio.create_task_group() as tg:
        tg.start_soon(recorder.consume, session)
        for number, op in enumerate(ops, 1):
            await session.submit(op)
            await recorder.wait_for(turn_ended, number)
        await session.submit(relay.Shutdown())
        await recorder.wait_for(relay.ShutdownComplete)
    return session


async def recall(session: relay.Session, reference: str) -> str:
    tool = session.tools.get("recall")
    assert tool is not None
    ctx = relay.ToolContext("t", ".", lambda msg: None)
    return await tool.handler({"reference": reference}, ctx)


def masked_references(session: relay.Session) -> list[str]:
    return [
        item.call_id
        for item in session.history.items
        if isinstance(item, relay.FunctionCallOutput) and item.output.startswith(MASK_MARKER)
    ]


def recorded(session: relay.Session) -> dict[str, str]:
    return {
        item.call_id: item.output
        for item in session.history.items
        if isinstance(item, relay.FunctionCallOutput)
    }


TURN = relay.UserTurn(items=[relay.Text("Produce the outputs.")])

#: Tool outputs as a tool can return them: text from bytes with invalid UTF-8 replaced, and
#: some very large (truncated when recorded: recall returns them as recorded).
OUTPUTS = st.lists(
    st.tuples(st.binary(min_size=300, max_size=3_000), st.sampled_from([1, 1, 1, 120])).map(
        lambda pair: (pair[0] * pair[1]).decode("utf-8", errors="replace")
    ),
    min_size=1,
    max_size=4,
)


async def check_recall_everywhere(outputs: list[str], root: Path) -> None:
    sessions = root / "sessions"
    model = testing.ScriptedModel(work_script(len(outputs)))
    tools = [emit_tool(outputs)]
    originals: dict[str, str] = {}
    crash_image = root / "crash.jsonl"
    async with (
        relay.open_session(
            config(sessions), model=model, tools=tools, clock=testing.fixed_clock
        ) as session,
        testing.recording(session) as recorder,
    ):
        await session.submit(TURN)
        await recorder.wait_for(turn_ended, 1)
        originals = recorded(session)
        rollout = next(sessions.rglob("*.jsonl"))
        # What a crash right now would leave: every output recorded, none masked yet.
        shutil.copyfile(rollout, crash_image)
        await session.submit(relay.Compact())
        await recorder.wait_for(turn_ended, 2)
        references = sorted(masked_references_from_rollout(rollout))
        assert references, "something was masked"
        originals = {mask_reference(cid, out): out for cid, out in originals.items()}
        assert set(references) <= set(originals)
        for reference in references:
            assert await recall(session, reference) == originals[reference]
        await session.submit(relay.Shutdown())
        await recorder.wait_for(relay.ShutdownComplete)

    # After a resume from the finished rollout.
    async with relay.resume_session(
        rollout, config(sessions), tools=tools, model=testing.ScriptedModel({})
    ) as resumed:
        for reference in references:
            assert await recall(resumed, reference) == originals[reference]
        await resumed.submit(relay.Shutdown())

    # After a resume from the crash image: the outputs are masked only now.
    async with (
        relay.resume_session(
            crash_image, config(sessions), tools=tools, model=testing.ScriptedModel({})
        ) as resumed,
        anyio.create_task_group() as tg,
    ):
        recorder = testing.EventRecorder()
        tg.start_soon(recorder.consume, resumed)
        await resumed.submit(relay.Compact())
        await recorder.wait_for(turn_ended, 1)
        assert sorted(masked_references_from_rollout(crash_image)) == references
        for reference in references:
            assert await recall(resumed, reference) == originals[reference]
        await resumed.submit(relay.Shutdown())
        await recorder.wait_for(relay.ShutdownComplete)


def masked_references_from_rollout(rollout: Path) -> list[str]:
    """The references whose originals a ``compacted`` line of ``rollout`` keeps."""
    refs: list[str] = []
    for line in rollout.read_bytes().split(b"\n"):
        if not line:
            continue
        record = json.loads(line)
        if record["type"] == "compacted":
            refs += list(record["payload"].get("masked_outputs", {}))
    return refs


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(outputs=OUTPUTS)
def test_recall_returns_every_masked_output_byte_for_byte(
    outputs: list[str], tmp_path_factory: Any
) -> None:
    root = tmp_path_factory.mktemp("recall")
    trio.run(
        check_recall_everywhere, outputs, root, clock=trio.testing.MockClock(autojump_threshold=0)
    )


async def test_the_model_recalls_a_masked_output_through_the_tool(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    big = "line with \ufffd replaced bytes\n" * 1_000  # recorded whole
    script = work_script(
        1,
        [
            {
                "function_call": {
                    "name": "recall",
                    "arguments": {"reference": mask_reference("out-0", big)},
                    "call_id": "r",
                }
            },
            "Got it back.",
        ],
    )
    recorder = testing.EventRecorder()
    model = testing.ScriptedModel(script)
    session = await drive(
        relay.open_session(
            config(tmp_path), model=model, tools=[emit_tool([big])], clock=testing.fixed_clock
        ),
        recorder,
        [TURN, relay.Compact(), relay.UserTurn(items=[relay.Text("Show it again.")])],
    )
    outputs = recorded(session)
    original = model.requests[-3]["input"][-1]["output"]  # what the model saw before masking
    assert outputs["r"] == original
    assert "recall" in [tool["name"] for tool in model.requests[-1]["tools"]]
    receipts = [
        m.item.receipt.backend
        for m in recorder.msgs
        if isinstance(m, relay.ItemCompleted)
        and isinstance(m.item, relay.ContextCompactionItem)
        and m.item.receipt is not None
    ]
    assert receipts == ["masked", "token_budget"]


async def test_without_masking_there_is_no_recall_tool(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = testing.ScriptedModel({"responses": ["hi"]})
    recorder = testing.EventRecorder()
    await drive(
        relay.open_session(relay.Config(rollout=relay.RolloutConfig(enabled=False)), model=model),
        recorder,
        [TURN],
    )
    assert "recall" not in [tool["name"] for tool in model.requests[0]["tools"]]


async def test_recall_of_an_unknown_reference_is_an_error_the_model_reads(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with relay.open_session(config(tmp_path), model=testing.ScriptedModel({})) as session:
        tool = session.tools.get("recall")
        assert tool is not None
        output = await session.tools.call(
            relay.FunctionCall("recall", '{"reference": "nope"}', "c"),
            relay.ToolContext("t", ".", lambda msg: None),
        )
    assert output == "error: no tool output is recorded under the reference 'nope'"


async def test_masking_alone_is_enough_and_the_summary_is_skipped(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """Usage reaches the limit mid-turn; masking brings it far enough under: no summary."""
    big = "x" * 40_000
    script = {
        "responses": [
            {"function_call": {"name": "emit", "arguments": {"n": 0}, "call_id": "a"}},
            {"function_call": {"name": "emit", "arguments": {"n": 1}, "call_id": "b"}},
            "Done.",
        ]
    }
    model = testing.ScriptedModel(script)
    recorder = testing.EventRecorder()
    cfg = relay.Config(
        features=relay.Features(tool_output_masking=True),
        model_auto_compact_token_limit=15_000,
        mask_keep_recent_tokens=1_000,
        rollout=relay.RolloutConfig(enabled=False),
    )
    await drive(
        relay.open_session(cfg, model=model, tools=[emit_tool([big, big])]), recorder, [TURN]
    )
    receipts = [
        m.item.receipt
        for m in recorder.msgs
        if isinstance(m, relay.ItemCompleted)
        and isinstance(m.item, relay.ContextCompactionItem)
        and m.item.receipt is not None
    ]
    assert [(r.backend, r.trigger) for r in receipts] == [
        ("masked", relay.CompactionTrigger.MID_TURN)
    ]
    assert receipts[0].tokens_before >= 20_000 and receipts[0].tokens_after < 1_000
    assert len(model.requests) == 3  # no summarization request
    assert not [m for m in recorder.msgs if isinstance(m, relay.ErrorEvent)]


async def test_a_mask_trigger_masks_below_the_limit_without_counting_towards_the_bound(
    autojump_clock: trio.testing.MockClock,
) -> None:
    big = "x" * 24_000  # about 6,000 tokens
    calls = [
        {"function_call": {"name": "emit", "arguments": {"n": 0}, "call_id": f"c{n}"}}
        for n in range(6)
    ]
    model = testing.ScriptedModel({"responses": [*calls, "Done."]})
    recorder = testing.EventRecorder()
    cfg = relay.Config(
        features=relay.Features(tool_output_masking=True),
        model_auto_compact_token_limit=100_000,
        mask_trigger_tokens=10_000,
        mask_keep_recent_tokens=1_000,
        max_auto_compactions_per_turn=1,
        rollout=relay.RolloutConfig(enabled=False),
    )
    await drive(relay.open_session(cfg, model=model, tools=[emit_tool([big])]), recorder, [TURN])
    receipts = [
        m.item.receipt
        for m in recorder.msgs
        if isinstance(m, relay.ItemCompleted)
        and isinstance(m.item, relay.ContextCompactionItem)
        and m.item.receipt is not None
    ]
    # Two outputs reach the trigger; masking leaves only placeholders (the newest output is
    # over mask_keep_recent_tokens too): every second tool step masks, six steps in all.
    assert [r.backend for r in receipts] == ["masked"] * 3
    assert all(r.tokens_after < 10_000 <= r.tokens_before for r in receipts)
    assert not [m for m in recorder.msgs if isinstance(m, relay.ErrorEvent)]
    assert max(approx(body) for body in model.requests) < 20_000


def approx(body: dict[str, Any]) -> int:
    return len(json.dumps(list(body["input"]))) // 4


def placeholder_references(session: relay.Session) -> list[str]:
    """The references the placeholders of ``session``'s history name, in order."""
    return [
        re.search(r'reference "([^"]+)"', item.output).group(1)  # type: ignore[union-attr]
        for item in session.history.items
        if isinstance(item, relay.FunctionCallOutput) and item.output.startswith(MASK_MARKER)
    ]


async def test_two_calls_with_one_call_id_each_recall_their_own_output(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """A server that reuses a call id: each placeholder still leads back to its own output,
    live and after a resume."""
    first, second = "first output\n" * 400, "second output\n" * 400
    script = {
        "responses": [
            {"function_call": {"name": "emit", "arguments": {"n": 0}, "call_id": "same"}},
            {"function_call": {"name": "emit", "arguments": {"n": 1}, "call_id": "same"}},
            "Done.",
        ]
    }
    cfg = relay.Config(
        features=relay.Features(tool_output_masking=True),
        mask_trigger_tokens=2_000,
        mask_keep_recent_tokens=0,
        rollout=relay.RolloutConfig(dir=str(tmp_path)),
    )
    recorder = testing.EventRecorder()
    tools = [emit_tool([first, second])]
    session = await drive(
        relay.open_session(cfg, model=testing.ScriptedModel(script), tools=tools),
        recorder,
        [TURN],
    )
    references = placeholder_references(session)
    assert len(references) == 2 and len(set(references)) == 2
    assert [await recall(session, ref) for ref in references] == [first, second]
    rollout = next(tmp_path.rglob("*.jsonl"))
    async with relay.resume_session(
        rollout, cfg, tools=tools, model=testing.ScriptedModel({})
    ) as resumed:
        assert [await recall(resumed, ref) for ref in references] == [first, second]
        await resumed.submit(relay.Shutdown())
