"""The read-only list of ``untrusted``: which file an argv runs, and which of its options only
read, as the programs themselves read them (docs/approvals.md)."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay._exec._readonly import (
    FIND_NEWER,
    FIND_PRIMARIES,
    PROGRAMS,
    READ_ONLY_PROGRAMS,
    Arg,
    Getopt,
    Option,
    find_on_path,
    judge,
    reads_only,
)
from tests.hypothesis_profiles import examples

#: A PATH of the system's folders only, so that what is found does not depend on the shell
#: the tests run from.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#: The options that write or run something: the oracle of these tests, never used by the
#: code under test (which knows only what reads).
WRITES: dict[str, frozenset[str]] = {
    "date": frozenset({"-s", "--set"}),
    "diff": frozenset({"-l", "--paginate"}),
    "file": frozenset(
        {"-C", "--compile", "-z", "--uncompress", "-Z", "--uncompress-noreport"}
        | {"-p", "--preserve-date", "-S", "--no-sandbox"}
    ),
    "rg": frozenset(
        {"--pre", "--pre-glob", "--hostname-bin", "-z", "--search-zip"}
        | {"-X", "--index", "--x-crud", "--x-force", "--x-path"}
    ),
}

#: find's primaries that run a program or write, with arguments as find takes them.
FIND_WRITES: dict[str, list[str]] = {
    "-exec": ["rm", "{}", ";"],
    "-execdir": ["rm", "{}", "+"],
    "-ok": ["rm", "{}", ";"],
    "-okdir": ["rm", "{}", ";"],
    "-delete": [],
    "-fprint": ["out"],
    "-fprint0": ["out"],
    "-fprintf": ["out", "%p"],
    "-fls": ["out"],
}


def installed(program: str) -> str | None:
    return shutil.which(program, path=SYSTEM_PATH)


def system_lookup(name: str, path: str) -> str | None:
    """A lookup that finds every name in /usr/bin, installed or not."""
    return f"/usr/bin/{name}"


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


# ------------------------------------------------------------------ the holes found


@pytest.mark.parametrize(
    "argv",
    [
        ["file", "--comp", "x"],  # --compile, abbreviated: writes x.mgc
        ["file", "-bC"],  # -C in a bundle
        ["date", "--se=2020-01-01"],  # --set, abbreviated: sets the clock
        ["rg", "--hostname-bin=/bin/sh", "x"],  # runs the program
        ["./tools/cat"],  # the workspace's own programs
        ["node_modules/.bin/grep", "x"],
        ["/tmp/x/echo"],
        ["git", "status"],  # runs the repository's fsmonitor, filters, ...
        ["git", "rev-parse", "HEAD"],
    ],
)
def test_the_holes_found_ask(argv: list[str], tmp_path: Path) -> None:
    writable = [str(tmp_path), "/tmp"]
    assert judge(argv, path=SYSTEM_PATH, writable=writable) is None
    assert judge(argv, path=SYSTEM_PATH, writable=writable, which=system_lookup) is None


def test_git_is_not_on_the_list() -> None:
    assert "git" not in READ_ONLY_PROGRAMS
    assert not reads_only("git", ["status"])


@pytest.mark.parametrize(
    "argv",
    [
        ["cat", "README.md"],
        ["ls", "-la"],
        ["grep", "-rn", "foo", "."],
        ["head", "-n5", "f"],
        ["find", ".", "-name", "*.py", "-type", "f"],
        ["date", "+%s"],
        ["echo", "hello"],
        ["wc", "-l", "f"],
    ],
)
def test_a_command_that_only_reads_runs_the_system_program(argv: list[str], tmp_path: Path) -> None:
    found = installed(argv[0])
    assert found is not None
    ruled = judge(argv, path=SYSTEM_PATH, writable=[str(tmp_path)])
    assert ruled == os.path.realpath(found)


def test_an_absolute_program_runs_only_from_the_system_folders(tmp_path: Path) -> None:
    cat = os.path.realpath("/usr/bin/cat")
    writable = [str(tmp_path)]
    assert judge(["/usr/bin/cat", "f"], path="", writable=writable) == cat
    assert judge(["/bin/cat", "f"], path="", writable=writable) == os.path.realpath("/bin/cat")
    assert judge(["/usr/bin/../bin/cat"], path="", writable=writable) == cat
    assert judge(["/usr/bin/../../tmp/x/cat"], path="", writable=writable) is None
    executable(tmp_path / "cat")
    assert judge([str(tmp_path / "cat")], path="", writable=[]) is None  # not a system folder
    assert judge(["/usr/local/bin/cat"], path="", writable=[]) is None
    assert judge(["/usr/bin/rm", "-rf", "x"], path="", writable=[]) is None
    assert judge(["usr/bin/cat"], path="", writable=[]) is None


# ------------------------------------------------------------------ which file runs


def test_the_first_match_on_path_is_the_one_judged(tmp_path: Path) -> None:
    executable(tmp_path / "bin" / "cat")
    writable = [str(tmp_path)]
    first = f"{tmp_path}/bin:/usr/bin:/bin"
    assert judge(["cat", "f"], path=first, writable=writable) is None
    last = f"/usr/bin:/bin:{tmp_path}/bin"
    assert judge(["cat", "f"], path=last, writable=writable) == os.path.realpath("/usr/bin/cat")


@pytest.mark.parametrize("path", [":/usr/bin", ".:/usr/bin", "bin:/usr/bin", "/nowhere::/bin"])
def test_a_relative_path_entry_before_the_program_asks(path: str) -> None:
    assert judge(["cat", "f"], path=path, writable=[]) is None


def test_a_link_into_a_writable_folder_asks(tmp_path: Path) -> None:
    work = tmp_path / "work"
    made = executable(work / "cat")
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "cat").symlink_to(made)
    (tmp_path / "linked").symlink_to(work)
    assert judge(["cat"], path=str(tools), writable=[str(work)]) is None
    assert judge(["cat"], path=str(tmp_path / "linked"), writable=[str(work)]) is None
    # Outside every writable folder it is the host's own: it runs, as the file it is.
    elsewhere = [str(tmp_path / "elsewhere")]
    assert judge(["cat"], path=str(tools), writable=elsewhere) == os.path.realpath(made)


def test_a_system_folder_that_is_writable_asks() -> None:
    assert judge(["cat"], path="/usr/bin", writable=["/usr"]) is None
    assert judge(["/usr/bin/cat"], path="", writable=["/usr/bin"]) is None
    assert judge(["cat"], path="/usr/bin", writable=["/"]) is None


def test_the_lookup_is_the_callers_and_is_asked_once() -> None:
    asked: list[tuple[str, str]] = []

    def lookup(name: str, path: str) -> str | None:
        asked.append((name, path))
        return "/usr/bin/rg"

    ruled = judge(["rg", "-n", "x"], path="P", writable=[], which=lookup)
    assert ruled == os.path.realpath("/usr/bin/rg")
    assert asked == [("rg", "P")]
    assert judge(["rg", "x"], path="P", writable=[], which=lambda name, path: None) is None
    assert judge(["rg", "x"], path="P", writable=[], which=lambda name, path: "rg") is None
    assert judge([], path="P", writable=[], which=lookup) is None
    assert judge([""], path="P", writable=[], which=lookup) is None


def test_find_on_path_answers_the_first_executable_and_relative_entries_unchecked(
    tmp_path: Path,
) -> None:
    first = executable(tmp_path / "a" / "tool")
    second = executable(tmp_path / "b" / "tool")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "tool").write_text("")  # not executable
    assert find_on_path("tool", f"{tmp_path}/a:{tmp_path}/b") == str(first)
    assert find_on_path("tool", f"{tmp_path}/c:{tmp_path}/b") == str(second)
    assert find_on_path("tool", f"{tmp_path}/c::{tmp_path}/b") == "tool"
    assert find_on_path("tool", f"{tmp_path}/c:sub:{tmp_path}/b") == "sub/tool"
    assert find_on_path("tool", f"{tmp_path}/none") is None


# ------------------------------------------------------------------ which options read


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        # Long options: exact, abbreviated, ambiguous, with their arguments.
        (["ls", "--almost-all"], True),
        (["ls", "--alm"], True),
        (["ls", "--al"], False),  # --all, --almost-all
        (["ls", "--col=never"], True),
        (["grep", "--col=never", "x"], True),  # --color and --colour are one option
        (["grep", "--fixed", "x"], True),  # --fixed-strings and --fixed-regexp too
        (["date", "--da=now"], True),
        (["date", "--d=now"], False),  # --date, --debug
        (["date", "--s=now"], False),
        (["date", "--set", "now"], False),
        (["file", "--mime", "f"], True),  # exact, though a prefix of --mime-type
        (["file", "--mime-t", "f"], True),
        (["file", "--c", "f"], False),  # --checking-printout, --compile
        (["file", "--ch", "f"], True),
        (["file", "--comp", "x"], False),
        (["cat", "--number=3", "f"], False),  # takes no argument
        (["cat", "--", "--number"], True),
        (["cat", "-"], True),
        (["cat", "--frobnicate"], False),
        (["cat", "--=x"], False),
        (["ls", "-@"], False),
        # Short options: bundles, attached and separate arguments.
        (["head", "-n", "-5", "f"], True),
        (["head", "-n"], False),
        (["head", "-5", "f"], True),
        (["file", "-bC"], False),
        (["file", "-Cb", "f"], False),
        (["file", "-mC", "f"], True),  # C is -m's magic file
        (["file", "-m", "-C", "f"], True),
        (["file", "-z", "f.gz"], False),
        (["file", "-p", "f"], False),
        (["date", "-fs"], True),  # s is -f's file
        (["date", "-us", "now"], False),
        (["date", "-I"], True),
        (["date", "-Iseconds"], True),
        (["date", "-I", "seconds"], False),  # an operand: it would set the clock
        (["date", "0101"], False),
        (["date", "--", "+%s"], True),
        (["date", "-d", "@0", "+%F"], True),
        (["diff", "-u", "a", "b"], True),
        (["diff", "-ul", "a", "b"], False),  # --paginate runs pr
        (["diff", "--pag", "a", "b"], False),
        (["tail", "-f", "log"], True),
        (["tail", "---presume-input-pipe"], False),
        (["head", "---p"], False),
        (["tr", "-d", "a"], True),
        (["which", "-a", "ls"], True),
        (["which", "--all", "ls"], False),
        # rg does not abbreviate: only its full names.
        (["rg", "-n", "x"], True),
        (["rg", "-A5", "x"], True),
        (["rg", "-n5", "x"], False),  # -n takes no argument: 5 is an unknown option
        (["rg", "--no-pre", "x"], True),
        (["rg", "--pre", "cat", "x"], False),
        (["rg", "--pre-glob", "*.gz", "x"], False),
        (["rg", "-z", "x"], False),
        (["rg", "--search", "x"], False),
        (["rg", "--line-num", "x"], False),
        # find's expression.
        (["find", "-L", ".", "-name", "x"], True),
        (["find", ".", "-name", "-delete"], True),  # a pattern, as find reads it
        (["find", ".", "-newermt", "2020-01-01"], True),
        (["find", ")", "-print"], True),  # a leading ")" is a path
        (["find", ".", "-name"], False),
        (["find", ".", "-nam", "x"], False),
        (["find", ".", "-delete"], False),
        (["find", ".", "-exec", "ls", ";"], False),
        (["find", ".", "-fprintf", "out", "%p"], False),
        (["find", "-D", "exec", "."], False),
        (["find", ".", "-name", "x", "y"], False),
        # Programs that open nothing.
        (["echo", "-e", "\\x1b"], True),
        (["pwd", "-P"], True),
        (["true", "--anything"], True),
        (["false", "-x"], True),
        (["rm", "x"], False),
    ],
)
def test_the_options_that_only_read(argv: list[str], expected: bool) -> None:
    assert reads_only(argv[0], argv[1:]) is expected


@given(st.sampled_from(["echo", "true", "false", "pwd"]), st.lists(st.text(max_size=5)))
def test_programs_that_open_nothing_take_any_argument(program: str, args: list[str]) -> None:
    assert reads_only(program, args)


# ------------------------------------------------------------------ against the programs


@functools.cache
def help_text(program: str) -> str:
    """The program's own ``--help`` (empty when it is not installed here)."""
    found = installed(program)
    if found is None:
        return ""
    done = subprocess.run(
        [found, "--help"],
        capture_output=True,
        text=True,
        env={"LC_ALL": "C", "PATH": SYSTEM_PATH},
        timeout=30,
        check=False,
    )
    return done.stdout + done.stderr


_LONG = re.compile(r"(?<![\w-])--([a-z0-9][\w-]*)")
_SHORT = re.compile(r"(?<![\w-])-([A-Za-z0-9.])(?![\w-])")
#: A row of a GNU help's option list: its short spellings, its first long one, how it shows
#: its argument (``=ARG``, ``[=ARG]``, `` ARG``) and whether that is a fixed value
#: (``-p, --indicator-style=slash``: the short one takes none).
_ROW = re.compile(
    r"^[ \t]+((?:-[^-\s]\S*,?[ \t]+)*)--([a-z0-9][\w-]*)(\[=|=| [A-Z])?([a-z]?)", re.M
)

#: Where a help does not show an option's argument (file 5.44: ``-P, --parameter``).
HELP_SILENT = {("file", "parameter")}

GETOPT_PROGRAMS = sorted(name for name, s in PROGRAMS.items() if isinstance(s, Getopt))
INSTALLED_GETOPT = [name for name in GETOPT_PROGRAMS if installed(name)]


def table_option(program: str, spelling: str) -> Option | None:
    syntax = PROGRAMS[program]
    assert isinstance(syntax, Getopt)
    return next((o for o in syntax.options if spelling in o.spellings), None)


@functools.cache
def spellings_of(program: str) -> tuple[list[str], list[str]]:
    """Every long name (without ``--``) and short letter: the table's, the oracle's and the
    installed program's help's."""
    syntax = PROGRAMS[program]
    assert isinstance(syntax, Getopt)
    known = [s for o in syntax.options for s in o.spellings] + sorted(WRITES.get(program, ()))
    text = help_text(program)
    longs = {s[2:] for s in known if s.startswith("--")} | set(_LONG.findall(text))
    shorts = {s[1:] for s in known if not s.startswith("--")} | set(_SHORT.findall(text))
    return sorted(longs), sorted(shorts)


@pytest.mark.parametrize("program", INSTALLED_GETOPT)
def test_the_tables_know_every_option_the_installed_program_shows(program: str) -> None:
    for shorts, name, shown, fixed in _ROW.findall(help_text(program)):
        option = table_option(program, "--" + name)
        assert option is not None, name
        if (program, name) in HELP_SILENT:
            continue
        shown_arg = Arg.OPTIONAL if shown == "[=" else Arg.REQUIRED if shown else Arg.NONE
        assert option.arg is shown_arg, name
        for letter in re.findall(r"-([A-Za-z0-9])", shorts):
            short = table_option(program, "-" + letter)
            assert short is not None, letter
            if option.arg is Arg.REQUIRED and not fixed:
                assert short.arg is Arg.REQUIRED, letter
    for name in _LONG.findall(help_text(program)):
        assert table_option(program, "--" + name) is not None, name


def resolve(program: str, prefix: str) -> Option | None:
    """``--prefix`` resolved against every long name the tests know of the program: the one
    option it names when it names one that only reads; None otherwise."""
    syntax = PROGRAMS[program]
    assert isinstance(syntax, Getopt)
    longs, _ = spellings_of(program)
    if prefix in longs:
        names = [prefix]
    elif syntax.abbreviations:
        names = [name for name in longs if name.startswith(prefix)]
    else:
        names = []
    options = {table_option(program, "--" + name) for name in names}
    if len(options) != 1 or None in options:
        return None
    if any("--" + name in WRITES.get(program, ()) for name in names):
        return None
    (option,) = options
    return option if option is not None and option.reads else None


def short_option(program: str, letter: str) -> Option | None:
    option = table_option(program, "-" + letter)
    if option is None or not option.reads or "-" + letter in WRITES.get(program, ()):
        return None
    return option


def test_no_abbreviation_reaches_an_option_that_writes_or_is_unknown() -> None:
    for program in GETOPT_PROGRAMS:
        longs, _ = spellings_of(program)
        for name in longs:
            for end in range(1, len(name) + 1):
                prefix = name[:end]
                passes = reads_only(program, [f"--{prefix}", "+1"]) or reads_only(
                    program, [f"--{prefix}=1", "+1"]
                )
                assert passes is (resolve(program, prefix) is not None), (program, prefix)


#: Values given as an argument of their own: operands, and spellings of what writes.
_VALUES = ["1", "x", "+%s"]


def standalone(program: str, value: str) -> bool:
    """Whether ``value``, read as an argument of its own, only reads."""
    if value in WRITES.get(program, ()):
        return False
    return value.startswith("+") or program != "date"


@st.composite
def option_argvs(draw: st.DrawFn) -> tuple[str, list[str], bool]:
    """A program, arguments that spell its options every way getopt_long reads them, and
    whether they only read by the oracle."""
    program = draw(st.sampled_from(GETOPT_PROGRAMS))
    longs, shorts = spellings_of(program)
    separate = st.sampled_from([*_VALUES, *sorted(WRITES.get(program, ()))])
    args: list[str] = []
    reads = True
    for _ in range(draw(st.integers(1, 4))):
        if longs and (not shorts or draw(st.booleans())):
            name = draw(st.sampled_from(longs))
            prefix = name[: draw(st.integers(1, len(name)))]
            option = resolve(program, prefix)
            form = draw(st.sampled_from(["plain", "attached", "separate"]))
            if form == "attached":
                args.append(f"--{prefix}={draw(st.text(max_size=3))}")
                reads &= option is not None and option.arg is not Arg.NONE
                continue
            args.append(f"--{prefix}")
            reads &= option is not None
            takes = option is not None and option.arg is Arg.REQUIRED
            if form == "separate" or takes:
                value = draw(separate)
                args.append(value)
                reads &= takes or standalone(program, value)
        else:
            letters = draw(st.lists(st.sampled_from(shorts), min_size=1, max_size=4))
            bundle = "-"
            for at, letter in enumerate(letters):
                bundle += letter
                option = short_option(program, letter)
                reads &= option is not None
                if option is None or option.arg is Arg.NONE:
                    continue
                # The rest of the bundle is its argument, whatever it spells.
                bundle += "".join(letters[at + 1 :])
                if option.arg is Arg.REQUIRED and at == len(letters) - 1:
                    args.append(bundle)
                    bundle = draw(separate)
                break
            args.append(bundle)
    args.append("+%F" if program == "date" else "notes.txt")
    return program, args, reads


@settings(max_examples=examples(300))
@given(option_argvs())
def test_every_spelling_of_an_option_is_read_as_the_program_reads_it(
    drawn: tuple[str, list[str], bool],
) -> None:
    # An option that writes or runs something, or one the table does not name, never passes,
    # however it is spelled; one that only reads passes under every spelling getopt_long takes.
    program, args, reads = drawn
    assert reads_only(program, args) is reads


@functools.cache
def find_help_tokens() -> list[str]:
    text = help_text("find")
    return sorted(set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text)))


@st.composite
def find_argvs(draw: st.DrawFn) -> tuple[list[str], bool]:
    tokens = sorted(
        {*FIND_PRIMARIES, *FIND_WRITES, *find_help_tokens(), "-newermt", "-newerBa", "-newertm"}
    )
    values = st.sampled_from(["x", "1", "(", ")", *FIND_WRITES])
    args = draw(st.lists(st.sampled_from(["-H", "-L", "-P"]), max_size=2))
    # A starting point at least: else a drawn -H would be a leading option again.
    args += draw(st.lists(st.sampled_from([".", "src", "-"]), min_size=1, max_size=2))
    reads = True
    for _ in range(draw(st.integers(0, 4))):
        token = draw(st.sampled_from(tokens))
        args.append(token)
        if token in FIND_WRITES:
            args += FIND_WRITES[token]
            reads = False
        elif token in FIND_PRIMARIES or FIND_NEWER.fullmatch(token):
            arity = FIND_PRIMARIES.get(token, 1)
            args += [draw(values) for _ in range(arity)]
        else:
            reads = False
    return args, reads


@settings(max_examples=examples(200))
@given(find_argvs())
def test_find_runs_unasked_only_with_primaries_that_read(drawn: tuple[list[str], bool]) -> None:
    args, reads = drawn
    assert reads_only("find", args) is reads


@pytest.mark.skipif(installed("find") is None, reason="find is not installed")
def test_find_itself_wants_an_argument_after_each_primary_the_table_gives_one(
    tmp_path: Path,
) -> None:
    # The safety of skipping an argument: were find to take none, the next token would be
    # its own primary (``-name -delete``), and the table would have skipped it unread.
    takes_one = [token for token, arity in FIND_PRIMARIES.items() if arity == 1]
    for token in [*takes_one, "-newermt"]:
        done = subprocess.run(
            [installed("find") or "find", str(tmp_path), "-false", "-a", token],
            capture_output=True,
            text=True,
            env={"LC_ALL": "C", "PATH": SYSTEM_PATH},
            timeout=30,
            check=False,
        )
        assert done.returncode != 0, token
        # find's words for a missing argument (a number's names the primary as its argument).
        missing = f"missing argument|needs an argument|invalid argument `{token}' to `{token}'"
        assert re.search(missing, done.stderr), (token, done.stderr)
