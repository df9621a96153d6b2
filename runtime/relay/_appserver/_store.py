"""The thread store of ``relay app-server``: the rollouts under the rollout directory and
under the archive beside it, as the threads ``thread/list``, ``thread/read``,
``thread/name/set``, ``thread/archive`` and ``thread/unarchive`` show and change
(docs/codex-compat.md).

A thread's rollout is ``rollout-STAMP-ID.jsonl``, under ``YYYY/MM/DD`` of the rollout
directory while it is live and directly in the archive (``archived_sessions`` beside the
rollout directory, as Codex keeps its own) once archived. What the rollout does not say (the
name a client gave the thread, the thread it was forked from, the prompt cache key it shares
with that thread) is in its *sidecar*, ``rollout-STAMP-ID.thread.json`` beside it, which moves
with it (docs/decisions.md, "A thread's name lives beside its rollout"). Every function here
is plain and blocking: the server runs them in a worker thread, one at a time.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from .._base._json import loads
from ._params import invalid

#: A rollout's file name: its creation stamp and its session id.
ROLLOUT_NAME = re.compile(r"rollout-(\d{4})-(\d\d)-(\d\d)T(\d\d-\d\d-\d\d)-(.+)\.jsonl")
#: The sidecar's suffix, in place of ``.jsonl``.
SIDECAR_SUFFIX = ".thread.json"
#: How far a summary reads into a rollout for its first user message.
PREVIEW_SCAN_BYTES = 4 * 1024 * 1024


def archive_root(rollout_root: Path) -> Path:
    """Where archived rollouts go: ``archived_sessions`` beside the rollout directory."""
    return rollout_root.parent / "archived_sessions"


def sidecar_path(rollout: Path) -> Path:
    """The sidecar of the rollout ``rollout``."""
    return rollout.with_name(rollout.name.removesuffix(".jsonl") + SIDECAR_SUFFIX)


def read_sidecar(rollout: Path) -> dict[str, Any]:
    """What the sidecar of ``rollout`` records ({} when it has none, or one that does not
    read: it only adds to the rollout)."""
    try:
        data = json.loads(sidecar_path(rollout).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_sidecar(rollout: Path, **changes: Any) -> dict[str, Any]:
    """Record ``changes`` in the sidecar of ``rollout`` (written whole, then renamed into
    place: a reader sees the old one or the new one); what it holds now."""
    data = {**read_sidecar(rollout), **changes}
    target = sidecar_path(rollout)
    temporary = target.with_name(target.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        json.dump(data, file, ensure_ascii=False)
    os.replace(temporary, target)
    return data


@attrs.frozen
class RolloutFile:
    """A rollout, as its file name and the file system say."""

    path: Path
    """The file."""
    thread_id: str
    """Its session id."""
    stamp: str
    """Its creation stamp (``YYYY-MM-DDTHH-MM-SS``, UTC): sorts as the time."""
    archived: bool
    """Whether it is in the archive."""

    def mtime(self) -> int:
        """When it was last written, in Unix seconds (0: gone meanwhile)."""
        try:
            return int(self.path.stat().st_mtime)
        except OSError:
            return 0


def rollout_file(path: Path, *, archived: bool) -> RolloutFile | None:
    """The rollout ``path`` names (None: the name is no rollout's)."""
    match = ROLLOUT_NAME.fullmatch(path.name)
    if match is None:
        return None
    year, month, day, time, thread_id = match.groups()
    return RolloutFile(path, thread_id, f"{year}-{month}-{day}T{time}", archived)


def rollout_files(root: Path, *, archived: bool) -> Iterator[RolloutFile]:
    """The rollouts under ``root`` (the rollout directory, or the archive)."""
    pattern = "rollout-*.jsonl" if archived else "**/rollout-*.jsonl"
    for path in root.glob(pattern):
        found = rollout_file(path, archived=archived)
        if found is not None:
            yield found


def locate(rollout_root: Path, thread_id: str) -> RolloutFile | None:
    """The rollout of ``thread_id``, live or archived (the live one, if both are)."""
    if "/" in thread_id or "*" in thread_id or thread_id.startswith("."):
        return None
    for root, archived in ((rollout_root, False), (archive_root(rollout_root), True)):
        pattern = f"rollout-*-{thread_id}.jsonl"
        paths = sorted(root.glob(pattern if archived else f"**/{pattern}"))
        if paths:
            return rollout_file(paths[-1], archived=archived)
    return None


@attrs.frozen
class Summary:
    """What a listing shows of a rollout without reading it all."""

    file: RolloutFile
    """The file."""
    created_at: int
    """Unix seconds of the session's creation."""
    cwd: str
    """Its working directory at creation."""
    model: str | None
    """Its model at creation."""
    model_provider: str
    """Its provider."""
    version: str
    """The relay that wrote it."""
    preview: str | None
    """Its first user message (None: it has none yet)."""
    sidecar: dict[str, Any] = attrs.field(factory=dict, eq=False)
    """What its sidecar records."""
    parent_id: str | None = None
    """A sub-agent's: its parent's thread id (None: a root thread)."""
    agent_path: str | None = None
    """A sub-agent's: its place in its tree."""
    agent_role: str | None = None
    """A sub-agent's: the role it was spawned in."""

    @property
    def name(self) -> str | None:
        """The name a client gave the thread."""
        name = self.sidecar.get("name")
        return name if isinstance(name, str) else None

    @property
    def forked_from(self) -> str | None:
        """The thread it was forked from."""
        origin = self.sidecar.get("forked_from")
        return origin if isinstance(origin, str) else None


def _seconds(created: Any, stamp: str) -> int:
    if isinstance(created, str):
        try:
            return int(datetime.fromisoformat(created).timestamp())
        except ValueError:
            pass
    date, _, time = stamp.partition("T")
    return int(datetime.fromisoformat(f"{date}T{time.replace('-', ':')}+00:00").timestamp())


def summarize(file: RolloutFile) -> Summary | None:
    """The summary of ``file`` (None: it cannot be read, or has no ``session_meta``)."""
    meta: dict[str, Any] | None = None
    preview: str | None = None
    try:
        with file.path.open("rb") as lines:
            read = 0
            for raw in lines:
                read += len(raw)
                try:
                    record = loads(raw)
                except ValueError:
                    continue
                if not isinstance(record, dict) or not isinstance(record.get("payload"), dict):
                    continue
                payload = record["payload"]
                if meta is None:
                    if record.get("type") != "session_meta":
                        return None
                    meta = payload
                elif record.get("type") == "event_msg" and payload.get("type") == "user_message":
                    message = payload.get("message")
                    preview = message if isinstance(message, str) else ""
                    break
                if read > PREVIEW_SCAN_BYTES:
                    break
    except OSError:
        return None
    if meta is None:
        return None
    return Summary(
        file,
        created_at=_seconds(meta.get("created"), file.stamp),
        cwd=str(meta.get("cwd") or ""),
        model=meta.get("model") if isinstance(meta.get("model"), str) else None,
        model_provider=str(meta.get("model_provider") or ""),
        version=str(meta.get("relay_version") or ""),
        preview=preview,
        sidecar=read_sidecar(file.path),
        parent_id=_text(meta.get("parent_id")),
        agent_path=_text(meta.get("agent_path")),
        agent_role=_text(meta.get("agent_role")),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


#: The source kinds of ``thread/list`` a sub-agent's thread is of, and those a root thread is
#: of: relay records no face that started a root, which passes for any of them.
SUB_AGENT_KINDS = frozenset({"subAgent", "subAgentThreadSpawn"})
ROOT_KINDS = frozenset({"cli", "vscode", "exec", "appServer", "unknown"})


@attrs.frozen
class ListQuery:
    """What ``thread/list`` asks for, in relay's terms."""

    archived: bool = False
    """List the archive instead of the live rollouts."""
    cursor: str | None = None
    """Where the previous page ended (opaque to the client)."""
    limit: int = 25
    """The page size."""
    cwds: frozenset[str] | None = None
    """Only threads created in one of these folders (None: any)."""
    providers: frozenset[str] | None = None
    """Only threads of these providers (None: any)."""
    search: str | None = None
    """Only threads whose title (name, else preview) holds this text."""
    excluded: frozenset[str] = frozenset()
    """Threads left out."""
    by_updated: bool = False
    """Sort by the last write instead of the creation."""
    ascending: bool = False
    """Oldest first instead of newest first."""
    no_threads: bool = False
    """A filter no relay thread passes (a section: relay has none)."""
    kinds: frozenset[str] = frozenset()
    """Only threads of these source kinds (``sourceKinds``); empty: the root threads, not the
    sub-agents', as Codex lists its interactive sources by default."""


def _created(file: RolloutFile) -> float:
    """When the session was created, to the microsecond its ``session_meta`` gives (its file
    name's stamp is to the second only)."""
    try:
        with file.path.open("rb") as lines:
            record = loads(lines.readline())
        created = record["payload"]["created"]
        return datetime.fromisoformat(created).timestamp()
    except (OSError, ValueError, TypeError, KeyError):
        return float(_seconds(None, file.stamp))


def _key(file: RolloutFile, *, by_updated: bool) -> str:
    if by_updated:
        try:
            first = f"{file.path.stat().st_mtime_ns:024d}"
        except OSError:
            first = "0" * 24
    else:
        first = f"{_created(file):020.6f}"
    return f"{first}|{file.thread_id}"


def encode_cursor(key: str) -> str:
    """The opaque cursor of a position in a listing."""
    return base64.urlsafe_b64encode(key.encode("utf-8")).decode("ascii")


def decode_cursor(cursor: str) -> str:
    """The position an opaque cursor stands for.

    Raises:
        RpcError: it is no cursor this server gave.
    """
    try:
        key = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        raise invalid("cursor", f"{cursor!r} is not a cursor this server gave") from None
    if "|" not in key:
        raise invalid("cursor", f"{cursor!r} is not a cursor this server gave")
    return key


def _passes(summary: Summary, query: ListQuery) -> bool:
    if summary.preview is None:
        return False  # no user message yet: nothing to show, as Codex leaves such out
    if query.cwds is not None and os.path.abspath(summary.cwd or "/") not in query.cwds:
        return False
    if query.providers is not None and summary.model_provider not in query.providers:
        return False
    kinds = query.kinds or ROOT_KINDS
    if not kinds & (SUB_AGENT_KINDS if summary.parent_id is not None else ROOT_KINDS):
        return False
    title = summary.name or summary.preview
    return query.search is None or query.search in title


def list_page(rollout_root: Path, query: ListQuery) -> tuple[list[Summary], str | None]:
    """One page of the threads ``query`` asks for, in its order, and the cursor of the next
    page (None: this is the last)."""
    if query.no_threads:
        return [], None
    root = archive_root(rollout_root) if query.archived else rollout_root
    keyed = sorted(
        (
            (_key(file, by_updated=query.by_updated), file)
            for file in rollout_files(root, archived=query.archived)
            if file.thread_id not in query.excluded
        ),
        key=lambda pair: pair[0],
        reverse=not query.ascending,
    )
    after = decode_cursor(query.cursor) if query.cursor else None
    page: list[Summary] = []
    for key, file in keyed:
        if after is not None and (key <= after if query.ascending else key >= after):
            continue
        summary = summarize(file)
        if summary is None or not _passes(summary, query):
            continue
        if len(page) == query.limit:
            return page, encode_cursor(_key(page[-1].file, by_updated=query.by_updated))
        page.append(summary)
    return page, None


def _private_dir(directory: Path) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)


def _move(file: RolloutFile, target: Path) -> Path:
    """Move the rollout and its sidecar to ``target``; the new path."""
    _private_dir(target.parent)
    side = sidecar_path(file.path)
    os.replace(file.path, target)
    if side.exists():
        os.replace(side, sidecar_path(target))
    return target


def archive(rollout_root: Path, file: RolloutFile) -> Path:
    """Move a live rollout into the archive; its new path."""
    return _move(file, archive_root(rollout_root) / file.path.name)


def unarchive(rollout_root: Path, file: RolloutFile) -> Path:
    """Move an archived rollout back under the rollout directory, in the folder of its
    creation day; its new path."""
    date = file.stamp.partition("T")[0].split("-")
    return _move(file, rollout_root.joinpath(*date, file.path.name))


def paginate(
    ids: Iterable[str], cursor: str | None, limit: int | None
) -> tuple[list[str], str | None]:
    """A page of ``ids`` in order after ``cursor`` (``thread/loaded/list``), and the next
    cursor."""
    ordered = sorted(ids)
    after = decode_cursor(cursor) if cursor else None
    rest = [each for each in ordered if after is None or f"|{each}" > after]
    if limit is None or len(rest) <= limit:
        return rest, None
    page = rest[:limit]
    return page, encode_cursor(f"|{page[-1]}")


__all__ = [
    "ROOT_KINDS",
    "SUB_AGENT_KINDS",
    "ListQuery",
    "RolloutFile",
    "Summary",
    "archive",
    "archive_root",
    "decode_cursor",
    "encode_cursor",
    "list_page",
    "locate",
    "paginate",
    "read_sidecar",
    "rollout_file",
    "rollout_files",
    "sidecar_path",
    "summarize",
    "unarchive",
    "write_sidecar",
]
