"""What the command checks in a configuration before a session opens: plain functions over
:class:`~relay.Config`, no I/O (docs/cli.md, docs/codex-compat.md).

- :func:`missing_model`: a provider over HTTP with no model set. ``Config.model`` defaults to
  ``"scripted"``, the name of the embedded scripted model; a real server given that name
  answers "model not found" at best, after a request that should never have been sent.
- :func:`~relay._base._exec_rules.idle_rules_warning` (re-exported): a sandbox mode or
  approval policy was set, and ``shell`` is off.
"""

from __future__ import annotations

from .._base._config import Config
from .._base._exec_rules import idle_rules_warning

#: ``Config.model``'s default: the embedded scripted model's name, no server's.
PLACEHOLDER_MODEL = "scripted"


def missing_model(config: Config) -> str | None:
    """Why ``config`` cannot send a request, when its provider speaks HTTP and no model is
    set; None when a model is set or the provider is the embedded scripted one."""
    if config.model != PLACEHOLDER_MODEL:
        return None
    provider = config.provider()
    if provider.base_url is None:
        return None
    return (
        f"no model is set for provider {config.model_provider!r} ({provider.base_url}): "
        'set one with -m/--model MODEL, -c model="MODEL", or model = "MODEL" in the '
        "configuration file (the SDK: startThread({model: ...}))"
    )


__all__ = ["PLACEHOLDER_MODEL", "idle_rules_warning", "missing_model"]
