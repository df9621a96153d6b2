"""``relay show``'s transcript of patches and plans: each patch, applied or not, with each file
it changed and the start of that file's diff, and each plan as the model set it."""

from __future__ import annotations

from relay._base import _protocol as p
from relay._cli._transcript import DIFF_LINES, render_transcript
from relay._rollout._reader import parse_rollout
from tests.rollout.test_rollout_reader import event, item, meta, text_of

DIFF = "@@ -1,3 +1,3 @@\n import os\n-print('old')\n+print('new')\n x = 1\n"


def shown(*msgs: p.EventMsg) -> list[str]:
    """The transcript lines of ``msgs`` in a turn, after its call and before its end."""
    text = text_of(
        meta(),
        event(p.TurnStarted("t1", None, 0.0)),
        item(p.FunctionCall("apply_patch", "{}", "c1")),
        *(event(msg) for msg in msgs),
        event(p.TurnComplete("t1", None, 5)),
    )
    lines = list(render_transcript(parse_rollout(text)))
    start = next(n for n, line in enumerate(lines) if "⚙ apply_patch" in line) + 1
    return lines[start:-1]


def test_an_applied_patch_shows_each_file_and_its_diff() -> None:
    changes = [
        p.FileChange("/w/src/app.py", p.ChangeKind.UPDATE, DIFF),
        p.FileChange("/w/notes.md", p.ChangeKind.ADD, "@@ -0,0 +1 @@\n+# Notes\n"),
        p.FileChange("/w/old.txt", p.ChangeKind.UPDATE, "", "/w/new.txt"),
        p.FileChange("/w/gone.txt", p.ChangeKind.DELETE, "@@ -1 +0,0 @@\n-bye\n"),
    ]
    assert shown(p.PatchApplyEnd("c1", "t1", True, changes, "Done.")) == [
        "  ✎ patch c1 applied to 4 files",
        "    M /w/src/app.py",
        "      @@ -1,3 +1,3 @@",
        "       import os",
        "      -print('old')",
        "      +print('new')",
        "       x = 1",
        "    A /w/notes.md",
        "      @@ -0,0 +1 @@",
        "      +# Notes",
        "    M /w/old.txt → /w/new.txt",
        "    D /w/gone.txt",
        "      @@ -1 +0,0 @@",
        "      -bye",
    ]


def test_a_patch_not_applied_says_why_and_names_its_files_without_diffs() -> None:
    change = p.FileChange("/w/src/app.py", p.ChangeKind.UPDATE, DIFF)
    end = p.PatchApplyEnd("c1", "t1", False, [change], "src/app.py: lines not found")
    assert shown(end) == [
        "  ✎ patch c1 not applied (1 file): src/app.py: lines not found",
        "    M /w/src/app.py",
    ]


def test_a_long_diff_is_cut_and_its_control_characters_are_shown() -> None:
    diff = "@@ -0,0 +1,100 @@\n+\x1b[2Jclear\n" + "".join(f"+line {n}\n" for n in range(99))
    change = p.FileChange("/w/a.txt", p.ChangeKind.ADD, diff)
    lines = shown(p.PatchApplyEnd("c1", "t1", True, [change], "Done."))
    assert lines[2:4] == ["      @@ -0,0 +1,100 @@", "      +\\x1b[2Jclear"]
    assert len(lines) == 2 + DIFF_LINES + 1
    assert lines[-1] == f"      … {101 - DIFF_LINES} more lines"


def test_a_plan_shows_its_steps_and_why() -> None:
    plan = [
        p.PlanStep("read the code", p.StepStatus.COMPLETED),
        p.PlanStep("fix it", p.StepStatus.IN_PROGRESS),
    ]
    assert shown(p.PlanUpdate("t1", plan, "halfway")) == [
        "  ☰ plan: [completed] read the code; [in_progress] fix it (halfway)"
    ]
    assert shown(p.PlanUpdate("t1", plan[:1])) == ["  ☰ plan: [completed] read the code"]
