"""The ``apply_patch`` tool: the model edits files with a patch in Codex's format
(docs/tools.md).

A call goes: parse the patch, plan it against the files as they are (both pure,
:mod:`relay._exec._patch`), let the session's gate rule on the files it writes (it may ask
first), then write every change or none. It is reported as ``patch_apply_begin`` and
``patch_apply_end`` with each file's diff, then ``turn_diff``, the turn's changes so far as one
diff from the files as the turn found them; each file changed goes in the work-state record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._base import _protocol as p
from .._exec._patch import (
    APPLY_PATCH_DESCRIPTION,
    APPLY_PATCH_NAME,
    APPLY_PATCH_PARAMETERS,
    FileEdit,
    PatchError,
    apply_changes,
    file_diff,
    parse_patch,
    patch_summary,
    plan_patch,
    read_text,
    unified_diff,
)
from .._exec._real_work import in_thread
from ._tools import Tool, ToolContext, ToolError
from ._work_state import file_changed

_KINDS = {"add": p.ChangeKind.ADD, "delete": p.ChangeKind.DELETE, "update": p.ChangeKind.UPDATE}


def change_of(edit: FileEdit) -> p.FileChange:
    """The protocol's view of one planned edit: an update's diff, or (as Codex shows them) an
    added file's text and a deleted one's."""
    match edit.kind:
        case "add":
            shown = edit.new or ""
        case "delete":
            shown = edit.old or ""
        case _:
            shown = file_diff(edit)
    return p.FileChange(edit.path, _KINDS[edit.kind], shown, edit.move_path)


def turn_diff(found: Mapping[str, str | None], now: Mapping[str, str | None], root: str) -> str:
    """The turn's changes as one unified diff: each file from how the turn found it
    (``found``, None: absent) to how it is ``now``, in path order, paths relative to ``root``;
    unchanged files have none."""
    edits = [
        FileEdit.between(path, found[path], now.get(path))
        for path in sorted(found)
        if found[path] != now.get(path)
    ]
    return unified_diff(edits, root)


def _now(paths: Sequence[str]) -> dict[str, str | None]:
    return {path: _current(path) for path in paths}


def _current(path: str) -> str | None:
    try:
        return read_text(path)
    except PatchError:
        return None


async def _apply_patch(args: Mapping[str, Any], ctx: ToolContext) -> str:
    text = args.get("input", args.get("patch"))
    if not isinstance(text, str):
        raise ToolError("input must be the patch, as a string")
    try:
        hunks = parse_patch(text)
        edits = await in_thread(plan_patch, hunks, ctx.cwd, read_text)
    except PatchError as exc:
        raise ToolError(str(exc)) from None
    changes = tuple(sorted((change_of(edit) for edit in edits), key=lambda c: c.path))
    if ctx.check_writes is None:
        raise ToolError("this call cannot write files outside a session")
    refused, asked = await ctx.check_writes(changes)
    if refused is not None:
        ctx.report(p.ToolResult(p.CallStatus.DECLINED))
        return refused
    touched = [path for edit in edits for path in (edit.path, edit.move_path) if path]
    for path, before in (await in_thread(_now, [t for t in touched if t not in ctx.found])).items():
        ctx.found[path] = before
    # Let through unasked: as Codex says it of a patch no one was asked about.
    ctx.emit(p.PatchApplyBegin(ctx.call_id, ctx.turn_id, changes, not asked))
    try:
        await in_thread(apply_changes, edits)
    except (PatchError, OSError) as exc:
        message = str(exc) if isinstance(exc, PatchError) else f"cannot write: {exc.strerror}"
        ctx.emit(p.PatchApplyEnd(ctx.call_id, ctx.turn_id, False, changes, message))
        raise ToolError(f"{message}; no file was changed") from None
    summary = patch_summary(edits, ctx.cwd)
    ctx.emit(p.PatchApplyEnd(ctx.call_id, ctx.turn_id, True, changes, summary))
    now = await in_thread(_now, list(ctx.found))
    ctx.emit(p.TurnDiff(ctx.turn_id, turn_diff(ctx.found, now, ctx.cwd)))
    for edit in edits:
        ctx.note(file_changed(edit.path, edit.kind, edit.move_path))
    ctx.report(p.ToolResult(p.CallStatus.COMPLETED))
    return summary


APPLY_PATCH = Tool(APPLY_PATCH_NAME, APPLY_PATCH_DESCRIPTION, APPLY_PATCH_PARAMETERS, _apply_patch)


__all__ = ["APPLY_PATCH", "change_of", "turn_diff"]
