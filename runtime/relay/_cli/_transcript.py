"""The transcript of ``relay show``: a parsed rollout as readable lines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import assert_never

import attrs

from .._base import _protocol as p
from .._base._exec_rules import ExecRules
from .._base._rollout_lines import Compacted, TurnContext, TurnSettings
from .._core._history import is_contextual
from .._core._summary import is_summary, summary_prefix
from .._core._work_state import WorkState, work_state_lines
from .._html import visible
from .._rollout._lines import (
    ApprovalLine,
    CompactedLine,
    EventMsgLine,
    IdsLine,
    IntentLine,
    OpLine,
    ResponseItemLine,
    Rollout,
    RolloutLine,
    RulesLine,
    SessionMetaLine,
    TraceLine,
    TurnContextLine,
    WorldStateLine,
)
from ._agent_rollouts import Unread, child_rollout, ends
from ._pretty import background_note, session_header

#: Lines of a tool output shown by the transcript.
OUTPUT_LINES = 6
#: Lines of each file's diff shown under a patch.
DIFF_LINES = 20
#: What starts each line of a child's transcript, under the line that spawned it.
NESTED = "  │ "
#: The deepest child whose transcript is shown (``relay show`` of its own rollout shows more).
MAX_NESTING = 32
#: A patch's change, as its summary marks it.
_CHANGE_MARKS = {p.ChangeKind.ADD: "A", p.ChangeKind.DELETE: "D", p.ChangeKind.UPDATE: "M"}


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cut(line: str, limit: int = 200) -> str:
    """One line of a block as written (its indentation kept: code reads as code), cut."""
    line = line.rstrip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _block(text: str, indent: str, limit: int = OUTPUT_LINES) -> list[str]:
    lines = text.rstrip().splitlines() or [""]
    shown = [f"{indent}{_cut(line)}" for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"{indent}… {len(lines) - limit} more lines")
    return shown


def _labelled(label: str, text: str) -> list[str]:
    """``text`` under a label, continuation lines aligned with the first."""
    first, *rest = _block(text, "")
    return [label + first] + [" " * len(label) + line for line in rest]


def _message_lines(item: p.Message) -> list[str]:
    text = item.text()
    images = sum(1 for part in item.content if isinstance(part, p.InputImage))
    suffix = f" [{images} image{'s' if images != 1 else ''}]" if images else ""
    if item.role == "assistant":
        return _labelled("  model › ", text + suffix)
    if item.role in {"developer", "system"}:
        return [f"  {item.role} › {_short(text)}"]
    if is_contextual(item):
        first = text.strip().splitlines()[0] if text.strip() else ""
        return [f"  context › {_short(first, 60)}"]
    if is_summary(item):
        return [f"  summary › {_short(text[len(summary_prefix()) + 1 :])}"]
    return _labelled("  you › ", text + suffix)


def _item_lines(item: p.ResponseItem) -> list[str]:
    match item:
        case p.Message():
            return _message_lines(item)
        case p.Reasoning(summary=summary):
            text = " ".join(part.text for part in summary)
            return [f"  thinking › {_short(text)}"] if text else ["  thinking …"]
        case p.FunctionCall(name=name, arguments=arguments, call_id=call_id):
            return [f"  ⚙ {name} {_short(arguments, 100)}  [{call_id}]"]
        case p.CustomToolCall(name=name, input=text, call_id=call_id):
            return [f"  ⚙ {name} {_short(text, 100)}  [{call_id}]"]
        case p.FunctionCallOutput(output=output) | p.CustomToolCallOutput(output=output):
            return _block(output, "    ↳ ")
        case p.Compaction():
            return ["  ⧉ compaction item (opaque)"]
        case p.GhostSnapshot(ref=ref):
            return [f"  · snapshot {ref}"]
        case p.Other(raw=raw):
            return [f"  · {raw.get('type', 'item')} (not shown)"]
        case _:
            assert_never(item)


def _event_lines(msg: p.EventMsg) -> list[str]:
    match msg:
        case p.TurnStarted():
            return []
        case p.TurnComplete(turn_id=turn_id, duration_ms=ms):
            return [f"✓ turn {turn_id} complete in {ms} ms"]
        case p.TurnAborted(turn_id=turn_id, reason=reason, duration_ms=ms):
            return [f"✗ turn {turn_id} aborted ({reason.value}) after {ms} ms"]
        case p.TokenCount(info=info):
            if info is None:
                return []
            last = info.last_token_usage.total_tokens
            window = info.model_context_window
            share = f" ({last * 100 // window}% of {window})" if window else ""
            total = info.total_token_usage.total_tokens
            return [f"  · tokens: {last} in context{share}, {total} used so far"]
        case p.WarningEvent(message=message):
            return [f"  ⚠ {_short(message, 200)}"]
        case p.ErrorEvent(message=message, code=code):
            return [f"  ! error [{code.value}]: {_short(message, 200)}"]
        case p.StreamErrorEvent(message=message):
            return [f"  ↻ {message}"]
        case p.BackgroundEvent(message=message):
            return [f"  · {_short(message, 200)}"]
        case p.HookCompleted(hook=hook, event=point, outcome=outcome, duration_ms=ms):
            return [f"  ⚑ hook {point} {hook}: {outcome} ({ms} ms)"]
        case p.ShutdownComplete():
            return ["■ session shut down"]
        case p.SessionConfigured():
            return [session_header(msg)]
        case p.SessionResumed(lost_host=lost, host=host):
            return [f"↪ host {lost} lost; the session goes on on {host}"]
        case p.ExecApprovalRequest(call_id=call_id, command=command):
            return [f"  ? approval asked for {call_id}: {command_text(command)}"]
        case p.ApplyPatchApprovalRequest(call_id=call_id, changes=changes):
            paths = ", ".join(change.path for change in changes)
            return [f"  ? approval asked for the patch {call_id}: {_short(paths, 200)}"]
        case p.PatchApplyEnd():
            return _patch_lines(msg)
        case p.PlanUpdate(plan=plan, explanation=explanation):
            steps = "; ".join(f"[{step.status.value}] {step.step}" for step in plan)
            why = f" ({_short(explanation, 100)})" if explanation else ""
            return [f"  ☰ plan: {_short(steps, 200)}{why}"]
        case p.SubAgentSpawned(path=path, role=role, prompt=prompt):
            task = f": {_short(prompt, 160)}" if prompt else ""
            return [f"  ⑂ agent {path} spawned ({role}){task}"]
        case p.SubAgentEnded(path=path, status=status, message=message):
            said = f": {_short(message, 160)}" if message else ""
            return [f"  ⑂ agent {path} {status.value}{said}"]
        case (
            p.PatchApplyBegin()
            | p.TurnDiff()
            | p.ExecCommandOutputDelta()
            | p.ReasoningSummaryDelta()
        ):
            return []  # not recorded: the end of a patch says what it changed
        case (
            p.ItemStarted()
            | p.ItemCompleted()
            | p.AgentMessageDelta()
            | p.AgentMessage()
            | p.UserMessage()
            | p.ContextCompacted()
            | p.HookStarted()
            | p.WorkStateNoted()
        ):
            # Messages are shown from the history items; the rest mirrors other lines.
            return []
        case _:
            assert_never(msg)


def _patch_lines(msg: p.PatchApplyEnd) -> list[str]:
    """A patch: applied or not, then each file (``A``, ``D``, ``M``) and, applied, its diff."""
    files = f"{len(msg.changes)} file{'' if len(msg.changes) == 1 else 's'}"
    if msg.success:
        lines = [f"  ✎ patch {msg.call_id} applied to {files}"]
    else:
        lines = [f"  ✎ patch {msg.call_id} not applied ({files}): {_short(msg.message, 200)}"]
    for change in msg.changes:
        moved = f" → {change.move_path}" if change.move_path else ""
        lines.append(f"    {_CHANGE_MARKS[change.kind]} {change.path}{moved}")
        if msg.success and change.diff.strip():
            lines += _block(change.diff, "      ", DIFF_LINES)
    return lines


def command_text(command: tuple[str, ...] | p.ToolInvocation) -> str:
    """The command of an approval request as one line: its argv, or ``server/tool``."""
    if isinstance(command, p.ToolInvocation):
        return command.tool if command.server is None else f"{command.server}/{command.tool}"
    return " ".join(command)


def _compacted_lines(compacted: Compacted) -> list[str]:
    number = f" #{compacted.window_number}" if compacted.window_number is not None else ""
    receipt = compacted.receipt
    if receipt is not None:
        head = (
            f"  ━━ checkpoint{number}: {p.receipt_figures(receipt)} tokens "
            f"({receipt.backend}, {receipt.trigger.value}, {receipt.duration_ms} ms"
            f"{background_note(receipt)})"
        )
    else:
        head = f"  ━━ checkpoint{number}"
    out = [head]
    if compacted.replacement_history is None:
        out.append("     (old-style record: the history is rebuilt from the summary)")
    else:
        kept = len(compacted.replacement_history)
        out.append(f"     history replaced by {kept} item{'s' if kept != 1 else ''}")
    summary = compacted.message
    prefix = summary_prefix() + "\n"
    if summary.startswith(prefix):
        summary = summary[len(prefix) :]
    if summary.strip():
        out += _block(summary, "     │ ")
    if compacted.work_state is not None:
        out += [
            f"     ▸ {text}" for text in work_state_lines(WorkState.from_json(compacted.work_state))
        ]
    return out


@attrs.define
class _Tree:
    """What the transcript of a tree of sessions shares: the files shown, so that a loop of
    rollouts naming each other ends."""

    seen: set[Path] = attrs.field(factory=set)
    depth: int = 0


@attrs.define
class _Transcript:
    """What the transcript needs to remember between lines."""

    rollout: Rollout
    # None: the children's transcripts are not shown (only their spawn and end lines).
    tree: _Tree | None = None
    # Each child's ``sub_agent_ended`` lines, by its id; the children already shown.
    ended: dict[str, list[tuple[str | None, p.SubAgentEnded]]] = attrs.field(factory=dict)
    shown: set[str] = attrs.field(factory=set)
    settings: TurnSettings | None = None
    rules: ExecRules | None = None
    open_turn: str | None = None
    shut_down: bool = False
    # An op's line, by its id, until its turn starts: the op is written when the session
    # handles it, which for a queued op is inside the turn it waits behind.
    ops: dict[str, str] = attrs.field(factory=dict)

    def line(self, line: RolloutLine) -> Iterator[str]:
        if isinstance(line, SessionMetaLine):
            return
        announced = isinstance(line, EventMsgLine) and isinstance(line.msg, p.SessionConfigured)
        starts_turn = isinstance(line, EventMsgLine) and isinstance(line.msg, p.TurnStarted)
        if (starts_turn or announced) and self.open_turn is not None:
            # A live session ends a turn before it starts another: this one was cut short.
            yield f"⚡ turn {self.open_turn} never ended: the session stopped"
            self.shut_down = True
            self.open_turn = None
        if self.shut_down:
            yield ""
            if not announced:  # a resumed session's own header says so
                yield "↺ resumed"
            self.shut_down = False
        match line:
            case ResponseItemLine(item=item):
                yield from _item_lines(item)
            case EventMsgLine(msg=msg):
                yield from self._event(line, msg)
            case TurnContextLine(context=TurnContext(settings=new)):
                if self.settings is not None and new != self.settings:
                    effort = f", effort {new.effort}" if new.effort else ""
                    yield f"  ⚙ settings: model {new.model}, cwd {new.cwd}{effort}"
                self.settings = new
            case WorldStateLine() | IdsLine() | TraceLine():
                pass
            case OpLine():
                self.ops[line.started.id] = f"» {line.text}"
            case ApprovalLine(decided=decided):
                yield f"  ✓ approval of {decided.call_id}: {decided.decision.value}"
            case IntentLine():
                pass
            case RulesLine(rules=rules):
                if rules != self.rules:
                    yield (
                        f"  ⚙ rules: approval_policy {rules.approval_policy}, "
                        f"sandbox_mode {rules.sandbox_mode}"
                    )
                self.rules = rules
            case CompactedLine(compacted=compacted):
                yield from _compacted_lines(compacted)
            case _:
                assert_never(line)

    def _event(self, line: EventMsgLine, msg: p.EventMsg) -> Iterator[str]:
        match msg:
            case p.TurnStarted(turn_id=turn_id):
                self.open_turn = turn_id
                when = f" · {line.timestamp[:19].replace('T', ' ')}" if line.timestamp else ""
                yield ""
                yield f"▶ turn {turn_id}{when}"
                op = self.ops.pop(turn_id, None)
                if op is not None:
                    yield op
                return
            case p.TurnComplete() | p.TurnAborted():
                self.open_turn = None
            case p.ShutdownComplete():
                self.open_turn = None
                self.shut_down = True
            case p.SubAgentSpawned(agent_id=agent_id) if agent_id in self.shown:
                # A resume opened it again: its transcript, one file, is shown already.
                yield f"  ⑂ agent {msg.path} opened again ({msg.role})"
                return
            case p.SubAgentSpawned() if self.tree is not None:
                self.shown.add(msg.agent_id)
                yield from _event_lines(msg)
                yield from self._child(msg, self.tree)
                return
            case _:
                pass
        yield from _event_lines(msg)

    def _child(self, spawned: p.SubAgentSpawned, tree: _Tree) -> Iterator[str]:
        """A child's own transcript under the line that spawned it, read from its rollout
        (with its children's, and so on), then how its work ended."""
        if tree.depth >= MAX_NESTING:
            child: Rollout | Unread = Unread("deep", f"nested past {MAX_NESTING} levels")
        else:
            child = child_rollout(spawned, self.rollout, tree.seen)
        if isinstance(child, Unread):
            yield f"{NESTED}({child.reason}: its transcript is not shown)"
        else:
            if child.notes:
                count = len(child.notes)
                yield f"{NESTED}⚠ {count} line{'s' if count != 1 else ''} of its rollout unread"
            tree.depth += 1
            for line in _render(child, tree):
                yield f"{NESTED}{line}" if line else NESTED.rstrip()
            tree.depth -= 1
        yield _ended_line(spawned.path, self.ended.get(spawned.agent_id, []))

    def end(self) -> Iterator[str]:
        if self.open_turn is not None:
            yield f"⚡ turn {self.open_turn} has not ended (the session stopped, or still runs)"
        for op in self.ops.values():
            yield f"{op} (its turn never started)"


def _ended_line(path: str, runs: list[tuple[str | None, p.SubAgentEnded]]) -> str:
    """The foot of a child's transcript: how its work ended, as its parent recorded it."""
    if not runs:
        return f"  └ agent {path}: no end recorded (still at work when the parent stopped)"
    last = runs[-1][1]
    said = f": {_short(last.message, 160)}" if last.message else ""
    runs_said = f" (the last of {len(runs)} runs)" if len(runs) > 1 else ""
    return f"  └ agent {path} {last.status.value}{said}{runs_said}"


def render_transcript(rollout: Rollout, *, agents: bool = True) -> Iterator[str]:
    """The readable transcript of a rollout, line by line (``relay show``).

    Turns with their user and agent messages, tool calls with their outputs, compaction
    checkpoints with their receipts, token counts, warnings and errors; where a session was
    resumed, and turns that a crash cut short. Control characters, which model text, tool
    output and server messages can carry, are shown escaped (:func:`visible`), never sent to
    the terminal.

    With ``agents``, each sub-agent's own transcript, read from its rollout, is shown
    indented under the line that spawned it (its children's under its own, and so on),
    followed by how its work ended; a child's rollout that cannot be read is said. Without,
    only the parent's lines of its children are.
    """
    tree = _Tree() if agents else None
    if tree is not None and rollout.path is not None:
        tree.seen.add(rollout.path.resolve())
    for line in _render(rollout, tree):
        yield visible(line)


def _render(rollout: Rollout, tree: _Tree | None = None) -> Iterator[str]:
    meta = rollout.meta
    first = rollout.lines[1] if len(rollout.lines) > 1 else None
    # A session that announced itself has its header in its session_configured line.
    announced = isinstance(first, EventMsgLine) and isinstance(first.msg, p.SessionConfigured)
    if meta is not None and not announced:
        made = f"created {meta.created}" if meta.created else "creation time unknown"
        model = f"{meta.model or '?'} via {meta.model_provider or '?'}"
        version = f", relay {meta.relay_version}" if meta.relay_version else ""
        yield f"session {meta.id} ({made}; {model}{version})"
        if meta.cwd:
            yield f"cwd {meta.cwd}"
    elif meta is None:
        yield f"session unknown ({rollout.name} has no session_meta line)"
    transcript = _Transcript(rollout, tree, ends(rollout) if tree is not None else {})
    for line in rollout.lines:
        yield from transcript.line(line)
    yield from transcript.end()


__all__ = ["DIFF_LINES", "MAX_NESTING", "NESTED", "OUTPUT_LINES", "render_transcript"]
