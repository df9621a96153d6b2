"""The initial context, context changes and the abort marker (docs/session.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import attrs
import pytest

import relay
from relay import testing
from relay._base import _protocol as p
from relay._base._config import Config, RolloutConfig
from relay._base._errors import ConfigError
from relay._base._templates import template
from relay._core._context import (
    WorldState,
    context_changes,
    environment_context,
    initial_context,
    instructions_hash,
    project_instructions,
    read_project_doc,
    turn_aborted_marker,
    world_state,
)
from relay._core._history import is_contextual

WORLD = WorldState(cwd="/work/repo", shell="bash", current_date="2025-03-04", timezone="UTC")

ENVIRONMENT_TEXT = (
    "<environment_context>\n"
    "  <cwd>/work/repo</cwd>\n"
    "  <shell>bash</shell>\n"
    "  <current_date>2025-03-04</current_date>\n"
    "  <timezone>UTC</timezone>\n"
    "</environment_context>"
)


# ------------------------------------------------------------------ world state


def test_world_state_snapshots_the_clock_and_shell() -> None:
    moment = datetime(2025, 3, 4, 23, 59, tzinfo=UTC)
    assert world_state("/w", lambda: moment, "/usr/bin/zsh") == WorldState(
        cwd="/w", shell="zsh", current_date="2025-03-04", timezone="UTC"
    )


def test_world_state_uses_the_local_date_of_the_clock() -> None:
    # 23:30 UTC is already the next day at UTC+02:00.
    zone = timezone(timedelta(hours=2))
    moment = datetime(2025, 3, 4, 23, 30, tzinfo=UTC).astimezone(zone)
    world = world_state("/w", lambda: moment, "/bin/bash")
    assert world.current_date == "2025-03-05"
    assert world.timezone == "UTC+02:00"


def test_world_state_without_a_shell_says_sh() -> None:
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    assert world_state("/w", lambda: moment, None).shell == "sh"
    assert world_state("/w", lambda: moment, "").shell == "sh"


# ------------------------------------------------------------------ messages


def test_environment_context_message() -> None:
    message = environment_context(WORLD)
    assert message == p.user_message(ENVIRONMENT_TEXT)
    assert is_contextual(message)


def test_environment_context_escapes_xml() -> None:
    world = attrs.evolve(WORLD, cwd="/tmp/a<b>&c")
    assert "  <cwd>/tmp/a&lt;b&gt;&amp;c</cwd>\n" in environment_context(world).text()


def test_project_instructions_message() -> None:
    message = project_instructions("/work/repo/AGENTS.md", "Run the tests.\n\n")
    assert message == p.user_message(
        '<project_instructions path="/work/repo/AGENTS.md">\n'
        "Run the tests.\n"
        "</project_instructions>"
    )
    assert is_contextual(message)


def test_project_instructions_path_is_a_valid_attribute() -> None:
    message = project_instructions('/tmp/a"b/AGENTS.md', "x")
    assert message.text().startswith('<project_instructions path="/tmp/a&quot;b/AGENTS.md">\n')


def test_read_project_doc(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Be careful.\n", encoding="utf-8")
    assert read_project_doc(str(tmp_path), "AGENTS.md") == (
        str(tmp_path / "AGENTS.md"),
        "Be careful.\n",
    )
    assert read_project_doc(str(tmp_path), "MISSING.md") is None
    assert read_project_doc(str(tmp_path), "") is None


def test_read_project_doc_leaves_out_unusable_files_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").mkdir()
    (tmp_path / "BINARY.md").write_bytes(b"Be \xff\xfe careful")
    os.mkfifo(tmp_path / "PIPE.md")
    warnings: list[str] = []
    assert read_project_doc(str(tmp_path), "AGENTS.md", warn=warnings.append) is None
    assert read_project_doc(str(tmp_path), "BINARY.md", warn=warnings.append) is None
    assert read_project_doc(str(tmp_path), "PIPE.md", warn=warnings.append) is None
    assert read_project_doc(str(tmp_path), "MISSING.md", warn=warnings.append) is None
    assert warnings == [
        "project instructions AGENTS.md left out: it is a directory, not a regular file",
        "project instructions BINARY.md left out: not UTF-8 (byte 0xff at offset 3)",
        "project instructions PIPE.md left out: it is a FIFO, not a regular file",
    ]


async def test_a_session_warns_of_project_instructions_that_are_not_utf8(
    tmp_path: Path,
) -> None:
    (tmp_path / "AGENTS.md").write_bytes(b"\xe9t\xe9")
    config = Config(cwd=str(tmp_path), rollout=RolloutConfig(enabled=False))
    async with testing.open_test_session({"responses": [{"text": "hi"}]}, config=config) as t:
        await t.turn("hello")
        await t.wait_for(testing.turn_ended)
    assert t.recorder.of_type(p.WarningEvent) == [
        p.WarningEvent("project instructions AGENTS.md left out: not UTF-8 (byte 0xe9 at offset 0)")
    ]
    assert "project_instructions" not in json.dumps(t.model.requests[0], default=list)


# ------------------------------------------------------------------ initial context


def test_initial_context_in_order() -> None:
    items = initial_context(
        WORLD,
        developer_instructions="Prefer small diffs.",
        project_doc=("/work/repo/AGENTS.md", "Run the tests."),
    )
    assert items == [
        p.Message("developer", (p.InputText("Prefer small diffs."),)),
        p.user_message(
            '<project_instructions path="/work/repo/AGENTS.md">\n'
            "Run the tests.\n"
            "</project_instructions>"
        ),
        p.user_message(ENVIRONMENT_TEXT),
    ]
    assert all(m.metadata is None for m in items)


def test_initial_context_without_optional_parts_is_only_the_environment() -> None:
    assert initial_context(WORLD, developer_instructions=None, project_doc=None) == [
        p.user_message(ENVIRONMENT_TEXT)
    ]
    assert initial_context(WORLD, developer_instructions="", project_doc=None) == [
        p.user_message(ENVIRONMENT_TEXT)
    ]


def test_initial_context_with_only_a_project_doc(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Use trio.", encoding="utf-8")
    world = attrs.evolve(WORLD, cwd=str(tmp_path))
    items = initial_context(
        world,
        developer_instructions=None,
        project_doc=read_project_doc(str(tmp_path), "AGENTS.md"),
    )
    assert [m.role for m in items] == ["user", "user"]
    assert items[0].text() == (
        f'<project_instructions path="{tmp_path / "AGENTS.md"}">\nUse trio.\n'
        "</project_instructions>"
    )
    assert items[1] == environment_context(world)


# ------------------------------------------------------------------ changes


def test_no_change_records_nothing() -> None:
    assert context_changes(WORLD, attrs.evolve(WORLD)) == []


def test_a_new_cwd_records_a_new_environment_context() -> None:
    moved = attrs.evolve(WORLD, cwd="/work/other")
    changes = context_changes(WORLD, moved)
    assert changes == [environment_context(moved)]
    assert "<cwd>/work/other</cwd>" in changes[0].text()


def test_a_new_date_records_a_new_environment_context() -> None:
    tomorrow = attrs.evolve(WORLD, current_date="2025-03-05")
    assert context_changes(WORLD, tomorrow) == [environment_context(tomorrow)]


# ------------------------------------------------------------------ abort marker


def test_turn_aborted_marker_format() -> None:
    marker = turn_aborted_marker()
    assert marker.role == "user"
    assert marker.metadata is None
    text = marker.text()
    assert text.startswith("<turn_aborted>\n")
    assert text.endswith("\n</turn_aborted>")
    guidance = text.removeprefix("<turn_aborted>\n").removesuffix("\n</turn_aborted>")
    assert guidance == template("turn_aborted.md")
    assert guidance.strip() == guidance
    assert guidance
    assert "<" not in guidance
    assert is_contextual(marker)
    assert turn_aborted_marker() == marker


def test_instructions_hash_is_short_and_stable() -> None:
    first = instructions_hash("You are a helpful agent.")
    assert first == instructions_hash("You are a helpful agent.")
    assert first != instructions_hash("You are a helpful agent!")
    assert len(first) == 16
    assert int(first, 16) >= 0


# ------------------------------------------------------------------ a cwd that is not UTF-8


async def test_a_working_directory_that_is_not_utf8_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    work = tmp_path / os.fsdecode(b"caf\xe9")
    work.mkdir()
    config = Config(cwd=str(work), rollout=RolloutConfig(dir=str(tmp_path / "sessions")))
    with pytest.raises(ConfigError, match=r"working directory .*caf\\xe9 is not valid UTF-8"):
        async with relay.open_session(config):
            pass
    assert not (tmp_path / "sessions").exists()


def test_relay_run_in_a_directory_that_is_not_utf8_exits_2(tmp_path: Path) -> None:
    work = tmp_path / os.fsdecode(b"caf\xe9")
    work.mkdir()
    turn = {"id": "t1", "op": {"type": "user_turn", "items": [{"type": "text", "text": "hi"}]}}
    (work / "ops.jsonl").write_text(json.dumps(turn) + "\n")
    (work / "model.json").write_text(json.dumps({"responses": [{"text": "hello"}]}))
    sessions = tmp_path / "sessions"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "relay",
            "run",
            "ops.jsonl",
            "--model-script",
            "model.json",
            "--rollout-dir",
            str(sessions),
        ],
        cwd=work,
        capture_output=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.decode().startswith("relay: the working directory ")
    assert "Traceback" not in run.stderr.decode()
    assert not sessions.exists()
