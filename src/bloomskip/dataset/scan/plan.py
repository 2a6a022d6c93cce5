"""The access plan: what a scan reads, as pruning decided it.

Pruning (``prune.py``) knows indexes and granules; the scan (``query.py``) knows DuckDB and
pyarrow. Between them passes one plain value, as DataFusion's ``ParquetAccessPlan`` passes
between its pruning and its Parquet scan: per file, whether it is skipped, and otherwise the
row groups it reads and the row ranges within them. Every listing (folder, object-store prefix,
table snapshot) and every index store yields the same value, and one scan consumes it.

The same value is the hand-off to other engines (``Explanation.access_plan()``, docs/queries.md):
its files carry the identities they were decided for, and :meth:`AccessPlan.to_pyarrow`,
:meth:`AccessPlan.to_duckdb` and :meth:`AccessPlan.to_polars` read exactly it.

Row ranges are half-open ``[start, stop)`` file row numbers (``file_row_number`` in DuckDB),
sorted and disjoint, each inside one run of consecutive row groups read; a row group read holds
at least one range. With granules of a row group a range is a run of whole row groups; with
granules of a row count (``--granule ROWS``) it is a run of kept granules, and the scan reads
those rows only (docs/queries.md, "Granules below the row group").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from bloomskip.errors import BloomskipError

if TYPE_CHECKING:
    import duckdb
    import polars as pl
    import pyarrow.dataset as pads


class PlanReader(Protocol):
    """How a plan's files are read: given to a plan by the dataset that decided it."""

    def to_pyarrow(self, plan: AccessPlan) -> pads.Dataset: ...

    def to_duckdb(self, plan: AccessPlan, connection) -> duckdb.DuckDBPyRelation: ...

    def to_polars(self, plan: AccessPlan) -> pl.LazyFrame: ...

    def changed(self, plan: AccessPlan) -> list[str]: ...


@dataclass(frozen=True, eq=False)
class FileAccess:
    """What the scan reads of one file.

    Attributes:
        number: The file's position in the decision's file list (``Explanation.files``).
        path: The file as it is read (a local path, or a path in the store's filesystem).
        key: Its name relative to the dataset (the index's name for it).
        group_rows: Rows of each of the file's row groups (record batches of an IPC file).
        row_groups: The row groups read, ascending (``int64``).
        row_ranges: ``int64 (n, 2)``: the ``[start, stop)`` row numbers read.
        identity: The file's identity the decision was made for: ``size``, ``modified_ns``
            and, on an object store, ``etag`` and ``version``; None when the dataset did not
            record one (a file it could not trust is never pruned).
    """

    number: int
    path: str
    key: str
    group_rows: np.ndarray
    row_groups: np.ndarray
    row_ranges: np.ndarray
    identity: dict | None = None

    @property
    def whole(self) -> bool:
        """Whether every row group of the file is read."""
        return len(self.row_groups) == len(self.group_rows)

    @property
    def rows(self) -> int:
        """Rows read."""
        return int((self.row_ranges[:, 1] - self.row_ranges[:, 0]).sum())

    def per_row_group(self) -> Iterator[tuple[int, np.ndarray]]:
        """Each row group read, with the row ranges that fall in it.

        Yields:
            ``(row group, int64 (n, 2) ranges)``, the ranges clipped to the row group.

        Example:
            >>> access = file_access(0, "a.parquet", "a.parquet", [10, 10, 10], [True, True, False])
            >>> [(group, ranges.tolist()) for group, ranges in access.per_row_group()]
            [(0, [[0, 10]]), (1, [[10, 20]])]
        """
        ends = np.cumsum(self.group_rows)
        starts = ends - self.group_rows
        for group in self.row_groups.tolist():
            low, high = starts[group], ends[group]
            inside = (self.row_ranges[:, 0] < high) & (self.row_ranges[:, 1] > low)
            yield group, np.clip(self.row_ranges[inside], low, high)


@dataclass(frozen=True, eq=False)
class AccessPlan:
    """What a query reads: the files with anything to read, in dataset order.

    It is also the hand-off to another engine: ``to_pyarrow()``, ``to_duckdb()`` and
    ``to_polars()`` read exactly what it names, the files as they are when the engine reads
    them; :meth:`changed` says whether any of them was replaced since the decision (a plan of
    a replaced file may miss its rows: decide again).

    Attributes:
        files: One :class:`FileAccess` per file read; a file not listed is skipped.
        file_count: Files the decision covered (read or skipped).
        reader: How the files are read (set for a plan of ``Dataset.explain``); None for a
            plan built by hand, which has only :meth:`to_dict`.

    Example:
        >>> plan = access_plan([("a.parquet", "a.parquet", [5, 5])], [np.array([False, True])])
        >>> [(access.key, access.row_groups.tolist(), access.row_ranges.tolist())
        ...  for access in plan.files]
        [('a.parquet', [1], [[5, 10]])]
    """

    files: tuple[FileAccess, ...]
    file_count: int
    reader: PlanReader | None = field(default=None, repr=False)

    @property
    def row_group_count(self) -> int:
        """Row groups read, over every file."""
        return sum(len(access.row_groups) for access in self.files)

    @property
    def rows(self) -> int:
        """Rows read, over every file."""
        return sum(access.rows for access in self.files)

    def to_dict(self) -> dict:
        """The plan as JSON-ready data: per file read, its key, row groups and row ranges."""
        return {
            "files_read": len(self.files),
            "files_skipped": self.file_count - len(self.files),
            "row_groups_read": self.row_group_count,
            "rows_read": self.rows,
            "files": [
                {
                    "key": access.key,
                    "path": access.path,
                    "identity": access.identity,
                    "row_groups": access.row_groups.tolist(),
                    "row_ranges": access.row_ranges.tolist(),
                }
                for access in self.files
            ],
        }

    def to_pyarrow(self) -> pads.Dataset:
        """The kept row groups as a ``pyarrow.dataset.Dataset`` (nothing read yet).

        Any engine that scans a pyarrow dataset takes it: DataFusion
        (``SessionContext.register_dataset``), DuckDB, Polars. Row ranges finer than a row
        group are read as their whole row groups here (pyarrow selects row groups, not rows):
        apply the exact predicate in the engine.

        Raises:
            BloomskipError: The plan was not made by ``Dataset.explain``.

        Example:
            >>> plan = Dataset("logs/").explain("user_id = 42").access_plan()  # doctest: +SKIP
            >>> datafusion.SessionContext().register_dataset("logs", plan.to_pyarrow())
            ... # doctest: +SKIP
        """
        return self._reader().to_pyarrow(self)

    def to_duckdb(self, connection=None) -> duckdb.DuckDBPyRelation:
        """A DuckDB relation reading exactly the plan's rows (row ranges included).

        Args:
            connection: The DuckDB connection the relation belongs to (default: DuckDB's
                default connection, the one ``duckdb.sql`` uses).

        Raises:
            BloomskipError: The plan was not made by ``Dataset.explain``.

        Example:
            >>> plan.to_duckdb().filter("user_id = 42").fetchall()  # doctest: +SKIP
        """
        return self._reader().to_duckdb(self, connection)

    def to_polars(self) -> pl.LazyFrame:
        """A Polars ``LazyFrame`` reading exactly the plan's rows (row ranges included).

        Raises:
            BloomskipError: The plan was not made by ``Dataset.explain``.

        Example:
            >>> plan.to_polars().filter(pl.col("user_id") == 42).collect()  # doctest: +SKIP
        """
        return self._reader().to_polars(self)

    def changed(self) -> list[str]:
        """The keys of the plan's files no longer as they were when it was decided.

        Returns:
            Keys, in plan order; empty when every file read is unchanged.

        Example:
            >>> plan.changed()  # doctest: +SKIP
            []
        """
        return self._reader().changed(self)

    def _reader(self) -> PlanReader:
        if self.reader is None:
            raise BloomskipError("this plan has no files to read: make it with Dataset.explain")
        return self.reader

    def with_reader(self, reader: PlanReader) -> AccessPlan:
        """The same plan, read through ``reader``."""
        return replace(self, reader=reader)


def group_ranges(group_rows: Sequence[int] | np.ndarray, keep) -> np.ndarray:
    """The row ranges of the row groups ``keep`` marks: one per run of consecutive ones.

    Args:
        group_rows: Rows of each row group.
        keep: A bool per row group.

    Returns:
        ``int64 (n, 2)`` ``[start, stop)`` row numbers.

    Example:
        >>> group_ranges([4, 4, 4, 4], [True, True, False, True]).tolist()
        [[0, 8], [12, 16]]
    """
    rows = np.asarray(group_rows, np.int64)
    ends = np.cumsum(rows)
    starts = ends - rows
    edges = np.diff(np.concatenate(([0], np.asarray(keep, np.int8), [0])))
    first, stop = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return np.stack([starts[first], ends[stop - 1]], axis=1).reshape(-1, 2)


def file_access(number: int, path: str, key: str, group_rows, keep) -> FileAccess:
    """The :class:`FileAccess` of a file whose row groups ``keep`` marks (whole row groups)."""
    rows = np.asarray(group_rows, np.int64)
    return FileAccess(
        number, path, key, rows, np.flatnonzero(keep).astype(np.int64), group_ranges(rows, keep)
    )


def access_plan(
    files: Sequence[tuple[str, str, object]],
    keep: Sequence,
    granules: Sequence | None = None,
    identities: Sequence[dict | None] | None = None,
) -> AccessPlan:
    """The plan reading, of each file, the row groups ``keep`` marks, or only the rows of
    the granules ``granules`` marks.

    Args:
        files: ``(path, key, rows of each row group)`` per file, in dataset order.
        keep: Per file, a bool per row group: True = must be read.
        granules: Per file, None (read the row groups ``keep`` marks whole) or ``(rows of
            each granule, bool per granule)``: read the kept granules' rows; ``keep`` must
            then mark exactly the row groups they overlap. None: whole row groups everywhere.
        identities: Per file, its :attr:`FileAccess.identity`; None: none recorded.

    Returns:
        The :class:`AccessPlan`; files with nothing to read are left out.

    Example:
        >>> plan = access_plan(
        ...     [("a.parquet", "a.parquet", [8, 8])],
        ...     [np.array([True, True])],
        ...     [([4, 4, 4, 4], np.array([False, True, True, False]))],
        ... )
        >>> plan.files[0].row_ranges.tolist(), plan.rows
        ([[4, 12]], 8)
    """
    chosen = []
    for number, ((path, key, rows), mask) in enumerate(zip(files, keep, strict=True)):
        if not np.any(mask):
            continue
        access = file_access(number, path, key, rows, mask)
        finer = granules[number] if granules is not None else None
        if finer is not None:
            access = replace(access, row_ranges=group_ranges(finer[0], finer[1]))
        if identities is not None:
            access = replace(access, identity=identities[number])
        chosen.append(access)
    return AccessPlan(tuple(chosen), len(files))
