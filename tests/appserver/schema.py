"""Every message ``relay app-server`` sends, checked against the JSON Schema that Codex 0.169.0
writes for its app-server protocol (vendored in ``schema-0.169.0/``, with how it was made)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_FILE = Path(__file__).parent / "schema-0.169.0" / "codex_app_server_protocol.schemas.json"

#: The definition each method's result is, by the method of the request it answers.
RESULTS = {
    "initialize": "InitializeResponse",
    "thread/start": "v2/ThreadStartResponse",
    "thread/resume": "v2/ThreadResumeResponse",
    "thread/compact/start": "v2/ThreadCompactStartResponse",
    "turn/start": "v2/TurnStartResponse",
    "turn/interrupt": "v2/TurnInterruptResponse",
    "turn/steer": "v2/TurnSteerResponse",
    "thread/list": "v2/ThreadListResponse",
    "thread/read": "v2/ThreadReadResponse",
    "thread/loaded/list": "v2/ThreadLoadedListResponse",
    "thread/name/set": "v2/ThreadSetNameResponse",
    "thread/archive": "v2/ThreadArchiveResponse",
    "thread/unarchive": "v2/ThreadUnarchiveResponse",
    "thread/fork": "v2/ThreadForkResponse",
    "model/list": "v2/ModelListResponse",
    "config/read": "v2/ConfigReadResponse",
}


@functools.cache
def bundle() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return data


@functools.cache
def _validator(definition: str) -> jsonschema.Draft7Validator:
    root = bundle()
    schema = {"$ref": f"#/definitions/{definition}", "definitions": root["definitions"]}
    return jsonschema.Draft7Validator(schema)


@functools.cache
def _variant_validator(definition: str, kind: str) -> jsonschema.Draft7Validator:
    node: Any = bundle()["definitions"]
    for part in definition.split("/"):
        node = node[part]
    found = [
        at
        for at, variant in enumerate(node["oneOf"])
        if variant["properties"]["type"].get("enum") == [kind]
    ]
    assert len(found) == 1, f"{definition} has {len(found)} variants of type {kind!r}"
    schema = {
        "$ref": f"#/definitions/{definition}/oneOf/{found[0]}",
        "definitions": bundle()["definitions"],
    }
    return jsonschema.Draft7Validator(schema)


def check(definition: str, instance: Any) -> None:
    """Raise when ``instance`` is not a ``definition`` (``v2/Thread``, ``ServerRequest``)."""
    _raise_errors(definition, _validator(definition), instance)


def check_variant(definition: str, instance: dict[str, Any]) -> None:
    """:func:`check` for a ``definition`` that is a ``oneOf`` told apart by ``type``
    (``v2/ThreadItem``): ``instance`` is checked against the one variant of its type, which
    is the same verdict at a fraction of the cost."""
    _raise_errors(definition, _variant_validator(definition, instance["type"]), instance)


def _raise_errors(definition: str, validator: jsonschema.Draft7Validator, instance: Any) -> None:
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        raise AssertionError(f"not a valid {definition}: {best.message} at {list(best.path)}")


def client_methods() -> set[str]:
    """The methods of the protocol's client requests."""
    return {
        variant["properties"]["method"]["enum"][0]
        for variant in bundle()["definitions"]["ClientRequest"]["oneOf"]
    }


def check_message(message: dict[str, Any], methods: dict[Any, str]) -> None:
    """Raise when ``message``, one line the server wrote, is not valid under the schema.

    ``methods``: the method of each request the client sent, by id (an answer is checked as
    the result of its method). An error to a line whose id could not be read has ``id: null``,
    which the schema's ``RequestId`` does not allow: its error object is checked, and its id
    must be null.
    """
    assert "jsonrpc" not in message, message
    if "method" in message:
        kind = "ServerRequest" if "id" in message else "ServerNotification"
        check(kind, message)
        return
    if "error" in message:
        if message["id"] is None:
            check("JSONRPCErrorError", message["error"])
            assert set(message) == {"id", "error"}, message
        else:
            check("JSONRPCError", message)
        return
    check("JSONRPCResponse", message)
    method = methods.get(message["id"])
    assert method in RESULTS, f"an answer to no request the client sent: {message}"
    check(RESULTS[method], message["result"])
