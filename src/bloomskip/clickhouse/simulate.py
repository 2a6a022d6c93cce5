"""Try candidate skip indexes on a data file before ALTER TABLE (``bloomskip clickhouse simulate``).

Every index (ClickHouse's own ``INDEX name expr TYPE ... GRANULARITY g`` clause; the ``INDEX name``
prefix and ``GRANULARITY`` may be left out) is built exactly as ClickHouse builds it for a part
holding these rows in this order, cut into data granules of ``index_granularity`` rows. The report
gives, per index, its size, bits per row and mean fill ratio, and per predicate the data granules
selected out of the total (as ``EXPLAIN indexes = 1`` counts them) and the share of rows skipped.
``emit`` writes ``skp_idx_<name>.idx`` and ``skp_idx_<name>.mrk2`` in ClickHouse's layout.

A library module: the command line and its table / JSON output are in
:mod:`bloomskip.clickhouse.cli`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bloomskip.errors import BloomskipError, SimulateError

if TYPE_CHECKING:
    import pyarrow as pa

    from bloomskip.clickhouse.ddl import IndexDefinition

__all__ = [
    "IndexReport",
    "PredicateReport",
    "SimulateError",
    "Simulation",
    "read_table",
    "simulate",
    "simulate_file",
]

#: ClickHouse's default ``index_granularity`` (rows per data granule).
DEFAULT_INDEX_GRANULARITY = 8192


@dataclass
class PredicateReport:
    """What one index does for one predicate.

    Attributes:
        where: The predicate.
        granules_selected: Data granules read after this index, as bloomskip prunes (what
            ClickHouse reads too, but for ``clickhouse_granules_selected``).
        rows_skipped: Rows in the skipped granules.
        rows_skipped_fraction: Their share of all rows (0..1).
        useful: Whether the index can evaluate any part of the predicate at all.
        clickhouse_granules_selected: The granules ClickHouse itself reads, where bloomskip
            prunes and ClickHouse does not (``hasAnyTokens`` / ``hasAllTokens`` on a text
            index); None where the two agree.
    """

    where: str
    granules_selected: int
    rows_skipped: int
    rows_skipped_fraction: float
    useful: bool
    clickhouse_granules_selected: int | None = None


@dataclass
class IndexReport:
    """One candidate index built over the data.

    Attributes:
        name, type, definition: The index (``definition`` is its INDEX clause).
        bytes: Size of the decompressed ``.idx`` stream.
        compressed_bytes: Size of the ``.idx`` file with the chosen codec.
        bits_per_row: ``8 * bytes / rows``.
        mean_fill_ratio: Mean share of set bits over granules and index columns.
        granules_total: Data granules of the part.
        predicates: One report per ``--where``.
        warnings: Why no predicate can ever use the index, when that is so (printed to stderr).
    """

    name: str
    type: str
    definition: str
    bytes: int
    compressed_bytes: int
    bits_per_row: float
    mean_fill_ratio: float
    granules_total: int
    predicates: list[PredicateReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class Simulation:
    """The candidate indexes of one data file, side by side.

    Attributes:
        rows: Rows of the data.
        granules: Data granules of the part these rows would make.
        indexes: One report per index, in the order given.
    """

    rows: int
    granules: int
    indexes: list[IndexReport]


def simulate_file(
    path: str | os.PathLike,
    definitions: list[str],
    predicates: list[str],
    *,
    index_granularity: int = DEFAULT_INDEX_GRANULARITY,
    column_types: dict[str, str] | None = None,
    emit: str | os.PathLike | None = None,
    codec: str = "LZ4",
    progress: bool | None = False,
    jobs: int | None = None,
) -> Simulation:
    """Read a data file and try each candidate index on it (what ``clickhouse simulate`` runs).

    Args:
        path: A Parquet, Arrow IPC (file or stream) or CSV file.
        definitions: Index clauses, ``[INDEX name] expr TYPE type(args) [GRANULARITY g]``.
        predicates: WHERE predicates (ClickHouse SQL).
        index_granularity: Rows per data granule.
        column_types: ClickHouse type per column, overriding the Arrow-derived default; every
            column named must be one an index reads.
        emit: Directory to write ``skp_idx_<name>.idx`` / ``.mrk2`` into, or None.
        codec: ``"LZ4"`` or ``"NONE"`` for the emitted streams.
        progress: A progress bar on stderr, one step per index; None: on a terminal only.
        jobs: Threads each index's granules are built on (default: one per CPU); the bytes do
            not depend on it.

    Returns:
        The :class:`Simulation`.

    Raises:
        SimulateError: Unreadable data, repeated index names, a column type for a column no
            index reads, an unusable column type, or jobs outside 1..64.
        IndexDefinitionError: An index ClickHouse would reject.
        ConditionError: A predicate that is not valid SQL.

    Example:
        >>> report = simulate_file("logs.parquet", ["msg TYPE tokenbf_v1(10240, 3, 0)"],
        ...                        ["hasToken(msg, 'timeout')"])  # doctest: +SKIP
        >>> report.indexes[0].predicates[0].rows_skipped_fraction  # doctest: +SKIP
        0.875
    """
    from bloomskip.clickhouse.ddl import parse_index_definition

    parsed = [parse_index_definition(text) for text in definitions]
    names = [d.name for d in parsed]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SimulateError(f"index names must differ; repeated: {', '.join(duplicates)}")
    columns = sorted({c for d in parsed for c in d.source_columns})
    unknown = sorted(set(column_types or {}) - set(columns))
    if unknown:
        raise SimulateError(
            f"--column-type names {', '.join(map(repr, unknown))}, which no --index reads"
        )
    if jobs is not None:
        _check_jobs(jobs)
    table = read_table(path, columns, jobs=jobs)
    reports = simulate(
        table,
        parsed,
        predicates,
        index_granularity=index_granularity,
        column_types=column_types,
        emit=Path(emit) if emit is not None else None,
        codec=codec,
        progress=progress,
        jobs=jobs,
    )
    full, rest = divmod(table.num_rows, index_granularity)
    return Simulation(table.num_rows, full + (1 if rest else 0), reports)


def read_table(path: str | os.PathLike, columns: list[str], jobs: int | None = None) -> pa.Table:
    """Read the columns an index needs from a Parquet, Arrow IPC or CSV file.

    Args:
        path: The file; its format comes from its first bytes, else from its extension
            (.parquet/.pq, .arrow/.feather/.ipc/.arrows for an IPC stream); any other file is
            read as CSV.
        columns: Columns to read.
        jobs: Threads decoding a Parquet file's row groups (default: one per CPU).

    Returns:
        A ``pyarrow.Table`` with those columns.

    Raises:
        SimulateError: The file is missing, unreadable, or lacks a column.

    Example:
        >>> read_table("rows.parquet", ["v"]).column_names  # doctest: +SKIP
        ['v']
    """
    import pyarrow as pa

    from bloomskip._sources import CSV, PARQUET, open_dataset, sniff_format

    if not Path(path).is_file():
        raise SimulateError(f"{path}: no such file")
    try:
        file_format = sniff_format(path) or CSV
        if file_format == PARQUET:
            return _read_parquet(path, columns, jobs)
        dataset = open_dataset(path, file_format)
        missing = [c for c in columns if c not in dataset.schema.names]
        if missing:
            raise SimulateError(
                f"{path}: no column {', '.join(map(repr, missing))} "
                f"(columns: {', '.join(dataset.schema.names)})"
            )
        return dataset.to_table(columns=columns)
    except BloomskipError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise SimulateError(f"{path}: cannot read as Parquet, Arrow IPC or CSV: {exc}") from exc


def _read_parquet(path: str | os.PathLike, columns: list[str], jobs: int | None = None) -> pa.Table:
    """Only ``columns`` of a Parquet file, its row groups decoded on ``jobs`` threads at once.

    Read with ``pyarrow.parquet`` rather than ``pyarrow.dataset``, which costs a command more to
    import than the read itself for a small file. One column is decoded by one thread in
    pyarrow, so several row groups are read at once, each by a reader of its own over the footer
    parsed once.
    """
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as parquet:
        names = parquet.schema_arrow.names
        missing = [c for c in columns if c not in names]
        if missing:
            raise SimulateError(
                f"{path}: no column {', '.join(map(repr, missing))} (columns: {', '.join(names)})"
            )
        groups = parquet.metadata.num_row_groups
        threads = min(_default_jobs() if jobs is None else jobs, groups)
        if threads <= 1:
            return parquet.read(columns=columns, use_threads=jobs is None)
        metadata = parquet.metadata
    local = threading.local()

    def read_group(group: int) -> pa.Table:
        reader = getattr(local, "reader", None)
        if reader is None:
            reader = local.reader = pq.ParquetFile(path, metadata=metadata)
        return reader.read_row_group(group, columns=columns, use_threads=False)

    with ThreadPoolExecutor(max_workers=threads) as executor:
        return pa.concat_tables(executor.map(read_group, range(groups)))


def _check_jobs(jobs: int) -> int:
    if not 1 <= jobs <= 64:
        raise SimulateError(f"jobs must be in 1..64, got {jobs}")
    return jobs


def _default_jobs() -> int:
    """One thread per CPU, at most the builders' 64."""
    return min(os.cpu_count() or 1, 64)


def simulate(
    table: pa.Table,
    definitions: list[IndexDefinition],
    predicates: list[str],
    *,
    index_granularity: int = DEFAULT_INDEX_GRANULARITY,
    column_types: dict[str, str] | None = None,
    emit: Path | None = None,
    codec: str = "LZ4",
    progress: bool | None = False,
    jobs: int | None = None,
) -> list[IndexReport]:
    """Build each index over ``table`` and evaluate each predicate against it.

    Args:
        table: The rows, in part order.
        definitions: :class:`~bloomskip.clickhouse.ddl.IndexDefinition` objects.
        predicates: WHERE predicates.
        index_granularity: Rows per data granule.
        column_types: ClickHouse type per column, overriding the Arrow-derived default.
        emit: Directory to write ``skp_idx_<name>.idx`` / ``.mrk2`` into, or None.
        codec: ``"LZ4"`` or ``"NONE"`` for the emitted streams.
        progress: A progress bar on stderr, one step per index; None: on a terminal only.
        jobs: Threads each index's granules are built on, 1..64 (default: one per CPU, at
            most 64); the bytes do not depend on it.

    Returns:
        One report per index, in order.

    Raises:
        SimulateError: An unusable column type, or jobs outside 1..64.
        ConditionError: A predicate that is not valid SQL.

    Example:
        >>> import pyarrow as pa
        >>> from bloomskip.clickhouse.ddl import parse_index_definition
        >>> d = parse_index_definition("v TYPE bloom_filter")
        >>> r = simulate(pa.table({"v": list(range(100))}), [d], ["v = 7"], index_granularity=10)
        >>> r[0].predicates[0].granules_selected
        1
    """
    import numpy as np
    from tqdm import tqdm

    threads = _default_jobs() if jobs is None else _check_jobs(jobs)
    rows = table.num_rows
    full, rest = divmod(rows, index_granularity)
    granule_rows = np.array([index_granularity] * full + ([rest] if rest else []), np.int64)
    types = _column_types(table, column_types)
    if emit is not None:
        try:
            emit.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SimulateError(f"--emit {emit}: cannot create the directory: {exc}") from exc
    data_row_bounds = np.concatenate(([0], np.cumsum(granule_rows)))
    reports = []
    for definition in tqdm(
        definitions,
        desc="building indexes",
        unit="index",
        disable=None if progress is None else not progress,
    ):
        index = _build_index(definition, table, granule_rows, types, threads)
        report = _index_report(definition, index, granule_rows, emit, codec)
        report.predicates = [
            _predicate_report(where, definition, index, types, data_row_bounds)
            for where in predicates
        ]
        reports.append(report)
    return reports


def _column_types(table: pa.Table, column_types: dict[str, str] | None) -> dict[str, str]:
    """The ClickHouse type of each column: the one given, else the Arrow type's default."""
    from bloomskip.clickhouse.types import clickhouse_type_for

    types = {}
    for name in table.column_names:
        types[name] = (column_types or {}).get(name) or clickhouse_type_for(
            table.schema.field(name).type
        )
    return types


def _build_index(
    definition: IndexDefinition, table: pa.Table, granule_rows, types: dict, threads: int
):
    """Build one index's granules over ``table`` on ``threads`` threads.

    Returns:
        The :class:`~bloomskip.clickhouse.index.SkipIndex`.

    Raises:
        SimulateError: The data or a column type cannot be indexed (the message names the
            index).
    """
    from bloomskip.bits import build_threads
    from bloomskip.clickhouse.index import SkipIndex

    try:
        with build_threads(threads):
            return SkipIndex.build(definition, table, granule_rows, types)
    except ValueError as exc:
        # Type checks already name the index; other errors (data, Arrow types) do not.
        prefix = f"index {definition.name!r}: "
        message = str(exc) if str(exc).startswith(prefix) else prefix + str(exc)
        raise SimulateError(message) from exc


def _index_report(
    definition: IndexDefinition, index, granule_rows, emit: Path | None, codec: str
) -> IndexReport:
    """An index's sizes, fill and warnings, its predicates left to :func:`_predicate_report`.

    Args:
        definition: The index.
        index: Its :class:`~bloomskip.clickhouse.index.SkipIndex`.
        granule_rows: Rows per data granule (they sum to the table's rows).
        emit: Directory to write the index's ``.idx`` / ``.mrk2`` into, or None.
        codec: Codec of the ``.idx`` stream, emitted or only measured.

    Returns:
        The :class:`IndexReport`, ``predicates`` empty.

    Raises:
        SimulateError: ``emit`` cannot be written.
    """
    import numpy as np

    from bloomskip.clickhouse.compression import write_compressed_stream
    from bloomskip.clickhouse.condition import index_never_used_reason
    from bloomskip.clickhouse.marks import write_skip_index_files

    rows = int(granule_rows.sum())
    granules = [granule.to_bytes() for granule in index]
    uncompressed_bytes = sum(map(len, granules))
    if emit is None:
        compressed_bytes = len(write_compressed_stream(granules, codec)[0])
    else:
        try:
            idx_path, _ = write_skip_index_files(emit, definition.name, granules, codec=codec)
        except OSError as exc:
            raise SimulateError(f"--emit {emit}: cannot write: {exc}") from exc
        compressed_bytes = idx_path.stat().st_size
    # The granules' fill ratios, counted in place (granule_statistics builds a whole table).
    fill = np.concatenate(
        [index.granules.fill_ratios(c) for c in range(index.column_count)] or [np.zeros(0)]
    )
    report = IndexReport(
        name=definition.name,
        type=definition.type,
        definition=definition.to_sql(),
        bytes=uncompressed_bytes,
        compressed_bytes=compressed_bytes,
        bits_per_row=8 * uncompressed_bytes / rows if rows else 0.0,
        mean_fill_ratio=float(fill.mean()) if len(fill) else 0.0,
        granules_total=len(granule_rows),
    )
    for column_type in index.index_column_types or ():
        reason = index_never_used_reason(definition.type, str(column_type))
        if reason is not None and reason not in report.warnings:
            report.warnings.append(reason)
    return report


def _predicate_report(
    where: str, definition: IndexDefinition, index, types: dict, data_row_bounds
) -> PredicateReport:
    """The data granules one index selects for ``where`` and the rows it skips.

    Args:
        where: The predicate.
        definition: The index.
        index: Its :class:`~bloomskip.clickhouse.index.SkipIndex`.
        types: ClickHouse type per column.
        data_row_bounds: The first row of each data granule, then the table's rows.

    Returns:
        The :class:`PredicateReport`.

    Raises:
        ConditionError: ``where`` is not valid SQL.
    """
    from bloomskip.clickhouse.condition import compile_condition

    rows = int(data_row_bounds[-1])
    condition = compile_condition(where, definition, types)
    selected = condition.select(index)
    rows_read = int((data_row_bounds[selected + 1] - data_row_bounds[selected]).sum())
    clickhouse = None
    if condition.beyond_clickhouse:
        as_clickhouse = compile_condition(where, definition, types, as_clickhouse=True)
        clickhouse = len(as_clickhouse.select(index))
    return PredicateReport(
        where=where,
        granules_selected=len(selected),
        rows_skipped=rows - rows_read,
        rows_skipped_fraction=(rows - rows_read) / rows if rows else 0.0,
        useful=condition.useful,
        clickhouse_granules_selected=clickhouse,
    )
