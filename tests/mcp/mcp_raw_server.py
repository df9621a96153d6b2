"""An MCP server for relay's tests that writes its answers byte by byte, with the standard
library alone: it starts in a few hundredths of a second, and it can answer what no SDK would
write (bytes that are not UTF-8, a lone surrogate, JSON nested too deep, an answer of any size,
a tool list without end).

Run as ``python tests/mcp/mcp_raw_server.py [--http PORT [--sse]] [--tools N] [--pages-forever]
[--list-answer KIND]``: over standard input and output by default, over streamable HTTP on
127.0.0.1:PORT with ``--http`` (each answer a JSON body, or with ``--sse`` one server-sent
event). ``--tools N`` lists N tools (``tool0`` ...) besides its own; ``--pages-forever`` lists
one tool a page, each page with a new cursor, without end; ``--list-answer KIND`` answers
``tools/list`` with the broken answer KIND.

Its tools: ``echo`` (the text), ``big`` (a text of ``size`` bytes), ``broken`` (the broken
answer ``kind``: ``latin1``, ``surrogate``, ``deep``, ``garbage``), ``pid``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: What the server lists of its own tools.
OWN_TOOLS = ("echo", "big", "broken", "pid")
#: How deep the ``deep`` answer nests.
DEPTH = 300


def _tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"The {name} tool.", "inputSchema": {"type": "object"}}


def _result(request_id: Any, result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


def _text(request_id: Any, text: str) -> bytes:
    return _result(request_id, {"content": [{"type": "text", "text": text}]})


def broken(request_id: Any, kind: str) -> bytes:
    """An answer to ``request_id`` that is no readable JSON-RPC message."""
    head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":'
    if kind == "latin1":
        return head + b'{"content":[{"type":"text","text":"caf\xe9"}]}}'
    if kind == "surrogate":
        return head + b'{"content":[{"type":"text","text":"\\ud800"}]}}'
    if kind == "deep":
        nested = b"[" * DEPTH + b"]" * DEPTH
        return head + b'{"content":[],"structuredContent":{"a":' + nested + b"}}}"
    return head + b"{not json"


class Server:
    """What the server answers, whatever carries it."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.pages = 0

    def answer(self, message: dict[str, Any]) -> bytes | None:
        """The answer to one message (None for a notification)."""
        if "id" not in message:
            return None
        request_id = message["id"]
        method = message.get("method")
        params = message.get("params") or {}
        if method == "initialize":
            return _result(
                request_id,
                {
                    "protocolVersion": params.get("protocolVersion"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "1"},
                },
            )
        if method == "tools/list":
            return self.tools(request_id)
        if method == "tools/call":
            return self.call(request_id, params.get("name"), params.get("arguments") or {})
        error = {"code": -32601, "message": f"no method {method}"}
        return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()

    def tools(self, request_id: Any) -> bytes:
        if self.args.list_answer:
            return broken(request_id, self.args.list_answer)
        if self.args.pages_forever:
            self.pages += 1
            page = {"tools": [_tool(f"page{self.pages}")], "nextCursor": f"c{self.pages}"}
            return _result(request_id, page)
        names = [*OWN_TOOLS, *(f"tool{i}" for i in range(self.args.tools))]
        return _result(request_id, {"tools": [_tool(name) for name in names]})

    def call(self, request_id: Any, name: Any, arguments: dict[str, Any]) -> bytes:
        if name == "echo":
            return _text(request_id, str(arguments.get("text", "")))
        if name == "big":
            size = int(arguments["size"])
            head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode()
            return head + b',"result":{"content":[{"type":"text","text":"' + b"x" * size + b'"}]}}'
        if name == "broken":
            return broken(request_id, str(arguments["kind"]))
        if name == "pid":
            return _text(request_id, str(os.getpid()))
        return _text(request_id, f"no tool {name}")


def serve_stdio(server: Server) -> None:
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        answer = server.answer(json.loads(line))
        if answer is not None:
            sys.stdout.buffer.write(answer + b"\n")
            sys.stdout.buffer.flush()


def serve_http(server: Server, port: int, sse: bool) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            answer = server.answer(json.loads(body))
            if answer is None:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if sse:
                payload = b"event: message\r\ndata: " + answer + b"\r\n\r\n"
                kind = "text/event-stream"
            else:
                payload, kind = answer, "application/json"
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            try:
                self.wfile.write(payload)
            except OSError:
                pass  # the client read what it wanted and closed

        def do_GET(self) -> None:
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_DELETE = do_GET

        def log_message(self, format: str, *args: Any) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--sse", action="store_true")
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--pages-forever", action="store_true")
    parser.add_argument("--list-answer", default=None)
    args = parser.parse_args()
    server = Server(args)
    if args.http is not None:
        serve_http(server, args.http, args.sse)
    else:
        serve_stdio(server)


if __name__ == "__main__":
    main()
