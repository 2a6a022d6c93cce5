"""The C sparse-grams tokenizer (sparse_grams index) against a plain model of the definition
(sparse_grams_model.py), on any bytes; this module runs under tools/sanitize.sh, where chdb
cannot load (tests/clickhouse/test_sparse_grams.py compares the kernel with chdb)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sparse_grams_model import sparse_gram_spans, weak_hash

from bloomskip import _native, bits

_LENGTHS = st.tuples(st.integers(3, 12), st.integers(0, 40), st.integers(0, 20)).map(
    lambda t: (t[0], t[0] + t[1], None if t[2] == 0 else t[0] + min(t[2] - 1, t[1]))
)
_PIECES = [b"a", b"b", b"/", b"%", "é".encode(), "中".encode(), "😊".encode(), b"\x80", b"\xf0"]


def _kernel(data: bytes, lengths) -> list[tuple[int, int]]:
    spans = _native.tokenize(
        data, _native.TOKENIZER_SPARSE_GRAMS, bits.sparse_grams_parameter(*lengths)
    )
    assert len(spans) == len(set(spans)), "a gram emitted twice"
    return sorted(spans)


@settings(max_examples=300, deadline=None)
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.lists(st.sampled_from(_PIECES), max_size=150).map(b"".join),
        st.binary(min_size=1, max_size=3).map(lambda b: b * 40),
    ),
    lengths=_LENGTHS,
)
def test_kernel_equals_the_model(data: bytes, lengths) -> None:
    assert _kernel(data, lengths) == sparse_gram_spans(data, *lengths)


def test_long_strings_and_the_widest_grams() -> None:
    rng = random.Random(3)
    for data in [rng.randbytes(2000), bytes(range(256)) * 6, b"ab" * 700]:
        for lengths in [(3, 100, None), (100, 100, None), (3, 100, 100), (50, 100, 60)]:
            assert _kernel(data, lengths) == sparse_gram_spans(data, *lengths)


@pytest.mark.parametrize(
    ("data", "expected"),
    [  # chdb 26.9: sparseGramsHashes(s, length(s), length(s)) is the hash of s itself
        (b"abc", 1707768723),
        (b"abcd", 2109505073),
        (b"abcdefg", 3110681723),
        (b"abcdefgh", 2260505405),
        (b"abcdefghi", 1473390983),
        (b"abcdefghijklmnopq", 3198332742),
    ],
)
def test_weak_hash_pinned_by_chdb(data: bytes, expected: int) -> None:
    assert weak_hash(data) == expected


def test_granules_hold_every_gram() -> None:
    """text_granules with the sparse-grams tokenizer: each granule's filter is the union of
    the pair positions of its strings' grams (no gram left out, none from another granule)."""
    strings = [b"https://x.org/item/42/view", b"", "Ünïcödé/é/é".encode(), b"ab", b"\xc3abc/x"]
    parameter = bits.sparse_grams_parameter(3, 10)
    filters = bits.text_granules(strings, [0, 2, 5], "sparse_grams", parameter, 64, 3, 7)
    for granule, (lo, hi) in enumerate([(0, 2), (2, 5)]):
        expected = np.zeros(64 * 8, bool)
        for data in strings[lo:hi]:
            for start, end in sparse_gram_spans(data, 3, 10):
                expected[bits.pair_positions([data[start:end]], 7, 64 * 8, 3)] = True
        assert np.array_equal(np.unpackbits(filters[granule], bitorder="little") == 1, expected)


def test_table_path_equals_the_instruction_path(monkeypatch) -> None:
    """BLOOMSKIP_NO_SIMD=1 hashes the windows with the nibble table instead of the crc32
    instruction: the same grams, and the same granule filters."""
    rng = random.Random(9)
    strings = [rng.randbytes(rng.randrange(0, 200)) for _ in range(300)]
    strings += [b"".join(rng.choice(_PIECES) for _ in range(60)) for _ in range(100)]
    parameter = bits.sparse_grams_parameter(3, 40, None)
    bounds = list(range(0, len(strings) + 1, 50))
    fast = [_kernel(s, (3, 40, None)) for s in strings]
    fast_filters = bits.text_granules(strings, bounds, "sparse_grams", parameter, 128, 2, 3)
    monkeypatch.setenv("BLOOMSKIP_NO_SIMD", "1")
    assert [_kernel(s, (3, 40, None)) for s in strings] == fast
    table_filters = bits.text_granules(strings, bounds, "sparse_grams", parameter, 128, 2, 3)
    assert np.array_equal(table_filters, fast_filters)
    assert [sparse_gram_spans(s, 3, 40) for s in strings[:50]] == fast[:50]
