"""The rollout's line payloads (docs/rollout.md): the bytes the recorder writes for each line
type, which must not change (rollouts are compared with Codex's, and old ones must still
read); the shape the doc gives each payload; every payload class through the codec and back."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from relay._base import _protocol as p
from relay._base._codec import from_json, to_json
from relay._base._environment_config import ShellEnvironmentPolicy
from relay._base._exec_rules import MODE_ORDER, POLICY_ORDER, ExecRules
from relay._base._rollout_lines import (
    LINE_TYPES,
    PAYLOADS,
    ApprovalDecided,
    Compacted,
    GeneratedIds,
    SessionMeta,
    SessionSpan,
    StartedOp,
    ToolIntent,
    TurnContext,
)
from relay._core._context import TurnSettings, WorldState
from relay._core._recorder import RolloutRecorder
from relay._core._work_state import WorkEntry, WorkState
from relay._core._writer import RolloutWriter, payload_json
from relay._rollout._lines import RolloutLine
from relay._rollout._reader import parse_rollout
from relay._version import __version__
from relay.testing import FIXED_NOW
from tests.hypothesis_profiles import examples

ROOT = Path(__file__).resolve().parent.parent.parent

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
    recorder.line(
        ApprovalDecided("call-1", p.ReviewDecision.APPROVED_FOR_SESSION, ("make", "test"))
    )
    recorder.line(ExecRules("untrusted", "workspace-write", ("/w/out",)))
    recorder.line(
        ApprovalDecided(
            "call-2",
            p.ReviewDecision.APPROVED_FOR_SESSION,
            tool="mine",
            approval_policy="untrusted",
            sandbox_mode="read-only",
            unconfined=True,
            seal="ab12",
        )
    )
    recorder.intent("call-1")
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
    '{"type":"approval","payload":{"call_id":"call-1","decision":"approved_for_session",'
    '"command":["make","test"],"tool":null}}',
    '{"type":"rules","payload":{"approval_policy":"untrusted","sandbox_mode":"workspace-write",'
    '"writable_roots":["/w/out"],"network_access":false,"exclude_tmpdir_env_var":false,'
    '"exclude_slash_tmp":false,"environment":{"inherit":"all","ignore_default_excludes":false,'
    '"exclude":[],"set":{},"include_only":[]}}}',
    '{"type":"approval","payload":{"call_id":"call-2","decision":"approved_for_session",'
    '"command":null,"tool":"mine","approval_policy":"untrusted","sandbox_mode":"read-only",'
    '"unconfined":true,"seal":"ab12"}}',
    '{"type":"intent","payload":{"call_id":"call-1"}}',
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


# ----------------------------------------------------------------- the shape docs/rollout.md gives


def documented_payloads() -> dict[str, list[str]]:
    """The fields the table of docs/rollout.md lists for each line type (the names in
    backquotes outside parentheses), and under ``receipt`` those every compaction's receipt
    carries."""
    text = (ROOT / "docs" / "rollout.md").read_text(encoding="utf-8")
    table = text.split("## Lines", 1)[1].split("\n\n")[2]
    out: dict[str, list[str]] = {}
    for row in table.splitlines()[2:]:
        kind, payload = row.split(" | ")[:2]
        out[kind.strip("| `")] = _names(re.sub(r"\([^)]*\)", "", payload))
    receipt = re.search(r"`receipt` \(([^)]*)\)", table)
    assert receipt is not None
    # Every receipt's fields come first; what only some receipts carry follows a semicolon.
    out["receipt"] = _names(receipt[1].split(";")[0])
    return out


def _names(text: str) -> list[str]:
    return re.findall(r"`([a-z_]+)`", text)


def test_the_doc_lists_every_line_type_and_its_payload_fields_in_order() -> None:
    documented = documented_payloads()
    assert [kind for kind in documented if kind != "receipt"] == list(PAYLOADS)
    for cls, kind in LINE_TYPES.items():
        assert [field.name for field in attrs.fields(cls)] == documented[kind], kind


def test_each_line_the_recorder_writes_has_the_documented_shape(tmp_path: Path) -> None:
    documented = documented_payloads()
    lines = [json.loads(line) for line in record_every_line(tmp_path)]
    assert {line["type"] for line in lines} == set(LINE_TYPES.values())
    full_compaction = next(line["payload"] for line in lines if line["type"] == "compacted")
    assert list(full_compaction) == documented["compacted"]
    for line in lines:
        # A decision with no grant leaves out what a grant records, ids with no calibration
        # the ratio, a root's first line what names a sub-agent's parent.
        plain = (
            (line["type"] == "approval" and "seal" not in line["payload"])
            or (line["type"] == "ids" and "token_ratio" not in line["payload"])
            or (line["type"] == "session_meta" and "parent_id" not in line["payload"])
        )
        if line["type"] != "compacted" and not plain:
            assert list(line["payload"]) == documented[line["type"]], line["type"]
    # A foreground compaction's receipt, without a model of its own, as the table lists it.
    (foreground,) = [
        line["payload"]["receipt"]
        for line in lines
        if line["type"] == "compacted" and not line["payload"]["receipt"].get("background")
    ]
    assert list(foreground) == documented["receipt"]


# ----------------------------------------------------------------- through the codec and back

_text = st.text(max_size=8)
_json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
_worlds = st.builds(WorldState, _text, _text, _text, _text)
_items = st.one_of(
    st.builds(p.user_message, _text),
    st.builds(p.assistant_message, _text),
    st.builds(p.FunctionCall, _text, _text, _text, st.none() | _text),
    st.builds(p.FunctionCallOutput, _text, _text),
)
_receipts = st.builds(
    p.CompactionReceipt,
    st.sampled_from(p.CompactionTrigger),
    _text,
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    background=st.booleans(),
    snapshot_age_ms=st.none() | st.integers(0, 10**6),
    cut=st.booleans(),
    counted_before=st.booleans(),
    model=st.none() | _text,
)


def _hex(digits: int) -> st.SearchStrategy[str]:
    return st.integers(1, 16**digits - 1).map(lambda n: f"{n:0{digits}x}")


_op_types = _text.filter(lambda name: name and name not in p.BUILTIN_OP_TYPES)
_op_fields = st.dictionaries(_text.filter(lambda k: k not in ("type", "on_busy")), _json_value)

#: A strategy for each payload class.
PAYLOAD_VALUES: dict[type, st.SearchStrategy[Any]] = {
    SessionMeta: st.builds(SessionMeta, _text, *[st.none() | _text for _ in range(5)]),
    TurnContext: st.builds(
        TurnContext, _text, _text, st.none() | _text, st.none() | _text, st.none() | _worlds
    ),
    WorldState: _worlds,
    GeneratedIds: st.builds(GeneratedIds, st.integers(0, 10**9), st.integers(0, 10**9)),
    StartedOp: st.builds(
        StartedOp, _text, st.builds(p.CustomOp, _op_types, _op_fields, st.sampled_from(p.OnBusy))
    ),
    SessionSpan: st.builds(SessionSpan, _hex(32), _hex(16)),
    ApprovalDecided: st.builds(
        ApprovalDecided,
        _text,
        st.sampled_from(p.ReviewDecision),
        st.none() | st.lists(_text, min_size=1, max_size=3).map(tuple),
        st.none() | _text,
        st.none() | st.sampled_from(POLICY_ORDER),
        st.none() | st.sampled_from(MODE_ORDER),
        st.booleans(),
        st.none() | _hex(64),
    ),
    ExecRules: st.builds(
        ExecRules,
        st.sampled_from(POLICY_ORDER),
        st.sampled_from(MODE_ORDER),
        st.lists(_text, max_size=2).map(tuple),
        st.booleans(),
        st.booleans(),
        st.booleans(),
        st.builds(
            ShellEnvironmentPolicy,
            st.sampled_from(["all", "core", "none"]),
            st.booleans(),
            st.lists(_text, max_size=2).map(tuple),
            st.dictionaries(_text, _text, max_size=2),
            st.lists(_text, max_size=2).map(tuple),
        ),
    ),
    ToolIntent: st.builds(ToolIntent, _text),
    Compacted: st.builds(
        Compacted,
        _text,
        st.none() | st.lists(_items, max_size=3).map(tuple),
        st.none() | st.integers(0, 1000),
        st.none() | _text,
        st.none() | _text,
        st.none() | _text,
        st.none() | _receipts,
        st.none() | st.dictionaries(_text, _json_value, max_size=3),
        st.dictionaries(_text, _text, max_size=3),
    ),
}


def test_every_payload_class_has_a_strategy() -> None:
    assert set(PAYLOAD_VALUES) == set(LINE_TYPES)


def _payload_of(line: RolloutLine) -> object:
    # Every line class holds its number, its timestamp, then its payload.
    return getattr(line, attrs.fields(type(line))[2].name)


@settings(max_examples=examples(200), deadline=None)
@given(st.one_of(*PAYLOAD_VALUES.values()))
def test_every_payload_goes_through_the_codec_and_a_file_and_back(payload: Any) -> None:
    kind = LINE_TYPES[type(payload)]
    text = payload_json(to_json(payload))
    assert from_json(json.loads(text), type(payload)) == payload
    line = f'{{"timestamp":"t","type":"{kind}","payload":{text}}}\n'
    meta = '{"timestamp":"t","type":"session_meta","payload":{"id":"s-1"}}\n'
    rollout = parse_rollout(line if kind == "session_meta" else meta + line)
    assert rollout.notes == ()
    assert _payload_of(rollout.lines[-1]) == payload
