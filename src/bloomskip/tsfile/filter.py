"""TsFile's Bloom filter: sizing, adding and testing paths, and its serialized form.

A filter is ``bit_count`` logical bits and ``hash_function_count`` (k <= 8) hash functions; path
``p`` sets bits ``abs(hash32(p, SEEDS[i])) % bit_count`` for ``i < k`` (``hash32 == -2**31``
counts as 0). Serialized as ``UVarInt byte_length | bits | UVarInt bit_count | UVarInt k`` with
the bits LSB-first and trailing zero bytes omitted (``byte_length == 0``: no filter, and the last
two fields are absent).

The :data:`~bloomskip.tsfile.hash.HashVariant` of a filter says which hash its paths are added
with, and which it is queried with: ``both`` adds the bits of both tails and answers "maybe" when
either variant's bits are all set -- the safe reading of a filter whose writer is unknown.

Example:
    >>> f = BloomFilter.sized(1000, 0.05)
    >>> f.bit_count, f.hash_function_count
    (6236, 5)
    >>> f.add("root.sg.d1.s1")
    >>> "root.sg.d1.s1" in f, "root.sg.d1.s2" in f
    (True, False)
    >>> BloomFilter.from_bytes(f.to_bytes()) == f
    True
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from bloomskip import bits
from bloomskip.tsfile.codec import INT32_MAX, ByteCursor, encode_uvarint
from bloomskip.tsfile.hash import (
    MAX_HASH_FUNCTIONS,
    HashVariant,
    signed_tail_flags,
    variants_differ,
)
from bloomskip.tsfile.paths import DEFAULT_CHARSET, encode_path, encode_paths

#: The writers' bounds (Java TSFileConfig / C++ config) and defaults.
MIN_ERROR_RATE = 0.01
MAX_ERROR_RATE = 0.1
DEFAULT_ERROR_RATE = 0.05
MINIMAL_BIT_COUNT = 256

PathLike = str | bytes | bytearray | memoryview


def writer_sizing(number_of_paths: int, error_rate: float = DEFAULT_ERROR_RATE) -> tuple[int, int]:
    """Size a filter exactly like Java ``BloomFilter.getEmptyBloomFilter``.

    The error rate is clamped to 0.01 .. 0.1, ``bit_count = max(256, int(-n ln e / ln2 / ln2) + 1)``
    and ``k = min(8, int(-ln e / ln 2) + 1)``.

    Args:
        number_of_paths: How many paths the filter is meant for (n >= 0).
        error_rate: The target false-positive rate.

    Returns:
        ``(bit_count, hash_function_count)``.

    Raises:
        ValueError: n is negative or too large for a 31-bit bit count, or the rate is not finite.

    Example:
        >>> writer_sizing(100), writer_sizing(10, 0.01)
        ((624, 5), (256, 7))
    """
    if number_of_paths < 0:
        raise ValueError(f"number_of_paths must be >= 0, got {number_of_paths}")
    if not math.isfinite(error_rate):
        raise ValueError(f"error_rate must be a finite number, got {error_rate}")
    rate = min(max(error_rate, MIN_ERROR_RATE), MAX_ERROR_RATE)
    # Same operation order as the Java expression, so the truncation lands on the same integer.
    size = int(-number_of_paths * math.log(rate) / math.log(2) / math.log(2)) + 1
    hash_count = int(-math.log(rate) / math.log(2)) + 1
    if size > INT32_MAX:
        raise ValueError(f"{number_of_paths} paths need more than 2**31 - 1 bits")
    return max(MINIMAL_BIT_COUNT, size), min(MAX_HASH_FUNCTIONS, hash_count)


class BloomFilter:
    """A TsFile Bloom filter over series paths.

    Args:
        bit_count: Logical number of bits (1 .. 2**31 - 1).
        hash_function_count: Number of hash functions, 1 .. 8.
        variant: Tail variant used to add and test paths (see the module docstring).
        charset: Charset that turns ``str`` paths into the hashed bytes.

    Raises:
        ValueError: A parameter is out of range.

    Example:
        >>> f = BloomFilter(256, 5)
        >>> f.update(["root.sg.d1.s1", "root.sg.d1.s2"])
        >>> f.contains_batch(["root.sg.d1.s1", "root.sg.d9.s9"]).tolist()
        [True, False]
    """

    __slots__ = ("bit_count", "hash_function_count", "variant", "charset", "_bits")

    def __init__(
        self,
        bit_count: int,
        hash_function_count: int,
        *,
        variant: HashVariant = "signed-tail",
        charset: str = DEFAULT_CHARSET,
    ) -> None:
        if not 1 <= bit_count <= INT32_MAX:
            raise ValueError(f"bit_count must be in 1 .. 2**31 - 1, got {bit_count}")
        if not 1 <= hash_function_count <= MAX_HASH_FUNCTIONS:
            raise ValueError(
                f"hash_function_count must be in 1 .. {MAX_HASH_FUNCTIONS}, "
                f"got {hash_function_count}"
            )
        signed_tail_flags(variant)
        self.bit_count = bit_count
        self.hash_function_count = hash_function_count
        self.variant: HashVariant = variant
        self.charset = charset
        self._bits = np.zeros((bit_count + 7) // 8, dtype=np.uint8)

    # ------------------------------------------------------------------ construction
    @classmethod
    def sized(
        cls,
        number_of_paths: int,
        error_rate: float = DEFAULT_ERROR_RATE,
        *,
        variant: HashVariant = "signed-tail",
        charset: str = DEFAULT_CHARSET,
    ) -> BloomFilter:
        """Return an empty filter sized like the writers for ``number_of_paths`` paths.

        Example:
            >>> BloomFilter.sized(1000).bit_count
            6236
        """
        bit_count, hash_count = writer_sizing(number_of_paths, error_rate)
        return cls(bit_count, hash_count, variant=variant, charset=charset)

    @classmethod
    def for_paths(
        cls,
        paths: Any,
        error_rate: float = DEFAULT_ERROR_RATE,
        *,
        variant: HashVariant = "signed-tail",
        charset: str = DEFAULT_CHARSET,
    ) -> BloomFilter:
        """Return a writer-sized filter holding ``paths``.

        With ``variant="both"`` a path whose two tail variants differ sets two sets of bits, so
        it is counted twice when sizing.

        Args:
            paths: A batch of path texts or encoded paths.
            error_rate: The target false-positive rate.
            variant: ``signed-tail``, ``unsigned-tail`` or ``both``.
            charset: The path charset.

        Returns:
            The filled filter.

        Example:
            >>> BloomFilter.for_paths(["root.sg.d1.s1"]).bits_set
            5
        """
        batch = encode_paths(_listify(paths), charset)
        count = len(batch)
        if variant == "both" and count:
            count += int(np.count_nonzero(variants_differ(batch)))
        result = cls.sized(count, error_rate, variant=variant, charset=charset)
        result._add_encoded(batch)
        return result

    # ------------------------------------------------------------------ (de)serialization
    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        *,
        variant: HashVariant = "both",
        charset: str = DEFAULT_CHARSET,
        source: str | None = None,
    ) -> BloomFilter:
        """Parse a serialized filter (exactly ``data``, nothing after it).

        Args:
            data: ``UVarInt byte_length | bits | UVarInt bit_count | UVarInt k``.
            variant: How to query it; ``both`` (default) since bytes do not say who wrote them.
            charset: The path charset.
            source: Label for error messages.

        Returns:
            The filter.

        Raises:
            FormatError: Any validation rule fails, ``byte_length`` is 0 (no filter), or bytes
                follow the filter.

        Example:
            >>> BloomFilter.from_bytes(bytes.fromhex("01018002" "05")).bits_set
            1
        """
        cursor = ByteCursor(data, source=source)
        result = decode_filter(cursor, variant=variant, charset=charset)
        if result is None:
            raise cursor.error("byte_length is 0: the bytes hold no Bloom filter", "byte_length", 0)
        if cursor.remaining:
            raise cursor.error(f"{cursor.remaining} unexpected bytes after the filter", "end")
        return result

    @classmethod
    def from_stored_bits(
        cls,
        stored: bytes,
        bit_count: int,
        hash_function_count: int,
        *,
        variant: HashVariant = "both",
        charset: str = DEFAULT_CHARSET,
    ) -> BloomFilter:
        """Wrap bit bytes as stored in a file, whose fields the caller has already validated.

        Args:
            stored: The bit bytes (LSB-first, possibly without trailing zero bytes).
            bit_count: 1 .. 2**31 - 1, with ``len(stored) <= ceil(bit_count / 8)``.
            hash_function_count: 1 .. 8.
            variant: How to query it.
            charset: The path charset.

        Returns:
            The filter (holding a copy of ``stored``).

        Example:
            >>> BloomFilter.from_stored_bits(b"\x01", 256, 5).set_positions().tolist()
            [0]
        """
        result = cls.__new__(cls)
        result.bit_count = bit_count
        result.hash_function_count = hash_function_count
        result.variant = variant
        result.charset = charset
        result._bits = np.frombuffer(stored, dtype=np.uint8).copy()
        return result

    def to_bytes(self) -> bytes:
        """Serialize as the spec does: trailing zero bytes omitted, ``b"\\x00"`` if no bit is set.

        Example:
            >>> BloomFilter(256, 5).to_bytes()
            b'\\x00'
        """
        stored = self.serialized_bits()
        if not stored:
            return encode_uvarint(0)
        return (
            encode_uvarint(len(stored))
            + stored
            + encode_uvarint(self.bit_count)
            + encode_uvarint(self.hash_function_count)
        )

    def serialized_bits(self) -> bytes:
        """Return the bit bytes as stored in a file (LSB-first, no trailing zero bytes)."""
        nonzero = np.flatnonzero(self._bits)
        return self._bits[: int(nonzero[-1]) + 1].tobytes() if nonzero.size else b""

    # ------------------------------------------------------------------ adding and testing
    def add(self, path: PathLike) -> None:
        """Add one path (``str`` is encoded with the filter's charset)."""
        self._add_encoded([encode_path(path, self.charset)])

    def update(self, *others: BloomFilter | Iterable[Any]) -> None:
        """Add the paths of each argument, like :meth:`set.update`.

        Args:
            *others: Each a filter (merged in as by ``|=``), or a batch of paths (a sequence or
                iterable of str/bytes, or a pyarrow string/binary array).

        Raises:
            ValueError: A filter argument differs in shape (see :meth:`__or__`).

        Example:
            >>> f, g = BloomFilter(256, 5), BloomFilter(256, 5)
            >>> g.add("root.sg.d1.s2")
            >>> f.update(["root.sg.d1.s1"], g)
            >>> "root.sg.d1.s1" in f, "root.sg.d1.s2" in f
            (True, True)
        """
        for other in others:
            if isinstance(other, BloomFilter):
                self |= other
            else:
                self._add_encoded(encode_paths(_listify(other), self.charset))

    def __contains__(self, path: object) -> bool:
        """Return False only when the path is definitely absent under the filter's variant(s).

        Anything but a str or bytes-like path is absent.
        """
        if not isinstance(path, (str, bytes, bytearray, memoryview)):
            return False
        return bool(self.contains_batch([encode_path(path, self.charset)])[0])

    def __bool__(self) -> bool:
        """Return False when no bit below ``bit_count`` is set (the filter holds no path)."""
        return self.bits_set > 0

    def clear(self) -> None:
        """Remove every path: unset all bits (the shape, variant and charset stay).

        Example:
            >>> f = BloomFilter.for_paths(["root.sg.d1.s1"])
            >>> f.clear()
            >>> bool(f), f.to_bytes()
            (False, b'\\x00')
        """
        self._bits.fill(0)

    def contains_batch(self, paths: Any) -> np.ndarray:
        """Return a bool array: False where a path is definitely absent under every variant."""
        batch = encode_paths(_listify(paths), self.charset)
        result = np.zeros(len(batch), dtype=bool)
        for signed_tail in signed_tail_flags(self.variant):
            result |= self._contains_encoded(batch, signed_tail)
        return result

    def contains_with(self, paths: Any, signed_tail: bool) -> np.ndarray:
        """Return the filter check of one tail variant alone, as that kind of reader does it.

        Example:
            >>> f = BloomFilter(256, 5, variant="unsigned-tail")
            >>> f.add("root.设备.s1")
            >>> f.contains_with(["root.设备.s1"], signed_tail=True).tolist()
            [False]
        """
        return self._contains_encoded(encode_paths(_listify(paths), self.charset), signed_tail)

    def positions(self, path: PathLike, signed_tail: bool = True) -> list[int]:
        """Return the k bit positions of one path under one tail variant.

        Example:
            >>> BloomFilter(256, 5).positions("root.sg.d1.s1")
            [17, 202, 201, 94, 190]
        """
        matrix = bits.tsfile_positions(
            [encode_path(path, self.charset)], self.bit_count, self.hash_function_count, signed_tail
        )
        return [int(position) for position in matrix[0]]

    def positions_batch(self, paths: Any, signed_tail: bool = True) -> np.ndarray:
        """Return the ``(n, k)`` int64 bit positions of a batch of paths under one variant."""
        batch = encode_paths(_listify(paths), self.charset)
        if len(batch) == 0:
            return np.zeros((0, self.hash_function_count), dtype=np.int64)
        return np.asarray(
            bits.tsfile_positions(batch, self.bit_count, self.hash_function_count, signed_tail),
            dtype=np.int64,
        )

    def set_positions(self) -> np.ndarray:
        """Return the sorted positions (below ``bit_count``) of the set bits.

        Example:
            >>> f = BloomFilter(256, 5)
            >>> f.add("root.sg.d1.s1")
            >>> f.set_positions().tolist()
            [17, 94, 190, 201, 202]
        """
        positions = np.flatnonzero(np.unpackbits(self._bits, bitorder="little"))
        return positions[positions < self.bit_count].astype(np.int64)

    def _contains_encoded(self, batch: Any, signed_tail: bool) -> np.ndarray:
        if len(batch) == 0:
            return np.zeros(0, dtype=bool)
        return np.asarray(
            bits.tsfile_contains(
                self._bits, batch, self.bit_count, self.hash_function_count, signed_tail
            ),
            dtype=bool,
        )

    def _add_encoded(self, batch: Any) -> None:
        if len(batch) == 0:
            return
        self._ensure_full_length()
        for signed_tail in signed_tail_flags(self.variant):
            bits.tsfile_add(
                self._bits, batch, self.bit_count, self.hash_function_count, signed_tail
            )

    def _ensure_full_length(self) -> None:
        # A filter read from a file keeps only the stored bytes; grow it before setting bits.
        full = (self.bit_count + 7) // 8
        if len(self._bits) < full:
            grown = np.zeros(full, dtype=np.uint8)
            grown[: len(self._bits)] = self._bits
            self._bits = grown

    # ------------------------------------------------------------------ set algebra
    def _check_compatible(self, other: BloomFilter) -> None:
        if (self.bit_count, self.hash_function_count) != (
            other.bit_count,
            other.hash_function_count,
        ):
            raise ValueError(
                "filters differ in shape: "
                f"({self.bit_count} bits, k={self.hash_function_count}) vs "
                f"({other.bit_count} bits, k={other.hash_function_count})"
            )

    def _padded_pair(self, other: BloomFilter) -> tuple[np.ndarray, np.ndarray]:
        length = max(len(self._bits), len(other._bits))
        return _padded(self._bits, length), _padded(other._bits, length)

    def __or__(self, other: BloomFilter) -> BloomFilter:
        """Return the union; variants that differ give ``both``."""
        if not isinstance(other, BloomFilter):
            return NotImplemented
        result = self.copy()
        result |= other
        return result

    def __ior__(self, other: BloomFilter) -> BloomFilter:
        if not isinstance(other, BloomFilter):
            return NotImplemented
        self._check_compatible(other)
        mine, theirs = self._padded_pair(other)
        self._bits = np.frombuffer(bits.union(mine, theirs), dtype=np.uint8).copy()
        if other.variant != self.variant:
            self.variant = "both"
        return self

    def __and__(self, other: BloomFilter) -> BloomFilter:
        """Return the intersection: the bits set in both filters.

        It over-approximates the intersection of the two path sets: a path added to both
        filters is always in ``a & b`` (no false negative), and a path in only one of them may
        be too, more often than in a filter built from the common paths alone. A filter read with
        :meth:`from_bytes` is queried with ``both`` because bytes do not name their writer:
        intersect two of them only when their writers used the same tail variant.

        Args:
            other: A filter of the same shape, hash variant and charset (otherwise a path added
                to both may set different bits in each, and the intersection would lose it).

        Returns:
            A new filter with this filter's variant and charset.

        Raises:
            ValueError: The shape, the variant or the charset differ.

        Example:
            >>> a = BloomFilter.for_paths(["root.sg.d1.s1", "root.sg.d1.s2"])
            >>> b = BloomFilter.for_paths(["root.sg.d1.s1"], 0.05)
            >>> "root.sg.d1.s1" in a & b
            True
        """
        if not isinstance(other, BloomFilter):
            return NotImplemented
        result = self.copy()
        result &= other
        return result

    def __iand__(self, other: BloomFilter) -> BloomFilter:
        if not isinstance(other, BloomFilter):
            return NotImplemented
        self._check_compatible(other)
        if (self.variant, self.charset) != (other.variant, other.charset):
            raise ValueError(
                "filters hash paths differently: "
                f"(variant={self.variant!r}, charset={self.charset!r}) vs "
                f"(variant={other.variant!r}, charset={other.charset!r})"
            )
        mine, theirs = self._padded_pair(other)
        self._bits = np.bitwise_and(mine, theirs)
        return self

    def issubset(self, other: BloomFilter) -> bool:
        """Return True when every bit set here is set in ``other``.

        Args:
            other: A filter of the same shape.

        Returns:
            Whether ``other`` covers this filter's bits (then every path that may be in this
            filter may be in ``other``).

        Raises:
            ValueError: The shapes differ.

        Example:
            >>> small = BloomFilter.for_paths(["root.sg.d1.s1"])
            >>> big = small | BloomFilter.for_paths(["root.sg.d1.s2"])
            >>> small <= big, small >= big
            (True, False)
        """
        self._check_compatible(other)
        mine, theirs = self._padded_pair(other)
        return bool(bits.covers(theirs, mine))

    def issuperset(self, other: BloomFilter) -> bool:
        """Return True when every bit set in ``other`` is set here (see :meth:`issubset`)."""
        return other.issubset(self)

    def __le__(self, other: BloomFilter) -> bool:
        """``a <= b`` is ``a.issubset(b)``."""
        if not isinstance(other, BloomFilter):
            return NotImplemented
        return self.issubset(other)

    def __ge__(self, other: BloomFilter) -> bool:
        """``a >= b`` is ``a.issuperset(b)``."""
        if not isinstance(other, BloomFilter):
            return NotImplemented
        return self.issuperset(other)

    def __eq__(self, other: object) -> bool:
        """Equal shape and equal bits (the variant and charset are how to query, not content)."""
        if not isinstance(other, BloomFilter):
            return NotImplemented
        return (
            self.bit_count == other.bit_count
            and self.hash_function_count == other.hash_function_count
            and self.serialized_bits() == other.serialized_bits()
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def copy(self) -> BloomFilter:
        """Return an independent copy."""
        clone = BloomFilter.__new__(BloomFilter)
        clone.bit_count = self.bit_count
        clone.hash_function_count = self.hash_function_count
        clone.variant = self.variant
        clone.charset = self.charset
        clone._bits = self._bits.copy()
        return clone

    # ------------------------------------------------------------------ statistics
    @property
    def byte_length(self) -> int:
        """Length of the stored bit bytes (trailing zero bytes omitted)."""
        return len(self.serialized_bits())

    @property
    def bits_set(self) -> int:
        """Number of set bits below ``bit_count``."""
        total = int(bits.popcount(self._bits))
        spare = len(self._bits) * 8 - self.bit_count
        if spare > 0:
            # Bits past bit_count in the last byte can only come from a foreign writer; no
            # position ever reaches them, so they do not count.
            total -= int(self._bits[-1] >> (8 - spare)).bit_count()
        return total

    @property
    def fill_ratio(self) -> float:
        """Fraction of the logical bits that are set."""
        return self.bits_set / self.bit_count

    @property
    def estimated_fpr(self) -> float:
        """False-positive rate implied by the fill: ``fill_ratio ** k`` (for one variant)."""
        return self.fill_ratio**self.hash_function_count

    @property
    def estimated_items(self) -> float:
        """Number of (path, variant) insertions implied by the fill: ``-m/k ln(1 - X/m)``."""
        if self.bits_set >= self.bit_count:
            return math.inf
        return -self.bit_count / self.hash_function_count * math.log1p(-self.fill_ratio)

    def __repr__(self) -> str:
        return (
            f"BloomFilter(bit_count={self.bit_count}, hash_function_count="
            f"{self.hash_function_count}, variant={self.variant!r}, bits_set={self.bits_set})"
        )


class PathProbe:
    """One path prepared for testing against many filters (``find`` over thousands of files).

    The bit positions of a path depend only on the filter's shape ``(bit_count, k)``, which
    files written with the same sizing share, so they are computed once per shape and variant.

    A ``str`` path is probed in ``charset`` and also in UTF-8: only Java hashes the platform
    charset, the C++ writer (PyPI ``tsfile``) always hashes UTF-8, and a file does not say which
    wrote it, so ruling a path out takes both.

    Args:
        path: The path text (or its encoded bytes).
        variant: ``both`` (default: "maybe" if either variant's bits are all set),
            ``signed-tail`` or ``unsigned-tail``.
        charset: Charset for a ``str`` path (Java's platform charset).

    Example:
        >>> f = BloomFilter(256, 5, variant="unsigned-tail")
        >>> f.add("root.sg.设备.温度")
        >>> PathProbe("root.sg.设备.温度").might_be_in(f)
        True
        >>> PathProbe("root.sg.设备.温度", variant="signed-tail").might_be_in(f)
        False
    """

    __slots__ = ("path", "encodings", "signed_tails", "_masks")

    def __init__(
        self, path: PathLike, *, variant: HashVariant = "both", charset: str = DEFAULT_CHARSET
    ) -> None:
        self.path = path
        #: The hashed bytes of the path: in ``charset``, then in UTF-8 if those differ.
        self.encodings = tuple(
            dict.fromkeys((encode_path(path, charset), encode_path(path, DEFAULT_CHARSET)))
        )
        #: The ``signed_tail`` flag of each probed variant.
        self.signed_tails = signed_tail_flags(variant)
        self._masks: dict[tuple[int, int], tuple[tuple[tuple[int, int], ...], ...]] = {}

    def might_be_in(self, bloom_filter: BloomFilter) -> bool:
        """Return False only when the filter rules the path out under every probed variant."""
        stored = bloom_filter._bits
        return self.might_be_in_stored(
            stored, 0, len(stored), bloom_filter.bit_count, bloom_filter.hash_function_count
        )

    def might_be_in_stored(
        self, data: Any, start: int, byte_length: int, bit_count: int, hash_function_count: int
    ) -> bool:
        """Test a filter still in the bytes read from a file, without building a BloomFilter.

        Args:
            data: Bytes holding the filter's stored bits at ``start``.
            start: Where the bits start in ``data``.
            byte_length: How many bit bytes are stored (absent bytes are zero).
            bit_count: The filter's bit count (validated by the caller, >= 1).
            hash_function_count: The filter's k (validated by the caller, 1 .. 8).

        Returns:
            False only when the filter rules the path out under every probed variant.

        Example:
            >>> PathProbe("root.sg.d1.s1").might_be_in_stored(bytes(32), 0, 32, 256, 5)
            False
        """
        shape = (bit_count, hash_function_count)
        per_variant = self._masks.get(shape)
        if per_variant is None:
            masks = (
                tuple((position >> 3, 1 << (position & 7)) for position in row)
                for signed_tail in self.signed_tails
                for row in bits.tsfile_positions(list(self.encodings), *shape, signed_tail).tolist()
            )
            # Both tails (and charsets) give the same bits unless a byte >= 0x80 lands in the
            # tail (or the path is ASCII): test once.
            per_variant = tuple(dict.fromkeys(masks))
            self._masks[shape] = per_variant
        for masks in per_variant:
            for index, mask in masks:
                if index >= byte_length or not data[start + index] & mask:
                    break
            else:
                return True
        return False


def decode_filter(
    cursor: ByteCursor,
    *,
    version: int = 4,
    variant: HashVariant = "both",
    charset: str = DEFAULT_CHARSET,
) -> BloomFilter | None:
    """Read a serialized filter at the cursor, validating every rule of the spec.

    The cursor's end is the end of the enclosing TsFileMetadata: a bit vector reaching past it
    is rejected. Format v3 always stores ``bit_count`` and ``k``, even after ``byte_length`` 0.

    Args:
        cursor: Positioned at ``byte_length``.
        version: The TsFile format version (3 or 4).
        variant: Query variant for the returned filter.
        charset: Path charset for the returned filter.

    Returns:
        The filter, or None when ``byte_length`` is 0 (the file has no filter).

    Raises:
        FormatError: Naming the field and offset of the first rule that fails.

    Example:
        >>> decode_filter(ByteCursor(b"\\x00")) is None
        True
    """
    length_offset = cursor.offset
    byte_length = cursor.uvarint("bloom_filter.byte_length")
    if byte_length > cursor.remaining:
        raise cursor.error(
            f"bit vector of {byte_length} bytes crosses the TsFileMetadata boundary "
            f"({cursor.remaining} bytes remain)",
            "bloom_filter.bits",
        )
    stored = cursor.take(byte_length, "bloom_filter.bits")
    if byte_length == 0 and version >= 4:
        return None
    count_offset = cursor.offset
    bit_count = cursor.uvarint("bloom_filter.bit_count")
    hash_offset = cursor.offset
    hash_count = cursor.uvarint("bloom_filter.hash_function_count")
    if byte_length == 0:
        return None
    if bit_count <= 0:
        raise cursor.error(
            "bit_count must be positive, got 0", "bloom_filter.bit_count", count_offset
        )
    if not 1 <= hash_count <= MAX_HASH_FUNCTIONS:
        raise cursor.error(
            f"hash_function_count must be in 1..{MAX_HASH_FUNCTIONS}, got {hash_count}",
            "bloom_filter.hash_function_count",
            hash_offset,
        )
    if byte_length > (bit_count + 7) // 8:
        raise cursor.error(
            f"byte_length {byte_length} exceeds ceil(bit_count / 8) = {(bit_count + 7) // 8}",
            "bloom_filter.byte_length",
            length_offset,
        )
    return BloomFilter.from_stored_bits(
        stored, bit_count, hash_count, variant=variant, charset=charset
    )


def _padded(array: np.ndarray, length: int) -> np.ndarray:
    if len(array) == length:
        return array
    grown = np.zeros(length, dtype=np.uint8)
    grown[: len(array)] = array
    return grown


def _listify(paths: Any) -> Any:
    # Batches the kernels read directly pass through; other iterables (generators, sets)
    # become a list so that they can be measured and read once per hash variant.
    if isinstance(paths, (list, tuple, np.ndarray)) or hasattr(paths, "type"):
        return paths
    return list(paths)
