"""Approximate token estimates and head/tail truncation (docs/compaction.md, docs/session.md)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay._base import _protocol as p
from relay._base._tokens import (
    IMAGE_BYTES,
    ApproxEstimator,
    approx_tokens,
    item_bytes,
    item_tokens,
    items_tokens,
    tokens_for_bytes,
    truncate_text,
    truncation_marker,
)

# ------------------------------------------------------------------ approximate tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("a", 1),
        ("abcd", 1),
        ("abcde", 2),
        ("abcdefgh", 2),
        ("é", 1),  # 2 bytes
        ("éé", 1),  # 4 bytes
        ("ééé", 2),  # 6 bytes
        ("€", 1),  # 3 bytes
        ("€€", 2),  # 6 bytes
        ("😀", 1),  # 4 bytes
        ("😀a", 2),  # 5 bytes
    ],
)
def test_approx_tokens_counts_utf8_bytes(text: str, tokens: int) -> None:
    assert approx_tokens(text) == tokens
    assert ApproxEstimator().count(text) == tokens


@given(st.text())
def test_approx_tokens_is_ceil_of_a_quarter_of_the_bytes(text: str) -> None:
    size = len(text.encode("utf-8"))
    tokens = approx_tokens(text)
    assert tokens == math.ceil(size / 4)
    assert 4 * (tokens - 1) < size <= 4 * tokens or size == tokens == 0


def test_tokens_for_bytes() -> None:
    assert [tokens_for_bytes(n) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]
    assert tokens_for_bytes(-10) == 0
    assert ApproxEstimator.name == "approx"


# ------------------------------------------------------------------ item estimates


def test_an_item_counts_the_bytes_of_its_compact_json() -> None:
    output = p.FunctionCallOutput("c", "ok")
    wire = '{"type":"function_call_output","call_id":"c","output":"ok"}'
    assert item_bytes(output) == len(wire)
    assert item_tokens(output) == math.ceil(len(wire) / 4)


def test_non_ascii_text_counts_as_utf8_not_as_escapes() -> None:
    ascii_output = p.FunctionCallOutput("c", "ab")
    euro_output = p.FunctionCallOutput("c", "€")  # 3 bytes, not a 6-character \u escape
    assert item_bytes(euro_output) == item_bytes(ascii_output) + 1


def test_an_image_counts_340_bytes_whatever_its_url() -> None:
    short = p.Message("user", (p.InputText("hi"), p.InputImage("u")))
    data_url = "data:image/png;base64," + "A" * 500_000
    huge = p.Message("user", (p.InputText("hi"), p.InputImage(data_url)))
    text_only = p.Message("user", (p.InputText("hi"),))
    assert IMAGE_BYTES == 340
    assert item_bytes(short) == item_bytes(huge) == item_bytes(text_only) + 340


def test_each_image_counts() -> None:
    two = p.Message("user", (p.InputImage("a"), p.InputImage("b" * 1000), p.InputText("x")))
    one = p.Message("user", (p.InputText("x"),))
    assert item_bytes(two) == item_bytes(one) + 2 * 340
    image_only = p.Message("user", (p.InputImage("a" * 10_000),))
    empty = '{"type":"message","role":"user","content":[]}'
    assert item_bytes(image_only) == len(empty) + 340


@pytest.mark.parametrize(
    ("length", "expected_bytes"),
    [(0, 0), (100, 0), (864, 0), (868, 1), (1000, 100), (2000, 850), (40_000, 29_350)],
)
def test_compaction_counts_three_quarters_of_its_content_minus_650(
    length: int, expected_bytes: int
) -> None:
    item = p.Compaction("x" * length, id="cmp-1")
    assert item_bytes(item) == expected_bytes == max(0, length * 3 // 4 - 650)
    assert item_tokens(item) == math.ceil(expected_bytes / 4)


@pytest.mark.parametrize(("length", "expected_bytes"), [(0, 0), (800, 0), (1000, 100), (2000, 850)])
def test_reasoning_with_encrypted_content_counts_like_compaction(
    length: int, expected_bytes: int
) -> None:
    summary = (p.SummaryText("a long summary " * 100),)
    item = p.Reasoning("rs-1", summary, encrypted_content="e" * length)
    assert item_bytes(item) == expected_bytes


def test_reasoning_without_encrypted_content_counts_its_json() -> None:
    item = p.Reasoning("r", (p.SummaryText("s"),))
    wire = '{"type":"reasoning","id":"r","summary":[{"type":"summary_text","text":"s"}]}'
    assert item_bytes(item) == len(wire)


def test_ghost_snapshot_counts_nothing() -> None:
    assert item_bytes(p.GhostSnapshot("a" * 10_000)) == 0
    assert item_tokens(p.GhostSnapshot("ref")) == 0


def test_metadata_is_not_counted() -> None:
    plain = p.user_message("hello")
    tagged = p.user_message("hello", metadata={"origin": "x" * 5_000})
    assert item_bytes(tagged) == item_bytes(plain)
    with_image = p.Message("user", (p.InputImage("u"),), metadata={"k": "v" * 100})
    assert item_bytes(with_image) == item_bytes(p.Message("user", (p.InputImage("u"),)))


def test_items_tokens_sums_item_estimates() -> None:
    items = [
        p.user_message("hello"),
        p.Compaction("x" * 2000),
        p.GhostSnapshot("g"),
        p.FunctionCall("ls", "{}", "c1"),
    ]
    assert items_tokens(items) == sum(item_tokens(i) for i in items)
    assert items_tokens([]) == 0


# ------------------------------------------------------------------ truncation

TEXT_100 = "".join(chr(ord("a") + i % 26) for i in range(100))


def test_a_text_that_fits_is_unchanged() -> None:
    assert truncate_text(TEXT_100, 25) is TEXT_100  # exactly 4T bytes
    assert truncate_text(TEXT_100, 1_000) == TEXT_100
    assert truncate_text("", 1) == ""


def test_head_and_tail_halves_with_the_marker() -> None:
    # 100 bytes into 10 tokens: 20 bytes of head, 20 of tail, 60 removed = 15 tokens.
    result = truncate_text(TEXT_100, 10)
    assert result == TEXT_100[:20] + "…15 tokens truncated…" + TEXT_100[-20:]


def test_one_byte_over_the_budget_is_truncated() -> None:
    text = "x" * 40 + "y" + "z" * 40  # 81 bytes, budget 80
    assert truncate_text(text, 20) == "x" * 40 + "…1 tokens truncated…" + "z" * 40


def test_marker_rounds_removed_bytes_up() -> None:
    text = "a" * 8 + "b" * 5 + "c" * 8  # 21 bytes, T = 4: keep 8 + 8, remove 5 -> 2 tokens
    assert truncate_text(text, 4) == "a" * 8 + "…2 tokens truncated…" + "c" * 8


@pytest.mark.parametrize("tokens", [0, -1, -100])
def test_no_budget_leaves_only_the_marker(tokens: int) -> None:
    assert truncate_text(TEXT_100, tokens) == "…25 tokens truncated…"
    assert truncate_text("abcde", tokens) == "…2 tokens truncated…"


def test_marker_format() -> None:
    assert truncation_marker(7) == "…7 tokens truncated…"


def test_multibyte_characters_are_never_split() -> None:
    # 40 × 3 bytes; head budget 10 bytes -> 3 whole characters (9 bytes), tail likewise;
    # 102 bytes removed -> 26 tokens.
    text = "€" * 40
    assert truncate_text(text, 5) == "€€€…26 tokens truncated…€€€"


def test_multibyte_characters_at_the_cut_points() -> None:
    # 30 bytes, T = 2: the head cut (byte 4) falls inside the first "é" (bytes 3-4) and the
    # tail cut (byte 26) inside the last one (bytes 25-26); both "é" go, 24 bytes = 6 tokens.
    text = "abcé" + "-" * 20 + "éxyz"
    assert len(text.encode()) == 30
    result = truncate_text(text, 2)
    assert result == "abc…6 tokens truncated…xyz"


def test_emoji_wider_than_the_budget_are_dropped_whole() -> None:
    assert truncate_text("😀😀😀", 0) == "…3 tokens truncated…"
    # Budget 4 bytes: 2 for the head, 2 for the tail; no 4-byte emoji fits either.
    assert truncate_text("😀😀😀", 1) == "…3 tokens truncated…"


def _oracle(text: str, tokens: int) -> str:
    """The head-and-tail cut of docs/compaction.md, computed character by character."""
    data = text.encode("utf-8")
    budget = 4 * max(0, tokens)
    if tokens > 0 and len(data) <= budget:
        return text
    head_budget = budget // 2
    tail_budget = budget - head_budget
    head = ""
    for char in text:
        if len((head + char).encode()) > head_budget:
            break
        head += char
    tail = ""
    for char in reversed(text):
        if len((char + tail).encode()) > tail_budget:
            break
        tail = char + tail
    removed = len(data) - len(head.encode()) - len(tail.encode())
    return f"{head}…{math.ceil(removed / 4)} tokens truncated…{tail}"


@given(st.text(), st.integers(min_value=-2, max_value=16))
def test_truncation_matches_the_specification(text: str, tokens: int) -> None:
    assert truncate_text(text, tokens) == _oracle(text, tokens)


_no_ellipsis = st.text(st.characters(exclude_characters="…", exclude_categories=("Cs",)))


@given(_no_ellipsis, st.integers(min_value=0, max_value=16))
def test_truncation_keeps_a_prefix_and_a_suffix_within_budget(text: str, tokens: int) -> None:
    result = truncate_text(text, tokens)
    result.encode("utf-8")  # valid text: no character was split
    data = text.encode("utf-8")
    if tokens > 0 and len(data) <= 4 * tokens:
        assert result == text
        return
    head, count, tail = result.split("…")
    assert text.startswith(head)
    assert text.endswith(tail)
    head_bytes, tail_bytes = len(head.encode()), len(tail.encode())
    assert head_bytes <= 2 * tokens
    assert tail_bytes <= 2 * tokens
    assert head_bytes + tail_bytes <= 4 * tokens
    # As much as fits is kept: one more character would exceed the half budget.
    if len(head) < len(text):
        assert len(text[: len(head) + 1].encode()) > 2 * tokens
    if len(tail) < len(text):
        assert len(text[len(text) - len(tail) - 1 :].encode()) > 2 * tokens
    removed = len(data) - head_bytes - tail_bytes
    assert count == f"{math.ceil(removed / 4)} tokens truncated"
