"""Codex's configuration flags on relay's command line: ``-c KEY=VALUE`` (``--config KEY=VALUE``
under ``exec``), ``--enable FEATURE`` and ``--disable FEATURE`` (docs/cli.md,
docs/codex-compat.md).

A program written for Codex starts relay with the flags it gives Codex. Each key and feature is
sorted into what relay does with it:

- a key or feature relay's configuration has is a ``-c`` override, set as relay sets it;
- ``openai_base_url`` and ``model_reasoning_effort`` mean something else in relay, and are read
  for it (the ``openai`` provider's base URL, ``relay exec``'s reasoning effort);
- one of Codex's that relay has no counterpart for is a warning, and ignored;
- a name that is neither relay's nor Codex's stays an error under ``-c`` and ``--enable`` (a
  misspelt key is caught before anything runs), and is a warning under ``exec --config``
  (which takes whatever the SDK's ``config`` object holds).

Plain functions over text: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

#: Codex's keys that relay reads for a meaning of its own.
BASE_URL_KEY = "openai_base_url"
EFFORT_KEY = "model_reasoning_effort"


@attrs.frozen
class CodexKeys:
    """Codex's configuration flags, sorted into what relay does with each."""

    overrides: tuple[str, ...] = ()
    """The keys relay's configuration has, as ``-c`` overrides."""
    base_url: str | None = None
    """``openai_base_url``: the base URL of the ``openai`` provider."""
    effort: str | None = None
    """``model_reasoning_effort``: the turn's reasoning effort."""
    ignored: tuple[str, ...] = ()
    """The keys relay has no feature for, in order."""
    ignored_features: tuple[str, ...] = ()
    """Codex's features relay does not have, in order."""

    def __add__(self, other: CodexKeys) -> CodexKeys:
        """Both, ``other``'s after (a later base URL or effort wins)."""
        return CodexKeys(
            overrides=(*self.overrides, *other.overrides),
            base_url=other.base_url if other.base_url is not None else self.base_url,
            effort=other.effort if other.effort is not None else self.effort,
            ignored=(*self.ignored, *other.ignored),
            ignored_features=(*self.ignored_features, *other.ignored_features),
        )

    def warnings(self, *, effort_applies: bool = True) -> list[str]:
        """One message per flag relay ignores (``effort_applies``: whether the command runs a
        turn of its own that takes the effort)."""
        said = [f"config key {key!r} has no counterpart in relay; ignored" for key in self.ignored]
        said += [
            f"feature {name!r} has no counterpart in relay; ignored"
            for name in self.ignored_features
        ]
        if self.effort is not None and not effort_applies:
            said.append(
                f"config key {EFFORT_KEY!r} sets relay exec's turn only; ignored "
                "(give each turn its effort)"
            )
        return said


def codex_keys(
    texts: Sequence[str],
    *,
    strict: bool = False,
    enable: Sequence[str] = (),
    disable: Sequence[str] = (),
) -> CodexKeys:
    """Sort ``KEY=VALUE`` texts as Codex's ``-c`` takes them (the value parsed as TOML, else a
    string), then ``--enable`` and ``--disable``'s features.

    With ``strict`` (relay's ``-c``), a key that is neither relay's nor Codex's is kept as an
    override, so that loading the configuration refuses it, naming the closest known key;
    without, it is ignored with a warning as Codex's keys are.

    Raises:
        ConfigError: a text is not ``KEY=VALUE``; ``openai_base_url`` or
            ``model_reasoning_effort`` is not a string; or a feature of ``--enable`` or
            ``--disable`` is neither relay's nor Codex's.
    """
    from .._base._config import parse_override, unknown_keys
    from .._base._errors import ConfigError
    from ._codex_names import CODEX_CONFIG_KEYS

    overrides: list[str] = []
    ignored: list[str] = []
    features: list[str] = []
    base_url: str | None = None
    effort: str | None = None
    for text in texts:
        keys, value = parse_override(text)
        dotted = ".".join(keys)
        if dotted in (BASE_URL_KEY, EFFORT_KEY):
            if not isinstance(value, str) or not value:
                raise ConfigError(f"--config {dotted}: expected a string, got {value!r}")
            if dotted == BASE_URL_KEY:
                base_url = value
            else:
                effort = value
        elif not unknown_keys(nested(keys, value)):
            overrides.append(text)
        elif keys[0] == "features" and len(keys) > 1 and _is_codex_feature(keys[1]):
            features.append(keys[1])
        elif not strict or (keys[0] in CODEX_CONFIG_KEYS and keys[0] != "features"):
            ignored.append(dotted)
        else:
            overrides.append(text)  # refused, with the closest key, as the configuration loads
    for flag, names, on in (("--enable", enable, "true"), ("--disable", disable, "false")):
        for name in names:
            if name in _relay_features():
                overrides.append(f"features.{name}={on}")
            elif _is_codex_feature(name):
                features.append(name)
            else:
                raise ConfigError(f"{flag} {name}: {unknown_feature(name)}")
    return CodexKeys(tuple(overrides), base_url, effort, tuple(ignored), tuple(features))


def unknown_feature(name: str) -> str:
    """What is said of a feature that is neither relay's nor Codex's."""
    from .._base._suggest import did_you_mean
    from ._codex_names import CODEX_FEATURES

    known = sorted(_relay_features() | CODEX_FEATURES)
    return (
        f"unknown feature {name!r}{did_you_mean(name, known)} "
        f"(relay's: {', '.join(sorted(_relay_features()))})"
    )


def _relay_features() -> frozenset[str]:
    from .._base._config import Features

    return frozenset(field.name for field in attrs.fields(Features))


def _is_codex_feature(name: str) -> bool:
    from ._codex_names import CODEX_FEATURES

    return name in CODEX_FEATURES and name not in _relay_features()


def nested(keys: Sequence[str], value: Any) -> dict[str, Any]:
    """``{"a": {"b": value}}`` for the keys ``["a", "b"]``."""
    data: dict[str, Any] = {keys[-1]: value}
    for key in reversed(keys[:-1]):
        data = {key: data}
    return data


__all__ = [
    "BASE_URL_KEY",
    "EFFORT_KEY",
    "CodexKeys",
    "codex_keys",
    "nested",
    "unknown_feature",
]
