"""The work-state record at each checkpoint: ``relay run --pretty`` and ``relay show``; entries a
custom tool adds through the tool API; the record on a small window."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio.testing

import relay
from relay import testing
from relay._base._tokens import approx_tokens
from relay._cli._outcome import RunOutcome
from relay._cli._pretty import PrettyPrinter
from relay._cli._transcript import render_transcript
from relay._core._work_state import WorkState
from relay._rollout._reader import read_rollout

RECEIPT = relay.CompactionReceipt(relay.CompactionTrigger.MANUAL, "local", 900, 300, 12)


def test_pretty_shows_the_record_at_a_checkpoint() -> None:
    out = io.StringIO()
    printer = PrettyPrinter(out, live=False, outcome=RunOutcome())
    msgs: list[relay.EventMsg] = [
        relay.WorkStateNoted("read", "a.py (3 bytes, sha256 ba7816bf8f01cfea)", "a.py"),
        relay.WorkStateNoted("command", "make → exit 2"),
        relay.WorkStateNoted("pinned", "Never touch vendor/.\nIt is a copy."),
        relay.ItemCompleted("t1", relay.ContextCompactionItem("c1", RECEIPT)),
    ]
    for seq, msg in enumerate(msgs, 1):
        printer.event(relay.Event("t1", seq, msg))
    assert out.getvalue().splitlines() == [
        "  ━━ checkpoint: ~900 → ~300 tokens (local, manual, 12 ms)",
        "     ▸ files read: 1 (latest: a.py (3 bytes, sha256 ba7816bf8f01cfea))",
        "     ▸ commands run: 1 (latest: make → exit 2)",
        "     ▸ pinned: Never touch vendor/.",
    ]


def test_pretty_shows_no_checkpoint_for_a_compaction_not_installed() -> None:
    # Its warning says why nothing changed; no checkpoint line, no record.
    out = io.StringIO()
    printer = PrettyPrinter(out, live=False, outcome=RunOutcome())
    msgs: list[relay.EventMsg] = [
        relay.WorkStateNoted("command", "make → exit 2"),
        relay.ItemStarted("t1", relay.ContextCompactionItem("c1")),
        relay.WarningEvent("Nothing was changed: the compacted conversation would take more."),
        relay.ItemCompleted("t1", relay.ContextCompactionItem("c1")),
    ]
    for seq, msg in enumerate(msgs, 1):
        printer.event(relay.Event("t1", seq, msg))
    lines = out.getvalue().splitlines()
    assert not [line for line in lines if "checkpoint" in line or "▸" in line], lines
    assert any("Nothing was changed" in line for line in lines), lines


def staging(build: int) -> relay.lowlevel.WorkEntry:
    return relay.lowlevel.WorkEntry("deploy", f"staging ← build {build}", key="staging")


def deploy_tool(entry: Callable[[int], relay.lowlevel.WorkEntry] = staging) -> relay.Tool:
    async def deploy(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
        ctx.note(entry(args["build"]))
        return "deployed"

    return relay.Tool("deploy", "Deploy a build.", {"type": "object"}, deploy)


def deploys(*builds: int) -> list[dict[str, Any]]:
    return [{"function_call": {"name": "deploy", "arguments": {"build": n}}} for n in builds]


@attrs.frozen
class Compacted:
    """What a session showed and held after one turn and a manual compaction."""

    msgs: list[relay.EventMsg]
    record: WorkState
    history: list[relay.ResponseItem]

    def placed(self) -> list[str]:
        """The texts of the work-state records placed in the history."""
        return [
            item.text()
            for item in self.history
            if isinstance(item, relay.Message) and item.text().startswith("<work_state>")
        ]


async def turn_then_compact(
    config: relay.Config, responses: list[Any], tool: relay.Tool | None = None
) -> Compacted:
    model = testing.ScriptedModel({"responses": responses})
    async with (
        relay.open_session(config, model=model, tools=[tool or deploy_tool()]) as session,
        testing.recording(session) as recorder,
    ):
        await session.submit(relay.UserTurn(items=[relay.Text("Ship it.")]))
        await recorder.wait_for(lambda e: isinstance(e.msg, relay.TurnComplete))
        await session.submit(relay.Compact())
        await recorder.wait_for(lambda e: isinstance(e.msg, relay.TurnComplete), 2)
        record = session.snapshot().work_state
        history = list(session.history.items)
        await session.submit(relay.Shutdown())
        await recorder.wait_for(relay.ShutdownComplete)
    return Compacted(recorder.msgs, record, history)


async def test_a_custom_tool_adds_entries_and_relay_show_prints_them_at_the_checkpoint(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    config = relay.Config(
        features=relay.Features(work_state=True, token_budget=True),
        rollout=relay.RolloutConfig(dir=str(tmp_path)),
    )
    done = await turn_then_compact(config, [*deploys(40, 41), "Deployed."])
    noted = [m for m in done.msgs if isinstance(m, relay.WorkStateNoted)]
    assert noted == [
        relay.WorkStateNoted("deploy", "staging ← build 40", "staging"),
        relay.WorkStateNoted("deploy", "staging ← build 41", "staging"),
        relay.WorkStateNoted("answer", "Deployed.", "latest"),
    ]
    assert [e.text for e in done.record.entries] == ["staging ← build 41", "Deployed."]
    placed = done.placed()
    assert len(placed) == 1 and "Deploy:\n- staging ← build 41" in placed[0]
    rollout = next(tmp_path.rglob("*.jsonl"))
    shown = list(render_transcript(read_rollout(rollout)))
    assert "     ▸ deploy: 1 (latest: staging ← build 41)" in shown


async def test_without_the_feature_nothing_is_noted_and_nothing_placed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = relay.Config(
        features=relay.Features(token_budget=True, work_state=False),
        rollout=relay.RolloutConfig(enabled=False),
    )
    done = await turn_then_compact(config, [*deploys(1), "ok"])
    assert not [m for m in done.msgs if isinstance(m, relay.WorkStateNoted)]
    assert not [
        i for i in done.history if isinstance(i, relay.Message) and "<work_state>" in i.text()
    ]


@pytest.mark.slow  # processes of its own
def test_relay_resume_pretty_shows_the_restored_record_at_its_checkpoint(tmp_path: Path) -> None:
    """The resumed session's first checkpoint shows what the first session recorded."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2] / "examples" / "work_state"
    sessions = tmp_path / "sessions"

    def relay_cli(*args: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "relay", *args, "--config", "token_budget.config.toml"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    relay_cli(
        "run",
        "session.jsonl",
        "--model-script",
        "session.token_budget.model.json",
        "--rollout-dir",
        str(sessions),
    )
    (rollout,) = sessions.rglob("*.jsonl")
    out = relay_cli(
        "resume",
        str(rollout),
        "resume.jsonl",
        "--model-script",
        "resume.token_budget.model.json",
        "--pretty",
    )
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if "━━ checkpoint" in line)
    assert lines[at + 1].startswith("     ▸ files read: 8 (latest: README.md (55 bytes, sha256 ")
    assert "     ▸ pinned: Constraint: never modify anything under vendor/; it is a pinned " in (
        "\n".join(lines)
    )


async def test_on_a_small_window_the_record_takes_at_most_a_tenth_of_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Sixty deploys of ~30 tokens each: the whole record is under the configured 2,000
    # tokens, but a 2,048-token window cannot hold it beside a conversation and an answer.
    config = relay.Config(
        model_context_window=2_048,
        features=relay.Features(work_state=True),
        rollout=relay.RolloutConfig(enabled=False),
    )

    def region(build: int) -> relay.lowlevel.WorkEntry:
        return relay.lowlevel.WorkEntry(
            "deploy", f"region-{build} ← build {build} " + "x" * 80, f"r{build}"
        )

    done = await turn_then_compact(
        config, [*deploys(*range(60)), "Deployed.", "Summary."], deploy_tool(region)
    )
    (placed,) = done.placed()
    assert approx_tokens(placed) <= 2_048 // 10
    assert "region-59 ← build 59" in placed and "Earlier, not listed:" in placed
