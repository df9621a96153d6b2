"""Model scripts: one JSON file that drives the embedded model and the mock server.

The format, with an example of each reply, is docs/model-script.md.

:func:`parse_model_script` validates a script into :class:`ModelScript`; :meth:`ModelScript.plan`
turns the next reply into a :class:`ReplyPlan` (what to send and how), which the embedded
:class:`~relay.testing.ScriptedModel` plays in-process and the mock server plays over HTTP.
All of it is plain data and plain functions.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .._base import _json
from .._base import _protocol as p
from .._base._codec import DecodeError, decode_response_item, encode_response_item
from .._base._errors import ModelError, ScriptError, classify_http_error
from .._base._tokens import approx_tokens
from .._base._unicode import mended
from .._core._history import Prefix, is_contextual, last_agent_text
from .._core._summary import is_summary, real_user_messages
from ._responses import stream_events_for, usage_from_json

_REPLY_SHAPES = ("output", "text", "json", "function_call", "compaction", "http_error")
_REPLY_KEYS = frozenset(
    {
        *_REPLY_SHAPES,
        "usage",
        "total_tokens",
        "delay_ms",
        "stall_ms",
        "stream_error",
        "cut_after_events",
    }
)
_COMPACT_KEYS = frozenset({"output", "http_error", "raw", "delay_ms"})


@attrs.frozen
class HttpErrorSpec:
    """An HTTP error a reply answers with instead of a stream."""

    status: int
    code: str | None = None
    message: str = "scripted error"
    type: str | None = None
    retry_after: float | None = None

    def to_error(self) -> ModelError:
        """The error a client raises for this answer (classified like a server's)."""
        return classify_http_error(
            self.status,
            code=self.code,
            message=self.message,
            type_=self.type,
            retry_after=self.retry_after,
        )

    def body(self) -> dict[str, Any]:
        """The JSON error body, in the OpenAI shape."""
        return {
            "error": {"message": self.message, "type": self.type, "code": self.code, "param": None}
        }


@attrs.frozen
class Reply:
    """One scripted response."""

    output: tuple[p.ResponseItem, ...] = ()
    usage: p.TokenUsage | None = None
    delay_ms: int = 0
    stall_ms: int = 0
    http_error: HttpErrorSpec | None = None
    stream_error: Mapping[str, Any] | None = None
    cut_after_events: int | None = None


@attrs.frozen
class CompactReply:
    """One scripted answer of ``/responses/compact``."""

    body: Any = None
    http_error: HttpErrorSpec | None = None
    delay_ms: int = 0


@attrs.frozen
class ReplyPlan:
    """What to send for one request: an HTTP error, or stream events with timing."""

    events: tuple[Mapping[str, Any], ...] = ()
    http_error: HttpErrorSpec | None = None
    delay_ms: int = 0
    stall_ms: int = 0
    cut_after_events: int | None = None


def _fail(where: str, message: str) -> ScriptError:
    return ScriptError(f"model script: {where}: {message}")


def _int(value: Any, where: str, *, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise _fail(where, f"expected an integer >= {minimum}, got {value!r}")
    return value


def _http_error(data: Any, where: str) -> HttpErrorSpec:
    if not isinstance(data, Mapping):
        raise _fail(where, "http_error must be an object")
    status = _int(data.get("status", 500), f"{where}.status", minimum=100)
    retry = data.get("retry_after")
    if retry is not None and not isinstance(retry, int | float):
        raise _fail(where, "retry_after must be a number of seconds")
    message = data.get("message", f"scripted HTTP {status}")
    return HttpErrorSpec(
        status=status,
        code=data.get("code"),
        message=str(message),
        type=data.get("type"),
        retry_after=float(retry) if retry is not None else None,
    )


def _items(data: Any, where: str) -> tuple[p.ResponseItem, ...]:
    if not isinstance(data, list):
        raise _fail(where, "output must be a list of response items")
    try:
        return tuple(decode_response_item(item) for item in data)
    except DecodeError as exc:
        raise _fail(where, str(exc)) from exc


def _json_text(value: Any, where: str) -> str:
    """The text of a ``json`` reply: its value written as JSON."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError as exc:
        raise _fail(where, f"not JSON: {exc}") from None


def _reply(data: Any, where: str, index: int) -> Reply:
    if isinstance(data, str):
        data = {"text": data}
    if not isinstance(data, Mapping):
        raise _fail(where, "a reply must be an object")
    unknown = set(data) - _REPLY_KEYS
    if unknown:
        raise _fail(where, f"unknown reply keys: {', '.join(sorted(unknown))}")
    output: tuple[p.ResponseItem, ...] = ()
    if "output" in data:
        output = _items(data["output"], where)
    elif "text" in data:
        output = (p.assistant_message(str(data["text"])),)
    elif "json" in data:
        output = (p.assistant_message(_json_text(data["json"], f"{where}.json")),)
    elif "function_call" in data:
        call = data["function_call"]
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise _fail(where, "function_call needs a name")
        arguments = call.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        output = (
            p.FunctionCall(
                name=call["name"],
                arguments=arguments,
                call_id=str(call.get("call_id") or f"call_{index + 1}"),
            ),
        )
    elif "compaction" in data:
        output = (p.Compaction(encrypted_content=str(data["compaction"])),)
    usage = None
    if "usage" in data:
        usage = usage_from_json(data["usage"])
        if usage is None:
            raise _fail(where, "usage must be an object")
    elif "total_tokens" in data:
        usage = p.TokenUsage(total_tokens=_int(data["total_tokens"], f"{where}.total_tokens"))
    stream_error = data.get("stream_error")
    if stream_error is not None and not isinstance(stream_error, Mapping):
        raise _fail(where, "stream_error must be an object")
    cut = data.get("cut_after_events")
    return Reply(
        output=output,
        usage=usage,
        delay_ms=_int(data.get("delay_ms", 0), f"{where}.delay_ms"),
        stall_ms=_int(data.get("stall_ms", 0), f"{where}.stall_ms"),
        http_error=_http_error(data["http_error"], where) if "http_error" in data else None,
        stream_error=stream_error,
        cut_after_events=None if cut is None else _int(cut, f"{where}.cut_after_events"),
    )


def _compact_reply(data: Any, where: str) -> CompactReply:
    if not isinstance(data, Mapping):
        raise _fail(where, "a compact reply must be an object")
    unknown = set(data) - _COMPACT_KEYS
    if unknown:
        raise _fail(where, f"unknown compact reply keys: {', '.join(sorted(unknown))}")
    delay = _int(data.get("delay_ms", 0), f"{where}.delay_ms")
    if "http_error" in data:
        return CompactReply(http_error=_http_error(data["http_error"], where), delay_ms=delay)
    if "raw" in data:
        return CompactReply(body=data["raw"], delay_ms=delay)
    if "output" in data:
        items = _items(data["output"], where)
        return CompactReply(
            body={"output": [encode_response_item(item) for item in items]}, delay_ms=delay
        )
    raise _fail(where, "a compact reply needs output, raw or http_error")


@attrs.define
class ModelScript:
    """A parsed model script and the position of its next replies."""

    responses: list[Reply] = attrs.field(factory=list)
    compact: list[CompactReply] = attrs.field(factory=list)
    fallback: str = "echo"
    next_response: int = 0
    next_compact: int = 0
    served: int = 0
    #: Starts every response id (``resp-PREFIX-N``): drawn anew for each script, so that the ids
    #: of two processes serving one session (before and after a resume) do not repeat, as a
    #: real server's do not. Empty: ``resp-N``.
    id_prefix: str = attrs.field(factory=lambda: secrets.token_hex(4))
    usage: UsageEstimator = attrs.field(factory=lambda: UsageEstimator(), eq=False, repr=False)
    agents: dict[str, ModelScript] = attrs.field(factory=dict)
    """The scripts of sub-agents, by agent path (``/root/1``): a sub-agent whose path has
    none plays this script's fallback."""

    def for_agent(self, path: str | None) -> ModelScript:
        """The script that answers the sub-agent at ``path`` (None, or the root: this one).
        A path without a script of its own gets an empty one (its fallback), made once."""
        if path is None or path == ROOT_AGENT_PATH:
            return self
        found = self.agents.get(path)
        if found is None:
            found = self.agents[path] = ModelScript(fallback=self.fallback)
        return found

    def plan(self, body: Mapping[str, Any], *, purpose: str = "turn") -> ReplyPlan:
        """The plan for the next ``POST /responses`` with this request body."""
        self.served += 1
        response_id = (
            f"resp-{self.id_prefix}-{self.served}" if self.id_prefix else f"resp-{self.served}"
        )
        if self.next_response < len(self.responses):
            reply = self.responses[self.next_response]
            self.next_response += 1
        else:
            reply = Reply(output=fallback_output(body, purpose=purpose))
        if reply.http_error is not None:
            return ReplyPlan(http_error=reply.http_error, delay_ms=reply.delay_ms)
        usage = reply.usage or self.usage.estimate(body, reply.output)
        events = stream_events_for(response_id, list(reply.output), usage)
        if reply.stream_error is not None:
            error = {
                "code": reply.stream_error.get("code"),
                "message": reply.stream_error.get("message", "scripted failure"),
            }
            events[-1] = {
                "type": "response.failed",
                "response": {"id": response_id, "status": "failed", "error": error},
            }
        return ReplyPlan(
            events=tuple(events),
            delay_ms=reply.delay_ms,
            stall_ms=reply.stall_ms,
            cut_after_events=reply.cut_after_events,
        )

    def plan_compact(self, body: Mapping[str, Any]) -> CompactReply:
        """The answer to the next ``POST /responses/compact``."""
        if self.next_compact < len(self.compact):
            reply = self.compact[self.next_compact]
            self.next_compact += 1
            return reply
        return CompactReply(body={"output": remote_compact_fallback(body)})


#: The agent path of a root session.
ROOT_AGENT_PATH = "/root"


def parse_model_script(data: Any) -> ModelScript:
    """Validate a model script given as parsed JSON."""
    if not isinstance(data, Mapping):
        raise _fail("top level", "expected a JSON object")
    unknown = set(data) - {"responses", "compact", "fallback", "agents"}
    if unknown:
        raise _fail("top level", f"unknown keys: {', '.join(sorted(unknown))}")
    responses = data.get("responses", [])
    compact = data.get("compact", [])
    if not isinstance(responses, list) or not isinstance(compact, list):
        raise _fail("top level", "responses and compact must be lists")
    fallback = data.get("fallback", "echo")
    if fallback != "echo":
        raise _fail("fallback", f"unknown fallback {fallback!r} (only 'echo')")
    agents = data.get("agents", {})
    if not isinstance(agents, Mapping) or not all(
        isinstance(path, str) and path.startswith(f"{ROOT_AGENT_PATH}/") for path in agents
    ):
        raise _fail("agents", f"expected an object of scripts by agent path ({ROOT_AGENT_PATH}/1)")
    scripts: dict[str, ModelScript] = {}
    for path, script in agents.items():
        try:
            scripts[path] = parse_model_script(script)
        except ScriptError as exc:
            raise ScriptError(
                str(exc).replace("model script: ", f"model script: agents[{path}]: ", 1)
            ) from None
    return ModelScript(
        responses=[_reply(r, f"responses[{i}]", i) for i, r in enumerate(responses)],
        compact=[_compact_reply(r, f"compact[{i}]") for i, r in enumerate(compact)],
        fallback=fallback,
        agents=scripts,
    )


def load_model_script(path: str | Path) -> ModelScript:
    """Read and validate a model script file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(f"cannot read model script {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ScriptError(f"model script {path} is not UTF-8") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScriptError(f"model script {path}: invalid JSON: {exc}") from exc
    return parse_model_script(data)


# ----------------------------------------------------------------------------- fallbacks


def _raw_input(body: Mapping[str, Any]) -> Sequence[Any]:
    """The request's ``input``: a JSON list, or (in-process) a view of the history."""
    raw = body.get("input")
    return raw if isinstance(raw, list | Prefix) else []


def _input_items(body: Mapping[str, Any]) -> list[p.ResponseItem]:
    items: list[p.ResponseItem] = []
    for entry in _raw_input(body):
        try:
            items.append(decode_response_item(entry))
        except DecodeError:
            continue
    return items


def _real_user_texts(items: Sequence[p.ResponseItem]) -> list[str]:
    return [item.text() for item in real_user_messages(items)]


def _earlier_notes(items: Sequence[p.ResponseItem]) -> tuple[list[str], list[str]]:
    """The files and commands an earlier note of :func:`extractive_summary` listed: a new note
    carries them, as a summary carries what the one before it said."""
    listed: dict[str, list[str]] = {"Files touched:": [], "Commands run:": []}
    for item in items:
        if not (isinstance(item, p.Message) and is_summary(item)):
            continue
        heading: str | None = None
        for line in item.text().splitlines():
            if line in listed:
                heading = line
            elif heading is not None and line.startswith("- "):
                listed[heading].append(line[2:])
            else:
                heading = None
    return listed["Files touched:"], listed["Commands run:"]


def _mentions(items: Sequence[p.ResponseItem]) -> tuple[list[str], list[str]]:
    files: list[str] = []
    commands: list[str] = []
    for item in items:
        if not isinstance(item, p.FunctionCall):
            continue
        try:
            args = _json.loads(item.arguments)
        except ValueError:
            continue
        if not isinstance(args, Mapping):
            continue
        path = args.get("path")
        if isinstance(path, str) and path not in files:
            files.append(path)
        argv = args.get("argv") or args.get("command")
        if isinstance(argv, list):
            line = " ".join(str(a) for a in argv)
            if line not in commands:
                commands.append(line)
    return files, commands


def extractive_summary(items: Sequence[p.ResponseItem], *, skip_last_user: bool) -> str:
    """A deterministic summary: the user's requests, files and commands, the last answer.

    An earlier note in ``items`` is no request: its files and commands come first in this one."""
    requests = _real_user_texts(items)
    if skip_last_user and requests:
        requests = requests[:-1]
    earlier_files, earlier_commands = _earlier_notes(items)
    files, commands = _mentions(items)
    files = list(dict.fromkeys([*earlier_files, *files]))
    commands = list(dict.fromkeys([*earlier_commands, *commands]))
    lines = ["Requests so far:"]
    lines += [f"- {text}" for text in requests] or ["- (none)"]
    if files:
        lines += ["Files touched:"] + [f"- {path}" for path in files]
    if commands:
        lines += ["Commands run:"] + [f"- {command}" for command in commands]
    last = last_agent_text(items)
    lines.append(f"Last answer: {last}" if last else "Last answer: (none)")
    return "\n".join(lines)


def fallback_output(
    body: Mapping[str, Any], *, purpose: str = "turn"
) -> tuple[p.ResponseItem, ...]:
    """What the ``echo`` fallback answers to a request."""
    raw_items = _raw_input(body)
    if (
        raw_items
        and isinstance(raw_items[-1], Mapping)
        and (raw_items[-1].get("type") == "compaction_trigger")
    ):
        summary = extractive_summary(_input_items(body), skip_last_user=False)
        return (p.Compaction(encrypted_content=_seal(summary)),)
    if purpose == "compact":
        summary = extractive_summary(_input_items(body), skip_last_user=True)
        return (p.assistant_message(summary),)
    # An echo needs only the last real user text: look from the end, decoding little.
    for entry in reversed(raw_items):
        if (
            isinstance(entry, Mapping)
            and entry.get("type") == "message"
            and (entry.get("role") == "user")
        ):
            try:
                message = decode_response_item(entry)
            except DecodeError:
                continue
            if isinstance(message, p.Message) and not is_contextual(message):
                return (p.assistant_message(f"echo: {message.text()}"),)
    return (p.assistant_message("echo: (nothing to echo)"),)


def remote_compact_fallback(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the fallback answers to ``/responses/compact``: user messages and a compaction."""
    items = _input_items(body)
    kept = [
        encode_response_item(item)
        for item in items
        if isinstance(item, p.Message) and item.role == "user" and not is_contextual(item)
    ]
    summary = extractive_summary(items, skip_last_user=False)
    return [*kept, encode_response_item(p.Compaction(encrypted_content=_seal(summary)))]


def _seal(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


_ENCODER = json.JSONEncoder(ensure_ascii=False)


def _json_tokens(value: Any) -> int:
    # A reply may hold a lone surrogate, to play a model that sends one: it is counted, as
    # the escape it goes out as would be, rather than failing the estimate.
    return approx_tokens(mended(_ENCODER.encode(value)))


class UsageEstimator:
    """Usage a scripted reply reports when the script gives none: approximate token counts
    of the instructions, every input item and the output.

    Consecutive requests of a session repeat their input: the sizes of the items the previous
    request had (the same objects) are kept with their sum, so a request costs what it adds.
    When both inputs are views of the same history, what they share is known without a walk.
    """

    def __init__(self) -> None:
        self._input: Sequence[Any] = ()
        self._sizes: list[int] = []
        self._total = 0

    def _shared(self, items: Sequence[Any]) -> int:
        """How many leading items ``items`` shares with the previous input."""
        if isinstance(items, Prefix):
            known = items.after(self._input)
            if known is not None:
                return known
        previous = self._input
        same = 0
        limit = min(len(previous), len(items))
        while same < limit and previous[same] is items[same]:
            same += 1
        return same

    def estimate(self, body: Mapping[str, Any], output: Sequence[p.ResponseItem]) -> p.TokenUsage:
        items = _raw_input(body)
        same = self._shared(items)
        sizes = self._sizes
        if same < len(sizes):
            self._total -= sum(sizes[same:])
            del sizes[same:]
        for index in range(same, len(items)):
            size = _json_tokens(items[index])
            sizes.append(size)
            self._total += size
        self._input = items
        input_tokens = approx_tokens(str(body.get("instructions", ""))) + self._total
        output_tokens = sum(_json_tokens(encode_response_item(item)) for item in output)
        return p.TokenUsage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
        )
