"""``relay eval`` on hostile input: fixtures with links and special files, configuration names
that are no names, ``expect`` patterns that backtrack for ever, an ``expect`` that is no pattern.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from relay._cli._main import main
from relay._eval._corpus import load_case
from relay._eval._score import answer_matches, oracle_answer

#: A guard against a hang, not a measure: every run here ends in a second or two.
GUARD_S = 60


def _case(folder: Path, *, text: str = "Read a.py.", expect: str = r"SECRET\s*=\s*42") -> Path:
    """A case that reads ``a.py`` in its fixture and asks one question."""
    fixture = folder / "fixture"
    fixture.mkdir(parents=True)
    (fixture / "a.py").write_text("SECRET = 42\n", encoding="utf-8")
    steps = [
        {"id": "one", "op": {"type": "user_turn", "items": [{"type": "text", "text": text}]}},
        {"wait_for": {"type": "turn_complete", "match": {"turn_id": "one"}}},
    ]
    (folder / "ops.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    read = {"function_call": {"name": "read_file", "arguments": {"path": "a.py"}}}
    (folder / "model.json").write_text(json.dumps({"responses": [read, "Read it."]}))
    probes = {"facts": ["SECRET = 42"], "questions": [{"ask": "SECRET?", "expect": expect}]}
    (folder / "probes.json").write_text(json.dumps(probes))
    return fixture


def _eval(corpus: Path, *args: str, fsize: int | None = None) -> subprocess.CompletedProcess[str]:
    """``relay eval CORPUS ARGS`` as a real process (with a file size limit, when given, so
    that a copy that never ends cannot fill the disk)."""

    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [sys.executable, "-m", "relay", "eval", str(corpus), "--repeats", "1", *args],
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        preexec_fn=limit,
        check=False,
    )


# ------------------------------------------------------------------------------ fixtures


def test_a_link_that_leaves_the_fixture_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("the password is hunter2\n")
    fixture = _case(tmp_path / "corpus" / "leak")
    (fixture / "notes.txt").symlink_to(outside)
    assert main(["eval", str(tmp_path / "corpus"), "--repeats", "1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert "leak/fixture/notes.txt" in err[0] and "leaves the fixture" in err[0]
    assert "hunter2" not in err[0]


def test_a_link_to_dev_zero_is_refused_before_anything_is_copied(tmp_path: Path) -> None:
    fixture = _case(tmp_path / "corpus" / "zero")
    (fixture / "big.bin").symlink_to("/dev/zero")
    # The limit keeps a copy that would read /dev/zero for ever from filling the disk.
    result = _eval(tmp_path / "corpus", fsize=1 << 20)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert "zero/fixture/big.bin" in line and "leaves the fixture" in line


def _special(kind: str, path: Path) -> None:
    if kind == "FIFO":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    else:
        try:
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
        except PermissionError:
            pytest.skip("making a device node needs privileges")


@pytest.mark.parametrize(("kind", "said"), [("FIFO", "a FIFO"), ("socket", "a socket"),
                                            ("device", "a character device")])  # fmt: skip
def test_a_special_file_in_a_fixture_is_refused_by_name(
    tmp_path: Path, kind: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = _case(tmp_path / "corpus" / "odd")
    (fixture / "sub").mkdir()
    _special(kind, fixture / "sub" / "thing")
    assert main(["eval", str(tmp_path / "corpus"), "--repeats", "1"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "odd/fixture/sub/thing" in line and said in line and "not a regular file" in line


def test_links_within_the_fixture_are_copied_as_links_into_the_copy(tmp_path: Path) -> None:
    from relay._eval._fixture import copy_fixture

    fixture = _case(tmp_path / "corpus" / "links")
    (fixture / "sub").mkdir()
    (fixture / "sub" / "b.txt").write_text("b\n")
    (fixture / "run.sh").write_text("#!/bin/sh\necho ok\n")
    (fixture / "run.sh").chmod(0o755)
    (fixture / "same.py").symlink_to("a.py")
    (fixture / "sub" / "up.py").symlink_to("../a.py")
    (fixture / "absolute.py").symlink_to(fixture / "a.py")  # absolute, but inside
    (fixture / "folder").symlink_to("sub")
    (fixture / "dangling").symlink_to("not-yet-there")
    case = load_case(tmp_path / "corpus" / "links")
    assert case.fixture is not None
    work = tmp_path / "work"
    copy_fixture(case.fixture, work)
    for name in ("same.py", "sub/up.py", "absolute.py", "folder", "dangling"):
        copied = work / name
        assert copied.is_symlink(), name
        # Each copied link points into the copy, never back into the corpus.
        assert not os.path.isabs(os.readlink(copied)), name
        assert copied.resolve().is_relative_to(work.resolve()), name
    assert (work / "same.py").read_text() == "SECRET = 42\n"
    assert (work / "sub" / "up.py").read_text() == "SECRET = 42\n"
    assert (work / "absolute.py").read_text() == "SECRET = 42\n"
    assert (work / "folder" / "b.txt").read_text() == "b\n"
    assert stat.S_IMODE((work / "run.sh").stat().st_mode) == 0o755
    # Writing through a copied link changes the copy, not the corpus.
    (work / "absolute.py").write_text("changed\n")
    assert (fixture / "a.py").read_text() == "SECRET = 42\n"


def test_a_fixture_that_is_itself_a_link_out_of_the_case_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "id_rsa").write_text("PRIVATE\n")
    _case(tmp_path / "corpus" / "far")
    fixture = tmp_path / "corpus" / "far" / "fixture"
    (fixture / "a.py").unlink()
    fixture.rmdir()
    fixture.symlink_to(elsewhere)
    assert main(["eval", str(tmp_path / "corpus"), "--repeats", "1"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "far/fixture" in line and "link" in line


# ------------------------------------------------------------------------------ names


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("a\u0000b", "control character"),
        ("x" * 300, "longer than 64 characters"),
        ("tab\there", "control character"),
        ("../up", "'/'"),
        ("..", "not a name"),
        ("", "has no name"),
    ],
)
def test_a_configuration_name_that_is_no_name_is_exit_2(
    tmp_path: Path, name: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _case(tmp_path / "corpus" / "one")
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(f"[[configuration]]\nname = {json.dumps(name)}\n")
    assert main(["eval", str(tmp_path / "corpus"), "--matrix", str(matrix)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("relay eval: ") and "configuration 1" in line and said in line
    assert "\x00" not in line and len(line) < 300


# ------------------------------------------------------------------------------ expect


@pytest.mark.slow  # a process of its own, and a second of matching
@pytest.mark.parametrize("pattern", ["(a+)+$", "(a|aa)+$", r"(\w|a)+$", "(a*)*b"])
def test_an_expect_that_backtracks_for_ever_is_given_up(pattern: str) -> None:
    """Before, each of these took longer than the age of the universe on 60 characters (the
    guard ends it); now the match gives up at its time bound."""
    code = (
        "import sys, relay._eval._score as s\n"
        "s.MATCH_TIMEOUT_S = 0.2\n"
        "try:\n"
        f"    print(s.answer_matches('a' * 60 + '!', {pattern!r}))\n"
        "except s.PatternTimeout as exc:\n"
        "    print('gave up:', exc)\n"
        "try:\n"
        f"    print(s.oracle_answer('x' + 'a' * 60 + '!', {pattern!r}))\n"
        "except s.PatternTimeout as exc:\n"
        "    print('gave up:', exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=GUARD_S, check=False
    )
    assert result.returncode == 0, result.stderr
    for line in result.stdout.splitlines():
        assert line in ("False", "I no longer know.") or (
            line.startswith("gave up:") and "0.2 s" in line
        ), line


def test_a_well_behaved_expect_still_matches() -> None:
    assert answer_matches("It is SECRET = 42.", r"secret\s*=\s*42")
    assert not answer_matches("I no longer know.", r"SECRET\s*=\s*42")
    assert oracle_answer('{"a": "SECRET = 42"}', r"SECRET\s*=\s*\d+") == "SECRET = 42"


@pytest.mark.slow
def test_relay_eval_with_an_expect_that_backtracks_ends_with_the_question_failed(
    tmp_path: Path,
) -> None:
    # The session's own text holds the run of a's the pattern chokes on: the scripted reader
    # looks for the pattern in the whole conversation.
    _case(tmp_path / "corpus" / "redos", text="Read a.py. " + "a" * 60 + "!", expect="(a|aa)+$")
    code = (
        "import sys, relay._eval._score as s\n"
        "s.MATCH_TIMEOUT_S = 0.2\n"
        "from relay._cli._main import main\n"
        f"sys.exit(main(['eval', {str(tmp_path / 'corpus')!r}, '--repeats', '1']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=GUARD_S, check=False
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("failed: default redos #0: question 1: ") and "0.2 s" in line
    assert "default" in result.stdout  # the table still comes out


def test_an_expect_that_is_not_a_pattern_is_refused_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _case(tmp_path / "corpus" / "bad", expect="SECRET (")
    assert main(["eval", str(tmp_path / "corpus")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "bad/probes.json" in line and "question 1" in line and "SECRET (" in line


def _runs_code(corpus: Path, proof: Path) -> None:
    """A matrix whose one configuration starts an MCP server, runs a hook and turns the shell
    tool on: each writes to ``proof`` when it runs."""
    write = f"open({str(proof)!r}, 'a').write('ran\\n')"
    matrix = f"""
[[configuration]]
name = "runs"
tools = {{ shell = true }}

[configuration.mcp_servers.writer]
command = {json.dumps(sys.executable)}
args = ["-c", {json.dumps(write)}]

[[configuration.hooks.pre_compact]]
command = [{json.dumps(sys.executable)}, "-c", {json.dumps(write)}]
"""
    (corpus / "matrix.toml").write_text(matrix, encoding="utf-8")


def test_a_corpus_that_runs_code_is_refused_and_says_what_it_would_run(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    _case(corpus / "case")
    proof = tmp_path / "proof.txt"
    _runs_code(corpus, proof)
    result = _eval(corpus)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == (
        "relay eval: the corpus runs code on this machine, and nothing ran; give "
        "--trust-corpus to run it:"
    )
    assert lines[1].startswith(
        "  configuration 'runs': mcp_servers starts the MCP servers it names: "
        '{"writer": {"command": '
    )
    assert lines[2].startswith(
        "  configuration 'runs': hooks runs the hook commands it names: {\"pre_compact\": "
    )
    assert lines[3] == (
        "  configuration 'runs': the shell tool runs the commands of the cases' model scripts "
        "(with --live, those the model runs) on this machine"
    )
    assert len(lines) == 4
    assert not proof.exists()


@pytest.mark.slow  # a process that runs a session and starts a server
def test_a_trusted_corpus_runs_and_says_first_what_it_runs(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    _case(corpus / "case")
    proof = tmp_path / "proof.txt"
    _runs_code(corpus, proof)
    result = _eval(corpus, "--trust-corpus")
    assert result.stderr.startswith(
        "relay eval: --trust-corpus: the corpus runs on this machine:\n"
        "  configuration 'runs': mcp_servers starts the MCP servers it names: "
    )
    assert result.stdout.startswith("1 case(s) × 1 configuration(s) × 1 repeat(s)\n")
    assert proof.read_text() == "ran\n"  # the MCP server was started (and did not answer)
