"""The task factories of a session: relay's own, those installed packages add, a
configuration's ``[tasks]`` and the embedder's own, by op type (docs/tasks.md).

relay's own tasks are named here by where they live (``"module:attribute"``), as an embedder
names its own, and loaded when a session opens: the core and this face never import
``relay.tasks``, which is built on the public API alone.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs

from .._base._errors import ConfigError
from .._base._protocol import BUILTIN_OP_TYPES
from .._core._port import SessionTask
from .._core._session import TaskFactories

#: relay's own task factories, by op type.
BUILTIN_TASKS: Mapping[str, str] = {
    "user_turn": "relay.tasks:regular",
    "user_input": "relay.tasks:regular",
    "compact": "relay.tasks:compact",
}
#: relay's own compactor (one per task).
BUILTIN_COMPACTOR = "relay.tasks.compaction:Compactor"

TaskFactory = Callable[[Any], SessionTask]
"""Makes the task of an op: ``(op) -> SessionTask``."""


def load_object(spec: str, *, what: str) -> Any:
    """The object ``"package.module:attribute"`` or ``"path/to/file.py:attribute"`` names.

    Raises:
        ConfigError: the spec is malformed, or the module or attribute cannot be loaded (the
            message names ``what`` and the spec).
    """
    module_name, _, attribute = spec.rpartition(":")
    if not module_name or not attribute:
        raise ConfigError(f"{what} {spec!r}: expected 'package.module:attribute'")
    try:
        if module_name.endswith(".py"):
            module = _load_file(Path(module_name))
        else:
            module = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:
        # A module that exits as it is imported (argparse at import, say) is a module that
        # cannot be imported, not the end of the program that imports it.
        why = f"it exited ({exc.code})" if isinstance(exc, SystemExit) else str(exc)
        raise ConfigError(f"{what} {spec!r}: cannot import {module_name}: {why}") from exc
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise ConfigError(f"{what} {spec!r}: {module_name} has no {attribute}") from None
    return value


def _load_file(path: Path) -> Any:
    """The module a ``.py`` file holds, loaded once under a name of its own."""
    resolved = path.resolve()
    name = f"relay_task_{hashlib.sha256(str(resolved).encode()).hexdigest()[:16]}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


#: The entry-point group through which an installed package adds op types:
#: ``name = op type``, ``value = "package.module:factory"``.
ENTRY_POINT_GROUP = "relay.tasks"


#: The id of the warnings about the task factories installed packages add.
TASKS_EVENT_ID = "tasks"


@functools.cache
def _entry_points() -> tuple[tuple[str, str, str], ...]:
    """``(op type, factory, package)`` of every entry point, in the order they take effect."""
    return tuple(
        (ep.name, ep.value, ep.dist.name if ep.dist is not None else "an unnamed package")
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)
    )


def claimed_twice(given: Iterable[str] = ()) -> list[str]:
    """A warning for each op type two installed packages claim (the last one wins), unless
    ``given`` (a configuration's or a program's op types) settles it."""
    claims: dict[str, list[tuple[str, str]]] = {}
    for op_type, named, package in _entry_points():
        if (package, named) not in claims.setdefault(op_type, []):
            claims[op_type].append((package, named))
    warnings = []
    for op_type, found in claims.items():
        if len(found) < 2 or op_type in given:
            continue
        listed = ", ".join(f"{package} ({named})" for package, named in found[:-1])
        package, named = found[-1]
        warnings.append(
            f"the op type {op_type!r} is claimed by {len(found)} installed packages: {listed} "
            f"and {package} ({named}); {package}'s is used. Name the one to use in [tasks], "
            "with relay --task or with open_session(tasks=...)"
        )
    return warnings


@attrs.frozen
class _Deferred:
    """A factory an installed package names: loaded when its op type is first used, so that a
    package that cannot load breaks its own ops only (an ``error`` when one is submitted)."""

    spec: str
    op_type: str

    def __call__(self, op: Any) -> SessionTask:
        task: SessionTask = self._factory()(op)
        return task

    def validate(self, op: Any) -> None:
        """The factory's own check of ``op``, when it has one (``relay run`` asks for it)."""
        validate = getattr(self._factory(), "validate", None)
        if callable(validate):
            validate(op)

    def _factory(self) -> Any:
        return load_object(self.spec, what=f"task {self.op_type} (entry point)")


def task_factories(
    config: Mapping[str, str] | None = None, extra: Mapping[str, TaskFactory | str] | None = None
) -> TaskFactories:
    """The task factories of a session, by op type: relay's own, then those installed packages
    add (the ``relay.tasks`` entry points), then a configuration's ``[tasks]``, then
    ``extra`` (``open_session(tasks=...)``); a later one takes an op type from an earlier.

    Raises:
        ConfigError: a factory named in ``config`` or ``extra`` cannot be loaded, or is not
            callable.
    """
    specs: dict[str, TaskFactory | str] = dict(BUILTIN_TASKS)
    factories: dict[str, TaskFactory] = {}
    for op_type, named, _ in _entry_points():
        if op_type in BUILTIN_OP_TYPES - BUILTIN_TASKS.keys():
            continue  # an op relay handles itself is no package's to take
        specs.pop(op_type, None)
        factories[op_type] = _Deferred(named, op_type)
    for op_type, given in {**(config or {}), **(extra or {})}.items():
        factories.pop(op_type, None)
        specs[op_type] = given
    for op_type, spec in specs.items():
        if op_type in BUILTIN_OP_TYPES - BUILTIN_TASKS.keys():
            raise ConfigError(f"task {op_type}: {op_type!r} is an op relay handles itself")
        factory = load_object(spec, what=f"task {op_type}") if isinstance(spec, str) else spec
        if not callable(factory):
            raise ConfigError(f"task {op_type}: {spec!r} is not callable")
        factories[op_type] = factory
    return factories


def custom_op_types(factories: TaskFactories) -> frozenset[str]:
    """The op types of ``factories`` besides relay's own."""
    return frozenset(factories) - BUILTIN_TASKS.keys()


__all__ = [
    "BUILTIN_COMPACTOR",
    "BUILTIN_TASKS",
    "ENTRY_POINT_GROUP",
    "TASKS_EVENT_ID",
    "TaskFactory",
    "claimed_twice",
    "custom_op_types",
    "load_object",
    "task_factories",
]
