"""A pre-compact hook: reads what relay tells it on stdin and decides.

relay runs it with a JSON object on standard input (session_id, turn_id, cwd, rollout_path,
model, trigger, event). It asks to stop automatic compactions while a file named
``.relay-hold-compaction`` exists in the session's working directory, and lets every other
compaction go on.

Stopping an automatic compaction ends the turn that needed it, with ``turn_aborted`` and the
reason ``hook_stopped``. Before the turn (``pre_turn``, ``model_downshift``), the user's input
is still recorded (a ``user_message`` event and a line in the rollout) but never sent: the next
turn's compaction, once the hold is lifted, summarizes it with the rest. Between two requests of
a turn (``mid_turn``), what the turn did so far is kept. Stopping a manual ``compact`` ends that
compaction task the same way and changes nothing. Configure it with::

    [[hooks.pre_compact]]
    command = ["python3", "hook_pre_compact.py"]
    timeout_ms = 5000
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def decide(info: dict[str, object]) -> dict[str, str]:
    """The answer for one compaction."""
    hold = Path(str(info.get("cwd", "."))) / ".relay-hold-compaction"
    if info.get("trigger") == "auto" and hold.exists():
        return {"decision": "stop", "reason": f"{hold} exists; compaction is on hold"}
    return {"decision": "continue"}


def main() -> int:
    info = json.load(sys.stdin)
    answer = decide(info)
    print(
        f"hook_pre_compact: {info.get('trigger')} compaction in turn {info.get('turn_id')}: "
        f"{answer['decision']}",
        file=sys.stderr,
    )
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
