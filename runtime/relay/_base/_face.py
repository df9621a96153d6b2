"""How a public module shows its names: each is loaded on first use, and each class is shown
where users import it from.

``relay``, ``relay.protocol`` and ``relay.lowlevel`` keep a table of where each public name is
defined and load their names when one is first read (PEP 562), so ``import relay`` loads no
more than the version: the command line's ``--version`` and ``--help`` answer at once, and each
command loads what it uses (the commands use relay's private modules, never its face). Type checkers
and the API reference read the same names from the modules' ``if TYPE_CHECKING:`` imports.

A public class reports the public module as its ``__module__`` (``relay.Config``, not
``relay._base._config.Config``). ``typing.get_type_hints`` resolves a class's string
annotations in the module its ``__module__`` names, where the names they use are not defined;
so a class's own annotations are resolved first, where it is defined, and kept resolved.

A table may name another public module as a name's source: ``relay`` reads the protocol's
names it showed before ``relay.protocol`` from there. Reading one loads that module's names,
each shown as that module's; a class already shown in a public module keeps it, so each class
has one printed module whichever face reads it first.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Mapping, MutableMapping
from typing import Any

import attrs


def show(value: object, module: str) -> None:
    """Show ``value`` as defined in the public module ``module``, if it is one of relay's
    classes: its annotations resolved where it is defined, then its ``__module__`` rewritten.
    Anything else is left as it is."""
    if not isinstance(value, type) or not value.__module__.startswith("relay._"):
        return
    own = inspect.get_annotations(value)
    if own:
        hints = typing.get_type_hints(value, include_extras=True)
        value.__annotations__ = {name: hints[name] for name in own}
    if attrs.has(value):
        attrs.resolve_types(value)
    value.__module__ = module


def load(namespace: MutableMapping[str, Any], sources: Mapping[str, str], name: str) -> Any:
    """The public name ``name`` of the module whose globals are ``namespace``.

    The first read of any public name loads them all, from the modules ``sources`` names,
    shows each (:func:`show`) and keeps it in ``namespace``, so that later reads do not come
    here: once a program uses the module, every class it exports reports it as its module,
    whichever name was read first.

    Raises:
        AttributeError: ``name`` is not one of the module's public names.
    """
    module = namespace["__name__"]
    if name not in sources:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    for each, source in sources.items():
        if each not in namespace:
            value = getattr(importlib.import_module(source), each)
            show(value, module)
            namespace[each] = value
    return namespace[name]
