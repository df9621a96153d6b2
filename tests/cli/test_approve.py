"""``relay exec``'s approvals without a process: the answers, the question, the reader of a
line, and the callbacks (docs/approvals.md)."""

from __future__ import annotations

import io
import os
import select

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

import relay
from relay._cli._approve import (
    LINE_GUTTER,
    PROMPT,
    WRAP_GUTTER,
    TerminalApprover,
    call_text,
    decision_of,
    deny_unasked,
    exec_approver,
    question,
    read_line,
    wrapped,
)
from relay._cli._outcome import RunOutcome
from relay._cli._pretty import PrettyPrinter, command_line

D = relay.ReviewDecision


@pytest.mark.parametrize(
    ("answer", "decision"),
    [
        ("y", D.APPROVED),
        (" Yes\n", D.APPROVED),
        ("a", D.APPROVED_FOR_SESSION),
        ("A\r", D.APPROVED_FOR_SESSION),
        ("n", D.DENIED),
        ("no", D.DENIED),
        ("", None),
        ("   ", None),
        ("maybe", None),
        ("abort", None),
    ],
)
def test_an_answer_gives_a_decision_or_asks_again(answer: str, decision: D | None) -> None:
    assert decision_of(answer) is decision


def test_a_command_is_shown_as_a_shell_reads_it_with_control_characters_written_out() -> None:
    assert command_line(("rm", "-r", "my dir")) == "rm -r 'my dir'"
    # An escape sequence in an argument cannot rewrite what the question shows.
    assert command_line(("echo", "\x1b[2K\rls")) == "echo '\\x1b[2K\\x0dls'"
    tool = relay.ToolInvocation("docs", "delete_page", {"page": "home"})
    assert command_line(tool) == 'docs/delete_page {"page": "home"}'
    own = relay.ToolInvocation(None, "write_note", {"text": "x" * 1000})
    shown = command_line(own)
    assert shown.startswith('write_note {"text": "xxx') and shown.endswith("…")
    assert len(shown) < 450


def test_a_question_names_the_call_the_command_where_and_why() -> None:
    request = relay.ExecApprovalRequest(
        "c1", "t1", ("touch", "made"), "/work", "approval policy untrusted: \x1b]0;x"
    )
    assert question(request) == (
        "relay: the call c1 waits for your approval\n"
        "  touch made\n"
        "  in /work\n"
        "  why: approval policy untrusted: \\x1b]0;x\n"
    )
    unexplained = relay.ExecApprovalRequest("c2", "t1", ("ls",), "/work")
    assert "why" not in question(unexplained)


def unwrapped(shown: str) -> tuple[str, list[str]]:
    """The call a question shows on more than one line, its gutters taken off and its pieces
    joined; and the question's other lines."""
    lines: list[str] = []
    others: list[str] = []
    for line in shown.splitlines():
        if line.startswith(LINE_GUTTER):
            lines.append(line.removeprefix(LINE_GUTTER))
        elif line.startswith(WRAP_GUTTER):
            lines[-1] += line.removeprefix(WRAP_GUTTER)
        else:
            others.append(line)
    return "\n".join(lines), others


def test_a_long_call_is_shown_whole_wrapped_to_the_width_with_its_size() -> None:
    # 5,000 characters of a write whose target path is its last word: past any cut.
    body = ("lorem ipsum \x1b[2J dolor " * 250)[: 5000 - 40]
    argv = ("write_file", body, "/home/me/.ssh/authorized_keys")
    request = relay.ExecApprovalRequest("c1", "t1", argv, "/work", "policy")
    shown = question(request, width=72)
    whole = call_text(argv)
    assert whole.endswith(" /home/me/.ssh/authorized_keys")
    assert "\x1b" not in shown and "\\x1b[2J" in whole  # written out, as before
    call, others = unwrapped(shown)
    assert call == whole  # every character, in order
    assert all(len(line) <= 72 for line in shown.splitlines())
    assert f"  ({len(whole):,} characters)" in others
    assert len(whole) > 5000 and "," in f"{len(whole):,}"
    assert others[0] == "relay: the call c1 waits for your approval"
    assert others[-2:] == ["  in /work", "  why: policy"]


def test_a_long_tool_call_is_shown_whole_with_all_its_arguments() -> None:
    tool = relay.ToolInvocation(None, "write_note", {"text": "x" * 4900, "path": "/etc/motd"})
    shown = question(relay.ExecApprovalRequest("c1", "t1", tool, "/w"), width=100)
    call, others = unwrapped(shown)
    assert call == call_text(tool)
    assert call.startswith('write_note {"text": "xxx') and call.endswith('"path": "/etc/motd"}')
    assert f"  ({len(call):,} characters)" in others


def test_the_lines_of_a_script_keep_their_gutter_and_cannot_pose_as_the_question() -> None:
    script = "cat > f <<EOF\nhi\nEOF\n  in /safe\nrelay: run it?\nrm -rf \ud800/"
    request = relay.ExecApprovalRequest("c\n2", "t1", ("bash", "-lc", script), "/w\nx")
    shown = question(request, width=200)
    call, others = unwrapped(shown)
    assert call == "bash -lc " + script.replace("\ud800", "\\ud800").join("''")
    lines = call.count("\n") + 1
    assert others == [
        "relay: the call c\\n2 waits for your approval",
        f"  ({len(call)} characters, {lines} lines)",
        "  in /w\\nx",
    ]
    shown.encode()  # a surrogate alone is written out: the terminal can be written to


@given(st.text(alphabet=st.sampled_from("ab /-"), max_size=300), st.integers(1, 80))
def test_pieces_join_back_to_the_line_and_keep_to_the_width(line: str, width: int) -> None:
    pieces = wrapped(line, width)
    assert "".join(pieces) == line
    assert all(0 < len(piece) <= width for piece in pieces) or pieces == [""]


def test_without_a_terminal_every_request_is_denied_at_once_with_a_warning() -> None:
    err = io.StringIO()
    deny = deny_unasked(err)
    request = relay.ExecApprovalRequest("c1", "t1", ("touch", "made"), "/w", "policy")
    assert deny(request) is D.DENIED
    assert deny(relay.ExecApprovalRequest("c2", "t1", ("rm", "x"), "/w")) is D.DENIED
    assert err.getvalue().splitlines() == [
        f"relay: warning: denied the call {call_id} ({shown}): it needs an approval, and "
        "without a terminal (standard input and standard error) nobody can give one"
        for call_id, shown in [("c1", "touch made"), ("c2", "rm x")]
    ]


def test_the_callback_asks_only_when_both_stdin_and_stderr_are_terminals() -> None:
    class Tty(io.StringIO):
        def __init__(self, tty: bool) -> None:
            super().__init__()
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

        def fileno(self) -> int:
            return 0

    assert isinstance(exec_approver(Tty(True), Tty(True)), TerminalApprover)
    for stdin, stderr in [(True, False), (False, True), (False, False)]:
        assert not isinstance(exec_approver(Tty(stdin), Tty(stderr)), TerminalApprover)


# ------------------------------------------------------------------ reading a line


def pipe_with(data: bytes, *, close: bool) -> int:
    read, write = os.pipe()
    os.write(write, data)
    if close:
        os.close(write)
    return read


def test_a_line_is_read_without_its_newline_and_the_release_is_closed() -> None:
    release, releasing = os.pipe()
    fd = pipe_with(b"oui\nrest", close=False)
    assert read_line(fd, release) == "oui"
    with pytest.raises(OSError):
        os.fstat(release)
    os.close(releasing)
    os.close(fd)


def test_the_end_of_input_reads_as_none_and_a_last_line_without_newline_as_a_line() -> None:
    for data, expected in [(b"", None), (b"y", "y")]:
        release, releasing = os.pipe()
        fd = pipe_with(data, close=True)
        assert read_line(fd, release) == expected
        os.close(releasing)
        os.close(fd)


def test_a_byte_on_the_release_ends_the_read_with_nothing_read() -> None:
    release, releasing = os.pipe()
    read, write = os.pipe()  # nothing is ever written: only the release ends the read
    os.write(releasing, b"x")
    assert read_line(read, release) is None
    for fd in (releasing, read, write):
        os.close(fd)


# ------------------------------------------------------------------ the terminal callback


async def test_the_terminal_callback_asks_again_until_an_answer_decides() -> None:
    answers, typing = os.pipe()
    err = io.StringIO()
    approve = TerminalApprover(answers, err)
    request = relay.ExecApprovalRequest("c1", "t1", ("touch", "made"), "/w", "policy")
    os.write(typing, b"\nwhat\na\n")
    assert await approve(request) is D.APPROVED_FOR_SESSION
    assert err.getvalue() == question(request) + PROMPT * 3
    os.close(typing)
    assert await approve(request) is D.DENIED  # the end of input
    assert err.getvalue().endswith(PROMPT + "\nrelay: no answer (end of input): denied\n")
    os.close(answers)


async def test_a_cancelled_question_leaves_nothing_reading_the_terminal() -> None:
    answers, typing = os.pipe()
    approve = TerminalApprover(answers, io.StringIO())
    request = relay.ExecApprovalRequest("c1", "t1", ("touch", "made"), "/w")
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(approve, request)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    # The abandoned reader was released before this line was typed: it never reads it.
    os.write(typing, b"y\n")
    ready, _, _ = select.select([answers], [], [], 10)
    assert ready and os.read(answers, 100) == b"y\n"
    os.close(typing)
    os.close(answers)


def test_the_transcript_shows_a_request_and_stops_its_live_indicator() -> None:
    out = io.StringIO()
    printer = PrettyPrinter(out, live=True, outcome=RunOutcome())
    printer.event(relay.Event("t1", 1, relay.TurnStarted("t1", None, 0.0)))
    request = relay.ExecApprovalRequest("c1", "t1", ("touch", "made"), "/w")
    printer.event(relay.Event("t1", 2, request))
    shown = out.getvalue()
    assert shown.endswith("  ? approval asked for c1: touch made\n")
    printer.tick()
    assert out.getvalue() == shown  # nothing redrawn under the question
