"""Generate the ``relay eval`` corpus: 24 scripted coding sessions with planted facts.

Each case is a small project (a fixture folder) and a session in it: the user states a
constraint, the model reads a source file, a long build log and a note, runs a check, and
states a decision; the context is compacted (automatically when a configuration's threshold is
low enough, and once more by a ``compact`` op); then the user asks to go on, and in every other
case the model reads a file it already read. The planted facts, one of each kind per case:

- ``file``: a constant in the source file read (``NAME = value``) and the file's path;
- ``command``: the result line the check printed, and its exit status (as the tool reported
  it or as the work-state record states it);
- ``output``: one line buried in the middle of the long build log;
- ``constraint``: what the user said must not happen;
- ``decision``: what the model decided, in its own message.

Two questions per case are asked after the session (the constant, the check's result).

    python examples/eval/generate.py [OUT]          # default: next to this file

writes ``OUT/cases/NN-name/`` (``ops.jsonl``, ``model.json``, ``probes.json``, ``fixture/``) and
``OUT/matrix.toml``. Everything is a function of this file: running it twice writes the same
bytes (the examples test checks the committed corpus against it).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

#: (project, source module, constant, unit of the log's planted figure)
PROJECTS = (
    ("billing", "invoice", "ROUNDING_DIGITS", "invoices"),
    ("search", "ranker", "TOP_K", "queries"),
    ("auth", "tokens", "TOKEN_TTL_SECONDS", "logins"),
    ("ingest", "batcher", "BATCH_SIZE", "records"),
    ("render", "layout", "GRID_COLUMNS", "pages"),
    ("sync", "retry", "MAX_RETRIES", "uploads"),
)
#: (directory the user protects, reason)
CONSTRAINTS = (
    ("migrations", "they are applied in production already"),
    ("vendor", "it is a pinned third-party copy"),
    ("api/v1", "external clients depend on it"),
    ("fixtures", "other teams' tests load them"),
)
#: (what the model decides, why)
DECISIONS = (
    ("add a regression test before changing the code", "the failure is intermittent"),
    ("keep the old function as a thin wrapper", "callers outside the repo use it"),
    ("fix the bug in the caller, not the library", "the library behaves as documented"),
    ("split the change into two commits", "the refactor and the fix are independent"),
)
CASES = 24
LOG_LINES = 240

MATRIX = """\
# The configurations docs/eval.md compares. Every one runs with the shell tool on and a
# threshold that makes the long build log trigger an automatic compaction mid-turn. Each names
# its work-state record, files read placed back and placement (all on by default), so that
# `local` is the history Codex makes and every row means what its name says whatever the
# defaults.

[[configuration]]
name = "local"
tools = { shell = true }
model_auto_compact_token_limit = 3000
recent_reads_token_budget = 0
features = { work_state = false }
compaction = { placement = "codex" }

[[configuration]]
name = "local+work_state"
tools = { shell = true }
model_auto_compact_token_limit = 3000
recent_reads_token_budget = 0
features = { work_state = true }
compaction = { placement = "codex" }

[[configuration]]
name = "local+masking"
tools = { shell = true }
model_auto_compact_token_limit = 3000
recent_reads_token_budget = 0
mask_keep_recent_tokens = 400
features = { work_state = false, tool_output_masking = true }
compaction = { placement = "codex" }

[[configuration]]
name = "token_budget"
tools = { shell = true }
model_auto_compact_token_limit = 3000
recent_reads_token_budget = 0
features = { work_state = false, token_budget = true }
compaction = { placement = "codex" }

[[configuration]]
name = "local+reads"
tools = { shell = true }
model_auto_compact_token_limit = 3000
recent_reads_token_budget = 1000
features = { work_state = false }
compaction = { placement = "codex" }

[[configuration]]
name = "local+work_state+reads"
tools = { shell = true }
model_auto_compact_token_limit = 3000
recent_reads_token_budget = 1000
features = { work_state = true }
compaction = { placement = "codex" }

[[configuration]]
name = "local+work_state+reads+masking"
tools = { shell = true }
model_auto_compact_token_limit = 3000
recent_reads_token_budget = 1000
mask_keep_recent_tokens = 400
features = { work_state = true, tool_output_masking = true }
compaction = { placement = "codex" }
"""


def _case(number: int) -> dict[str, Any]:
    project, module, constant, unit = PROJECTS[number % len(PROJECTS)]
    protected, reason = CONSTRAINTS[number % len(CONSTRAINTS)]
    decision, why = DECISIONS[(number // 2) % len(DECISIONS)]
    value = 3 + (number * 7) % 41
    issues, files_hit, status = 2 + number % 9, 1 + number % 4, number % 3
    planted = f"peak memory while processing {unit}: {600 + number * 37} MiB"
    source = f"src/{module}.py"
    note = "docs/NOTES.md"
    log = "logs/build.log"
    check = "tools/check.sh"
    result = f"check: {issues} issues in {files_hit} files"
    return {
        "name": f"{number + 1:02d}-{project}-{module}",
        "project": project,
        "source": source,
        "constant": f"{constant} = {value}",
        "value": value,
        "constraint": f"Constraint: never change anything under {protected}/; {reason}.",
        "decision": f"Decision: we {decision}, because {why}.",
        "planted": planted,
        "result": result,
        "status": status,
        "reread": number % 2 == 0,
        "files": {
            source: f'"""The {module} of {project}."""\n\n{constant} = {value}\n\n\n'
            f"def run(items):\n    return [item for item in items if item][:{constant}]\n",
            note: f"# Notes on {project}\n\nThe {module} module is the one users report "
            f"bugs against. Keep {protected}/ as it is.\n",
            log: _log(number, unit, planted),
            # A shell script starts in a millisecond where Python takes tens; the result line is
            # split so that reading the script would not give it.
            check: f"echo 'checking {project}...'\n"
            f"printf '%s%s\\n' '{result[:7]}' '{result[7:]}'\nexit {status}\n",
        },
    }


def _log(number: int, unit: str, planted: str) -> str:
    lines = []
    for line in range(LOG_LINES):
        if line == LOG_LINES // 2:
            lines.append(f"[{line:04d}] {planted}")
        else:
            lines.append(
                f"[{line:04d}] step {line % 17} processed {(line * 31 + number) % 997} {unit} "
                f"in {(line * 13) % 89 + 10} ms, cache {'hit' if line % 3 else 'miss'}"
            )
    return "\n".join(lines) + "\n"


def _turn(turn_id: str, text: str) -> dict[str, Any]:
    return {"id": turn_id, "op": {"type": "user_turn", "items": [{"type": "text", "text": text}]}}


def _done(turn_id: str) -> dict[str, Any]:
    return {"wait_for": {"type": "turn_complete", "match": {"turn_id": turn_id}}}


def _call(number: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"function_call": {"name": name, "arguments": arguments, "call_id": f"call-{number}"}}


def ops(case: dict[str, Any]) -> list[dict[str, Any]]:
    """The op script: the constraint, the investigation, ``compact``, the follow-up."""
    return [
        _turn("constraint", case["constraint"]),
        _done("constraint"),
        _turn("work", f"Users report wrong results from {case['project']}. Find out why."),
        _done("work"),
        {"id": "compact", "op": {"type": "compact"}},
        _done("compact"),
        _turn("after", "Go on with the fix."),
        _done("after"),
    ]


def model(case: dict[str, Any]) -> dict[str, Any]:
    """The model's side of the turns (compactions and questions are answered elsewhere)."""
    responses: list[Any] = ["Noted; I will keep to that."]
    responses += [
        _call(1, "read_file", {"path": case["source"]}),
        _call(2, "read_file", {"path": "logs/build.log"}),
        _call(3, "shell", {"argv": ["sh", "tools/check.sh"]}),
        _call(4, "read_file", {"path": "docs/NOTES.md"}),
        f"The check fails and the limit in {case['source']} looks wrong. {case['decision']}",
    ]
    if case["reread"]:
        responses.append(_call(5, "read_file", {"path": case["source"]}))
    responses.append("I am writing the test first.")
    return {"responses": responses}


def probes(case: dict[str, Any]) -> dict[str, Any]:
    """The facts and the questions of a case."""
    return {
        "facts": [
            {"kind": "path", "text": case["source"]},
            {"kind": "constant", "text": case["constant"]},
            {"kind": "check_result", "text": case["result"]},
            # The shell tool's form, and the work-state record's.
            {
                "kind": "exit_status",
                "forms": [
                    f"[exit code {case['status']}]",
                    f"tools/check.sh → exit {case['status']}",
                ],
            },
            {"kind": "log_line", "text": case["planted"]},
            {"kind": "constraint", "text": case["constraint"]},
            {"kind": "decision", "text": case["decision"]},
        ],
        "questions": [
            {
                "ask": f"What is {case['constant'].split(' = ')[0]} set to in {case['source']}?",
                "expect": case["constant"].replace(" ", r"\s*"),
            },
            {"ask": "What did the check report?", "expect": case["result"]},
        ],
    }


def _json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write(out: Path) -> None:
    """Write the corpus into ``out`` (its ``cases`` folder is replaced)."""
    shutil.rmtree(out / "cases", ignore_errors=True)
    for number in range(CASES):
        case = _case(number)
        folder = out / "cases" / case["name"]
        for path, text in case["files"].items():
            target = folder / "fixture" / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        lines = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in ops(case))
        (folder / "ops.jsonl").write_text(lines, encoding="utf-8")
        (folder / "model.json").write_text(_json(model(case)), encoding="utf-8")
        (folder / "probes.json").write_text(_json(probes(case)), encoding="utf-8")
    (out / "matrix.toml").write_text(MATRIX, encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent)
