"""Features written as tables, the form Codex writes (``[features.NAME] enabled = true``), read
as the switches of :class:`~relay.Features` (docs/config.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._errors import ConfigError
from ._suggest import did_you_mean

#: Keys a feature's table may hold besides ``enabled``, and the top-level key each stands for
#: (Codex writes ``model_async_compact_threshold_percent`` in ``[features.async_compaction]``).
FEATURE_TABLE_KEYS: Mapping[str, frozenset[str]] = {
    "async_compaction": frozenset({"model_async_compact_threshold_percent"}),
}


def features_in_tables(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with every feature written as a table (``[features.NAME] enabled = true``,
    Codex's form) written as a switch (``features.NAME = true``); the other keys of the table
    move to the top level. A table without ``enabled`` leaves its feature off, as in Codex.

    Raises:
        ConfigError: a table holds a key that is not the feature's, ``enabled`` is not a
            boolean, or a moved key is also set at the top level to another value.
    """
    features = data.get("features")
    if not isinstance(features, Mapping) or not any(
        isinstance(value, Mapping) for value in features.values()
    ):
        return dict(data)
    out = dict(data)
    switches: dict[str, Any] = {}
    for name, value in features.items():
        if not isinstance(value, Mapping):
            switches[name] = value
            continue
        allowed = FEATURE_TABLE_KEYS.get(name, frozenset())
        for key, moved in value.items():
            where = f"features.{name}.{key}"
            if key == "enabled":
                if not isinstance(moved, bool):
                    raise ConfigError(f"{where} must be true or false, got {moved!r}")
                continue
            if key not in allowed:
                known = ["enabled", *sorted(allowed)]
                raise ConfigError(
                    f"unknown config key: {where}{did_you_mean(key, known)} "
                    f"(a feature table holds: {', '.join(known)})"
                )
            if key in data and data[key] != moved:
                raise ConfigError(
                    f"{key} is {data[key]!r} at the top level and {moved!r} in "
                    f"[features.{name}]; set it in one place"
                )
            out[key] = moved
        switches[name] = value.get("enabled", False)
    out["features"] = switches
    return out


__all__ = ["FEATURE_TABLE_KEYS", "features_in_tables"]
