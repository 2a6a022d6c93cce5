"""Bitsets and the bit-position schemes of TsFile and ClickHouse, computed in C.

A bitset is a writable byte buffer (``bytearray`` or a ``numpy.uint8`` array) in which bit ``p``
lives in byte ``p // 8`` at bit ``p % 8`` (least significant first), the layout of both TsFile's
``BitSet.toByteArray()`` and ClickHouse's little-endian ``UInt64`` words. Reading a position past
the end of a shorter buffer gives 0, because TsFile drops trailing zero bytes.

Example:
    >>> from bloomskip import bits
    >>> f = bytearray(32)
    >>> bits.tsfile_add(f, ["root.sg.d1.s1"], bit_count=256, k=5)
    >>> bits.tsfile_contains(f, ["root.sg.d1.s1", "root.sg.d1.s2"], 256, 5).tolist()
    [True, False]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
import pyarrow as pa

from bloomskip import _native
from bloomskip._batch import batch_view, check_uint, is_scalar, scalar_bytes, uint64_array

__all__ = [
    "BF_HASH_SEEDS",
    "TSFILE_SEEDS",
    "bloom_filter_granules",
    "build_threads",
    "covers",
    "covers_rows",
    "pair_add",
    "pair_positions",
    "popcount",
    "popcount_rows",
    "seeded_add",
    "seeded_contains",
    "seeded_positions",
    "set_bits",
    "sparse_grams_parameter",
    "test_bits",
    "text_granules",
    "tsfile_add",
    "tsfile_contains",
    "tsfile_positions",
    "union",
]

#: TsFile's hash seeds, in order; the filter's k uses the first k.
TSFILE_SEEDS = (5, 7, 11, 19, 31, 37, 43, 59)

#: ClickHouse ``BloomFilterHash::bf_hash_seed``; an index with k hashes uses the first k.
BF_HASH_SEEDS = (
    13635471485423070496, 10336109063487487899, 17779957404565211594, 8988612159822229247,
    4954614162757618085, 12980113590177089081, 9263883436177860930, 3656772712723269762,
    10362091744962961274, 7582936617938287249, 15033938188484401405, 18286745649494826751,
    6852245486148412312, 8886056245089344681, 10151472371158292780,
)  # fmt: skip


def _items(items) -> tuple:
    """A batch view; one value counts as a batch of one."""
    if is_scalar(items):
        items = [scalar_bytes(items, "items")]
    return batch_view(items, "items")


def _bit_count(bit_count: object) -> int:
    value = check_uint(bit_count, 64, "bit_count")
    if value == 0:
        raise ValueError("bit_count must be > 0")
    return value


def _k(k: object, max_k: int, name: str = "k") -> int:
    value = check_uint(k, 64, name)
    if not 1 <= value <= max_k:
        raise ValueError(f"{name} must be in 1..{max_k}, got {value}")
    return value


def set_bits(bitset, positions) -> None:
    """Set the bits at ``positions`` (any integer array-like).

    Raises:
        ValueError: A position past the end of the bitset.
    """
    _native.set_bits(bitset, uint64_array(positions, "positions"))


def test_bits(bitset, positions) -> np.ndarray:
    """Whether each of ``positions`` is set (positions past the end read as 0)."""
    pos = uint64_array(positions, "positions")
    out = np.empty(pos.shape, dtype=np.bool_)
    _native.test_bits(bitset, pos, out)
    return out


def popcount(bitset) -> int:
    """The number of set bits."""
    return _native.popcount(bitset)


def popcount_rows(matrix: np.ndarray) -> np.ndarray:
    """Set bits in each row of a ``(rows, width)`` uint8 matrix, as an int64 array."""
    matrix = np.ascontiguousarray(matrix, dtype=np.uint8)
    if matrix.ndim != 2:
        raise ValueError(f"matrix must be 2-D, got {matrix.ndim} dimension(s)")
    out = np.zeros(matrix.shape[0], dtype=np.int64)
    if matrix.size:
        _native.popcount_rows(matrix, matrix.shape[1], out)
    return out


def union(a, b) -> bytes:
    """``a | b`` of two bitsets of equal length.

    Raises:
        ValueError: The lengths differ.
    """
    result = bytearray(a)
    _native.union_into(result, b)
    return bytes(result)


def covers(a, b) -> bool:
    """``(a & b) == b``: every bit set in ``b`` is set in ``a`` (equal lengths).

    Raises:
        ValueError: The lengths differ.
    """
    return _native.covers(a, b)


def covers_rows(matrix: np.ndarray, query) -> np.ndarray:
    """:func:`covers` of each row of a ``(rows, width)`` uint8 matrix against one query bitset.

    Raises:
        ValueError: The query's length is not the matrix's width.
    """
    matrix = np.ascontiguousarray(matrix, dtype=np.uint8)
    query = bytes(query)
    if matrix.ndim != 2 or matrix.shape[1] != len(query):
        raise ValueError(f"matrix of shape {matrix.shape} does not fit a {len(query)}-byte query")
    out = np.ones(matrix.shape[0], dtype=np.bool_)
    if matrix.size:
        _native.covers_rows(matrix, query, out)
    return out


def tsfile_positions(items, bit_count: int, k: int, signed_tail: bool = True) -> np.ndarray:
    """TsFile bit positions: ``abs(hash32(item, TSFILE_SEEDS[i])) mod bit_count`` for ``i < k``.

    Args:
        items: One path (bytes/str) or a batch.
        bit_count: The filter's logical number of bits.
        k: hash_function_count, 1..8.
        signed_tail: The hash variant (see :func:`bloomskip.hashing.tsfile_hash32`).

    Returns:
        An int64 array of shape (n, k).
    """
    bit_count, k = _bit_count(bit_count), _k(k, 8)
    view = _items(items)
    out = np.empty((view[3], k), dtype=np.int64)
    _native.tsfile_op(_native.OP_POSITIONS, None, view, bit_count, k, bool(signed_tail), out)
    return out


def tsfile_add(bitset, items, bit_count: int, k: int, signed_tail: bool = True) -> None:
    """Add paths to a TsFile filter held in ``bitset`` (at least ``ceil(bit_count / 8)`` bytes)."""
    bit_count, k = _bit_count(bit_count), _k(k, 8)
    _native.tsfile_op(_native.OP_ADD, bitset, _items(items), bit_count, k, bool(signed_tail), None)


def tsfile_contains(bitset, items, bit_count: int, k: int, signed_tail: bool = True) -> np.ndarray:
    """For each path, whether all its k bits are set (False = definitely absent)."""
    bit_count, k = _bit_count(bit_count), _k(k, 8)
    view = _items(items)
    out = np.empty(view[3], dtype=np.bool_)
    _native.tsfile_op(_native.OP_CONTAINS, bitset, view, bit_count, k, bool(signed_tail), out)
    return out


def seeded_positions(value_hashes, bit_count: int, k: int) -> np.ndarray:
    """ClickHouse ``bloom_filter`` positions: ``Hash128to64(h, BF_HASH_SEEDS[i]) mod bit_count``.

    Returns:
        A uint64 array of shape (n, k).
    """
    bit_count, k = _bit_count(bit_count), _k(k, 15)
    hashes = uint64_array(value_hashes, "value_hashes").reshape(-1)
    out = np.empty((hashes.size, k), dtype=np.uint64)
    _native.seeded_op(_native.OP_POSITIONS, None, hashes, bit_count, k, out)
    return out


def seeded_add(bitset, value_hashes, bit_count: int, k: int) -> None:
    """Add value hashes to a ClickHouse ``bloom_filter`` filter."""
    bit_count, k = _bit_count(bit_count), _k(k, 15)
    hashes = uint64_array(value_hashes, "value_hashes").reshape(-1)
    _native.seeded_op(_native.OP_ADD, bitset, hashes, bit_count, k, None)


def seeded_contains(bitset, value_hashes, bit_count: int, k: int) -> np.ndarray:
    """For each value hash, whether all its k bits are set in a ``bloom_filter`` filter."""
    bit_count, k = _bit_count(bit_count), _k(k, 15)
    hashes = uint64_array(value_hashes, "value_hashes").reshape(-1)
    out = np.empty(hashes.size, dtype=np.bool_)
    _native.seeded_op(_native.OP_CONTAINS, bitset, hashes, bit_count, k, out)
    return out


def pair_positions(tokens, seed: int, bit_count: int, k: int) -> np.ndarray:
    """ClickHouse ``ngrambf_v1``/``tokenbf_v1`` positions of each token.

    ``(h1 + i*h2 + i*i) mod 2**64 mod bit_count`` with ``h1 = CityHash64WithSeed(t, seed)`` and
    ``h2 = CityHash64WithSeed(t, 845897321*seed + 217728422)``.

    Returns:
        A uint64 array of shape (n, k).
    """
    seed, bit_count = check_uint(seed, 64, "seed"), _bit_count(bit_count)
    k = _k(k, 1 << 20)
    view = _items(tokens)
    out = np.empty((view[3], k), dtype=np.uint64)
    _native.pair_op(_native.OP_POSITIONS, None, view, seed, bit_count, k, out)
    return out


def pair_add(bitset, tokens, seed: int, bit_count: int, k: int) -> None:
    """Add tokens to a ClickHouse text-index filter (``bit_count`` = 8 * size_bytes)."""
    seed, bit_count = check_uint(seed, 64, "seed"), _bit_count(bit_count)
    k = _k(k, 1 << 20)
    _native.pair_op(_native.OP_ADD, bitset, _items(tokens), seed, bit_count, k, None)


def _bounds(bounds, name: str) -> np.ndarray:
    array = np.ascontiguousarray(bounds, dtype=np.int64)
    if array.ndim != 1 or array.size < 1:
        raise ValueError(f"{name} must be a 1-D array of granule boundaries (G + 1 values)")
    return array


# Threads a granule builder uses when its caller names none (see build_threads).
_BUILD_THREADS: ContextVar[int] = ContextVar("bloomskip_build_threads", default=1)
_MAX_BUILD_THREADS = 64  # the C builders' limit


@contextmanager
def build_threads(threads: int) -> Iterator[None]:
    """Let the granule builders called in this context (and thread) use ``threads`` threads.

    :func:`bloom_filter_granules` and :func:`text_granules` split their granules into that many
    ranges and build them at once in C, without the GIL; the bytes do not depend on the count.
    The default is 1 (a caller that runs builds on its own threads keeps it so).

    Args:
        threads: 1..64.

    Raises:
        ValueError: Outside 1..64.

    Example:
        >>> with build_threads(2):
        ...     payload, offsets, rows = bloom_filter_granules([([1, 2], [0, 1, 2])], 8, 4)
        >>> rows.tolist()
        [1, 1]
    """
    token = _BUILD_THREADS.set(_threads(threads))
    try:
        yield
    finally:
        _BUILD_THREADS.reset(token)


def _threads(threads: object) -> int:
    if threads is None:
        return _BUILD_THREADS.get()
    if isinstance(threads, bool) or not isinstance(threads, int | np.integer):
        raise TypeError(f"threads must be an int, not {type(threads).__name__}")
    if not 1 <= int(threads) <= _MAX_BUILD_THREADS:
        raise ValueError(f"threads must be in 1..{_MAX_BUILD_THREADS}, got {threads}")
    return int(threads)


def _thread_argument(threads: object) -> tuple[int, ...]:
    """The builders' optional ``threads`` argument: left out for one thread, the default."""
    count = _threads(threads)
    return () if count == 1 else (count,)


def bloom_filter_granules(
    columns: Sequence[tuple[object, object]], bits_per_row: int, k: int, threads: int | None = None
) -> tuple[bytes, np.ndarray, np.ndarray]:
    """Build and serialize ClickHouse ``bloom_filter`` granules.

    Args:
        columns: One ``(value_hashes, bounds)`` per index column; granule g of a column holds
            ``value_hashes[bounds[g]:bounds[g + 1]]``. Every column has the same granule count.
        bits_per_row: From the fpr sizing table.
        k: Hash functions, 1..15.
        threads: Threads building granules at once (1..64); None: :func:`build_threads`'s.

    Returns:
        ``(payload, offsets, total_rows)``: the granules serialized back to back (VarUInt of the
        largest distinct-hash count, then one ``(bits_per_row * count + 7) // 8``-byte filter per
        column), where granule g is ``payload[offsets[g]:offsets[g + 1]]``, and each granule's
        distinct count.

    Raises:
        ValueError: Bounds that disagree with each other or with the hashes; bad sizes.
    """
    prepared = []
    granules = None
    for hashes, bounds in columns:
        bounds_array = _bounds(bounds, "bounds")
        if granules is None:
            granules = bounds_array.size - 1
        elif bounds_array.size - 1 != granules:
            raise ValueError("every index column must have the same number of granules")
        prepared.append((uint64_array(hashes, "value_hashes").reshape(-1), bounds_array))
    if granules is None:
        raise ValueError("columns must name at least one index column")
    offsets = np.empty(granules + 1, dtype=np.int64)
    total_rows = np.empty(granules, dtype=np.int64)
    payload = _native.bloom_filter_granules(
        prepared, granules, check_uint(bits_per_row, 64, "bits_per_row"), _k(k, 15), offsets,
        total_rows, *_thread_argument(threads),
    )  # fmt: skip
    return payload, offsets, total_rows


_TOKENIZERS = {
    "ngram": _native.TOKENIZER_NGRAM,
    "token": _native.TOKENIZER_TOKEN,
    "sparse_grams": _native.TOKENIZER_SPARSE_GRAMS,
}


def sparse_grams_parameter(
    min_ngram_length: int, max_ngram_length: int, min_cutoff_length: int | None = None
) -> int:
    """Pack sparse_grams' three lengths into the one ``n`` the C tokenizer takes.

    Args:
        min_ngram_length: The shortest gram in code points (3..100).
        max_ngram_length: The longest gram (min_ngram_length..100).
        min_cutoff_length: The shortest gram kept, or None for all
            (min_ngram_length..max_ngram_length).

    Returns:
        ``min | max << 16 | cutoff << 32`` (cutoff 0 when None).

    Raises:
        ValueError: The lengths are outside ClickHouse's bounds.

    Example:
        >>> sparse_grams_parameter(3, 100) == 3 | 100 << 16
        True
    """
    low, high = min_ngram_length, max_ngram_length
    cutoff = 0 if min_cutoff_length is None else min_cutoff_length
    if not (3 <= low <= high <= 100) or (cutoff and not low <= cutoff <= high):
        raise ValueError(
            f"sparse grams need 3 <= min <= max <= 100 and min <= cutoff <= max, got "
            f"({min_ngram_length}, {max_ngram_length}, {min_cutoff_length})"
        )
    return low | high << 16 | cutoff << 32


def text_granules(
    strings,
    bounds,
    tokenizer: str,
    n: int,
    size_bytes: int,
    k: int,
    seed: int,
    threads: int | None = None,
) -> np.ndarray:
    """Build ClickHouse ``ngrambf_v1`` / ``tokenbf_v1`` / ``sparse_grams`` granule filters.

    Args:
        strings: A batch of strings (Arrow string/binary array or chunked array, or a
            sequence); nulls are read as ``""`` (ClickHouse hashes the default under a NULL).
        bounds: Granule g holds ``strings[bounds[g]:bounds[g + 1]]``.
        tokenizer: ``"ngram"`` (n UTF-8 code points), ``"token"`` (runs of ASCII alphanumerics
            and bytes >= 0x80) or ``"sparse_grams"`` (ClickHouse's ``sparseGramsUTF8``).
        n: The n-gram size (ignored for tokens); for sparse grams the lengths packed by
            :func:`sparse_grams_parameter`.
        size_bytes: Filter size in bytes.
        k: Hash functions.
        seed: The index's seed.
        threads: Threads building granules at once (1..64); None: :func:`build_threads`'s.

    Returns:
        A ``(G, size_bytes)`` uint8 array, row g being granule g's filter exactly as ClickHouse
        writes it.
    """
    if tokenizer not in _TOKENIZERS:
        raise ValueError(f"tokenizer must be 'ngram', 'token' or 'sparse_grams', got {tokenizer!r}")
    if isinstance(strings, pa.ChunkedArray | pa.Array) and strings.null_count:
        strings = strings.fill_null(pa.scalar(b"", type=strings.type))
    bounds_array = _bounds(bounds, "bounds")
    size_bytes = check_uint(size_bytes, 63, "size_bytes")
    if size_bytes == 0:
        raise ValueError("size_bytes must be > 0")
    # Not zeroed here: each granule's builder clears its own rows.
    out = np.empty((bounds_array.size - 1, size_bytes), dtype=np.uint8)
    if isinstance(strings, pa.ChunkedArray) and strings.num_chunks > 1:
        # The chunks are read where they are, one after the other (no concatenated copy).
        view = [batch_view(chunk, "strings") for chunk in strings.chunks]
    else:
        view = batch_view(strings, "strings")
    _native.text_granules(
        view, bounds_array, bounds_array.size - 1, _TOKENIZERS[tokenizer],
        max(1, check_uint(n, 64, "n")), size_bytes, _k(k, 1 << 20), check_uint(seed, 64, "seed"),
        out, *_thread_argument(threads),
    )  # fmt: skip
    return out
