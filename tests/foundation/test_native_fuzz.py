"""Fuzz the C entry points with arbitrary views, against a model and independent oracles.

A Python model of the batch contract (``bloomskip._batch``: ``(data, offsets, first, count,
width)``) says whether a view is valid and which items it holds. Every call must then raise
``ValueError`` exactly when the model (or an output buffer too short) says so, and otherwise
produce what the reference libraries compute for those items: mmh3, clickhouse-cityhash, and
the ClickHouse formulas written out here. Run under AddressSanitizer/UBSan with
tools/sanitize.sh, where a stray read aborts the process.
"""

import clickhouse_cityhash.cityhash as cityhash_ref
import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bloomskip import _native
from bloomskip.bits import BF_HASH_SEEDS

M64 = (1 << 64) - 1
_SSIZE_MAX = 2**63 - 1

arbitrary_views = st.tuples(
    st.binary(max_size=64),
    st.one_of(
        st.none(),
        st.lists(st.integers(-(2**31), 2**31 - 1), max_size=12).map(
            lambda v: np.array(v, np.int32)
        ),
        st.lists(st.integers(-(2**63), 2**63 - 1), max_size=12).map(
            lambda v: np.array(v, np.int64)
        ),
        # Offsets that are mostly valid: sorted, inside a 64-byte buffer.
        st.lists(st.integers(0, 64), max_size=12).map(lambda v: np.array(sorted(v), np.int32)),
        st.binary(max_size=40),
    ),
    st.one_of(st.integers(-2, 12), st.integers(-2, 2**62)),
    st.one_of(st.integers(-2, 12), st.integers(-2, 2**62)),
    st.one_of(st.sampled_from([0, 1, 3, 4, 8]), st.integers(-2, 2**62)),
)


@st.composite
def well_formed_views(draw):
    """Views the model accepts, with items: Arrow-style offsets or fixed-width items."""
    data = draw(st.binary(max_size=64))
    if draw(st.booleans()):
        cuts = sorted(draw(st.lists(st.integers(0, len(data)), min_size=1, max_size=12)))
        first = draw(st.integers(0, len(cuts) - 1))
        width = draw(st.sampled_from([4, 8]))
        offsets = np.array(cuts, np.int32 if width == 4 else np.int64)
        return data, offsets, first, draw(st.integers(0, len(cuts) - 1 - first)), width
    width = draw(st.integers(1, 9))
    first = draw(st.integers(0, len(data) // width))
    return data, None, first, draw(st.integers(0, len(data) // width - first)), width


views = st.one_of(arbitrary_views, well_formed_views())


def model_items(view) -> list[bytes] | None:
    """The items of a batch view, or None where the kernels must refuse it."""
    data, offsets, first, count, width = view
    if first < 0 or count < 0 or width < 0:
        return None
    if offsets is None:
        if width == 0:
            return [] if count == 0 else None
        if count > _SSIZE_MAX // width - first or (first + count) * width > len(data):
            return None
        return [data[(first + i) * width : (first + i + 1) * width] for i in range(count)]
    raw = bytes(memoryview(offsets).cast("B"))
    if width not in (4, 8) or first > _SSIZE_MAX // 16 or count > _SSIZE_MAX // 16:
        return None
    if (first + count + 1) * width > len(raw):
        return None
    whole = raw[: len(raw) // width * width]
    bounds = np.frombuffer(whole, "<i4" if width == 4 else "<i8")[first : first + count + 1]
    bounds = [int(b) for b in bounds]
    if bounds[0] < 0 or any(b > len(data) for b in bounds):
        return None
    if any(b < a for a, b in zip(bounds, bounds[1:], strict=False)):
        return None
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def hash128_to_64(low: int, high: int) -> int:
    """Hash128to64 through the reference library (CityHash64WithSeeds' core)."""
    base = cityhash_ref.CityHash64(b"bloomskip")
    return cityhash_ref.CityHash64WithSeeds(b"bloomskip", (base - low) & M64, high)


def expect(call, succeeds: bool):
    """Run ``call``; it must raise ValueError exactly when it is not expected to succeed."""
    if succeeds:
        call()
        return True
    with pytest.raises(ValueError):
        call()
    return False


def _tsfile32(item: bytes, seed: int) -> int:
    """TsFile's hash with the standard (unsigned) tail: mmh3 x64 128, halves summed, as int32."""
    value = mmh3.hash128(item, seed, x64arch=True, signed=False)
    low = ((value & M64) + (value >> 64)) & 0xFFFFFFFF
    return low - ((low >> 31) << 32)


def _pair_positions(item: bytes, seed: int, bit_count: int, k: int) -> list[int]:
    h1 = cityhash_ref.CityHash64WithSeed(item, seed)
    h2 = cityhash_ref.CityHash64WithSeed(item, (845897321 * seed + 217728422) & M64)
    return [((h1 + i * h2 + i * i) & M64) % bit_count for i in range(k)]


def _bitset(positions, size: int) -> bytes:
    bits = bytearray(size)
    for position in positions:
        bits[position >> 3] |= 1 << (position & 7)
    return bytes(bits)


@settings(max_examples=600, deadline=None)
@given(views, st.integers(-3, 40))
def test_batch_kernels_match_the_model_and_the_oracles(view, out_len):
    items = model_items(view)
    valid = items is not None
    n = len(items) if valid else 0
    fits = valid and (n == 0 or out_len >= n)
    size = max(out_len, 0)

    first, second = np.zeros(size, np.uint64), np.zeros(size, np.uint64)
    if expect(
        lambda: _native.hash_batch(_native.HASH_MURMUR3_128, view, 1, False, first, second), fits
    ):
        for i, item in enumerate(items):
            value = mmh3.hash128(item, 1, x64arch=True, signed=False)
            assert (int(first[i]), int(second[i])) == (value & M64, value >> 64)
    out32 = np.zeros(size, np.int32)
    if expect(lambda: _native.hash_batch(_native.HASH_TSFILE32, view, 5, False, out32, None), fits):
        assert out32[:n].tolist() == [_tsfile32(item, 5) for item in items]
    out64 = np.zeros(size, np.uint64)
    if expect(lambda: _native.hash_batch(_native.HASH_CITY64, view, 0, False, out64, None), fits):
        assert out64[:n].tolist() == [cityhash_ref.CityHash64(item) for item in items]
    if expect(
        lambda: _native.hash_batch(_native.HASH_CITY64_SEEDED, view, 3, False, out64, None), fits
    ):
        assert out64[:n].tolist() == [cityhash_ref.CityHash64WithSeed(item, 3) for item in items]
    if expect(
        lambda: _native.hash_batch(_native.HASH_CITY128, view, 0, False, first, second), fits
    ):
        for i, item in enumerate(items):
            value = cityhash_ref.CityHash128(item)  # (low64 << 64) | high64
            assert (int(first[i]), int(second[i])) == (value >> 64, value & M64)
    with pytest.raises(ValueError, match="unknown hash kind"):
        _native.hash_batch(7, view, 0, False, out64, None)

    # TsFile filter: every bit set answers "maybe" for every item; an added item is always found.
    flags = np.zeros(8 * size, np.uint8)
    if expect(
        lambda: _native.tsfile_op(_native.OP_CONTAINS, b"\xff" * 3, view, 24, 3, False, flags),
        valid and (n == 0 or 8 * size >= n),
    ):
        assert flags[:n].all()
    bitset = bytearray(3)
    if expect(lambda: _native.tsfile_op(_native.OP_ADD, bitset, view, 24, 3, True, None), valid):
        found = np.zeros(n, np.uint8)
        _native.tsfile_op(_native.OP_CONTAINS, bytes(bitset), view, 24, 3, True, found)
        assert found.all()  # no false negative
        assert sum(bin(byte).count("1") for byte in bitset) <= 3 * n

    # ClickHouse text-index filter: exactly the bits of the double-hashing formula.
    text_bits = bytearray(4)
    if expect(lambda: _native.pair_op(_native.OP_ADD, text_bits, view, 0, 32, 3, None), valid):
        expected = [p for item in items for p in _pair_positions(item, 0, 32, 3)]
        assert bytes(text_bits) == _bitset(expected, 4)
    positions = np.zeros(size, np.uint64)
    if expect(
        lambda: _native.pair_op(_native.OP_POSITIONS, None, view, 0, 32, 2, positions),
        valid and (n == 0 or size >= 2 * n),
    ):
        expected = [p for item in items for p in _pair_positions(item, 0, 32, 2)]
        assert positions[: 2 * n].tolist() == expected


def _bounds_valid(bounds: list[int], granules: int, items: int) -> bool:
    """The kernels' rule: G + 1 bounds, non-decreasing, inside ``0..items``."""
    if granules < 0 or len(bounds) != granules + 1 or bounds[0] < 0:
        return False
    return all(a <= b <= items for a, b in zip(bounds, [*bounds[1:], items], strict=True))


def _varuint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        shift += 7
        if not byte & 0x80:
            return value, pos


@st.composite
def granule_inputs(draw):
    """(hashes, bounds, granules, bits_per_row, k): arbitrary, or bounds that fit the hashes."""
    hashes = draw(st.lists(st.one_of(st.integers(0, 2**64 - 1), st.integers(0, 5)), max_size=20))
    if draw(st.booleans()):
        bounds = draw(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=6))
        granules = draw(st.integers(-2, 8))
    else:
        # Bounds that fit the hashes (and, below 5, the four strings), now and then one off.
        top = draw(st.sampled_from([len(hashes), min(len(hashes), 4)]))
        bounds = sorted(draw(st.lists(st.integers(0, top), min_size=1, max_size=6)))
        granules = len(bounds) - 1 + draw(st.sampled_from([0, 0, 0, 1, -1]))
    bits_per_row = draw(st.one_of(st.integers(1, 12), st.sampled_from([-1, 0, 1024, 1025])))
    k = draw(st.one_of(st.integers(1, 15), st.sampled_from([-1, 0, 16, (1 << 20) + 1])))
    return hashes, bounds, granules, bits_per_row, k


@settings(max_examples=300, deadline=None)
@given(granule_inputs())
def test_granule_builders_match_the_clickhouse_layout(inputs):
    hashes, bounds, granules, bits_per_row, k = inputs
    hash_array = np.array(hashes, np.uint64)
    bound_array = np.array(bounds, np.int64)
    offsets = np.zeros(max(granules + 1, 0), np.int64)
    rows = np.zeros(max(granules, 0), np.int64)
    valid = _bounds_valid(bounds, granules, len(hashes)) and 1 <= bits_per_row <= 1024
    valid = valid and 1 <= k <= 15
    payload = None

    def build():
        nonlocal payload
        payload = _native.bloom_filter_granules(
            [(hash_array, bound_array)], granules, bits_per_row, k, offsets, rows
        )

    if expect(build, valid):
        # Each granule: VarUInt distinct count, then (bits_per_row * count + 7) // 8 bytes with
        # bit Hash128to64(h, BF_HASH_SEEDS[j]) mod (8 * bytes) set for every distinct h.
        position = 0
        for g in range(granules):
            distinct = sorted(set(hashes[bounds[g] : bounds[g + 1]]))
            assert int(offsets[g]) == position and int(rows[g]) == len(distinct)
            count, position = _varuint(payload, position)
            assert count == len(distinct)
            size = (bits_per_row * count + 7) // 8
            bits = [
                hash128_to_64(h, BF_HASH_SEEDS[j]) % (8 * size) for h in distinct for j in range(k)
            ]
            assert payload[position : position + size] == _bitset(bits, size)
            position += size
        assert position == len(payload) == int(offsets[granules])

    strings = (b"abc def \xd0\x9f\xe2\x98", np.array([0, 3, 8, 12, 12], np.int32), 0, 4, 4)
    # The tokens (tokenbf_v1) and the ASCII 3-grams (ngrambf_v1) of each of the four strings.
    tokens = [{b"abc"}, {b"def"}, {b"\xd0\x9f\xe2\x98"}, set()]
    ngrams = [{b"abc"}, {b" de", b"def", b"ef "}, set(), set()]
    text_ok = _bounds_valid(bounds, granules, 4) and 1 <= k <= 1 << 20
    ngram, token = _native.TOKENIZER_NGRAM, _native.TOKENIZER_TOKEN
    unknown = max(ngram, token, _native.TOKENIZER_SPARSE_GRAMS) + 1
    for tokenizer in (ngram, token, unknown):
        out = np.zeros(max(granules, 0) * 8, np.uint8)

        def text(tokenizer=tokenizer, out=out):
            _native.text_granules(strings, bound_array, granules, tokenizer, 3, 8, k, 0, out)

        if expect(text, text_ok and tokenizer != unknown):
            # No false negative: every token of a granule's strings has all its bits set.
            for g in range(granules):
                filter_bits = out[8 * g : 8 * g + 8].tobytes()
                for row in range(bounds[g], bounds[g + 1]):
                    for token in (ngrams if tokenizer == ngram else tokens)[row]:
                        for p in _pair_positions(token, 0, 64, k):
                            assert filter_bits[p >> 3] >> (p & 7) & 1, (g, token)


@pytest.mark.parametrize("text", [b"\xf0", b"\xe2\x98", b"ab\xff\xfe", b"\xc3", b""])
def test_truncated_utf8_is_clipped_not_overread(text):
    # A lead byte announcing more bytes than remain: ClickHouse clips the n-gram at the end.
    out = np.zeros(16, np.uint8)
    offsets = np.array([0, len(text)], np.int32)
    _native.text_granules(
        (text, offsets, 0, 1, 4),
        np.array([0, 1], np.int64),
        1,
        _native.TOKENIZER_NGRAM,
        1,
        16,
        2,
        0,
        out,
    )


def test_scheme_kernels_reject_an_unknown_op():
    # An op outside the exported OP_* constants is an error, not a silent test or write.
    view = (b"abc", None, 0, 1, 3)
    hashes = np.zeros(1, np.uint64)
    bitset, out = bytearray(8), np.zeros(64, np.uint64)
    for op in (-1, _native.OP_CONTAINS + 1):
        with pytest.raises(ValueError, match="unknown op"):
            _native.tsfile_op(op, bitset, view, 64, 3, True, out)
        with pytest.raises(ValueError, match="unknown op"):
            _native.seeded_op(op, bitset, hashes, 64, 3, out)
    # The text-index scheme only writes positions or adds (queries test bits with covers).
    for op in (-1, _native.OP_CONTAINS):
        with pytest.raises(ValueError, match="unknown op"):
            _native.pair_op(op, bitset, view, 0, 64, 3, out)
    assert bytes(bitset) == bytes(8) and not out.any()
