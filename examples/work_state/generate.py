"""Generate a scripted coding session with 30 planted facts, for each compaction backend.

The session: three turns in which the user pins a constraint each, then a turn in which the
model lists ``src``, reads eight files and runs five commands (small Python programs of the
workspace that print a result line and exit with a known status), then ``compact``, then a
turn that asks to go on. The facts are what the model would need after the compaction and that
no summary here keeps: the path and content hash of every file read, every command with its
exit status, the numbers in the tool outputs, and the three pinned constraints.

    python examples/work_state/generate.py [OUT]        # default: next to this file

writes, into ``OUT``:

- ``workspace/``: the project the session works in (the ``cwd`` of every config);
- ``session.jsonl``: the op script; ``resume.jsonl``: the op script of the resumed session
  (one more ``compact``, one more turn);
- ``session.BACKEND.model.json`` and ``resume.BACKEND.model.json``: the model scripts, one per
  backend (``local``, ``remote_v1``, ``remote_v2``, ``token_budget``);
- ``BACKEND.config.toml``: the configuration that selects the backend, with
  ``[features] work_state = true`` and the ``shell`` tool on;
- ``facts.json``: the 30 facts, each a string that must appear in the first request after a
  compaction.

Run it (from ``OUT``):

    relay run session.jsonl --config local.config.toml --model-script session.local.model.json
    relay resume ROLLOUT resume.jsonl --config local.config.toml \\
        --model-script resume.local.model.json

Everything is a function of this file: running it twice writes the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

BACKENDS = ("local", "remote_v1", "remote_v2", "token_budget")

#: The user's pinned constraints (kept verbatim across every compaction).
PINNED = (
    "Constraint: never modify anything under vendor/; it is a pinned third-party copy.",
    "Constraint: the public API of src/parser.py must stay backwards compatible.",
    "Constraint: every change must keep the test suite passing on Python 3.9.",
)

#: The files the model reads, with their contents.
FILES: dict[str, str] = {
    "src/parser.py": "from .lexer import tokens\n\n\ndef parse(text):\n"
    "    return list(tokens(text))\n",
    "src/lexer.py": 'import re\n\nTOKEN = re.compile(r"\\s*(\\d+|\\S)")\n\n\ndef tokens(text):\n'
    "    return TOKEN.findall(text)\n",
    "src/ast.py": "class Node:\n    def __init__(self, kind, children=()):\n"
    "        self.kind = kind\n        self.children = list(children)\n",
    "tests/test_parser.py": "from src.parser import parse\n\n\ndef test_numbers():\n"
    '    assert parse("1 + 22") == ["1", "+", "22"]\n',
    "tests/test_lexer.py": "from src.lexer import tokens\n\n\ndef test_spaces():\n"
    '    assert tokens(" 7 ") == ["7"]\n',
    "pyproject.toml": '[project]\nname = "calc"\nversion = "0.4.1"\nrequires-python = ">=3.9"\n',
    "vendor/tokenizer.py": '# Third-party copy, do not edit.\nVERSION = "2.7.3"\n',
    "README.md": "# calc\n\nA tiny calculator used to exercise the parser.\n",
}

#: Files in the workspace the model does not read (they make the listing realistic).
OTHER_FILES: dict[str, str] = {
    "src/__init__.py": "",
    "src/eval.py": "def evaluate(node):\n    raise NotImplementedError\n",
}

#: The commands: a workspace program each, what it prints last, and its exit status.
COMMANDS: tuple[tuple[str, str, int], ...] = (
    ("tools/run_tests.py", "3 failed, 415 passed in 8.31s", 1),
    ("tools/lint.py", "lint: 0 errors, 12 warnings", 0),
    ("tools/coverage.py", "coverage: 87.4% of 2913 lines", 2),
    ("tools/bench.py", "parse_file: 1842 calls/s", 0),
    ("tools/typecheck.py", "typecheck: 7 errors in 3 files", 1),
)

SUMMARY = "We looked at the calculator's parser and its tests; work continues."
COMPACTION_BLOB = "b3BhcXVlLXN0YXRlLWZyb20tdGhlLXByb3ZpZGVy"


def _program(last_line: str, status: int) -> str:
    # The result line is split in the source, so that reading the program would not give it.
    head, tail = last_line[: len(last_line) // 2], last_line[len(last_line) // 2 :]
    return (
        f'import sys\n\nprint("running...")\nprint({json.dumps(head)} + {json.dumps(tail)})\n'
        f"sys.exit({status})\n"
    )


def workspace_files() -> dict[str, str]:
    """Every file of the workspace, by relative path."""
    files = {**FILES, **OTHER_FILES}
    for path, last_line, status in COMMANDS:
        files[path] = _program(last_line, status)
    return files


def content_hash(text: str) -> str:
    """The hash the work-state record states for a file: 16 hex digits of its SHA-256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def facts() -> list[str]:
    """The 30 facts: 8 paths and 8 hashes of files read, 5 commands with their exit status,
    6 numbers from tool outputs, 3 pinned constraints."""
    out: list[str] = []
    for path, text in FILES.items():
        out += [path, content_hash(text)]
    for path, _, status in COMMANDS:
        out.append(f"python3 {path} → exit {status}")
    for _, last_line, _ in COMMANDS:
        out.append(last_line)
    src = sorted(p for p in workspace_files() if p.startswith("src/"))
    out.append(f"src ({len(src)} entries)")
    out += PINNED
    assert len(out) == 30
    return out


def op_script() -> list[dict[str, Any]]:
    """The steps of the session: three pinned constraints, the work, ``compact``, one turn."""
    steps: list[dict[str, Any]] = []
    for number, text in enumerate(PINNED, 1):
        steps += [_turn(f"pin{number}", text, pin=True), _ended(number)]
    steps += [_turn("work", "The tests fail. Find out why and report what you see."), _ended(4)]
    steps += [{"id": "compact", "op": {"type": "compact"}}, _ended(5)]
    steps += [_turn("after", "Go on with the fix."), _ended(6)]
    return steps


def resume_op_script() -> list[dict[str, Any]]:
    """The steps of the resumed session: ``compact`` again, then one turn."""
    return [
        {"id": "compact-2", "op": {"type": "compact"}},
        _ended(1),
        _turn("resumed", "Where were we?"),
        _ended(2),
    ]


def _ended(count: int) -> dict[str, Any]:
    # wait_for counts events from the start of the script.
    return {"wait_for": {"type": "turn_complete", "count": count}}


def _turn(turn_id: str, text: str, *, pin: bool = False) -> dict[str, Any]:
    op: dict[str, Any] = {"type": "user_turn", "items": [{"type": "text", "text": text}]}
    if pin:
        op["pin"] = True
    return {"id": turn_id, "op": op}


def _call(number: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "function_call": {"name": name, "arguments": arguments, "call_id": f"call-{number:02d}"}
    }


def _work_replies() -> list[Any]:
    calls: list[tuple[str, dict[str, Any]]] = [("list_dir", {"path": "src"})]
    calls += [("read_file", {"path": path}) for path in FILES]
    calls += [("shell", {"argv": ["python3", path]}) for path, _, _ in COMMANDS]
    replies: list[Any] = [_call(n, name, args) for n, (name, args) in enumerate(calls, 1)]
    replies.append("Three tests fail in the parser; lint is clean.")
    return replies


def _compaction(backend: str) -> tuple[list[Any], list[Any]]:
    """What a compaction by ``backend`` takes from the script: (responses, compact)."""
    if backend == "local":
        return [SUMMARY], []
    if backend == "remote_v2":
        return [{"compaction": COMPACTION_BLOB}], []
    if backend == "remote_v1":
        output = [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}
            for t in ("The tests fail. Find out why and report what you see.",)
        ]
        output.append({"type": "compaction", "encrypted_content": COMPACTION_BLOB})
        return [], [{"output": output}]
    return [], []


def model_script(backend: str) -> dict[str, Any]:
    """The model's side of the session for ``backend``."""
    responses: list[Any] = ["Understood."] * len(PINNED)
    responses += _work_replies()
    compaction_replies, compact = _compaction(backend)
    responses += compaction_replies
    responses.append("Picking up the fix.")
    return {"responses": responses, "compact": compact}


def resume_model_script(backend: str) -> dict[str, Any]:
    """The model's side of the resumed session for ``backend``."""
    compaction_replies, compact = _compaction(backend)
    return {"responses": [*compaction_replies, "We were fixing the parser."], "compact": compact}


def config_toml(backend: str, workspace: str = "workspace") -> str:
    """The configuration that selects ``backend``."""
    lines = [
        f"# The work-state example, compacted by the {backend} backend.",
        f'cwd = "{workspace}"',
    ]
    lines += ["tools = { shell = true }", "", "[features]", "work_state = true"]
    if backend == "token_budget":
        lines.append("token_budget = true")
    if backend == "remote_v2":
        lines.append("remote_compaction_v2 = true")
    if backend in {"remote_v1", "remote_v2"}:
        remote = backend.removeprefix("remote_")
        lines += ["", "[model_providers.scripted]", f'remote_compaction = "{remote}"']
    return "\n".join(lines) + "\n"


def write(out: Path) -> None:
    """Write the workspace, the scripts, the configurations and the facts into ``out``."""
    for path, text in workspace_files().items():
        target = out / "workspace" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    _jsonl(out / "session.jsonl", op_script())
    _jsonl(out / "resume.jsonl", resume_op_script())
    for backend in BACKENDS:
        _json(out / f"session.{backend}.model.json", model_script(backend))
        _json(out / f"resume.{backend}.model.json", resume_model_script(backend))
        (out / f"{backend}.config.toml").write_text(config_toml(backend), encoding="utf-8")
    _json(out / "facts.json", facts())


def _json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _jsonl(path: Path, steps: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(step, ensure_ascii=False) + "\n" for step in steps)
    path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent)
