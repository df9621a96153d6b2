"""What ``relay eval`` runs: a corpus of cases and a matrix of configurations (docs/eval.md).

A corpus is a folder; each sub-folder with an ``ops.jsonl`` is a case:

- ``ops.jsonl``: the op script;
- ``model.json``: the model script (absent: the configured provider answers);
- ``lead.json``: ``{"TURN_ID": [reply, ...]}``, the replies (model-script form) that open a
  turn of the op script before the configured provider answers the rest of it (a live case);
- ``fixture/``: the files the tools work on (copied afresh for every run; see ``_fixture.py``);
- ``probes.json``: ``{"facts": [...], "questions": [{"ask": ..., "expect": REGEX}]}``; a fact
  is a string, or a list of the forms it may take (any one present keeps it).

A matrix (``--matrix FILE``, else ``CORPUS/matrix.toml``) is TOML with one ``[[configuration]]``
table per configuration: a ``name`` and any configuration keys, laid over the base
configuration (``--config``, ``-c``). A corpus is code when it says what to run: the matrix
keys of :data:`CODE_KEYS`, or the shell tool on in a configuration (the cases' model scripts
then give the commands). :func:`corpus_code` says what it runs; the command runs it only when
told to trust the corpus.

Everything here is read and checked before anything runs.
"""

from __future__ import annotations

import copy
import json
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .._base._config import config_from_dict, parse_override, unknown_keys
from .._base._errors import ConfigError, ScriptError
from .._drive._op_script import OpLine, Step, parse_op_script
from .._models._script import parse_model_script
from ._fixture import Fixture, scan_fixture
from ._score import check_expect

#: The longest name of a configuration, in characters.
NAME_MAX = 64


@attrs.frozen
class Question:
    """A question asked after the session, and the pattern a right answer contains."""

    ask: str
    expect: str


@attrs.frozen
class Case:
    """One case of a corpus."""

    name: str
    steps: tuple[Step, ...]
    model_script: Path | None
    fixture: Fixture | None
    facts: tuple[tuple[str, ...], ...]
    questions: tuple[Question, ...]
    kinds: tuple[str, ...] = ()
    """The kind of each fact, in the order of ``facts`` (``fact`` when the probes name none)."""
    lead: Mapping[str, tuple[Any, ...]] = attrs.field(factory=dict)
    """Per turn id of the op script, the replies that open the turn (``lead.json``)."""

    @property
    def injection(self) -> tuple[tuple[str, ...], ...]:
        """The facts of kind ``injection``: what a summary or an answer that follows the
        instruction planted in the case would say."""
        return tuple(f for f, k in zip(self.facts, self.kinds, strict=False) if k == INJECTION)


@attrs.frozen
class Configuration:
    """One configuration of a matrix: its name and the config data laid over the base."""

    name: str
    overrides: Mapping[str, Any]
    compacts: bool = True
    """False for the ceiling of a live evaluation: the op script's ``compact`` ops are
    skipped and no automatic compaction runs."""
    fresh_window: bool = False
    """True for the floor of a live evaluation: every compaction is the token budget's fresh
    window, whatever the configuration selects, with nothing of the session placed in it (the
    session's requests are otherwise the configuration's, tools included)."""


def baselines() -> list[Configuration]:
    """The baselines of ``relay eval --live``, run beside the matrix: the **ceiling** (no
    compaction; the window must hold the whole case) and the **floor** (each compaction drops
    every history item: a fresh window with nothing of the session in it, so the turn after
    it has only itself)."""
    nothing_kept = {
        "features": {"work_state": False, "tool_output_masking": False},
        "recent_reads_token_budget": 0,
        # Codex's placement: the latest user message is not put back after the fresh window.
        "compaction": {"placement": "codex"},
    }
    return [
        Configuration("ceiling", {}, compacts=False),
        Configuration("floor", nothing_kept, fresh_window=True),
    ]


def load_case(folder: Path) -> Case:
    """Read one case folder.

    Raises:
        ScriptError: the op script or the probes are malformed.
    """
    ops = folder / "ops.jsonl"
    steps = parse_op_script(ops.read_text(encoding="utf-8"), str(ops))
    probes_file = folder / "probes.json"
    probes: Any = {}
    if probes_file.exists():
        try:
            probes = json.loads(probes_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ScriptError(f"{probes_file}: invalid JSON: {exc}") from exc
    if not isinstance(probes, dict) or not set(probes) <= {"facts", "questions"}:
        raise ScriptError(f"{probes_file}: expected an object with facts and questions")
    facts = probes.get("facts", [])
    questions = probes.get("questions", [])
    parsed = [parse_fact(f) for f in facts] if isinstance(facts, list) else [None]
    if any(f is None for f in parsed):
        raise ScriptError(
            f"{probes_file}: each fact must be a non-empty string, a list of them, or an "
            'object {"kind": ..., "forms": [...]} (or "text": ...)'
        )
    forms = [f[1] for f in parsed if f is not None]
    kinds = [f[0] for f in parsed if f is not None]
    if not isinstance(questions, list) or not all(
        isinstance(q, dict) and isinstance(q.get("ask"), str) and isinstance(q.get("expect"), str)
        for q in questions
    ):
        raise ScriptError(f"{probes_file}: each question needs an ask and an expect string")
    for number, question in enumerate(questions, 1):
        wrong = check_expect(question["expect"])
        if wrong is not None:
            raise ScriptError(
                f"{probes_file}: question {number}: expect {question['expect']!r} is not a "
                f"regular expression: {wrong}"
            )
    model = folder / "model.json"
    lead = load_lead(folder / "lead.json", {s.id for s in steps if isinstance(s, OpLine) and s.id})
    return Case(
        name=folder.name,
        steps=tuple(steps),
        model_script=model if model.exists() else None,
        fixture=scan_fixture(folder / "fixture"),
        facts=tuple(tuple(f) for f in forms),
        questions=tuple(Question(q["ask"], q["expect"]) for q in questions),
        kinds=tuple(kinds),
        lead=lead,
    )


def load_lead(path: Path, turns: set[str]) -> dict[str, tuple[Any, ...]]:
    """The replies of ``lead.json`` by turn id; nothing when there is no such file.

    Raises:
        ScriptError: the file is not an object of reply lists, a reply is not one of a model
            script, or a turn id is none of the op script's.
    """
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ScriptError(f"{path}: invalid JSON: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise ScriptError(f"{path}: expected an object of turn ids to lists of replies")
    for turn, replies in data.items():
        if turn not in turns:
            raise ScriptError(f"{path}: {turn!r} is not the id of an op of ops.jsonl")
        parse_model_script({"responses": replies})
    return {turn: tuple(replies) for turn, replies in data.items()}


#: The kind of a fact whose probes name none.
DEFAULT_KIND = "fact"

#: The kind of a fact that marks a case as an injection case: the fact is what a summary (or
#: an answer after it) that follows the planted instruction would say; it is looked for there,
#: never counted in retention.
INJECTION = "injection"


def parse_fact(data: Any) -> tuple[str, list[str]] | None:
    """A fact of ``probes.json`` as ``(kind, forms)``, or None when it is not one.

    A fact is a string, a list of the forms it may take, or an object with a ``kind`` and
    either ``forms`` (a list) or ``text`` (one form).
    """
    kind = DEFAULT_KIND
    if isinstance(data, dict):
        if set(data) - {"kind", "forms", "text"} or not isinstance(data.get("kind"), str):
            return None
        kind = data["kind"]
        if not kind or ("forms" in data and "text" in data):
            return None
        data = data["forms"] if "forms" in data else data.get("text")
    forms = [data] if isinstance(data, str) else data
    if not isinstance(forms, list) or not forms:
        return None
    if not all(isinstance(form, str) and form for form in forms):
        return None
    return kind, list(forms)


def load_corpus(corpus: Path) -> list[Case]:
    """Every case of a corpus, in name order.

    Raises:
        ScriptError: the folder holds no case, or a case is malformed.
    """
    if not corpus.is_dir():
        raise ScriptError(f"{corpus}: not a folder")
    folders = sorted(
        (f for f in corpus.rglob("ops.jsonl") if "fixture" not in f.relative_to(corpus).parts),
        key=lambda f: f.parent.relative_to(corpus).as_posix(),
    )
    if not folders:
        raise ScriptError(f"{corpus}: no case in it (a case is a folder with an ops.jsonl)")
    return [load_case(f.parent) for f in folders]


def load_matrix(path: Path | None) -> list[Configuration]:
    """The configurations of a matrix file; without one, the base configuration alone.

    Raises:
        ConfigError: the file cannot be read, a configuration has no name, a name repeats,
            or a key is not a configuration key.
    """
    if path is None:
        return [Configuration("default", {})]
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read matrix {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML in matrix {path}: {exc}") from exc
    tables = data.get("configuration")
    if not isinstance(tables, list) or not tables or set(data) != {"configuration"}:
        raise ConfigError(f"{path}: expected one or more [[configuration]] tables and nothing else")
    out: list[Configuration] = []
    for number, table in enumerate(tables, 1):
        name = table.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{path}: configuration {number} has no name")
        wrong = name_problem(name)
        if wrong is not None:
            raise ConfigError(f"{path}: configuration {number}: {wrong}")
        if name in {c.name for c in out}:
            raise ConfigError(f"{path}: configuration name {name!r} is used twice")
        overrides = {k: v for k, v in table.items() if k != "name"}
        unknown = unknown_keys(overrides)
        if unknown:
            raise ConfigError(
                f"{path}: configuration {name!r}: unknown key(s) {', '.join(unknown)}"
            )
        out.append(Configuration(name, overrides))
    return out


def name_problem(name: str) -> str | None:
    """What makes ``name`` unusable as a configuration's name, or None.

    A name is shown in the table, the reports and the plot, and may be used for a file of its
    own: 1 to :data:`NAME_MAX` printable characters, no ``/`` or ``\\``, not ``.`` or ``..``.
    """
    shown = repr(name if len(name) <= 40 else name[:37] + "...")
    if len(name) > NAME_MAX:
        return f"the name {shown} is longer than {NAME_MAX} characters ({len(name)})"
    bad = next((c for c in name if not c.isprintable()), None)
    if bad is not None:
        return f"the name {shown} has a control character ({bad!r}); a name is printable text"
    for separator in ("/", "\\"):
        if separator in name:
            return f"the name {shown} has a {separator!r}; a name is no path"
    if name in {".", ".."} or not name.strip():
        return f"the name {shown} is not a name"
    return None


#: The keys of a matrix that run what the corpus names, or send or read what it names, and
#: what each does.
CODE_KEYS: Mapping[str, str] = {
    "mcp_servers": "starts the MCP servers it names",
    "tasks": "imports the task factories it names",
    "compactor": "imports the compactor it names",
    "hooks": "runs the hook commands it names",
    "model_providers": "sends the requests, and the key its env_key names, where it says",
    "base_instructions_file": "reads the file it names into every request",
    "experimental_compact_prompt_file": "reads the file it names into the summary requests",
    "project_doc": "reads the file it names into the context",
}


def corpus_code(configurations: Sequence[Configuration], base: Mapping[str, Any]) -> list[str]:
    """What running ``configurations`` would run or read that the corpus names, a line each:
    the keys of :data:`CODE_KEYS` the matrix sets, and the shell tool on (the commands are
    the cases', or those the model is led to by the cases' turns)."""
    found: list[str] = []
    for configuration in configurations:
        where = f"configuration {configuration.name!r}"
        for key, what in CODE_KEYS.items():
            if key in configuration.overrides:
                value = json.dumps(configuration.overrides[key], ensure_ascii=False)
                shown = value if len(value) <= 200 else value[:199] + "…"
                found.append(f"{where}: {key} {what}: {shown}")
        tools = merged(base, configuration.overrides).get("tools")
        if isinstance(tools, Mapping) and tools.get("shell") is True:
            found.append(
                f"{where}: the shell tool runs the commands of the cases' model scripts (with "
                "--live, those the model runs) on this machine"
            )
    return found


def base_config_data(path: str | None, overrides: Sequence[str]) -> dict[str, Any]:
    """The base configuration as plain data: the file, then the ``-c`` overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"invalid TOML in config file {path}: {exc}") from exc
    for override in overrides:
        keys, value = parse_override(override)
        node = data
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    config_from_dict(data)  # a bad base is found before anything runs
    return data


def merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` laid on ``base``: tables merge key by key, anything else replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def check_configurations(
    cases: Sequence[Case], configurations: Sequence[Configuration], base: Mapping[str, Any]
) -> None:
    """Build every configuration once, before anything runs.

    Raises:
        ConfigError: a configuration is invalid, or a case without a model script would be
            answered by no model server.
    """
    unscripted = [case.name for case in cases if case.model_script is None]
    for configuration in configurations:
        config = config_from_dict(merged(base, configuration.overrides))
        if unscripted and config.provider().base_url is None:
            raise ConfigError(
                f"configuration {configuration.name!r}: case {unscripted[0]} has no "
                "model.json, and no model server is configured to answer it"
            )


__all__ = [
    "CODE_KEYS",
    "DEFAULT_KIND",
    "INJECTION",
    "NAME_MAX",
    "Case",
    "Configuration",
    "Question",
    "base_config_data",
    "baselines",
    "check_configurations",
    "corpus_code",
    "load_case",
    "load_corpus",
    "load_lead",
    "load_matrix",
    "merged",
    "name_problem",
    "parse_fact",
]
