"""What ``bloomskip parquet inspect`` and ``verify`` report about a file's Bloom filters.

:func:`inspect_file` reads the footer and the filters only: which chunks carry one, its size,
fill and estimated false-positive rate. :func:`verify_file` also reads the data, row group by row
group, and tests every non-null value against its chunk's filter: a value the filter rejects is a
writer bug (a reader that trusts the filter would miss the row), and a filter so full that it
passes most absent values is reported as unable to prune.

Example:
    >>> import tempfile, pyarrow as pa, pyarrow.parquet as pq
    >>> path = tempfile.mkdtemp() + "/t.parquet"
    >>> pq.write_table(pa.table({"k": [1, 2, 3]}), path, bloom_filter_options={"k": True})
    >>> verify_file(path).ok, inspect_file(path)["chunks"][0]["num_bytes"]
    (True, 32)
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from bloomskip.errors import FormatError
from bloomskip.parquet.filter import SplitBlockBloomFilter
from bloomskip.parquet.reader import ChunkFilter, chunk_filters, open_parquet, read_chunk_filters

__all__ = ["ChunkVerdict", "VerifyReport", "inspect_file", "verify_file"]

#: A filter whose estimated false-positive rate is at least this passes most absent values.
DEFAULT_MAX_FPR = 0.5


def _chunk_row(chunk: ChunkFilter, bloom: SplitBlockBloomFilter | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "row_group": chunk.row_group,
        "column": chunk.column_path,
        "physical_type": chunk.value_type.physical_type if chunk.value_type else None,
        "num_values": chunk.num_values,
        "has_filter": bloom is not None,
    }
    if bloom is not None:
        items = bloom.estimated_items
        row.update(
            offset=chunk.offset,
            length=chunk.length,
            num_bytes=bloom.num_bytes,
            fill_ratio=round(bloom.fill_ratio, 6),
            estimated_fpr=float(f"{bloom.estimated_fpr:.6g}"),
            # None when saturated (a word position full in every block): JSON has no infinity.
            estimated_items=None if math.isinf(items) else round(items, 1),
        )
    return row


def _open(path: str | os.PathLike, filesystem: Any):
    import pyarrow.parquet as pq

    file, name = open_parquet(path, filesystem)
    try:
        parquet = pq.ParquetFile(file)
    except (pa.ArrowInvalid, OSError) as exc:
        file.close()
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FormatError(f"not a readable Parquet file: {first}", source=name) from None
    return file, name, parquet


def inspect_file(path: str | os.PathLike, *, filesystem: Any = None) -> dict[str, Any]:
    """The Bloom filters of a file, chunk by chunk, from its footer and filters only.

    Args:
        path: A local path or an object-store URI.
        filesystem: A pyarrow filesystem to read ``path`` from instead.

    Returns:
        ``{"file", "row_groups", "columns", "chunks_with_filter", "filter_bytes", "chunks"}``;
        each chunk: row group, column, physical type, value count, and for a filter its offset,
        length, ``num_bytes``, fill ratio, estimated false-positive rate and items.

    Raises:
        StorageError: The file cannot be read.
        FormatError: Not Parquet, or a corrupt filter.
    """
    file, name, parquet = _open(path, filesystem)
    with file:
        chunks = chunk_filters(parquet.metadata)
        filters = read_chunk_filters(
            file, file.size(), [c for c in chunks if c.offset is not None], name
        )
    rows = [_chunk_row(c, filters.get((c.row_group, c.column_path))) for c in chunks]
    return {
        "file": name,
        "row_groups": parquet.metadata.num_row_groups,
        "columns": parquet.metadata.num_columns,
        "chunks_with_filter": len(filters),
        "filter_bytes": sum(f.num_bytes for f in filters.values()),
        "chunks": rows,
    }


@dataclass
class ChunkVerdict:
    """One filtered chunk checked against its data.

    Attributes:
        row_group, column: The chunk.
        values: Non-null values tested.
        rejected: How many of them the filter rejects (each one a row a reader would miss).
        rejected_examples: Up to ``limit`` distinct rejected values, as text.
        estimated_fpr: The filter's estimated false-positive rate.
        too_full: Whether that rate is at least the report's ``max_fpr``.
        skipped: Why the chunk could not be checked (a type bloomskip cannot read), else None.
    """

    row_group: int
    column: str
    values: int = 0
    rejected: int = 0
    rejected_examples: list[str] = field(default_factory=list)
    estimated_fpr: float = 0.0
    too_full: bool = False
    skipped: str | None = None


@dataclass
class VerifyReport:
    """The result of :func:`verify_file`.

    Attributes:
        file: The file.
        chunks: The filtered chunks, each checked.
        chunks_without_filter: Chunks that carry no filter.
        max_fpr: The threshold of ``too_full``.
    """

    file: str
    chunks: list[ChunkVerdict]
    chunks_without_filter: int
    max_fpr: float

    @property
    def ok(self) -> bool:
        """No filter rejects a value of its chunk."""
        return not any(c.rejected for c in self.chunks)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {
            "file": self.file,
            "ok": self.ok,
            "max_fpr": self.max_fpr,
            "chunks_checked": sum(c.skipped is None for c in self.chunks),
            "chunks_without_filter": self.chunks_without_filter,
            "rejected_values": sum(c.rejected for c in self.chunks),
            "too_full": sum(c.too_full for c in self.chunks),
            "chunks": [asdict(c) for c in self.chunks],
        }


def verify_file(
    path: str | os.PathLike,
    *,
    filesystem: Any = None,
    max_fpr: float = DEFAULT_MAX_FPR,
    limit: int = 5,
) -> VerifyReport:
    """Test every value of each filtered chunk against the chunk's filter.

    The data is read one row group at a time, and of it only the columns that carry filters.

    Args:
        path: A local path or an object-store URI.
        filesystem: A pyarrow filesystem to read ``path`` from instead.
        max_fpr: A filter whose estimated false-positive rate is at least this is ``too_full``.
        limit: Rejected values kept as examples per chunk.

    Returns:
        The :class:`VerifyReport`; ``ok`` is False when some filter rejects a value.

    Raises:
        StorageError: The file cannot be read.
        FormatError: Not Parquet, or a corrupt filter.
    """
    file, name, parquet = _open(path, filesystem)
    with file:
        chunks = chunk_filters(parquet.metadata)
        filtered = [c for c in chunks if c.offset is not None]
        filters = read_chunk_filters(file, file.size(), filtered, name)
        verdicts = []
        for rg in range(parquet.metadata.num_row_groups):
            in_group = [c for c in filtered if c.row_group == rg]
            if not in_group:
                continue
            tops = sorted({c.column_path.split(".")[0] for c in in_group})
            table = parquet.read_row_group(rg, columns=tops)
            for chunk in in_group:
                bloom = filters[rg, chunk.column_path]
                verdicts.append(_check(chunk, bloom, table, max_fpr, limit))
    return VerifyReport(name, verdicts, len(chunks) - len(filtered), max_fpr)


def _check(
    chunk: ChunkFilter,
    bloom: SplitBlockBloomFilter,
    table: pa.Table,
    max_fpr: float,
    limit: int,
) -> ChunkVerdict:
    fpr = bloom.estimated_fpr
    verdict = ChunkVerdict(
        chunk.row_group, chunk.column_path, estimated_fpr=fpr, too_full=fpr >= max_fpr
    )
    values = leaf_values(table, chunk.column_path.split("."))
    if values is None or chunk.value_type is None:
        verdict.skipped = "a nested layout bloomskip does not walk"
        return verdict
    values = values.drop_null()
    hashes = chunk.value_type.hash(values)
    rejected = ~bloom.contains_hashes(hashes)
    verdict.values = len(values)
    verdict.rejected = int(rejected.sum())
    if verdict.rejected:
        examples = values.filter(pa.array(rejected)).unique()[:limit]
        verdict.rejected_examples = [str(v) for v in examples.to_pylist()]
    return verdict


def leaf_values(table: pa.Table, path: list[str]) -> pa.Array | None:
    """The values of the leaf column at the Parquet ``path`` (structs and three-level lists
    walked; None for another nesting)."""
    array = table.column(path[0])
    array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    rest = path[1:]
    while rest:
        t = array.type
        if pa.types.is_struct(t):
            index = t.get_field_index(rest[0])
            if index < 0:
                return None
            array = array.flatten()[index]  # the parent's nulls merged into the child's
            rest = rest[1:]
        elif (pa.types.is_list(t) or pa.types.is_large_list(t)) and len(rest) >= 2:
            array = array.flatten()
            rest = rest[2:]
        else:
            return None
    if pa.types.is_struct(array.type) or pa.types.is_list(array.type):
        return None
    return array
