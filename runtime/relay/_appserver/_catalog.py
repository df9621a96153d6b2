"""``model/list`` and ``config/read``: what the server's configuration offers, in the shapes of
Codex's protocol (docs/codex-compat.md).

relay's providers name no catalogue of models: the models listed are those the configuration
names (``model``, and ``compact_model`` when it is another), each with the reasoning efforts
relay passes through to the provider. ``config/read`` gives the keys of Codex's ``Config``
that relay has, with their effective values; relay's configuration is one layer (its file,
then ``-c`` overrides), so no ``layers`` are listed.
"""

from __future__ import annotations

import os
from typing import Any

from .._base._config import BUILTIN_PROVIDERS, Config
from ._params import invalid
from ._rpc import Message
from ._store import decode_cursor, encode_cursor

#: The reasoning efforts offered for every model: relay sends the one chosen as it is.
EFFORTS = ("low", "medium", "high")


def _model(name: str, *, default: bool) -> Message:
    return {
        "id": name,
        "model": name,
        "displayName": name,
        "description": "a model the configuration names",
        "hidden": False,
        "isDefault": default,
        "defaultReasoningEffort": "medium",
        "supportedReasoningEfforts": [
            {"reasoningEffort": effort, "description": f"{effort} reasoning effort"}
            for effort in EFFORTS
        ],
        "inputModalities": ["text", "image"],
        "upgrade": None,
        "upgradeInfo": None,
        "availabilityNux": None,
    }


def model_list(
    config: Config, cursor: str | None, limit: int | None, provider: str | None
) -> Message:
    """The answer to ``model/list``."""
    if provider is not None and provider != config.model_provider:
        known = provider in config.model_providers or provider in _builtin_names()
        if not known:
            raise invalid("modelProvider", f"no provider {provider!r} in the configuration")
    names = [config.model]
    if config.compact_model and config.compact_model not in names:
        names.append(config.compact_model)
    models = [_model(name, default=n == 0) for n, name in enumerate(names)]
    start = 0
    if cursor:
        start = int(decode_cursor(cursor).partition("|")[2] or 0)
    end = len(models) if limit is None else min(len(models), start + limit)
    more = encode_cursor(f"|{end}") if end < len(models) else None
    return {"data": models[start:end], "nextCursor": more}


def _builtin_names() -> set[str]:
    return set(BUILTIN_PROVIDERS)


def config_read(config: Config) -> Message:
    """The answer to ``config/read``: the effective configuration."""
    write = config.sandbox_workspace_write
    instructions: Any = config.base_instructions
    return {
        "config": {
            "model": config.model,
            "model_provider": config.model_provider,
            "approval_policy": config.approval_policy,
            "sandbox_mode": config.sandbox_mode,
            "sandbox_workspace_write": {
                "writable_roots": [os.path.abspath(root) for root in write.writable_roots],
                "network_access": write.network_access,
                "exclude_tmpdir_env_var": write.exclude_tmpdir_env_var,
                "exclude_slash_tmp": write.exclude_slash_tmp,
            },
            "instructions": instructions,
            "developer_instructions": config.developer_instructions,
            "compact_prompt": config.compact_prompt,
            "model_context_window": config.model_context_window,
            "model_auto_compact_token_limit": config.model_auto_compact_token_limit,
            "model_reasoning_effort": None,
            "review_model": None,
        },
        "origins": {},
        "layers": None,
    }


__all__ = ["EFFORTS", "config_read", "model_list"]
