"""Tasks of a program's own on a cluster: the modules of their factories go to every host with
Ray's ``runtime_env`` (``docs/cluster.md``, Tasks of your own).

A factory is named as for ``relay run`` (``docs/tasks.md``): ``package.module:attribute`` or
``path/to/file.py:attribute``. What a host imports is decided where the command was given
(:func:`carry`), from where this Python finds each module:

- a file is carried itself (Ray's ``py_modules`` takes a ``.py`` file), and a host imports it
  by its name: ``tasks/review.py:review`` becomes ``review:review``;
- a package installed in this Python (under its site-packages) is not carried: it is installed
  on every node, as relay itself is;
- any other package (one found in the working directory or on ``PYTHONPATH``) is carried whole,
  its top-level directory, and a host imports it by the same name.

Ray carries them to the processes of one job (``ray.init(runtime_env=...)``): the hosts a
``relay cluster run`` starts for itself, or those of a deployment that ``relay cluster up``
starts, and every host started in place of a lost one. A host that cannot load a factory is
found at the session's open (``_checks.py``), and named with the op type.
"""

from __future__ import annotations

import importlib.util
import site
import sysconfig
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from .._base._errors import ConfigError

#: Top-level packages never carried: relay is on every node already.
NEVER_CARRIED = frozenset({"relay"})


@attrs.frozen
class Origin:
    """Where this Python finds a top-level module."""

    path: str
    """Its package directory, or its file."""
    installed: bool
    """Whether it is a package installed in this Python (expected on every node)."""


@attrs.frozen
class Carried:
    """Tasks as the hosts load them, and what Ray carries for them."""

    tasks: Mapping[str, str]
    """Op type: factory, as a host names it."""
    modules: tuple[str, ...] = ()
    """The directories and files Ray carries to the hosts (``py_modules``)."""

    def runtime_env(self) -> dict[str, Any]:
        """Ray's ``runtime_env`` that carries them (empty: nothing to carry)."""
        return {"py_modules": list(self.modules)} if self.modules else {}


def task_options(texts: Iterable[str]) -> dict[str, str]:
    """``--task OP=FACTORY`` options, by op type.

    Raises:
        ConfigError: one is not ``OP=FACTORY``.
    """
    given: dict[str, str] = {}
    for text in texts:
        op_type, sep, factory = text.partition("=")
        if not sep or not op_type.strip() or not factory.strip():
            raise ConfigError(f"--task {text!r}: expected OP=FACTORY")
        given[op_type.strip()] = factory.strip()
    return given


def carry(
    tasks: Mapping[str, str],
    *,
    cwd: Path | None = None,
    locate: Callable[[str], Origin | None] | None = None,
) -> Carried:
    """What the hosts need to load ``tasks`` (op type: factory): the factories as they name
    them, and the modules Ray carries. A relative file is found from ``cwd``.

    Raises:
        ConfigError: a file whose name is not a module name, two files or packages of one
            name, or a module this Python cannot find.
    """
    here = cwd or Path.cwd()
    find = locate or origin
    named: dict[str, str] = {}
    carried: dict[str, str] = {}  # module name: path
    for op_type, spec in tasks.items():
        module, _, attribute = spec.rpartition(":")
        if module.endswith(".py"):
            path = (here / module).resolve()
            name = path.stem
            if not name.isidentifier():
                raise ConfigError(
                    f"task {op_type}: the hosts import {module} by its name, and "
                    f"{path.name!r} is not a module name (name it like {_identifier(name)}.py)"
                )
            _add(carried, name, str(path), op_type)
            named[op_type] = f"{name}:{attribute}"
            continue
        named[op_type] = spec
        top = module.partition(".")[0]
        if not top or top in NEVER_CARRIED:
            continue
        found = find(top)
        if found is None:
            raise ConfigError(f"task {op_type} {spec!r}: cannot find the module {top}")
        if not found.installed:
            _add(carried, top, found.path, op_type)
    return Carried(named, tuple(carried.values()))


def load_tasks(tasks: Mapping[str, str]) -> tuple[Carried, frozenset[str]]:
    """Load the factories of ``tasks`` here, as ``relay run`` does before anything runs; what
    the hosts need of them, and the op types they add to relay's own.

    Raises:
        ConfigError: a factory cannot be loaded, or cannot be carried.
    """
    from .._open import custom_op_types, task_factories

    custom = custom_op_types(task_factories(tasks))
    return carry(tasks), custom


def origin(name: str) -> Origin | None:
    """Where this Python finds the top-level module ``name`` (None: nowhere)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        locations = list(spec.submodule_search_locations)
        if len(locations) != 1:
            return None  # a namespace package over several directories: nothing to carry
        path = locations[0]
    elif spec.origin and spec.origin not in ("built-in", "frozen"):
        path = spec.origin
    else:
        return Origin(name, installed=True)
    return Origin(path, installed=_installed(Path(path)))


def _installed(path: Path) -> bool:
    """Whether ``path`` lies in this Python's own directories (site-packages, the standard
    library): what is installed there is installed on every node."""
    roots = {*site.getsitepackages(), site.getusersitepackages()}
    roots |= {sysconfig.get_path(key) for key in ("purelib", "platlib", "stdlib", "platstdlib")}
    resolved = path.resolve()
    return any(resolved.is_relative_to(Path(root).resolve()) for root in roots if root)


def _add(carried: dict[str, str], name: str, path: str, op_type: str) -> None:
    known = carried.get(name)
    if known is not None and known != path:
        raise ConfigError(
            f"task {op_type}: the hosts would import two modules named {name!r} ({known} and "
            f"{path}); rename one"
        )
    carried[name] = path


def _identifier(name: str) -> str:
    made = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return made if made and not made[0].isdigit() else f"_{made}"


__all__ = [
    "NEVER_CARRIED",
    "Carried",
    "Origin",
    "carry",
    "load_tasks",
    "origin",
    "task_options",
]
