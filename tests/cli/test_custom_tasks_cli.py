"""Registering a task from the command line, a configuration file and an installed package;
checking op scripts against the registered types; resuming a session that ran custom ops;
``relay exec``. Every run is a real ``relay`` process, away from the checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples" / "tasks"
TIMEOUT = 120

BOOM = """
import attrs
import relay


@attrs.frozen
class Boom(relay.SessionTask):
    @property
    def kind(self) -> str:
        return "boom"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        raise RuntimeError("boom goes the task")


def boom(op: relay.CustomOp) -> Boom:
    return Boom()
"""


def relay_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "relay", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        input=stdin,
        env={**os.environ, **(env or {})},
        timeout=TIMEOUT,
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder outside the checkout with the review example, its script, its model script
    and a file to review."""
    for name in ("review.py", "review.jsonl", "review.model.json"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("def half(n):\n    return n / 0\n")
    return tmp_path


def events(result: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    return [json.loads(line)["msg"] for line in result.stdout.splitlines()]


def answers(result: subprocess.CompletedProcess[str]) -> list[object]:
    return [e["message"] for e in events(result) if e["type"] == "agent_message"]


RUN = ["run", "review.jsonl", "--model-script", "review.model.json", "--json"]


def test_a_task_registered_with_the_task_option_runs(project: Path) -> None:
    result = relay_cli(*RUN, "--rollout-dir", "r", "--task", "review=review.py:review", cwd=project)
    assert result.returncode == 0, result.stderr
    first = json.loads((project / "review.model.json").read_text())["responses"][0]["text"]
    assert answers(result)[0] == first


def test_a_task_registered_in_a_configuration_file_resolves_beside_it(project: Path) -> None:
    (project / "conf").mkdir()
    shutil.move(project / "review.py", project / "conf" / "review.py")
    (project / "conf" / "relay.toml").write_text('[tasks]\nreview = "review.py:review"\n')
    result = relay_cli(*RUN, "--rollout-dir", "r", "--config", "conf/relay.toml", cwd=project)
    assert result.returncode == 0, result.stderr
    assert len(answers(result)) == 2


def test_an_installed_package_adds_its_op_through_the_entry_point(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    site = tmp_path_factory.mktemp("site")
    (site / "reviewbot").mkdir()
    shutil.copy(project / "review.py", site / "reviewbot" / "__init__.py")
    info = site / "reviewbot-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: reviewbot\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[relay.tasks]\nreview = reviewbot:review\n")
    (project / "review.py").unlink()
    result = relay_cli(*RUN, "--rollout-dir", "r", cwd=project, env={"PYTHONPATH": str(site)})
    assert result.returncode == 0, result.stderr
    assert len(answers(result)) == 2


def test_an_unknown_op_type_is_exit_2_naming_the_closest_registered_one(project: Path) -> None:
    (project / "typo.jsonl").write_text('{"op": {"type": "reveiw", "path": "src/app.py"}}\n')
    result = relay_cli("run", "typo.jsonl", "--task", "review=review.py:review", cwd=project)
    assert result.returncode == 2
    assert "unknown op type 'reveiw' (did you mean 'review'?)" in result.stderr
    assert result.stdout == ""


def test_an_op_its_factory_refuses_is_exit_2_before_anything_runs(project: Path) -> None:
    (project / "bad.jsonl").write_text(
        '{"op": {"type": "review", "path": "src/app.py"}}\n{"op": {"type": "review"}}\n'
    )
    result = relay_cli(
        "run", "bad.jsonl", "--task", "review=review.py:review", "--rollout-dir", "r", cwd=project
    )
    assert result.returncode == 2
    assert result.stderr == "relay: bad.jsonl line 2: review: a review op needs a 'path' string\n"
    assert result.stdout == ""
    assert not (project / "r").exists()


def test_a_factory_that_cannot_be_imported_is_exit_2_naming_it(project: Path) -> None:
    result = relay_cli(*RUN, "--task", "review=no_such_module:review", cwd=project)
    assert result.returncode == 2
    assert "task review 'no_such_module:review': cannot import no_such_module" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_task_that_raises_is_an_error_exit_1_and_no_traceback(project: Path) -> None:
    (project / "boom.py").write_text(BOOM)
    (project / "boom.jsonl").write_text(
        '{"id": "b1", "op": {"type": "boom"}}\n'
        '{"wait_for": {"type": "turn_complete"}}\n'
        '{"id": "t1", "op": {"type": "user_turn", "items": [{"type": "text", "text": "hi"}]}}\n'
    )
    result = relay_cli("run", "boom.jsonl", "--json", "--task", "boom=boom.py:boom", cwd=project)
    assert result.returncode == 1
    errors = [e for e in events(result) if e["type"] == "error"]
    assert [e["message"] for e in errors] == [
        "the boom task failed: RuntimeError('boom goes the task')"
    ]
    assert sum(e["type"] == "turn_complete" for e in events(result)) == 2
    assert "Traceback" not in result.stderr


@pytest.mark.slow  # processes of its own
def test_a_session_that_ran_custom_ops_resumes_only_with_their_task(project: Path) -> None:
    first = relay_cli(*RUN, "--rollout-dir", "r", "--task", "review=review.py:review", cwd=project)
    assert first.returncode == 0, first.stderr
    (rollout,) = (project / "r").rglob("rollout-*.jsonl")
    ops = [json.loads(line) for line in rollout.read_text().splitlines()]
    assert [line["payload"] for line in ops if line["type"] == "op"] == [
        {"id": "r1", "op": {"type": "review", "path": "src/app.py"}}
    ]
    (project / "more.jsonl").write_text(
        '{"op": {"type": "user_turn", "items": [{"type": "text", "text": "and?"}]}}\n'
    )
    recorded = rollout.read_bytes()
    refused = relay_cli("resume", str(rollout), "more.jsonl", cwd=project)
    assert refused.returncode == 2
    assert "the session ran 'review' ops and no task is registered for them" in refused.stderr
    assert rollout.read_bytes() == recorded
    resumed = relay_cli(
        "resume",
        str(rollout),
        "more.jsonl",
        "--json",
        "--task",
        "review=review.py:review",
        cwd=project,
    )
    assert resumed.returncode == 0, resumed.stderr
    show = relay_cli("show", str(rollout), cwd=project)
    assert "» review (path='src/app.py')" in show.stdout


def test_exec_prints_the_answer_or_the_events(tmp_path: Path) -> None:
    plain = relay_cli("exec", "Say hi.", "--rollout-dir", "r", cwd=tmp_path)
    assert (plain.returncode, plain.stdout) == (0, "echo: Say hi.\n"), plain.stderr
    piped = relay_cli(
        "exec", "-", "--events", "--rollout-dir", "r", cwd=tmp_path, stdin="From stdin."
    )
    assert piped.returncode == 0, piped.stderr
    kinds = [e["type"] for e in events(piped)]
    assert kinds[0] == "session_configured" and kinds[-1] == "shutdown_complete"
    assert "turn_complete" in kinds


def test_exec_reads_the_prompt_from_stdin_without_its_trailing_newlines(tmp_path: Path) -> None:
    piped = relay_cli(
        "exec", "-", "--rollout-dir", "r", cwd=tmp_path, stdin="Line one.\n  Line two.\n\n"
    )
    assert (piped.returncode, piped.stdout) == (0, "echo: Line one.\n  Line two.\n")


def test_exec_help_says_it_prints_the_answer_unless_asked_otherwise(tmp_path: Path) -> None:
    helped = relay_cli("exec", "--help", cwd=tmp_path)
    text = " ".join(helped.stdout.split())
    assert "--pretty a readable transcript instead of the answer" in text
    assert "--events relay's events, one JSON line each" in text
    assert "the default" not in text
    ran = relay_cli("run", "--help", cwd=tmp_path)
    assert "(the default on a terminal)" in " ".join(ran.stdout.split())


def test_exec_of_a_failing_turn_is_exit_1_with_the_error_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "model.json").write_text(
        json.dumps({"responses": [{"http_error": {"status": 400, "message": "no such model"}}]})
    )
    result = relay_cli(
        "exec", "hello", "--model-script", "model.json", "--rollout-dir", "r", cwd=tmp_path
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert "no such model" in result.stderr


def test_exec_refuses_a_prompt_over_the_window_before_it_reads_the_rest(tmp_path: Path) -> None:
    # A context window of 1,000 tokens holds about 4,000 bytes of text. One byte more is
    # written and standard input is left open: relay reads no further than that, and waits
    # for nothing more.
    command = [sys.executable, "-m", "relay", "exec", "-", "-c", "model_context_window=1000"]
    proc = subprocess.Popen(
        [*command, "--rollout-dir", "r"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(b"x" * 4_001)
        proc.stdin.flush()
        status = proc.wait(timeout=TIMEOUT)
    finally:
        proc.kill()
        proc.stdin.close()
    assert status == 2
    assert proc.stdout.read() == b""
    assert proc.stderr.read().decode() == (
        "relay: the prompt on standard input is over 4,000 bytes: more text than the context "
        "window of 'scripted' (1,000 tokens) holds\n"
    )
    assert not (tmp_path / "r").exists()


def test_exec_bounds_a_prompt_by_the_largest_known_window_when_the_window_is_unknown(
    tmp_path: Path,
) -> None:
    from relay._base._tokens import MAX_KNOWN_WINDOW

    bound = MAX_KNOWN_WINDOW * 4
    over = relay_cli("exec", "-", "--rollout-dir", "r", cwd=tmp_path, stdin="x" * (bound + 1))
    assert over.returncode == 2 and over.stdout == ""
    assert over.stderr == (
        f"relay: the prompt on standard input is over {bound:,} bytes: more text than the "
        f"largest context window relay knows ({MAX_KNOWN_WINDOW:,} tokens) holds; "
        "model_context_window sets the window\n"
    )
    argument = relay_cli(
        "exec", "y" * 4_001, "-c", "model_context_window=1000", "--rollout-dir", "r", cwd=tmp_path
    )
    assert argument.returncode == 2
    assert argument.stderr.startswith("relay: the prompt is over 4,000 bytes: ")
    assert not (tmp_path / "r").exists()
