"""What the timeline page (docs/timeline.md) shows of the model's edits and plans: the files
each ``apply_patch`` call changed, with their diffs, and the latest plan of each turn.

A patch is read from its ``patch_apply_end`` event and goes with the tool call of the same call
id (:class:`Patch`); a turn's plan is its last ``plan_update`` (:class:`Plan`). A diff is text a
model wrote, so the page treats it as any other untrusted text: every line is escaped, and a
long one is cut with a note (:func:`cut_diff`; the page's bounds are applied by
:mod:`._timeline_condense`).

Pure functions: the data from the protocol's events, the bounds, and the HTML.
"""

from __future__ import annotations

import posixpath

import attrs

from .._base import _protocol as p
from .._html import row, table, tag, text

#: The marks of a change's kind, as the patch's own summary writes them.
KIND_MARKS = {"add": "A", "delete": "D", "update": "M"}


@attrs.frozen
class FileDiff:
    """One file a patch changed (or, not applied, would have changed)."""

    path: str
    kind: str
    """``add``, ``delete`` or ``update``."""
    move_path: str | None
    """Where an updated file moved to."""
    diff: str
    """Its unified diff hunks (cut on a long page: ``diff_cut``)."""
    added: int
    """Lines the whole diff adds."""
    removed: int
    """Lines the whole diff removes."""
    lines: int
    """Lines of the whole diff."""
    diff_cut: bool = False
    """``diff`` is only its start (none of it when ``diff`` is empty)."""


@attrs.frozen
class Patch:
    """What an ``apply_patch`` call did (its ``patch_apply_end``)."""

    success: bool
    """Every change was made; else none was."""
    message: str
    """What the model read: the files changed, or what did not apply."""
    files: int
    """How many files it changed (or would have)."""
    changes: tuple[FileDiff, ...]
    """The files, in the patch's order (the first ones only, on a long page: ``files``)."""


@attrs.frozen
class PlanStep:
    """One step of a plan."""

    step: str
    status: str
    """``pending``, ``in_progress`` or ``completed``."""


@attrs.frozen
class Plan:
    """A turn's plan as its last ``plan_update`` left it."""

    turn_id: str | None
    time: str | None
    """When it was last updated."""
    updates: int
    """How many times the turn updated it."""
    steps: tuple[PlanStep, ...]
    explanation: str | None


def diff_figures(diff: str) -> tuple[int, int, int]:
    """Lines added, removed, and in all, of a unified diff (file headers, before the first
    ``@@``, are not counted as added or removed)."""
    lines = diff.splitlines()
    in_hunks = not any(line.startswith("@@") for line in lines)
    added = removed = 0
    for line in lines:
        if line.startswith("@@"):
            in_hunks = True
        elif in_hunks and line.startswith("+"):
            added += 1
        elif in_hunks and line.startswith("-"):
            removed += 1
    return added, removed, len(lines)


def file_diff(change: p.FileChange) -> FileDiff:
    """One change of a ``patch_apply_end``, whole."""
    added, removed, lines = diff_figures(change.diff)
    return FileDiff(
        change.path, change.kind.value, change.move_path, change.diff, added, removed, lines
    )


def patch_of(msg: p.PatchApplyEnd) -> Patch:
    """A ``patch_apply_end`` as the timeline keeps it, whole."""
    changes = tuple(file_diff(change) for change in msg.changes)
    return Patch(msg.success, msg.message, len(changes), changes)


def plan_of(msg: p.PlanUpdate, turn_id: str | None, time: str | None, updates: int) -> Plan:
    """A ``plan_update``, the ``updates``-th of its turn."""
    steps = tuple(PlanStep(step.step, step.status.value) for step in msg.plan)
    return Plan(turn_id, time, updates, steps, msg.explanation)


def cut_diff(change: FileDiff, max_lines: int, max_chars: int) -> FileDiff:
    """``change`` with its diff cut to at most ``max_lines`` lines and ``max_chars``
    characters, at a line's end where one is near enough (``diff_cut`` says so)."""
    diff = change.diff
    if change.lines <= max_lines and len(diff) <= max_chars:
        return change
    kept = "".join(diff.splitlines(keepends=True)[:max_lines])
    if len(kept) > max_chars:
        kept = kept[:max_chars]
        end = kept.rfind("\n")
        if end >= max_chars // 2:
            kept = kept[: end + 1]
    return attrs.evolve(change, diff=kept, diff_cut=True)


# --------------------------------------------------------------------------- the page

CSS = """\
pre.diff { white-space: pre-wrap; word-break: break-all; background: #fff; padding: 4px 0;
  border: 1px solid var(--rule); border-radius: 4px; margin: 4px 0; max-height: 480px;
  overflow: auto; }
pre.diff span { display: block; padding: 0 8px; min-height: 1.2em; }
pre.diff .add { background: #e6f6ea; color: #12512a; }
pre.diff .del { background: #fdecec; color: #8a1c1c; }
pre.diff .hunk { background: var(--band); color: var(--accent); }
pre.diff .meta { color: var(--muted); }
details.patch, div.file { margin: 2px 0; }
details.patch > summary code { color: var(--ink); }
.plus { color: var(--good); }
.minus { color: var(--bad); }
ol.plan { margin: 0; padding-left: 20px; }
"""


def _shown(path: str, cwd: str | None) -> str:
    """``path`` relative to the session's folder when it is inside it."""
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return posixpath.relpath(path, cwd)
    return path


def _line_class(line: str, in_hunks: bool) -> str:
    if line.startswith("@@"):
        return "hunk"
    if not in_hunks or line.startswith("\\"):
        return "meta"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return "ctx"


def diff_html(diff: str) -> str:
    """A diff as ``<pre class="diff">``: a block per line, classed ``add``, ``del``, ``hunk``,
    ``meta`` or ``ctx``, every line's text escaped (a diff is untrusted text)."""
    lines = diff.splitlines()
    in_hunks = not any(line.startswith("@@") for line in lines)
    out = []
    for line in lines:
        in_hunks = in_hunks or line.startswith("@@")
        out.append(f'<span class="{_line_class(line, in_hunks)}">{text(line)}</span>')
    return f'<pre class="diff">{"".join(out)}</pre>'


def _change_label(change: FileDiff, cwd: str | None) -> str:
    mark = KIND_MARKS.get(change.kind, "?")
    where = f"<code>{text(_shown(change.path, cwd))}</code>"
    if change.move_path is not None:
        where += f" → <code>{text(_shown(change.move_path, cwd))}</code>"
    figures = []
    if change.added:
        figures.append(f'<span class="plus">+{change.added:,}</span>')
    if change.removed:
        figures.append(f'<span class="minus">−{change.removed:,}</span>')
    return f"{text(mark)} {where}" + (f" ({' '.join(figures)})" if figures else "")


def _change_html(change: FileDiff, cwd: str | None) -> str:
    label = _change_label(change, cwd)
    if change.diff_cut and not change.diff:
        return f'<div class="file">{label} <span class="muted">(diff not kept)</span></div>'
    if not change.diff:
        return f'<div class="file">{label} <span class="muted">(no change of its text)</span></div>'
    note = ""
    if change.diff_cut:
        shown = len(change.diff.splitlines())
        note = f'<p class="note">Cut here: {shown:,} of its {change.lines:,} lines are shown.</p>'
    return (
        f'<details class="patch"><summary>{label}</summary>{diff_html(change.diff)}{note}</details>'
    )


def patch_html(patch: Patch, cwd: str | None) -> str:
    """A patch in the tool calls' table: applied or not, and each file with its diff behind a
    ``<details>`` (a click opens it, no script needed)."""
    files = f"{patch.files:,} file{'' if patch.files == 1 else 's'}"
    parts = [
        tag(f"patch applied: {files}", "good")
        if patch.success
        else tag(f"patch not applied: {files}", "bad")
    ]
    if not patch.success and patch.message:
        parts.append(f'<div class="note">{text(patch.message)}</div>')
    parts += [_change_html(change, cwd) for change in patch.changes]
    if any(change.diff_cut and not change.diff for change in patch.changes):
        parts.append(
            '<p class="note">A diff not kept: past the page\'s budget for diffs, only those of '
            "the first and last patches are.</p>"
        )
    if len(patch.changes) < patch.files:
        more = patch.files - len(patch.changes)
        parts.append(f'<p class="note">{more:,} more files are not listed.</p>')
    return "".join(parts)


_STATUS_KIND = {"completed": "good", "in_progress": "info"}


def _steps_html(plan: Plan) -> str:
    items = "".join(
        f"<li>{tag(step.status.replace('_', ' '), _STATUS_KIND.get(step.status, ''))} "
        f"{text(step.step)}</li>"
        for step in plan.steps
    )
    return f'<ol class="plan">{items}</ol>' if items else '<span class="muted">no step</span>'


def plans_html(plans: tuple[Plan, ...], total_updates: int) -> str:
    """The section of the plans: the latest of each turn, or nothing when none was set."""
    if not total_updates:
        return ""
    rows = [
        row(
            [
                text(plan.turn_id or "–"),
                text(plan.time[:19].replace("T", " ")) if plan.time else "–",
                f"{plan.updates:,}",
                _steps_html(plan),
                text(plan.explanation or ""),
            ],
            numeric=(2,),
        )
        for plan in plans
    ]
    listed_updates = sum(plan.updates for plan in plans)
    note = ""
    if listed_updates < total_updates:
        note = (
            f'<p class="note">The plans of the turns listed: {listed_updates:,} of '
            f"{total_updates:,} updates.</p>\n"
        )
    headers = ["turn", "updated", "updates", "plan", "why"]
    return (
        f"<h2>Plans ({total_updates:,} update{'' if total_updates == 1 else 's'})</h2>\n"
        f'{note}<p class="note">Each turn\'s plan as its last <code>update_plan</code> left '
        "it.</p>\n" + table(headers, rows, numeric=(2,), element_id="plans")
    )


__all__ = [
    "CSS",
    "KIND_MARKS",
    "FileDiff",
    "Patch",
    "Plan",
    "PlanStep",
    "cut_diff",
    "diff_figures",
    "diff_html",
    "file_diff",
    "patch_html",
    "patch_of",
    "plan_of",
    "plans_html",
]
