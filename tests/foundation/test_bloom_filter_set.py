"""The bloom_filter granule builder's set of distinct hashes, against numpy and seeded_add.

The builder keeps a granule's distinct value hashes in one open-addressing array where 0 marks
an empty slot, keeps the hash 0 aside as a flag, and empties the array after each granule
either slot by slot (few distinct values) or all at once; it hashes the positions eight at a
time with AVX-512 where the CPU has it, else one by one (``BLOOMSKIP_NO_SIMD=1`` forces that).
Here granules that reach each path follow one another in one call, and each granule's count
must be ``np.unique``'s and its filters exactly the bits ``seeded_add`` sets for those distinct
hashes, on both loops (the chdb comparison of the same paths is
tests/clickhouse/test_bloom_filter_distinct_set.py; this one also runs under the sanitizers,
where chdb cannot load).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bloomskip import bits


def _varuint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _check(columns: list[np.ndarray], bounds: np.ndarray, bits_per_row: int, k: int) -> None:
    payload, offsets, counts = bits.bloom_filter_granules(
        [(column, bounds) for column in columns], bits_per_row, k
    )
    for threads in (2, 5):
        again = bits.bloom_filter_granules(
            [(column, bounds) for column in columns], bits_per_row, k, threads=threads
        )
        assert again[0] == payload, threads
    with pytest.MonkeyPatch.context() as patch:
        # The portable loops, also where the CPU has AVX-512 (which the builder uses then).
        patch.setenv("BLOOMSKIP_NO_SIMD", "1")
        portable = bits.bloom_filter_granules(
            [(column, bounds) for column in columns], bits_per_row, k
        )
        assert portable[0] == payload
    for g in range(len(bounds) - 1):
        distinct = [np.unique(column[bounds[g] : bounds[g + 1]]) for column in columns]
        count = max(len(values) for values in distinct)
        assert counts[g] == count, g
        stored, at = _varuint(payload, int(offsets[g]))
        assert stored == count
        size = (bits_per_row * count + 7) // 8
        for values in distinct:
            expected = bytearray(size)
            if size:
                bits.seeded_add(expected, values, 8 * size, k)
            assert payload[at : at + size] == bytes(expected), g
            at += size
        assert at == offsets[g + 1]


def test_every_path_of_the_set_in_one_call() -> None:
    rng = np.random.default_rng(11)
    spread = rng.integers(1, 2**64 - 1, 6000, dtype=np.uint64, endpoint=True)
    granules = [
        np.zeros(1000, np.uint64),  # only the hash 0
        np.arange(1000, dtype=np.uint64) % 10,  # ten values, 0 among them: cleared one by one
        spread[:3000],  # all distinct: cleared all at once
        np.arange(1000, dtype=np.uint64) % 10,  # the same ten again: none may be left over
        spread[:50].repeat(40),  # few values of a large granule after a small one
        np.array([0, 2**64 - 1, 0, 2**64 - 1], np.uint64),  # the extremes
        spread[3000:],
        np.array([], np.uint64),  # an empty granule
        spread[:3000][::-1].copy(),  # the values of granule 2 again, in another order
    ]
    column = np.concatenate(granules)
    bounds = np.concatenate(([0], np.cumsum([len(g) for g in granules]))).astype(np.int64)
    second = np.where(np.arange(len(column)) % 3 == 0, 0, column // np.uint64(7))
    _check([column], bounds, 8, 4)
    _check([column, second], bounds, 10, 7)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=8),
    pools=st.lists(st.sampled_from([1, 2, 9, 300, 2**64 - 1]), min_size=1, max_size=8),
    zeros=st.floats(0, 1),
    seed=st.integers(0, 2**32 - 1),
    bits_per_row=st.sampled_from([1, 3, 8, 11]),
    k=st.integers(1, 15),
)
def test_random_granules(sizes, pools, zeros, seed, bits_per_row, k) -> None:
    rng = np.random.default_rng(seed)
    parts = []
    for number, size in enumerate(sizes):
        pool = pools[number % len(pools)]
        part = rng.integers(0, pool, size, dtype=np.uint64, endpoint=True)
        part[rng.random(size) < zeros] = 0
        parts.append(part)
    column = np.concatenate(parts)
    bounds = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    _check([column], bounds, bits_per_row, k)
