"""The rollout's line payloads: the bytes the recorder writes for each line type, which must
not change (rollouts are compared with Codex's, and old ones must still read)."""

from __future__ import annotations

import re
from pathlib import Path

from relay._base import _protocol as p
from relay._core._context import TurnSettings, WorldState
from relay._core._recorder import RolloutRecorder
from relay._core._work_state import WorkEntry, WorkState
from relay._core._writer import RolloutWriter
from relay._version import __version__
from relay.testing import FIXED_NOW

WORLD = WorldState("/w", "bash", "2026-01-02", "UTC")
RECEIPT = p.CompactionReceipt(p.CompactionTrigger.MID_TURN, "local", 900, 120, 15)
BACKGROUND = p.CompactionReceipt(
    p.CompactionTrigger.PRE_TURN,
    "remote_v2",
    900,
    120,
    15,
    background=True,
    snapshot_age_ms=40,
    cut=True,
    counted_before=True,
    model="gpt-small",
)
HISTORY = (p.user_message("héllo ✓"), p.assistant_message("ok"))


def record_every_line(root: Path) -> list[str]:
    """One line of each type the recorder writes (two ``compacted``, with and without their
    optional parts), each without its timestamp."""
    writer = RolloutWriter.create(root, "s-1", FIXED_NOW)
    recorder = RolloutRecorder(writer)
    recorder.session_meta("s-1", FIXED_NOW, "/w", "gpt-x", "openai")
    recorder.trace("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
    recorder.op("sub-4", p.CustomOp("review", {"path": "a.py", "depth": 2}, p.OnBusy.QUEUE))
    recorder.world_state(WORLD)
    recorder.turn_context(TurnSettings("gpt-x", "/w", "high"), "Be brief.", WORLD)
    recorder.turn_context(TurnSettings("gpt-x", "/w"), "Be brief.", WORLD)
    recorder.compacted(
        HISTORY,
        message="the summary",
        receipt=BACKGROUND,
        window_number=2,
        first_window_id="w0",
        previous_window_id="w1",
        window_id="w2",
        work_state=WorkState([WorkEntry("file", "a.py", key="a"), WorkEntry("error", "x")], ["p"]),
        masked_outputs={"c1": "the original"},
    )
    recorder.compacted(
        (),
        message="",
        receipt=RECEIPT,
        window_number=1,
        first_window_id="w0",
        previous_window_id=None,
        window_id="w0",
        masked_outputs={},
    )
    recorder.ids(3, 7)
    recorder.close()
    text = writer.path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [re.sub(r'^\{"timestamp":"[^"]*",', "{", line) for line in text.splitlines()]


#: What a relay of before the payload classes wrote for :func:`record_every_line`, byte for
#: byte.
EXPECTED = [
    '{"type":"session_meta","payload":{"id":"s-1","created":"2026-01-02T03:04:05+00:00",'
    '"cwd":"/w","model":"gpt-x","model_provider":"openai","relay_version":"' + __version__ + '"}}',
    '{"type":"trace","payload":{"trace_id":"0af7651916cd43dd8448eb211c80319c",'
    '"span_id":"b7ad6b7169203331"}}',
    '{"type":"op","payload":{"id":"sub-4","op":{"type":"review","path":"a.py","depth":2,'
    '"on_busy":"queue"}}}',
    '{"type":"world_state","payload":{"cwd":"/w","shell":"bash","current_date":"2026-01-02",'
    '"timezone":"UTC"}}',
    '{"type":"turn_context","payload":{"model":"gpt-x","cwd":"/w","effort":"high",'
    '"instructions_hash":"213c22ed7234eb11","world":{"cwd":"/w","shell":"bash",'
    '"current_date":"2026-01-02","timezone":"UTC"}}}',
    '{"type":"turn_context","payload":{"model":"gpt-x","cwd":"/w","effort":null,'
    '"instructions_hash":"213c22ed7234eb11","world":{"cwd":"/w","shell":"bash",'
    '"current_date":"2026-01-02","timezone":"UTC"}}}',
    '{"type":"compacted","payload":{"message":"the summary","replacement_history":['
    '{"type":"message","role":"user","content":[{"type":"input_text","text":"héllo ✓"}]},'
    '{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}],'
    '"window_number":2,"first_window_id":"w0","previous_window_id":"w1","window_id":"w2",'
    '"receipt":{"trigger":"pre_turn","backend":"remote_v2","tokens_before":900,'
    '"tokens_after":120,"duration_ms":15,"cut":true,"counted_before":true,"background":true,'
    '"snapshot_age_ms":40,"model":"gpt-small"},"work_state":{"entries":['
    '{"kind":"file","text":"a.py","key":"a"},{"kind":"error","text":"x"}],"pinned":["p"]},'
    '"masked_outputs":{"c1":"the original"}}}',
    '{"type":"compacted","payload":{"message":"","replacement_history":[],"window_number":1,'
    '"first_window_id":"w0","previous_window_id":null,"window_id":"w0","receipt":{'
    '"trigger":"mid_turn","backend":"local","tokens_before":900,"tokens_after":120,'
    '"duration_ms":15,"cut":false,"counted_before":false}}}',
    '{"type":"ids","payload":{"submission":3,"item":7}}',
]


def test_each_line_type_is_written_as_before_byte_for_byte(tmp_path: Path) -> None:
    assert record_every_line(tmp_path) == EXPECTED
