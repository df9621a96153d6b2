"""The planted-facts session (``examples/work_state/``): after a compaction by each backend,
and again after a resume and one more compaction, the first request holds every fact."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import attrs
import pytest

import relay
from relay import testing
from relay._base._config import config_from_dict
from relay._drive._op_script import OpLine, parse_op_script
from relay.testing import turn_ended

GENERATOR = Path(__file__).resolve().parents[2] / "examples" / "work_state" / "generate.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("work_state_example", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gen = _generator()


def _config(out: Path, backend: str, rollout: Path) -> relay.Config:
    """The example's configuration of ``backend``, without the files read placed back: every
    fact found after a compaction came through the record or a pinned message."""
    data = tomllib.loads((out / f"{backend}.config.toml").read_text(encoding="utf-8"))
    data["cwd"] = str(out / data["cwd"])
    data["rollout"] = {"dir": str(rollout)}
    data["recent_reads_token_budget"] = 0
    return config_from_dict(data)


async def _play(session: relay.Session, recorder: testing.EventRecorder, script: Path) -> None:
    """Submit the script's ops, each after the turn before it ended (its waits say so)."""
    done = 0
    for step in parse_op_script(script.read_text(encoding="utf-8"), script.name):
        if isinstance(step, OpLine):
            await session.submit(step.op, id=step.id)
            done += 1
            await recorder.wait_for(turn_ended, done)


async def _run(
    config: relay.Config, model: testing.ScriptedModel, script: Path, rollout: Path | None = None
) -> list[relay.EventMsg]:
    recorder = testing.EventRecorder()
    opened = (
        relay.open_session(config, model=model, clock=testing.fixed_clock, rng=random.Random(0))
        if rollout is None
        else relay.resume_session(rollout, config, model=model, clock=testing.fixed_clock)
    )
    async with opened as session, anyio.create_task_group() as tg:
        tg.start_soon(recorder.consume, session)
        await _play(session, recorder, script)
        await session.submit(relay.Shutdown())
        await recorder.wait_for(relay.ShutdownComplete)
    return [event.msg for event in recorder.events]


def _missing(request: dict[str, Any], facts: list[str]) -> list[str]:
    text = json.dumps(list(request["input"]), ensure_ascii=False)
    return [fact for fact in facts if fact not in text]


@pytest.mark.parametrize("backend", gen.BACKENDS)
async def test_every_planted_fact_is_in_the_first_request_after_a_compaction(
    backend: str, tmp_path: Path
) -> None:
    out = tmp_path / "example"
    gen.write(out)
    facts = json.loads((out / "facts.json").read_text(encoding="utf-8"))
    assert len(facts) == 30
    config = _config(out, backend, tmp_path / "sessions")
    model = testing.ScriptedModel(out / f"session.{backend}.model.json")
    msgs = await _run(config, model, out / "session.jsonl")
    assert not [m for m in msgs if isinstance(m, relay.ErrorEvent)]
    receipts = [
        m.item.receipt
        for m in msgs
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.ContextCompactionItem)
    ]
    assert [r.backend for r in receipts if r is not None] == [backend]
    # Before the compaction the work turn's last request holds the facts as tool items; the
    # first request after it holds them only through the record and the pinned messages.
    after = model.requests[-1]
    assert after["input"][-1]["content"][0]["text"] == "Go on with the fix."
    assert not [i for i in after["input"] if i["type"] == "function_call_output"]
    assert _missing(after, facts) == []

    rollout = next((tmp_path / "sessions").rglob("*.jsonl"))
    resumed = testing.ScriptedModel(out / f"resume.{backend}.model.json")
    msgs = await _run(config, resumed, out / "resume.jsonl", rollout=rollout)
    assert not [m for m in msgs if isinstance(m, relay.ErrorEvent)]
    first = resumed.requests[-1]
    assert first["input"][-1]["content"][0]["text"] == "Where were we?"
    assert _missing(first, facts) == []
    # One record and one copy of each pinned message, however many compactions ran.
    text = json.dumps(list(first["input"]), ensure_ascii=False)
    assert text.count("<work_state>") == 1
    assert all(text.count(json.dumps(pin, ensure_ascii=False)[1:-1]) == 1 for pin in gen.PINNED)


def test_the_committed_example_is_what_the_generator_writes(tmp_path: Path) -> None:
    gen.write(tmp_path)
    committed = GENERATOR.parent
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    for path in written:
        assert (committed / path).read_bytes() == (tmp_path / path).read_bytes(), path


def _without_compact(script: Path, out: Path) -> Path:
    """The op script with its ``compact`` op taken out (and the waits after it renumbered)."""
    lines = []
    skip_wait = False
    for raw in script.read_text(encoding="utf-8").splitlines():
        step = json.loads(raw)
        if step.get("op", {}).get("type") == "compact":
            skip_wait = True
            continue
        if "wait_for" in step:
            if skip_wait:
                skip_wait = False
                continue
            step["wait_for"]["count"] = sum(1 for line in lines if "op" in json.loads(line))
        lines.append(json.dumps(step))
    out.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return out


@pytest.mark.parametrize("backend", gen.BACKENDS)
async def test_every_planted_fact_is_in_the_first_request_after_a_background_install(
    backend: str, tmp_path: Path
) -> None:
    # Async compaction in place of the ``compact`` op: the work turn (about 1,300 tokens) is the
    # first to reach 1 % of the window, so its snapshot is compacted in the background and the
    # next turn installs it before it samples; the model's script is the same.
    out = tmp_path / "example"
    gen.write(out)
    facts = json.loads((out / "facts.json").read_text(encoding="utf-8"))
    config = attrs.evolve(
        _config(out, backend, tmp_path / "sessions"),
        model_context_window=100_000,
        model_async_compact_threshold_percent=1,
    )
    config = attrs.evolve(config, features=attrs.evolve(config.features, async_compaction=True))
    model = testing.ScriptedModel(out / f"session.{backend}.model.json")
    script = _without_compact(out / "session.jsonl", tmp_path / "background.jsonl")
    msgs = await _run(config, model, script)
    assert not [m for m in msgs if isinstance(m, relay.ErrorEvent)]
    receipts = [
        m.item.receipt
        for m in msgs
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.ContextCompactionItem)
    ]
    assert [(r.backend, r.background) for r in receipts if r is not None] == [(backend, True)]
    after = model.requests[-1]
    assert after["input"][-1]["content"][0]["text"] == "Go on with the fix."
    assert not [i for i in after["input"] if i["type"] == "function_call_output"]
    assert _missing(after, facts) == []
    text = json.dumps(list(after["input"]), ensure_ascii=False)
    assert text.count("<work_state>") == 1
    assert all(text.count(json.dumps(pin, ensure_ascii=False)[1:-1]) == 1 for pin in gen.PINNED)
