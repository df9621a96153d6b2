"""The thread store's methods of ``relay app-server``: ``thread/list``, ``thread/read``,
``thread/loaded/list``, ``thread/name/set``, ``thread/archive`` and ``thread/unarchive``
(docs/codex-compat.md).

Theory of operation. Each request becomes a job, and one worker runs the jobs in the order
the requests came, their file work in a worker thread: a ``thread/read`` after a
``thread/name/set`` sees the name, and two requests never move the same file at once. The
files are those of :mod:`._store`; the threads this server has open answer from their
sessions. Archiving an open thread shuts its session down first (its rollout is flushed and
closed), then moves the file, as Codex unloads a thread it archives.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._base import _protocol as p
from .._base._config import Config
from .._base._errors import ClosedSessionError, RelayError
from .._exec._real_work import in_thread
from . import _store
from . import _thread_params as params
from ._params import invalid
from ._rpc import Code, Message, Request, RequestId, RpcError, error, notification, result
from ._stdio import Output
from ._threads import Thread, history_turns, rollout_root, stored_thread_json

#: A job: what answers one request.
Job = Callable[[], Awaitable[None]]


def read_turns(path: Path) -> list[Message]:
    """The turns the rollout ``path`` records, with their items."""
    from .._rollout._reader import read_rollout

    return history_turns(read_rollout(path).lines)


class ThreadApi:
    """Answers the thread store's methods, one request at a time, in order."""

    def __init__(
        self, config: Config, out: Output, threads: dict[str, Thread], version: str
    ) -> None:
        self._config = config
        self._out = out
        self._threads = threads
        self._version = version
        self._send: MemoryObjectSendStream[tuple[RequestId, Job]]
        self._jobs: MemoryObjectReceiveStream[tuple[RequestId, Job]]
        self._send, self._jobs = anyio.create_memory_object_stream[tuple[RequestId, Job]](
            float("inf")
        )

    @property
    def root(self) -> Path:
        """The rollout directory."""
        return rollout_root(self._config)

    # ------------------------------------------------------------------ the worker

    async def run(self) -> None:
        """Run the jobs, in order, until :meth:`close`."""
        async with self._jobs:
            async for request_id, job in self._jobs:
                try:
                    await job()
                except RpcError as exc:
                    self._out.put(error(request_id, exc.code, exc.message))
                except (RelayError, OSError) as exc:
                    self._out.put(error(request_id, Code.SERVER_ERROR, str(exc)))
                except Exception as exc:  # a failure of relay's: the request fails alone
                    why = f"internal error: {type(exc).__name__}: {exc}"
                    self._out.put(error(request_id, Code.INTERNAL_ERROR, why))

    def close(self) -> None:
        """No more jobs: the worker ends once it has run those waiting."""
        self._send.close()

    def receive(self, request: Request) -> None:
        """Queue the job of ``request`` (a method of this module's)."""
        handlers: dict[str, Callable[[Request], Awaitable[None]]] = {
            "thread/list": self._list,
            "thread/read": self._read,
            "thread/loaded/list": self._loaded,
            "thread/name/set": self._name,
            "thread/archive": self._archive,
            "thread/unarchive": self._unarchive,
        }
        self._send.send_nowait((request.id, partial(handlers[request.method], request)))

    # ------------------------------------------------------------------ the methods

    def _summary_json(self, summary: _store.Summary, turns: list[Message] | None) -> Message:
        loaded = self._threads.get(summary.file.thread_id)
        if loaded is None:
            return stored_thread_json(summary, self._version, turns=turns)
        made = loaded.json(self._version, turns)
        made["preview"] = summary.preview or made["preview"]
        made["updatedAt"] = max(made["createdAt"], summary.file.mtime())
        return made

    async def _list(self, request: Request) -> None:
        query = params.thread_list(request.params)
        page, more = await in_thread(_store.list_page, self.root, query)
        data = [self._summary_json(summary, None) for summary in page]
        self._out.put(
            result(request.id, {"data": data, "nextCursor": more, "backwardsCursor": None})
        )

    async def _read(self, request: Request) -> None:
        thread_id, include_turns = params.thread_read(request.params)
        file = await in_thread(_store.locate, self.root, thread_id)
        loaded = self._threads.get(thread_id)
        if file is None:
            if loaded is None:
                raise invalid("threadId", f"no thread {thread_id}")
            if include_turns:
                raise invalid("includeTurns", f"thread {thread_id} is ephemeral: no turns kept")
            self._out.put(result(request.id, {"thread": loaded.json(self._version)}))
            return
        summary = await in_thread(_store.summarize, file)
        if summary is None:
            raise invalid("threadId", f"the rollout of thread {thread_id} does not read")
        turns = await in_thread(read_turns, file.path) if include_turns else None
        self._out.put(result(request.id, {"thread": self._summary_json(summary, turns)}))

    async def _loaded(self, request: Request) -> None:
        cursor, limit = params.loaded_list(request.params)
        page, more = _store.paginate(self._threads, cursor, limit)
        self._out.put(result(request.id, {"data": page, "nextCursor": more}))

    async def _name(self, request: Request) -> None:
        thread_id, name = params.thread_name(request.params)
        loaded = self._threads.get(thread_id)
        file = await in_thread(_store.locate, self.root, thread_id)
        if file is None and loaded is None:
            raise invalid("threadId", f"no thread {thread_id}")
        if file is not None:
            await in_thread(partial(_store.write_sidecar, file.path, name=name))
        if loaded is not None:
            loaded.name = name
        self._out.put(result(request.id, {}))
        self._notify("thread/name/updated", {"threadId": thread_id, "threadName": name})

    async def _archive(self, request: Request) -> None:
        thread_id = _thread_id(request.params)
        loaded = self._threads.get(thread_id)
        file = await in_thread(_store.locate, self.root, thread_id)
        if file is None:
            why = "is ephemeral: it has no rollout" if loaded is not None else "has no rollout"
            raise invalid("threadId", f"thread {thread_id} {why}")
        if file.archived:
            raise invalid("threadId", f"thread {thread_id} is archived already")
        if loaded is not None:
            try:
                loaded.session.submit_nowait(p.Shutdown())
            except ClosedSessionError:
                pass  # ending already
            await loaded.ended.wait()
            status = {"threadId": thread_id, "status": {"type": "notLoaded"}}
            self._notify("thread/status/changed", status)
        await in_thread(_store.archive, self.root, file)
        self._out.put(result(request.id, {}))
        self._notify("thread/archived", {"threadId": thread_id})

    async def _unarchive(self, request: Request) -> None:
        thread_id = _thread_id(request.params)
        file = await in_thread(_store.locate, self.root, thread_id)
        if file is None or not file.archived:
            raise invalid("threadId", f"no archived thread {thread_id}")
        path = await in_thread(_store.unarchive, self.root, file)
        moved = _store.rollout_file(path, archived=False)
        assert moved is not None
        summary = await in_thread(_store.summarize, moved)
        if summary is None:
            raise invalid("threadId", f"the rollout of thread {thread_id} does not read")
        self._out.put(result(request.id, {"thread": self._summary_json(summary, None)}))
        self._notify("thread/unarchived", {"threadId": thread_id})

    def _notify(self, method: str, values: dict[str, Any]) -> None:
        self._out.put(notification(method, values))


def _thread_id(raw: Any) -> str:
    from ._params import thread_id

    return thread_id(raw)


__all__ = ["ThreadApi", "read_turns"]
