"""Bit kernels: layouts and position schemes against published values and reference hashes."""

import clickhouse_cityhash.cityhash as cityhash_ref
import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bloomskip import _native, bits

M64 = (1 << 64) - 1
SEED_GEN_A, SEED_GEN_B = 845897321, 217728422


def test_tsfile_positions_reproduce_the_spec_and_a_real_file():
    paths = ["root.sg.d.s1", "root.设备.s1", "root.abcdefghijklmnop.设备.s1"]
    assert bits.tsfile_positions(paths, 256, 1)[:, 0].tolist() == [133, 159, 89]
    assert bits.tsfile_positions(["root.设备.s1"], 256, 1, signed_tail=False).tolist() == [[135]]
    # research/tsfile.md §3: tree_1.tsfile, written by PyPI tsfile, holds root.sg.d1.s1 with
    # bit_count 256 and k 5 as these 26 bytes.
    assert bits.tsfile_positions("root.sg.d1.s1", 256, 5).tolist() == [[17, 202, 201, 94, 190]]
    bitset = bytearray(32)
    bits.tsfile_add(bitset, ["root.sg.d1.s1"], 256, 5)
    written = bytes.fromhex("0000020000000000000000400000000000000000000000400006")
    assert bytes(bitset).rstrip(b"\0") == written
    # The stored form drops trailing zero bytes; lookups read them as zero.
    assert bits.tsfile_contains(written, ["root.sg.d1.s1", "root.sg.d1.s2"], 256, 5).tolist() == [
        True,
        False,
    ]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.integers(1, 10**6), st.integers(1, 8))
def test_tsfile_unsigned_positions_follow_mmh3(data, bit_count, k):
    expected = []
    for seed in bits.TSFILE_SEEDS[:k]:
        value = mmh3.hash128(data, seed, x64arch=True, signed=False)
        h32 = ((value & M64) + (value >> 64)) & 0xFFFFFFFF
        h32 -= (h32 >> 31) << 32
        expected.append((0 if h32 == -(2**31) else abs(h32)) % bit_count)
    got = bits.tsfile_positions([data], bit_count, k, signed_tail=False)
    assert got.tolist() == [expected]


def test_seeded_positions_match_clickhouse_example():
    # research/clickhouse.md §4a: value hash 0, 5 bits/row, 3 hashes, 1 row -> 1 byte, bits 5, 5, 4.
    assert bits.seeded_positions([0], 8, 3).tolist() == [[5, 5, 4]]
    filt = bytearray(1)
    bits.seeded_add(filt, [0], 8, 3)
    assert bytes(filt) == b"\x30"


@settings(max_examples=200, deadline=None)
@given(st.integers(0, M64), st.integers(1, 2**40), st.integers(1, 15))
def test_seeded_positions_follow_reference_cityhash(value_hash, bit_count, k):
    # Hash128to64(h, s) == CityHash64WithSeeds(d, CityHash64(d) - h, s) for any bytes d.
    base = cityhash_ref.CityHash64(b"x")
    expected = [
        cityhash_ref.CityHash64WithSeeds(b"x", (base - value_hash) & M64, seed) % bit_count
        for seed in bits.BF_HASH_SEEDS[:k]
    ]
    assert bits.seeded_positions([value_hash], bit_count, k).tolist() == [expected]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40), st.integers(0, M64), st.integers(1, 2**20), st.integers(1, 8))
def test_pair_positions_follow_reference_cityhash(token, seed, bit_count, k):
    h1 = cityhash_ref.CityHash64WithSeed(token, seed)
    h2 = cityhash_ref.CityHash64WithSeed(token, (SEED_GEN_A * seed + SEED_GEN_B) & M64)
    expected = [((h1 + i * h2 + i * i) & M64) % bit_count for i in range(k)]
    assert bits.pair_positions([token], seed, bit_count, k).tolist() == [expected]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, M64), st.integers(1, M64))
def test_fast_modulo_is_exact(x, d):
    assert _native.fastmod(x, d) == x % d


def test_fast_modulo_edges():
    for d in (1, 2, 3, 7, 8, 81920, 2**32 - 1, 2**32 + 1, 2**63 - 1, 2**63, 2**63 + 1, M64):
        for x in (0, 1, d - 1, d, d + 1, M64, M64 - 1, 2**63):
            if x > M64:
                continue
            assert _native.fastmod(x, d) == x % d


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=1, max_size=64), st.binary(min_size=1, max_size=64))
def test_bitset_operations_match_numpy(a, b):
    b = (b * 64)[: len(a)]
    na, nb = np.frombuffer(a, np.uint8), np.frombuffer(b, np.uint8)
    assert bits.popcount(a) == int(np.unpackbits(na).sum())
    assert bits.union(a, b) == (na | nb).tobytes()
    assert bits.covers(a, b) == bool(((na & nb) == nb).all())
    assert bits.covers(bits.union(a, b), b)
    matrix = np.stack([na, na | nb, nb])
    assert bits.covers_rows(matrix, b).tolist() == [bits.covers(a, b), True, True]
    assert bits.popcount_rows(matrix).tolist() == [int(np.unpackbits(r).sum()) for r in matrix]


def test_set_and_test_bits_layout():
    bitset = bytearray(2)
    bits.set_bits(bitset, [0, 9, 15])
    assert bytes(bitset) == bytes([0b00000001, 0b10000010])
    assert bits.test_bits(bitset, [0, 1, 9, 15, 16, 10**9]).tolist() == [
        True, False, True, True, False, False,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="outside"):
        bits.set_bits(bitset, [16])


def test_bloom_filter_granules_layout_and_distinct_sizing():
    hashes_a = np.array([1, 1, 2, 3, 3, 3, 4], dtype=np.uint64)
    hashes_b = np.array([9, 9, 9, 9], dtype=np.uint64)
    payload, offsets, total_rows = bits.bloom_filter_granules(
        [(hashes_a, [0, 4, 7]), (hashes_b, [0, 2, 4])], bits_per_row=8, k=4
    )
    assert total_rows.tolist() == [3, 2]  # the larger distinct count over the two columns
    first = payload[offsets[0] : offsets[1]]
    assert first[0] == 3 and len(first) == 1 + 3 + 3
    expected_a = bytearray(3)
    bits.seeded_add(expected_a, [1, 2, 3], 24, 4)
    expected_b = bytearray(3)
    bits.seeded_add(expected_b, [9], 24, 4)
    assert first[1:] == bytes(expected_a) + bytes(expected_b)
    assert len(payload) == offsets[-1] == 7 + 1 + 2 + 2


def test_bloom_filter_granules_varuint_count():
    hashes = np.arange(300, dtype=np.uint64)
    payload, offsets, total_rows = bits.bloom_filter_granules([(hashes, [0, 300])], 1, 1)
    assert total_rows.tolist() == [300]
    assert payload[:2] == bytes([0xAC, 0x02])  # 300 as a VarUInt
    assert len(payload) == 2 + (300 + 7) // 8


def test_text_granules_tokens_and_ngrams():
    strings = ["Hello, world", "", "Привет мир", "x_y-z"]
    out = bits.text_granules(strings, [0, 2, 4], "token", 0, 64, 3, 7)
    expected = np.zeros((2, 64), np.uint8)
    bits.pair_add(expected[0], ["Hello", "world"], 7, 512, 3)
    bits.pair_add(expected[1], ["Привет", "мир", "x", "y", "z"], 7, 512, 3)
    np.testing.assert_array_equal(out, expected)
    grams = bits.text_granules(["ab☃c", "ab"], [0, 2], "ngram", 3, 32, 2, 0)
    expected = np.zeros((1, 32), np.uint8)
    bits.pair_add(expected[0], ["ab☃", "b☃c"], 0, 256, 2)  # "ab" is shorter than n: nothing
    np.testing.assert_array_equal(grams, expected)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: bits.tsfile_positions(["a"], 0, 1), "bit_count"),
        (lambda: bits.tsfile_positions(["a"], 8, 9), "k"),
        (lambda: bits.tsfile_positions(["a"], 8, 0), "k"),
        (lambda: bits.seeded_positions([1], 8, 16), "k"),
        (lambda: bits.tsfile_add(bytearray(1), ["a"], 256, 5), "shorter"),
        (lambda: bits.pair_positions(["a"], -1, 8, 1), "seed"),
        (lambda: bits.text_granules(["a"], [0, 2], "token", 0, 8, 1, 0), "bound"),
        (lambda: bits.text_granules(["a"], [0, 1], "words", 0, 8, 1, 0), "tokenizer"),
        (lambda: bits.bloom_filter_granules([([1], [0, 1]), ([1], [0, 1, 1])], 8, 1), "granules"),
        (lambda: bits.union(b"ab", b"a"), "length"),
    ],
)
def test_bad_bit_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()
