"""The parts of the ``openai`` SDK relay uses, imported without the SDK's catalogue of types.

relay sends every request with the SDK's client (``AsyncOpenAI.post``) and translates the SDK's
exception classes; it never uses the SDK's response types. Yet the ``openai`` package's
``__init__`` imports all of them: ``openai.types`` and ``openai.lib`` build about 650 pydantic
models, which is about 60 % of the cost of importing the SDK and, in a ``relay run`` of one
turn over HTTP, 0.4 s of CPU (docs/benchmarks.md). Importing any module of the SDK runs that
``__init__`` first.

So, when the SDK is not loaded yet, the packages whose ``__init__`` pulls in the catalogue
(:data:`DEFERRED`; ``openai.types.shared`` too, of which the SDK's exceptions use one module)
are entered as *deferred packages* before relay imports the modules it needs: module objects
made from the packages' own specs whose submodules import as usual, and whose ``__init__`` has
not run. Once relay's imports are done, each deferred package
runs its own ``__init__``, in the same module object, the first time anyone asks it for a name
it does not have yet (``openai.OpenAI``, ``from openai import *``, ``dir(openai)``). A program
that uses the SDK beside relay sees the complete package, the classes relay holds are the SDK's
own, and only a program that never touches the rest of the SDK skips its cost.

Should the SDK's layout change so that this no longer works, every module of the attempt is
dropped and the SDK is imported as usual: slower, never wrong.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

#: The packages whose ``__init__`` is deferred, parents first.
DEFERRED = ("openai", "openai.types", "openai.types.shared", "openai.lib")

#: The modules relay imports from the SDK (what the names below come from).
_NEEDED = ("openai._client", "openai._base_client", "openai._exceptions")

#: Held while a deferred package runs its ``__init__`` (threads may ask at once).
_COMPLETING = threading.RLock()


def _complete(module: types.ModuleType) -> None:
    """Run ``module``'s own ``__init__`` in it, once."""
    with _COMPLETING:
        namespace = module.__dict__
        if not namespace.pop("__relay_deferred__", False):
            return
        namespace.pop("__getattr__", None)
        namespace.pop("__dir__", None)
        spec = module.__spec__
        assert spec is not None and spec.loader is not None
        spec.loader.exec_module(module)


def _hooks(module: types.ModuleType) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of a deferred package."""

    def __getattr__(name: str) -> Any:
        _complete(module)
        return getattr(module, name)

    def __dir__() -> list[str]:
        _complete(module)
        return dir(module)

    return __getattr__, __dir__


def _enter_deferred(name: str) -> types.ModuleType:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name} is not a package")
    module = importlib.util.module_from_spec(spec)
    module.__dict__["__relay_deferred__"] = True
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    return module


def load() -> None:
    """Import the SDK modules relay uses, leaving the rest of the SDK for whoever needs it.

    Nothing happens when the SDK is loaded already (by the program, or by an earlier call).
    """
    if "openai" in sys.modules:
        return
    try:
        packages = [_enter_deferred(name) for name in DEFERRED]
        # The SDK's own modules probe their package with ``from . import name``: the
        # packages answer only once those imports are done, so the probes import submodules
        # instead of running the packages' ``__init__``.
        for name in _NEEDED:
            importlib.import_module(name)
        importlib.import_module("openai._utils._logs").setup_logging()
    except Exception:  # any failure means: import the SDK as usual
        for name in [n for n in sys.modules if n == "openai" or n.startswith("openai.")]:
            del sys.modules[name]
        importlib.import_module("openai")
        return
    for package in packages:
        if package.__dict__.get("__relay_deferred__"):
            vars(package).update(zip(("__getattr__", "__dir__"), _hooks(package), strict=True))


def is_deferred(name: str) -> bool:
    """Whether the package ``name`` is loaded and its ``__init__`` has not run yet."""
    module = sys.modules.get(name)
    return module is not None and bool(module.__dict__.get("__relay_deferred__"))


load()

# Imported after ``load()`` on purpose: these names are what it made cheap to import.
from openai._base_client import DefaultAsyncHttpxClient, get_platform  # noqa: E402
from openai._client import AsyncOpenAI  # noqa: E402
from openai._exceptions import (  # noqa: E402
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    OpenAIError,
)

__all__ = [
    "DEFERRED",
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "AsyncOpenAI",
    "DefaultAsyncHttpxClient",
    "OpenAIError",
    "SdkClient",
    "is_deferred",
    "load",
]


@functools.cache
def _this_platform() -> Any:
    return get_platform()


class SdkClient(AsyncOpenAI):
    """The SDK's client, told the platform it reports (``X-Stainless-OS``) when it is made.

    Left to itself, the SDK finds the platform in a worker thread at its first request, so
    inside that request's deadlines: under a virtual clock (trio's autojump clock in tests)
    the thread's real duration lets the clock jump to the nearest deadline, which then
    expires at once. relay finds it once per process, without a thread (a few milliseconds,
    then cached), and every request's deadlines measure the server alone.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._platform = _this_platform()
