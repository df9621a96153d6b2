"""The sub-agents on the timeline page (docs/timeline.md): nested blocks under the turn that
spawned them, and lanes on one time axis.

Under each turn of the turns table that spawned children, a row holds one block per child:
its path, role, status, start and end, its figures, its task and last message, and the blocks
of its own children inside it. The section *Sub-agents* draws the session and each agent as a
lane, a bar from its start to its end on the same axis, indented by depth, so that which ran
while which, and for how long, is seen at a glance. Plain HTML and CSS: nothing needs the
page's script.

Pure functions of the timeline's data.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from .._html import attr, tag, text
from ._timeline_agents import MAX_AGENTS, Agent

#: The colour of a status's bar and tag.
_STATUS_KIND = {
    "completed": "good",
    "errored": "bad",
    "interrupted": "warn",
    "shutdown": "",
    "running": "info",
}
#: A lane's bar is at least this wide (in % of the axis), so that a short run is seen.
MIN_BAR = 0.6

CSS = """\
tr.agents > td { background: #fbfbfd; padding: 6px 8px 8px 28px; }
.agent { border-left: 3px solid var(--rule); margin: 4px 0; padding: 2px 0 2px 10px; }
.agent.completed { border-left-color: #86c99b; }
.agent.errored { border-left-color: #eb9a9a; }
.agent.interrupted, .agent.running { border-left-color: #e9bf80; }
.agent .agent-said { color: var(--muted); font-size: 13px; margin: 1px 0; }
.agent .agent .agent-head { font-size: 13.5px; }
#agent-lanes { margin: 6px 0 10px; }
.lane { display: flex; align-items: center; gap: 8px; min-height: 22px;
  border-bottom: 1px solid #eef0f4; }
.lane-name { flex: 0 0 260px; overflow: hidden; white-space: nowrap; text-overflow: ellipsis;
  padding-left: calc(var(--depth, 0) * 16px); font-size: 13px; }
.track { position: relative; flex: 1 1 auto; height: 12px; background: var(--band);
  border-radius: 3px; }
.bar { position: absolute; top: 0; bottom: 0; border-radius: 3px; background: #93b4f5; }
.bar.completed { background: #5fb27a; }
.bar.errored { background: #e07a7a; }
.bar.interrupted, .bar.running { background: #e3a857; }
.bar.shutdown { background: #9aa3b1; }
.bar.session { background: #93b4f5; }
.lane-status { flex: 0 0 110px; font-size: 12px; }
"""


def _time(value: str | None) -> str:
    return text(value[:19].replace("T", " ")) if value else "–"


def _instant(value: str | None) -> float | None:
    """A rollout's timestamp in seconds, or None when there is none to read."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def element_id(agent: Agent) -> str:
    """The id of an agent's block: ``agent-root-1-2`` for ``/root/1/2``."""
    return "agent-" + "-".join(part for part in agent.path.split("/") if part)


def _figures(agent: Agent) -> str:
    if agent.rollout_state != "read":
        return ""
    parts = [
        f"{agent.turns:,} turn{'s' if agent.turns != 1 else ''}",
        f"{agent.model_calls:,} model call{'s' if agent.model_calls != 1 else ''}",
        f"{agent.tool_calls:,} tool call{'s' if agent.tool_calls != 1 else ''}",
    ]
    if agent.errors:
        parts.append(f"{agent.errors:,} error{'s' if agent.errors != 1 else ''}")
    return " · " + ", ".join(parts)


def _took(agent: Agent) -> str:
    begin, end = _instant(agent.started), _instant(agent.ended)
    if begin is None or end is None:
        return ""
    ms = round((end - begin) * 1000)
    return f" ({ms:,} ms)" if ms < 10_000 else f" ({ms / 1000:,.1f} s)"


_UNREAD = {
    "not_recorded": "it kept no rollout",
    "missing": "its rollout is missing",
    "unreadable": "its rollout cannot be read",
    "repeated": "its rollout is one already read above (a loop)",
}


def _block(agent: Agent, agents: Sequence[Agent]) -> str:
    runs = f" (the last of {agent.runs} runs)" if agent.runs > 1 else ""
    head = (
        f'<div class="agent-head"><code>{text(agent.path)}</code> {text(agent.role)} · '
        f"{tag(agent.status + runs, _STATUS_KIND.get(agent.status, ''))} · "
        f"{_time(agent.started)} → {_time(agent.ended)}{_took(agent)}{_figures(agent)}</div>"
    )
    said = []
    if agent.prompt:
        said.append(f'<p class="agent-said">task: {text(agent.prompt)}</p>')
    if agent.message:
        said.append(f'<p class="agent-said">last message: {text(agent.message)}</p>')
    if agent.rollout_state != "read":
        where = f" (<code>{text(agent.rollout)}</code>)" if agent.rollout else ""
        said.append(f'<p class="agent-said">{_UNREAD.get(agent.rollout_state, "")}{where}</p>')
    inner = "".join(_block(child, agents) for child in agents if child.parent_id == agent.id)
    return (
        f"<div class={attr('agent ' + agent.status)} id={attr(element_id(agent))} "
        f"data-path={attr(agent.path)} data-status={attr(agent.status)}>"
        f"{head}{''.join(said)}{inner}</div>"
    )


def spawned_row(agents: Sequence[Agent], parent_id: str | None, turn_id: str, columns: int) -> str:
    """The row under a turn of the session ``parent_id``: the blocks of the children it
    spawned (their children inside), or nothing when it spawned none."""
    children = [a for a in agents if a.parent_id == parent_id and a.turn_id == turn_id]
    if not children:
        return ""
    blocks = "".join(_block(child, agents) for child in children)
    return f'<tr class=agents data-turn={attr(turn_id)}><td colspan="{columns}">{blocks}</td></tr>'


def agents_section(
    agents: Sequence[Agent], total: int, session: str, times: Sequence[str | None]
) -> str:
    """The section *Sub-agents*: a lane for the session (over ``times``, its own) and one
    for each agent; nothing when there is no agent."""
    if not total:
        return ""
    own = [t for t in map(_instant, times) if t is not None]
    instants = own + [t for a in agents for t in (_instant(a.started), _instant(a.ended)) if t]
    start = min(instants, default=0.0)
    span = max(max(instants, default=0.0) - start, 1e-3)

    def bar(begin: float | None, finish: float | None, status: str, title: str) -> str:
        if begin is None:
            return '<span class="muted">times unknown</span>'
        finish = begin if finish is None else finish
        width = max((finish - begin) / span * 100, MIN_BAR)
        left = min((begin - start) / span * 100, 100 - width)
        style = f"left:{left:.2f}%;width:{width:.2f}%"
        return (
            f"<span class={attr('bar ' + status)} style={attr(style)} title={attr(title)}></span>"
        )

    root = bar(min(own), max(own), "session", session) if own else bar(None, None, "", "")
    lanes = [
        '<div class="lane" data-path="/root"><span class="lane-name"><code>/root</code> '
        f'the session</span><span class="track">{root}</span>'
        '<span class="lane-status"></span></div>'
    ]
    for agent in agents:
        title = f"{agent.path} ({agent.role}): {agent.status}, {agent.started} → {agent.ended}"
        status = tag(agent.status, _STATUS_KIND.get(agent.status, ""))
        drawn = bar(_instant(agent.started), _instant(agent.ended), agent.status, title)
        lanes.append(
            f"<div class=lane data-path={attr(agent.path)} style={attr(f'--depth:{agent.depth}')}>"
            f'<span class="lane-name"><a href="#{element_id(agent)}"><code>{text(agent.path)}'
            f'</code></a> {text(agent.role)}</span><span class="track">{drawn}</span>'
            f'<span class="lane-status">{status}</span></div>'
        )
    note = ""
    if total > len(agents):
        note = (
            f'<p class="note">The first {len(agents):,} of {total:,} sub-agents are listed '
            f"(at most {MAX_AGENTS:,}).</p>\n"
        )
    return (
        f"<h2>Sub-agents ({total:,})</h2>\n{note}"
        '<p class="note">Each bar runs from the start of a session to the end of its work, '
        "on one time axis; the blocks under the turns say more.</p>\n"
        f'<div id="agent-lanes">{"".join(lanes)}</div>'
    )


__all__ = ["CSS", "MIN_BAR", "agents_section", "element_id", "spawned_row"]
