"""Security: secrets, file modes, path confinement, commands without a shell (docs/config.md,
docs/session.md, docs/compaction.md, docs/rollout.md).

- A canary API key, set in the provider's ``env_key`` variable, appears nowhere a session
  writes or sends besides the ``Authorization`` header: not in events, the rollout, the mock
  server's request log (in memory and on disk), the stdin of hook commands, error messages
  (the server echoes the key in its errors, in-stream failures and compaction errors), the
  session's log records, or the output of ``relay run``.
- Rollout files are created 0600 and the directories relay creates 0700, whatever the umask.
- ``read_file`` and ``list_dir`` refuse paths that leave ``cwd`` (``..``, absolute paths,
  symlinks to files or directories outside), and nothing of what lies outside reaches the
  model, the events or the rollout.
- The shell tool and hook commands run from argv lists: shell syntax in an argument is text,
  never a command; both have timeouts that kill the whole process group.
- relay builds no command line from model input: the only processes it starts are the shell
  tool's argv (the model's own) and configured hook commands; a model-supplied path that looks
  like an option is a file name.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import random
import re
import sys
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._base._codec import to_json
from relay._base._tokens import ApproxEstimator
from relay.testing import turn_ended
from tests.escapees import TAKE_LOCK, wait_gone
from tests.invariants import check_event_invariants
from tests.reliability._checks import check_rollout_matches, check_well_formed
from tests.reliability._raw_server import RawAnswer, open_raw_server

CANARY = "sk-canary-5e1f0c9a7b3d4e2f"
KEY_ENV = "RELAY_SECURITY_API_KEY"
ROOT = Path(__file__).resolve().parents[2]
GUARD_S = 30


def turn(text: str) -> relay.UserTurn:
    return relay.UserTurn(items=[relay.Text(text)])


@asynccontextmanager
async def recorded(
    config: relay.Config, **kwargs: Any
) -> AsyncIterator[tuple[relay.Session, testing.EventRecorder]]:
    async with (
        relay.open_session(
            config,
            clock=testing.fixed_clock,
            rng=random.Random(0),
            estimator=ApproxEstimator(),
            **kwargs,
        ) as session,
        testing.recording(session) as recorder,
    ):
        yield session, recorder
        if not session.closed:
            await session.submit(relay.Shutdown())
        await recorder.wait_for(relay.ShutdownComplete)


async def run_ops(session: relay.Session, recorder: testing.EventRecorder, *ops: relay.Op) -> None:
    done = sum(turn_ended(event) for event in recorder.events)
    for op in ops:
        await session.submit(op)
        done += 1
        await recorder.wait_for(turn_ended, done)


# ============================================================================ the API key

#: Every way a server can put the key into what relay reports: HTTP error bodies (retried and
#: not), an in-stream failure, and compaction errors.
KEY_SCRIPT: dict[str, Any] = {
    "responses": [
        {"text": "Hello."},
        {"http_error": {"status": 401, "message": f"Incorrect API key provided: {CANARY}."}},
        {"http_error": {"status": 500, "message": f"upstream rejected {CANARY}"}},
        {"text": "Recovered."},
        {"text": "lost", "stream_error": {"code": "invalid_api_key", "message": f"bad {CANARY}"}},
        {"function_call": {"name": "list_dir", "arguments": {"path": "."}, "call_id": "ls"}},
        {"text": "Listed."},
    ],
    "compact": [
        {"http_error": {"status": 500, "message": f"compactor saw {CANARY}"}},
        {"http_error": {"status": 500, "message": f"compactor saw {CANARY} again"}},
    ],
}

HOOK_SCRIPT = (
    "import sys, pathlib\n"
    "target = pathlib.Path(sys.argv[1])\n"
    "with target.open('a') as out:\n"
    "    out.write(sys.stdin.read() + '\\n')\n"
)


def key_config(base_url: str, tmp_path: Path) -> relay.Config:
    hook = relay.HookCommand(
        [sys.executable, "-c", HOOK_SCRIPT, str(tmp_path / "hook-input.jsonl")]
    )
    return relay.Config(
        model="gpt-test",
        model_provider="mock",
        model_providers={
            "mock": relay.ProviderConfig(
                name="mock",
                base_url=base_url,
                env_key=KEY_ENV,
                remote_compaction="v1",
                stream_max_retries=2,
                request_max_retries=1,
            )
        },
        hooks=relay.Hooks(pre_compact=[hook], post_compact=[hook]),
        cwd=str(tmp_path / "work"),
        rollout=relay.RolloutConfig(enabled=True, dir=str(tmp_path / "sessions")),
    )


async def test_the_api_key_never_leaves_the_authorization_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(KEY_ENV, CANARY)
    (tmp_path / "work").mkdir()
    caplog.set_level(logging.DEBUG)
    log_path = tmp_path / "requests.jsonl"
    with trio.fail_after(GUARD_S):
        async with testing.open_mock_server(KEY_SCRIPT, log_path=log_path) as server:
            assert server.base_url is not None
            config = key_config(server.base_url, tmp_path)
            async with recorded(config) as (session, recorder):
                await run_ops(
                    session,
                    recorder,
                    turn("hello"),  # answered
                    turn("again"),  # 401 echoing the key
                    turn("retry"),  # 500 echoing the key, retried
                    turn("failing"),  # response.failed echoing the key
                    relay.Compact(),  # compaction endpoint echoing the key, twice
                    turn("list"),  # a tool call
                    relay.Compact(),  # answered: hooks run before and after
                )
            requests = list(server.requests)
    events = recorder.events
    check_event_invariants(events, finished=True)
    assert session.rollout is not None
    check_rollout_matches(session, session.rollout.path)
    codes = [e.msg.code for e in events if isinstance(e.msg, relay.ErrorEvent)]
    assert codes == ["unauthorized", "unauthorized", "server_error"]
    messages = [e.msg.message for e in events if isinstance(e.msg, relay.ErrorEvent)]
    assert "[redacted]" in messages[0] and "[redacted]" in messages[2]
    hooks = (tmp_path / "hook-input.jsonl").read_text().splitlines()
    assert len(hooks) == 3  # pre of the failed compaction, then pre and post of the second
    assert {json.loads(line)["session_id"] for line in hooks} == {session.id}
    # The server saw the key where it belongs, and its log keeps it out.
    assert all("authorization" not in entry["headers"] for entry in requests)
    places = {
        "events": json.dumps([to_json(e) for e in events]),
        "rollout": session.rollout.path.read_text(encoding="utf-8"),
        "server log": json.dumps(requests) + log_path.read_text(encoding="utf-8"),
        "hook input": "\n".join(hooks),
        "log records": "\n".join(r.getMessage() + str(r.exc_info) for r in caplog.records),
    }
    assert [place for place, text in places.items() if CANARY in text] == []


@pytest.mark.slow  # two `relay run` processes start, relay's imports included: about 2 s
async def test_relay_run_prints_no_key_on_any_stream(tmp_path: Path) -> None:
    script = {
        "responses": [
            {"http_error": {"status": 401, "message": f"Incorrect API key provided: {CANARY}"}},
            {"text": "fine"},
        ]
    }
    ops = "\n".join(
        json.dumps({"op": {"type": "user_turn", "items": [{"type": "text", "text": text}]}})
        + "\n"
        + json.dumps({"wait_for": {"type": "turn_complete", "count": count}})
        for count, text in enumerate(["one", "two"], start=1)
    )
    (tmp_path / "ops.jsonl").write_text(ops + "\n")
    for pretty in ([], ["--pretty"]):
        with trio.fail_after(GUARD_S):
            async with testing.open_mock_server(script) as server:
                (tmp_path / "relay.toml").write_text(
                    'model = "gpt-test"\nmodel_provider = "mock"\n[model_providers.mock]\n'
                    f'base_url = "{server.base_url}"\nenv_key = "{KEY_ENV}"\n'
                )
                result = await trio.run_process(
                    [
                        sys.executable, "-m", "relay", "run", "ops.jsonl",
                        "--config", "relay.toml", "--rollout-dir", "sessions", *pretty,
                    ],
                    cwd=tmp_path,
                    env={**os.environ, KEY_ENV: CANARY},
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                )  # fmt: skip
        assert result.returncode == 1, result.stderr  # the first turn failed (401)
        assert b"[redacted]" in result.stdout
        assert CANARY.encode() not in result.stdout + result.stderr
    for rollout in (tmp_path / "sessions").rglob("*.jsonl"):
        assert CANARY not in rollout.read_text(encoding="utf-8")


#: A key whose escaped forms differ from it: a quote, a backslash, characters that are
#: percent-encoded. It is set with a trailing newline, as a key read from a file often is.
ODD_KEY = 'sk-odd"4c\\e1/f0+c9a%7b3d8e2f'


def key_forms(key: str) -> list[str]:
    """Every form of ``key`` that must not appear, fragments of 12 characters included."""
    whole = [
        key,
        json.dumps(key)[1:-1],
        repr(key)[1:-1],
        repr(key.encode())[2:-1],
        urllib.parse.quote(key, safe=""),
        urllib.parse.quote(key),
    ]
    return [form[i : i + 12] for form in whole for i in range(len(form) - 11)]


def leaks(text: str, key: str) -> list[str]:
    return [form for form in key_forms(key) if form in text]


async def test_every_form_of_a_key_read_with_a_newline_is_kept_out(tmp_path: Path) -> None:
    key = ODD_KEY
    header = repr(f"Bearer {key}\n".encode())
    script = {
        "responses": [
            {"text": "Hello."},  # answered: the newline was stripped, not sent
            {"http_error": {"status": 401, "message": f"Illegal header value {header}"}},
            {"http_error": {"status": 500, "message": f"seen {json.dumps(key)}"}},
            {"text": "Recovered."},
            {"http_error": {"status": 401, "message": "x" * 490 + key}},  # across the cut
            {"http_error": {"status": 401, "message": f"{urllib.parse.quote(key)} / {key[:14]}"}},
            {"text": "lost", "stream_error": {"message": f"prefix {key[:12]} suffix {key[-12:]}"}},
        ],
        "compact": [{"raw": {"output": [{"type": "message", "role": key}]}}],
    }
    ops = [
        {"op": {"type": "user_turn", "items": [{"type": "text", "text": text}]}}
        for text in ("one", "two", "three", "four", "five", "six")
    ]
    ops.insert(-1, {"op": {"type": "compact"}})
    lines = []
    for count, op in enumerate(ops, start=1):
        lines += [
            json.dumps(op),
            json.dumps({"wait_for": {"type": "turn_complete", "count": count}}),
        ]
    (tmp_path / "ops.jsonl").write_text("\n".join(lines) + "\n")
    with trio.fail_after(GUARD_S):
        async with testing.open_mock_server(script) as server:
            (tmp_path / "relay.toml").write_text(
                'model = "gpt-test"\nmodel_provider = "mock"\n[model_providers.mock]\n'
                f'base_url = "{server.base_url}"\nenv_key = "{KEY_ENV}"\n'
                'remote_compaction = "v1"\nstream_max_retries = 1\nrequest_max_retries = 0\n'
            )
            result = await trio.run_process(
                [
                    sys.executable, "-m", "relay", "run", "ops.jsonl",
                    "--config", "relay.toml", "--rollout-dir", "sessions",
                ],
                cwd=tmp_path,
                env={**os.environ, KEY_ENV: f"{key}\n"},
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )  # fmt: skip
    out = result.stdout.decode()
    events = [json.loads(line) for line in out.splitlines()]
    texts = [e["msg"].get("text") or e["msg"].get("message") for e in events]
    assert "Hello." in texts and "Recovered." in texts, result.stderr
    errors = [e["msg"] for e in events if e["msg"]["type"] == "error"]
    codes = [e["code"] for e in errors]
    assert codes == ["unauthorized", "unauthorized", "unauthorized", "server_error"]
    assert all("[redacted]" in e["message"] for e in errors)
    messages = "\n".join(str(text) for text in texts)
    rollouts = "".join(
        p.read_text(encoding="utf-8") for p in (tmp_path / "sessions").rglob("*.jsonl")
    )
    places = {
        "stdout": out,
        "messages": messages,
        "stderr": result.stderr.decode(),
        "rollout": rollouts,
    }
    assert [place for place, text in places.items() if leaks(text, key)] == []


async def test_a_key_with_a_character_no_header_can_carry_is_refused_at_start(
    tmp_path: Path,
) -> None:
    (tmp_path / "ops.jsonl").write_text(
        '{"op": {"type": "user_turn", "items": [{"type": "text", "text": "hi"}]}}\n'
    )
    (tmp_path / "relay.toml").write_text(
        'model_provider = "mock"\n[model_providers.mock]\n'
        f'base_url = "http://127.0.0.1:9/v1"\nenv_key = "{KEY_ENV}"\n'
    )
    with trio.fail_after(GUARD_S):
        result = await trio.run_process(
            [sys.executable, "-m", "relay", "run", "ops.jsonl", "--config", "relay.toml"],
            cwd=tmp_path,
            env={**os.environ, KEY_ENV: "sk-key\twith-a-tab-ü"},
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 2
    stderr = result.stderr.decode()
    assert f"the API key in {KEY_ENV} has a control character" in stderr
    assert "with-a-tab" not in stderr + result.stdout.decode()


#: Run by the shell tool as ``sh -c PROC_SCAN PROC_SCAN sk- odd VARIABLE``: for every process
#: the command can see in ``/proc``, its pid, whether its environment and command line could be
#: read, and how many of their lines name VARIABLE or hold ``sk-odd`` (the start of
#: :data:`ODD_KEY`, given in two words so that no command line holds it). The command first
#: runs itself again with ``SCAN_DECOY=sk-odd`` added to its environment, and says its pid
#: (``self PID``): the scan must find that one line there, which shows it finds what it seeks.
PROC_SCAN = (
    'if [ "$#" = 3 ]; then exec env "SCAN_DECOY=$1$2" sh -c "$0" "$0" "$@" again; fi; '
    'echo "self $$"; '
    "for d in /proc/[0-9]*; do "
    "if env=$(tr '\\0' '\\n' < $d/environ) && cmd=$(tr '\\0' '\\n' < $d/cmdline); then "
    'echo "pid ${d#/proc/} read, holding $(printf \'%s\\n\' "$env" "$cmd" '
    '| grep -c -e "$1$2" -e "^$3=")"; '
    'else echo "pid ${d#/proc/} unreadable"; fi; done'
)
#: The scan as the model's ``shell`` call.
SCAN_CALL = {
    "name": "shell",
    "arguments": {"argv": ["sh", "-c", PROC_SCAN, PROC_SCAN, "sk-", "odd", KEY_ENV]},
    "call_id": "scan",
}


def scan_of(stdout: str) -> tuple[int, dict[int, int | None]]:
    """From the events ``relay run`` printed, what :data:`PROC_SCAN` found: the command's own
    pid and, for each process it saw, how many lines of its environment and command line held
    the key (``None``: they could not be read)."""
    outputs = [
        json.loads(line)["msg"]["item"].get("output")
        for line in stdout.splitlines()
        if json.loads(line)["msg"]["type"] == "item_completed"
    ]
    report = next(output for output in outputs if output and output.startswith("self "))
    own = re.match(r"self (\d+)\n", report)
    assert own is not None, report
    seen = {
        int(pid): int(count) if count else None
        for pid, count in re.findall(
            r"^pid (\d+) (?:read, holding (\d+)|unreadable)$", report, re.MULTILINE
        )
    }
    return int(own[1]), seen


def check_scan(stdout: str) -> None:
    """The command read itself and its guard (the first process of its PID namespace, pid 1)
    and found the key only where it put it itself: no process it can see holds it, in its
    environment or command line, relay and whatever started relay out of its sight."""
    own, seen = scan_of(stdout)
    assert own != 1 and seen.get(own) == 1 and seen.get(1) == 0, seen
    assert {pid: count for pid, count in seen.items() if count} == {own: 1}, seen


async def test_no_process_the_shell_tool_can_read_holds_the_key(tmp_path: Path) -> None:
    script = {"responses": [{"function_call": SCAN_CALL}, {"text": "done"}]}
    ops = [
        {"op": {"type": "user_turn", "items": [{"type": "text", "text": "look around"}]}},
        {"wait_for": {"type": "turn_complete"}},
    ]
    (tmp_path / "ops.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    with trio.fail_after(GUARD_S):
        async with testing.open_mock_server(script) as server:
            (tmp_path / "relay.toml").write_text(
                'model = "gpt-test"\nmodel_provider = "mock"\n[model_providers.mock]\n'
                f'base_url = "{server.base_url}"\nenv_key = "{KEY_ENV}"\n[tools]\nshell = true\n'
            )
            result = await trio.run_process(
                [sys.executable, "-m", "relay", "run", "ops.jsonl", "--config", "relay.toml"],
                cwd=tmp_path,
                env={**os.environ, KEY_ENV: ODD_KEY},
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    assert result.returncode == 0, result.stderr
    check_scan(result.stdout.decode())
    assert leaks(result.stdout.decode(), ODD_KEY) == []


async def test_a_redirect_to_another_origin_is_refused_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, CANARY)
    script = {"responses": [{"text": "Not redirected."}, {"text": "Followed."}]}
    async with (
        testing.open_mock_server({"responses": [{"text": "Captured."}]}) as elsewhere,
        open_raw_server(script, {}) as server,
    ):
        assert elsewhere.base_url is not None and server.base_url is not None
        server.raw[1] = RawAnswer((b"",), 307, (("location", f"{elsewhere.base_url}/responses"),))
        server.raw[3] = RawAnswer((b"",), 307, (("location", "/v1/responses?hop=1"),))
        config = relay.Config(
            model="gpt-test",
            model_provider="mock",
            model_providers={
                "mock": relay.ProviderConfig(
                    name="mock",
                    base_url=server.base_url,
                    env_key=KEY_ENV,
                    http_headers={"api-key": "custom-header-secret"},
                )
            },
            cwd=str(tmp_path),
            rollout=relay.RolloutConfig(enabled=False),
        )
        with trio.fail_after(GUARD_S):
            async with recorded(config) as (session, recorder):
                await run_ops(session, recorder, turn("one"), turn("two"), turn("three"))
        foreign = list(elsewhere.requests)
        paths = [entry["path"] for entry in server.requests]
        origin = elsewhere.base_url.removesuffix("/v1")
    assert foreign == []
    errors = [e.msg for e in recorder.events if isinstance(e.msg, relay.ErrorEvent)]
    assert [e.code for e in errors] == ["bad_request"]
    assert f"redirected the request to another origin, {origin}" in errors[0].message
    texts = [e.msg.message for e in recorder.events if isinstance(e.msg, relay.AgentMessage)]
    assert texts == ["Not redirected.", "Followed."]  # a redirect on the same origin is followed
    assert paths == ["/v1/responses"] * 4


# ============================================================================ file modes


async def test_rollout_files_are_0600_in_0700_directories_whatever_the_umask(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    root = tmp_path / "fresh" / "sessions"
    config = relay.Config(rollout=relay.RolloutConfig(enabled=True, dir=str(root)))
    previous = os.umask(0)
    try:
        async with recorded(config, model=testing.ScriptedModel(None)) as (session, recorder):
            await run_ops(session, recorder, turn("hello"))
    finally:
        os.umask(previous)
    assert session.rollout is not None
    path = session.rollout.path
    assert path.stat().st_mode & 0o777 == 0o600
    created = [root.parent, root, *[parent for parent in path.parents if root in parent.parents]]
    assert len(created) == 5  # fresh/sessions/YYYY/MM/DD
    for directory in created:
        assert directory.stat().st_mode & 0o777 == 0o700, directory
    # Resuming appends to the same file and keeps its mode.
    async with relay.resume_session(path, config, model=testing.ScriptedModel(None)) as again:
        await again.submit(relay.Shutdown())
        await again.wait_closed()
    assert path.stat().st_mode & 0o777 == 0o600


# ============================================================================ paths

SECRET = "top secret outside the working directory"


@pytest.fixture
def jail(tmp_path: Path) -> Path:
    """A working directory with escape hatches pointing at a secret outside it."""
    (tmp_path / "secret.txt").write_text(SECRET)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text(SECRET)
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "inside.txt").write_text("inside text")
    (work / "-n").write_text("a file named like an option")
    (work / "link_out").symlink_to(tmp_path / "secret.txt")
    (work / "linkdir_out").symlink_to(tmp_path / "outside")
    (work / "link_in").symlink_to(work / "inside.txt")
    return work


ESCAPES = [
    ("read_file", "../secret.txt"),
    ("read_file", "sub/../../secret.txt"),
    ("read_file", "SECRET_ABSOLUTE"),
    ("read_file", "link_out"),
    ("read_file", "linkdir_out/secret.txt"),
    ("list_dir", ".."),
    ("list_dir", "/"),
    ("list_dir", "linkdir_out"),
    ("list_dir", "sub/../.."),
]
ALLOWED = [
    ("read_file", "link_in", "inside text"),
    ("read_file", "-n", "a file named like an option"),
    ("read_file", "--help", "error: no such file: --help"),
    ("list_dir", "-la", "error: no such directory: -la"),
    ("read_file", "~/inside.txt", "error: no such file: ~/inside.txt"),
]


async def test_tool_paths_that_leave_cwd_are_refused(
    jail: Path, autojump_clock: trio.testing.MockClock
) -> None:
    absolute = str(jail.parent / "secret.txt")
    calls = [
        (name, absolute if path == "SECRET_ABSOLUTE" else path)
        for name, path in [*ESCAPES, *((name, path) for name, path, _ in ALLOWED)]
    ]
    script = {
        "responses": [
            {"function_call": {"name": name, "arguments": {"path": path}, "call_id": f"c{i}"}}
            for i, (name, path) in enumerate(calls)
        ]
        + [{"text": "done"}]
    }
    config = relay.Config(
        cwd=str(jail), rollout=relay.RolloutConfig(enabled=True, dir=str(jail.parent / "r"))
    )
    async with recorded(config, model=testing.ScriptedModel(script)) as (session, recorder):
        await run_ops(session, recorder, turn("look around"))
    outputs = {
        item.call_id: item.output
        for item in session.history.items
        if isinstance(item, relay.FunctionCallOutput)
    }
    for i, (_, path) in enumerate(calls[: len(ESCAPES)]):
        assert outputs[f"c{i}"] == f"error: path {path!r} is outside the working directory"
    for offset, (_, _, expected) in enumerate(ALLOWED):
        assert outputs[f"c{len(ESCAPES) + offset}"] == expected
    assert session.rollout is not None
    everything = json.dumps([to_json(e) for e in recorder.events]) + (
        session.rollout.path.read_text()
    )
    assert SECRET not in everything
    check_event_invariants(recorder.events, finished=True)


@pytest.mark.parametrize("name", ["read_file", "list_dir"])
async def test_a_path_with_a_nul_character_is_refused(
    name: str, jail: Path, autojump_clock: trio.testing.MockClock
) -> None:
    script = {
        "responses": [
            {"function_call": {"name": name, "arguments": {"path": "a\u0000b"}, "call_id": "c"}},
            {"text": "done"},
        ]
    }
    config = relay.Config(cwd=str(jail), rollout=relay.RolloutConfig(enabled=False))
    async with recorded(config, model=testing.ScriptedModel(script)) as (session, recorder):
        await run_ops(session, recorder, turn("read it"))
    assert not recorder.of_type(relay.ErrorEvent)
    check_well_formed(session.history.items, settled=True)
    output = next(i for i in session.history.items if isinstance(i, relay.FunctionCallOutput))
    assert output.output.startswith("error: ")


# ============================================================================ commands

INJECTIONS = ["; touch pwned1", "$(touch pwned2)", "`touch pwned3`", "| touch pwned4", "&& touch x"]


async def test_shell_arguments_from_the_model_are_never_shell_syntax(jail: Path) -> None:
    argv = ["echo", *INJECTIONS]
    slow = [sys.executable, "-c", "import time; time.sleep(30)"]
    script = {
        "responses": [
            {"function_call": {"name": "shell", "arguments": {"argv": argv}, "call_id": "echo"}},
            {
                "function_call": {
                    "name": "shell",
                    "arguments": {"argv": slow, "timeout_ms": 300},
                    "call_id": "slow",
                }
            },
            {"text": "done"},
        ]
    }
    config = relay.Config(
        tools={"shell": True}, cwd=str(jail), rollout=relay.RolloutConfig(enabled=False)
    )
    started = trio.current_time()
    with trio.fail_after(GUARD_S):
        async with recorded(config, model=testing.ScriptedModel(script)) as (session, recorder):
            await run_ops(session, recorder, turn("run them"))
    outputs = {
        item.call_id: item.output
        for item in session.history.items
        if isinstance(item, relay.FunctionCallOutput)
    }
    assert outputs["echo"] == " ".join(INJECTIONS) + "\n\n[exit code 0]"
    assert outputs["slow"].endswith("[timed out after 300 ms; process killed]")
    assert trio.current_time() - started < 10
    assert not [p.name for p in jail.parent.rglob("*") if p.name.startswith(("pwned", "x"))]


async def test_hook_commands_run_from_argv_with_a_timeout_that_kills_the_group(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "hook-ran"
    # The hanging hook's child shares its lock, taken before the child starts: the lock goes
    # when both have ended (their pids would name nothing here: a PID namespace of their own).
    report = tmp_path / "child"
    literal = [
        sys.executable, "-c", "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('ran')",
        str(marker), "; touch pwned-hook", "$(touch pwned-hook2)",
    ]  # fmt: skip
    hanging = [
        sys.executable, "-c",
        TAKE_LOCK + "import subprocess\n"
        "child = subprocess.Popen(['sleep', '1000'], pass_fds=[lock])\n"
        "open(sys.argv[1], 'w').write('started')\n"
        "child.wait()\n",
        str(report),
    ]  # fmt: skip
    config = relay.Config(
        hooks=relay.Hooks(
            pre_compact=[
                relay.HookCommand(literal),
                relay.HookCommand(hanging, timeout_ms=1_000),
            ]
        ),
        cwd=str(tmp_path),
        rollout=relay.RolloutConfig(enabled=False),
    )
    with trio.fail_after(GUARD_S):
        async with recorded(config, model=testing.ScriptedModel(None)) as (session, recorder):
            await run_ops(session, recorder, turn("hello"), relay.Compact())
    completed = recorder.of_type(relay.HookCompleted)
    assert [c.outcome for c in completed] == ["continue", "timeout"]
    assert completed[1].duration_ms < 5_000
    warnings = [w.message for w in recorder.of_type(relay.WarningEvent)]
    assert any("did not finish within 1000 ms" in w for w in warnings)
    assert marker.read_text() == "ran"
    assert not list(tmp_path.glob("pwned*"))
    # The hook's own child went down with it.
    assert report.read_text() == "started"
    await wait_gone(report)


def test_relay_starts_processes_only_for_the_shell_tool_hook_commands_and_mcp_servers() -> None:
    """No command line is built from model input: the shell tool's argv is the model's own,
    hook argv comes from the configuration (its input goes to stdin, as JSON), and so does an
    MCP server's (the model's calls go to it as JSON-RPC messages). Every process starts in
    ``relay._exec``, and the core reaches it only through its one gate."""
    starts = re.compile(
        r"open_process|run_process|subprocess\.(run|Popen|call|check_call|check_output)"
        r"|os\.(system|popen|exec\w*|spawn\w*|posix_spawn\w*)|create_subprocess|shell\s*=\s*True"
    )
    found = sorted(
        f"{path.relative_to(ROOT)}"
        for package in ("runtime", "tasks")
        for path in (ROOT / package).rglob("*.py")
        if path.resolve().is_relative_to(ROOT / package)
        and starts.search(path.read_text(encoding="utf-8"))
    )
    assert found == [
        "runtime/relay/_exec/_guard.py",
        "runtime/relay/_exec/_process.py",
        "runtime/relay/_exec/_sandbox.py",
    ]
    exec_room = ROOT / "runtime" / "relay" / "_exec"
    # relay itself starts one program: the process guard, an isolated Python running relay's
    # own source, with nothing of the model's on its command line.
    process = (exec_room / "_process.py").read_text(encoding="utf-8")
    assert process.count("os.posix_spawnp(") == 1
    assert '[python, "-I", "-S", "-c", _source' in process
    # The guard starts each command from the argv of its request, never through a shell.
    guard = (exec_room / "_guard.py").read_text(encoding="utf-8")
    assert len(starts.findall(guard)) == 1
    assert "os.posix_spawnp(\n            argv[0],\n            argv," in guard
    # The sandbox's own process is its trial: bwrap running ``true``, nothing of the model's.
    sandbox = (exec_room / "_sandbox.py").read_text(encoding="utf-8")
    assert len(starts.findall(sandbox)) == 1
    assert sandbox.count("subprocess.run(") == 1
    assert 'bwrap_argv(policy, ["true"]' in sandbox
    users = sorted(
        f"{path.relative_to(ROOT)}"
        for package in ("runtime", "tasks")
        for path in (ROOT / package).rglob("*.py")
        if path.resolve().is_relative_to(ROOT / package)
        and "open_command(" in path.read_text(encoding="utf-8")
        and path.name != "_process.py"
    )
    # Commands start in one place, the guard's, confined or not: the shell tool's and the
    # hooks' through open_sandboxed (which runs the argv it is given, in bwrap when the mode
    # says so), an MCP server's through its stdio transport.
    assert users == ["runtime/relay/_exec/_sandbox.py", "runtime/relay/_mcp/_stdio.py"]
    sandboxed = sorted(
        f"{path.relative_to(ROOT)}"
        for package in ("runtime", "tasks")
        for path in (ROOT / package).rglob("*.py")
        if path.resolve().is_relative_to(ROOT / package)
        and "open_sandboxed(" in path.read_text(encoding="utf-8")
        and path.name != "_sandbox.py"
    )
    # The shell tool's commands run through run_command, the hooks' through the gate's
    # open_hook; the gate is the one module of the core that starts either.
    assert sandboxed == ["runtime/relay/_core/_exec_gate.py", "runtime/relay/_exec/_command.py"]
    gate = (ROOT / "runtime" / "relay" / "_core" / "_exec_gate.py").read_text(encoding="utf-8")
    assert "await run_command(" in gate
    assert "async with open_sandboxed(" in gate
    support = (ROOT / "runtime" / "relay" / "_core" / "_support.py").read_text(encoding="utf-8")
    assert "start=wiring.gate.open_hook" in support
    hooks = (ROOT / "runtime" / "relay" / "_core" / "_hooks.py").read_text(encoding="utf-8")
    assert "argv = list(hook.command)" in hooks
    assert "stdin=subprocess.PIPE" in hooks
    servers = (ROOT / "runtime" / "relay" / "_mcp" / "_servers.py").read_text(encoding="utf-8")
    assert servers.count("open_stdio(") == 1
    assert "argv = [config.command, *config.args]" in servers


def test_the_core_runs_commands_only_through_its_gate() -> None:
    """No module of the core but the gate (``_core/_exec_gate.py``) calls what runs a command
    (``run_command``, ``open_sandboxed``, ``open_command``, ``plain_starter``), so that no
    command of a session skips the rules, the sandbox or ``[shell_environment_policy]``. A
    call through a runner the gate handed over (``ctx.run_command(...)``) is not such a call."""
    runners = {"run_command", "open_sandboxed", "open_command", "plain_starter"}
    callers: dict[str, list[str]] = {}
    for path in sorted((ROOT / "runtime" / "relay" / "_core").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in runners
            ):
                callers.setdefault(path.name, []).append(f"{node.func.id}:{node.lineno}")
    assert sorted(callers) == ["_exec_gate.py"], callers


async def test_the_shell_tool_cannot_read_the_api_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, CANARY)
    script = {
        "responses": [
            {
                "function_call": {
                    "name": "shell",
                    "arguments": {"argv": ["printenv", KEY_ENV]},
                    "call_id": "env",
                }
            },
            {"text": "done"},
        ]
    }
    with trio.fail_after(GUARD_S):
        async with testing.open_mock_server(script) as server:
            assert server.base_url is not None
            config = relay.Config(
                model="gpt-test",
                model_provider="mock",
                model_providers={
                    "mock": relay.ProviderConfig(
                        name="mock", base_url=server.base_url, env_key=KEY_ENV
                    )
                },
                tools={"shell": True},
                cwd=str(tmp_path),
                rollout=relay.RolloutConfig(enabled=True, dir=str(tmp_path / "sessions")),
            )
            async with recorded(config) as (session, recorder):
                await run_ops(session, recorder, turn("show me the environment"))
            requests = list(server.requests)
    assert session.rollout is not None
    places = {
        "events": json.dumps([to_json(e) for e in recorder.events]),
        "rollout": session.rollout.path.read_text(encoding="utf-8"),
        "requests": json.dumps(requests),
    }
    assert [place for place, text in places.items() if CANARY in text] == []


@pytest.mark.slow  # two processes start, relay's imports included: near 2 s on a busy machine
async def test_a_key_the_wrapper_of_relay_holds_never_leaves_through_a_tool(
    tmp_path: Path,
) -> None:
    """relay started under ``sh -c``: the shell keeps the key in its own environment. The shell
    tool's command, in a PID namespace of its own, sees neither that shell nor relay: a scan of
    every process it can see finds the key in none, and nothing records, reports or sends it."""
    script = {"responses": [{"function_call": SCAN_CALL}, {"text": "done"}]}
    ops = [
        {"op": {"type": "user_turn", "items": [{"type": "text", "text": "look around"}]}},
        {"wait_for": {"type": "turn_complete"}},
    ]
    (tmp_path / "ops.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    with trio.fail_after(GUARD_S):
        async with testing.open_mock_server(script) as server:
            (tmp_path / "relay.toml").write_text(
                'model = "gpt-test"\nmodel_provider = "mock"\n[model_providers.mock]\n'
                f'base_url = "{server.base_url}"\nenv_key = "{KEY_ENV}"\n[tools]\nshell = true\n'
                "[features]\nwork_state = true\n"
            )
            # The wrapper runs relay and then one more command, so it stays relay's parent.
            run = f"{sys.executable} -m relay run ops.jsonl --config relay.toml"
            result = await trio.run_process(
                ["sh", "-c", f"{run} --rollout-dir sessions; exit $?"],
                cwd=tmp_path,
                env={**os.environ, KEY_ENV: ODD_KEY},
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            requests = list(server.requests)
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode()
    check_scan(out)
    assert len(requests) == 2
    rollouts = "".join(
        p.read_text(encoding="utf-8") for p in (tmp_path / "sessions").rglob("*.jsonl")
    )
    places = {
        "events": out,
        "stderr": result.stderr.decode(),
        "rollout": rollouts,
        "next request": json.dumps(requests[1]),
    }
    assert [place for place, text in places.items() if leaks(text, ODD_KEY)] == []
