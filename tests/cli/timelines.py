"""Rollouts for the timeline page's tests, and the page read back as a reader would.

:func:`eventful_rollout` runs a real session (scripted model, virtual time) that does
everything the page shows: tool calls, a pinned message and a file read in the work-state
record, a masking and a summary, ``recall`` of a masked output, an automatic compaction at
the configured limit, a failed turn and an interrupted one. :func:`long_rollout` writes the
lines of a session of many turns directly. :func:`read_page` parses a page with the standard
library's HTML parser: its embedded data, its tables as text, every tag and attribute.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

import relay
from relay import testing

#: The output of the ``fetch_log`` tool of :func:`eventful_rollout` (masked, then recalled).
LOG = "\n".join(
    f"12:{i:02d} worker-{i % 3} step {i} finished with code {i % 2}" for i in range(120)
)
#: The auto-compaction limit of :func:`eventful_rollout`.
LIMIT = 3000


async def _fetch_log(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
    return LOG


FETCH_LOG = relay.Tool(
    "fetch_log", "The build log.", {"type": "object", "properties": {}}, _fetch_log
)


def eventful_rollout(root: Path) -> Path:
    """Run the eventful session under ``root``; returns its rollout file."""
    work = root / "work"
    work.mkdir(parents=True)
    (work / "notes.txt").write_text("migrate the users table first\n")
    reference = "call-log#" + hashlib.sha256(LOG.encode()).hexdigest()[:12]
    script = {
        "responses": [
            {"function_call": {"name": "fetch_log", "arguments": {}, "call_id": "call-log"}},
            {"text": "The build log has 120 steps.", "total_tokens": 1200},
            {
                "function_call": {
                    "name": "read_file",
                    "arguments": {"path": "notes.txt"},
                    "call_id": "call-notes",
                }
            },
            {"text": "The notes say: users table first.", "total_tokens": 1800},
            {"text": "Summary: the log and the notes were read."},
            {
                "function_call": {
                    "name": "recall",
                    "arguments": {"reference": reference},
                    "call_id": "call-recall",
                }
            },
            {"text": "Step 7 finished with code 1.", "total_tokens": 3500},
            {"text": "Sent."},
            {"http_error": {"status": 400, "message": "bad request body"}},
            {"function_call": {"name": "sleep", "arguments": {"seconds": 3600}, "call_id": "nap"}},
            {"text": "Done.", "total_tokens": 900},
        ]
    }
    config = relay.Config(
        cwd=str(work),
        rollout=relay.RolloutConfig(dir=str(root / "sessions")),
        model_auto_compact_token_limit=LIMIT,
        mask_keep_recent_tokens=0,
        features=relay.Features(work_state=True, tool_output_masking=True),
    )
    found: list[Path] = []

    async def main() -> None:
        async with testing.open_test_session(script, config=config, tools=[FETCH_LOG]) as t:
            assert t.session.rollout is not None
            found.append(t.session.rollout.path)
            await t.turns("Fetch the build log.", pin=True)
            await t.turns("Read notes.txt.")
            await t.submit(relay.Compact(), id="c1")
            await t.wait_for(testing.turn_ended, 3)
            # The answer reports 3,500 tokens: the next turn compacts (masks) first.
            await t.turns("What did step 7 say exactly?", "Send it.", "Try again.")
            await t.turn("Wait an hour.")
            await t.wait_for(testing.tool_call_started, 4)
            await t.submit(relay.Interrupt())
            await t.wait_for(testing.turn_ended, 7)
            await t.turns("Are you there?")

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return found[0]


# --------------------------------------------------------------------------- long rollouts


def _stamp(second: int) -> str:
    day, rest = divmod(second, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"2026-01-{1 + day:02d}T{hours:02d}:{minutes:02d}:{seconds:02d}.000Z"


def long_rollout(
    turns: int,
    *,
    compact_every: int = 500,
    fail_every: int = 3000,
    abort_every: int = 2500,
    warn_every: int = 0,
) -> str:
    """The text of a rollout of ``turns`` turns, one model call and (every other turn) one
    tool call each, growing until a compaction every ``compact_every`` turns, with a failed
    turn every ``fail_every``, an interrupted one every ``abort_every`` and (unless 0) a
    warning every ``warn_every``."""
    lines: list[str] = []
    clock = 0

    def line(kind: str, payload: Any) -> None:
        lines.append(json.dumps({"timestamp": _stamp(clock), "type": kind, "payload": payload}))

    def usage(total: int, context: int, *, estimated: bool = False) -> dict[str, Any]:
        def tokens(n: int) -> dict[str, int]:
            return {
                "input_tokens": n - 20,
                "cached_input_tokens": 0,
                "output_tokens": 20,
                "reasoning_output_tokens": 0,
                "total_tokens": n,
            }

        return {
            "type": "token_count",
            "info": {
                "total_token_usage": tokens(total),
                "last_token_usage": tokens(context),
                "model_context_window": 128_000,
                "estimated": estimated,
            },
        }

    line(
        "session_meta",
        {
            "id": "long-1",
            "created": "2026-01-01T00:00:00+00:00",
            "cwd": "/w",
            "model": "scripted",
            "model_provider": "scripted",
            "relay_version": "0.1.0",
        },
    )
    line(
        "event_msg",
        {
            "type": "session_configured",
            "session_id": "long-1",
            "model": "scripted",
            "model_provider": "scripted",
            "model_context_window": 128_000,
            "cwd": "/w",
            "rollout_path": None,
            "relay_version": "0.1.0",
            "resumed": False,
        },
    )
    total = 0
    context = 2_000
    for number in range(1, turns + 1):
        clock += 3
        turn_id = f"sub-{number}"
        line(
            "event_msg",
            {
                "type": "turn_started",
                "turn_id": turn_id,
                "model_context_window": 128_000,
                "started_at": float(clock),
                "auto_compact_token_limit": 115_200,
            },
        )
        if number % compact_every == 0:
            receipt = {
                "trigger": "pre_turn",
                "backend": "local",
                "tokens_before": context,
                "tokens_after": 3_000,
                "duration_ms": 900,
                "cut": False,
                "counted_before": True,
            }
            line(
                "compacted",
                {
                    "message": f"summary after turn {number}",
                    "replacement_history": [],
                    "window_number": number,
                    "receipt": receipt,
                },
            )
            context = 3_000
            line("event_msg", usage(total, context, estimated=True))
            line("event_msg", {"type": "context_compacted"})
        text = f"step {number}"
        line(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
        )
        line("event_msg", {"type": "user_message", "message": text})
        if warn_every and number % warn_every == 0:
            message = f"the tool output of turn {number} was cut at 10,000 tokens"
            line("event_msg", {"type": "warning", "message": message})
        if number % abort_every == 0:
            line(
                "event_msg",
                {
                    "type": "turn_aborted",
                    "turn_id": turn_id,
                    "reason": "interrupted",
                    "duration_ms": 1200,
                },
            )
            continue
        if number % fail_every == 0:
            line(
                "event_msg",
                {
                    "type": "error",
                    "message": f"the server refused the request of turn {number}",
                    "code": "bad_request",
                },
            )
        else:
            if number % 2:
                call = f"call-{number}"
                line(
                    "response_item",
                    {
                        "type": "function_call",
                        "name": "read_file",
                        "arguments": '{"path": "a.txt"}',
                        "call_id": call,
                    },
                )
                line(
                    "response_item",
                    {"type": "function_call_output", "call_id": call, "output": "hello"},
                )
            context += 200
            total += context
            line(
                "response_item",
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": f"done {number}"}],
                },
            )
            line("event_msg", usage(total, context))
        line(
            "event_msg",
            {
                "type": "turn_complete",
                "turn_id": turn_id,
                "last_agent_message": None,
                "duration_ms": 2000,
            },
        )
    line("event_msg", {"type": "shutdown_complete"})
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- patches and plans

#: The diff of ``src/app.py`` in :func:`edits_rollout`.
APP_DIFF = "@@ -1,3 +1,3 @@\n import os\n-print('old')\n+print('new')\n x = 1\n"


def edits_rollout(*, app_diff: str = APP_DIFF, patches_first: bool = False) -> str:
    """The text of a rollout (in ``/w``) of two turns: the first plans (twice), applies a patch
    that updates ``src/app.py`` (its diff ``app_diff``), adds ``notes.md``, moves ``old.txt`` to
    ``new.txt`` and deletes ``gone.txt``, then tries one that does not apply, and runs a shell
    command; the second plans again. With ``patches_first`` each ``patch_apply_end`` is
    written before its call."""
    lines: list[str] = []
    second = 0

    def line(kind: str, payload: Any) -> None:
        nonlocal second
        second += 1
        lines.append(json.dumps({"timestamp": _stamp(second), "type": kind, "payload": payload}))

    def plan(turn: str, steps: list[tuple[str, str]], why: str | None) -> None:
        plan = [{"step": step, "status": status} for step, status in steps]
        line(
            "event_msg", {"type": "plan_update", "turn_id": turn, "plan": plan, "explanation": why}
        )

    def call(name: str, call_id: str, arguments: dict[str, Any], output: str, *ends: Any) -> None:
        item = {"type": "function_call", "name": name, "arguments": json.dumps(arguments)}
        if patches_first:
            for end in ends:
                line("event_msg", end)
        line("response_item", {**item, "call_id": call_id})
        if not patches_first:
            for end in ends:
                line("event_msg", end)
        line(
            "response_item", {"type": "function_call_output", "call_id": call_id, "output": output}
        )

    def change(path: str, kind: str, diff: str, move_path: str | None = None) -> dict[str, Any]:
        return {"path": path, "kind": kind, "diff": diff, "move_path": move_path}

    line("session_meta", {"id": "edits-1", "created": "2026-01-01T00:00:00+00:00", "cwd": "/w"})
    for turn in ("t1", "t2"):
        line(
            "event_msg",
            {
                "type": "turn_started",
                "turn_id": turn,
                "model_context_window": None,
                "started_at": 0.0,
            },
        )
        if turn == "t1":
            plan("t1", [("read the code", "in_progress"), ("fix it", "pending")], None)
            changes = [
                change("/w/src/app.py", "update", app_diff),
                change("/w/notes.md", "add", "@@ -0,0 +1,2 @@\n+# Notes\n+done\n"),
                change("/w/old.txt", "update", "@@ -1 +1 @@\n-keep\n+kept\n", "/w/new.txt"),
                change("/w/gone.txt", "delete", "@@ -1 +0,0 @@\n-bye\n"),
            ]
            end = {"type": "patch_apply_end", "call_id": "p1", "turn_id": "t1", "success": True}
            done = "Patch applied. Files changed:\nM src/app.py\n"
            call(
                "apply_patch",
                "p1",
                {"input": "…"},
                done,
                {**end, "changes": changes, "message": done},
            )
            failed = {
                "type": "patch_apply_end",
                "call_id": "p2",
                "turn_id": "t1",
                "success": False,
                "changes": [change("/w/src/app.py", "update", app_diff)],
                "message": "src/app.py: the lines to replace were not found",
            }
            call("apply_patch", "p2", {"input": "…"}, "not applied", failed)
            call("shell", "s1", {"command": ["ls"]}, "src\n")
            plan("t1", [("read the code", "completed"), ("fix it", "completed")], "all done")
        else:
            plan("t2", [("check", "pending")], "one more look")
        line(
            "event_msg",
            {
                "type": "turn_complete",
                "turn_id": turn,
                "last_agent_message": None,
                "duration_ms": 5,
            },
        )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- reading a page


@attrs.define
class Page:
    """A page as the standard library's parser reads it."""

    tags: list[tuple[str, dict[str, str | None]]] = attrs.field(factory=list)
    """Every start tag with its attributes, in order."""
    scripts: list[tuple[dict[str, str | None], str]] = attrs.field(factory=list)
    """Every script's attributes and text."""
    styles: list[str] = attrs.field(factory=list)
    tables: dict[str, list[list[str]]] = attrs.field(factory=dict)
    """The rows of each table with an id (header row included), each cell's text."""

    def data(self, element_id: str = "relay-timeline") -> Any:
        """The embedded JSON of the script with that id."""
        [text] = [text for attrs_, text in self.scripts if attrs_.get("id") == element_id]
        return json.loads(text)

    def html_attrs(self) -> dict[str, str | None]:
        return next(found for tag, found in self.tags if tag == "html")


class _Reader(HTMLParser):
    def __init__(self, page: Page) -> None:
        super().__init__(convert_charrefs=True)
        self.page = page
        self.raw: tuple[str, dict[str, str | None]] | None = None
        self.text: list[str] = []
        self.table: list[list[str]] | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.page.tags.append((tag, found))
        if tag in {"script", "style"}:
            self.raw, self.text = (tag, found), []
        elif tag == "table" and found.get("id"):
            self.table = self.page.tables.setdefault(str(found["id"]), [])
        elif tag == "tr" and self.table is not None:
            self.table.append([])
        elif tag in {"td", "th"} and self.table is not None:
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in {"script", "style"} and self.raw is not None:
            kind, found = self.raw
            if kind == "script":
                self.page.scripts.append((found, "".join(self.text)))
            else:
                self.page.styles.append("".join(self.text))
            self.raw = None
        elif tag in {"td", "th"} and self.cell is not None and self.table:
            self.table[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "table":
            self.table = None

    def handle_data(self, data: str) -> None:
        if self.raw is not None:
            self.text.append(data)
        elif self.cell is not None:
            self.cell.append(data)


def read_page(html: str) -> Page:
    """Parse a page (see :class:`Page`)."""
    page = Page()
    reader = _Reader(page)
    reader.feed(html)
    reader.close()
    return page
