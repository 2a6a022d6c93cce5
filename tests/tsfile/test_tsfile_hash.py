"""hash32 against the spec's vectors, the public Java vectors and standard MurmurHash3 (mmh3)."""

from __future__ import annotations

from pathlib import Path

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bloomskip.tsfile import SEEDS, BloomFilter, hash32, hash32_batch, variants_differ

# The spec's UTF-8 vectors: seed 5, bit_count 256.
SPEC_VECTORS = [
    ("root.sg.d.s1", -1267668613, 133),
    ("root.设备.s1", 1697017247, 159),
    ("root.abcdefghijklmnop.设备.s1", 866805081, 89),
]


def _bit_index(value: int, bit_count: int) -> int:
    return (0 if value == -(2**31) else abs(value)) % bit_count


def _standard_hash32(data: bytes, seed: int) -> int:
    """Standard MurmurHash3 x64-128 (mmh3), then TsFile's final (h1 + h2) low 32 bits, signed."""
    h1, h2 = mmh3.hash64(data, seed, signed=False)
    low = (h1 + h2) & 0xFFFFFFFF
    return low - (1 << 32) if low >= 1 << 31 else low


@pytest.mark.parametrize(("path", "expected", "bit"), SPEC_VECTORS)
def test_spec_vectors(path: str, expected: int, bit: int) -> None:
    assert hash32(path.encode(), 5) == expected
    assert _bit_index(hash32(path.encode(), 5), 256) == bit
    assert BloomFilter(256, 1, variant="signed-tail").positions(path) == [bit]


def test_spec_standard_murmur_contrast() -> None:
    # "a standard MurmurHash3 implementation followed by the same final sum produces 1978455175,
    # selecting bit 135" -- which is exactly the C++ library's unsigned-tail variant.
    data = "root.设备.s1".encode()
    assert _standard_hash32(data, 5) == 1978455175
    assert hash32(data, 5, signed_tail=False) == 1978455175
    assert _bit_index(1978455175, 256) == 135


def test_public_java_vectors(shared_dir: Path) -> None:
    rows = (shared_dir / "research" / "tsfile" / "vectors_java_public.tsv").read_text().splitlines()
    header, *records = rows
    assert header.split("\t") == ["input_hex", "seed", "hash32_java"]
    inputs = [bytes.fromhex(record.split("\t")[0]) for record in records]
    seeds = [int(record.split("\t")[1]) for record in records]
    expected = np.array([int(record.split("\t")[2]) for record in records], dtype=np.int32)
    assert len(records) == 4000
    singles = np.array([hash32(data, seed) for data, seed in zip(inputs, seeds, strict=True)])
    assert np.array_equal(singles, expected)
    for seed in sorted(set(seeds)):
        chosen = [i for i, s in enumerate(seeds) if s == seed]
        batch = hash32_batch([inputs[i] for i in chosen], seed)
        assert batch.dtype == np.int32
        assert np.array_equal(batch, expected[chosen])


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=80), seed_index=st.integers(0, 7))
def test_unsigned_tail_is_standard_murmur3(data: bytes, seed_index: int) -> None:
    seed = SEEDS[seed_index]
    assert hash32(data, seed, signed_tail=False) == _standard_hash32(data, seed)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=80))
def test_variants_agree_without_high_tail_bytes(data: bytes) -> None:
    tail = data[len(data) - len(data) % 16 :]
    # Position 7 (and 15) of a tail is shifted to the top byte, where sign extension vanishes.
    high = any(byte >= 0x80 for index, byte in enumerate(tail) if index % 8 != 7)
    same = hash32(data, 5) == hash32(data, 5, signed_tail=False)
    if not high:
        assert same
    assert bool(variants_differ([data])[0]) == (not same)


def test_batch_forms_accept_arrow_and_iterables() -> None:
    import pyarrow as pa

    paths = ["root.sg.d.s1", "root.设备.s1", "root.abcdefghijklmnop.设备.s1"]
    expected = [vector[1] for vector in SPEC_VECTORS]
    assert hash32_batch(pa.array(paths), 5).tolist() == expected
    assert hash32_batch(iter(paths), 5).tolist() == expected
