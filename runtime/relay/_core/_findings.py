"""What a command's output found: the lines that name a failure or an error, whatever the
program that printed them.

A test runner, a compiler or a linter states what went wrong in lines of a few known shapes:
pytest's ``FAILED path::test``, unittest's ``FAIL: test (module.Case)``, go's ``--- FAIL:``,
cargo's ``test name ... FAILED`` and ``panicked at``, jest's ``●`` and vitest's ``FAIL`` and
``×``, mocha's numbered ``1) suite`` headings, rspec's ``rspec ./spec/x_spec.rb:12 #``, Maven's
``[ERROR]`` and Gradle's ``> test() FAILED``, tsc's ``error TS2322``, gcc's and clang's
``file:line:col: error:``, eslint's ``line:col  error  message  rule``, ruff's rule codes and
mypy's ``file:line: error:``. The lines that carry a message (``AssertionError``,
``expected``, ``but was``) come beside them. :func:`failure_lines` keeps such lines, those that
name what failed first, within a bound: the work-state record states them for every command
(``docs/compaction.md``). A build tool's advice and the frame around its findings (Maven's
``Please refer to`` and ``[INFO]`` lines, cargo's ``to rerun pass``, a diff's legend, quoted
source) are no findings, and :func:`last_line` is the last line that says how the run ended.

Invariant: plain functions of their arguments, scanning characters (no pattern engine): they
are tested against real outputs of each program (``tests/core/runner_outputs``) and with
outputs of any shape.
"""

from __future__ import annotations

from collections.abc import Iterable

#: At most this many lines of one output are kept.
FOUND_MAX_LINES = 8
#: Each kept line is cut to this many characters.
FOUND_LINE_CHARS = 200
#: All kept lines together take at most this many characters.
FOUND_TOTAL_CHARS = 400
#: Lines longer than this are not read whole: the scan looks at their first characters only.
_SCAN_CHARS = 2000

#: A line that starts with one of these names what failed (after its indentation).
_NAMING_STARTS = (
    "FAILED ",  # pytest's short summary
    "ERROR ",  # pytest's collection or fixture errors
    "FAIL: ",  # unittest
    "ERROR: ",  # unittest
    "--- FAIL:",  # go test
    "FAIL\t",  # go test, a package
    "FAIL ",  # jest, vitest: a file
    "● ",  # jest: a test
    "✕ ",  # jest: a test
    "× ",  # vitest: a test
    "✗ ",
    "rspec ./",  # rspec's list of failed examples
    "---- ",  # cargo: a failed test's output
    "[ERROR]",  # Maven
    "error[",  # rustc
    "error:",  # cargo, rustc, many tools
    "Error:",
)

#: A line that holds one of these names what failed wherever it stands.
_NAMING_PARTS = (
    " FAILED",  # cargo's "test x ... FAILED", Gradle's "Test > name() FAILED"
    ": error:",  # gcc, clang, mypy
    ": error ",
    ": fatal error:",
    " error TS",  # tsc
    "): error",  # tsc
    "panicked at",  # cargo
    " failing",  # mocha's count
    " failed,",  # jest, vitest counts
    " failed ",
)

#: A line that holds one of these carries a failure's message.
_MESSAGE_PARTS = (
    "AssertionError",
    "AssertionFailedError",
    "Assertion",
    "assertion",
    "Error:",
    "Exception",
    "expected",
    "Expected",
    "but was",
    "Received",
    "received",
    "got:",
    "Failure",
    "failure",
    "left:",
    "right:",
    "not assignable",
    "undefined",
    "undeclared",
    "warning:",
    "assert ",
    "E   ",  # pytest: the assertion's lines
)


#: A line that starts with one of these (after a ``[LEVEL]`` tag) is a build tool's advice or
#: the frame around its findings: it names no test and carries no message of its own.
_BOILERPLATE_STARTS = (
    "Please refer to",  # Maven: where the reports are
    "-> [Help",  # Maven
    "[Help ",  # Maven: the link
    "Re-run Maven",
    "To see the full stack trace",
    "For more information about the errors",
    "Failed to execute goal",  # Maven: the plugin that failed; the failures are apart
    "error: test failed, to rerun pass",  # cargo
    "> There were failing tests. See the report",  # Gradle
    "expect(received)",  # jest: the matcher; its Expected and Received lines follow
)
#: Words of a diff's legend (``- Expected``, ``+ Received``, ``+ expected - actual``).
_LEGEND_WORDS = frozenset(("+", "-", "expected", "actual", "received"))
#: A last line that starts with one of these (after its tag) times or closes the run.
_TRAILER_STARTS = (
    "Total time:",  # Maven
    "Finished at:",
    "Duration ",  # vitest
    "Start at ",
    "Time:",  # jest
    "Snapshots:",
    "Ran all test suites",
)


def _untagged(line: str) -> str:
    """``line`` without a leading level tag such as Maven's ``[ERROR]`` or ``[INFO]``."""
    if line.startswith("["):
        end = line.find("]", 1, 12)
        if end > 1 and line[1:end].isalpha() and line[1:end].isupper():
            return line[end + 1 :].strip()
    return line


def _is_source_excerpt(line: str) -> bool:
    """A line of the test's source a runner quotes: pytest's ``>       assert x == 3``, or
    jest's and vitest's ``> 32 |     expect(x)`` and ``15| expect(x)``."""
    if line.startswith(">   "):
        return True
    number, bar, _ = line.lstrip("> ").partition("|")
    return bool(bar) and number.strip().isdecimal()


def _is_boilerplate(line: str) -> bool:
    """A line of advice, a bare heading (``failures:``), a diff's legend or a line of source."""
    if _is_source_excerpt(line):
        return True
    text = _untagged(line)
    if text.startswith(_BOILERPLATE_STARTS):
        return True
    if text.endswith(":") and " " not in text:
        return True
    words = [word for word in text.lower().split() if not word.isdecimal()]
    return bool(words) and words[0] in "+-" and set(words) <= _LEGEND_WORDS


def _is_rule_line(line: str) -> bool:
    """A linter's finding: ``3:7  error  message  rule`` (eslint), or a rule code such as
    ``F401`` or ``E501`` beside a ``path:line:col:`` (ruff), or ruff's ``--> path:line:col``."""
    head = line.split(None, 2)
    if len(head) >= 2 and _is_position(head[0]) and head[1] in ("error", "warning"):
        return True
    if line.startswith("-->"):
        return True
    colon = line.find(": ")
    if colon > 0 and _has_position_end(line[:colon]):
        code = line[colon + 2 :].split(None, 1)
        return bool(code) and _is_rule_code(code[0])
    first = line.split(None, 1)
    return bool(first) and _is_rule_code(first[0]) and len(first) > 1


def _is_position(text: str) -> bool:
    """``12:7``: a line and a column."""
    line, colon, column = text.partition(":")
    return bool(colon) and line.isdecimal() and column.isdecimal()


def _has_position_end(text: str) -> bool:
    """``path:12:7`` or ``path:12``: a place in a file."""
    parts = text.rsplit(":", 2)
    return len(parts) >= 2 and parts[-1].isdecimal() and (len(parts) == 2 or parts[-2].isdecimal())


def _is_rule_code(word: str) -> bool:
    """``F401``, ``E501``, ``PLR0913``: capitals, then three or four digits."""
    letters = len(word) - len(word.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    digits = word[letters:]
    return 1 <= letters <= 4 and 3 <= len(digits) <= 4 and digits.isdecimal()


def _is_numbered_heading(line: str) -> bool:
    """mocha's ``1) suite`` or rspec's ``1) Money total``: a failure's number, then its name."""
    number, paren, rest = line.partition(") ")
    return bool(paren) and number.isdecimal() and len(number) <= 4 and bool(rest.strip())


def line_rank(line: str) -> int:
    """How much ``line`` (stripped) says about a failure: 2, it names what failed or erred; 1,
    it carries a failure's message; 0, neither (a build tool's advice among them)."""
    if line.startswith("[INFO]") or _is_boilerplate(line):  # Maven's passing news at INFO
        return 0
    return _plain_rank(line)


def _plain_rank(line: str) -> int:
    if line.startswith(_NAMING_STARTS) or _is_numbered_heading(line) or _is_rule_line(line):
        return 2
    if any(part in line for part in _NAMING_PARTS) or line.endswith(" failed"):
        return 2
    if line.startswith("Found ") and " error" in line:  # ruff's count
        return 2
    if any(part in line for part in _MESSAGE_PARTS):
        return 1
    return 0


def _lines(output: str) -> Iterable[str]:
    for raw in output.splitlines():
        line = raw[:_SCAN_CHARS].strip()
        if line and "\x00" not in line and line != "[ERROR]":
            yield line


def failure_lines(output: str) -> list[str]:
    """The lines of ``output`` that name what failed or erred, in the order they came.

    Lines that name a failure come first in importance, then those that carry its message;
    a line printed twice (a runner's list and its summary) is kept once. At most
    :data:`FOUND_MAX_LINES` lines of :data:`FOUND_LINE_CHARS` characters, and
    :data:`FOUND_TOTAL_CHARS` in all. An output that names no failure gives none.
    """
    ranked: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    heading: tuple[int, str] | None = None
    advice: str | None = None
    for at, line in enumerate(_lines(output)):
        rank = line_rank(line)
        cut = line[:FOUND_LINE_CHARS]
        if advice is None and rank == 0 and _plain_rank(line) == 2:
            advice = cut
        if rank == 2 and heading is not None and _is_position(line.split(None, 1)[0]):
            # eslint names the file on a line of its own above its findings.
            ranked.append((2, heading[0], heading[1]))
            seen.add(heading[1])
            heading = None
        elif rank == 0 and " " not in line and "/" in line:
            heading = (at, cut)
        if rank and cut not in seen:
            seen.add(cut)
            ranked.append((rank, at, cut))
    if not any(rank == 2 for rank, _, _ in ranked):
        # A tool that says what failed only in its advice (Maven's "Failed to execute goal …:
        # Could not resolve dependencies") keeps that line.
        return [advice] if advice is not None else []
    chosen: list[tuple[int, str]] = []
    total = 0
    # Stable: within a rank, the earlier line first.
    for _, at, line in sorted(ranked, key=lambda entry: -entry[0]):
        if len(chosen) == FOUND_MAX_LINES or total + len(line) > FOUND_TOTAL_CHARS:
            break
        chosen.append((at, line))
        total += len(line)
    return [line for _, line in sorted(chosen)]


def last_line(output: str) -> str | None:
    """The last line of ``output`` that says how the run ended, cut to :data:`FOUND_LINE_CHARS`:
    not blank, not a rule of dashes, not a timing, not advice on how to run it again; the last
    line that is not blank when every line is one of those."""
    fallback: str | None = None
    for raw in reversed(output[-_SCAN_CHARS * 4 :].splitlines()):
        line = raw.strip()
        if not line:
            continue
        fallback = fallback or line[:FOUND_LINE_CHARS]
        text = _untagged(line)
        if any(c.isalnum() for c in text) and not (
            text.startswith(_TRAILER_STARTS) or _is_boilerplate(line)
        ):
            return line[:FOUND_LINE_CHARS]
    return fallback


__all__ = [
    "FOUND_LINE_CHARS",
    "FOUND_MAX_LINES",
    "FOUND_TOTAL_CHARS",
    "failure_lines",
    "last_line",
    "line_rank",
]
