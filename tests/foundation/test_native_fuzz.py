"""Fuzz the C entry points with arbitrary views: each call succeeds or raises, never crashes.

Run under AddressSanitizer/UBSan with tools/sanitize.sh, where a stray read aborts the process.
"""

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bloomskip import _native

views = st.tuples(
    st.binary(max_size=64),
    st.one_of(
        st.none(),
        st.lists(st.integers(-(2**31), 2**31 - 1), max_size=12).map(
            lambda v: np.array(v, np.int32)
        ),
        st.lists(st.integers(-(2**63), 2**63 - 1), max_size=12).map(
            lambda v: np.array(v, np.int64)
        ),
        st.binary(max_size=40),
    ),
    st.integers(-2, 2**62),
    st.integers(-2, 2**62),
    st.integers(-2, 2**62),
)


@settings(max_examples=600, deadline=None)
@given(views, st.integers(-3, 40))
def test_batch_kernels_never_crash(view, out_len):
    out64 = np.zeros(max(out_len, 0), np.uint64)
    out32 = np.zeros(max(out_len, 0), np.int32)
    calls = [
        lambda: _native.hash_batch(0, view, 1, False, out64, out64.copy()),
        lambda: _native.hash_batch(1, view, 5, True, out32, None),
        lambda: _native.hash_batch(2, view, 0, False, out64, None),
        lambda: _native.hash_batch(3, view, 3, False, out64, None),
        lambda: _native.hash_batch(4, view, 0, False, out64, out64.copy()),
        lambda: _native.hash_batch(7, view, 0, False, out64, None),
        lambda: _native.tsfile_op(2, b"\xff" * 3, view, 24, 3, False, out64.view(np.uint8)),
        lambda: _native.tsfile_op(1, bytearray(3), view, 24, 3, True, None),
        lambda: _native.pair_op(1, bytearray(4), view, 0, 32, 3, None),
        lambda: _native.pair_op(0, None, view, 0, 32, 2, out64),
    ]
    for call in calls:
        with contextlib.suppress(ValueError, TypeError, OverflowError):
            call()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 2**64 - 1), max_size=20),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=6),
    st.integers(-2, 8),
    st.integers(-1, 20),
    st.integers(-1, 16),
)
def test_granule_builders_never_crash(hashes, bounds, granules, bits_per_row, k):
    hash_array = np.array(hashes, np.uint64)
    bound_array = np.array(bounds, np.int64)
    offsets = np.zeros(max(granules + 1, 0), np.int64)
    rows = np.zeros(max(granules, 0), np.int64)
    with contextlib.suppress(ValueError, TypeError, OverflowError):
        _native.bloom_filter_granules(
            [(hash_array, bound_array)], granules, bits_per_row, k, offsets, rows
        )
    out = np.zeros(max(granules, 0) * 8, np.uint8)
    strings = (b"abc def \xd0\x9f\xe2\x98", np.array([0, 3, 8, 12, 12], np.int32), 0, 4, 4)
    for tokenizer in (0, 1, 2):
        with contextlib.suppress(ValueError, TypeError, OverflowError):
            _native.text_granules(strings, bound_array, granules, tokenizer, 3, 8, k, 0, out)


@pytest.mark.parametrize("text", [b"\xf0", b"\xe2\x98", b"ab\xff\xfe", b"\xc3", b""])
def test_truncated_utf8_is_clipped_not_overread(text):
    # A lead byte announcing more bytes than remain: ClickHouse clips the n-gram at the end.
    out = np.zeros(16, np.uint8)
    offsets = np.array([0, len(text)], np.int32)
    _native.text_granules(
        (text, offsets, 0, 1, 4), np.array([0, 1], np.int64), 1, 0, 1, 16, 2, 0, out
    )
