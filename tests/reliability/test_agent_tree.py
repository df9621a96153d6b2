"""The cancellation tree of sub-agents under random interrupts, closes, failures, replacing
turns, shutdowns and crashes, read at a real loopback model server (docs/agents.md).

Each example draws a tree of scripted agents (depth up to 4, up to 6 children each, at most
a dozen agents): each agent spawns its children, may call tools, may wait for them, and
answers slowly, streaming; some fail (their model refuses them). The root runs on relay's mock
server over a real socket, through the openai SDK; every request is logged by the server with
its agent path (the ``x-relay-agent`` header), its session (``prompt_cache_key``) and the time
it was received. While the tree works, the example interrupts agents at any level, closes
some, replaces the root's turn, takes crash images and resumes the root from them, and shuts
the tree down. Then, read from the server's log and the rollouts, not from relay's events:

- **an interrupt is a tree**: after an interrupt of an agent, no request of it (but the root,
  which may be given a new turn) nor of any agent below it reaches the server later than
  the grace of one session (``ABORT_GRACE``);
- **every child ends once**: each child any rollout says was spawned has exactly one
  ``sub_agent_ended`` in its parent's rollout;
- **a stop is local**: a child ends ``interrupted`` or ``shutdown`` only when it, or an agent
  above it, was interrupted, closed, replaced, shut down or crashed, and ``errored`` only
  when it, or an agent above it, failed; every other child completes, so its siblings' stops
  never took its requests away;
- **nothing outlives the root**: after the root's shutdown every session of the tree is
  closed and no request reaches the server;
- a tree resumed from a crash image holds all of the above.

It runs 2,000 examples in the slow tier, scaled by the Hypothesis profile.
"""

from __future__ import annotations

import collections
import itertools
import json
import math
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
import hypothesis.strategies as st
import pytest
import trio
from hypothesis import HealthCheck, given, settings

import relay
from relay import testing
from relay._core._slot import ABORT_GRACE
from relay._models._script import parse_model_script
from relay._testing._mock_server import MockServer
from tests.hypothesis_profiles import examples

EXAMPLES = examples(2000)
#: Slack for the server's own clock reading of a request against the test's reading of the
#: interrupt: both are ``time.time()`` in this one process; a request the client sent before
#: the interrupt is logged once its body is in.
CLOCK_SLACK = 0.02
MAX_AGENTS = 12
#: How much later than the grace an interrupted agent's end may be written: its abort waits the
#: grace for its task, then its loop and its parent's writer must run once more.
END_SLACK = 0.2


# ----------------------------------------------------------------------------- the trees


@attrs.frozen
class Plan:
    """What one agent does: spawn its children, call tools, maybe wait for them, then
    answer, streaming slowly; or fail at once."""

    children: tuple[Plan, ...] = ()
    waits: bool = True
    steps: int = 0
    fails: bool = False
    answer_ms: int = 0


def plans(depth: int) -> st.SearchStrategy[Plan]:
    leaf = st.builds(
        Plan,
        children=st.just(()),
        waits=st.just(False),
        steps=st.integers(0, 3),
        fails=st.sampled_from([False, False, True]),
        answer_ms=st.sampled_from([50, 200, 500]),
    )
    if depth == 0:
        return leaf
    return st.one_of(
        leaf,
        st.builds(
            Plan,
            children=st.lists(plans(depth - 1), min_size=1, max_size=6).map(tuple),
            waits=st.booleans(),
            steps=st.integers(0, 3),
            fails=st.just(False),
            answer_ms=st.sampled_from([50, 200, 500]),
        ),
    )


def size(plan: Plan) -> int:
    return 1 + sum(size(child) for child in plan.children)


def nodes(plan: Plan, path: str = "/root") -> Iterator[tuple[str, Plan]]:
    yield path, plan
    for number, child in enumerate(plan.children, start=1):
        yield from nodes(child, f"{path}/{number}")


trees = st.builds(
    Plan,
    children=st.lists(plans(3), min_size=1, max_size=6).map(tuple),
    waits=st.booleans(),
    steps=st.integers(0, 2),
    fails=st.just(False),
    answer_ms=st.sampled_from([50, 200]),
).filter(lambda plan: size(plan) <= MAX_AGENTS + 1)


def call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return {"function_call": {"name": name, "arguments": arguments, "call_id": call_id}}


def replies(path: str, plan: Plan) -> list[Any]:
    """The model script of the agent at ``path``."""
    if plan.fails:
        return [{"http_error": {"status": 400, "message": f"{path} is refused"}}]
    out: list[Any] = [
        call("spawn_agent", f"s{n}", message=f"task {path}/{n}")
        for n in range(1, len(plan.children) + 1)
    ]
    # Tool steps: each one more request once its call is answered.
    out += [call("sleep", f"t{n}", seconds=0.03) for n in range(plan.steps)]
    if plan.waits and plan.children:
        ids = [f"{path}/{n}" for n in range(1, len(plan.children) + 1)]
        for n in range(len(ids)):
            out.append(call("wait", f"w{n}", ids=ids, timeout_ms=3_600_000))
    # Streamed in pieces, slowly: an interrupt can land while the answer streams.
    words = [f"{path} done"] + ["."] * 4
    stall = plan.answer_ms // len(words)
    out.append({"output": [_message(" ".join(words))], "stall_ms": stall})
    return out


def _message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def script_of(tree: Plan) -> dict[str, Any]:
    root = replies("/root", tree)
    agents = {
        path: {"responses": replies(path, plan)} for path, plan in nodes(tree) if path != "/root"
    }
    return {"responses": root, "agents": agents}


# ----------------------------------------------------------------------------- the actions


#: Each action comes after a pause, so that it lands at a random point of the tree's work.
actions = st.lists(
    st.tuples(
        st.sampled_from([0, 10, 40, 120]),
        st.one_of(
            st.tuples(st.just("interrupt"), st.integers(0, MAX_AGENTS)),
            st.tuples(st.just("close"), st.integers(1, MAX_AGENTS)),
            st.tuples(st.just("replace")),
            st.tuples(st.just("crash")),
            st.tuples(st.just("pause"), st.just(0)),
        ),
    ),
    max_size=5,
).map(lambda pairs: [step for ms, action in pairs for step in (("pause", ms), action)])


@attrs.define
class Run:
    """What the example did and when, for the checks."""

    tree: Plan
    plan_of: dict[str, Plan]
    #: (time, path) of every interrupt (an interrupt of the root's turn, a replacing turn).
    interrupts: list[tuple[float, str]] = attrs.field(factory=list)
    #: For each interrupt, the agents it must quiet: those open at or below its target then
    #: (the root aside, which may be given a new turn; an agent spawned later is new).
    quieted: list[frozenset[str]] = attrs.field(factory=list)
    #: (time, path) of every close.
    closes: list[tuple[float, str]] = attrs.field(factory=list)
    #: Times the whole tree stopped: a crash, the final shutdown.
    stops: list[float] = attrs.field(factory=list)
    #: (from, to): while no process of the tree runs (a crash until its resume; the final
    #: shutdown on).
    silences: list[tuple[float, float]] = attrs.field(factory=list)

    #: Each replacing turn: when it was submitted and the agents open below the root then. It
    #: interrupts the tree only when it replaced a running turn (the rollout says).
    replaces: list[tuple[float, frozenset[str]]] = attrs.field(factory=list)
    #: Replacing turns submitted while the root's turn ran: each may have interrupted the tree
    #: (a cause for a child's end) even where no rollout says so, as when a crash image was
    #: taken after the replaced turn's children ended and before its own abort was written.
    may_have_replaced: list[tuple[float, str]] = attrs.field(factory=list)

    def interrupted(self, root: relay.Session, path: str) -> None:
        self.interrupts.append((time.time(), path))
        self.quieted.append(self.open_below(root, path))

    def open_below(self, root: relay.Session, path: str) -> frozenset[str]:
        return frozenset(p for p in open_paths(root) if p != "/root" and below(path, p))

    def replaced(self, root_file: Path) -> None:
        """Count as interrupts the replacing turns that replaced a running one."""
        aborted = [
            e["at"] for e in events_of(root_file, "turn_aborted") if e["reason"] == "replaced"
        ]
        for at, quieted in self.replaces:
            if any(at - 0.002 <= when <= at + 1 for when in aborted):
                self.interrupts.append((at, "/root"))
                self.quieted.append(quieted)

    sessions: list[relay.Session] = attrs.field(factory=list)


def below(path: str, other: str) -> bool:
    """Whether ``other`` is ``path`` or an agent under it."""
    return other == path or other.startswith(path + "/")


def session_at(root: relay.Session, path: str) -> relay.Session | None:
    """The open session of the agent at ``path`` in ``root``'s tree."""
    session: relay.Session | None = root
    parts = path.split("/")[2:]
    for depth in range(len(parts)):
        if session is None:
            return None
        child = session.agents.child("/root/" + "/".join(parts[: depth + 1]))
        session = child.session if child is not None else None  # type: ignore[assignment]
    return session


def open_paths(root: relay.Session) -> list[str]:
    found = ["/root"]
    for session in root.agents.descendants():
        found.append(session.agents.path)
    return found


async def act(run: Run, root: relay.Session, action: tuple[Any, ...]) -> None:
    match action:
        case ("pause", ms):
            await trio.sleep(ms / 1000)
        case ("interrupt", index):
            paths = open_paths(root)
            path = paths[index % len(paths)]
            target = session_at(root, path)
            if target is not None and not target.closed:
                run.interrupted(root, path)
                target.submit_nowait(relay.Interrupt())
        case ("close", index):
            paths = open_paths(root)[1:]
            if not paths:
                return
            path = paths[index % len(paths)]
            parent = session_at(root, path.rsplit("/", 1)[0])
            if parent is None or parent.agents.child(path) is None:
                return
            run.closes.append((time.time(), path))
            await parent.agents.close(path)
        case ("replace",):
            run.replaces.append((time.time(), run.open_below(root, "/root")))
            if root.statistics().running_turn is not None:
                run.may_have_replaced.append((run.replaces[-1][0], "/root"))
            root.submit_nowait(relay.UserTurn(items=[relay.Text("again")], on_busy="replace"))
        case _:
            raise AssertionError(action)


def crash_image(sessions: Path, image: Path) -> None:
    """Every rollout of the tree as it is on disk now."""
    image.mkdir(parents=True)
    for path in sessions.rglob("*.jsonl"):
        shutil.copyfile(path, image / path.name)


# ----------------------------------------------------------------------------- the checks


def records(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn last line of a crash image
    return out


def events_of(path: Path, kind: str) -> list[dict[str, Any]]:
    """The payloads of the ``kind`` events a rollout records, each with its time (``at``)."""
    return [
        {**r["payload"], "at": stamp(r["timestamp"])}
        for r in records(path)
        if r.get("type") == "event_msg" and r["payload"].get("type") == kind
    ]


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


#: The heartbeats, every TICK seconds while each could run: of the server thread's loop, and of
#: the tree's own loop (the test's ``trio.run``).
TICKS: collections.deque[float] = collections.deque(maxlen=200_000)
LOOP_TICKS: collections.deque[float] = collections.deque(maxlen=200_000)
TICK = 0.005
#: An example that has not ended after this long has hung: its tasks are listed, and it fails.
EXAMPLE_LIMIT_S = 120.0


def stalls(ticks: tuple[float, ...], start: float, end: float) -> list[tuple[float, float]]:
    """The spans between ``start`` and ``end`` in which a heartbeat was more than a few ticks
    late."""
    beats = [t for t in ticks if start - 1 <= t <= end + 1]
    return [
        (max(earlier + TICK, start), min(later, end))
        for earlier, later in itertools.pairwise(beats)
        if later - earlier > 4 * TICK and later > start and earlier + TICK < end
    ]


def stalled(start: float, end: float) -> float:
    """How long, between ``start`` and ``end``, either loop could not run (the server's, or
    the tree's: the machine ran other work, as on a loaded machine): the machine's doing, not
    the tree's, and not counted. A span both stalled is counted once."""
    # Copies made at once: the server thread appends while this reads.
    spans = sorted(stalls(tuple(TICKS), start, end) + stalls(tuple(LOOP_TICKS), start, end))
    total, reached = 0.0, start
    for begin, finish in spans:
        begin = max(begin, reached)
        if finish > begin:
            total += finish - begin
            reached = finish
    return total


def late(received: float, since: float) -> float:
    """How long after ``since`` a request received at ``received`` came, less the stalls."""
    return received - since - stalled(since, received)


def check_requests(run: Run, log: list[dict[str, Any]]) -> None:
    """No request of an agent an interrupt quieted (one open at or below its target, the root
    aside) after the grace; none while no process of the tree runs."""
    for (at, path), quieted in zip(run.interrupts, run.quieted, strict=True):
        for entry in log:
            agent = entry["headers"].get("x-relay-agent", "/root")
            if agent not in quieted:
                continue
            assert late(entry["received_at"], at) <= ABORT_GRACE + CLOCK_SLACK, (
                f"{agent} asked the model {entry['received_at'] - at:.3f} s after "
                f"{path} was interrupted"
            )
    for start, end in run.silences:
        after = [
            e
            for e in log
            if e["received_at"] < end and late(e["received_at"], start) > ABORT_GRACE + CLOCK_SLACK
        ]
        assert not after, f"{len(after)} request(s) after the tree stopped"


def check_ends(run: Run, root_file: Path, folder: Path) -> None:
    """Each child any rollout of the tree names ends exactly once, and only for a cause."""
    files = {path.name: path for path in folder.rglob("*.jsonl")}
    pending = [root_file]
    seen: set[Path] = set()
    while pending:
        file = pending.pop()
        if file in seen:
            continue
        seen.add(file)
        spawned = {s["agent_id"]: s for s in events_of(file, "sub_agent_spawned")}
        ends: dict[str, list[dict[str, Any]]] = {}
        for end in events_of(file, "sub_agent_ended"):
            ends.setdefault(end["agent_id"], []).append(end)
        for agent_id, spawn in spawned.items():
            got = ends.get(agent_id, [])
            assert len(got) == 1, f"{spawn['path']} ended {len(got)} times in {file.name}"
            check_cause(run, spawn["path"], got[0]["status"], got[0]["at"])
            if spawn["rollout_path"]:
                child = files.get(Path(spawn["rollout_path"]).name)
                if child is not None:
                    pending.append(child)


def check_cause(run: Run, path: str, status: str, at: float) -> None:
    """Why ``path`` ended as ``status`` (at ``at``, to the millisecond): it, or an agent above
    it, was told so before; and the run of an agent an interrupt quieted ended within the
    grace (nothing gives it work again)."""
    for (then, target), quieted in zip(run.interrupts, run.quieted, strict=True):
        # Work that went on completes late; an end the interrupt (or a stop after it) made
        # comes within the grace, and the abort's own bookkeeping, however loaded the machine.
        bound = ABORT_GRACE + CLOCK_SLACK + (0.002 if status == "completed" else END_SLACK)
        if path in quieted:
            assert late(at, then) <= bound, (
                f"{path} ended {status} {at - then:.3f} s after {target} was interrupted"
            )
    before = at + 0.002
    causes = run.interrupts + run.closes + run.may_have_replaced
    told = [p for t, p in causes if below(p, path) and t <= before]
    failed = [p for p, plan in run.plan_of.items() if plan.fails and below(p, path)]
    stopped = [t for t in run.stops if t <= before]
    if status == "completed":
        assert not run.plan_of[path].fails
        return
    if status == "errored":
        assert failed, f"{path} errored, and neither it nor an agent above it failed"
        return
    assert status in ("interrupted", "shutdown"), status
    assert told or failed or stopped, f"{path} ended {status} and nobody told it to"


# ----------------------------------------------------------------------------- the test


def config(base_url: str, sessions: Path) -> relay.Config:
    provider = relay.ProviderConfig(
        name="mock", base_url=base_url, stream_max_retries=0, request_max_retries=0
    )
    return relay.Config(
        model_provider="mock",
        model_providers={"mock": provider},
        features=relay.Features(multi_agent=True),
        agents=relay.AgentsConfig(max_depth=4, max_threads=MAX_AGENTS + 1),
        rollout=relay.RolloutConfig(dir=str(sessions)),
    )


@pytest.fixture(scope="module")
def model_server() -> Iterator[MockServer]:
    """The loopback model server of every example, in a thread of its own: its clock reading
    of a request is not held up by the tree's own work in the test's event loop."""
    ready = threading.Event()
    held: dict[str, Any] = {}

    async def serve() -> None:
        server = MockServer(keep_requests=5_000)
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve, "127.0.0.1", 0)
            nursery.start_soon(tick)
            held.update(server=server, stop=nursery.cancel_scope)
            held["token"] = trio.lowlevel.current_trio_token()
            ready.set()

    async def tick() -> None:
        while True:
            TICKS.append(time.time())
            await trio.sleep(TICK)

    thread = threading.Thread(target=trio.run, args=(serve,), daemon=True)
    thread.start()
    assert ready.wait(30), "the model server did not start"
    yield held["server"]
    held["token"].run_sync_soon(held["stop"].cancel)
    thread.join(30)


@pytest.mark.slow
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(tree=trees, steps=actions)
def test_the_tree_stops_when_told_and_only_what_was_told(
    tmp_path_factory: pytest.TempPathFactory,
    model_server: MockServer,
    tree: Plan,
    steps: list[tuple[Any, ...]],
) -> None:
    workspace = tmp_path_factory.mktemp("tree")
    run = Run(tree, dict(nodes(tree)))
    # Between examples nothing is in flight: the script is swapped whole.
    model_server.script = parse_model_script(script_of(tree))
    TICKS.clear()
    LOOP_TICKS.clear()
    first = model_server.request_count
    assert model_server.base_url is not None
    base_url = model_server.base_url

    async def main() -> Path:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(heartbeat)
            nursery.start_soon(watchdog, run)
            root_file = await play(run, config(base_url, workspace / "sessions"), steps, workspace)
            nursery.cancel_scope.cancel()
        return root_file

    root_file = trio.run(main)
    run.replaced(root_file)
    count = model_server.request_count - first
    log = model_server.requests[-count:] if count else []
    check_requests(run, log)
    check_ends(run, root_file, root_file.parent)
    for session in run.sessions:
        assert session.closed
        assert not list(session.agents.descendants()), "a session outlived its root"


async def heartbeat() -> None:
    while True:
        LOOP_TICKS.append(time.time())
        await trio.sleep(TICK)


async def watchdog(run: Run) -> None:
    """Fail an example that hangs, saying where each of its tasks waits."""
    await trio.sleep(EXAMPLE_LIMIT_S)
    sessions = [(s.id, s.closed, open_paths(s)) for s in run.sessions]
    lines = "\n".join(task_lines(trio.lowlevel.current_root_task()))
    message = f"the example did not end in {EXAMPLE_LIMIT_S:.0f} s; sessions {sessions}; tasks:"
    print(message, lines, sep="\n", file=sys.stderr, flush=True)
    raise AssertionError(message)


def task_lines(task: trio.lowlevel.Task, depth: int = 0) -> Iterator[str]:
    """``task`` and the tasks under it, each with where it waits."""
    yield f"{'  ' * depth}{task.name}: {waits_at(task.coro)}"
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            yield from task_lines(child, depth + 1)


def waits_at(coro: Any) -> str:
    """The innermost frame of a coroutine chain outside the libraries (trio, anyio, httpx)."""
    at = "?"
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
        frame = frame or getattr(coro, "gi_frame", None)
        if frame is not None and "site-packages" not in frame.f_code.co_filename:
            at = f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"
        awaited = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None)
        coro = awaited or getattr(coro, "gi_yieldfrom", None)
    return at


async def play(
    run: Run, config: relay.Config, steps: list[tuple[Any, ...]], workspace: Path
) -> Path:
    """Run the tree through ``steps``; a crash resumes it from its image. The root's last
    rollout file."""
    source: Path | None = None
    images = 0
    while True:
        with trio.CancelScope() as crash:
            opening = (
                relay.open_session(config)
                if source is None
                else relay.resume_session(source, config)
            )
            async with opening as root, testing.recording(root):
                if run.silences:
                    run.silences[-1] = (run.silences[-1][0], time.time())
                run.sessions.append(root)
                assert root.rollout is not None
                root_file = root.rollout.path
                if source is None:
                    await root.submit(relay.UserTurn(items=[relay.Text("go")]))
                while steps:
                    step = steps.pop(0)
                    if step == ("crash",):
                        images += 1
                        image = workspace / f"image-{images}"
                        crash_image(Path(config.rollout.dir or ""), image)
                        run.stops.append(time.time())
                        run.silences.append((run.stops[-1], math.inf))
                        source = image / root_file.name
                        config = attrs.evolve(config, rollout=relay.RolloutConfig(dir=str(image)))
                        crash.cancel()
                        break
                    await act(run, root, step)
                else:
                    # The tree works on a little: what an interrupt failed to stop shows.
                    await trio.sleep(0.12)
                    run.stops.append(time.time())
                    run.silences.append((run.stops[-1], math.inf))
                    root.submit_nowait(relay.Shutdown())
                    await root.wait_closed()
                    return root_file
        # The crashed process is gone: its sessions are not checked for having closed.
        run.sessions.pop()
