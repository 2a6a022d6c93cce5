"""The C kernels of Parquet's filters against models written from the specifications: XXH64
(xxHash's spec, every length path: the 32-byte stripes, 8-, 4- and 1-byte tails) and the
split-block filter (parquet-format BloomFilter.md), over arbitrary inputs and hostile buffers.
Run under AddressSanitizer/UBSan with tools/sanitize.sh."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bloomskip import _native

M64 = (1 << 64) - 1
P1, P2, P3, P4, P5 = (
    0x9E3779B185EBCA87,
    0xC2B2AE3D27D4EB4F,
    0x165667B19E3779F9,
    0x85EBCA77C2B2AE63,
    0x27D4EB2F165667C5,
)
SALTS = (
    0x47B6137B,
    0x44974D91,
    0x8824AD5B,
    0xA2B7289D,
    0x705495C7,
    0x2DF1424B,
    0x9EFC4947,
    0x5C6BFB31,
)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & M64


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * P2) & M64, 31) * P1) & M64


def xxh64_model(data: bytes, seed: int = 0) -> int:
    """XXH64 as xxHash's specification (doc/xxhash_spec.md) states it."""
    n, i = len(data), 0
    if n >= 32:
        acc = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
        while n - i >= 32:
            for lane in range(4):
                acc[lane] = _round(
                    acc[lane], int.from_bytes(data[i + 8 * lane : i + 8 * lane + 8], "little")
                )
            i += 32
        h = (_rotl(acc[0], 1) + _rotl(acc[1], 7) + _rotl(acc[2], 12) + _rotl(acc[3], 18)) & M64
        for lane in acc:
            h = ((h ^ _round(0, lane)) * P1 + P4) & M64
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while n - i >= 8:
        h = (_rotl(h ^ _round(0, int.from_bytes(data[i : i + 8], "little")), 27) * P1 + P4) & M64
        i += 8
    if n - i >= 4:
        h = (_rotl(h ^ (int.from_bytes(data[i : i + 4], "little") * P1 & M64), 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h = (_rotl(h ^ (data[i] * P5 & M64), 11) * P1) & M64
        i += 1
    h ^= h >> 33
    h = h * P2 & M64
    h ^= h >> 29
    h = h * P3 & M64
    return h ^ (h >> 32)


def sbbf_model_add(bitset: bytearray, h: int) -> None:
    blocks = len(bitset) // 32
    block = ((h >> 32) * blocks) >> 32
    key = h & 0xFFFFFFFF
    for i, salt in enumerate(SALTS):
        bit = ((key * salt) & 0xFFFFFFFF) >> 27
        word = 32 * block + 4 * i
        value = int.from_bytes(bitset[word : word + 4], "little") | (1 << bit)
        bitset[word : word + 4] = value.to_bytes(4, "little")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=100), max_size=8), st.integers(0, M64))
def test_xxh64_matches_the_model(items: list[bytes], seed: int) -> None:
    offsets = np.zeros(len(items) + 1, np.int64)
    np.cumsum([len(b) for b in items], out=offsets[1:])
    out = np.zeros(len(items), np.uint64)
    view = (b"".join(items), offsets, 0, len(items), 8)
    _native.hash_batch(_native.HASH_XXH64, view, seed, False, out, None)
    assert out.tolist() == [xxh64_model(item, seed) for item in items]
    assert [_native.xxhash64(item, seed) for item in items] == out.tolist()


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9), st.lists(st.integers(0, M64), max_size=40), st.binary(max_size=64))
def test_sbbf_kernel_matches_the_model(blocks: int, hashes: list[int], absent: bytes) -> None:
    bitset, model = bytearray(32 * blocks), bytearray(32 * blocks)
    array = np.array(hashes, np.uint64)
    _native.sbbf_op(_native.OP_ADD, bitset, array, None)
    for h in hashes:
        sbbf_model_add(model, h)
    assert bitset == model
    found = np.zeros(len(hashes), np.uint8)
    _native.sbbf_op(_native.OP_CONTAINS, bytes(bitset), array, found)
    assert found.all()
    # A hash passes exactly when adding it would change nothing.
    probe = xxh64_model(absent)
    after = bytearray(model)
    sbbf_model_add(after, probe)
    one = np.zeros(1, np.uint8)
    _native.sbbf_op(_native.OP_CONTAINS, bytes(bitset), np.array([probe], np.uint64), one)
    assert bool(one[0]) == (after == model)


@pytest.mark.parametrize("size", [0, 16, 31, 33, 48])
def test_sbbf_kernel_refuses_bad_bitsets(size: int) -> None:
    with pytest.raises(ValueError, match="blocks of 32 bytes"):
        _native.sbbf_op(_native.OP_ADD, bytearray(size), np.zeros(1, np.uint64), None)


def test_sbbf_kernel_refuses_bad_arguments() -> None:
    hashes = np.zeros(4, np.uint64)
    with pytest.raises(ValueError, match="op must be"):
        _native.sbbf_op(_native.OP_POSITIONS, bytearray(32), hashes, None)
    with pytest.raises(ValueError):  # an output too short for the hashes
        _native.sbbf_op(_native.OP_CONTAINS, bytes(32), hashes, np.zeros(3, np.uint8))
    with pytest.raises((TypeError, BufferError)):  # adding needs a writable bitset
        _native.sbbf_op(_native.OP_ADD, bytes(32), hashes, None)
    with pytest.raises(ValueError):  # hashes are whole u64s
        _native.sbbf_op(_native.OP_CONTAINS, bytes(32), b"\x00" * 9, np.zeros(2, np.uint8))
