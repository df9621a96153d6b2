"""The converter that turns configuration tables (plain TOML data) into relay's attrs classes,
strictly: no value is coerced into another type, and an array must be a TOML array."""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from typing import Any

import cattrs


@functools.cache
def config_converter() -> cattrs.Converter:
    """The converter of configuration tables, made when a table is first read (a session with
    the default configuration reads none)."""
    converter = cattrs.Converter(forbid_extra_keys=True)
    for kind in (str, int, bool, float):
        converter.register_structure_hook(kind, _strict(kind))
    converter.register_structure_hook_factory(_is_array, _array_hook)
    return converter


def _strict(kind: type) -> Any:
    def structure(value: Any, _: Any) -> Any:
        if isinstance(value, bool) and kind is not bool:
            raise TypeError(f"expected {kind.__name__}, got a boolean")
        if kind is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, kind):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return structure


def _is_array(kind: Any) -> bool:
    return typing.get_origin(kind) is tuple and typing.get_args(kind)[1:] == (...,)


def _array_hook(kind: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    import cattrs.cols

    base = cattrs.cols.homogenous_tuple_structure_factory(kind, converter)

    def structure(value: Any, _: Any) -> Any:
        # Only a TOML array: cattrs would otherwise iterate a string or a table.
        if not isinstance(value, list):
            raise TypeError(f"expected an array, got {type(value).__name__}")
        return base(value, kind)

    return structure


__all__ = ["config_converter"]
