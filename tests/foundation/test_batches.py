"""Batch inputs: every container gives what the scalar form gives, and bad input fails clearly."""

import clickhouse_cityhash.cityhash as cityhash_ref
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bloomskip import hashing

texts = st.lists(st.text(max_size=40), max_size=60)


def _scalar_results(items):
    return {
        "city64": [hashing.cityhash64(x) for x in items],
        "city64s": [hashing.cityhash64_with_seed(x, 2**64 - 1) for x in items],
        "city128": [hashing.cityhash128(x) for x in items],
        "mm": [hashing.murmur3_x64_128(x, 7) for x in items],
        "ts": [hashing.tsfile_hash32(x, 5) for x in items],
        "tsu": [hashing.tsfile_hash32(x, 5, signed_tail=False) for x in items],
    }


def _batch_results(batch):
    low, high = hashing.cityhash128(batch)
    h1, h2 = hashing.murmur3_x64_128(batch, 7)
    return {
        "city64": hashing.cityhash64(batch).tolist(),
        "city64s": hashing.cityhash64_with_seed(batch, 2**64 - 1).tolist(),
        "city128": list(zip(low.tolist(), high.tolist(), strict=True)),
        "mm": list(zip(h1.tolist(), h2.tolist(), strict=True)),
        "ts": hashing.tsfile_hash32(batch, 5).tolist(),
        "tsu": hashing.tsfile_hash32(batch, 5, signed_tail=False).tolist(),
    }


@settings(max_examples=60, deadline=None)
@given(texts)
def test_every_batch_container_agrees_with_scalars(items):
    expected = _scalar_results(items)
    encoded = [s.encode() for s in items]
    containers = [
        items,
        tuple(encoded),
        pa.array(items, type=pa.string()),
        pa.array(items, type=pa.large_string()),
        pa.array(encoded, type=pa.binary()),
        pa.array(encoded, type=pa.large_binary()),
        pa.chunked_array([pa.array(items[:3], pa.string()), pa.array(items[3:], pa.string())]),
        np.array(items, dtype=object),
    ]
    for batch in containers:
        assert _batch_results(batch) == expected


@settings(max_examples=40, deadline=None)
@given(texts, st.data())
def test_arrow_slices_honour_their_offset(items, data):
    array = pa.array(items, type=pa.string())
    start = data.draw(st.integers(0, len(items)))
    stop = data.draw(st.integers(start, len(items)))
    sliced = array.slice(start, stop - start)
    assert hashing.cityhash64(sliced).tolist() == [
        cityhash_ref.CityHash64(s.encode()) for s in items[start:stop]
    ]


def test_fixed_width_inputs_hash_each_elements_bytes():
    values = np.array([0, 1, 2**63, 2**64 - 1], dtype=np.uint64)
    assert hashing.cityhash64(values).tolist() == [
        cityhash_ref.CityHash64(int(v).to_bytes(8, "little")) for v in values
    ]
    fixed = pa.array([b"ab\x00", b"xyz"], type=pa.binary(3))
    assert hashing.cityhash64(fixed).tolist() == [
        cityhash_ref.CityHash64(b"ab\x00"),
        cityhash_ref.CityHash64(b"xyz"),
    ]
    assert hashing.cityhash64(np.array([b"ab", b"c"], dtype="S2")).tolist() == [
        cityhash_ref.CityHash64(b"ab"),
        cityhash_ref.CityHash64(b"c\x00"),
    ]


def test_empty_batches():
    for batch in ([], pa.array([], pa.string()), np.array([], dtype=np.uint64)):
        assert hashing.cityhash64(batch).shape == (0,)
        assert hashing.tsfile_hash32(batch, 5).dtype == np.int32


def test_arrow_nulls_are_a_clear_error():
    with pytest.raises(ValueError, match="null"):
        hashing.cityhash64(pa.array(["a", None]))
    # A slice that leaves the nulls out is fine.
    assert hashing.cityhash64(pa.array(["a", None]).slice(0, 1)).tolist() == [
        cityhash_ref.CityHash64(b"a")
    ]


def test_integer_hashes_on_arrays():
    values = np.array([-1, 0, 5], dtype=np.int64)
    assert hashing.int_hash64(values).tolist() == [hashing.int_hash64(int(v)) for v in values]
    assert hashing.int_hash64(pa.array([1, 2], pa.uint8())).tolist() == [
        hashing.int_hash64(1),
        hashing.int_hash64(2),
    ]
    low = np.array([1, 2], dtype=np.uint64)
    high = np.array([3, 4], dtype=np.uint64)
    assert hashing.hash128_to_64(low, high).tolist() == [
        hashing.hash128_to_64(1, 3),
        hashing.hash128_to_64(2, 4),
    ]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: hashing.cityhash64(123), TypeError, "data"),
        (lambda: hashing.cityhash64([b"a", 1]), TypeError, "data"),
        (lambda: hashing.cityhash64(pa.array([1, 2])), TypeError, "int64"),
        (lambda: hashing.cityhash64_with_seed(b"a", -1), ValueError, "seed"),
        (lambda: hashing.cityhash64_with_seed(b"a", 2**64), ValueError, "seed"),
        (lambda: hashing.cityhash64_with_seed(b"a", "1"), TypeError, "seed"),
        (lambda: hashing.murmur3_x64_128(b"a", -1), ValueError, "seed"),
        (lambda: hashing.tsfile_hash32(b"a", 2**31), ValueError, "seed"),
        (lambda: hashing.int_hash64(2**64), ValueError, "x"),
        (lambda: hashing.int_hash64(["a"]), TypeError, "x"),
        (lambda: hashing.hash128_to_64(-1, 0), ValueError, "low"),
        (lambda: hashing.hash128_to_64(np.zeros(2, np.uint64), np.zeros(3, np.uint64)), ValueError,
         "length"),
    ],
)  # fmt: skip
def test_bad_arguments_name_themselves(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_native_rejects_inconsistent_batch_views():
    from bloomskip import _native

    out = np.empty(2, dtype=np.uint64)
    bad_offsets = np.array([0, 5, 2], dtype=np.int32)
    with pytest.raises(ValueError, match="offset"):
        _native.hash_batch(
            _native.HASH_CITY64, (b"abcdef", bad_offsets, 0, 2, 4), 0, False, out, None
        )
    past_end = np.array([0, 2, 99], dtype=np.int32)
    with pytest.raises(ValueError, match="outside"):
        _native.hash_batch(_native.HASH_CITY64, (b"abcdef", past_end, 0, 2, 4), 0, False, out, None)
    with pytest.raises(ValueError, match="too short"):
        _native.hash_batch(
            _native.HASH_CITY64, (b"abcdef", np.array([0], np.int32), 0, 2, 4), 0, False, out, None
        )
    with pytest.raises(ValueError, match="exceed"):
        _native.hash_batch(_native.HASH_CITY64, (b"abc", None, 0, 2, 8), 0, False, out, None)
    with pytest.raises(ValueError, match="output"):
        _native.hash_batch(_native.HASH_CITY64, (b"abcdef", None, 0, 3, 2), 0, False, out, None)
    with pytest.raises(ValueError, match="offsets"):
        _native.hash_batch(
            _native.HASH_CITY64,
            (b"abcdef", np.array([0, 1], np.int16), 0, 1, 2),
            0,
            False,
            out,
            None,
        )
