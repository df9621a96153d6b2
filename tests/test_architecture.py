"""docs/architecture.md, checked against the code: its table of rooms is the rule the layers
test enforces, and its two paths are the relay modules whose code runs, as a profiler sees one
scripted turn and one auto-compaction."""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import relay
from relay import testing
from tests.test_layers import ALLOWED, ROOT

DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")

#: The relay modules whose code runs for one regular turn of the scripted model, from
#: ``submit`` to ``turn_complete``, with the rollout and the work-state record on (their
#: defaults; OpenTelemetry's tracing aside).
USER_TURN = frozenset(
    {
        "relay._base._codec",
        "relay._base._config",
        "relay._base._items",
        "relay._base._model",
        "relay._base._ops",
        "relay._base._protocol",
        "relay._base._rollout_lines",
        "relay._base._secret",
        "relay._base._tokens",
        "relay._core._budget",
        "relay._core._cache_watch",
        "relay._core._compaction",
        "relay._core._context",
        "relay._core._event_stream",
        "relay._core._history",
        "relay._core._input",
        "relay._core._port",
        "relay._core._recorder",
        "relay._core._sampling",
        "relay._core._session",
        "relay._core._session_writer",
        "relay._core._slot",
        "relay._core._state",
        "relay._core._support",
        "relay._core._task",
        "relay._core._tools",
        "relay._core._turn",
        "relay._core._view",
        "relay._core._wiring",
        "relay._core._work_state",
        "relay._core._writer",
        "relay._models._responses",
        "relay._models._script",
        "relay._models._scripted",
        "relay._open._parts",
        "relay.tasks._guard",
        "relay.tasks._regular",
        "relay.tasks._steps",
        "relay.tasks.compaction._auto",
        "relay.tasks.compaction._background",
        "relay.tasks.compaction._policy",
    }
)

#: The relay modules whose code runs under the task's compactor at a mid-turn compaction point
#: that compacts with the local backend (OpenTelemetry's tracing aside).
AUTO_COMPACTION = frozenset(
    {
        "relay._base._codec",
        "relay._base._config",
        "relay._base._items",
        "relay._base._model",
        "relay._base._protocol",
        "relay._base._rollout_lines",
        "relay._base._templates",
        "relay._base._tokens",
        "relay._core._budget",
        "relay._core._compaction",
        "relay._core._context",
        "relay._core._event_stream",
        "relay._core._history",
        "relay._core._hooks",
        "relay._core._port",
        "relay._core._recorder",
        "relay._core._sampling",
        "relay._core._session_writer",
        "relay._core._state",
        "relay._core._summary",
        "relay._core._support",
        "relay._core._tools",
        "relay._core._turn",
        "relay._core._view",
        "relay._core._wiring",
        "relay._core._work_state",
        "relay._core._writer",
        "relay._models._responses",
        "relay._models._script",
        "relay._models._scripted",
        "relay._open._parts",
        "relay.tasks._regular",
        "relay.tasks.compaction._auto",
        "relay.tasks.compaction._defence",
        "relay.tasks.compaction._flow",
        "relay.tasks.compaction._history",
        "relay.tasks.compaction._local",
        "relay.tasks.compaction._policy",
    }
)

#: Where spans are made of a session's events and model requests, when ``opentelemetry-api``
#: is installed (it is in the dev extras).
TRACING = frozenset({"relay._otel._model", "relay._otel._observer"})


def with_tracing(modules: frozenset[str]) -> frozenset[str]:
    traced = importlib.util.find_spec("opentelemetry") is not None
    return modules | TRACING if traced else modules


def section(title: str) -> str:
    start = DOC.index(f"### {title}\n")
    end = DOC.find("\n#", start + 4)
    return DOC[start : end if end != -1 else None]


def named_modules(text: str) -> frozenset[str]:
    """The modules of the source files a text names (``runtime/relay/_core/_slot.py``)."""
    found = set()
    for path in re.findall(r"`((?:runtime|tasks)/relay/[\w/]+\.py)`", text):
        assert (ROOT / path).is_file(), f"{path} does not exist"
        parts = list(Path(path).with_suffix("").parts[1:])
        if parts[-1] == "__init__":
            parts.pop()
        found.add(".".join(parts))
    return frozenset(found)


Profiler = Callable[[FrameType, str, Any], None]


def recording(seen: set[str], where: Callable[[FrameType], bool]) -> Profiler:
    """A profiler that adds to ``seen`` the module of each relay function called where
    ``where`` says (a module's own code, run when it is first imported, is not a call)."""

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code.co_name == "<module>":
            return
        name = frame.f_globals.get("__name__", "")
        if (name == "relay" or name.startswith("relay.")) and where(frame):
            seen.add(name)

    return profile


def forget_caches() -> None:
    """Empty every ``functools`` cache of relay's modules: a path is what runs in a process
    that has not run it before, whatever the tests before this one ran."""
    for name, module in list(sys.modules.items()):
        if name == "relay" or name.startswith("relay."):
            for value in list(vars(module).values()):
                if isinstance(value, functools._lru_cache_wrapper):
                    value.cache_clear()


async def profiled_turn(
    tmp_path: Path, responses: list[Any], where: Callable[[FrameType], bool], **fields: Any
) -> frozenset[str]:
    """The relay modules whose code ran (where ``where`` says) from the submission of one user
    turn to its ``turn_complete``, in an open session of the scripted model."""
    seen: set[str] = set()
    config = relay.Config(rollout=relay.RolloutConfig(dir=str(tmp_path)), **fields)
    model = testing.ScriptedModel({"responses": responses})
    async with relay.open_session(config, model=model) as session:
        events = session.events()
        async for event in events:
            if isinstance(event.msg, relay.SessionConfigured):
                break
        forget_caches()
        sys.setprofile(recording(seen, where))
        try:
            await session.submit(relay.UserTurn(items=[relay.Text("hi")]))
            async for event in events:
                if isinstance(event.msg, relay.TurnComplete):
                    break
        finally:
            sys.setprofile(None)
    return frozenset(seen)


def under_mid_turn_compaction(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs under the compactor's handling of a mid-turn point."""
    while frame is not None:
        if (
            frame.f_code.co_qualname == "Compactor.compact"
            and frame.f_globals.get("__name__") == "relay.tasks.compaction._auto"
        ):
            request = frame.f_locals.get("request")
            return getattr(request, "trigger", None) is relay.CompactionTrigger.MID_TURN
        frame = frame.f_back
    return False


def test_the_table_of_rooms_is_the_rule_the_layers_test_enforces() -> None:
    rows = re.findall(r"^\| `(relay[\w.]*)` \| [^|]+ \| ([^|]+) \|$", DOC, re.M)
    table = {room: tuple(re.findall(r"`([\w.]+)`", allowed)) for room, allowed in rows}
    rule = {room: allowed for room, allowed in ALLOWED.items() if room != "relay._version"}
    assert {room: set(allowed) for room, allowed in table.items()} == {
        room: set(allowed) for room, allowed in rule.items()
    }


async def test_a_user_turn_runs_the_modules_the_doc_names(tmp_path: Path) -> None:
    ran = await profiled_turn(tmp_path, ["Hello."], lambda frame: True)
    assert ran == with_tracing(USER_TURN)
    assert named_modules(section("A UserTurn")) == USER_TURN


async def test_an_auto_compaction_runs_the_modules_the_doc_names(tmp_path: Path) -> None:
    # Usage over the limit after a tool step: the mid-turn point compacts (local backend).
    call = {"function_call": {"name": "sleep", "arguments": {"seconds": 0}, "call_id": "c1"}}
    ran = await profiled_turn(
        tmp_path,
        [{**call, "total_tokens": 5000}, "SUMMARY", "Hello."],
        under_mid_turn_compaction,
        model_auto_compact_token_limit=1000,
    )
    assert ran == with_tracing(AUTO_COMPACTION)
    assert named_modules(section("An auto-compaction")) == AUTO_COMPACTION


def test_the_doc_names_the_tracing_on_both_paths() -> None:
    start = DOC.index("## Two paths, file by file\n")
    assert named_modules(DOC[start : DOC.index("### A UserTurn", start)]) == TRACING


async def test_a_module_that_joins_the_path_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay._cli import _pretty
    from relay.tasks import RegularTurn

    step = RegularTurn.run

    async def run(self: RegularTurn, ctx: relay.TaskContext) -> str | None:
        _pretty.tool_output_summary("one more module on the way")
        return await step(self, ctx)

    monkeypatch.setattr(RegularTurn, "run", run)
    ran = await profiled_turn(tmp_path, ["Hello."], lambda frame: True)
    assert ran - with_tracing(USER_TURN) == {"relay._cli._pretty"}
