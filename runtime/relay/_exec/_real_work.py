"""Real work under a virtual clock: relay's waits on worker threads and child processes.

Theory of operation. trio's ``MockClock`` with an autojump threshold (pytest-trio's
``autojump_clock``) jumps to the next deadline whenever every task has been blocked for that
long. A task blocked on a worker thread (a file read) or on a child process (a command) is
not idle, though: the work goes on in real time, and a jump would fire a deadline (a test's
``wait_for(..., timeout=5)``) that, in real time, is far away.

So relay counts the waits on real work it has in progress, per clock. When the count leaves
zero it holds the clock's autojump (the threshold becomes infinite) and when the count comes
back to zero it gives the clock the threshold it had. While held, virtual time stands still:
the loop sleeps until the work wakes it. That is why the deadlines of the work itself run on
the wall clock, whatever clock the loop has (the shell tool's and a hook command's timeouts are
kept by the command's guard, see :mod:`._process`): a virtual deadline would never come.

Under any other clock (trio's own, asyncio's) :func:`real_work` only counts nothing. The count
is touched only from the loop's thread.
"""

from __future__ import annotations

import math
import sys
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import attrs

T = TypeVar("T")


@attrs.define
class _Hold:
    count: int
    """Waits on real work in progress under the clock."""
    threshold: float
    """The clock's autojump threshold before the first of them."""


_holds: weakref.WeakKeyDictionary[Any, _Hold] = weakref.WeakKeyDictionary()


def _mock_clock() -> Any:
    """The running trio loop's clock when it is a ``MockClock``, else None."""
    trio = sys.modules.get("trio")
    testing = sys.modules.get("trio.testing")
    if trio is None or testing is None:
        # No MockClock exists before trio.testing is imported.
        return None
    try:
        clock = trio.lowlevel.current_clock()
    except RuntimeError:  # not in a trio run (asyncio, or no loop)
        return None
    return clock if isinstance(clock, testing.MockClock) else None


@contextmanager
def real_work() -> Iterator[None]:
    """Hold a trio ``MockClock``'s autojump while the block waits on real work.

    Wrap a wait on a worker thread, a child process or anything else that runs in real time;
    blocks may nest and overlap. Deadlines inside the block must not be virtual ones: the
    clock does not move until the last such block ends.
    """
    clock = _mock_clock()
    if clock is None:
        yield
        return
    hold = _holds.get(clock)
    if hold is None:
        hold = _holds[clock] = _Hold(0, clock.autojump_threshold)
        clock.autojump_threshold = math.inf
    hold.count += 1
    try:
        yield
    finally:
        hold.count -= 1
        if hold.count == 0:
            del _holds[clock]
            clock.autojump_threshold = hold.threshold


async def in_thread(func: Callable[..., T], *args: object, abandon_on_cancel: bool = False) -> T:
    """``func(*args)`` in a worker thread, as real work (:func:`real_work`)."""
    with real_work():
        return await anyio.to_thread.run_sync(func, *args, abandon_on_cancel=abandon_on_cancel)


__all__ = ["in_thread", "real_work"]
