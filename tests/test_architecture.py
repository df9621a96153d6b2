"""docs/architecture.md, checked against the code: its table of rooms is the rule the layers
test enforces, it names every module of the core and of ``_exec``, and its two paths are the
relay modules whose code runs, as a profiler sees one scripted turn and one auto-compaction.
With them, the shape of the one gate (docs/approvals.md): few core modules know of approvals
or the sandbox, one writer of the grants, no regex over a tool's output in the core."""

from __future__ import annotations

import ast
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
RUNTIME = ROOT / "runtime" / "relay"
CORE = RUNTIME / "_core"

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
        "relay._base._unicode",
        "relay._core._budget",
        "relay._core._cache_watch",
        "relay._core._compaction",
        "relay._core._context",
        "relay._core._event_stream",
        "relay._core._exec_gate",
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
        "relay.tasks.compaction._summary_check",
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
        "relay._base._unicode",
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
        "relay.tasks.compaction._summary_check",
    }
)

#: Where spans are made of a session's events and model requests, when ``opentelemetry-api``
#: is installed (it is in the dev extras).
TRACING = frozenset({"relay._otel._model", "relay._otel._observer"})


def with_tracing(modules: frozenset[str]) -> frozenset[str]:
    traced = importlib.util.find_spec("opentelemetry") is not None
    return modules | TRACING if traced else modules


def section(title: str, level: str = "###") -> str:
    start = DOC.index(f"{level} {title}\n")
    end = DOC.find("\n#", start + len(level) + 1)
    return DOC[start : end if end != -1 else None]


def room_modules(folder: Path) -> frozenset[str]:
    """The file names of a room's modules (``_slot.py``), its ``__init__`` aside."""
    return frozenset(path.name for path in folder.glob("*.py") if path.name != "__init__.py")


def named_files(text: str, room: str) -> frozenset[str]:
    """The file names of ``room`` a text names (```_core/_slot.py```)."""
    return frozenset(re.findall(rf"`{room}/(_\w+\.py)`", text))


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


def test_the_doc_names_every_module_of_the_core() -> None:
    assert named_files(section("The core", "##"), "_core") == room_modules(CORE)


def test_the_doc_names_every_module_of_exec() -> None:
    assert named_files(section("Running commands: `_exec`", "##"), "_exec") == room_modules(
        RUNTIME / "_exec"
    )


def test_at_most_five_core_modules_know_of_approvals_or_the_sandbox() -> None:
    """The gate (``_exec_gate``) is where the core meets approvals and the sandbox; the few
    others name them only to carry the gate's values: the session's grants (``_state``, and
    ``_session_writer``, their writer), the ``approval`` lines (``_recorder``), the
    ``exec_approval`` op (``_session``), whether a tool needs an approval (``_tools``)."""
    knowing = sorted(
        path.name
        for path in CORE.glob("*.py")
        if re.search(r"approv|sandbox", path.read_text(encoding="utf-8"), re.IGNORECASE)
    )
    assert "_exec_gate.py" in knowing
    assert len(knowing) <= 5, knowing


def _imports_re(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(
            alias.name in ("re", "fnmatch", "re2") for alias in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom) and (
            node.module in ("re", "fnmatch", "re2") or (node.module or "").endswith("_ecma_regex")
        ):
            return True
    return False


def test_the_core_modules_that_handle_a_tool_call_apply_no_regex() -> None:
    """The gate, the tools and the port, where a tool call and its output pass through the
    core, import no regular-expression engine: a refusal of the sandbox comes to the gate as a
    value (``CommandOutput.refused``), never as text the core reads back."""
    handling = ["_exec_gate.py", "_tools.py", "_port.py"]
    assert [name for name in handling if _imports_re(CORE / name)] == []


def test_no_core_module_applies_a_regex_to_a_tool_output() -> None:
    """The one core module with a regular expression is the rollout writer
    (``_writer.py``), which reads the epoch of relay's own last line back, never a tool's
    output."""
    assert sorted(path.name for path in CORE.glob("*.py") if _imports_re(path)) == ["_writer.py"]


def test_the_grants_have_one_writer() -> None:
    """Every assignment to a ``grants`` attribute in relay's code: the session writer's, which
    adds a grant when a decision makes one (``SessionWriter.decided``), and the opening of a
    session, which sets the state's grants once, before the session writer exists, to those
    its resumed rollout recorded whose seals hold (``_open/_session.py``). The resume's
    ``ResumedState(grants=...)`` (``_rollout/_resume.py``) carries the recorded lines to that
    check, not the session's grants."""
    writers: list[str] = []
    keywords: list[str] = []
    for root in (ROOT / "runtime", ROOT / "tasks"):
        for path in sorted(root.rglob("*.py")):
            where = str(path.relative_to(ROOT))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                targets: list[ast.expr] = []
                if isinstance(node, ast.Assign):
                    targets = list(node.targets)
                elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                    targets = [node.target]
                elif isinstance(node, ast.Call):
                    keywords += [where for kw in node.keywords if kw.arg == "grants"]
                    if (
                        isinstance(node.func, ast.Name)
                        and node.func.id == "setattr"
                        and len(node.args) > 1
                        and isinstance(node.args[1], ast.Constant)
                        and node.args[1].value == "grants"
                    ):
                        writers.append(where)
                writers += [
                    where
                    for target in targets
                    if isinstance(target, ast.Attribute) and target.attr == "grants"
                ]
    assert sorted(writers) == [
        "runtime/relay/_core/_session_writer.py",
        "runtime/relay/_open/_session.py",
    ]
    assert keywords == ["runtime/relay/_rollout/_resume.py"]
    opening = (RUNTIME / "_open" / "_session.py").read_text(encoding="utf-8")
    assert opening.count("state.grants = ") == 1
    assert "grants, ignored = gate.kept(" in opening


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
