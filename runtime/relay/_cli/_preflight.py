"""What the ``relay`` command does with a command line and its configuration before a session
opens, for the commands Codex also has (``run``, ``resume``, ``exec``, ``app-server``): Codex's
configuration flags sorted (:mod:`._codex_flags`), and the configuration checked
(:mod:`._checks`), each ignored flag and each warning one ``relay: warning:`` line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from ._parser import EXIT_USAGE

if TYPE_CHECKING:
    from .._base._config import Config
    from ._codex_flags import CodexKeys


def sort_codex_flags(args: argparse.Namespace) -> int | None:
    """Sort ``-c`` keys (and ``exec``'s ``--config KEY=VALUE``), ``--enable`` and
    ``--disable`` into relay's overrides (``args.overrides``) and Codex's keys
    (``args.codex``), with one warning on stderr per flag relay ignores. Returns exit 2 for a
    flag that is neither relay's nor Codex's (one ``relay:`` line on stderr), else None."""
    from .._base._errors import ConfigError
    from ._codex_flags import codex_keys

    try:
        keys = codex_keys(args.overrides, strict=True, enable=args.enable, disable=args.disable)
        if args.command == "exec":
            keys = keys + codex_keys(args.codex_overrides)
    except ConfigError as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    args.overrides = list(keys.overrides)
    args.codex = keys
    for warning in keys.warnings(effort_applies=args.command == "exec"):
        print(f"relay: warning: {warning}", file=sys.stderr)
    return None


def codex_base_url(
    config: Config,
    args: argparse.Namespace,
    chosen_keys: Callable[[argparse.Namespace], Collection[str]],
) -> Config:
    """``config`` with ``-c openai_base_url`` applied, for the commands other than ``exec``
    (which applies it with the rest of Codex's options, ``_exec.exec_config``): the ``openai``
    provider's base URL, and that provider unless ``chosen_keys`` has ``model_provider``."""
    codex: CodexKeys | None = getattr(args, "codex", None)
    if codex is None or codex.base_url is None or args.command == "exec":
        return config
    from ._exec import with_openai_base_url

    chosen = "model_provider" in chosen_keys(args)
    return with_openai_base_url(config, codex.base_url, provider_chosen=chosen)


def check_config(config: Config, chosen: Collection[str], *, model: bool = True) -> None:
    """Refuse a configuration that would send the placeholder model name to a server (with
    ``model``), and warn on stderr of rules that govern no tool.

    Raises:
        ConfigError: no model is set for a provider over HTTP.
    """
    from .._base._errors import ConfigError
    from ._checks import idle_rules_warning, missing_model

    problem = missing_model(config) if model else None
    if problem is not None:
        raise ConfigError(problem)
    warning = idle_rules_warning(config, chosen)
    if warning is not None:
        # Said once by the command for now; a `warning` event of the session would reach the
        # exec stream's and the app-server's clients too.
        print(f"relay: warning: {warning}", file=sys.stderr)


def app_server_config(
    args: argparse.Namespace,
    make_config: Callable[[argparse.Namespace], Config],
    chosen_keys: Callable[[argparse.Namespace], Collection[str]],
) -> Config:
    """``relay app-server``'s configuration (``make_config``), checked as its threads use it:
    with the tools Codex offers by default. A missing model is not refused here: each thread
    may name its own."""
    from .._codex._defaults import with_codex_tools

    config = make_config(args)
    check_config(with_codex_tools(config), chosen_keys(args), model=False)
    return config


__all__ = ["app_server_config", "check_config", "codex_base_url", "sort_codex_flags"]
