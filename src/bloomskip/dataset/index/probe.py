"""One index over the files a query prunes, probed where each file's bits lie.

A query's files may sit in several segments: bit-sliced parts (docs/sliced-layout.md), from
which a probe reads only the slices it tests, and plain per-file payloads (a sidecar, a
format-1 segment). :class:`ProbeIndex` puts them in the query's file order behind the one
interface conditions probe (``hashes_present`` / ``token_sets_present``), so the pruner and
ClickHouse's decisions stay as they are: :meth:`ProbeIndex.prepare` first reads, in parallel
and one request batch per part, every slice the condition will test.

Example:
    >>> import numpy as np, pyarrow as pa
    >>> from bloomskip.clickhouse.condition import compile_condition
    >>> from bloomskip.clickhouse.ddl import parse_index_definition
    >>> from bloomskip.clickhouse.index import SkipIndex
    >>> d = parse_index_definition("v TYPE bloom_filter(0.01)")
    >>> plain = SkipIndex.build(d, pa.table({"v": list(range(20))}), [10, 10]).granules
    >>> index = ProbeIndex(d, ["Int64"], np.array([10, 10]), [Piece(plain, np.arange(2))])
    >>> condition = compile_condition("v = 15", d, {"v": "Int64"})
    >>> index.prepare(condition)
    >>> condition.may_match(index).tolist()
    [False, True]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from bloomskip.clickhouse.granule import BloomFilterGranules, Granules, TextGranules

if TYPE_CHECKING:
    import pyarrow as pa

    from bloomskip.clickhouse.condition import IndexCondition
    from bloomskip.clickhouse.ddl import IndexDefinition


@dataclass
class Piece:
    """Granules of one part (or of plain payloads), and which of them the query uses.

    Attributes:
        granules: The part's granules: sliced (with ``plan`` / ``fetch``) or plain.
        chosen: Their numbers, in the query's order.
        read_ranges: Reads ``(offset, length)`` ranges of a sliced part (None: plain).
        materialize: The part's plain granules, read whole (None: ``granules`` are plain).
    """

    granules: Granules
    chosen: np.ndarray
    read_ranges: Callable[[list[tuple[int, int]]], list[bytes]] | None = None
    materialize: Callable[[], Granules] | None = None


class _Composite:
    """The granules of several pieces, end to end."""

    _pieces: list[Piece]

    def __len__(self) -> int:
        return sum(len(piece.chosen) for piece in self._pieces)

    def _joined(self, probe, width: int, granules) -> np.ndarray:
        parts = [probe(piece) for piece in self._pieces]
        out = np.concatenate(parts) if parts else np.ones((0, width), bool)
        return out if granules is None else out[np.asarray(granules, np.int64)]


class _CompositeBloomFilterGranules(_Composite, BloomFilterGranules):
    def __init__(self, definition, index_column_types, pieces: list[Piece]) -> None:
        Granules.__init__(self, definition, index_column_types)
        self._pieces = pieces

    def hashes_present(self, column, value_hashes, granules=None) -> np.ndarray:
        return self._joined(
            lambda piece: piece.granules.hashes_present(column, value_hashes, piece.chosen),
            len(value_hashes),
            granules,
        )


class _CompositeTextGranules(_Composite, TextGranules):
    def __init__(self, definition, index_column_types, pieces: list[Piece]) -> None:
        Granules.__init__(self, definition, index_column_types)
        self._pieces = pieces

    def token_sets_present(self, column, token_lists, granules=None) -> np.ndarray:
        return self._joined(
            lambda piece: piece.granules.token_sets_present(column, token_lists, piece.chosen),
            len(token_lists),
            granules,
        )


def _composite_parquet_bloom():  # noqa: ANN202 - a class
    """The composite of ``parquet_bloom_filter`` pieces (plain parts and plain payloads)."""
    from bloomskip.parquet.granules import ParquetBloomGranules

    class _CompositeParquetBloomGranules(_Composite, ParquetBloomGranules):
        def __init__(self, definition, index_column_types, pieces: list[Piece]) -> None:
            Granules.__init__(self, definition, index_column_types)
            self._pieces = pieces

        def literals_present(self, column, literals, clickhouse_type, granules=None):
            return self._joined(
                lambda piece: piece.granules.literals_present(
                    column, literals, clickhouse_type, piece.chosen
                ),
                len(literals),
                granules,
            )

    return _CompositeParquetBloomGranules


class ProbeIndex:
    """One skip index over a query's files, whose granules lie in several pieces.

    Args:
        definition: The index definition.
        index_column_types: ClickHouse type of each index column.
        granule_rows: Rows of each granule, in the query's order (the non-empty ones).
        pieces: The pieces, in the query's order.

    Attributes:
        granules: The granules conditions probe (call :meth:`prepare` first).
    """

    def __init__(
        self,
        definition: IndexDefinition,
        index_column_types: Sequence[str] | None,
        granule_rows: np.ndarray,
        pieces: list[Piece],
    ) -> None:
        self.definition = definition
        self.index_column_types = (
            tuple(index_column_types) if index_column_types is not None else None
        )
        self.granule_rows = np.asarray(granule_rows, np.int64)
        self.pieces = pieces
        kind = (
            _CompositeBloomFilterGranules
            if definition.type == "bloom_filter"
            else _composite_parquet_bloom()
            if definition.type == "parquet_bloom_filter"
            else _CompositeTextGranules
        )
        self.granules = kind(definition, index_column_types, pieces)
        self._plain = None

    @property
    def column_count(self) -> int:
        """Index columns."""
        return len(self.definition.expressions)

    def __len__(self) -> int:
        return len(self.granules)

    def prepare(self, condition: IndexCondition) -> None:
        """Read every slice ``condition`` will test that is not held yet: one batch of
        coalesced range requests per sliced part, the parts in parallel.

        Raises:
            FormatError: A slice fails its CRC32, or a part ends early.
            StorageError: A part cannot be read.
        """
        from concurrent.futures import ThreadPoolExecutor

        work = []
        for piece in self.pieces:
            if piece.read_ranges is not None:
                ranges = piece.granules.unfetched(piece.granules.plan(condition))
                if ranges:
                    work.append((piece, ranges))

        def fetch(item: tuple[Piece, list[tuple[int, int]]]) -> None:
            piece, ranges = item
            piece.granules.fetch(ranges, piece.read_ranges)

        if len(work) <= 1:
            for item in work:
                fetch(item)
            return
        with ThreadPoolExecutor(min(16, len(work))) as pool:
            list(pool.map(fetch, work))

    def plain(self):
        """The same granules as a plain :class:`~bloomskip.clickhouse.index.SkipIndex`, every
        sliced part read whole: what fill statistics need (``--explain``'s report)."""
        from bloomskip.clickhouse.index import SkipIndex

        if self._plain is None:
            payload = bytearray()
            for piece in self.pieces:
                granules = piece.granules if piece.materialize is None else piece.materialize()
                for number in piece.chosen.tolist():
                    payload += granules.granule_bytes(number)
            self._plain = SkipIndex.from_bytes(
                self.definition, bytes(payload), self.granule_rows, None
            )
            self._plain.granules.index_column_types = self.index_column_types
        return self._plain

    def granule_statistics(self) -> pa.Table:
        """Per granule and index column: fill and estimated false-positive rate (see
        :meth:`~bloomskip.clickhouse.index.SkipIndex.granule_statistics`)."""
        return self.plain().granule_statistics()
