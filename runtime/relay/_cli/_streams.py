"""The process of the ``relay`` command: its signals and its standard streams.

A run ends early when a signal comes (SIGINT, SIGTERM: exit 130 or 143) or when standard output
cannot be written: a closed pipe whose reader went away is SIGPIPE (exit 141), anything else (a
closed descriptor, a full disk) is exit 1 with ``relay: cannot write to standard output:
REASON`` on stderr. Either way the session is shut down as for a signal. A standard
descriptor closed before relay started is held open on ``/dev/null`` so that no file relay
opens takes its number.
"""

from __future__ import annotations

import errno
import io
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO, cast

if TYPE_CHECKING:
    from .._drive._runner import ScriptRunner
    from ._outcome import RunOutcome

EXIT_OK = 0
EXIT_FAILED = 1


def signal_status(signum: int) -> int:
    return 128 + signum


class Interrupted:
    """What ended a run early: the first SIGINT/SIGTERM, or a standard output that cannot be
    written; and the runner to stop when it comes."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.runner: ScriptRunner | None = None
        self.output_closed = False
        self.output_error: OSError | None = None
        """Why standard output could not be written, unless it was a closed pipe (SIGPIPE)."""

    @property
    def signalled(self) -> bool:
        """Whether SIGINT or SIGTERM came (not a closed output's SIGPIPE)."""
        return self.signum in (signal.SIGINT, signal.SIGTERM)

    @property
    def stopping(self) -> bool:
        """Whether the run is to end early."""
        return self.signum is not None or self.output_error is not None

    def close_output(self, error: OSError) -> None:
        """Standard output cannot be written: stop as for a signal. A closed pipe (the reader
        went away) is reported as SIGPIPE; anything else (closed, a full disk) as a failure."""
        self.output_closed = True
        if isinstance(error, BrokenPipeError):
            self.receive(signal.SIGPIPE)
        elif not self.stopping:
            self.output_error = error
            if self.runner is not None:
                self.runner.stop()

    def receive(self, signum: int) -> None:
        if self.signum is None:
            stopped = self.stopping
            self.signum = signum
            if self.runner is not None and not stopped:
                self.runner.stop()
            if signum != signal.SIGPIPE:
                # The session shuts down now; whatever holds it up, the process ends in time.
                first = signum
                end_after(
                    END_BOUND,
                    lambda: f"the session did not end within {END_BOUND:g} s of the signal",
                    lambda: signal_status(first),
                )
        elif signum in (signal.SIGINT, signal.SIGTERM):
            # A second signal means now: no shutdown, no flush beyond what is already written.
            exit_interrupted(self.signum)


class ClosedOutput(io.TextIOBase):
    """Standard output when its descriptor was closed before relay started: every write fails
    as a write to a closed descriptor does."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))


def hold_standard_descriptors() -> None:
    """Open ``/dev/null`` on a standard descriptor that was closed before relay started, so
    that no file relay opens takes its number (a rollout on descriptor 1 would receive what is
    printed). A closed standard output still fails at its first write, as it should."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stdin is None:
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    if sys.stdout is None:
        sys.stdout = cast(TextIO, ClosedOutput())
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115


def discard_stdout() -> None:
    """Point standard output at ``/dev/null``: what is still buffered for the closed pipe or
    the full disk, and the interpreter's last flush, go nowhere instead of failing again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def output_failed(error: OSError) -> None:
    """Say, on stderr, that standard output could not be written."""
    discard_stdout()
    print(f"relay: cannot write to standard output: {error.strerror}", file=sys.stderr)


def to_stdout(write: Callable[[], object]) -> int:
    """Run ``write`` (to standard output) and flush: EXIT_OK, or EXIT_FAILED when standard
    output cannot be written (said in one line). A reader that went away is no failure."""
    try:
        write()
        sys.stdout.flush()
    except BrokenPipeError:
        discard_stdout()
    except OSError as failure:
        output_failed(failure)
        return EXIT_FAILED
    return EXIT_OK


#: Seconds of wall time a run may take to end once it was asked to (a signal, or the end of its
#: script), whatever a task of its does: past them, the process ends anyway (docs/cli.md).
END_BOUND = 5.0


def end_after(seconds: float, why: Callable[[], str], status: Callable[[], int]) -> threading.Timer:
    """End the process ``seconds`` from now, on the wall clock and whatever its event loop
    does, with a warning saying ``why()`` and the exit status ``status()``; cancel the timer
    returned to let it end by itself."""

    def end() -> None:
        try:
            sys.stdout.flush()
            sys.stderr.write(f"relay: warning: {why()}; exiting without waiting for it\n")
            sys.stderr.flush()
        finally:
            os._exit(status())

    timer = threading.Timer(seconds, end)
    timer.daemon = True
    timer.start()
    return timer


def exit_interrupted(signum: int) -> None:
    try:
        sys.stderr.write("relay: interrupted\n")
        sys.stderr.flush()
    finally:
        os._exit(signal_status(signum))


def exit_before_start(signum: int, _frame: Any) -> None:
    # No session is open yet: there is nothing to end gracefully.
    exit_interrupted(signum)


def lingering_warning(session: Any) -> str:
    """The warning of a run whose session does not end: the tasks that would not stop."""
    tasks = session.statistics().lingering
    named = ", ".join(tasks) if tasks else "a task"
    return (
        f"the session did not end within {END_BOUND:g} s: {named} did not stop when asked "
        "(it ignores cancellation)"
    )


def ended_early_status(outcome: RunOutcome, answer_only: bool) -> int:
    """The exit status of a run ended past the bound, with what ``relay exec`` prints."""
    if answer_only:
        for error in outcome.errors:
            print(f"relay: {error.message}", file=sys.stderr)
        if outcome.last_answer is not None:
            print(outcome.last_answer, flush=True)
    return EXIT_FAILED if outcome.failed else EXIT_OK


__all__ = [
    "ended_early_status",
    "lingering_warning",
    "END_BOUND",
    "EXIT_FAILED",
    "EXIT_OK",
    "ClosedOutput",
    "Interrupted",
    "discard_stdout",
    "end_after",
    "exit_before_start",
    "exit_interrupted",
    "hold_standard_descriptors",
    "output_failed",
    "signal_status",
    "to_stdout",
]
