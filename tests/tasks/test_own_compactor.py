"""A compactor of one's own: reached from open_session, a configuration file and the command
line, it serves manual and automatic compactions alike, and every history it installs is
reported with context_compacted."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio.testing

import relay
from relay import testing
from relay.lowlevel import CompactionContext, CompactionOutcome, CompactionRequest

NO_ROLLOUT = relay.RolloutConfig(enabled=False)


class Shorten:
    async def compact(
        self, ctx: CompactionContext, request: CompactionRequest
    ) -> CompactionOutcome:
        view = ctx.backend.view
        automatic = request.trigger in (
            relay.CompactionTrigger.PRE_TURN,
            relay.CompactionTrigger.MID_TURN,
            relay.CompactionTrigger.POST_TURN,
        )
        if automatic and not view.budget.over_limit:
            return CompactionOutcome.NOT_DUE
        receipt = relay.CompactionReceipt(
            trigger=request.trigger,
            backend="shorten",
            tokens_before=view.budget.usage,
            tokens_after=1,
            duration_ms=0,
        )
        ctx.install(
            [relay.user_message("(shortened)")],
            message="",
            receipt=receipt,
            clear_reference=True,
        )
        return CompactionOutcome.INSTALLED


async def test_a_compactor_of_ones_own_serves_automatic_and_manual_compactions(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": "a1", "total_tokens": 5_000}, {"text": "a2"}]}
    config = relay.Config(rollout=NO_ROLLOUT, model_auto_compact_token_limit=1_000)
    async with testing.open_test_session(script, config=config, compactor=Shorten) as t:
        await t.turns("one", "two")
        await t.submit(relay.Compact(), id="c1")
        await t.wait_for(relay.TurnComplete, 3)
    installs = [
        m.info.last_token_usage.total_tokens
        for m in t.recorder.of_type(relay.TokenCount)
        if m.info is not None and m.info.estimated
    ]
    assert installs == [1, 1]  # one automatic (before "two"), one manual
    assert len(t.recorder.of_type(relay.ContextCompacted)) == 2
    assert "(shortened)" in t.model.requests[1]["input"][0]["content"][0]["text"]


#: The module a configuration file and the command line name: the compactor above, as a file.
COMPACTOR = (
    "from __future__ import annotations\n"
    "import relay\n"
    "from relay.lowlevel import CompactionOutcome\n\n"
    f"{inspect.getsource(Shorten)}\n\n"
    "def make():\n"
    "    return Shorten()\n"
)


@pytest.mark.slow  # processes of its own
def test_the_compactor_is_reached_from_a_configuration_file_and_the_command_line(
    tmp_path: Path,
) -> None:
    (tmp_path / "shorten.py").write_text(COMPACTOR)
    (tmp_path / "config.toml").write_text(
        'compactor = "shorten.py:make"\n[rollout]\nenabled = false\n'
    )
    (tmp_path / "script.jsonl").write_text('{"op": {"type": "compact"}}\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for how in (["--config", str(tmp_path / "config.toml")], ["--compactor", "../shorten.py:make"]):
        result = subprocess.run(
            [sys.executable, "-m", "relay", "run", str(tmp_path / "script.jsonl"), "--json", *how],
            cwd=elsewhere,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        events = [json.loads(line)["msg"] for line in result.stdout.splitlines()]
        assert "context_compacted" in [e["type"] for e in events], how
