"""The framing and the parameters of ``relay app-server``: plain functions, no event loop."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

import relay
from relay._appserver import _params
from relay._appserver._methods import SUPPORTED, UNSUPPORTED
from relay._appserver._rpc import (
    Code,
    Malformed,
    Notification,
    Reply,
    Request,
    RpcError,
    encode,
    parse_line,
)
from relay._appserver._stdio import LineSplitter, Output
from relay._appserver._threads import history_turns

from .schema import check, client_methods


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        (b'{"id": 1, "method": "initialize", "params": {}}\n', Request(1, "initialize", {})),
        (b'{"id": "a", "method": "x"}', Request("a", "x", None)),
        (b'{"method": "initialized"}\n', Notification("initialized", None)),
        (b'{"id": 0, "result": {"decision": "accept"}}', Reply(0, {"decision": "accept"})),
        (b'{"id": 0, "error": {"code": 1}}', Reply(0, None, {"code": 1})),
    ],
)
def test_lines_are_requests_notifications_or_replies(line: bytes, parsed: Any) -> None:
    assert parse_line(line) == parsed


@pytest.mark.parametrize(
    ("line", "line_id", "code"),
    [
        (b"not json\n", None, Code.PARSE_ERROR),
        (b'{"id": 1, "method": ', None, Code.PARSE_ERROR),
        (b"\xff\xfe\n", None, Code.PARSE_ERROR),
        (b'{"id": 1, "method": "x", "n": NaN}', None, Code.PARSE_ERROR),
        (b"[]", None, Code.INVALID_REQUEST),
        (b"42", None, Code.INVALID_REQUEST),
        (b'{"id": 1.5, "method": "x"}', None, Code.INVALID_REQUEST),
        (b'{"id": true, "method": "x"}', None, Code.INVALID_REQUEST),
        (b'{"id": 3, "method": 4}', 3, Code.INVALID_REQUEST),
        (b'{"id": 3}', 3, Code.INVALID_REQUEST),
    ],
)
def test_what_is_no_message_is_answered_with_the_id_it_has(
    line: bytes, line_id: Any, code: Code
) -> None:
    found = parse_line(line)
    assert isinstance(found, Malformed)
    assert (found.id, found.code) == (line_id, code)


def test_a_line_is_one_json_object_without_jsonrpc() -> None:
    line = encode({"id": 1, "result": {"text": "é\n"}})
    assert line == '{"id":1,"result":{"text":"é\\n"}}\n'.encode()
    assert encode({"id": 1, "result": "\udc80"}) == b'{"id":1,"result":"\\udc80"}\n'


def test_the_methods_served_and_refused_are_the_protocol_s() -> None:
    assert client_methods() == SUPPORTED | UNSUPPORTED
    assert not SUPPORTED & UNSUPPORTED


def refused(read: Any, params: Any) -> str:
    with pytest.raises(RpcError) as error:
        read(params)
    assert error.value.code == Code.INVALID_PARAMS
    return error.value.message


def test_turn_start_reads_its_input_and_settings() -> None:
    turn = _params.turn_start(
        {
            "threadId": "t",
            "input": [
                {"type": "text", "text": "look", "text_elements": []},
                {"type": "image", "url": "https://x/a.png"},
                {"type": "localImage", "path": "b.png"},
            ],
            "cwd": "sub",
            "model": "m",
            "effort": "high",
            "approvalPolicy": "on-request",
            "outputSchema": {"type": "object"},
            "serviceTier": "fast",
        }
    )
    assert turn == _params.TurnStart(
        thread_id="t",
        items=(relay.Text("look"), relay.Image("https://x/a.png"), relay.LocalImage("b.png")),
        cwd="sub",
        model="m",
        effort="high",
        approval_policy="on-request",
        output_schema={"type": "object"},
    )


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (None, "threadId: missing"),
        ({"threadId": 1, "input": []}, "threadId: expected a string"),
        ({"threadId": "t"}, "input: missing"),
        ({"threadId": "t", "input": {}}, "input: expected an array"),
        ({"threadId": "t", "input": [{"type": "text"}]}, "input[0].text: missing"),
        ({"threadId": "t", "input": ["hi"]}, "input[0]: expected an object"),
        ({"threadId": "t", "input": [{"type": "image", "fileId": "f"}]}, "input[0].fileId: "),
        ({"threadId": "t", "input": [{"type": "skill"}]}, "input[0].type: 'skill' input"),
        (
            {"threadId": "t", "input": [{"type": "text", "text": "a"}], "approvalPolicy": {}},
            "approvalPolicy: granular",
        ),
        (
            {"threadId": "t", "input": [{"type": "text", "text": "a"}], "outputSchema": "x"},
            "outputSchema: expected a JSON Schema",
        ),
    ],
)
def test_turn_start_names_the_field_it_refuses(params: Any, message: str) -> None:
    assert refused(_params.turn_start, params).startswith(message)


def test_thread_start_reads_its_settings() -> None:
    settings = _params.thread_start(
        {
            "model": "m",
            "modelProvider": "openai",
            "cwd": "/w",
            "approvalPolicy": "never",
            "sandbox": "read-only",
            "baseInstructions": "b",
            "developerInstructions": "d",
            "ephemeral": True,
            "config": None,
            "personality": "pragmatic",
        }
    )
    assert settings == _params.ThreadSettings(
        model="m",
        model_provider="openai",
        cwd="/w",
        approval_policy="never",
        sandbox="read-only",
        base_instructions="b",
        developer_instructions="d",
        ephemeral=True,
    )
    assert refused(_params.thread_start, {"config": {"model": "x"}}).startswith("config: ")
    assert refused(_params.thread_start, {"sandbox": "all"}).startswith("sandbox: 'all' is not")
    assert refused(_params.thread_start, {"ephemeral": "yes"}) == "ephemeral: expected a boolean"
    assert refused(_params.client_info, {}) == "clientInfo: missing"
    assert refused(_params.client_info, {"clientInfo": {"name": "n"}}) == (
        "clientInfo.version: missing"
    )


def test_a_resumed_thread_shows_the_turns_its_rollout_records() -> None:
    from relay._rollout._lines import EventMsgLine

    msgs = [
        p_turn_started("t1"),
        relay.UserMessage("hi"),
        relay.AgentMessage("hello"),
        relay.TurnComplete("t1", "hello", 5),
        p_turn_started("t2"),
        relay.UserMessage("again"),
        relay.TurnAborted("t2", relay.AbortReason.INTERRUPTED, 7),
        p_turn_started("t3"),
        relay.UserMessage("cut"),
    ]
    lines = [EventMsgLine(n, None, msg) for n, msg in enumerate(msgs, 1)]
    turns = history_turns(lines)
    for turn in turns:
        check("v2/Turn", turn)
    assert [(t["id"], t["status"], len(t["items"])) for t in turns] == [
        ("t1", "completed", 2),
        ("t2", "interrupted", 1),
        ("t3", "interrupted", 1),
    ]
    assert turns[0]["items"][1] == {"type": "agentMessage", "id": "t1-2", "text": "hello"}
    assert json.loads(json.dumps(turns)) == turns


def p_turn_started(turn_id: str) -> relay.TurnStarted:
    return relay.TurnStarted(turn_id, None, started_at=1_800_000_000.0)


def test_lines_are_split_and_a_long_one_is_cut_once() -> None:
    lines = LineSplitter(limit=8)
    assert lines.feed(b"ab\ncd") == [b"ab\n"]
    assert lines.feed(b"e\n0123456789") == [b"cde\n", b"01234567"]
    assert lines.feed(b"still the long line\nok\n") == [b"ok\n"]
    assert lines.feed(b"0123456789ab\nx") == [b"01234567"]
    assert lines.rest() == b"x"


async def test_output_keeps_order_and_holds_events_back_when_the_client_lags() -> None:
    out = Output(high_water=2)
    out.put({"id": 1, "result": {}})
    await out.wait_room()  # below the mark: no wait
    out.put({"method": "a", "params": {}})
    waited = trio.Event()

    async def forward() -> None:
        await out.wait_room()
        waited.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(forward)
        await trio.testing.wait_all_tasks_blocked()
        assert not waited.is_set()
        assert await out.take() == b'{"id":1,"result":{}}\n{"method":"a","params":{}}\n'
    assert waited.is_set()
    out.close()
    assert await out.take() is None
