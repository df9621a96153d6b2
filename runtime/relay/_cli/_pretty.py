"""A readable rendering of events for a terminal (``relay run --pretty``).

:class:`PrettyPrinter` turns each event into text. On a terminal it keeps a one-line live
indicator while a model request or a compaction is in flight, redrawn in place; in a pipe it
prints plain lines only.
"""

from __future__ import annotations

import json
import shlex
from typing import TextIO

from .._base import _protocol as p
from .._core._work_state import WorkEntry, WorkState, work_state_lines
from ._outcome import RunOutcome


def visible(text: str) -> str:
    """``text`` with its control characters written out (:func:`relay._html.visible`).

    Imported when first printed: ``relay exec`` and ``relay run --json`` import this module
    and print nothing through it, and the page package costs a run's start-up.
    """
    from .._html._text import visible as written_out

    return written_out(text)


_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def background_note(receipt: p.CompactionReceipt) -> str:
    """What a checkpoint line adds for a result computed in the background."""
    if not receipt.background:
        return ""
    installed = f", installed {receipt.installed_at.value}" if receipt.installed_at else ""
    return f", background{installed}, snapshot {receipt.snapshot_age_ms or 0} ms old"


#: The most characters of a tool's arguments an approval request shows.
_ARGUMENTS_SHOWN = 400


def command_line(command: tuple[str, ...] | p.ToolInvocation) -> str:
    """The command of an approval request as one line, control characters written out: the
    argv as a shell would read it, or ``server/tool`` and its arguments."""
    if isinstance(command, p.ToolInvocation):
        name = command.tool if command.server is None else f"{command.server}/{command.tool}"
        arguments = json.dumps(dict(command.arguments), ensure_ascii=False, default=str)
        if len(arguments) > _ARGUMENTS_SHOWN:
            arguments = arguments[:_ARGUMENTS_SHOWN] + "…"
        return visible(f"{name} {arguments}")
    return visible(shlex.join(command))


def tool_output_summary(output: str | None) -> str:
    """The first line of a tool's output, and how many lines the transcript leaves out."""
    lines = (output or "").strip().splitlines()
    if not lines:
        return "(no output)"
    cut = len(lines) - 1
    more = f" (+{cut} more line{'s' if cut != 1 else ''})" if cut else ""
    return f"{_short(lines[0])}{more}"


def session_header(msg: p.SessionConfigured) -> str:
    """``session_configured`` as one line: who the session is and where it is recorded."""
    window = f"{msg.model_context_window} tokens" if msg.model_context_window else "window unknown"
    rollout = msg.rollout_path if msg.rollout_path is not None else "no rollout"
    mark = "↺ resumed session" if msg.resumed else "● session"
    servers = "".join(
        f" · MCP {name} ({count} tool{'s' if count != 1 else ''})"
        for name, count in msg.mcp_servers.items()
    )
    return (
        f"{mark} {msg.session_id} · {msg.model} via {msg.model_provider} ({window}) · "
        f"cwd {msg.cwd} · {rollout} · relay {msg.relay_version}{servers}"
    )


class PrettyPrinter:
    """Writes events to ``out`` as a transcript.

    ``outcome`` tells which turns failed; the caller hands it each event after the printer.
    """

    def __init__(self, out: TextIO, *, live: bool, outcome: RunOutcome) -> None:
        self.out = out
        self.live = live
        self.outcome = outcome
        self._status: str | None = None
        self._frame = 0
        self._in_message = False
        self.work = WorkState()
        """The work-state record shown at each checkpoint, as the events built it."""

    def _clear_status(self) -> None:
        if self.live and self._status is not None:
            self.out.write("\r\x1b[2K")
            self._status = None

    def _show_status(self, text: str) -> None:
        if not self.live:
            return
        self._frame = (self._frame + 1) % len(_SPINNER)
        self._status = text
        self.out.write(f"\r\x1b[2K{_SPINNER[self._frame]} {visible(text)}")

    def _line(self, text: str) -> None:
        self._clear_status()
        if self._in_message:
            self.out.write("\n")
            self._in_message = False
        self.out.write(visible(text) + "\n")

    def _agent_event(self, path: str, msg: p.EventMsg) -> None:
        """A sub-agent's turn, answer, calls and failures, one line each under its path."""
        match msg:
            case p.TurnStarted():
                self._line(f"  ⑂ {path} ▶ working")
            case p.AgentMessage(message=text):
                self._line(f"  ⑂ {path} › {_short(text)}")
            case p.ItemStarted(item=p.ToolCallItem(name=name) | p.AgentCallItem(tool=name)):
                self._line(f"  ⑂ {path} · {name}")
            case p.ErrorEvent(message=message):
                self._line(f"  ⑂ {path} ! {_short(message)}")
            case p.TurnAborted(reason=reason):
                self._line(f"  ⑂ {path} ✗ {reason.value}")
            case p.ExecApprovalRequest() | p.ApplyPatchApprovalRequest():
                self._line(f"  ⑂ {path} ? waits for a decision on {msg.call_id}")
            case _:
                pass

    def tick(self) -> None:
        """Advance the live indicator (called periodically while something is in flight)."""
        if self._status is not None:
            self._show_status(self._status)
            self.out.flush()

    def event(self, event: p.Event) -> None:
        """Render one event (a sub-agent's briefly, under its path)."""
        msg = event.msg
        if event.agent is not None:
            self._agent_event(event.agent.path, msg)
            return
        match msg:
            case p.SessionConfigured():
                self._line(session_header(msg))
            case p.TurnStarted(turn_id=turn_id):
                self._line(f"▶ turn {turn_id}")
                self._show_status("waiting for the model…")
            case p.UserMessage(message=text):
                self._line(f"  you › {_short(text)}")
                self._show_status("waiting for the model…")
            case p.AgentMessageDelta(delta=delta):
                self._clear_status()
                if not self._in_message:
                    self.out.write("  model › ")
                    self._in_message = True
                self.out.write(visible(delta))
            case p.ItemCompleted(item=p.AgentMessageItem(text=text)):
                if not self._in_message:
                    self._line(f"  model › {text}")
                else:
                    self.out.write("\n")
                    self._in_message = False
            case p.ItemStarted(item=p.ToolCallItem(name=name, arguments=arguments)):
                self._line(f"  ⚙ {name} {_short(arguments, 80)}")
                self._show_status(f"running {name}…")
            case p.ItemCompleted(item=p.ToolCallItem(output=output)):
                self._line(f"    ↳ {tool_output_summary(output)}")
                self._show_status("waiting for the model…")
            case p.ExecApprovalRequest(call_id=call_id, command=command):
                # No live indicator while a call waits: its question may be on this terminal.
                self._line(f"  ? approval asked for {call_id}: {command_line(command)}")
            case p.ItemStarted(item=p.ContextCompactionItem()):
                self._line("  ⇣ compacting the conversation…")
                self._show_status("compacting…")
            case p.ItemCompleted(item=p.ContextCompactionItem(receipt=None)):
                pass  # nothing was installed: its warning said why
            case p.ItemCompleted(item=p.ContextCompactionItem(receipt=receipt)) if receipt:
                self._line(
                    f"  ━━ checkpoint: {p.receipt_figures(receipt)} tokens "
                    f"({receipt.backend}, {receipt.trigger.value}, "
                    f"{receipt.duration_ms} ms{background_note(receipt)})"
                )
                for line in work_state_lines(self.work):
                    self._line(f"     ▸ {line}")
            case p.WorkStateNoted(kind="pinned", text=text):
                self.work.pin(text)
            case p.WorkStateNoted(kind=kind, text=text, key=key):
                self.work.add(WorkEntry(kind, text, key))
            case p.TokenCount(info=info) if info is not None:
                window = info.model_context_window
                used = info.last_token_usage.total_tokens
                share = f" ({used * 100 // window}% of {window})" if window else ""
                self._line(f"  · tokens {used}{share}")
            case p.TurnComplete(turn_id=turn_id, duration_ms=ms):
                error = self.outcome.error_of(turn_id)
                if error is None:
                    self._line(f"✓ turn {turn_id} done in {ms} ms")
                else:
                    self._line(
                        f"✗ turn {turn_id} failed after {ms} ms: "
                        f"{_short(error.message)} [{error.code.value}]"
                    )
            case p.TurnAborted(turn_id=turn_id, reason=reason, duration_ms=ms):
                self._line(f"✗ turn {turn_id} aborted ({reason.value}) after {ms} ms")
            case p.ErrorEvent(message=message, code=code):
                self._line(f"  ! error [{code.value}]: {message}")
            case p.WarningEvent(message=message):
                self._line(f"  ⚠ {message}")
            case p.StreamErrorEvent(message=message, detail=detail):
                self._line(f"  ↻ {message} ({_short(detail, 80)})")
            case p.BackgroundEvent(message=message):
                self._line(f"  · {message}")
            case p.HookCompleted(hook=hook, event=point, outcome=outcome, duration_ms=ms):
                self._line(f"  ⚑ hook {point} {hook}: {outcome} ({ms} ms)")
            case p.ShutdownComplete():
                self._line("■ session shut down")
            case p.SubAgentSpawned(path=path, role=role, prompt=prompt):
                task = f": {_short(prompt)}" if prompt else ""
                self._line(f"  ⑂ {path} spawned ({role}){task}")
            case p.SubAgentEnded(path=path, status=status, message=message):
                said = f": {_short(message)}" if message else ""
                self._line(f"  ⑂ {path} {status.value}{said}")
            case _:
                pass
        self.out.flush()
