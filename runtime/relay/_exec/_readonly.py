"""The read-only list of ``approval_policy = "untrusted"``: which ``shell`` argv only reads,
and which file it runs (docs/approvals.md).

Theory of operation. :func:`judge` answers one question for one argv: may it run without
asking? It says yes (the absolute path of the program to run) only when both hold:

- **the program is the system's.** A bare name is looked up on the command's ``PATH`` as
  ``execvp`` would, and the first match counts (it is what would run): it must lie outside
  every folder the command may write, the folder it was found in and the file with its links
  followed. A name with a ``/`` must be absolute and, its links and ``..`` resolved, lie
  directly in one of :data:`SYSTEM_BIN_DIRS`. The caller runs the returned file itself, with
  no second lookup, so what was judged is what runs.
- **every argument only reads.** Each program has an allowlist (:data:`PROGRAMS`): the
  options known to do nothing but read, read the way the program reads them. For GNU
  ``getopt_long`` that means abbreviated long options (resolved against every option the
  program knows, those that write or run something included, so that an abbreviation of one
  of those, or an ambiguous one, never passes), ``--opt=value`` and ``--opt value``, bundled
  short options whose last may take the rest of the bundle or the next argument, and ``--``.
  ``find`` has an expression instead (:data:`FIND_PRIMARIES`); ``echo``, ``true``, ``false``
  and ``pwd`` take any argument, since they open nothing.

Anything unknown asks: an option no table names, a program no table names. Everything here
but the default ``PATH`` lookup and the resolution of links is a plain function over plain
data.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs

#: Where the system keeps its own programs: an absolute ``argv[0]`` runs unasked only from
#: one of these. Not ``/usr/local/bin``: what is there was installed on this host, not by
#: the system, and it is often writable by more than root (Debian's ``staff`` group).
SYSTEM_BIN_DIRS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")

#: The lookup of a bare program name on a ``PATH``: the file found, or None.
Lookup = Callable[[str, str], "str | None"]


class Arg(enum.Enum):
    """Whether an option takes an argument, in ``getopt_long``'s three kinds."""

    NONE = "none"
    REQUIRED = "required"
    """``--opt=value`` or ``--opt value``; ``-ovalue`` or ``-o value``."""
    OPTIONAL = "optional"
    """Only attached: ``--opt=value``, ``-ovalue``."""


@attrs.frozen
class Option:
    """One option of a program, under all its spellings."""

    spellings: tuple[str, ...]
    """``-n``, ``--lines``: the short and long names that are the same option."""
    arg: Arg
    """Whether it takes an argument."""
    reads: bool
    """It only reads: it may run unasked."""


class Operands(enum.Enum):
    """What a program's operands may be."""

    ANY = "any"
    FORMAT = "+FORMAT"
    """Only ``+FORMAT`` (``date``: any other operand sets the clock)."""


@attrs.frozen
class Getopt:
    """A program that reads its arguments as GNU ``getopt_long`` does."""

    options: tuple[Option, ...]
    """Every option the program knows, the refused ones too: an abbreviation is resolved
    against all of them."""
    abbreviations: bool = True
    """A long option may be written as any prefix that names one option (``rg``: no)."""
    operands: Operands = Operands.ANY
    """What its operands may be."""


@attrs.frozen
class Find:
    """``find``'s own syntax: leading options, starting points, an expression."""


@attrs.frozen
class AnyArguments:
    """A program that opens no file and starts no program, whatever its arguments."""


Syntax = Getopt | Find | AnyArguments


def _options(reads: Iterable[str], refused: Iterable[str] = ()) -> tuple[Option, ...]:
    """Options from their notation: one string per option, its spellings separated by spaces;
    a trailing ``=`` on a spelling says it takes an argument, ``[=]`` an optional one."""
    made = []
    for entries, safe in ((reads, True), (refused, False)):
        for entry in entries:
            kinds = {Arg.NONE}
            spellings = []
            for spelling in entry.split():
                if spelling.endswith("[=]"):
                    kinds.add(Arg.OPTIONAL)
                    spelling = spelling[:-3]
                elif spelling.endswith("="):
                    kinds.add(Arg.REQUIRED)
                    spelling = spelling[:-1]
                spellings.append(spelling)
            kinds.discard(Arg.NONE)
            (arg,) = kinds or {Arg.NONE}
            made.append(Option(tuple(spellings), arg, safe))
    return tuple(made)


_HELP = ("--help", "--version")
_DIGITS = tuple(f"-{digit}" for digit in "0123456789")


def _getopt(
    *reads: str,
    refused: Iterable[str] = (),
    abbreviations: bool = True,
    operands: Operands = Operands.ANY,
) -> Getopt:
    return Getopt(_options(reads, refused), abbreviations, operands)


#: Every program on the list, with the syntax that says which of its argvs only read. The
#: GNU tables hold each program's whole option list (coreutils 9.1 up to 9.9, grep 3.8,
#: diffutils 3.8, file 5.44, ripgrep 14 and 15): an option a later version adds is unknown,
#: and asks, and no abbreviation of a known one can reach it unnoticed, since abbreviations
#: are resolved against the whole list.
PROGRAMS: Mapping[str, Syntax] = {
    "cat": _getopt(
        "-A --show-all", "-b --number-nonblank", "-e", "-E --show-ends", "-n --number",
        "-s --squeeze-blank", "-t", "-T --show-tabs", "-u", "-v --show-nonprinting", *_HELP,
    ),
    "cut": _getopt(
        "-b --bytes=", "-c --characters=", "-d --delimiter=", "-f --fields=", "-F=",
        "-n --no-partial", "-O --output-delimiter=", "--complement", "-s --only-delimited",
        "-w", "--whitespace-delimited[=]", "-z --zero-terminated", *_HELP,
    ),
    "date": _getopt(
        "-d --date=", "--debug", "-f --file=", "-I[=] --iso-8601[=]", "--resolution",
        "-R --rfc-email --rfc-822 --rfc-2822", "--rfc-3339=", "-r --reference=",
        "-u --utc --uct --universal", *_HELP,
        refused=["-s --set="],
        operands=Operands.FORMAT,
    ),
    "diff": _getopt(
        "--normal", "-q --brief", "-s --report-identical-files", "-c", "-C=", "--context[=]",
        "-u", "-U=", "--unified[=]", "-e --ed", "-f --forward-ed", "-n --rcs",
        "-y --side-by-side", "-W --width=", "--left-column", "--suppress-common-lines",
        "-p --show-c-function", "-F --show-function-line=", "-L --label=", "-t --expand-tabs",
        "-T --initial-tab", "--tabsize=", "--suppress-blank-empty", "-r --recursive",
        "--no-dereference", "-N --new-file", "-P --unidirectional-new-file",
        "--ignore-file-name-case", "--no-ignore-file-name-case", "-x --exclude=",
        "-X --exclude-from=", "-S --starting-file=", "--from-file=", "--to-file=",
        "-i --ignore-case", "-E --ignore-tab-expansion", "-Z --ignore-trailing-space",
        "-b --ignore-space-change", "-w --ignore-all-space", "-B --ignore-blank-lines",
        "-I --ignore-matching-lines=", "-a --text", "--strip-trailing-cr", "-D --ifdef=",
        "--line-format=", "--old-line-format=", "--new-line-format=",
        "--unchanged-line-format=", "--old-group-format=", "--new-group-format=",
        "--changed-group-format=", "--unchanged-group-format=", "-d --minimal",
        "--horizon-lines=", "-H --speed-large-files", "--color[=]", "--palette=", "--binary",
        "--inhibit-hunk-merge", "-h", "--help", "-v --version", *_DIGITS,
        # --paginate runs pr; the others are diff's own, for sdiff and its tests.
        refused=[
            "-l --paginate", "--sdiff-merge-assist", "---presume-output-tty",
            "---no-directory",
        ],
    ),
    "echo": AnyArguments(),
    "false": AnyArguments(),
    "file": _getopt(
        "-m --magic-file=", "-b --brief", "-c --checking-printout", "-e --exclude=",
        "--exclude-quiet=", "-f --files-from=", "-F --separator=", "-i --mime", "--apple",
        "--extension", "--mime-type", "--mime-encoding", "-k --keep-going", "-l --list",
        "-L --dereference", "-h --no-dereference", "-n --no-buffer", "-N --no-pad",
        "-0 --print0", "-P --parameter=", "-r --raw", "-s --special-files", "-d --debug",
        "-E", "--help", "-v --version",
        # --compile writes a magic file; --uncompress runs decompressors; --preserve-date
        # sets the files' access times back; --no-sandbox lifts file's own confinement.
        refused=[
            "-C --compile", "-z --uncompress", "-Z --uncompress-noreport",
            "-p --preserve-date", "-S --no-sandbox",
        ],
    ),
    "find": Find(),
    "grep": _getopt(
        "-E --extended-regexp", "-F --fixed-strings --fixed-regexp", "-G --basic-regexp",
        "-P --perl-regexp", "-e --regexp=", "-f --file=", "-i --ignore-case", "-y",
        "--no-ignore-case", "-w --word-regexp", "-x --line-regexp", "-z --null-data",
        "-s --no-messages", "-v --invert-match", "-V --version", "--help",
        "-m --max-count=", "-b --byte-offset", "-n --line-number", "--line-buffered",
        "-H --with-filename", "-h --no-filename", "--label=", "-o --only-matching",
        "-q --quiet --silent", "--binary-files=", "-a --text", "-I", "-d --directories=",
        "-D --devices=", "-r --recursive", "-R --dereference-recursive", "--include=",
        "--exclude=", "--exclude-from=", "--exclude-dir=", "-L --files-without-match",
        "-l --files-with-matches", "-c --count", "-T --initial-tab", "-Z --null",
        "-B --before-context=", "-A --after-context=", "-C --context=",
        "--group-separator=", "--no-group-separator", "--color[=] --colour[=]",
        "-U --binary", "-u --unix-byte-offsets", *_DIGITS,
        refused=["-X="],  # undocumented
    ),
    "head": _getopt(
        "-c --bytes=", "-n --lines=", "-q --quiet --silent", "-v --verbose",
        "-z --zero-terminated", *_DIGITS, *_HELP,
        refused=["---presume-input-pipe"],  # undocumented
    ),
    "ls": _getopt(
        "-a --all", "-A --almost-all", "--author", "-b --escape", "--block-size=",
        "-B --ignore-backups", "-c", "-C", "--color[=]", "-d --directory", "-D --dired",
        "-f", "-F", "--classify[=]", "--file-type", "--format=", "--full-time", "-g",
        "--group-directories-first", "-G --no-group", "-h --human-readable", "--si",
        "-H --dereference-command-line", "--dereference-command-line-symlink-to-dir",
        "--hide=", "--hyperlink[=]", "--indicator-style=", "-i --inode", "-I --ignore=",
        "-k --kibibytes", "-l", "-L --dereference", "-m", "-n --numeric-uid-gid",
        "-N --literal", "-o", "-p", "-q --hide-control-chars", "--show-control-chars",
        "-Q --quote-name", "--quoting-style=", "-r --reverse", "-R --recursive",
        "-s --size", "-S", "--sort=", "--time=", "--time-style=", "-t", "-T --tabsize=",
        "-u", "-U", "-v", "-w --width=", "-x", "-X", "-Z --context", "--zero", "-1", *_HELP,
    ),
    "nl": _getopt(
        "-b --body-numbering=", "-d --section-delimiter=", "-f --footer-numbering=",
        "-h --header-numbering=", "-i --line-increment=", "-l --join-blank-lines=",
        "-n --number-format=", "-p --no-renumber", "-s --number-separator=",
        "-v --starting-line-number=", "-w --number-width=", *_HELP,
    ),
    "pwd": AnyArguments(),
    "rg": _getopt(
        "-A --after-context=", "--auto-hybrid-regex", "--no-auto-hybrid-regex",
        "-B --before-context=", "--binary", "--no-binary", "--block-buffered",
        "--no-block-buffered", "-b --byte-offset", "--no-byte-offset", "-s --case-sensitive",
        "--color=", "--colors=", "--column", "--no-column", "-C --context=",
        "--context-separator=", "--no-context-separator", "-c --count", "--count-matches",
        "--crlf", "--no-crlf", "--debug", "--dfa-size-limit=", "-E --encoding=",
        "--no-encoding", "--engine=", "--field-context-separator=",
        "--field-match-separator=", "-f --file=", "--files", "-l --files-with-matches",
        "--files-without-match", "-F --fixed-strings", "--no-fixed-strings", "-L --follow",
        "--no-follow", "--generate=", "-g --glob=", "--glob-case-insensitive",
        "--no-glob-case-insensitive", "--heading", "--no-heading", "-h --help",
        "-. --hidden", "--no-hidden", "--hyperlink-format=", "--iglob=", "-i --ignore-case",
        "--ignore-file=", "--ignore-file-case-insensitive",
        "--no-ignore-file-case-insensitive", "--include-zero", "--no-include-zero",
        "-v --invert-match", "--no-invert-match", "--json", "--no-json", "--line-buffered",
        "--no-line-buffered", "-n --line-number", "-N --no-line-number", "-x --line-regexp",
        "-M --max-columns=", "--max-columns-preview", "--no-max-columns-preview",
        "-m --max-count=", "-d --max-depth= --maxdepth=", "--max-filesize=", "--mmap",
        "--no-mmap", "-U --multiline", "--no-multiline", "--multiline-dotall",
        "--no-multiline-dotall", "--no-config", "--no-ignore", "--ignore", "--no-ignore-dot",
        "--ignore-dot", "--no-ignore-exclude", "--ignore-exclude", "--no-ignore-files",
        "--ignore-files", "--no-ignore-global", "--ignore-global", "--no-ignore-messages",
        "--ignore-messages", "--no-ignore-parent", "--ignore-parent", "--no-ignore-vcs",
        "--ignore-vcs", "--no-messages", "--messages", "--no-pcre2-unicode",
        "--pcre2-unicode", "--no-require-git", "--require-git", "--no-unicode", "--unicode",
        "-0 --null", "--null-data", "--one-file-system", "--no-one-file-system",
        "-o --only-matching", "--path-separator=", "--passthru --passthrough", "-P --pcre2",
        "--no-pcre2", "--pcre2-version", "--no-pre", "-p --pretty", "-q --quiet",
        "--regex-size-limit=", "-e --regexp=", "-r --replace=", "--no-search-zip",
        "-S --smart-case", "--sort-files", "--no-sort-files", "--sort=", "--sortr=",
        "--stats", "--no-stats", "--stop-on-nonmatch", "-a --text", "--no-text",
        "-j --threads=", "--trace", "--trim", "--no-trim", "-t --type=", "--type-add=",
        "--type-clear=", "-T --type-not=", "--type-list", "-u --unrestricted",
        "-V --version", "--vimgrep", "-H --with-filename", "-I --no-filename",
        "-w --word-regexp",
        # --pre and --hostname-bin run a program, --search-zip runs decompressors, the
        # index options write an index.
        refused=[
            "--pre=", "--pre-glob=", "--hostname-bin=", "-z --search-zip", "-X --index",
            "--x-crud", "--x-force", "--x-path=",
        ],
        abbreviations=False,
    ),
    "stat": _getopt(
        "-L --dereference", "-f --file-system", "-c --format=", "--printf=", "-t --terse",
        "--cached=", *_HELP,
    ),
    "tail": _getopt(
        "-c --bytes=", "-f", "--follow[=]", "-F", "-n --lines=", "--max-unchanged-stats=",
        "--pid=", "-q --quiet --silent", "--retry", "-s --sleep-interval=", "-v --verbose",
        "-z --zero-terminated", "--debug", *_DIGITS, *_HELP,
        refused=["---disable-inotify", "---presume-input-pipe"],  # undocumented
    ),
    "tr": _getopt(
        "-c -C --complement", "-d --delete", "-s --squeeze-repeats", "-t --truncate-set1",
        *_HELP,
    ),
    "true": AnyArguments(),
    "uname": _getopt(
        "-a --all", "-s --kernel-name --sysname", "-n --nodename",
        "-r --kernel-release --release", "-v --kernel-version", "-m --machine",
        "-p --processor", "-i --hardware-platform", "-o --operating-system",
        "-A --all-labeled", *_HELP,
    ),
    "wc": _getopt(
        "-c --bytes", "-m --chars", "-l --lines", "-w --words", "--debug",
        "--files0-from=", "-L --max-line-length", "--total=", *_HELP,
    ),
    # Debian's which is a shell script (``getopts a``): it only tests files on PATH.
    "which": _getopt("-a", "-s"),
    "whoami": _getopt(*_HELP),
}  # fmt: skip

#: The programs on the list (git is not: see docs/decisions.md).
READ_ONLY_PROGRAMS = frozenset(PROGRAMS)


def _words(text: str) -> list[str]:
    return text.split()


#: ``find``'s leading options (before the starting points).
FIND_LEADING = frozenset({"-H", "-L", "-P"})

#: The primaries and operators of a ``find`` expression that only read, with the number of
#: arguments each takes. Not ``-exec``, ``-execdir``, ``-ok``, ``-okdir`` (run a program),
#: ``-delete``, ``-fprint``, ``-fprint0``, ``-fprintf``, ``-fls`` (write); ``-newerXY`` is
#: :data:`FIND_NEWER`.
FIND_PRIMARIES: Mapping[str, int] = {
    **dict.fromkeys(
        _words(
            "! ( ) , -not -a -and -o -or -daystart -d -depth -empty -executable -false -follow"
            " -ignore_readdir_race -noignore_readdir_race -ls -mount -noleaf -nogroup -nouser"
            " -nowarn -warn -print -print0 -prune -quit -readable -true -writable -xdev -help"
            " --help -version --version"
        ),
        0,
    ),
    **dict.fromkeys(
        _words(
            "-amin -anewer -atime -cmin -cnewer -ctime -context -files0-from -fstype -gid -group"
            " -ilname -iname -inum -ipath -iregex -iwholename -links -lname -maxdepth -mindepth"
            " -mmin -mtime -name -newer -path -perm -printf -regex -regextype -samefile -size"
            " -type -uid -used -user -wholename -xtype"
        ),
        1,
    ),
}

#: ``-newerXY REFERENCE``: a test with one argument, as find reads it.
FIND_NEWER = re.compile(r"-newer[aBcm][aBcmt]")


def _long(syntax: Getopt, name: str) -> Option | None:
    """The option ``--name`` is, as ``getopt_long`` resolves it (None: no one option)."""
    spelled = "--" + name
    for option in syntax.options:
        if spelled in option.spellings:
            return option
    if not syntax.abbreviations or not name:
        return None
    hits = {o for o in syntax.options if any(s.startswith(spelled) for s in o.spellings)}
    return hits.pop() if len(hits) == 1 else None


def _short(syntax: Getopt, letter: str) -> Option | None:
    spelled = "-" + letter
    return next((o for o in syntax.options if spelled in o.spellings), None)


def _getopt_reads(syntax: Getopt, args: Sequence[str]) -> bool:
    operands: list[str] = []
    at = 0
    while at < len(args):
        arg = args[at]
        at += 1
        if arg == "--":
            operands += args[at:]
            break
        if arg.startswith("--"):
            name, equals, _ = arg[2:].partition("=")
            option = _long(syntax, name)
            if option is None or not option.reads:
                return False
            if option.arg is Arg.NONE and equals:
                return False
            if option.arg is Arg.REQUIRED and not equals:
                if at == len(args):
                    return False
                at += 1
        elif arg.startswith("-") and arg != "-":
            for index, letter in enumerate(arg[1:], start=2):
                option = _short(syntax, letter)
                if option is None or not option.reads:
                    return False
                if option.arg is Arg.NONE:
                    continue
                # The rest of the bundle is its argument, or else (required) the next one.
                if option.arg is Arg.REQUIRED and index == len(arg):
                    if at == len(args):
                        return False
                    at += 1
                break
        else:
            # GNU getopt permutes: an option after an operand is still an option. Where a
            # program stops at its first operand, the rest only read as files.
            operands.append(arg)
    if syntax.operands is Operands.FORMAT:
        return all(operand.startswith("+") for operand in operands)
    return True


def _find_reads(args: Sequence[str]) -> bool:
    at = 0
    while at < len(args) and args[at] in FIND_LEADING:
        at += 1
    if at < len(args) and args[at] == "--":
        at += 1
    # Starting points, as find tells them from an expression: a leading ")" or "," is a path.
    while at < len(args) and not _find_expression(args[at], leading=True):
        at += 1
    while at < len(args):
        token = args[at]
        arity = FIND_PRIMARIES.get(token, 1 if FIND_NEWER.fullmatch(token) else None)
        if arity is None or at + 1 + arity > len(args):
            return False
        at += 1 + arity
    return True


def _find_expression(arg: str, *, leading: bool) -> bool:
    if arg.startswith("-"):
        return arg != "-"
    if arg in {")", ","}:
        return not leading
    return arg in {"!", "("}


def reads_only(program: str, args: Sequence[str]) -> bool:
    """Whether ``args``, given to the program named ``program`` (on the list), only read."""
    match PROGRAMS.get(program):
        case Getopt() as syntax:
            return _getopt_reads(syntax, args)
        case Find():
            return _find_reads(args)
        case AnyArguments():
            return True
        case None:
            return False


def find_on_path(name: str, path: str) -> str | None:
    """The file a bare ``name`` runs as, looked up on ``path`` as ``execvp`` does: the first
    entry that holds an executable file of that name.

    A relative entry (an empty one is the working directory) is answered as it is, joined
    with the name and unchecked: it lies wherever the command runs, so it can only be judged
    not read-only, and it is what would run if it holds the name.
    """
    for entry in path.split(os.pathsep):
        candidate = os.path.join(entry, name)
        if not os.path.isabs(entry):
            return candidate
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def judge(
    argv: Sequence[str],
    *,
    path: str,
    writable: Sequence[str],
    which: Lookup = find_on_path,
) -> str | None:
    """The absolute path of the program to run when ``argv`` only reads (it runs unasked
    under ``untrusted``); None otherwise.

    Args:
        argv: The command, run without a shell.
        path: The ``PATH`` the command runs with.
        writable: Every folder the command may write (absolute): the working directory, the
            writable roots, the temporary folders.
        which: The lookup of a bare name on ``path`` (:func:`find_on_path`).

    The path returned has its links resolved: the caller runs that very file, with
    ``argv[0]`` as it is, and looks nothing up again.
    """
    if not argv or not reads_only(argv[0].rsplit("/", 1)[-1], argv[1:]):
        return None
    program = argv[0]
    if "/" in program:
        if not os.path.isabs(program):
            return None
        found = program
        real = os.path.realpath(found)
        if os.path.dirname(real) not in {os.path.realpath(d) for d in SYSTEM_BIN_DIRS}:
            return None
    else:
        looked_up = which(program, path)
        if looked_up is None or not os.path.isabs(looked_up):
            return None
        found, real = looked_up, os.path.realpath(looked_up)
    roots = {os.path.normpath(root) for root in writable}
    roots |= {os.path.realpath(root) for root in writable}
    where = (os.path.dirname(os.path.normpath(found)), real)
    if any(_inside(place, root) for place in where for root in roots):
        return None
    return real


def document() -> str:
    """The list as docs/approvals.md shows it, between its markers (tests/test_docs.py)."""
    rows = [f"- programs: {_codes(sorted(READ_ONLY_PROGRAMS))}"]
    for program, syntax in sorted(PROGRAMS.items()):
        match syntax:
            case Getopt():
                reads = [o for o in syntax.options if o.reads]
                asks = [o for o in syntax.options if not o.reads]
                rows.append(f"- `{program}` with: {_spelled(reads)}")
                if asks:
                    rows.append(f"- `{program}` asks with: {_spelled(asks)}")
                if syntax.operands is Operands.FORMAT:
                    rows.append(f"- `{program}` operands: `+FORMAT` only")
            case Find():
                rows.append(f"- `{program}` leading options: {_codes(sorted(FIND_LEADING))}")
                expression = [*FIND_PRIMARIES, "-newerXY"]
                rows.append(f"- `{program}` expression: {_codes(expression)}")
            case AnyArguments():
                rows.append(f"- `{program}` with: any argument")
    return "\n".join(rows) + "\n"


def _spelled(options: Iterable[Option]) -> str:
    return ", ".join("/".join(f"`{s}`" for s in option.spellings) for option in options)


def _codes(items: Iterable[str]) -> str:
    return ", ".join(f"`{item}`" for item in items)


__all__ = [
    "FIND_LEADING",
    "FIND_NEWER",
    "FIND_PRIMARIES",
    "PROGRAMS",
    "READ_ONLY_PROGRAMS",
    "SYSTEM_BIN_DIRS",
    "AnyArguments",
    "Arg",
    "Find",
    "Getopt",
    "Lookup",
    "Operands",
    "Option",
    "Syntax",
    "document",
    "find_on_path",
    "judge",
    "reads_only",
]
