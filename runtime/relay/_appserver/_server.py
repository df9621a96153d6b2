"""The server of ``relay app-server``: requests in, answers and notifications out, one session
per thread (docs/codex-compat.md).

Theory of operation. :meth:`Server.receive` takes one line and answers it before it returns,
with no ``await``, but for what opens a session (``thread/start``, ``thread/resume``), which
runs as a task of the server's task group and answers when the session is open. Each thread is
that task: it opens the session, answers, announces ``thread/started``, then forwards every
event of the session, translated (:mod:`._notes`), until the session has shut down. Threads
share the process and nothing else: each has its own configuration, session, rollout and
translator.

An answer is put out before what the request starts can say anything (``turn/start``'s answer
before ``turn/started``): it goes to the one :class:`~._stdio.Output` before the op is
submitted. :meth:`Server.close` shuts every session down (a running turn ends ``interrupted``,
its tool processes stopped, the rollout flushed); a thread still opening shuts down as soon as
it is open.
"""

from __future__ import annotations

import os
import platform
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import attrs

from .._base import _protocol as p
from .._base._config import Config, relay_home
from .._base._errors import ClosedSessionError, InvalidOpError, RelayError
from .._core._session import Session
from .._exec._real_work import in_thread
from .._version import __version__
from . import _params, _store
from . import _thread_params as _more
from ._agents import AgentThreads
from ._catalog import config_read, model_list
from ._methods import SUPPORTED, UNSUPPORTED, unsupported_message
from ._notes import Translator, turn_json
from ._params import ThreadSettings, invalid
from ._rpc import (
    Code,
    Malformed,
    Message,
    Notification,
    Reply,
    Request,
    RequestId,
    RpcError,
    error,
    notification,
    parse_line,
    result,
)
from ._stdio import Output
from ._thread_api import ThreadApi
from ._threads import (
    Thread,
    extra_roots,
    find_rollout,
    first_user_message,
    history_turns,
    rollout_root,
    rule_keys,
    sandbox_difference,
    thread_config,
)

#: The methods of the thread store, answered in order by :class:`~._thread_api.ThreadApi`.
STORE_METHODS = frozenset(
    {
        "thread/list",
        "thread/read",
        "thread/loaded/list",
        "thread/name/set",
        "thread/archive",
        "thread/unarchive",
    }
)


@attrs.frozen
class Opening:
    """A thread to open from a rollout: one resumed, or a fork's copy."""

    thread_id: str
    """The thread: its session id."""
    exclude_turns: bool = False
    """Leave its past turns out of the answer."""
    path: Path | None = None
    """The rollout (None: found under the rollout directory by the id)."""
    data: bytes | None = None
    """The rollout itself, of an ephemeral fork, which is in no file."""
    sidecar: dict[str, Any] = attrs.field(factory=dict)
    """What the thread's sidecar records (read from beside ``path`` when there is one)."""


class Server:
    """Answers the client's lines; owns the threads, in ``task_group``."""

    def __init__(
        self,
        config: Config,
        out: Output,
        task_group: anyio.abc.TaskGroup,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._config = config
        self._out = out
        self._tasks = task_group
        self._clock = clock
        self._initialized = False
        self._closing = False
        self.threads: dict[str, Thread] = {}
        """The threads open, by id."""
        self.store = ThreadApi(config, out, self.threads, __version__)
        """What answers the thread store's methods."""
        task_group.start_soon(self.store.run)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    # ------------------------------------------------------------------ lines in

    def receive(self, line: bytes) -> None:
        """Handle one line from the client."""
        match parse_line(line):
            case Malformed(id=line_id, code=code, message=message):
                self._out.put(error(line_id, code, message))
            case Notification():
                pass  # ``initialized``, or one the server has no use for: neither is answered
            case Reply() as reply:
                self._reply(reply)
            case Request() as request:
                try:
                    self._request(request)
                except RpcError as exc:
                    self._out.put(error(request.id, exc.code, exc.message))

    def _reply(self, reply: Reply) -> None:
        """The client's answer to an approval request: relay's decision on the call."""
        decision, wrong = _params.approval_decision(reply.result, reply.error)
        declined = decision in (p.ReviewDecision.DENIED, p.ReviewDecision.ABORT)
        for thread in self.threads.values():
            found = thread.resolve(reply.id, declined=declined)
            if found is not None:
                break
        else:
            return  # answers nothing waiting: resolved already, by the turn's end
        asker, call_id, resolved = found
        if wrong is not None:
            warning = f"{wrong}: the call {call_id} is denied"
            self._out.put(
                notification("warning", {"threadId": asker.thread_id, "message": warning})
            )
        self._out.put(resolved)
        # A sub-agent's call is decided through the root's session, which passes it down.
        self._submit(thread, asker.decision_op(call_id, decision))

    def _request(self, request: Request) -> None:
        method = request.method
        if method not in SUPPORTED:
            if method in UNSUPPORTED:
                raise RpcError(Code.METHOD_NOT_FOUND, unsupported_message(method))
            raise RpcError(Code.METHOD_NOT_FOUND, f"unknown method: {method}")
        if method == "initialize":
            self._initialize(request)
            return
        if not self._initialized:
            raise RpcError(Code.INVALID_REQUEST, f"{method}: not initialized (send initialize)")
        if self._closing:
            raise RpcError(Code.INVALID_REQUEST, f"{method}: the server is shutting down")
        if method in STORE_METHODS:
            self.store.receive(request)
        elif method == "thread/start":
            self._thread_start(request)
        elif method == "thread/fork":
            self._thread_fork(request)
        elif method == "model/list":
            cursor, limit, provider = _more.model_list(request.params)
            self._out.put(result(request.id, model_list(self._config, cursor, limit, provider)))
        elif method == "config/read":
            self._out.put(result(request.id, config_read(self._config)))
        elif method == "turn/steer":
            self._turn_steer(request)
        elif method == "thread/resume":
            self._thread_resume(request)
        elif method == "thread/compact/start":
            self._compact(request)
        elif method == "turn/start":
            self._turn_start(request)
        else:
            self._turn_interrupt(request)

    def _initialize(self, request: Request) -> None:
        if self._initialized:
            raise RpcError(Code.INVALID_REQUEST, "initialize: already initialized")
        name, version = _params.client_info(request.params)
        self._initialized = True
        agent = f"relay/{__version__} ({platform.system()} {platform.release()}; {name} {version})"
        self._out.put(
            result(
                request.id,
                {
                    "userAgent": agent,
                    "codexHome": str(relay_home().absolute()),
                    "platformFamily": "windows" if sys.platform == "win32" else "unix",
                    "platformOs": _platform_os(),
                },
            )
        )

    def _thread(self, thread_id: str) -> Thread:
        thread = self.threads.get(thread_id)
        if thread is None:
            raise invalid("threadId", f"no thread {thread_id} is loaded")
        return thread

    # ------------------------------------------------------------------ threads

    def _thread_start(self, request: Request) -> None:
        settings = _params.thread_start(request.params)
        config = thread_config(self._config, settings)
        self._tasks.start_soon(self._open, request.id, config, settings, None)

    def _thread_resume(self, request: Request) -> None:
        resume = _params.thread_resume(request.params)
        loaded = self.threads.get(resume.thread_id)
        if loaded is not None:
            self._out.put(result(request.id, loaded.answer(__version__)))
            return
        config = thread_config(self._config, resume.settings)
        opening = Opening(resume.thread_id, exclude_turns=resume.exclude_turns)
        self._tasks.start_soon(self._open, request.id, config, resume.settings, opening)

    def _thread_fork(self, request: Request) -> None:
        fork = _more.thread_fork(request.params)
        config = thread_config(self._config, fork.settings)
        self._tasks.start_soon(self._fork, request.id, config, fork)

    async def _fork(self, request_id: RequestId, config: Config, fork: _more.ThreadFork) -> None:
        """Copy the thread's rollout as the fork's, then open the fork as a resume would."""
        from .._core._writer import rollout_path
        from ._fork import forked_lines

        try:
            root = rollout_root(self._config)
            file = await in_thread(_store.locate, root, fork.thread_id)
            if file is None:
                raise invalid("threadId", f"no rollout of thread {fork.thread_id} under {root}")
            data = await in_thread(file.path.read_bytes)
            new_id = str(uuid.uuid4())
            now = datetime.fromtimestamp(self._clock(), UTC)
            copy = forked_lines(data, new_id, now, last_turn_id=fork.last_turn_id)
            origin = _store.read_sidecar(file.path)
            sidecar = {
                "forked_from": fork.thread_id,
                "prompt_cache_key": origin.get("prompt_cache_key") or fork.thread_id,
                **({"name": origin["name"]} if isinstance(origin.get("name"), str) else {}),
            }
            if fork.settings.ephemeral:
                opening = Opening(new_id, fork.exclude_turns, data=copy, sidecar=sidecar)
            else:
                path = rollout_path(rollout_root(config), new_id, now)
                await in_thread(partial(_write_private, path, copy))
                await in_thread(partial(_store.write_sidecar, path, **sidecar))
                opening = Opening(new_id, fork.exclude_turns, path=path)
        except RpcError as exc:
            self._out.put(error(request_id, exc.code, exc.message))
            return
        except OSError as exc:
            self._out.put(error(request_id, Code.SERVER_ERROR, f"cannot fork: {exc}"))
            return
        await self._open(request_id, config, fork.settings, opening)

    async def _open(
        self,
        request_id: RequestId,
        config: Config,
        settings: ThreadSettings,
        resume: Opening | None,
    ) -> None:
        try:
            await self._tasks.start(self._run_thread, request_id, config, settings, resume)
        except RpcError as exc:
            self._out.put(error(request_id, exc.code, exc.message))
        except RelayError as exc:
            self._out.put(error(request_id, Code.SERVER_ERROR, str(exc)))
        except Exception as exc:  # a failure of relay's: the request fails, the server goes on
            why = f"internal error: {type(exc).__name__}: {exc}"
            self._out.put(error(request_id, Code.INTERNAL_ERROR, why))

    async def _run_thread(
        self,
        request_id: RequestId,
        config: Config,
        settings: ThreadSettings,
        resume: Opening | None,
        *,
        task_status: anyio.abc.TaskStatus[None],
    ) -> None:
        from .._open import open_model_client, open_session, resume_session
        from .._open._resume_rules import resumed_rules

        turns: list[Message] | None = None
        stack = AsyncExitStack()
        sidecar: dict[str, Any] = {}
        if resume is None:
            opened = open_session(config)
        else:
            from .._rollout._reader import parse_rollout, read_rollout
            from .._rollout._resume import reconstruct, resumed_config
            from ._fork import CacheKeyed

            if resume.data is not None:
                rollout = parse_rollout(resume.data, for_resume=True)
                sidecar = resume.sidecar
            else:
                path = resume.path
                if path is None:
                    path = await in_thread(find_rollout, rollout_root(config), resume.thread_id)
                rollout = await in_thread(partial(read_rollout, path, for_resume=True))
                sidecar = await in_thread(_store.read_sidecar, path)
            chosen = {
                key
                for key, value in (
                    ("model", settings.model),
                    ("model_provider", settings.model_provider),
                )
                if value is not None
            }
            state = reconstruct(rollout)
            config = resumed_config(config, state, chosen=chosen)
            # The thread keeps the rules it recorded, but for those the request names.
            config = resumed_rules(config, state.rules, chosen=rule_keys(settings))
            if not resume.exclude_turns:
                # Resuming reads only what rebuilds the session; the turns shown are in the rest.
                if resume.data is not None:
                    whole = parse_rollout(resume.data)
                else:
                    whole = await in_thread(read_rollout, path)
                turns = history_turns(whole.lines)
            model = None
            if isinstance(key := sidecar.get("prompt_cache_key"), str):
                # A fork's requests share the prompt cache of the thread it comes from.
                client = await stack.enter_async_context(open_model_client(config))
                model = CacheKeyed(client, key)
            opened = resume_session(
                rollout, config, model=model, model_name=settings.model, keep_rules=False
            )
        thread: Thread | None = None
        try:
            async with stack, opened as session:
                events = aiter(session.events())
                first = await anext(events)
                assert isinstance(first.msg, p.SessionConfigured), first
                thread = self._announce(session, first.msg, request_id, turns, sidecar)
                task_status.started()
                if self._closing:
                    session.submit_nowait(p.Shutdown())
                async for event in events:
                    for made in thread.translate(event, self._now_ms()):
                        self._out.put(made)
                    await self._out.wait_room()
        except Exception as exc:
            if thread is None:
                raise
            # A thread that fails ends alone: the others, and the server, go on.
            why = f"thread {thread.id} failed: {type(exc).__name__}: {exc}"
            self._out.put(notification("warning", {"threadId": thread.id, "message": why}))
        finally:
            if thread is not None:
                self.threads.pop(thread.id, None)
                thread.ended.set()

    def _announce(
        self,
        session: Session,
        configured: p.SessionConfigured,
        request_id: RequestId,
        turns: list[Message] | None,
        sidecar: dict[str, Any] | None = None,
    ) -> Thread:
        """The thread of ``session``, open: answered, and announced by ``thread/started``."""
        side = sidecar or {}
        thread = Thread(
            session,
            Translator(session.id, configured.cwd, _mcp_tools(session)),
            created_at=int(self._clock()),
            model=configured.model,
            model_provider=configured.model_provider,
            path=configured.rollout_path,
            name=_text(side.get("name")),
            forked_from=_text(side.get("forked_from")),
            preview=first_user_message(turns or []),
        )
        thread.agents = AgentThreads(
            thread.id, configured.model_provider, __version__, _mcp_tools(session)
        )
        self.threads[thread.id] = thread
        self._out.put(result(request_id, thread.answer(__version__, turns)))
        self._out.put(notification("thread/started", {"thread": thread.json(__version__)}))
        return thread

    # ------------------------------------------------------------------ turns

    def _turn_start(self, request: Request) -> None:
        turn = _params.turn_start(request.params)
        thread = self._thread(turn.thread_id)
        session = thread.session
        rules = self._rules_change(thread, turn)
        try:
            op = p.UserTurn(
                items=turn.items,
                model=turn.model,
                cwd=turn.cwd,
                effort=turn.effort,
                on_busy=p.OnBusy.QUEUE,
                final_output_json_schema=turn.output_schema,
            )
        except InvalidOpError as exc:
            message = str(exc).removeprefix("final_output_json_schema: ")
            raise invalid("outputSchema", message) from None
        if session.closed:
            raise invalid("threadId", f"thread {thread.id} has shut down")
        turn_id = str(uuid.uuid4())
        if turn.cwd is not None:
            thread.notes.cwd = str(Path(thread.notes.cwd, turn.cwd))
        self._out.put(result(request.id, {"turn": turn_json(turn_id, "inProgress")}))
        if rules is not None:
            self._submit(thread, rules)
        self._submit(thread, op, turn_id)

    def _rules_change(
        self, thread: Thread, turn: _params.TurnStart
    ) -> p.OverrideTurnContext | None:
        """The op that applies a turn's ``approvalPolicy`` and ``sandboxPolicy`` to it and
        the later turns, through the session's gate (None: they change nothing)."""
        config = thread.session.config
        changes: dict[str, Any] = {}
        if turn.approval_policy not in (None, config.approval_policy):
            changes["approval_policy"] = turn.approval_policy
        asked = turn.sandbox
        cwd = thread.notes.cwd if turn.cwd is None else str(Path(thread.notes.cwd, turn.cwd))
        if asked is not None and sandbox_difference(config, asked, cwd) is not None:
            changes["sandbox_mode"] = asked.mode
            if asked.mode == "workspace-write":
                changes["writable_roots"] = extra_roots(asked, cwd)
                changes["network_access"] = asked.network_access
        if not changes:
            return None
        try:
            return p.OverrideTurnContext(**changes)
        except InvalidOpError as exc:
            raise invalid("sandboxPolicy", str(exc)) from None

    def _turn_steer(self, request: Request) -> None:
        steer = _more.turn_steer(request.params)
        thread = self._thread(steer.thread_id)
        running = thread.notes.running
        if running != steer.expected_turn_id:
            # Codex answers an invalid request here (-32600), naming the turn.
            now = f"turn {running} is" if running is not None else "no turn is"
            raise RpcError(
                Code.INVALID_REQUEST,
                f"expectedTurnId: turn {steer.expected_turn_id} is not running in thread "
                f"{thread.id} ({now} running)",
            )
        op = p.UserTurn(items=steer.items, on_busy=p.OnBusy.STEER)
        self._out.put(result(request.id, {"turnId": running}))
        self._submit(thread, op, str(uuid.uuid4()))

    def _turn_interrupt(self, request: Request) -> None:
        asked = _params.turn_interrupt(request.params)
        if asked.thread_id not in self.threads:
            self._interrupt_agent(request, asked.thread_id, asked.turn_id)
            return
        thread = self._thread(asked.thread_id)
        # A thread whose turn has ended while its sub-agents work is still interrupted: its
        # tree stops (docs/agents.md).
        at_work = any(True for _ in thread.session.agents.descendants())
        if thread.notes.running != asked.turn_id and not at_work:
            raise invalid("turnId", f"turn {asked.turn_id} is not running in thread {thread.id}")
        self._out.put(result(request.id, {}))
        self._submit(thread, p.Interrupt())

    def _interrupt_agent(self, request: Request, agent_id: str, turn_id: str) -> None:
        """``turn/interrupt`` of a sub-agent's thread: its turn, and those of the agents below
        it, are interrupted (docs/agents.md)."""
        for thread in list(self.threads.values()):
            child = thread.agents.children.get(agent_id) if thread.agents else None
            session = thread.session.agents.find(agent_id)
            if child is None or session is None:
                continue
            if child.notes.running != turn_id:
                raise invalid("turnId", f"turn {turn_id} is not running in thread {agent_id}")
            self._out.put(result(request.id, {}))
            try:
                session.submit_nowait(p.Interrupt())
            except ClosedSessionError:
                pass  # it ended meanwhile: its last notifications say how
            return
        raise invalid("threadId", f"no thread {agent_id} is loaded")

    def _compact(self, request: Request) -> None:
        thread = self._thread(_params.thread_id(request.params))
        self._out.put(result(request.id, {}))
        self._submit(thread, p.Compact(), str(uuid.uuid4()))

    def _submit(self, thread: Thread, op: p.Op, sub_id: str | None = None) -> None:
        try:
            thread.session.submit_nowait(op, id=sub_id)
        except ClosedSessionError:
            pass  # shut down meanwhile: its last notifications say how its turn ended

    # ------------------------------------------------------------------ the end

    def close(self) -> None:
        """Shut every session down; a thread still opening shuts down once open. The
        threads' tasks end when their sessions have."""
        self._closing = True
        self.store.close()
        for thread in list(self.threads.values()):
            self._submit(thread, p.Shutdown())


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _write_private(path: Path, data: bytes) -> None:
    """Write a new rollout, readable by its owner only, in folders of the same mode."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)


def _mcp_tools(session: Session) -> Callable[[str], tuple[str, str] | None]:
    """What tells an MCP server's tool by the name the model calls it: the session's tools."""

    def mcp_tool(name: str) -> tuple[str, str] | None:
        tool = session.tools.get(name)
        return tool.mcp if tool is not None else None

    return mcp_tool


def _platform_os() -> str:
    if sys.platform == "darwin":
        return "macos"
    if sys.platform == "win32":
        return "windows"
    return sys.platform.rstrip("0123456789") or "unknown"


__all__ = ["Server"]
