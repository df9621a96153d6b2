"""Bad input, fuzzed: op scripts, configurations, model outputs and rollouts.

Each kind of input is generated at random (hypothesis) and pushed through the code that reads
it, and through a session where that applies. Whatever comes in, relay either takes it or
reports a clear error that names what was wrong (the line, the key, the field); it never
crashes, never reports ``error{internal}`` (a task that raised), and the session keeps its
invariants and keeps working. A handful of examples also go through the command line, which
must exit with its documented code and never print a traceback.

Example counts: the counts below, scaled by the Hypothesis profile
(``tests/hypothesis_profiles.py``).
"""

from __future__ import annotations

import json
import os
import random
import re
import string
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import hypothesis.strategies as st
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, example, given, settings

import relay
from relay import testing
from relay._base._config import config_from_dict, load_config
from relay._base._errors import ModelError, ScriptError
from relay._base._model import Completed, OutputItemDone, OutputTextDelta, Prompt
from relay._base._tokens import ApproxEstimator
from relay._drive._op_script import parse_op_script
from relay._drive._runner import ScriptRunner
from relay._models._responses import ResponseStreamParser
from relay._rollout._reader import parse_rollout
from relay._rollout._resume import reconstruct
from tests.hypothesis_profiles import examples as scaled
from tests.invariants import check_event_invariants
from tests.reliability._checks import check_rollout_matches


def fuzz(examples: int) -> Any:
    """Hypothesis settings for a fuzz test of ``examples`` examples (scaled)."""
    return settings(
        max_examples=scaled(examples),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


#: Characters ``str.splitlines`` breaks on: a raw op-script line must not hold them.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"

json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def no_internal_errors(events: list[relay.Event]) -> None:
    internal = [
        e.msg for e in events if isinstance(e.msg, relay.ErrorEvent) and e.msg.code == "internal"
    ]
    assert not internal, internal


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory and rollout root shared by the examples of this module."""
    root = tmp_path_factory.mktemp("fuzz")
    (root / "work").mkdir()
    (root / "work" / "notes.txt").write_text("notes\n")
    return root


# ============================================================================ op scripts

TEXT = st.one_of(st.text(max_size=40), st.just("x" * 200_000))

good_ops = st.one_of(
    st.builds(
        lambda text, on_busy: {
            "type": "user_turn",
            "items": [{"type": "text", "text": text}],
            "on_busy": on_busy,
        },
        TEXT,
        st.sampled_from(["steer", "replace", "queue"]),
    ),
    st.builds(lambda text: {"type": "user_input", "items": [{"type": "text", "text": text}]}, TEXT),
    st.just({"type": "interrupt"}),
    st.just({"type": "compact", "instructions": "short"}),
    st.builds(lambda model: {"type": "override_turn_context", "model": model}, st.text(max_size=9)),
)

bad_ops = st.one_of(
    st.builds(lambda t: {"type": t}, st.text(max_size=20)),
    st.builds(lambda items: {"type": "user_turn", "items": items}, json_values),
    st.builds(
        lambda text: {"type": "user_turn", "items": [{"type": "text", "text": text}]},
        json_values.filter(lambda v: not isinstance(v, str)),
    ),
    st.builds(
        lambda on_busy: {"type": "user_turn", "items": [], "on_busy": on_busy},
        st.text(max_size=8).filter(lambda v: v not in {"steer", "replace", "queue"}),
    ),
    st.builds(lambda v: {"type": "override_turn_context", "cwd": v}, st.integers()),
    json_values.filter(lambda v: not isinstance(v, dict)),
    st.builds(
        lambda d: {"type": "compact", **d}, st.dictionaries(st.text(max_size=5), json_values)
    ),
)

raw_text = st.text(max_size=60).map(lambda t: "".join(c for c in t if c not in LINE_BREAKS))


def op_line(op: Any, ident: Any = None) -> str:
    line: dict[str, Any] = {"op": op}
    if ident is not None:
        line["id"] = ident
    return json.dumps(line)


script_lines = st.one_of(
    good_ops.map(op_line),
    good_ops.map(op_line),
    bad_ops.map(op_line),
    bad_ops.map(op_line),
    st.builds(op_line, good_ops, json_values.filter(lambda v: not isinstance(v, str) or not v)),
    raw_text.map(lambda t: "{" + t),
    raw_text,
    json_values.map(json.dumps),
    st.integers(0, 50).map(lambda ms: json.dumps({"sleep_ms": ms})),
    st.just(json.dumps({"op": {"type": "shutdown"}})),
    st.just("# a comment"),
    st.just(""),
    st.builds(lambda v: json.dumps({"wait_for": v}), json_values),
    st.builds(lambda v: json.dumps({"sleep_ms": v}), json_values),
)


@fuzz(150)
@given(lines=st.lists(script_lines, min_size=1, max_size=8))
def test_fuzzed_op_scripts_are_refused_line_by_line_or_run(scratch: Path, lines: list[str]) -> None:
    text = "\n".join(lines)
    try:
        steps = parse_op_script(text, "fuzz")
    except ScriptError as exc:
        # A script is refused whole; every problem names a line that holds something.
        for problem in str(exc).splitlines():
            found = re.match(r"fuzz line (\d+): ", problem)
            assert found, problem
            line = lines[int(found[1]) - 1].strip()
            assert line and not line.startswith("#"), problem
        return
    config = relay.Config(
        cwd=str(scratch / "work"),
        rollout=relay.RolloutConfig(enabled=True, dir=str(scratch / "sessions")),
    )
    events: list[relay.Event] = []

    async def main() -> None:
        async with relay.open_session(
            config,
            model=testing.ScriptedModel(None),
            clock=testing.fixed_clock,
            rng=random.Random(0),
            estimator=ApproxEstimator(),
        ) as session:
            runner = ScriptRunner(
                session, lambda event, _: events.append(event), script_name="fuzz"
            )
            await runner.run(steps)
        assert session.rollout is not None
        check_rollout_matches(session, session.rollout.path)
        session.rollout.path.unlink()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    check_event_invariants(events, finished=True)
    no_internal_errors(events)
    assert not [e for e in events if isinstance(e.msg, relay.ErrorEvent)]


async def test_a_lone_surrogate_in_an_op_is_an_invalid_op(
    autojump_clock: trio.testing.MockClock,
) -> None:
    op = json.loads('{"type": "user_turn", "items": [{"type": "text", "text": "a \\ud800 b"}]}')
    async with testing.open_test_session() as t:
        t.session.submit_json_nowait(op, origin="script line 1")
        await t.session.wait_idle()
        await t.turn("still working?")
        await t.wait_for(relay.TurnComplete)
        await t.session.wait_idle()
    no_internal_errors(t.recorder.events)
    errors = t.recorder.of_type(relay.ErrorEvent)
    assert [e.code for e in errors] == ["invalid_op"]
    assert errors[0].message.startswith("script line 1: invalid op:")


# ============================================================================ the command line


def run_relay(
    *args: str, cwd: Path, stdin: bytes = b"", env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "relay", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


@attrs.frozen
class CliCase:
    name: str
    args: tuple[str, ...]
    files: Mapping[str, bytes]
    status: int
    stdout_has: str = ""
    stderr_has: str = ""
    stdin: bytes = b""


GARBAGE_ROLLOUT = b'\x00\xff garbage\n{"type": 5}\n[1, 2]\n{"timestamp": "x", "type": "comp'
CLI_CASES = (
    CliCase(
        "invalid JSON, unknown op, wrong types",
        ("run", "script.jsonl"),
        {
            "script.jsonl": b'{"op": {\n{"op": {"type": "launch"}}\n'
            b'{"op": {"type": "user_turn", "items": 5}}\n'
            b'{"op": {"type": "user_turn", "items": [{"type": "text", "text": "hi"}]}}\n'
        },
        2,
        stderr_has="relay: script.jsonl line 3: invalid op:",
    ),
    CliCase(
        "huge line",
        ("run", "script.jsonl"),
        {
            "script.jsonl": json.dumps(
                {"op": {"type": "user_turn", "items": [{"type": "text", "text": "y" * 2**20}]}}
            ).encode()
        },
        0,
        stdout_has='"type":"turn_complete"',
    ),
    CliCase(
        "malformed wait_for",
        ("run", "script.jsonl"),
        {"script.jsonl": b'{"wait_for": {"count": 2}}\n'},
        2,
        stderr_has="relay: script.jsonl line 1: wait_for needs an object with a 'type' string",
    ),
    CliCase(
        "script file not UTF-8",
        ("run", "script.jsonl"),
        {"script.jsonl": b'{"op": {"type": "interrupt"}}\n\xff\xfe\n'},
        2,
        stderr_has="is not UTF-8",
    ),
    CliCase(
        "unknown config key",
        ("run", "-c", "modle=gpt-5", "-"),
        {},
        2,
        stderr_has="unknown config key 'modle'",
    ),
    CliCase(
        "config value of the wrong type",
        ("run", "--config", "relay.toml", "-"),
        {"relay.toml": b'model_context_window = "large"\n'},
        2,
        stderr_has="model_context_window",
    ),
    CliCase(
        "config file not TOML",
        ("run", "--config", "relay.toml", "-"),
        {"relay.toml": b"model = [unclosed\n"},
        2,
        stderr_has="invalid TOML in config file",
    ),
    CliCase(
        "rollout of garbage shown",
        ("show", "rollout.jsonl"),
        {"rollout.jsonl": GARBAGE_ROLLOUT},
        0,
        stderr_has="line 2: ",
    ),
    CliCase(
        "rollout of garbage resumed",
        ("resume", "rollout.jsonl", "-"),
        {"rollout.jsonl": GARBAGE_ROLLOUT},
        2,
        stderr_has="cannot resume",
    ),
)


@pytest.mark.parametrize("case", CLI_CASES, ids=[case.name for case in CLI_CASES])
def test_the_cli_reports_bad_input_without_a_traceback(case: CliCase, tmp_path: Path) -> None:
    for name, data in case.files.items():
        (tmp_path / name).write_bytes(data)
    args = list(case.args)
    if args[0] in {"run", "resume"}:
        args += ["--rollout-dir", str(tmp_path / "sessions")]
    result = run_relay(*args, cwd=tmp_path)
    stdout = result.stdout.decode("utf-8", "replace")
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == case.status, stderr
    assert "Traceback" not in stderr
    assert case.stdout_has in stdout
    assert case.stderr_has in stderr, stderr


def test_an_op_script_on_stdin_that_is_not_utf8_exits_2(tmp_path: Path) -> None:
    script = b'{"op": {"type": "user_turn", "items": [{"type": "text", "text": "\xff\xfe"}]}}\n'
    result = run_relay("run", "-", "--rollout-dir", str(tmp_path), cwd=tmp_path, stdin=script)
    stderr = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr
    assert result.returncode == 2
    assert "not UTF-8" in stderr


def test_an_op_line_with_a_lone_surrogate_refuses_the_script(tmp_path: Path) -> None:
    script = b'{"op": {"type": "user_turn", "items": [{"type": "text", "text": "\\ud800"}]}}\n'
    result = run_relay("run", "-", "--rollout-dir", str(tmp_path), cwd=tmp_path, stdin=script)
    stderr = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr
    assert result.returncode == 2
    assert stderr.startswith("relay: stdin line 1: ") and "lone surrogate" in stderr
    assert result.stdout == b""


# ============================================================================ configurations

CONFIG_KEYS = (
    "model",
    "model_provider",
    "model_context_window",
    "model_auto_compact_token_limit",
    "compact_prompt",
    "developer_instructions",
    "project_doc",
    "features",
    "model_providers",
    "hooks",
    "tools",
)

provider_tables = st.dictionaries(
    st.sampled_from(
        [
            "base_url",
            "env_key",
            "wire_api",
            "remote_compaction",
            "stream_max_retries",
            "request_max_retries",
            "stream_idle_timeout_ms",
            "http_headers",
            "query_params",
            "bogus",
        ]
    ),
    st.one_of(json_values, st.integers(-5, 5), st.sampled_from(["responses", "chat", "v1"])),
    max_size=4,
)

config_values = {
    "model": st.one_of(st.text(max_size=10), json_values),
    "model_provider": st.sampled_from(["scripted", "scripted", "nope", "mine"]),
    "model_context_window": st.one_of(st.integers(-10, 10**6), json_values),
    "model_auto_compact_token_limit": st.one_of(st.integers(-10, 10**6), json_values),
    "compact_prompt": st.one_of(st.text(max_size=20), json_values),
    "developer_instructions": st.one_of(st.text(max_size=20), json_values),
    "project_doc": st.one_of(st.text(string.ascii_letters, max_size=8), json_values),
    "features": st.one_of(
        st.dictionaries(
            st.sampled_from(["token_budget", "remote_compaction_v2", "turbo"]),
            st.one_of(st.booleans(), json_values),
            max_size=2,
        ),
        json_values,
    ),
    "model_providers": st.one_of(
        st.dictionaries(st.sampled_from(["mine", "scripted"]), provider_tables, max_size=2),
        json_values,
    ),
    "hooks": st.one_of(
        st.dictionaries(
            st.sampled_from(["pre_compact", "post_compact", "mid_compact"]),
            st.lists(
                st.dictionaries(
                    st.sampled_from(["command", "timeout_ms", "shell"]),
                    st.one_of(st.lists(st.text(max_size=5), max_size=2), json_values),
                    max_size=2,
                ),
                max_size=2,
            ),
            max_size=2,
        ),
        json_values,
    ),
    "tools": st.one_of(
        st.dictionaries(
            st.sampled_from(["shell", "sleep", "rm_rf"]), st.one_of(st.booleans(), json_values)
        ),
        json_values,
    ),
}

configs = st.one_of(
    st.fixed_dictionaries({}, optional={key: config_values[key] for key in CONFIG_KEYS}),
    st.dictionaries(st.text(max_size=10), json_values, max_size=3),
)


@pytest.mark.slow
@fuzz(400)
@given(data=configs)
def test_fuzzed_configs_load_or_name_what_is_wrong(data: dict[str, Any]) -> None:
    try:
        config = config_from_dict(data)
    except relay.ConfigError as exc:
        message = str(exc)
        # Keys are named as they are, or escaped as Python's repr escapes them.
        assert any(k in message or repr(k)[1:-1] in message for k in map(str, data)), message
        return
    assert isinstance(config, relay.Config)
    for limit in (config.model_context_window, config.model_auto_compact_token_limit):
        assert limit is None or limit > 0, "non-positive limits read as unset"


@fuzz(60)
@given(data=configs)
def test_fuzzed_configs_open_a_working_session_or_fail_clearly(
    scratch: Path, data: dict[str, Any]
) -> None:
    try:
        config = config_from_dict(data)
    except relay.ConfigError:
        return
    # Hook commands of random argv are not run: every hook runs ``true`` with its timeout.
    harmless = relay.Hooks(
        pre_compact=[attrs.evolve(h, command=["true"]) for h in config.hooks.pre_compact],
        post_compact=[attrs.evolve(h, command=["true"]) for h in config.hooks.post_compact],
    )
    config = attrs.evolve(
        config,
        cwd=str(scratch / "work"),
        hooks=harmless,
        rollout=relay.RolloutConfig(enabled=False),
    )
    try:
        provider = config.provider()
    except relay.ConfigError as exc:
        assert repr(config.model_provider) in str(exc)
        return
    if provider.base_url is not None:
        return  # a network provider; covered over loopback elsewhere
    events: list[relay.Event] = []

    async def main() -> None:
        recorder = testing.EventRecorder()
        try:
            async with (
                relay.open_session(
                    config, clock=testing.fixed_clock, estimator=ApproxEstimator()
                ) as session,
                testing.recording(session) as recorder,
            ):
                await session.submit(relay.UserTurn(items=[relay.Text("hello")]))
                await session.submit(relay.Compact(), id="compact")
                await session.submit(relay.UserTurn(items=[relay.Text("again")]))
                await session.wait_idle()
                await session.submit(relay.Shutdown())
        except relay.ConfigError as exc:
            assert "tools." in str(exc), str(exc)
            return
        events.extend(recorder.events)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    if events:
        check_event_invariants(events, finished=True)
        no_internal_errors(events)


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"model_providers": {"mine": {"stream_max_retries": -1}}}, "stream_max_retries"),
        ({"model_providers": {"mine": {"request_max_retries": -2}}}, "request_max_retries"),
        ({"model_providers": {"mine": {"stream_idle_timeout_ms": 0}}}, "stream_idle_timeout_ms"),
        (
            {"model_providers": {"mine": {"stream_idle_timeout_ms": -300}}},
            "stream_idle_timeout_ms",
        ),
        ({"model_providers": {"mine": {"stream_max_duration_ms": 0}}}, "stream_max_duration_ms"),
        ({"hooks": {"pre_compact": [{"command": ["true"], "timeout_ms": -1}]}}, "timeout_ms"),
    ],
    ids=[
        "stream_max_retries",
        "request_max_retries",
        "idle_zero",
        "idle_negative",
        "max_duration_zero",
        "hook",
    ],
)
def test_negative_limits_are_configuration_errors_naming_the_key(
    data: dict[str, Any], key: str
) -> None:
    with pytest.raises(relay.ConfigError, match=key):
        config_from_dict(data)


async def test_an_unreadable_compact_prompt_file_is_a_configuration_error(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    config = relay.Config(
        experimental_compact_prompt_file=str(tmp_path / "missing.md"),
        rollout=relay.RolloutConfig(enabled=False),
    )
    with pytest.raises(relay.ConfigError, match="experimental_compact_prompt_file"):
        async with testing.open_test_session(config=config) as t:
            await t.submit(relay.Compact())
            await t.session.wait_idle()


def test_a_config_file_of_random_bytes_is_a_configuration_error(tmp_path: Path) -> None:
    rng = random.Random(7)
    for index in range(50):
        path = tmp_path / f"config-{index}.toml"
        path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80))))
        try:
            load_config(path)
        except relay.ConfigError as exc:
            assert (
                str(path) in str(exc) or "config key" in str(exc) or "invalid config" in str(exc)
            ), str(exc)


# ============================================================================ model outputs

ITEM_TYPES = (
    "message",
    "function_call",
    "function_call_output",
    "reasoning",
    "compaction",
    "custom_tool_call",
    "ghost_snapshot",
    "mystery",
)
ITEM_FIELDS = (
    "role",
    "content",
    "name",
    "arguments",
    "call_id",
    "output",
    "summary",
    "id",
    "encrypted_content",
    "input",
    "text",
)

items = st.one_of(
    st.builds(
        lambda kind, fields: {"type": kind, **fields},
        st.sampled_from(ITEM_TYPES),
        st.dictionaries(st.sampled_from(ITEM_FIELDS), json_values, max_size=4),
    ),
    st.builds(
        lambda content: {"type": "message", "role": "assistant", "content": content},
        st.lists(
            st.dictionaries(st.sampled_from(["type", "text"]), json_values, max_size=2),
            max_size=2,
        ),
    ),
    json_values,
)
EVENT_TYPES = (
    "response.created",
    "response.output_text.delta",
    "response.output_item.done",
    "response.completed",
    "response.failed",
    "response.incomplete",
    "error",
    "response.output_item.added",
    "response.mystery",
)
stream_events = st.one_of(
    st.builds(lambda item: {"type": "response.output_item.done", "item": item}, items),
    st.builds(
        lambda kind, fields: {"type": kind, **fields},
        st.sampled_from(EVENT_TYPES),
        st.dictionaries(
            st.sampled_from(["delta", "item_id", "response", "error", "code", "message"]),
            json_values,
            max_size=3,
        ),
    ),
    st.dictionaries(st.text(max_size=6), json_values, max_size=3),
)


@pytest.mark.slow
@fuzz(500)
@given(events=st.lists(stream_events, max_size=6))
def test_fuzzed_stream_events_parse_or_raise_a_model_error(events: list[dict[str, Any]]) -> None:
    parser = ResponseStreamParser()
    try:
        for event in events:
            for model_event in parser.feed(event):
                assert isinstance(model_event, OutputTextDelta | OutputItemDone | Completed)
        parser.finish()
    except ModelError as exc:
        assert exc.message.strip(), "a model error must say what was wrong"


class RawStreamModel:
    """A model client that plays raw stream events, as a server's JSON frames, through the
    stream parser the HTTP wire uses; an ordinary answer once they run out."""

    def __init__(self, answers: list[list[dict[str, Any]]]) -> None:
        self.answers = list(answers)

    @asynccontextmanager
    async def stream(self, prompt: Prompt) -> AsyncIterator[AsyncIterator[Any]]:
        del prompt
        events = self.answers.pop(0) if self.answers else ORDINARY

        async def play() -> AsyncIterator[Any]:
            parser = ResponseStreamParser()
            for event in events:
                await trio.sleep(0.001)
                for model_event in parser.feed(event):
                    yield model_event
                if parser.completed:
                    break  # as the HTTP wire does: nothing after the end is read
            parser.finish()

        yield play()

    async def compact(self, request: Any) -> Any:
        del request
        return {"output": []}


ORDINARY = [
    {
        "type": "response.output_item.done",
        "item": {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "ordinary"}],
        },
    },
    {"type": "response.completed", "response": {"id": "r-ok"}},
]


@pytest.mark.slow
@fuzz(120)
# A float that JSON cannot hold (``inf``) in a model's output item: it used to be written to the
# rollout as ``Infinity``, which the reader then dropped as invalid JSON.
@example(
    answers=[
        [
            {"type": "response.output_item.done", "item": {"type": "mystery", "x": float("inf")}},
            {"type": "response.completed", "response": {"id": "r"}},
        ]
    ]
)
@given(
    answers=st.lists(
        st.lists(stream_events, max_size=5).map(
            lambda events: [*events, {"type": "response.completed", "response": {"id": "r"}}]
        ),
        min_size=1,
        max_size=3,
    )
)
def test_fuzzed_model_outputs_never_break_a_session(
    scratch: Path, answers: list[list[dict[str, Any]]]
) -> None:
    config = relay.Config(
        cwd=str(scratch / "work"),
        model_providers={"scripted": relay.ProviderConfig(name="scripted", stream_max_retries=1)},
        rollout=relay.RolloutConfig(enabled=True, dir=str(scratch / "sessions")),
    )
    recorder = testing.EventRecorder()

    async def main() -> None:
        async with (
            relay.open_session(
                config,
                model=RawStreamModel(answers),
                clock=testing.fixed_clock,
                rng=random.Random(0),
                estimator=ApproxEstimator(),
            ) as session,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(recorder.consume, session)
            for text in ("first", "second", "third"):
                await session.submit(relay.UserTurn(items=[relay.Text(text)]))
                await session.wait_idle()
            await session.submit(relay.Compact())
            await session.wait_idle()
            await session.submit(relay.UserTurn(items=[relay.Text("last")]))
            await session.wait_idle()
            await session.submit(relay.Shutdown())
        assert session.rollout is not None
        check_rollout_matches(session, session.rollout.path)
        session.rollout.path.unlink()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    events = recorder.events
    check_event_invariants(events, finished=True)
    no_internal_errors(events)
    completes = [e.msg for e in events if isinstance(e.msg, relay.TurnComplete)]
    assert len(completes) == 5
    # Once the fuzzed answers are used up, turns get their answer again.
    assert completes[-1].last_agent_message == "ordinary"
    for event in events:
        if isinstance(event.msg, relay.ErrorEvent):
            assert event.msg.message.strip()


async def test_a_lone_surrogate_in_model_output_is_carried_as_a_replacement(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # docs/decisions.md, "Text that UTF-8 cannot carry": a model's text is mended, not refused.
    bad = json.loads(
        '{"type": "response.output_item.done", "item": {"type": "message", "role": '
        '"assistant", "content": [{"type": "output_text", "text": "bad \\ud800"}]}}'
    )
    model = RawStreamModel([[bad, {"type": "response.completed", "response": {"id": "r"}}]])
    async with testing.open_test_session(model=model) as t:
        await t.turn("hello")
        await t.wait_for(relay.TurnComplete)
    no_internal_errors(t.recorder.events)
    assert not t.recorder.of_type(relay.StreamErrorEvent)
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "bad \ufffd"


# ============================================================================ rollouts


@pytest.fixture(scope="module")
def sample_rollout(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real rollout: turns, a tool call, an interrupt and a compaction."""
    root = tmp_path_factory.mktemp("sample")
    script = {
        "responses": [
            {"text": "hello"},
            {"function_call": {"name": "sleep", "arguments": {"seconds": 0}, "call_id": "c1"}},
            {"text": "slept"},
            {"function_call": {"name": "sleep", "arguments": {"seconds": 60}, "call_id": "c2"}},
        ]
    }
    config = relay.Config(cwd=str(root), rollout=relay.RolloutConfig(enabled=True, dir=str(root)))

    async def main() -> Path:
        async with relay.open_session(
            config,
            model=testing.ScriptedModel(script),
            clock=testing.fixed_clock,
            estimator=ApproxEstimator(),
        ) as session:
            for text in ("one", "two"):
                await session.submit(relay.UserTurn(items=[relay.Text(text)]))
                await session.wait_idle()
            await session.submit(relay.UserTurn(items=[relay.Text("three")]))
            await trio.sleep(1)
            await session.submit(relay.Interrupt())
            await session.submit(relay.Compact())
            await session.wait_idle()
            await session.submit(relay.UserTurn(items=[relay.Text("four")]))
            await session.wait_idle()
            assert session.rollout is not None
            return session.rollout.path

    path = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return path.read_bytes()


@fuzz(300)
@given(data=st.binary(max_size=300))
def test_rollouts_of_random_bytes_are_read_with_notes(data: bytes) -> None:
    rollout = parse_rollout(data)
    lines = data.split(b"\n")
    for note in rollout.notes:
        assert 1 <= note.line <= len(lines)
        assert str(note).startswith(f"line {note.line}: ")
    try:
        reconstruct(rollout)
    except relay.RolloutError as exc:
        assert "session_meta" in str(exc)


@pytest.mark.slow  # 300 resumes of a damaged rollout: about 2 s of CPU
@fuzz(300)
@given(data=st.data())
def test_truncated_and_corrupted_rollouts_resume_from_what_is_intact(
    sample_rollout: bytes, data: st.DataObject
) -> None:
    lines = sample_rollout.split(b"\n")[:-1]
    cut = data.draw(st.integers(len(lines[0]) + 1, len(sample_rollout)), label="cut")
    truncated = sample_rollout[:cut]
    rollout = parse_rollout(truncated)
    whole = truncated.count(b"\n")
    partial = not truncated.endswith(b"\n")
    # Only a line cut short may be missing; nothing else is noted.
    assert all(note.truncated and note.line == whole + 1 for note in rollout.notes), [
        str(n) for n in rollout.notes
    ]
    # The state is that of the complete lines: a line cut short counts only if it was whole.
    kept = whole + 1 if partial and not rollout.notes else whole
    intact = reconstruct(parse_rollout(b"\n".join(lines[:kept]) + b"\n"))
    assert reconstruct(rollout) == intact
    # A garbage line anywhere after the first is skipped and named by its number.
    position = data.draw(st.integers(1, len(lines)), label="garbage at")
    garbage = data.draw(
        st.sampled_from(
            [b"{not json", b"[1, 2]", b'{"type": "x"}', b"\xff\xfe", b'{"payload": 1}']
        ),
        label="garbage",
    )
    corrupted = b"\n".join([*lines[:position], garbage, *lines[position:]]) + b"\n"
    noted = parse_rollout(corrupted)
    assert [note.line for note in noted.notes] == [position + 1], [str(n) for n in noted.notes]
    assert reconstruct(noted).history == reconstruct(parse_rollout(sample_rollout)).history
