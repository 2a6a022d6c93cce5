"""Parquet's split-block Bloom filter (SBBF), bit for bit with parquet-format's BloomFilter.md.

The bitset is a run of 32-byte blocks, each eight little-endian 32-bit words. A value's XXH64
(seed 0, over its plain encoding: :mod:`bloomskip.parquet.values`) picks one block with its upper
half, ``((hash >> 32) * blocks) >> 32``, and one bit in each of the block's eight words with its
lower half: ``(low32 * salt[i]) >> 27`` for the eight salts of the format. The kernel is C
(``_native.sbbf_op``); hashing is C (``_native.hash_batch``); nothing here loops over values.

Example:
    >>> import pyarrow as pa
    >>> f = SplitBlockBloomFilter.sized(1000, 0.01, value_type=pa.int64())
    >>> f.update(range(0, 2000, 2))
    >>> 42 in f, f.num_bytes
    (True, 2048)
    >>> SplitBlockBloomFilter.from_bytes(f.to_bytes(), value_type=pa.int64()) == f
    True
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from bloomskip import _native
from bloomskip.errors import FormatError
from bloomskip.parquet.thrift import encode_bloom_filter_header, parse_bloom_filter_header
from bloomskip.parquet.values import ParquetValueType

__all__ = [
    "BLOCK_BYTES",
    "MAX_BYTES",
    "MIN_BYTES",
    "SplitBlockBloomFilter",
    "optimal_num_bytes",
]

BLOCK_BYTES = 32
MIN_BYTES = 32
#: arrow C++ and parquet-mr cap a filter at 128 MiB; a reader refuses more (a hostile header).
MAX_BYTES = 128 << 20


def optimal_num_bytes(ndv: int, fpp: float) -> int:
    """The bitset size arrow C++ (pyarrow) and parquet-mr choose for ``ndv`` distinct values at
    false-positive probability ``fpp``: ``-8 * ndv / ln(1 - fpp ** (1/8))`` bits, rounded up to a
    power of two, within 32 bytes .. 128 MiB.

    Raises:
        ValueError: ``ndv`` < 0 or ``fpp`` outside (0, 1).

    Example:
        >>> optimal_num_bytes(1000, 0.01), optimal_num_bytes(1000, 0.05)
        (2048, 1024)
    """
    if ndv < 0:
        raise ValueError(f"ndv must be >= 0, got {ndv}")
    if not 0.0 < fpp < 1.0:
        raise ValueError(f"fpp must be in (0, 1), got {fpp}")
    bits = -8.0 * ndv / math.log(1.0 - fpp ** (1.0 / 8))
    num_bits = min(max(int(bits), MIN_BYTES * 8), MAX_BYTES * 8)
    return 1 << (num_bits - 1).bit_length() >> 3


class SplitBlockBloomFilter:
    """A Parquet split-block Bloom filter over the values of one column.

    Args:
        num_bytes: Size of the bitset: a positive multiple of 32 (writers use powers of two),
            at most 128 MiB.
        value_type: What the values are: a :class:`ParquetValueType` (a file's column, as
            :func:`bloomskip.parquet.read_bloom_filters` gives), or an Arrow type (stored as
            pyarrow's writer stores it). Default: ``binary`` (BYTE_ARRAY; ``str`` as UTF-8).

    Raises:
        ValueError: A size that is not a positive multiple of 32 up to 128 MiB.
        UnsupportedTypeError: A value type Parquet keeps no Bloom filter for (booleans).

    Example:
        >>> f = SplitBlockBloomFilter(32)
        >>> f.add("a")
        >>> "a" in f, "b" in f, f.bits_set
        (True, False, 8)
    """

    __slots__ = ("value_type", "_bits")

    def __init__(
        self, num_bytes: int, *, value_type: ParquetValueType | pa.DataType | None = None
    ) -> None:
        if not (MIN_BYTES <= num_bytes <= MAX_BYTES and num_bytes % BLOCK_BYTES == 0):
            raise ValueError(
                f"num_bytes must be a multiple of {BLOCK_BYTES} in {MIN_BYTES}..{MAX_BYTES}, "
                f"got {num_bytes}"
            )
        self.value_type = _value_type(value_type)
        self._bits = np.zeros(num_bytes, np.uint8)

    # ------------------------------------------------------------------ construction
    @classmethod
    def sized(
        cls,
        ndv: int,
        fpp: float = 0.05,
        *,
        value_type: ParquetValueType | pa.DataType | None = None,
    ) -> SplitBlockBloomFilter:
        """An empty filter sized as the writers size one (:func:`optimal_num_bytes`).

        Example:
            >>> SplitBlockBloomFilter.sized(1_000_000).num_bytes
            1048576
        """
        return cls(optimal_num_bytes(ndv, fpp), value_type=value_type)

    @classmethod
    def from_bitset(
        cls, bitset: bytes | memoryview, *, value_type: ParquetValueType | pa.DataType | None = None
    ) -> SplitBlockBloomFilter:
        """A filter holding a copy of ``bitset`` (the bytes after a header).

        Raises:
            ValueError: As the constructor, for the bitset's length.

        Example:
            >>> SplitBlockBloomFilter.from_bitset(bytes(64)).num_bytes
            64
        """
        result = cls(len(bitset), value_type=value_type)
        result._bits[:] = np.frombuffer(bitset, np.uint8)
        return result

    @classmethod
    def from_bytes(
        cls,
        data: bytes | memoryview,
        *,
        value_type: ParquetValueType | pa.DataType | None = None,
        offset: int = 0,
        source: str | None = None,
    ) -> SplitBlockBloomFilter:
        """Parse a filter as stored in a Parquet file: ``BloomFilterHeader`` then the bitset,
        exactly ``data`` (nothing after it).

        Args:
            data: The bytes at the column chunk's ``bloom_filter_offset``.
            value_type: As the constructor.
            offset: Where ``data`` starts in its file, for error messages.
            source: The file, for error messages.

        Returns:
            The filter.

        Raises:
            FormatError: A malformed or unsupported header, a bitset over 128 MiB, or a length
                other than the header's.

        Example:
            >>> f = SplitBlockBloomFilter(32)
            >>> SplitBlockBloomFilter.from_bytes(f.to_bytes()).num_bytes
            32
        """
        num_bytes, header_length = parse_bloom_filter_header(data, offset=offset, source=source)
        check_num_bytes(num_bytes, offset, source)
        if len(data) != header_length + num_bytes:
            raise FormatError(
                f"the header says {num_bytes} bytes of bitset, the bytes hold "
                f"{len(data) - header_length}",
                field="bitset",
                offset=offset + header_length,
                source=source,
            )
        return cls.from_bitset(memoryview(data)[header_length:], value_type=value_type)

    def to_bytes(self) -> bytes:
        """The filter as a Parquet file stores it: ``BloomFilterHeader`` then the bitset.

        Example:
            >>> len(SplitBlockBloomFilter(32).to_bytes())
            47
        """
        return encode_bloom_filter_header(self.num_bytes) + self._bits.tobytes()

    @property
    def bitset(self) -> bytes:
        """The bitset bytes (a copy)."""
        return self._bits.tobytes()

    # ------------------------------------------------------------------ adding and testing
    def add(self, value: Any) -> None:
        """Add one value (a null adds nothing: Parquet filters hold non-null values only)."""
        self.add_hashes(self.value_type.hash([value]))

    def update(self, *others: SplitBlockBloomFilter | Iterable[Any]) -> None:
        """Add each argument's values, like :meth:`set.update`.

        Args:
            *others: Each a filter (merged in as by ``|=``), or values: an Arrow array, a
                chunked array, or an iterable of Python values (nulls are skipped).

        Raises:
            ValueError: A filter argument of another size.
            UnsupportedTypeError: Values that do not convert to the filter's value type.

        Example:
            >>> f = SplitBlockBloomFilter(64)
            >>> f.update(["x", "y"])
            >>> f.contains_batch(["x", "z"]).tolist()
            [True, False]
        """
        for other in others:
            if isinstance(other, SplitBlockBloomFilter):
                self |= other
            else:
                values = other if isinstance(other, pa.Array | pa.ChunkedArray) else list(other)
                self.add_hashes(self.value_type.hash(values))

    def add_hashes(self, hashes: np.ndarray) -> None:
        """Set the bits of values given by their XXH64 hashes (a uint64 array)."""
        _native.sbbf_op(_native.OP_ADD, self._bits, np.ascontiguousarray(hashes, np.uint64), None)

    def contains_hashes(self, hashes: np.ndarray) -> np.ndarray:
        """A bool per XXH64 hash: False where that value is certainly absent."""
        hashes = np.ascontiguousarray(hashes, np.uint64)
        out = np.empty(len(hashes), np.uint8)
        _native.sbbf_op(_native.OP_CONTAINS, self._bits, hashes, out)
        return out.view(bool)

    def contains_batch(self, values: Any) -> np.ndarray:
        """A bool per value: False where the value is certainly not in the column chunk.

        Nulls give False (a filter holds no nulls).

        Raises:
            UnsupportedTypeError: Values that do not convert to the filter's value type.
        """
        view, valid = self.value_type.encode(values)
        hashes = np.empty(view[3], np.uint64)
        _native.hash_batch(_native.HASH_XXH64, view, 0, False, hashes, None)
        found = self.contains_hashes(hashes)
        if valid is None:
            return found
        result = np.zeros(len(valid), bool)
        result[valid] = found
        return result

    def __contains__(self, value: object) -> bool:
        """False only when ``value`` is certainly absent (so is a null, or a value that does
        not convert to the column's type)."""
        try:
            return bool(self.contains_batch([value])[0])
        except (TypeError, ValueError):
            return False

    # ------------------------------------------------------------------ set operations
    def _check_compatible(self, other: object) -> SplitBlockBloomFilter:
        if not isinstance(other, SplitBlockBloomFilter):
            raise TypeError(f"cannot combine a SplitBlockBloomFilter with {type(other).__name__}")
        if other.num_bytes != self.num_bytes:
            raise ValueError(
                f"filters of {self.num_bytes} and {other.num_bytes} bytes cannot be combined: "
                "a value's block depends on the size"
            )
        return other

    def __or__(self, other: SplitBlockBloomFilter) -> SplitBlockBloomFilter:
        """The union: a filter that holds the values of both (same size required)."""
        result = self.copy()
        result |= other
        return result

    def __ior__(self, other: SplitBlockBloomFilter) -> SplitBlockBloomFilter:
        np.bitwise_or(self._bits, self._check_compatible(other)._bits, out=self._bits)
        return self

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, SplitBlockBloomFilter)
            and other.num_bytes == self.num_bytes
            and bool(np.array_equal(self._bits, other._bits))
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, like a set

    def copy(self) -> SplitBlockBloomFilter:
        """An independent copy."""
        result = SplitBlockBloomFilter.__new__(SplitBlockBloomFilter)
        result.value_type = self.value_type
        result._bits = self._bits.copy()
        return result

    def __bool__(self) -> bool:
        """False when no bit is set (the filter holds no value)."""
        return bool(self._bits.any())

    # ------------------------------------------------------------------ statistics
    @property
    def num_bytes(self) -> int:
        """The bitset's size in bytes."""
        return int(self._bits.size)

    @property
    def bits_set(self) -> int:
        """The number of bits set."""
        return int(_native.popcount(self._bits))

    @property
    def fill_ratio(self) -> float:
        """The fraction of bits set."""
        return self.bits_set / (8 * self.num_bytes)

    @property
    def estimated_fpr(self) -> float:
        """The probability that a value not in the filter passes it, from the bits themselves:
        the mean over blocks of the product of each word's fill (an absent value tests one bit
        per word of one block, uniformly).

        Example:
            >>> SplitBlockBloomFilter(32).estimated_fpr
            0.0
        """
        words = self._bits.view("<u4").reshape(-1, 8)
        fills = np.bitwise_count(words).astype(np.float64) / 32.0
        return float(np.prod(fills, axis=1).mean())

    @property
    def estimated_items(self) -> float:
        """An estimate of the distinct values added, from the fill of each word (each value
        sets one bit in each of the eight words of one block): ``-B * 32 * ln(1 - fill)``
        per word, averaged over the eight words; ``inf`` when a word position is full
        everywhere."""
        words = self._bits.view("<u4").reshape(-1, 8)
        fill = np.bitwise_count(words).sum(axis=0) / (32.0 * len(words))
        if np.any(fill >= 1.0):
            return math.inf
        return float(np.mean(-len(words) * 32.0 * np.log1p(-fill)))

    def __repr__(self) -> str:
        return (
            f"SplitBlockBloomFilter({self.num_bytes} bytes, {self.value_type.physical_type}, "
            f"fill {self.fill_ratio:.3f}, estimated fpr {self.estimated_fpr:.3g})"
        )


def check_num_bytes(num_bytes: int, offset: int, source: str | None) -> None:
    """Refuse a header's size above 128 MiB before anything that size is allocated or read.

    Raises:
        FormatError: ``num_bytes`` over :data:`MAX_BYTES`.
    """
    if num_bytes > MAX_BYTES:
        raise FormatError(
            f"numBytes is {num_bytes}, more than the {MAX_BYTES} bytes writers allow",
            field="BloomFilterHeader.numBytes",
            offset=offset,
            source=source,
        )


def _value_type(value_type: ParquetValueType | pa.DataType | None) -> ParquetValueType:
    if value_type is None:
        return ParquetValueType("BYTE_ARRAY", pa.binary())
    if isinstance(value_type, ParquetValueType):
        return value_type
    if isinstance(value_type, pa.DataType):
        return ParquetValueType.for_arrow(value_type)
    raise TypeError(
        "value_type must be a ParquetValueType or a pyarrow DataType, "
        f"not {type(value_type).__name__}"
    )
