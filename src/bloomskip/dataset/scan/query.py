"""Exact evaluation of a WHERE over the surviving row groups, with DuckDB.

For Parquet, DuckDB's own reader reads the surviving row groups (``file_row_number`` ranges).
A point lookup on integer columns first locates its rows: pyarrow reads the WHERE's columns of
the surviving row groups, ``pyarrow.compute`` (or DuckDB on that Arrow table) finds the
matching rows, and DuckDB then reads only the row groups that hold them. An Arrow IPC file is
read through the ``pyarrow.dataset`` of its surviving record batches (memory-mapped, see
:func:`~bloomskip.dataset.prune.surviving_dataset`). In every case DuckDB applies the
predicate translated from ClickHouse SQL (with ClickHouse's typing, see ``translate``) to the
rows returned, so they are exactly those a scan of the whole dataset returns
(docs/queries.md). Files whose schemas differ are read by one ``union_by_name`` reader, so a
result's columns never depend on the survivors.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bloomskip._cli import interrupted
from bloomskip.dataset.prune import Explanation, surviving_dataset
from bloomskip.dataset.scan.plan import group_ranges
from bloomskip.errors import BloomskipError, FormatError

if TYPE_CHECKING:
    import pyarrow as pa

# The SQL given to DuckDB and its full error messages (``bloomskip query --debug``).
_log = logging.getLogger(__name__)

#: Footers parsed for locating rows, by file and listed identity (see _footer).
FOOTERS_KEPT = 64
_FOOTERS: dict = {}
VIEW_NAME = "bloomskip_dataset"
ROW_NUMBER = "file_row_number"
# At most this many rows are located before the selected columns are read (see run_query);
# beyond it one query reads the surviving row groups whole.
LOCATE_CAP = 4096
LOCATE_VIEW = "bloomskip_located"
# Up to this many stored bytes of the WHERE's columns in the kept row groups, pyarrow reads
# them on the calling thread and the rows are located in memory (no DuckDB query to plan: 64K-row
# row groups, a point lookup 11.8 against 14.0 ms); beyond, DuckDB locates them, streaming and
# on every core (one 1Mi-row row group 14.2 against 17.8 ms; 11 of them for an IN of 10 values
# 93 against 921 ms, when pyarrow read them whole into memory).
LOCATE_ARROW_BYTES = 4 * 1024 * 1024
# Reading up to this many row groups whole, DuckDB reads them without prefetching (see
# sparse_reads): its filter pushed into the scan decodes the other columns only where it holds
# (one 1Mi-row row group for a point lookup: 13.3 ms without, 22.4 ms with; two for an OR of a
# point and a string: 136 against 169 ms). More are read as a scan, where prefetching pays.
SPARSE_ROW_GROUPS = 2
# Up to this many row groups to read, each is read by a query of its own (see _even_groups);
# beyond, one query per file (DuckDB spreads a file's row groups over its threads).
SPLIT_ROW_GROUPS = 64
# Up to this many values, a point lookup's rows are found by one comparison per value; beyond,
# by a hash-set probe (pyarrow.compute.is_in), which costs the same for any number of values.
SCAN_COMPARISONS = 16
# From this many ANDs under OR on, a query is planned without DuckDB's expression rewriter,
# whose distributivity rule takes time quadratic in them (2,000: 7.5 s; without it 0.2 s). Its
# rules only simplify, so the rows are the same; below this it is worth its cost.
REWRITER_LIMIT = 100
ROW_COLUMN = "__bloomskip_row"
# A query whose progress is shown (on a terminal) and that reads more than SPLIT_ROW_GROUPS row
# groups of several files reads them in this many steps, runs of files of about equal rows, one
# after another: neither DuckDB nor pyarrow tells how far a read has got, so the bar advances
# by each step's rows as it ends.
PROGRESS_STEPS = 20
# ... and the bar appears only once the query has run this long (seconds).
PROGRESS_DELAY = 1.0
# A terminal's query reading fewer rows than this is read in one step, as without a bar: it
# ends before the bar would appear, and steps cost it a third more time (2 cores, 2M rows).
PROGRESS_MIN_ROWS = 1 << 22


def connect(config: dict | None = None):
    """A new DuckDB connection as every bloomskip query uses one.

    DuckDB draws a progress bar on standard output for a query that runs longer than two
    seconds, even when standard output is a pipe or a file: it would mix into a CSV or JSON
    result (``bloomskip query --format csv > out.csv``), so it is turned off.

    Example:
        >>> connect().execute("SELECT current_setting('enable_progress_bar')").fetchone()
        (False,)
    """
    import duckdb

    connection = duckdb.connect(config=config or {})
    # Not settable through config= (DuckDB: "not a global option"), hence the SET.
    connection.execute("SET enable_progress_bar = false")
    return connection


def sparse_reads(connection, sparse: bool, *, remembered: bool = True) -> None:
    """Tell DuckDB whether the next reads take a few pages of each row group (located rows,
    kept granules) or most of them.

    DuckDB's Parquet prefetching reads every column chunk a query touches whole before
    decoding: for one row of a 1Mi-row row group that is the I/O of the whole row group (six
    columns: 24.6 ms against 9.2 ms without; a granule's 8,192 rows 34.8 against 18.0 ms),
    while reads of most of a row group are faster with it (an ``IN`` of 10 values over 20M
    rows: 1.44 s against 2.02 s). The setting is the database's (``GLOBAL``: the cursors
    queries run on are sessions of their own), so two queries of one ``Dataset`` on two
    threads may read with each other's; that changes their speed, never their rows.

    The choice last sent on each of bloomskip's connections is remembered, and a query whose
    choice it already is sends nothing (a statement costs 0.2-0.3 ms, a few percent of a warm
    point lookup). Other code changing the setting there changes speed only.

    Args:
        connection: The connection whose database reads (the cursors' parent).
        sparse: Whether to turn prefetching off.
        remembered: False for a caller's connection, whose setting may change between calls:
            the statement is always sent.
    """
    if remembered and _PREFETCH_OFF.get(connection) is sparse:
        return
    connection.execute(f"SET GLOBAL disable_parquet_prefetching = {'true' if sparse else 'false'}")
    if remembered:
        _PREFETCH_OFF[connection] = sparse
    else:
        _PREFETCH_OFF.pop(connection, None)


#: Per connection of bloomskip's, whether :func:`sparse_reads` last turned prefetching off.
_PREFETCH_OFF: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _quoted(path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _row_ranges(ranges) -> str:
    """SQL selecting the rows of ``ranges`` (``[start, stop)`` pairs) by ``file_row_number``
    (``false`` for none: a row group of no rows)."""
    tests = [
        f"({ROW_NUMBER} >= {start} AND {ROW_NUMBER} < {stop})" for start, stop in ranges.tolist()
    ]
    return " OR ".join(tests) or "false"


def parquet_source(result: Explanation) -> str:
    """Return a DuckDB table expression reading only the surviving row groups of Parquet files.

    DuckDB's own reader is used (parallel, and it decodes the other columns only where the
    filter column matches), restricted to the surviving row groups by ``file_row_number``
    ranges, which DuckDB turns into row-group skipping. Files with no survivor are not opened;
    files where everything survives are read whole.

    Args:
        result: The pruning result (Parquet files only).

    Returns:
        SQL for the ``FROM`` clause, e.g. ``(SELECT * EXCLUDE (file_row_number) FROM ...)``.

    Example:
        >>> parquet_source(result)  # doctest: +SKIP
        "(SELECT * EXCLUDE (file_row_number) FROM read_parquet('/d/a.parquet', ...) WHERE ...)"
    """
    return union_source(parquet_parts(result))


def parquet_parts(result: Explanation, accesses=None) -> list[tuple[str, int]]:
    """The reads :func:`parquet_source` unites: one per surviving row group when they are at
    most :data:`SPLIT_ROW_GROUPS`, else one per file with survivors (all files read whole in
    one), each with the number of row groups it reads.

    Args:
        result: The pruning result (Parquet files only).
        accesses: Only these files of the plan (a step of a read, see
            :func:`progress_steps`); all when None.

    Returns:
        ``[(SQL of a SELECT, row groups)]`` in file order (a read of nothing when nothing
        survives).
    """
    plan = result.plan
    split = plan.row_group_count <= SPLIT_ROW_GROUPS
    parts = []
    whole = []
    for access in plan.files if accesses is None else accesses:
        path = _quoted(access.path)
        if access.whole and not split:
            whole.append((path, len(access.row_groups)))
            continue
        reads = (
            [(1, ranges) for _, ranges in access.per_row_group()]
            if split
            else [(len(access.row_groups), access.row_ranges)]
        )
        for groups, ranges in reads:
            parts.append(
                (
                    f"SELECT * EXCLUDE ({ROW_NUMBER}) FROM read_parquet({path}, {ROW_NUMBER}=true) "
                    f"WHERE {_row_ranges(ranges)}",
                    groups,
                )
            )
    if whole:
        # One reader over all whole files: DuckDB spreads them over its threads.
        listing = ", ".join(path for path, _ in whole)
        parts.insert(
            0, (f"SELECT * FROM read_parquet([{listing}])", sum(groups for _, groups in whole))
        )
    return parts or [(_empty_source(result), 0)]


def union_source(parts: list[tuple[str, int]]) -> str:
    """The ``FROM`` clause reading every one of ``parts`` (:func:`parquet_parts`)."""
    return "(" + " UNION ALL BY NAME ".join(sql for sql, _ in parts) + ")"


FILE_COLUMN = "__bloomskip_file"


def full_scan_source(files) -> str:
    """A DuckDB table expression scanning every file of a Parquet dataset as one table.

    Columns are matched by name and types widened where files differ (``union_by_name``): the
    reference every query's rows and types equal, whichever row groups the index keeps.

    Args:
        files: The dataset's ``SourceFile`` objects.

    Returns:
        SQL for the ``FROM`` clause.

    Example:
        >>> full_scan_source(dataset.files)  # doctest: +SKIP
        "read_parquet(['/d/a.parquet', '/d/b.parquet'], union_by_name = true)"
    """
    listing = ", ".join(_quoted(source.path) for source in files)
    # The partition columns of key=value folders are bloomskip's own (dataset/listing/hive.py).
    return f"read_parquet([{listing}], union_by_name = true, hive_partitioning = false)"


def duckdb_scan_schema(connection, files, file_schemas, names) -> pa.Schema:
    """The schema of DuckDB's scan of every file of a Parquet dataset as one table
    (:func:`full_scan_source`: columns by name, types widened where files differ), before any
    partition column.

    Args:
        connection: A DuckDB connection.
        files: The dataset's ``SourceFile`` objects (local Parquet).
        file_schemas: A callable giving the Arrow schema of each file, in the same order (only
            called when two column names differ only in case).
        names: The dataset's column names (``translate.duckdb_aliases`` looks for those).

    Raises:
        BloomskipError: DuckDB cannot read the files as one table.
    """
    import duckdb
    import pyarrow as pa

    from bloomskip.dataset.sql.translate import duckdb_aliases

    aliases = duckdb_aliases(names)
    source = (
        aliased_scan_source(files, file_schemas(), aliases) if aliases else full_scan_source(files)
    )
    try:
        scanned = connection.cursor().sql(f"SELECT * FROM {source} LIMIT 0").to_arrow_table()
    except duckdb.Error as exc:
        raise BloomskipError(f"DuckDB cannot read the dataset: {exc}") from exc
    renamed = {alias: name for name, alias in aliases}
    return pa.schema(
        [field.with_name(renamed.get(field.name, field.name)) for field in scanned.schema]
    )


def aliased_scan_source(files, file_schemas, aliases: tuple) -> str:
    """:func:`full_scan_source` for files whose column names differ only in case: each file's
    columns renamed by position (its clashing ones to their aliases, see
    ``translate.duckdb_aliases``), then united by name, so DuckDB widens each column's types
    as ``union_by_name`` does without merging two of them.

    Args:
        files: The dataset's ``SourceFile`` objects (Parquet).
        file_schemas: The Arrow schema of each file, in the same order.
        aliases: ``(name, alias)`` pairs.

    Returns:
        SQL for the ``FROM`` clause.
    """
    renamed = dict(aliases)
    selects = []
    for source, schema in zip(files, file_schemas, strict=True):
        names = ", ".join(_quoted_name(renamed.get(name, name)) for name in schema.names)
        selects.append(
            f"SELECT * FROM read_parquet({_quoted(source.path)}, hive_partitioning = false) "
            f"AS t({names})"
        )
    return "(" + " UNION ALL BY NAME ".join(selects) + ")"


def unified_source(result: Explanation) -> str:
    """Like :func:`parquet_source`, for files whose schemas differ: one ``union_by_name``
    reader over every file, restricted to the surviving row groups by file name and row number,
    so the columns and their types are those of the whole dataset's scan.

    Args:
        result: The pruning result (Parquet files only).

    Returns:
        SQL for the ``FROM`` clause.

    Example:
        >>> unified_source(dataset.explain("k = 'k5'"))  # doctest: +SKIP
        "(SELECT * EXCLUDE (__bloomskip_file, file_row_number) FROM read_parquet([...], ...) ...)"
    """
    listing = ", ".join(_quoted(state.source.path) for state in result.files)
    whole = []
    partial = []
    for access in result.plan.files:
        if access.whole:
            whole.append(_quoted(access.path))
        else:
            partial.append(
                f"({FILE_COLUMN} = {_quoted(access.path)} AND ({_row_ranges(access.row_ranges)}))"
            )
    tests = partial + ([f"{FILE_COLUMN} IN ({', '.join(whole)})"] if whole else [])
    condition = " OR ".join(tests) if tests else "false"
    return (
        f"(SELECT * EXCLUDE ({FILE_COLUMN}, {ROW_NUMBER}) FROM read_parquet([{listing}], "
        f"union_by_name = true, filename = '{FILE_COLUMN}', {ROW_NUMBER} = true) "
        f"WHERE {condition})"
    )


def _empty_source(result: Explanation) -> str:
    # Every row group was ruled out: an empty relation with the dataset's columns.
    return f"SELECT * FROM read_parquet({_quoted(result.files[0].source.path)}) LIMIT 0"


def _locatable(arrow_type) -> bool:
    """Whether DuckDB reads values of this Arrow type exactly as it reads them from Parquet.

    Integers, floats and booleans map one to one; strings are left to DuckDB's own Parquet
    reader, which evaluates them faster than pyarrow decodes them.
    """
    import pyarrow as pa

    return (
        pa.types.is_integer(arrow_type)
        # Not float16: DuckDB reads it from Parquet as FLOAT but has no Arrow half float.
        or (pa.types.is_floating(arrow_type) and not pa.types.is_float16(arrow_type))
        or pa.types.is_boolean(arrow_type)
    )


def locate_matches(
    cursor,
    result: Explanation,
    condition: str,
    columns: list[str],
    cap: int,
    limit: int | None = None,
    lookup: tuple | None = None,
) -> dict | None:
    """Find the rows of the surviving row groups that satisfy ``condition``, reading only the
    columns it reads.

    The index keeps a row group when its filter may hold the value; for a point lookup most
    kept row groups are false positives. pyarrow reads the WHERE's columns of the surviving
    row groups (with the cached footer), DuckDB evaluates the condition on that small Arrow
    table, and the caller then reads the selected columns of the matching rows only.

    Args:
        cursor: A DuckDB cursor.
        result: The pruning result (Parquet files only).
        condition: The WHERE as DuckDB SQL.
        columns: The columns ``condition`` reads.
        cap: Give up (return None) when more than this many rows match.
        limit: Locate at most this many rows (at most ``cap``) and never give up: the query
            has a LIMIT, any ``limit`` matching rows are an answer.
        lookup: The same condition as integer equality tests
            (:func:`~bloomskip.dataset.sql.translate.integer_lookup`): evaluated with
            ``pyarrow.compute``, which skips DuckDB's per-query overhead.

    Returns:
        ``{file number in result.files: sorted int64 row numbers}`` (files without a match are
        left out), or None when locating does not apply: a column that is not an integer,
        float or boolean (or differs between files), too many bytes to read, more than
        ``cap`` matches, or a condition DuckDB rejects. The caller then runs one query.

    Example:
        >>> locate_matches(cursor, result, '"user_id" = 42', ["user_id"], 4096)  # doctest: +SKIP
        {3: array([196608])}
    """
    import numpy as np
    import pyarrow as pa

    if not columns or ROW_COLUMN in columns or _located_bytes(result, columns) > LOCATE_ARROW_BYTES:
        return None
    surviving = [
        (access.number, result.files[access.number], access.row_groups)
        for access in result.plan.files
    ]
    tables = [_read_located(state, groups, columns) for _, state, groups in surviving]
    if any(table is None for table in tables):
        return None
    if not tables:
        return {}
    firsts = []  # per surviving row group: its first row's number in its file
    for _, state, groups in surviving:
        rows = np.asarray(state.layout.rows, np.int64)
        firsts.append((np.cumsum(rows) - rows)[groups])
    try:
        located = pa.concat_tables(tables)
    except pa.ArrowInvalid:
        return None  # the files disagree on a column's type
    count = int(cap) + 1 if limit is None else int(limit)
    mask = _lookup_mask(located, lookup) if lookup is not None else None
    if mask is not None:
        positions = np.flatnonzero(mask)[:count]
    else:
        positions = _matching_positions(cursor, located, condition, count)
        if positions is None:
            return None
    if limit is None and len(positions) > cap:
        return None
    return _file_rows(surviving, firsts, positions)


def _located_bytes(result: Explanation, columns: list[str]) -> int:
    """Stored bytes of ``columns`` in the row groups the plan reads."""
    return sum(
        int(result.files[access.number].layout.bytes_of(columns)[access.row_groups].sum())
        for access in result.plan.files
    )


def reads_sparsely(plan) -> bool:
    """Whether reading ``plan`` takes a few pages of each row group it touches (ranges finer
    than their row groups, or at most :data:`SPARSE_ROW_GROUPS` row groups, which DuckDB's
    pushed-down filter reads sparsely): DuckDB then reads it without prefetching
    (:func:`sparse_reads`)."""
    return _within_row_groups(plan) or plan.row_group_count <= SPARSE_ROW_GROUPS


def _within_row_groups(plan) -> bool:
    """Whether ``plan`` reads at most half the rows of the row groups it reads: granules of a
    row count whose ranges DuckDB reads by row number, leaving the rest of each row group's
    pages undecoded."""
    held = sum(int(access.group_rows[access.row_groups].sum()) for access in plan.files)
    return 2 * plan.rows <= held


def locate_in_ranges(
    cursor, result: Explanation, condition: str, cap: int, limit: int | None = None
) -> dict | None:
    """Find the rows of the plan's row ranges that satisfy ``condition``, reading with DuckDB
    only the pages of the WHERE's columns that hold those ranges.

    Used when the plan reads parts of row groups (granules of a row count): DuckDB pushes the
    ``file_row_number`` ranges into its Parquet reader, which decodes the pages holding them
    and skips the rest, so a point lookup reads the indexed column of the kept granules only
    (reading a whole 1Mi-row row group column to find them cost more than scanning the file).

    Args:
        cursor: A DuckDB cursor (with the query's value tables registered).
        result: The pruning result (Parquet files only, one schema).
        condition: The WHERE as DuckDB SQL.
        cap: Give up (return None) when more than this many rows match.
        limit: Locate at most this many rows and never give up (a LIMIT query).

    Returns:
        ``{file number: sorted int64 row numbers}``, or None when more than ``cap`` rows match
        or DuckDB rejects the condition (the caller then reads the ranges in one query, which
        reports the error).
    """
    import numpy as np

    count = int(cap) + 1 if limit is None else int(limit)
    selects = [
        f"SELECT {access.number} AS f, {ROW_NUMBER} AS r FROM "
        f"read_parquet({_quoted(access.path)}, {ROW_NUMBER}=true) "
        f"WHERE ({_row_ranges(access.row_ranges)}) AND ({condition})"
        for access in result.plan.files
    ]
    sql = f"SELECT f, r FROM ({' UNION ALL '.join(selects)}) LIMIT {count}"
    _log.debug("DuckDB SQL (locating the matching rows in the kept ranges): %s", sql)
    found = _numpy_or_none(cursor, sql, "reading the ranges")
    if found is None:
        return None
    files = np.asarray(found["f"], np.int64)
    rows = np.asarray(found["r"], np.int64)
    if limit is None and len(rows) > cap:
        return None
    return {f: np.sort(rows[files == f]) for f in sorted(set(files.tolist()))}


def _read_located(state, groups, columns: list[str]):
    """``columns`` of row groups ``groups`` of a local Parquet file, or None when one of them
    is missing or not :func:`_locatable` there, or the file holds other rows than its layout.

    Raises:
        FormatError: A data page cannot be read.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    # A local file: pre-buffering would only send its one column chunk through pyarrow's
    # I/O pool (a quarter of the read of a 64K-row chunk).
    reader = pq.ParquetFile(state.source.path, metadata=_footer(state), pre_buffer=False)
    schema = reader.schema_arrow
    if not all(name in schema.names and _locatable(schema.field(name).type) for name in columns):
        return None
    try:
        table = reader.read_row_groups(groups.tolist(), columns=columns, use_threads=False)
    except (pa.ArrowException, OSError) as exc:  # the footer was sound, a data page is not
        listed = ", ".join(map(str, groups[:8].tolist())) + (", ..." if len(groups) > 8 else "")
        raise FormatError(
            f"cannot read {', '.join(map(repr, columns))} of row groups {listed}: "
            + " ".join(str(exc).split()),  # pyarrow's message spans lines
            field="data pages",
            source=str(state.source.path),
        ) from exc
    rows = np.asarray(state.layout.rows, np.int64)
    return table if table.num_rows == int(rows[groups].sum()) else None


def _footer(state):
    """The parsed footer of a local file as its decision listed it: its layout's, or one
    parsed before under the same listed identity (``FileState.listed``, a ``stat`` key with
    the change time), or parsed now and kept; None for a file listed without one. A file
    changed since its listing is caught by the check after the read (``read_consistently``)."""
    import pyarrow.parquet as pq

    if state.layout.metadata is not None or state.listed is None:
        return state.layout.metadata
    key = (str(state.source.path), state.listed)
    footer = _FOOTERS.get(key)
    if footer is None:
        footer = pq.read_metadata(state.source.path)
        if len(_FOOTERS) >= FOOTERS_KEPT:
            _FOOTERS.clear()
        _FOOTERS[key] = footer
    return footer


def _matching_positions(cursor, located, condition: str, count: int):
    """The positions (int64) of the first ``count`` rows of ``located`` satisfying
    ``condition``, evaluated by DuckDB; None when DuckDB refuses the table or the condition."""
    import duckdb
    import numpy as np
    import pyarrow as pa

    located = located.append_column(ROW_COLUMN, pa.array(np.arange(located.num_rows)))
    sql = f'SELECT "{ROW_COLUMN}" FROM {LOCATE_VIEW} WHERE {condition} LIMIT {count}'
    _log.debug("DuckDB SQL (locating the matching rows): %s", sql)
    try:
        cursor.register(LOCATE_VIEW, located)
    except duckdb.Error as exc:
        # DuckDB refuses some Arrow types its Parquet reader reads: it reads the row groups.
        _log.debug("DuckDB refused the located columns, reading the row groups instead: %s", exc)
        return None
    try:
        found = _numpy_or_none(cursor, sql, "reading the row groups")
    finally:
        cursor.unregister(LOCATE_VIEW)
    return None if found is None else np.asarray(found[ROW_COLUMN], np.int64)


def _numpy_or_none(cursor, sql: str, instead: str):
    """``sql``'s result as numpy arrays, or None when DuckDB refuses it (the caller then
    does ``instead``, whose query reports the error).

    Raises:
        KeyboardInterrupt: The query was interrupted.
    """
    import duckdb

    try:
        return cursor.execute(sql).fetchnumpy()
    except duckdb.Error as exc:
        if interrupted(exc):
            raise KeyboardInterrupt from exc
        _log.debug("DuckDB refused it, %s instead: %s", instead, exc)
        return None


@functools.cache
def _reader_pool():
    """The threads :func:`locate_matches` reads files on, one per core (started once)."""
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="bloomskip")


# A forked child inherits the executor but none of its threads, and would wait forever on it.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reader_pool.cache_clear)


def _file_rows(surviving: list, firsts: list, positions) -> dict:
    """Map positions in the concatenated surviving row groups back to ``{file: rows}``.

    Args:
        surviving: ``(file number, state, surviving row groups)`` per file read.
        firsts: Per file read, the number of each surviving row group's first row.
        positions: Row positions in the concatenation of those row groups.

    Returns:
        ``{file number: sorted int64 row numbers in that file}``.
    """
    import numpy as np

    group_rows = np.concatenate(
        [np.asarray(state.layout.rows, np.int64)[groups] for _, state, groups in surviving]
    )
    group_ends = np.cumsum(group_rows)
    group_of = np.searchsorted(group_ends, positions, side="right")
    rows = np.concatenate(firsts)[group_of] + positions - (group_ends - group_rows)[group_of]
    file_of = np.repeat([number for number, _, _ in surviving], [len(g) for _, _, g in surviving])
    files = file_of[group_of]
    # A set, not numpy.unique: its first call imports numpy.ma (30 ms of a cold query).
    return {f: np.sort(rows[files == f]) for f in sorted(set(files.tolist()))}


def _distinct(numbers):
    """The sorted distinct values of a 1-d numpy array.

    Not ``numpy.unique``: its first call imports ``numpy.ma`` (12-30 ms of a cold query).

    Example:
        >>> _distinct(np.array([3, 1, 3]))  # doctest: +SKIP
        array([1, 3])
    """
    import numpy as np

    ordered = np.sort(numbers)
    first = np.ones(len(ordered), bool)  # each value's first occurrence, in sorted order
    first[1:] = ordered[1:] != ordered[:-1]
    return ordered[first]


def _lookup_mask(table, terms: tuple):
    """Evaluate :func:`~bloomskip.dataset.sql.translate.integer_lookup` terms on ``table``.

    Returns:
        A numpy bool array (NULL read as FALSE, exact for AND/OR of equality tests), or None
        when a column is not a signed integer column of ``table``.
    """
    import numpy as np
    import pyarrow as pa

    from bloomskip._batch import arrow_bits

    if terms[0] == "in":
        _, name, values = terms
        if name not in table.column_names or not pa.types.is_signed_integer(
            table.schema.field(name).type
        ):
            return None
        numbers = _distinct(np.asarray(values, np.int64))
        value_set = None
        if len(numbers) > SCAN_COMPARISONS:
            # A hash-set probe: binary search (numpy.searchsorted, numpy.isin) is 4-10x slower.
            import pyarrow.compute as pc

            value_set = pa.Array.from_buffers(
                pa.int64(), len(numbers), [None, pa.py_buffer(numbers)]
            )
        parts = []
        for chunk in table.column(name).chunks:
            if not len(chunk):
                continue
            if value_set is not None:
                found = arrow_bits(pc.is_in(chunk.cast(pa.int64()), value_set=value_set), 1)
            else:
                # Comparisons on the values buffer: exact (a signed column compares with int64
                # literals by value), and no pyarrow.compute to import on a cold start.
                width = chunk.type.bit_width // 8
                column = np.frombuffer(
                    chunk.buffers()[1], f"<i{width}", len(chunk), chunk.offset * width
                )
                found = np.zeros(len(chunk), bool)
                for number in numbers:
                    found |= column == number
            parts.append(found & arrow_bits(chunk) if chunk.null_count else found)
        return np.concatenate(parts) if parts else np.zeros(0, bool)
    masks = [_lookup_mask(table, term) for term in terms[1]]
    if any(mask is None for mask in masks):
        return None
    combine = np.logical_and if terms[0] == "and" else np.logical_or
    return combine.reduce(masks)


def located_source(connection, result: Explanation, where: str) -> str | None:
    """A DuckDB table expression reading only the rows of ``result``'s plan where ``where``
    (ClickHouse) holds, located first as :func:`run_query` locates them, so that the kept row
    groups' false positives cost the WHERE's columns only; None when locating does not pay
    there (one range, too many matches, strings over whole row groups: read the plan).

    Args:
        connection: The DuckDB connection (a cursor of it is used).
        result: The pruning result of local Parquet files of one schema.
        where: The ClickHouse WHERE the decision was made for.

    Returns:
        SQL for the ``FROM`` clause (``SELECT *`` of the files' columns), or None.

    Example:
        >>> located_source(duckdb.connect(), dataset.explain("k = 5"), "k = 5")  # doctest: +SKIP
        "(SELECT * EXCLUDE (file_row_number) FROM read_parquet(..) WHERE .. IN (5071))"
    """
    from bloomskip.dataset.sql.translate import (
        clickhouse_to_duckdb_tables,
        column_kinds,
        duckdb_aliases,
    )

    schema = result.schema_source()
    if duckdb_aliases(schema.names) or ROW_NUMBER in schema.names:
        return None
    condition, value_tables = clickhouse_to_duckdb_tables(where, column_kinds(schema))
    cursor = connection.cursor()
    try:
        for name, table in value_tables:
            cursor.register(name, table)
        matches = _locate(cursor, result, schema, where, condition, None)
    finally:
        cursor.close()
    return None if matches is None else union_source(matched_rows_parts(result, matches))


def matched_rows_parts(result: Explanation, matches: dict) -> list[tuple[str, int]]:
    """The reads of exactly the located rows (see :func:`locate_matches`), by their
    ``file_row_number``: one per file, or one per row group holding a row when they are at
    most :data:`SPLIT_ROW_GROUPS`, as :func:`parquet_parts` gives them.

    Args:
        result: The pruning result.
        matches: ``{file number: row numbers}``.

    Returns:
        ``[(SQL of a SELECT, row groups)]`` in file order.
    """
    import numpy as np

    located = []
    for number, rows in sorted(matches.items()):
        state = result.files[number]
        groups = np.searchsorted(np.cumsum(state.layout.rows), rows, side="right")
        located.append((state, rows, groups, _distinct(groups)))
    split = sum(len(distinct) for *_, distinct in located) <= SPLIT_ROW_GROUPS
    parts = []
    for state, rows, groups, holding_groups in located:
        runs = [groups == group for group in holding_groups] if split else [groups >= 0]
        for chosen in runs:
            # The row groups holding the rows, as ranges: DuckDB skips the others without
            # decoding them; the IN list then picks the rows.
            holding = np.zeros(len(state.layout.rows), bool)
            holding[groups[chosen]] = True
            listed = ", ".join(str(int(row)) for row in rows[chosen])
            ranges = group_ranges(state.layout.rows, holding)
            parts.append(
                (
                    f"SELECT * EXCLUDE ({ROW_NUMBER}) FROM "
                    f"read_parquet({_quoted(state.source.path)}, {ROW_NUMBER}=true) "
                    f"WHERE ({_row_ranges(ranges)}) AND {ROW_NUMBER} IN ({listed})",
                    int(holding.sum()),
                )
            )
    return parts or [(_empty_source(result), 0)]


def select_list(
    columns: list[str] | str | None, kinds: tuple | None = None, aliases: tuple = ()
) -> str:
    """Return the DuckDB select list for ``columns`` (names, or ClickHouse expression text).

    Args:
        columns: None for every column, a list of column names, or a comma-separated list of
            ClickHouse expressions.
        kinds: The dataset's column kinds (``translate.column_kinds``), to check names against.
        aliases: ``(name, alias)`` pairs of the columns the scan reads under an alias
            (``translate.duckdb_aliases``): they are selected by it and named back.

    Returns:
        DuckDB SQL text. Each expression's result column is named by its ClickHouse text (or
        its ``AS`` alias), not by the DuckDB text it is translated to.

    Raises:
        UnsupportedPredicateError: An expression has no exact DuckDB translation.

    Example:
        >>> select_list(["user_id", "message"])
        '"user_id", "message"'
        >>> select_list("s AS t, k")
        '"s" AS "t", "k" AS "k"'
    """
    from bloomskip.dataset.sql.translate import clickhouse_to_duckdb

    renamed = dict(aliases)
    if columns is None or (isinstance(columns, str) and columns.strip() == "*"):
        if not renamed:
            return "*"
        columns = [name for name, _ in kinds]
    if isinstance(columns, str):
        from sqlglot import exp

        from bloomskip._sql import SQLSyntaxError, parse_clickhouse
        from bloomskip.dataset.sql.translate import UnsupportedPredicateError

        try:
            expressions = parse_clickhouse(f"SELECT {columns}").expressions
        except SQLSyntaxError as exc:
            raise UnsupportedPredicateError(f"cannot parse --select {columns!r}: {exc}") from exc
        if not expressions:
            raise UnsupportedPredicateError(f"--select {columns!r} names no column")
        selected = []
        for expression in expressions:
            value = expression.this if isinstance(expression, exp.Alias) else expression
            name = expression.alias if isinstance(expression, exp.Alias) else None
            if name is None:
                name = value.name if isinstance(value, exp.Column) else value.sql("clickhouse")
            translated = clickhouse_to_duckdb(
                value.sql("clickhouse"), kinds, predicate=False, aliases=aliases
            )
            selected.append(f"{translated} AS {_quoted_name(name)}")
        return ", ".join(selected)
    if kinds is not None:
        known = dict(kinds)
        for name in columns:
            if name not in known:
                from bloomskip.dataset.sql.translate import UnsupportedPredicateError

                raise UnsupportedPredicateError(
                    f"Unknown expression or function identifier `{name}`"
                )
    return ", ".join(
        f"{_quoted_name(renamed[name])} AS {_quoted_name(name)}"
        if name in renamed
        else _quoted_name(name)
        for name in columns
    )


def aliased_view(data, aliases: tuple):
    """What DuckDB scans for ``data`` (a ``pyarrow.dataset.Dataset``): the dataset itself, or,
    when column names differ only in case, a scanner giving those columns their aliases
    (``translate.duckdb_aliases``), which DuckDB would otherwise bind as one column."""
    if not aliases:
        return data
    import pyarrow.compute as pc

    renamed = dict(aliases)
    return data.scanner(
        columns={renamed.get(name, name): pc.field(name) for name in data.schema.names}
    )


def _quoted_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def run_query(
    result: Explanation,
    schema,
    where: str,
    columns: list[str] | str | None = None,
    limit: int | None = None,
    connection=None,
    empty_results: dict | None = None,
    scan_schema=None,
    uniform: bool = True,
    table_files=None,
    by_path: bool = True,
    progress: bool | None = None,
):
    """Read the surviving row groups and return the rows satisfying ``where``.

    For Parquet, when the index skipped row groups but kept several, the matching rows are
    first located reading only the columns the WHERE reads (:func:`locate_matches`), then the
    selected columns are read for those rows only: a kept row group holding no match (a Bloom
    filter false positive) costs one column, and a query matching nothing reads no other one.
    Otherwise (many matches, nothing skipped, string conditions) one query reads the row groups.

    Args:
        result: The pruning result.
        schema: The dataset's schema.
        where: ClickHouse WHERE expression.
        columns: Columns to return (see :func:`select_list`); all when None.
        limit: At most this many rows.
        connection: A DuckDB connection to run on (a cursor of it is used); a new one when None
            or when the WHERE holds :data:`REWRITER_LIMIT` ANDs under OR or more.
        empty_results: Reused across calls with the same connection and unchanged files: the
            empty result of each (columns, WHERE), so that a query matching nothing does not
            ask DuckDB for its result type again.
        scan_schema: The schema of the whole dataset's scan (``Dataset.scan_schema``): the
            WHERE is typed against it. ``schema`` when None.
        uniform: Whether every file has the same schema; when not, one ``union_by_name``
            reader over all files reads the surviving row groups (:func:`unified_source`).
        table_files: The partition values of each file (``TableFile`` by relative path), from
            its ``key=value`` folders (``dataset/listing/hive.py``): such files are read through
            pyarrow, with those values as columns.
        by_path: Whether DuckDB may read the files itself by their paths (local files whose
            types it reads as ``schema`` says); when not, pyarrow reads them (cast to
            ``schema``) and DuckDB filters what it gives.
        progress: Show a bar on stderr counting the rows read, for a read of many row groups
            of several files (:func:`progress_steps`); None: when stderr is a terminal and
            the read is of millions of rows.

    Returns:
        A ``pyarrow.Table``.

    Raises:
        UnsupportedPredicateError: The WHERE (or a selected expression) has no exact translation.
        BloomskipError: DuckDB rejects the translated query (e.g. an unknown column).

    Example:
        >>> run_query(result, schema, "hasToken(message, 'timeout')", ["user_id"])  # doctest: +SKIP
    """
    import duckdb

    from bloomskip.dataset.sql.translate import (
        clickhouse_to_duckdb_tables,
        column_kinds,
        conjunctions_under_or,
        duckdb_aliases,
    )

    scanned = scan_schema if scan_schema is not None else schema
    kinds = column_kinds(scanned, schema)
    aliases = duckdb_aliases(scanned.names)
    condition, value_tables = clickhouse_to_duckdb_tables(where, kinds, aliases)
    projection = select_list(columns, kinds, aliases)
    without_rewriter = conjunctions_under_or(where) >= REWRITER_LIMIT
    owned = None
    if connection is None or without_rewriter:
        # disabled_optimizers is database-wide: a query planned without the rewriter gets a
        # database of its own.
        config = {"disabled_optimizers": "expression_rewriter"} if without_rewriter else {}
        connection = owned = connect(config)
    # A cursor is cheap and has its own view names; connecting costs ~10 ms per query.
    cursor = connection.cursor()
    try:
        for name, table in value_tables:  # long IN lists, joined by name (cursor-local)
            cursor.register(name, table)
        with interrupting_on_sigint(cursor):
            steps, empty_key = _surviving_source(
                connection,
                cursor,
                result,
                scanned if aliases or table_files else schema,
                where,
                condition,
                projection,
                limit,
                uniform,
                aliases,
                table_files,
                by_path,
                progress_steps(result.plan, progress),
            )
            if empty_results is not None and empty_key in empty_results:
                return empty_results[empty_key]
            if len(steps) > 1:
                return _read_steps(cursor, steps, projection, condition, limit)
            parts = steps[0].parts()
            groups = _even_groups(parts, os.cpu_count() or 1)
            if len(groups) == 1:
                table = _read_parts(cursor, parts, projection, condition, limit)
        if len(groups) > 1:
            table = _read_groups(connection, groups, projection, condition, limit, value_tables)
        if empty_results is not None and empty_key is not None:
            if len(empty_results) > 256:
                empty_results.clear()
            empty_results[empty_key] = table
        return table
    except (duckdb.Error, RuntimeError) as exc:
        raise _rejected(where, exc) from exc
    finally:
        cursor.close()
        if owned is not None:
            owned.close()


@dataclass(frozen=True)
class _Step:
    """One read of a query: the rows the plan reads in it, and the parts it unites (as
    :func:`parquet_parts` gives them), made when the step runs: a pyarrow dataset is registered,
    and remote footers fetched, then."""

    rows: int
    parts: Callable[[], list[tuple[str, int]]]


def _surviving_source(
    connection,
    cursor,
    result: Explanation,
    schema,
    where: str,
    condition: str,
    projection: str,
    limit: int | None,
    uniform: bool,
    aliases: tuple = (),
    table_files=None,
    by_path: bool = True,
    steps: list[list] | None = None,
) -> tuple[list[_Step], tuple | None]:
    """Choose how :func:`run_query` reads the surviving row groups.

    Columns whose names differ only in case (``aliases``) are read through pyarrow, which
    matches names exactly, under their aliases: DuckDB's reader would merge them.

    Args:
        connection: The connection ``cursor`` is of (its reads' prefetching is set there).
        steps: The plan's files cut into steps (:func:`progress_steps`); one step of all files
            when None. A read whose types depend on all of its files (``union_by_name``) and a
            read of located rows are one step whatever is asked.

    Returns:
        ``(steps, empty_key)``: the reads, one after another, whose union is the ``FROM``
        clause, and the key the (empty) result is kept under when the located rows are none,
        else None.

    Raises:
        BloomskipError: Files with different schemas hold a column named like one of the
            reader's own (:data:`ROW_NUMBER`, :data:`FILE_COLUMN`).
    """
    names = set(schema.names)
    steps = steps or [list(result.plan.files)]
    parquet = all(state.source.format == "parquet" for state in result.files)
    if aliases or table_files or not by_path:
        return _dataset_steps(cursor, result, schema, steps, table_files, aliases), None
    if parquet and not uniform:
        if ROW_NUMBER in names or FILE_COLUMN in names:
            raise BloomskipError(
                f"files with different schemas cannot hold a column named {ROW_NUMBER!r} "
                f"or {FILE_COLUMN!r}"
            )
        sparse_reads(connection, reads_sparsely(result.plan))
        return [_made(result, [(f"SELECT * FROM {unified_source(result)}", 1)])], None
    if not parquet or ROW_NUMBER in names:
        return _dataset_steps(cursor, result, schema, steps), None
    sparse_reads(connection, True)
    matches = _locate(cursor, result, schema, where, condition, limit)
    if matches is None:
        sparse_reads(connection, reads_sparsely(result.plan))
        return [
            _Step(_rows(accesses), functools.partial(parquet_parts, result, accesses))
            for accesses in steps
        ], None
    # Nothing matches: only the result's column types are needed, and they depend on the
    # query and the (unchanged) files alone.
    empty_key = None if matches else (projection, condition, str(result.files[0].source.path))
    return [_made(result, matched_rows_parts(result, matches))], empty_key


def _made(result: Explanation, parts: list[tuple[str, int]]) -> _Step:
    """The one step of a read whose parts are made already."""
    return _Step(result.plan.rows, lambda: parts)


def _rows(accesses) -> int:
    return sum(access.rows for access in accesses)


def _dataset_steps(
    cursor, result: Explanation, schema, steps: list[list], table_files=None, aliases=()
) -> list[_Step]:
    """A step per run of files, each reading the pyarrow dataset of its files' kept row groups
    (:func:`~bloomskip.dataset.prune.surviving_dataset`), registered when the step runs."""

    def register(name: str, accesses: list) -> list[tuple[str, int]]:
        data = surviving_dataset(result, schema, table_files, accesses)
        cursor.register(name, aliased_view(data, aliases))
        return [(f"SELECT * FROM {name}", 1)]

    if len(steps) == 1:
        return [_Step(_rows(steps[0]), functools.partial(register, VIEW_NAME, steps[0]))]
    return [
        _Step(_rows(accesses), functools.partial(register, f"{VIEW_NAME}_{number}", accesses))
        for number, accesses in enumerate(steps)
    ]


def progress_steps(plan, progress: bool | None) -> list[list]:
    """The plan's files cut into the steps a query reads them in: when its progress is shown
    and it reads more than :data:`SPLIT_ROW_GROUPS` row groups of several files, runs of
    consecutive files of about equal rows, :data:`PROGRESS_STEPS` at most; otherwise one step
    of them all.

    Args:
        plan: The query's :class:`~bloomskip.dataset.scan.plan.AccessPlan`.
        progress: Whether the query's progress is shown; None: when stderr is a terminal
            and the plan reads :data:`PROGRESS_MIN_ROWS` rows or more.

    Returns:
        Lists of ``FileAccess``, in the plan's order.

    Example:
        >>> import numpy as np
        >>> from bloomskip.dataset.scan.plan import access_plan
        >>> files = [(f"{n}.parquet", f"{n}.parquet", [10] * 30) for n in range(4)]
        >>> plan = access_plan(files, [np.ones(30, bool)] * 4)
        >>> [len(step) for step in progress_steps(plan, True)], len(progress_steps(plan, False))
        ([1, 1, 1, 1], 1)
    """
    files = list(plan.files)
    total = plan.rows
    if progress is None:
        progress = sys.stderr.isatty() and total >= PROGRESS_MIN_ROWS
    if not progress or len(files) < 2 or plan.row_group_count <= SPLIT_ROW_GROUPS or not total:
        return [files]
    steps: list[list] = [[]]
    done = 0
    for access in files:
        # A step closes once it reaches its share of the rows; the last takes what remains.
        if steps[-1] and done >= total * len(steps) / PROGRESS_STEPS:
            steps.append([])
        steps[-1].append(access)
        done += access.rows
    return steps


def _read_steps(cursor, steps: list[_Step], projection: str, condition: str, limit: int | None):
    """The query's rows read step by step on ``cursor``, a bar on stderr advancing by each
    step's rows (shown once the read has run :data:`PROGRESS_DELAY` seconds, and cleared at
    its end); with a LIMIT, no step starts once it is reached.

    The steps' results join as one union's would: each step reads files of the one schema
    (uniform Parquet read by DuckDB, or pyarrow datasets cast to the dataset's schema), so a
    column has the same type in every step.
    """
    import pyarrow as pa
    from tqdm import tqdm

    tables = []
    found = 0
    with tqdm(
        total=sum(step.rows for step in steps),
        unit=" rows",
        unit_scale=True,
        desc="querying",
        delay=PROGRESS_DELAY,
        leave=False,
        file=sys.stderr,
    ) as bar:
        for step in steps:
            table = _read_parts(cursor, step.parts(), projection, condition, limit)
            tables.append(table)
            found += table.num_rows
            bar.update(step.rows)
            if limit is not None and found >= limit:
                break
    table = pa.concat_tables(tables)
    return table if limit is None else table.slice(0, int(limit))


def _even_groups(parts: list[tuple[str, int]], workers: int) -> list[list[tuple[str, int]]]:
    """``parts`` cut into at most ``workers`` runs of consecutive parts with about as many row
    groups each, when that reads them faster than one union.

    DuckDB spreads the row groups of one part over its threads, but runs the parts of a union
    one after another: a union of parts of one row group each uses one core (8 of them in
    56 ms, against 33 ms read by two cursors at once), while parts of several row groups
    already use them all (cut into runs, they were 10% slower). So the parts are cut only
    when each reads one row group.
    """
    total = sum(groups for _, groups in parts)
    count = min(workers, len(parts), total)
    if count < 2 or max(groups for _, groups in parts) > 1:
        return [parts]
    runs: list[list[tuple[str, int]]] = [[]]
    done = 0
    for part in parts:
        # A run closes once it reaches its share; the last run takes what remains.
        if runs[-1] and len(runs) < count and done >= total * len(runs) / count:
            runs.append([])
        runs[-1].append(part)
        done += part[1]
    return runs


class _Cursors:
    """Several DuckDB cursors that :func:`interrupting_on_sigint` interrupts together."""

    def __init__(self, cursors: list) -> None:
        self.cursors = cursors

    def interrupt(self) -> None:
        for cursor in self.cursors:
            cursor.interrupt()


def _read_parts(cursor, parts: list[tuple[str, int]], projection, condition, limit):
    """The rows of ``parts`` (their union) satisfying ``condition``, read on ``cursor``."""
    suffix = "" if limit is None else f" LIMIT {int(limit)}"
    sql = f"SELECT {projection} FROM {union_source(parts)} WHERE {condition}{suffix}"
    _log.debug("DuckDB SQL: %s", sql)
    return cursor.sql(sql).to_arrow_table()


def _read_groups(
    connection,
    groups: list[list[tuple[str, int]]],
    projection: str,
    condition: str,
    limit: int | None,
    value_tables: list,
):
    """The query's rows read from each group of parts by its own cursor, on every core.

    DuckDB runs the reads of a ``UNION ALL`` one after another; reading one row group holding
    a match costs milliseconds of decoding, so several of them are read at once. The groups
    are consecutive runs of files, and their results are joined in order: the rows are those
    (and, without a LIMIT, in the order) one union query gives; with a LIMIT, any ``limit``
    matching rows are an answer, and the first ones are taken.
    """
    import pyarrow as pa

    cursors = [connection.cursor() for _ in groups]

    def read(cursor, group: list[tuple[str, int]]):
        for name, table in value_tables:  # long IN lists, registered per cursor
            cursor.register(name, table)
        return _read_parts(cursor, group, projection, condition, limit)

    from concurrent.futures import FIRST_EXCEPTION, wait

    everyone = _Cursors(cursors)
    futures = [
        _reader_pool().submit(read, cursor, group)
        for cursor, group in zip(cursors, groups, strict=True)
    ]
    try:
        with interrupting_on_sigint(everyone):
            done, running = wait(futures, return_when=FIRST_EXCEPTION)
            # The first failure is the query's error: the other reads are stopped, not
            # waited for (a cursor still running cannot be closed).
            failed = next((f for f in futures if f in done and f.exception()), None)
            if failed is not None:
                everyone.interrupt()
                wait(running)
                failed.result()
            tables = [future.result() for future in futures]
            try:
                table = pa.concat_tables(tables)
            except pa.ArrowInvalid:
                # The groups' results typed a column differently: one union types it as the
                # whole query does.
                every = [part for group in groups for part in group]
                table = read(cursors[0], every)
    finally:
        if not all(future.done() for future in futures):  # interrupted (Ctrl-C)
            everyone.interrupt()
            wait(futures)
        for cursor in cursors:
            cursor.close()
    return table if limit is None else table.slice(0, int(limit))


def _locate(cursor, result: Explanation, schema, where: str, condition: str, limit: int | None):
    """Locate the matching rows before reading the selected columns, when that can save
    reading them: :func:`locate_in_ranges` for a plan reading parts of its row groups, or
    for more than :data:`LOCATE_ARROW_BYTES` of numeric columns; else :func:`locate_matches`.
    None: read the kept rows in one query (a scan, one range, too many matches, strings
    over whole row groups, which DuckDB's own read evaluates faster than a second pass)."""
    from bloomskip.dataset.sql.translate import integer_lookup, referenced_columns

    plan = result.plan
    if not (limit is None or 0 < limit <= LOCATE_CAP):
        return None
    if _within_row_groups(plan):
        # With one range there is no false positive to save: DuckDB's filtered read of it
        # costs what locating alone would.
        several = sum(len(access.row_ranges) for access in plan.files) > 1
        return locate_in_ranges(cursor, result, condition, LOCATE_CAP, limit) if several else None
    if all(keep.all() for keep in result.keep) or plan.row_group_count < 2:
        # A scan; or one row group, where there is no false positive to save: DuckDB's own
        # filtered read of it costs what locating alone would.
        return None
    columns = referenced_columns(where)
    numeric = bool(columns) and all(
        name in schema.names and _locatable(schema.field(name).type) for name in columns
    )
    if numeric and _located_bytes(result, columns) > LOCATE_ARROW_BYTES:
        return locate_in_ranges(cursor, result, condition, LOCATE_CAP, limit)
    return locate_matches(
        cursor,
        result,
        condition,
        referenced_columns(where),
        LOCATE_CAP,
        limit,
        integer_lookup(where),
    )


@contextlib.contextmanager
def interrupting_on_sigint(connection):
    """Within this block, Ctrl-C stops DuckDB's query on ``connection`` at once.

    DuckDB sees a SIGINT within a tenth of a second (it runs Python's handler while it
    works), but when that handler raises ``KeyboardInterrupt`` it lets the running tasks go on
    and raises ``RuntimeError("Query interrupted")`` seconds later (4-10 s on a 3M-row scan,
    measured); its ``interrupt()`` stops them in milliseconds. So while the block runs, in the
    main thread and when SIGINT has Python's own handler, the handler calls ``interrupt()``
    first, then raises as Python's does. Elsewhere the block changes nothing.

    Args:
        connection: The DuckDB connection (or cursor) running the block's queries.

    Raises:
        KeyboardInterrupt: A SIGINT arrived outside DuckDB (inside it, DuckDB raises its own
            error instead: see :func:`bloomskip._cli.interrupted`).

    Example:
        >>> connection = connect()
        >>> with interrupting_on_sigint(connection):
        ...     connection.execute("SELECT 42").fetchone()
        (42,)
    """
    import signal
    import threading

    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return

    def stop(signum, frame) -> None:
        connection.interrupt()
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


#: At most this many characters of the user's WHERE, and of DuckDB's reason, in the error.
_SHOWN_WHERE = 80
_SHOWN_REASON = 160


def _rejected(where: str, exc: Exception) -> BaseException:
    """The exception to raise for an error of DuckDB running the query for ``where``.

    Args:
        where: The user's WHERE.
        exc: A ``duckdb.Error``, or the ``RuntimeError`` a relation's result raises.

    Returns:
        ``KeyboardInterrupt`` when the query was interrupted (``_cli.interrupted``), else a
        one-line :class:`~bloomskip.errors.BloomskipError` naming the WHERE and DuckDB's
        reason (the column or function it refused), without the generated SQL: that, and
        DuckDB's full message, go to the debug log (``--debug``).
    """
    if interrupted(exc):
        return KeyboardInterrupt()
    _log.debug("DuckDB's message: %s", exc)
    # DuckDB's message spans lines (a caret under the SQL, which may be megabytes long): its
    # first line names the problem, the user's own WHERE says where.
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return BloomskipError(
        f"DuckDB rejected the query (WHERE {_shortened(where, _SHOWN_WHERE)!r}): "
        f"{_shortened(reason, _SHOWN_REASON)}"
    )


def _shortened(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
