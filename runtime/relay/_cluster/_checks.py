"""What the registry checks of its hosts before it trusts them with sessions: that each sees the
shared rollout directory (the storage check), and that each can read the paths and load the
tasks a session names (``docs/cluster.md``). Both sides are here: the registry's, and the
methods a host answers with (:class:`HostChecks`).

Theory of operation. **The storage check**, at ``up`` and for every host started later: each
host and the registry write a probe file (a random token) under the rollout directory, and each
reads every probe back. Two processes share the directory when each reads the other's; of the
groups that share one, the group spread over the most nodes is *the* shared directory
(:func:`~._leases.shared_group`). A host outside it, or one that does not answer within
:data:`CHECK_WAIT_S`, gets no sessions, and is named.

**A session's needs**, at open: every serving host must read its model script and ``cwd`` and
load the factory of every op type of its ``[tasks]``, since the session may move to any of
them. A host found able once is not asked again (:class:`Confirmed`); a refusal is not kept, so
that a mount or a module set right counts at the next open.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio

from .._base._config import Config
from .._base._errors import ConfigError
from ._leases import shared_group
from ._ray import within

#: The name of the directory of probe files, under a deployment's rollout directory.
PROBE_DIR = ".relay-probes"
#: How long a host has to answer each step of a check.
CHECK_WAIT_S = 10.0
#: The registry's own name in the storage check.
REGISTRY = "registry"
#: What the registry remembers hosts could do; the oldest go past this.
CONFIRMED_KEPT = 1024


class Checked(Protocol):
    """A host as a check sees it (the registry's record of it)."""

    name: str
    handle: Any
    node: str | None
    state: str
    problem: str | None


class Confirmed:
    """What each host was found able to do (read a path, load a task), so that a session's
    next open asks no host again.

    A refusal is not kept: the next open asks again. Bounded: past ``kept`` pairs, the oldest
    are forgotten (and asked again when they come back).
    """

    def __init__(self, kept: int = CONFIRMED_KEPT) -> None:
        self._seen: dict[tuple[str, str], None] = {}
        self._kept = kept

    def unknown(self, host: str, needs: Sequence[str]) -> list[str]:
        """Of ``needs``, those ``host`` was not found able to meet yet, in order."""
        return [need for need in needs if (host, need) not in self._seen]

    def confirm(self, host: str, need: str) -> None:
        """``host`` meets ``need``."""
        self._seen[(host, need)] = None
        while len(self._seen) > self._kept:
            del self._seen[next(iter(self._seen))]


# --------------------------------------------------------------------------- the registry's side


async def check_storage(
    ray: Any, directory: str, serving: Sequence[Checked], records: Sequence[Checked]
) -> list[str]:
    """The storage check of ``records`` beside the ``serving`` hosts: each of ``records`` that
    shares the directory with them becomes ``serving``, the others ``no storage`` (their
    problems are returned, and kept on the records)."""
    checked = [*serving, *records]
    probes: dict[str, tuple[str, str]] = {}
    errors: dict[str, str] = {}
    own = _write_probe(directory)
    if "error" not in own:
        probes[REGISTRY] = (own["path"], own["token"])
    written = await _each(checked, lambda r: r.handle.probe_write.remote(directory))
    for record, result in zip(checked, written, strict=True):
        if isinstance(result, BaseException):
            errors[record.name] = f"it did not answer the storage check ({result!r})"
        elif "error" in result:
            errors[record.name] = result["error"]
        else:
            probes[record.name] = (result["path"], result["token"])
    read = await _each(checked, lambda r: r.handle.probe_read.remote(probes))
    sees: dict[str, list[str]] = {
        r.name: names for r, names in zip(checked, read, strict=True) if isinstance(names, list)
    }
    sees[REGISTRY] = read_probes(probes)
    node_of = {r.name: r.node or r.name for r in checked}
    node_of[REGISTRY] = ray.get_runtime_context().get_node_id()
    group = shared_group(sees, node_of, REGISTRY)
    if REGISTRY in probes:
        _remove(probes[REGISTRY][0])
    owners = [r for r in checked if r.name in probes]
    await _each(owners, lambda r: r.handle.probe_remove.remote(probes[r.name][0]))
    problems = []
    for record in records:
        if record.state == "lost":
            continue
        if record.name in group:
            record.state = "serving"
            continue
        record.state = "no storage"
        reason = errors.get(
            record.name,
            "the probe files the hosts on other nodes wrote there are not there, and "
            "its own cannot be read from them: that path is another directory on its "
            "node (is the shared file system mounted there?)",
        )
        record.problem = (
            f"host {record.name} on node {(record.node or '?')[:12]} does not see the "
            f"shared rollout directory {directory}: {reason}; it gets no sessions"
        )
        problems.append(record.problem)
    return problems


async def session_problem(
    ray: Any, serving: Sequence[Checked], confirmed: Confirmed, config: Config
) -> str | None:
    """Why a serving host could not run the session of ``config`` after a move, if one could
    not: a path it cannot read, or a task it cannot load. A host that does not answer is the
    lease's business."""
    paths = [p for p in (config.model_script, config.cwd) if p]
    tasks = {f"task {op}={spec}": op for op, spec in config.tasks.items()}
    for record in serving:
        todo = confirmed.unknown(record.name, paths)
        loads = confirmed.unknown(record.name, list(tasks))
        asked = {tasks[need]: config.tasks[tasks[need]] for need in loads}
        found: dict[str, str] = {}
        failed: dict[str, str] = {}
        try:
            if todo:
                found = await within(CHECK_WAIT_S, record.handle.unreadable.remote(todo))
            if asked:
                failed = await within(CHECK_WAIT_S, record.handle.unloadable.remote(asked))
        except (TimeoutError, ray.exceptions.RayActorError):
            continue
        for path in todo:
            reason = found.get(path)
            if reason is None:
                confirmed.confirm(record.name, path)
                continue
            what = "model script" if path == config.model_script else "working directory"
            return (
                f"host {record.name} cannot read the {what} {path} ({reason}): every "
                "host must, since a session moves between them"
            )
        for need in loads:
            op_type = tasks[need]
            reason = failed.get(op_type)
            if reason is None:
                confirmed.confirm(record.name, need)
                continue
            return (
                f"host {record.name} cannot load the task of op {op_type!r} ({reason}): every "
                "host must, since a session moves between them; relay cluster up --task "
                "carries a module to a deployment's hosts, or install it on every node"
            )
    return None


async def _each(records: Sequence[Checked], call: Callable[[Checked], Any]) -> list[Any]:
    """``call(record)`` on every record at once, each bounded by :data:`CHECK_WAIT_S`; an
    error (or no answer) in place of a result."""
    return await asyncio.gather(
        *(within(CHECK_WAIT_S, call(record)) for record in records),
        return_exceptions=True,
    )


def _write_probe(directory: str) -> dict[str, str]:
    token = uuid.uuid4().hex
    path = Path(directory) / PROBE_DIR / f"{REGISTRY}-{token[:8]}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_text(token, encoding="utf-8")
    except OSError as exc:
        return {"error": exc.strerror or type(exc).__name__}
    return {"path": str(path), "token": token}


def _remove(path: str) -> None:
    try:
        Path(path).unlink()
    except OSError:
        pass


# --------------------------------------------------------------------------- the host's side


class HostChecks:
    """What a host answers the checks with (a part of :class:`~._host.SessionHost`)."""

    name: str

    async def probe_write(self, directory: str) -> dict[str, str]:
        """Write this host's probe file in ``directory``; its path and content, or the error."""
        token = uuid.uuid4().hex
        path = Path(directory) / PROBE_DIR / f"{self.name}-{token[:8]}"

        def write() -> None:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            path.write_text(token, encoding="utf-8")

        try:
            await anyio.to_thread.run_sync(write)
        except OSError as exc:
            return {"error": f"cannot write in {directory}: {exc.strerror}"}
        return {"path": str(path), "token": token}

    async def probe_read(self, probes: dict[str, tuple[str, str]]) -> list[str]:
        """Which of the probe files (by owner: path and content) this host reads as written."""
        return await anyio.to_thread.run_sync(lambda: read_probes(probes))

    async def probe_remove(self, path: str) -> None:
        """Remove this host's probe file (where only this host may see it)."""
        try:
            await anyio.to_thread.run_sync(Path(path).unlink)
        except OSError:
            pass

    async def unreadable(self, paths: list[str]) -> dict[str, str]:
        """The paths of ``paths`` this host cannot read, each with the reason."""
        return await anyio.to_thread.run_sync(lambda: unreadable(paths))

    async def unloadable(self, tasks: dict[str, str]) -> dict[str, str]:
        """The op types of ``tasks`` (op type: factory) whose factory this host cannot load,
        each with the reason."""
        return unloadable(tasks)


def read_probes(probes: dict[str, tuple[str, str]]) -> list[str]:
    """The owners of the probe files that read back as written."""
    seen = []
    for owner, (path, token) in probes.items():
        try:
            if Path(path).read_text(encoding="utf-8") == token:
                seen.append(owner)
        except (OSError, UnicodeDecodeError):
            continue
    return seen


def unreadable(paths: list[str]) -> dict[str, str]:
    """Each path of ``paths`` that cannot be read here (a file read, a directory listed)."""
    problems: dict[str, str] = {}
    for name in paths:
        path = Path(name)
        try:
            if path.is_dir():
                os.listdir(path)
            else:
                with path.open("rb") as file:
                    file.read(1)
        except OSError as exc:
            problems[name] = exc.strerror or type(exc).__name__
    return problems


def unloadable(tasks: Mapping[str, str]) -> dict[str, str]:
    """Each op type of ``tasks`` whose factory cannot be loaded here (imported and found
    callable), with the reason."""
    from .._open import load_object

    problems: dict[str, str] = {}
    for op_type, spec in tasks.items():
        try:
            factory = load_object(spec, what="factory")
        except ConfigError as exc:
            problems[op_type] = str(exc)
            continue
        if not callable(factory):
            problems[op_type] = f"factory {spec!r} is not callable"
    return problems


__all__ = [
    "CHECK_WAIT_S",
    "PROBE_DIR",
    "REGISTRY",
    "Checked",
    "Confirmed",
    "HostChecks",
    "check_storage",
    "read_probes",
    "session_problem",
    "unloadable",
    "unreadable",
]
