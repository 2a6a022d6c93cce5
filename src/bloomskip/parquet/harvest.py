"""Harvesting a file's split-block Bloom filters for an index, and probing them as DuckDB does.

:func:`harvest_filters` gives one :class:`SplitBlockBloomFilter` per row group of each asked-for
column: the filter the writer stored, read from its byte range only (never the column data);
for a chunk that carries none, one computed from the chunk's values, sized as the writers size
one for the chunk's distinct values at the index's false-positive rate. Only those chunks' data
is read.

:func:`row_groups_passing` is the ``=`` / ``IN`` / ``has`` rule of DuckDB's
``parquet_bloom_probe``: a row group is kept when any of the literals passes its filter (a
row group without a filter is kept). For floating-point columns both zeros are probed: the
filters hash raw bits, and SQL's ``0.0 = -0.0`` holds.

Example:
    >>> import tempfile, pyarrow as pa, pyarrow.parquet as pq
    >>> path = tempfile.mkdtemp() + "/t.parquet"
    >>> pq.write_table(pa.table({"k": range(100)}), path, row_group_size=50,
    ...                bloom_filter_options={"k": True})
    >>> found = harvest_filters(path, ["k"])
    >>> found.harvested, found.computed, row_groups_passing(found.filters["k"], [75]).tolist()
    (2, 0, [False, True])
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from bloomskip.errors import FormatError
from bloomskip.parquet.filter import SplitBlockBloomFilter, optimal_num_bytes
from bloomskip.parquet.reader import chunk_filters, open_parquet, read_chunk_filters
from bloomskip.parquet.verify import leaf_values

__all__ = ["DEFAULT_FPR", "Harvest", "harvest_filters", "harvest_open", "row_groups_passing"]

#: The false-positive rate of the filters computed for chunks that carry none (the writers'
#: own default is 0.05; an index is probed more often than it is built).
DEFAULT_FPR = 0.01


@dataclass
class Harvest:
    """The filters of one file, per column: ``filters[column][row_group]`` (None: a chunk whose
    type no filter can hold, a boolean).

    Attributes:
        filters: Per column path, one filter (or None) per row group.
        harvested: Chunks whose stored filter was read.
        computed: Chunks whose filter was computed from their values.
    """

    filters: dict[str, list[SplitBlockBloomFilter | None]] = field(default_factory=dict)
    harvested: int = 0
    computed: int = 0


def harvest_filters(
    path: str | os.PathLike,
    columns: list[str],
    *,
    fpr: float = DEFAULT_FPR,
    filesystem: Any = None,
) -> Harvest:
    """One split-block Bloom filter per row group of each of ``columns``.

    Args:
        path: A local path or an object-store URI.
        columns: Leaf column paths (dotted, as ``path_in_schema``; a list's elements are
            ``name.list.element``).
        fpr: False-positive rate of the filters computed for chunks that carry none.
        filesystem: A pyarrow filesystem to read ``path`` from instead.

    Returns:
        The :class:`Harvest`.

    Raises:
        StorageError: The file cannot be read.
        FormatError: Not Parquet, a corrupt filter, or a column the file does not have.
    """
    import pyarrow.parquet as pq

    file, name = open_parquet(path, filesystem)
    with file:
        try:
            parquet = pq.ParquetFile(file)
        except (pa.ArrowInvalid, OSError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unreadable"
            raise FormatError(f"not a readable Parquet file: {first}", source=name) from None
        return harvest_open(parquet, file, name, columns, fpr=fpr)


def harvest_open(
    parquet: Any,
    file: Any,
    name: str,
    columns: list[str],
    *,
    fpr: float = DEFAULT_FPR,
    groups: range | None = None,
) -> Harvest:
    """:func:`harvest_filters` over a file already open (a dataset build has its footer).

    Args:
        parquet: A ``pyarrow.parquet.ParquetFile`` over the file (its footer parsed).
        file: The same file as a pyarrow random-access file: the filters' byte ranges are
            read from it with ``read_at``.
        name: The file, for error messages.
        columns: Leaf column paths.
        fpr: False-positive rate of the computed filters.
        groups: Only these row groups (all when None); ``filters[column]`` then has one entry
            per row group of ``groups``.

    Returns:
        The :class:`Harvest`.

    Raises:
        StorageError: The file cannot be read.
        FormatError: A corrupt filter, or a column the file does not have.

    Example:
        >>> harvest_open(pq.ParquetFile(path), pa.OSFile(path), path, ["k"])  # doctest: +SKIP
    """
    numbers = range(parquet.metadata.num_row_groups) if groups is None else groups
    chunks = [
        c
        for c in chunk_filters(parquet.metadata)
        if c.column_path in columns and c.row_group in numbers
    ]
    missing = sorted(set(columns) - {c.column_path for c in chunks})
    if missing and len(numbers):
        raise FormatError(f"the file has no column {', '.join(missing)}", source=name)
    stored = read_chunk_filters(
        file, file.size(), [c for c in chunks if c.offset is not None], name
    )
    result = Harvest({c: [None] * len(numbers) for c in columns})
    for chunk in chunks:
        key = chunk.row_group, chunk.column_path
        slot = chunk.row_group - numbers.start
        if key in stored:
            result.filters[chunk.column_path][slot] = stored[key]
            result.harvested += 1
        elif chunk.value_type is not None:
            top = chunk.column_path.split(".")[0]
            table = parquet.read_row_group(chunk.row_group, columns=[top])
            values = leaf_values(table, chunk.column_path.split("."))
            if values is None:
                continue  # a nesting no filter is computed for: the row group stays kept
            result.filters[chunk.column_path][slot] = _computed(values, chunk.value_type, fpr)
            result.computed += 1
    return result


def _computed(values: pa.Array, value_type, fpr: float) -> SplitBlockBloomFilter:
    hashes = np.unique(value_type.hash(values.drop_null()))
    bloom = SplitBlockBloomFilter(
        optimal_num_bytes(max(len(hashes), 1), fpr), value_type=value_type
    )
    bloom.add_hashes(hashes)
    return bloom


def row_groups_passing(
    filters: list[SplitBlockBloomFilter | None], literals: list[Any]
) -> np.ndarray:
    """Which row groups may hold a row whose column equals one of ``literals``.

    Args:
        filters: One filter per row group (None: no filter, the row group is kept).
        literals: The values of ``col = v``, ``col IN (…)`` or ``has(col, v)``. A null
            matches nothing; a literal that does not convert to the column's type keeps every
            row group (the engine's comparison decides, never the filter).

    Returns:
        A bool per row group: False only where every literal is certainly absent.

    Example:
        >>> row_groups_passing([None, SplitBlockBloomFilter(32)], ["x"]).tolist()
        [True, False]
    """
    keep = np.ones(len(filters), bool)
    for index, bloom in enumerate(filters):
        if bloom is not None:
            keep[index] = _any_passes(bloom, [v for v in literals if v is not None])
    return keep


def _any_passes(bloom: SplitBlockBloomFilter, literals: list[Any]) -> bool:
    probes = list(literals)
    if bloom.value_type.physical_type in ("FLOAT", "DOUBLE"):
        # The filters hash raw bits; SQL equality holds between 0.0 and -0.0.
        probes += [
            z for v in literals if isinstance(v, int | float) and v == 0 for z in (0.0, -0.0)
        ]
    try:
        return bool(bloom.contains_batch(probes).any())
    except ValueError:  # UnsupportedTypeError: some literal is no value of this column
        return True
