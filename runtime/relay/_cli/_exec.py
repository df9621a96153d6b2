"""``relay exec``: one turn from a prompt, with the options Codex's ``exec`` takes
(docs/cli.md, docs/codex-compat.md).

What the command line asks for is read here, before a session opens: the prompt and its
images, ``resume THREAD_ID``, and Codex's flags and ``--config KEY=VALUE`` keys, made into
relay's configuration keys (``-c`` overrides) or into values relay applies itself (the
``openai`` provider's base URL and key, the turn's reasoning effort). Keys relay has no feature
for are warnings, never errors: Codex's SDK sends some unasked.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ._codex_flags import CodexKeys, codex_keys, nested

if TYPE_CHECKING:
    from .._base._config import Config
    from .._base._exec_rules import ExecRules
    from .._drive._op_script import Step

#: The environment variable Codex's SDK passes its ``apiKey`` in: the ``openai`` provider's
#: key, before ``OPENAI_API_KEY``.
CODEX_API_KEY = "CODEX_API_KEY"

#: A thread id a rollout file can be named by (relay's session ids are UUIDs).
_THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


@attrs.frozen
class ExecRequest:
    """What ``relay exec``'s command line asks for, beyond relay's configuration."""

    prompt: str
    """The prompt as given: ``-`` reads standard input."""
    thread_id: str | None
    """``resume THREAD_ID``: the session to continue."""
    images: tuple[str, ...]
    """Image files, absolute."""
    codex: CodexKeys
    """Codex's ``--config`` keys."""
    writable_roots: tuple[str, ...]
    """``--add-dir``: folders added to ``sandbox_workspace_write.writable_roots``."""
    output_schema: Mapping[str, Any] | None
    """``--output-schema``: the JSON Schema the turn's final answer must fit."""
    warnings: tuple[str, ...]
    """What is accepted and has no effect, one message each."""


def exec_request(args: argparse.Namespace) -> ExecRequest:
    """Read ``relay exec``'s command line (it extends ``args.overrides`` with the keys of
    Codex's flags, so that they count as chosen on the command line). Codex's keys are
    ``args.codex`` when the command sorted them already (:func:`codex_keys`), else those of
    ``--config KEY=VALUE``.

    Raises:
        ScriptError: the positional arguments are not ``[resume THREAD_ID] [PROMPT]``, or the
            ``--output-schema`` file cannot be read or is not a JSON Schema.
        ConfigError: a ``--config KEY=VALUE`` is malformed.
    """
    from .._base._errors import ScriptError

    words = list(args.prompt)
    thread_id: str | None = None
    if words and words[0] == "resume":
        if len(words) < 2:
            raise ScriptError("exec resume: expected THREAD_ID")
        thread_id = words[1]
        words = words[2:]
    if len(words) > 1:
        raise ScriptError(
            f"exec: expected one prompt, got {len(words)} arguments (quote the prompt)"
        )
    if not words and sys.stdin.isatty():
        raise ScriptError("exec: no prompt given, and standard input is a terminal")
    prompt = words[0] if words else "-"
    codex: CodexKeys | None = getattr(args, "codex", None)
    warnings: list[str] = []
    if codex is None:
        # Not sorted by the command (``relay._cli._main`` sorts ``-c`` and ``--config`` keys
        # alike and says what it ignores): ``--config``'s keys alone.
        codex = codex_keys(args.codex_overrides)
        args.overrides = [*args.overrides, *codex.overrides]
        warnings += codex.warnings()
    warnings += [
        f"{flag} {value}: relay has no such feature; ignored"
        for flag, value in (
            ("--thread-source", args.thread_source),
            ("--cyber-access-program", args.cyber_access_program),
        )
        if value is not None
    ]
    flags: list[str] = []
    if args.model is not None:
        flags.append(f"model={json.dumps(args.model)}")
    if args.cd is not None:
        flags.append(f"cwd={json.dumps(args.cd)}")
    if args.sandbox is not None:
        flags.append(f"sandbox_mode={json.dumps(args.sandbox)}")
    args.overrides = [*args.overrides, *flags]
    return ExecRequest(
        prompt=prompt,
        thread_id=thread_id,
        images=tuple(str(Path(image).absolute()) for image in args.images),
        codex=codex,
        writable_roots=tuple(str(Path(folder).absolute()) for folder in args.add_dirs),
        output_schema=None if args.output_schema is None else read_schema(args.output_schema),
        warnings=tuple(warnings),
    )


def read_schema(name: str) -> Mapping[str, Any]:
    """The JSON Schema in the file ``name``.

    Raises:
        ScriptError: the file cannot be read, is not JSON, or is not a JSON Schema.
    """
    from .._base import _json
    from .._base._errors import InvalidOpError, ScriptError
    from .._base._output_schema import check_output_schema

    try:
        schema = _json.loads(Path(name).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScriptError(f"--output-schema: cannot read {name}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ScriptError(f"--output-schema: {name} is not UTF-8 text") from None
    except ValueError as exc:
        raise ScriptError(f"--output-schema: {name} is not JSON: {exc}") from None
    try:
        check_output_schema(schema)
    except InvalidOpError as exc:
        raise ScriptError(f"--output-schema: {name} is {exc}") from None
    assert isinstance(schema, Mapping)  # check_output_schema refuses anything else
    return schema


class MissingThread(Exception):
    """``resume THREAD_ID`` names no session under the rollout directory."""


def exec_config(
    config: Config, request: ExecRequest, chosen: set[str]
) -> tuple[Config, str | None]:
    """``config`` with what Codex's options ask for (:func:`codex_config`), and the rollout
    ``resume THREAD_ID`` continues (None for a new session). ``chosen``, the keys the command
    line chose, gains ``model_provider`` when ``openai_base_url`` chose the provider.

    Raises:
        MissingThread: no session of that id is under the rollout directory.
    """
    provider_chosen = "model_provider" in chosen
    config = codex_config(config, request, provider_chosen=provider_chosen, environ=os.environ)
    if request.codex.base_url is not None:
        chosen.add("model_provider")
    if request.thread_id is None:
        return config, None
    root = rollout_root(config)
    found = find_thread(root, request.thread_id)
    if found is None:
        raise MissingThread(f"exec resume: no session {request.thread_id!r} under {root}")
    return config, str(found)


def codex_config(
    config: Config,
    request: ExecRequest,
    *,
    provider_chosen: bool,
    environ: Mapping[str, str],
) -> Config:
    """``config`` with what Codex's options ask for that is not a key of relay's: the
    ``openai`` provider's base URL (and the provider itself unless ``provider_chosen``), its
    key from ``CODEX_API_KEY``, and ``--add-dir``'s writable roots."""
    config = with_openai_base_url(config, request.codex.base_url, provider_chosen=provider_chosen)
    config = with_codex_api_key(config, environ)
    return with_writable_roots(config, request.writable_roots)


def with_openai_base_url(config: Config, base_url: str | None, *, provider_chosen: bool) -> Config:
    """``config`` with ``openai_base_url`` (Codex's key) as the ``openai`` provider's base URL,
    and ``openai`` as the provider unless ``provider_chosen`` (the command line or a
    configuration file chose one). None changes nothing."""
    from .._base._config import BUILTIN_PROVIDERS

    if base_url is None:
        return config
    openai = config.model_providers.get("openai", BUILTIN_PROVIDERS["openai"])
    changed = attrs.evolve(openai, base_url=base_url)
    if not provider_chosen and config.model_provider == "scripted":
        config = attrs.evolve(config, model_provider="openai")
    return attrs.evolve(config, model_providers={**config.model_providers, "openai": changed})


def with_codex_api_key(config: Config, environ: Mapping[str, str]) -> Config:
    """``config`` with the ``openai`` provider's key read from ``CODEX_API_KEY`` (where Codex's
    SDK puts its ``apiKey``) when that is set and the provider reads ``OPENAI_API_KEY``."""
    from .._base._config import BUILTIN_PROVIDERS

    openai = config.model_providers.get("openai", BUILTIN_PROVIDERS["openai"])
    if not (environ.get(CODEX_API_KEY) or "").strip() or openai.env_key != "OPENAI_API_KEY":
        return config
    changed = attrs.evolve(openai, env_key=CODEX_API_KEY)
    return attrs.evolve(config, model_providers={**config.model_providers, "openai": changed})


def resume_rules(
    config: Config,
    recorded: ExecRules | None,
    overrides: Sequence[str],
    request: ExecRequest | None,
) -> Config:
    """``config`` with the rules a resumed session recorded (``relay resume``, ``relay exec
    resume``), but for the parts the command line chose: the ``-c`` keys of the rules among
    ``overrides`` (``relay exec``'s ``-s`` and Codex-style ``--config KEY=VALUE`` are among
    them by then), and ``--add-dir``'s folders added to the roots. A ``--config`` file's keys
    are no such choice: a file is read by every run and says nothing about this resume. A
    choice that loosens the recorded rules is a warning on stderr (the session reports it
    too, as an event).
    """
    from .._base._config import parse_override
    from .._open._resume_rules import is_rule_key, loosened_warning, resumed_rules

    dotted = {".".join(parse_override(text)[0]) for text in overrides}
    chosen = {key for key in dotted if is_rule_key(key)}
    config = resumed_rules(config, recorded, chosen=chosen)
    if request is not None and recorded is not None:
        config = with_writable_roots(config, request.writable_roots)
    warning = loosened_warning(recorded, config)
    if warning is not None:
        print(f"relay: warning: {warning}", file=sys.stderr)
    return config


def with_writable_roots(config: Config, added: Sequence[str]) -> Config:
    """``config`` with the folders ``added`` (``--add-dir``) among its writable roots."""
    table = config.sandbox_workspace_write
    fresh = [root for root in added if root not in table.writable_roots]
    if not fresh:
        return config
    # The field converts with ``tuple``, whose generic parameter mypy cannot solve.
    roots: Any = (*table.writable_roots, *fresh)
    return attrs.evolve(config, sandbox_workspace_write=attrs.evolve(table, writable_roots=roots))


def take_codex_key(config: Config) -> None:
    """Take ``CODEX_API_KEY`` out of the environment, and ``OPENAI_API_KEY`` too when the
    ``openai`` provider reads the former: no process relay starts reads either."""
    from .._base._secret import take_key

    take_key(CODEX_API_KEY)
    if CODEX_API_KEY in (config.provider().env_key, config.compaction_provider().env_key):
        take_key("OPENAI_API_KEY")


def rollout_root(config: Config) -> Path:
    """The folder rollouts are written under."""
    from .._base._config import relay_home

    return Path(config.rollout.dir) if config.rollout.dir else relay_home() / "sessions"


def find_thread(root: Path, thread_id: str) -> Path | None:
    """The rollout of the session ``thread_id`` under ``root`` (the newest, should there be
    two); None when there is none."""
    if _THREAD_ID.fullmatch(thread_id) is None:
        return None
    # rollout-YYYY-MM-DDTHH-MM-SS-<session id>.jsonl: the id is all that follows the stamp.
    name = re.compile(rf"rollout-\d{{4}}-\d\d-\d\dT\d\d-\d\d-\d\d-{thread_id}\.jsonl")
    found: list[tuple[float, str]] = []
    for path in root.glob(f"**/rollout-*-{thread_id}.jsonl"):
        if name.fullmatch(path.name) is None:
            continue
        try:
            status = path.stat()
        except OSError:
            continue
        if status.st_size:
            found.append((status.st_mtime, str(path)))
    return Path(max(found)[1]) if found else None


def prompt_steps(request: ExecRequest, config: Config) -> tuple[str, list[Step]]:
    """One user turn with the prompt (``-``: standard input, read no further than the most
    text the model's context window holds, and one byte), its images and its effort."""
    from .._base import _protocol as p
    from .._base._errors import ScriptError
    from .._base._tokens import MAX_KNOWN_WINDOW, context_window_for
    from .._drive._op_script import OpLine

    window = context_window_for(config.model, config.model_context_window)
    bound = (window or MAX_KNOWN_WINDOW) * 4  # bytes of text, as relay counts a token
    where = "the prompt"
    if request.prompt == "-":
        where = "the prompt on standard input"
        data = sys.stdin.buffer.read(bound + 1)
    else:
        data = request.prompt.encode("utf-8", "surrogateescape")
    if len(data) > bound:
        holds = (
            f"the context window of {config.model!r} ({window:,} tokens) holds"
            if window is not None
            else f"the largest context window relay knows ({MAX_KNOWN_WINDOW:,} tokens) holds; "
            "model_context_window sets the window"
        )
        raise ScriptError(f"{where} is over {bound:,} bytes: more text than {holds}")
    try:
        prompt = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScriptError(f"{where} is not UTF-8 text") from exc
    if where != "the prompt":
        # Without the newlines that end what was piped in, as $(...) in a shell drops them.
        prompt = prompt.rstrip("\r\n")
    if not prompt.strip():
        raise ScriptError("the prompt is empty")
    # Images first, then the text, as Codex's exec gives them.
    items: list[p.InputItem] = [p.LocalImage(path) for path in request.images]
    items.append(p.Text(prompt))
    turn = p.UserTurn(
        items=items, effort=request.codex.effort, final_output_json_schema=request.output_schema
    )
    return "prompt", [OpLine(1, None, turn)]


__all__ = [
    "CODEX_API_KEY",
    "CodexKeys",
    "ExecRequest",
    "MissingThread",
    "codex_config",
    "codex_keys",
    "exec_config",
    "exec_request",
    "find_thread",
    "nested",
    "prompt_steps",
    "read_schema",
    "resume_rules",
    "rollout_root",
    "take_codex_key",
    "with_codex_api_key",
    "with_openai_base_url",
    "with_writable_roots",
]
