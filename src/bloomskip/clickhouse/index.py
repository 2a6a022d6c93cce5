"""A ClickHouse Bloom-filter skip index over Arrow data: build, (de)serialize, statistics.

ClickHouse writes one index granule per ``GRANULARITY`` data granules (the last one may cover
fewer); data granules follow the part's marks and may hold different row counts. Each index
granule holds one filter per index column (the granules and their layout are
:mod:`bloomskip.clickhouse.granule`; conditions, in :mod:`bloomskip.clickhouse.condition`, read
the granules only). This module is ClickHouse's index and aggregator: it knows which rows each
granule covers and builds the granules from them with the C kernels in :mod:`bloomskip.bits`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import pyarrow as pa

from bloomskip import bits
from bloomskip.clickhouse.ddl import PARQUET_BLOOM_FILTER, IndexDefinition, IndexDefinitionError
from bloomskip.clickhouse.granule import BloomFilterGranules, Granule, Granules, TextGranules
from bloomskip.clickhouse.types import (
    clickhouse_type_for,
    parse_clickhouse_type,
    text_values,
    value_hashes,
)

__all__ = ["SkipIndex", "index_granule_bounds"]


def _data_granule_rows(granule_rows: object) -> np.ndarray:
    rows = np.asarray(granule_rows)
    if rows.ndim != 1 or (rows.size and not np.issubdtype(rows.dtype, np.integer)):
        raise ValueError("granule_rows must be a 1-D sequence of integers (rows per data granule)")
    rows = rows.astype(np.int64)
    # A part's marks end with a final mark of 0 rows, which has no index granule.
    last = rows.size
    while last and rows[last - 1] == 0:
        last -= 1
    rows = rows[:last]
    if (rows <= 0).any():
        bad = int(np.flatnonzero(rows <= 0)[0])
        raise ValueError(f"data granule {bad} has {rows[bad]} rows; only the last mark may be 0")
    return rows


def index_granule_bounds(data_granule_count: int, granularity: int) -> np.ndarray:
    """Data-granule numbers where index granules start, plus the end.

    Args:
        data_granule_count: Number of data granules (marks without the final mark).
        granularity: The index's GRANULARITY.

    Returns:
        ``int64[G + 1]``: index granule j covers data granules ``[b[j], b[j + 1])``.

    Example:
        >>> index_granule_bounds(5, 2).tolist()
        [0, 2, 4, 5]
    """
    starts = np.arange(0, data_granule_count, granularity, dtype=np.int64)
    return np.append(starts, np.int64(data_granule_count))


def _index_column_types(
    definition: IndexDefinition, column_types: Mapping[str, str] | None
) -> tuple[str, ...] | None:
    """The ClickHouse type of each index column, or None when it cannot be known.

    Unknown when the types are not given or an expression cannot be evaluated (an index on e.g.
    ``a + 1`` can still be read from disk and inspected).
    """
    evaluable = all(expression.supported for expression in definition.index_columns)
    if column_types is None or not evaluable:
        return None
    return tuple(definition.index_column_types(dict(column_types)))


def _granules_kind(definition: IndexDefinition) -> type:
    """The granules class of an index type."""
    if definition.type == PARQUET_BLOOM_FILTER:
        from bloomskip.parquet.granules import ParquetBloomGranules

        return ParquetBloomGranules
    return BloomFilterGranules if definition.type == "bloom_filter" else TextGranules


class SkipIndex:
    """One ClickHouse Bloom-filter skip index: a sequence of granules over a part's data.

    Build it from Arrow data with :meth:`build`, or read ClickHouse's decompressed ``.idx`` stream
    with :meth:`from_bytes`. ``len(index)`` is the number of index granules and ``index[j]`` is
    granule j (a :class:`~bloomskip.clickhouse.granule.Granule`: ``value in index[j]``);
    conditions probe all of them at once through :attr:`granules`.

    Attributes:
        definition: The index definition.
        column_types: ClickHouse type of each source column (None when unknown).
        index_column_types: ClickHouse type of each index column (None when unknown).
        data_granule_rows: Rows per data granule (``int64``), without the final 0-row mark.
        granules: The index granules
            (:class:`~bloomskip.clickhouse.granule.BloomFilterGranules` or
            :class:`~bloomskip.clickhouse.granule.TextGranules`).

    Example:
        >>> from bloomskip.clickhouse.ddl import parse_index_definition
        >>> d = parse_index_definition("v TYPE bloom_filter GRANULARITY 2")
        >>> idx = SkipIndex.build(d, pa.table({"v": list(range(10))}), [4, 4, 2])
        >>> len(idx), 9 in idx[1], 9 in idx[0]
        (2, True, False)
    """

    def __init__(
        self,
        definition: IndexDefinition,
        column_types: Mapping[str, str] | None,
        data_granule_rows: np.ndarray,
        granules: Granules,
    ) -> None:
        """Assemble an index from its granules; use :meth:`build` or :meth:`from_bytes` instead.

        Args:
            definition: The index definition.
            column_types: Source column types, or None.
            data_granule_rows: Rows per data granule.
            granules: One index granule per ``GRANULARITY`` data granules.

        Raises:
            ValueError: The granules do not match the data granules.
        """
        self.definition = definition
        self.column_types = dict(column_types) if column_types is not None else None
        self.data_granule_rows = data_granule_rows
        self._bounds = index_granule_bounds(len(data_granule_rows), definition.granularity)
        if len(granules) != len(self._bounds) - 1:
            raise ValueError(
                f"{len(granules)} index granules for {len(data_granule_rows)} data granules at "
                f"GRANULARITY {definition.granularity}"
            )
        self.granules = granules
        self.index_column_types = granules.index_column_types

    # ----------------------------------------------------------------------------------------
    # Shape

    def __len__(self) -> int:
        return len(self.granules)

    def __getitem__(self, j: int) -> Granule:
        """Index granule ``j`` (negative numbers count from the end).

        Raises:
            IndexError: ``j`` out of range.
        """
        return self.granules[j]

    def __iter__(self) -> Iterator[Granule]:
        return iter(self.granules)

    def __contains__(self, value: object) -> bool:
        # Iterating would compare the value with each Granule object and answer False.
        raise TypeError("ask one granule: value in index[j]")

    @property
    def index_granule_count(self) -> int:
        """Number of index granules: ceil(data granules / GRANULARITY)."""
        return len(self.granules)

    @property
    def data_granule_bounds(self) -> np.ndarray:
        """``int64[G + 1]``: index granule j covers data granules ``[b[j], b[j + 1])``."""
        return self._bounds

    @property
    def column_count(self) -> int:
        """Number of index columns (filters per granule)."""
        return self.granules.column_count

    def index_granule_rows(self) -> np.ndarray:
        """Rows covered by each index granule (``int64[G]``)."""
        row_bounds = np.concatenate(([0], np.cumsum(self.data_granule_rows)))
        return np.diff(row_bounds[self._bounds])

    def data_granules_of(self, index_granule: int) -> range:
        """The data granule numbers index granule ``index_granule`` covers."""
        return range(int(self._bounds[index_granule]), int(self._bounds[index_granule + 1]))

    # ----------------------------------------------------------------------------------------
    # Building

    @classmethod
    def build(
        cls,
        definition: IndexDefinition,
        table: pa.Table,
        granule_rows: object,
        column_types: Mapping[str, str] | None = None,
    ) -> SkipIndex:
        """Build the index the way ClickHouse does when it writes a part.

        Args:
            definition: The index definition.
            table: The rows in part order; it must hold every column the index expressions read.
            granule_rows: Rows per data granule (the part's marks; a trailing 0 for the final mark
                is ignored). They must add up to ``table.num_rows``.
            column_types: ClickHouse type per source column; columns left out get
                :func:`~bloomskip.clickhouse.types.clickhouse_type_for` of their Arrow type.

        Returns:
            The built index.

        Raises:
            ValueError: Granule rows that do not match the table, an unsupported expression, or a
                column type the index type rejects (the error names the column).

        Example:
            >>> from bloomskip.clickhouse.ddl import parse_index_definition
            >>> d = parse_index_definition("s TYPE tokenbf_v1(64, 2, 0) GRANULARITY 2")
            >>> len(SkipIndex.build(d, pa.table({"s": ["a b", "c"]}), [1, 1]).to_bytes())
            64
        """
        rows = _data_granule_rows(granule_rows)
        if int(rows.sum()) != table.num_rows:
            raise ValueError(
                f"granule_rows add up to {int(rows.sum())} rows but the table has {table.num_rows}"
            )
        types = dict(column_types or {})
        for expression in definition.index_columns:
            name = expression.column
            if expression.supported and name not in table.column_names:
                raise IndexDefinitionError(
                    f"index expression {expression.sql!r} reads column {name!r}, which the table "
                    f"does not have (columns: {', '.join(table.column_names)})"
                )
            if expression.supported and name not in types:
                types[name] = clickhouse_type_for(table.schema.field(name).type)
        index_types = _index_column_types(definition, types)
        bounds = index_granule_bounds(len(rows), definition.granularity)
        data_row_bounds = np.concatenate(([0], np.cumsum(rows))).astype(np.int64)
        if definition.type == PARQUET_BLOOM_FILTER:
            raise IndexDefinitionError(
                "a parquet_bloom_filter index is built from a Parquet file's row groups "
                "(Dataset.build_index), not from a table"
            )
        values = [expression.evaluate(table) for expression in definition.index_columns]
        build = _build_bloom_filter if definition.type == "bloom_filter" else _build_text
        granules = build(definition, index_types, values, data_row_bounds, bounds)
        return cls(definition, types, rows, granules)

    # ----------------------------------------------------------------------------------------
    # Serialization

    def to_bytes(self) -> bytes:
        """The decompressed ``skp_idx_<name>.idx`` stream: every granule in ClickHouse's layout."""
        return self.granules.to_bytes()

    def granule_bytes(self, j: int) -> bytes:
        """Index granule ``j`` exactly as ClickHouse serializes it.

        Raises:
            IndexError: ``j`` out of range.
        """
        if not 0 <= j < self.index_granule_count:
            raise IndexError(f"index granule {j} out of range 0..{self.index_granule_count - 1}")
        return self.granules[j].to_bytes()

    @classmethod
    def from_bytes(
        cls,
        definition: IndexDefinition,
        payload: bytes,
        granule_rows: object,
        column_types: Mapping[str, str] | None = None,
        source: str | None = None,
    ) -> SkipIndex:
        """Read the decompressed ``.idx`` stream ClickHouse wrote.

        Args:
            definition: The index definition (from the table's DDL).
            payload: The decompressed stream (every granule, back to back).
            granule_rows: Rows per data granule of the part (a trailing final 0 is ignored).
            column_types: ClickHouse type per source column, if known (needed to compile a
                condition and for ``value in index[j]``).
            source: Name of the file, for error messages.

        Returns:
            The index.

        Raises:
            FormatError: If the bytes do not hold exactly the expected granules (truncated
                granule, oversized count, trailing bytes); the error names the granule, field
                and offset.
            ValueError: Bad ``granule_rows``.
        """
        rows = _data_granule_rows(granule_rows)
        count = len(index_granule_bounds(len(rows), definition.granularity)) - 1
        kind = _granules_kind(definition)
        index_types = _index_column_types(definition, column_types)
        granules = kind.from_bytes(definition, bytes(payload), count, index_types, source)
        return cls(definition, column_types, rows, granules)

    # ----------------------------------------------------------------------------------------
    # Filters and statistics

    def column_filters(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        """The filters of index column ``c``, all granules (see :attr:`granules`).

        Args:
            c: Index column number (0-based, in expression order).

        Returns:
            ``(flat, offsets)``: granule j's filter is ``flat[offsets[j]:offsets[j + 1]]`` (uint8).

        Raises:
            IndexError: ``c`` out of range.
        """
        return self.granules.column_filters(c)

    def column_filter_spans(self, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where the filters of index column ``c`` lie, without copying them.

        :meth:`column_filters` gathers a column's filters into one array; probing needs only
        their positions, so this returns views of the stored bytes (for a large index, the
        gather is most of the cost of the first query).

        Args:
            c: Index column number (0-based, in expression order).

        Returns:
            ``(buffer, starts, sizes)``: granule j's filter is
            ``buffer[starts[j]:starts[j] + sizes[j]]`` (uint8; starts and sizes int64).

        Raises:
            IndexError: ``c`` out of range.

        Example:
            >>> buffer, starts, sizes = index.column_filter_spans(0)  # doctest: +SKIP
        """
        return self.granules.column_filter_spans(c)

    @property
    def distinct_counts(self) -> np.ndarray | None:
        """bloom_filter: each granule's ``total_rows`` (largest distinct-hash count); else None."""
        if isinstance(self.granules, BloomFilterGranules):
            return self.granules.distinct_counts
        return None

    def granule_statistics(self) -> pa.Table:
        """Per index granule and index column: fill and estimated false-positive rate.

        Returns:
            A table with columns ``granule``, ``column`` (the index expression), ``rows`` (data
            rows covered), ``bit_count``, ``bits_set``, ``fill_ratio`` and ``estimated_fpr`` =
            ``fill_ratio ** hash_functions`` (the chance that k random positions are all set).
        """
        # A split-block filter sets 8 bits per value (one in each word of its block).
        k = 8 if self.definition.type == PARQUET_BLOOM_FILTER else self.definition.hash_functions
        columns = self.column_count
        bit_counts, bits_set = [], []
        for c in range(columns):
            flat, offsets = self.column_filters(c)
            set_before = np.concatenate(([0], np.cumsum(np.bitwise_count(flat), dtype=np.int64)))
            bits_set.append(set_before[offsets[1:]] - set_before[offsets[:-1]])
            bit_counts.append(np.diff(offsets) * 8)
        # Granule-major order: granule 0's columns, then granule 1's, ...
        bit_count = np.stack(bit_counts, axis=1).reshape(-1)
        set_count = np.stack(bits_set, axis=1).reshape(-1)
        # A 0-bit filter cannot exclude anything: report it as full.
        fill = np.divide(
            set_count, bit_count, out=np.ones(len(bit_count), np.float64), where=bit_count > 0
        )
        granules = self.index_granule_count
        return pa.table(
            {
                "granule": pa.array(np.repeat(np.arange(granules), columns), pa.int64()),
                "column": pa.array(list(self.definition.expressions) * granules, pa.string()),
                "rows": pa.array(np.repeat(self.index_granule_rows(), columns), pa.int64()),
                "bit_count": pa.array(bit_count, pa.int64()),
                "bits_set": pa.array(set_count, pa.int64()),
                "fill_ratio": pa.array(fill, pa.float64()),
                "estimated_fpr": pa.array(fill**k, pa.float64()),
            }
        )

    # ----------------------------------------------------------------------------------------
    # Query

    def select(self, where: str, *, as_clickhouse: bool = False) -> np.ndarray:
        """Data granules a query with this WHERE clause would read after this index.

        A shortcut for ``compile_condition(where, definition, column_types).select(index)``
        (:meth:`bloomskip.clickhouse.condition.IndexCondition.select`), as ClickHouse's index
        creates its condition.

        Args:
            where: A ClickHouse WHERE expression, e.g. ``"s LIKE '%error%'"``.
            as_clickhouse: ClickHouse's own choice, without bloomskip's pruning for predicates
                ClickHouse uses no index for (``hasAnyTokens`` / ``hasAllTokens``).

        Returns:
            ``int64`` data granule numbers that may match, ascending (what ``EXPLAIN indexes = 1``
            counts as selected granules).

        Raises:
            ValueError: If the condition cannot be parsed or the column types are unknown.
        """
        # Imported here: the condition loads the SQL parser, which reading a part does not need.
        from bloomskip.clickhouse.condition import compile_condition

        if self.column_types is None:
            raise ValueError("select needs the column types; pass column_types to from_bytes")
        condition = compile_condition(
            where, self.definition, self.column_types, as_clickhouse=as_clickhouse
        )
        return condition.select(self)


def _build_bloom_filter(
    definition: IndexDefinition,
    index_types: tuple[str, ...],
    values: list[pa.ChunkedArray],
    data_row_bounds: np.ndarray,
    bounds: np.ndarray,
) -> BloomFilterGranules:
    """The bloom_filter granules: each index granule's hashes, as the writer aggregates them."""
    columns = []
    for array, type_name in zip(values, index_types, strict=True):
        hashes, row_offsets = value_hashes(array, type_name)
        if parse_clickhouse_type(type_name).name == "Array":
            hashes, element_bounds = _apply_empty_array_rule(
                hashes, row_offsets, data_row_bounds, bounds
            )
        else:
            element_bounds = row_offsets[data_row_bounds[bounds]]
        columns.append((hashes, element_bounds))
    payload, offsets, counts = bits.bloom_filter_granules(
        columns, definition.bits_per_row, definition.hash_functions
    )
    return BloomFilterGranules(definition, payload, offsets, counts, index_types)


def _build_text(
    definition: IndexDefinition,
    index_types: tuple[str, ...],
    values: list[pa.ChunkedArray],
    data_row_bounds: np.ndarray,
    bounds: np.ndarray,
) -> TextGranules:
    """The ngrambf_v1 / tokenbf_v1 / sparse_grams granules: each index granule's tokens, hashed
    in C."""
    d = definition
    filters = []
    row_bounds = data_row_bounds[bounds]
    for array, type_name in zip(values, index_types, strict=True):
        if pa.types.is_dictionary(array.type):
            strings, string_bounds = _distinct_dictionary_strings(array, type_name, row_bounds)
        else:
            strings, row_offsets = text_values(array, type_name)
            string_bounds = row_offsets[row_bounds]
        filters.append(
            bits.text_granules(
                strings, string_bounds, d.tokenizer, d.tokenizer_argument, d.size_bytes,
                d.hash_functions, d.seed,
            )
        )  # fmt: skip
    matrix = filters[0] if len(filters) == 1 else np.concatenate(filters, axis=1)
    return TextGranules(definition, matrix, index_types)


def _distinct_dictionary_strings(
    array: pa.ChunkedArray, type_name: str, row_bounds: np.ndarray
) -> tuple[pa.Array, np.ndarray]:
    """A LowCardinality column's distinct dictionary values per index granule.

    A granule's text filter is the union of its rows' tokens, so tokenizing each distinct value
    once per granule gives the same filter as tokenizing every row.

    Returns:
        ``(strings, bounds)``: granule j's distinct values are ``strings[bounds[j]:bounds[j+1]]``.
    """
    import pyarrow.compute as pc  # here only: a query that reads an index never needs it

    unified = array.unify_dictionaries() if array.num_chunks > 1 else array
    dictionary = (
        unified.chunk(0).dictionary if unified.num_chunks else pa.array([], array.type.value_type)
    )
    codes = np.concatenate(
        [np.asarray(pc.fill_null(c.indices, -1), np.int64) for c in unified.chunks]
        or [np.empty(0, np.int64)]
    )
    granule_of_row = np.repeat(np.arange(len(row_bounds) - 1), np.diff(row_bounds))
    present = codes >= 0  # a NULL row holds '' and adds no token
    keys = np.unique(granule_of_row[present] * (len(dictionary) + 1) + codes[present])
    granules, dictionary_codes = np.divmod(keys, len(dictionary) + 1)
    strings, _ = text_values(dictionary.take(pa.array(dictionary_codes)), type_name)
    bounds = np.searchsorted(granules, np.arange(len(row_bounds)), side="left").astype(np.int64)
    return strings, bounds


def _apply_empty_array_rule(
    hashes: np.ndarray,
    row_offsets: np.ndarray,
    data_row_bounds: np.ndarray,
    index_bounds: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Insert ClickHouse's hash 0 for every data granule whose arrays are all empty.

    ClickHouse's ``BloomFilterHash::hashWithColumn`` returns the single hash 0 when the rows it
    is given hold no array element; the writer calls it once per data granule.

    Returns:
        The hashes with the zeros inserted and the element bounds of every index granule.
    """
    element_bounds = row_offsets[data_row_bounds]
    empty = np.diff(element_bounds) == 0
    hashes = np.insert(hashes, element_bounds[:-1][empty], np.uint64(0))
    inserted_before = np.concatenate(([0], np.cumsum(empty)))
    shifted = element_bounds + inserted_before
    return hashes.astype(np.uint64, copy=False), shifted[index_bounds]
