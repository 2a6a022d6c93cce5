"""The granules of a ClickHouse skip index and the probes a condition runs on them.

ClickHouse keeps an index granule apart from the index and the condition
(``MergeTreeIndexGranuleBloomFilter``, ``MergeTreeIndexGranuleFullText``): the condition tests
granules and never sees the index. Here one object holds *all* granules of an index, so every
probe runs over every granule at once (no per-granule Python loop):

* :class:`BloomFilterGranules` (``bloom_filter``): granule j is ``VarUInt total_rows`` and then,
  per index column, a filter of ``(bits_per_row * total_rows + 7) // 8`` bytes; it answers
  :meth:`~BloomFilterGranules.hashes_present` for value hashes.
* :class:`TextGranules` (``ngrambf_v1`` / ``tokenbf_v1``): per column exactly ``size_bytes``
  bytes; it answers :meth:`~TextGranules.token_sets_present` for token lists.

Both are sequences of :class:`Granule`, and ``value in granule`` hashes (or tokenizes) one value
with the code that builds the index, so it answers whether a row holding it may be in the
granule.

Example:
    >>> from bloomskip.clickhouse.ddl import parse_index_definition
    >>> d = parse_index_definition("s TYPE tokenbf_v1(64, 2, 0)")
    >>> granules = TextGranules(d, np.zeros((2, 64), np.uint8), ["String"])
    >>> len(granules), "error" in granules[0]
    (2, False)
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from bloomskip.errors import FormatError

if TYPE_CHECKING:
    import pyarrow as pa

    from bloomskip.clickhouse.ddl import IndexDefinition

__all__ = ["BloomFilterGranules", "Granule", "Granules", "IndexedGranules", "TextGranules"]

# bloomskip.bits (which loads pyarrow) is imported where a probe runs, so that importing the
# condition compiler for a CLI command stays as cheap as before.

# ClickHouse's readVarUInt reads at most 9 bytes (values below 2**63).
_MAX_VARUINT_BYTES = 9
_PROBE_BATCH = 1 << 22  # bit positions tested per bits.test_bits call


class Granules(Sequence):
    """All granules of one skip index, probed together; ``granules[j]`` is a :class:`Granule`.

    Use :class:`BloomFilterGranules` or :class:`TextGranules`.

    Attributes:
        definition: The index definition.
        index_column_types: ClickHouse type of each index column, or None when unknown (then
            ``value in granule`` cannot hash a value).
    """

    def __init__(
        self, definition: IndexDefinition, index_column_types: Sequence[str] | None
    ) -> None:
        self.definition = definition
        self.index_column_types = (
            tuple(index_column_types) if index_column_types is not None else None
        )
        self._filter_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @abstractmethod
    def __len__(self) -> int:
        """Number of granules."""

    @property
    def column_count(self) -> int:
        """Number of index columns (filters per granule)."""
        return len(self.definition.expressions)

    def __getitem__(self, j: int) -> Granule:
        """Granule ``j`` (negative numbers count from the end).

        Raises:
            IndexError: ``j`` out of range.
            TypeError: ``j`` is not an integer.
        """
        if isinstance(j, slice) or not isinstance(j, int | np.integer):
            raise TypeError(f"granule numbers are integers, got {type(j).__name__}")
        count = len(self)
        number = int(j) + count if j < 0 else int(j)
        if not 0 <= number < count:
            raise IndexError(f"index granule {j} out of range 0..{count - 1}")
        return Granule(self, number)

    def __iter__(self) -> Iterator[Granule]:
        return (Granule(self, j) for j in range(len(self)))

    def __contains__(self, value: object) -> bool:
        # A Sequence would compare the value with each Granule object and answer False.
        raise TypeError("ask one granule: value in granules[j]")

    @abstractmethod
    def filter_sizes(self) -> np.ndarray:
        """Bytes of each granule's filter (one per column, all columns alike), ``int64[G]``."""

    @abstractmethod
    def to_bytes(self) -> bytes:
        """Every granule in ClickHouse's layout: the decompressed ``.idx`` stream."""

    def granule_bytes(self, j: int) -> bytes:
        """Granule ``j`` exactly as ClickHouse serializes it.

        Raises:
            IndexError: ``j`` out of range.
        """
        return self[j].to_bytes()

    def _check_column(self, c: int) -> None:
        if not 0 <= c < self.column_count:
            raise IndexError(f"index column {c} out of range 0..{self.column_count - 1}")

    @abstractmethod
    def column_filter_spans(self, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where the filters of index column ``c`` lie, as views of the stored bytes.

        Args:
            c: Index column number (0-based, in expression order).

        Returns:
            ``(buffer, starts, sizes)``: granule j's filter is
            ``buffer[starts[j]:starts[j] + sizes[j]]`` (uint8; starts and sizes int64).

        Raises:
            IndexError: ``c`` out of range.
        """

    def bits_set(self, c: int) -> np.ndarray:
        """Set bits of each granule's filter of index column ``c``, read in place (no gather).

        Args:
            c: Index column number (0-based, in expression order).

        Returns:
            ``int64[G]``.

        Raises:
            IndexError: ``c`` out of range.

        Example:
            >>> from bloomskip.clickhouse.ddl import parse_index_definition
            >>> d = parse_index_definition("s TYPE tokenbf_v1(8, 2, 0)")
            >>> TextGranules(d, np.full((2, 8), 3, np.uint8)).bits_set(0).tolist()
            [16, 16]
        """
        buffer, starts, sizes = self.column_filter_spans(c)
        if not len(starts):
            return np.zeros(0, np.int64)
        # Only the bytes the filters span are counted: a granule's header is between them.
        first, last = int(starts.min()), int((starts + sizes).max())
        counts = np.bitwise_count(np.asarray(buffer[first:last], np.uint8))
        before = np.zeros(last - first + 1, np.int64)
        np.cumsum(counts, out=before[1:])
        return before[starts - first + sizes] - before[starts - first]

    def fill_ratios(self, c: int) -> np.ndarray:
        """Share of set bits of each granule's filter of index column ``c``.

        A filter of 0 bits (a bloom_filter granule without values) cannot exclude anything, so
        its ratio is 1.

        Args:
            c: Index column number (0-based, in expression order).

        Returns:
            ``float64[G]``.

        Raises:
            IndexError: ``c`` out of range.

        Example:
            >>> from bloomskip.clickhouse.ddl import parse_index_definition
            >>> d = parse_index_definition("s TYPE tokenbf_v1(8, 2, 0)")
            >>> TextGranules(d, np.full((1, 8), 1, np.uint8)).fill_ratios(0).tolist()
            [0.125]
        """
        bit_count = self.filter_sizes().astype(np.int64) * 8
        return np.divide(
            self.bits_set(c),
            bit_count,
            out=np.ones(len(bit_count), np.float64),
            where=bit_count > 0,
        )

    def column_filters(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        """The filters of index column ``c``, gathered into one array (cached).

        Args:
            c: Index column number (0-based, in expression order).

        Returns:
            ``(flat, offsets)``: granule j's filter is ``flat[offsets[j]:offsets[j + 1]]`` (uint8).

        Raises:
            IndexError: ``c`` out of range.
        """
        self._check_column(c)
        cached = self._filter_cache.get(c)
        if cached is None:
            cached = self._filter_cache[c] = self._gather_column_filters(c)
        return cached

    @abstractmethod
    def _gather_column_filters(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        """Implemented by each granule kind."""

    def _element_type(self, column: int) -> str:
        """The type a single value of index column ``column`` has (an Array's element type)."""
        from bloomskip.clickhouse.types import parse_clickhouse_type

        if self.index_column_types is None:
            raise ValueError(
                "the index column types are unknown; pass column_types to build or from_bytes"
            )
        parsed = parse_clickhouse_type(self.index_column_types[column])
        return str(parsed.nested if parsed.name == "Array" else parsed)

    @abstractmethod
    def _contains(self, j: int, value: object, column: int) -> bool:
        """Implemented by each granule kind."""

    @abstractmethod
    def _granule_payload(self, j: int) -> bytes:
        """Implemented by each granule kind."""

    @staticmethod
    def _all_bits_set(
        flat: np.ndarray,
        granules: np.ndarray,
        starts: np.ndarray,
        per_item: int,
        relative: Callable[[np.ndarray], np.ndarray],
    ) -> np.ndarray:
        """``out[i, v]``: every bit of probe v is set in the filter of granule ``granules[i]``.

        ``relative(chunk)`` gives the probes' bit positions inside the filters of a chunk of
        granules, shape ``(len(chunk), probes, k)`` or broadcastable to it; each position is
        offset by its filter's first bit in ``flat``. Chunks bound the temporary arrays to about
        ``_PROBE_BATCH`` positions, whatever the number of granules and probes.
        """
        from bloomskip import bits

        out = []
        step = max(1, _PROBE_BATCH // max(1, per_item))
        for first in range(0, granules.size, step):
            chunk = granules[first : first + step]
            first_bits = starts[chunk].astype(np.uint64) * np.uint64(8)
            absolute = first_bits[:, None, None] + relative(chunk)
            present = bits.test_bits(flat, absolute.reshape(-1)).reshape(absolute.shape)
            out.append(present.all(axis=2))
        return np.concatenate(out) if out else np.ones((0, 0), dtype=bool)


class IndexedGranules(Protocol):
    """What a condition needs to select data granules: the granules and the data they cover.

    :class:`~bloomskip.clickhouse.index.SkipIndex` is one.
    """

    @property
    def granules(self) -> Granules:
        """The index granules."""

    @property
    def data_granule_bounds(self) -> np.ndarray:
        """``int64[G + 1]``: index granule j covers data granules ``[b[j], b[j + 1])``."""


class Granule:
    """One index granule: a view into its :class:`Granules`.

    ``value in granule`` tells whether a row holding ``value`` in the (only) index column may be
    in the granule: False is certain, True may be a false positive. The value is hashed (or
    tokenized) as one row of the column by the code that builds the index; for an ``Array``
    column it is one element. Use :meth:`contains` for an index over several columns.

    Attributes:
        granules: The granules of the index.
        number: This granule's number.

    Example:
        >>> import pyarrow as pa
        >>> from bloomskip.clickhouse.index import SkipIndex
        >>> from bloomskip.clickhouse.ddl import parse_index_definition
        >>> d = parse_index_definition("v TYPE bloom_filter")
        >>> idx = SkipIndex.build(d, pa.table({"v": [1, 2, 3, 4]}), [2, 2])
        >>> 3 in idx[1], 3 in idx[0]
        (True, False)
    """

    __slots__ = ("granules", "number")

    def __init__(self, granules: Granules, number: int) -> None:
        self.granules = granules
        self.number = number

    def __repr__(self) -> str:
        kind = type(self.granules).__name__
        return f"<{kind}[{self.number}] of index {self.granules.definition.name!r}>"

    def __contains__(self, value: object) -> bool:
        if self.granules.column_count != 1:
            raise ValueError(
                f"index {self.granules.definition.name!r} has {self.granules.column_count} "
                "columns; use granule.contains(value, column=c)"
            )
        return self.contains(value)

    def contains(self, value: object, column: int = 0) -> bool:
        """Whether a row holding ``value`` in index column ``column`` may be in this granule.

        Args:
            value: A Python value or Arrow scalar of the column's type (an element, for Array).
            column: Index column number.

        Returns:
            False when the granule certainly holds no such row.

        Raises:
            IndexError: ``column`` out of range.
            ValueError: The index column types are unknown.
            UnsupportedTypeError: A value the column's type cannot hold.

        Example:
            >>> import pyarrow as pa
            >>> from bloomskip.clickhouse.index import SkipIndex
            >>> from bloomskip.clickhouse.ddl import parse_index_definition
            >>> d = parse_index_definition("INDEX i (v, s) TYPE bloom_filter")
            >>> idx = SkipIndex.build(d, pa.table({"v": [1, 2], "s": ["a", "b"]}), [1, 1])
            >>> idx[1].contains("b", column=1), idx[1].contains(1, column=0)
            (True, False)
        """
        self.granules._check_column(column)
        return self.granules._contains(self.number, value, column)

    def to_bytes(self) -> bytes:
        """This granule exactly as ClickHouse serializes it."""
        return self.granules._granule_payload(self.number)


def _one_row(value: object) -> pa.Array:
    """A one-row Arrow array holding ``value``, for the build-time hashing and tokenizing."""
    import pyarrow as pa

    from bloomskip.clickhouse.types import UnsupportedTypeError

    if isinstance(value, pa.Scalar):
        return pa.array([value.as_py()], value.type)
    try:
        return pa.array([value])
    except (pa.ArrowException, OverflowError, TypeError) as exc:
        raise UnsupportedTypeError(
            f"cannot hold {value!r} in an Arrow array ({exc}); pass a pyarrow scalar"
        ) from exc


class BloomFilterGranules(Granules):
    """The granules of a ``bloom_filter`` index, in their serialized bytes.

    Args:
        definition: The index definition.
        payload: The serialized granules back to back.
        granule_offsets: Granule j is ``payload[offsets[j]:offsets[j + 1]]`` (``int64[G + 1]``).
        distinct_counts: Each granule's ``total_rows`` (``int64[G]``).
        index_column_types: ClickHouse type of each index column, or None.
    """

    def __init__(
        self,
        definition: IndexDefinition,
        payload: bytes,
        granule_offsets: np.ndarray,
        distinct_counts: np.ndarray,
        index_column_types: Sequence[str] | None = None,
    ) -> None:
        super().__init__(definition, index_column_types)
        self._payload = payload
        self._granule_offsets = granule_offsets
        self.distinct_counts = distinct_counts

    @classmethod
    def from_bytes(
        cls,
        definition: IndexDefinition,
        data: bytes,
        count: int,
        index_column_types: Sequence[str] | None = None,
        source: str | None = None,
    ) -> BloomFilterGranules:
        """Read ``count`` serialized granules.

        Raises:
            FormatError: A truncated granule, an oversized ``total_rows`` or trailing bytes
                (the error names the granule, field and offset).
        """
        offsets, counts = _parse_bloom_filter_granules(
            data, count, len(definition.expressions), definition.bits_per_row, source
        )
        return cls(definition, data, offsets, counts, index_column_types)

    def __len__(self) -> int:
        return len(self.distinct_counts)

    def filter_sizes(self) -> np.ndarray:
        return (self.definition.bits_per_row * self.distinct_counts + 7) // 8

    def to_bytes(self) -> bytes:
        return bytes(self._payload)

    def _granule_payload(self, j: int) -> bytes:
        return bytes(self._payload[self._granule_offsets[j] : self._granule_offsets[j + 1]])

    def _filter_starts(self, c: int, sizes: np.ndarray) -> np.ndarray:
        # Whatever a granule holds beyond its filters is its VarUInt header.
        header = np.diff(self._granule_offsets) - self.column_count * sizes
        return (self._granule_offsets[:-1] + header + c * sizes).astype(np.int64)

    def column_filter_spans(self, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._check_column(c)
        sizes = self.filter_sizes().astype(np.int64)
        return np.frombuffer(self._payload, np.uint8), self._filter_starts(c, sizes), sizes

    def _gather_column_filters(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        sizes = self.filter_sizes()
        offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        starts = self._filter_starts(c, sizes)
        # One slice per granule (not an index array per byte, which would cost 16 bytes of
        # temporaries for every filter byte).
        raw = memoryview(self._payload)
        flat = b"".join(
            raw[start : start + size]
            for start, size in zip(starts.tolist(), sizes.tolist(), strict=True)
        )
        return np.frombuffer(flat, np.uint8), offsets

    def hashes_present(
        self, column: int, value_hashes: np.ndarray, granules: np.ndarray | None = None
    ) -> np.ndarray:
        """``out[g, i]``: all k bits of value hash i are set in granule g's filter of ``column``.

        Each granule has its own filter size, so the position of seed s in granule g is
        ``Hash128to64(h, s) mod (8 * width_g)``: the hashes are mixed once and only the modulo
        is per granule. A granule with an empty filter proves nothing and keeps every value.

        Args:
            column: Index column number.
            value_hashes: ``uint64`` hashes, as
                :func:`~bloomskip.clickhouse.types.value_hashes` computes them.
            granules: Granule numbers to probe (all when None); row g of the result is
                ``granules[g]``.

        Returns:
            A ``(granules, values)`` bool array.
        """
        from bloomskip import bits, hashing

        chosen = np.arange(len(self)) if granules is None else np.asarray(granules, np.int64)
        k = self.definition.hash_functions
        result = np.ones((len(chosen), len(value_hashes)), dtype=bool)
        if not len(value_hashes) or not len(chosen):
            return result
        flat, starts, sizes = self.column_filter_spans(column)
        widths = sizes[chosen].astype(np.uint64) * np.uint64(8)
        values = np.asarray(value_hashes, dtype=np.uint64)
        seeds = np.array(bits.BF_HASH_SEEDS[:k], dtype=np.uint64)
        mixed = hashing.hash128_to_64(np.repeat(values, k), np.tile(seeds, values.size))
        mixed = mixed.reshape(values.size, k)
        probed = np.flatnonzero(widths > 0)  # rows of `result` (positions in `chosen`)
        # Granules of equal width (equal distinct counts: the usual case) share the remainders,
        # so the modulo runs once per width instead of once per granule.
        group_widths, group_of = np.unique(widths[probed], return_inverse=True)
        for group, width in enumerate(group_widths):
            rows = probed[group_of == group]
            relative = (mixed % width)[None, :, :]
            result[rows] = self._all_bits_set(
                flat, chosen[rows], starts, mixed.size, lambda chunk, relative=relative: relative
            )
        return result

    def _contains(self, j: int, value: object, column: int) -> bool:
        from bloomskip.clickhouse.types import value_hashes

        hashes, _ = value_hashes(_one_row(value), self._element_type(column))
        return bool(self.hashes_present(column, hashes, np.array([j])).all())


class TextGranules(Granules):
    """The granules of an ``ngrambf_v1`` / ``tokenbf_v1`` index.

    Args:
        definition: The index definition.
        filters: ``(G, columns * size_bytes)`` uint8: row j is granule j, its columns' filters
            side by side (exactly the serialized granule).
        index_column_types: ClickHouse type of each index column, or None.
    """

    def __init__(
        self,
        definition: IndexDefinition,
        filters: np.ndarray,
        index_column_types: Sequence[str] | None = None,
    ) -> None:
        super().__init__(definition, index_column_types)
        self._filters = filters

    @classmethod
    def from_bytes(
        cls,
        definition: IndexDefinition,
        data: bytes,
        count: int,
        index_column_types: Sequence[str] | None = None,
        source: str | None = None,
    ) -> TextGranules:
        """Read ``count`` serialized granules (a read-only view of ``data``).

        Raises:
            FormatError: ``data`` does not hold exactly ``count`` granules.
        """
        columns = len(definition.expressions)
        expected = count * columns * definition.size_bytes
        if len(data) != expected:
            raise FormatError(
                f"{definition.type} index {definition.name!r}: expected {count} granules "
                f"x {columns} column(s) x {definition.size_bytes} bytes = {expected} bytes, "
                f"got {len(data)}",
                field="granules",
                offset=min(len(data), expected),
                source=source,
            )
        matrix = np.frombuffer(data, np.uint8).reshape(count, columns * definition.size_bytes)
        return cls(definition, matrix, index_column_types)

    def __len__(self) -> int:
        return len(self._filters)

    def filter_sizes(self) -> np.ndarray:
        return np.full(len(self), self.definition.size_bytes, np.int64)

    def to_bytes(self) -> bytes:
        return self._filters.tobytes()

    def _granule_payload(self, j: int) -> bytes:
        return self._filters[j].tobytes()

    def column_filter_spans(self, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._check_column(c)
        sizes = self.filter_sizes()
        matrix = self._filters
        if not matrix.flags.c_contiguous:
            flat, offsets = self.column_filters(c)
            return flat, offsets[:-1], sizes
        row = matrix.shape[1] if matrix.ndim == 2 else 0
        starts = np.arange(len(self), dtype=np.int64) * row + c * sizes
        return matrix.reshape(-1), starts, sizes

    def bits_set(self, c: int) -> np.ndarray:
        from bloomskip import bits

        self._check_column(c)
        if not len(self):
            return np.zeros(0, np.int64)
        size = self.definition.size_bytes
        # Row by row in C: no per-byte temporary the size of the index.
        return bits.popcount_rows(self._filters[:, c * size : (c + 1) * size])

    def _gather_column_filters(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        size = self.definition.size_bytes
        offsets = np.arange(len(self) + 1, dtype=np.int64) * size
        flat = np.ascontiguousarray(self._filters[:, c * size : (c + 1) * size]).reshape(-1)
        return flat, offsets

    def token_sets_present(
        self, column: int, token_lists: list[list[bytes]], granules: np.ndarray | None = None
    ) -> np.ndarray:
        """``out[g, a]``: the query filter of ``token_lists[a]`` is a subset of granule g's
        filter of ``column`` (an empty token list is contained in every filter).

        Args:
            column: Index column number.
            token_lists: Tokens (n-grams or words) per alternative.
            granules: Granule numbers to probe (all when None); row g of the result is
                ``granules[g]``.

        Returns:
            A ``(granules, alternatives)`` bool array.
        """
        from bloomskip import bits

        chosen = np.arange(len(self)) if granules is None else np.asarray(granules, np.int64)
        result = np.ones((len(chosen), len(token_lists)), dtype=bool)
        unique = sorted({token for tokens in token_lists for token in tokens})
        if not unique or not len(chosen):
            return result
        d = self.definition
        positions = bits.pair_positions(unique, d.seed, 8 * d.size_bytes, d.hash_functions)
        flat, filter_starts, _ = self.column_filter_spans(column)
        if len(token_lists) == 1:
            result[:, 0] = self._holding_every_token(flat, filter_starts[chosen], positions)
            return result
        number = {token: i for i, token in enumerate(unique)}
        # Each alternative's tokens as a run of token numbers; reduceat ANDs every run.
        order = [number[token] for tokens in token_lists for token in tokens]
        lengths = np.array([len(tokens) for tokens in token_lists])
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        non_empty = lengths > 0
        token_present = self._all_bits_set(
            flat, chosen, filter_starts, positions.size, lambda chunk: positions[None, :, :]
        )[:, order]
        result[:, non_empty] = np.logical_and.reduceat(token_present, starts[non_empty], axis=1)
        return result

    @staticmethod
    def _holding_every_token(
        flat: np.ndarray, starts: np.ndarray, positions: np.ndarray
    ) -> np.ndarray:
        """Whether the filter at byte ``starts[i]`` of ``flat`` holds every token, given the
        tokens' bit positions inside a filter (``positions``, shape ``(tokens, k)``).

        Token by token, each probed only in the filters that hold every token before it: a
        LIKE's n-grams number a dozen or more, and where the index prunes, most filters lack
        one of the first few (URLs in URL order, 2,448 filters and 14 trigrams: 0.24 ms, where
        probing every pair takes 1.3 ms; issue 16, benchmarks/substring_search.py).
        """
        from bloomskip import bits

        alive = np.arange(len(starts))
        first_bits = starts.astype(np.uint64) * np.uint64(8)
        step = max(1, _PROBE_BATCH // max(1, positions.shape[1]))
        for token_positions in positions:
            held = []
            for first in range(0, alive.size, step):
                chunk = alive[first : first + step]
                absolute = first_bits[chunk][:, None] + token_positions[None, :]
                present = bits.test_bits(flat, absolute.reshape(-1)).reshape(absolute.shape)
                held.append(chunk[present.all(axis=1)])
            alive = np.concatenate(held) if held else alive
            if not alive.size:
                break
        out = np.zeros(len(starts), dtype=bool)
        out[alive] = True
        return out

    def _contains(self, j: int, value: object, column: int) -> bool:
        from bloomskip import bits
        from bloomskip.clickhouse.types import text_values

        d = self.definition
        strings, _ = text_values(_one_row(value), self._element_type(column))
        wanted = bits.text_granules(
            strings, [0, len(strings)], d.tokenizer, d.tokenizer_argument, d.size_bytes,
            d.hash_functions, d.seed,
        )[0]  # fmt: skip
        flat, offsets = self.column_filters(column)
        have = flat[offsets[j] : offsets[j + 1]]
        return bool(np.array_equal(have & wanted, wanted))


def _parse_bloom_filter_granules(
    data: bytes, granules: int, columns: int, bits_per_row: int, source: str | None
) -> tuple[np.ndarray, np.ndarray]:
    """Walk the bloom_filter granules: (granule offsets int64[G+1], distinct counts int64[G])."""
    offsets = np.empty(granules + 1, np.int64)
    counts = np.empty(granules, np.int64)
    position = 0
    end = len(data)
    # One step per granule (not per value): each granule's size depends on its VarUInt header.
    for j in range(granules):
        offsets[j] = position
        value = 0
        shift = 0
        for i in range(_MAX_VARUINT_BYTES + 1):
            if i == _MAX_VARUINT_BYTES:
                raise FormatError(
                    f"granule {j}: VarUInt total_rows longer than {_MAX_VARUINT_BYTES} bytes",
                    field="total_rows", offset=offsets[j], source=source,
                )  # fmt: skip
            if position >= end:
                raise FormatError(
                    f"granule {j} of {granules}: stream ends inside VarUInt total_rows",
                    field="total_rows", offset=position, source=source,
                )  # fmt: skip
            byte = data[position]
            position += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        size = (bits_per_row * value + 7) // 8
        needed = size * columns
        if needed > end - position:
            raise FormatError(
                f"granule {j} of {granules}: total_rows {value} needs {columns} filter(s) of "
                f"{size} bytes, but only {end - position} bytes remain",
                field="filter", offset=position, source=source,
            )  # fmt: skip
        counts[j] = value
        position += needed
    offsets[granules] = position
    if position != end:
        raise FormatError(
            f"{end - position} bytes follow the last of {granules} granules",
            field="granules", offset=position, source=source,
        )  # fmt: skip
    return offsets, counts
