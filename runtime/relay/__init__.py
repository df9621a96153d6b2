"""relay: an actor runtime for agent sessions.

Open a session with :func:`open_session`, submit ops (:class:`UserTurn`, :class:`Compact`,
:class:`Interrupt`, ...) and read events (:class:`TurnStarted`, :class:`TurnComplete`, ...).

This namespace is for embedders. Authors of tasks, compaction backends and model clients find
the other side in :mod:`relay.lowlevel` and :mod:`relay.compaction`; test doubles are in
:mod:`relay.testing`.

The names are defined in ``runtime/_api.py`` and loaded on first use, so that a program (or the
``relay`` command) that needs one module of the package does not pay for all of them.
"""

from __future__ import annotations

import importlib as _importlib
import pkgutil as _pkgutil
import typing as _typing

from ._version import __version__ as __version__

# relay.tasks lives in a second source root (tasks/relay/tasks) in a checkout; an installed wheel
# has it here already.
__path__ = _pkgutil.extend_path(__path__, __name__)

if _typing.TYPE_CHECKING:
    from ._api import *  # noqa: F403


def __getattr__(name: str) -> _typing.Any:
    if name.startswith("_"):
        # Private submodules (``from . import _protocol``) are imported by the import system,
        # which asks here first; answering must not load the whole package.
        raise AttributeError(f"module 'relay' has no attribute {name!r}")
    api = _importlib.import_module("relay._api")
    try:
        value = getattr(api, name)
    except AttributeError:
        raise AttributeError(f"module 'relay' has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    api = _importlib.import_module("relay._api")
    return sorted({*globals(), *(name for name in dir(api) if not name.startswith("_"))})
