"""Exact evaluation of a WHERE over the surviving row groups, with DuckDB.

The surviving row groups are exposed as a ``pyarrow.dataset`` (Parquet fragments restricted to
those row groups, or the memory-mapped record batches of an Arrow IPC file): nothing is copied,
and DuckDB or Polars scan it lazily. DuckDB then applies the predicate translated from ClickHouse
SQL, so the rows are exactly those a DuckDB scan of the whole dataset returns.
"""

from __future__ import annotations

from bloomskip.dataset.prune import PruneResult
from bloomskip.errors import BloomskipError

VIEW_NAME = "bloomskip_dataset"
ROW_NUMBER = "file_row_number"


def surviving_dataset(result: PruneResult, schema):
    """Return the surviving row groups as a ``pyarrow.dataset.Dataset`` (no data is read).

    Args:
        result: The pruning result.
        schema: The dataset's schema.

    Returns:
        A dataset DuckDB (``duckdb.from_arrow`` or a replacement scan) and Polars
        (``polars.scan_pyarrow_dataset``) scan without copying.

    Example:
        >>> ds = surviving_dataset(result, schema)  # doctest: +SKIP
        >>> duckdb.sql("SELECT count(*) FROM ds").fetchone()  # doctest: +SKIP
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.dataset as pads
    import pyarrow.fs as pafs

    parquet_format = pads.ParquetFileFormat()
    fragments = []
    batches = []
    for state, keep in zip(result.files, result.keep, strict=True):
        groups = [int(g) for g in np.flatnonzero(keep)]
        if not groups:
            continue
        if state.source.format == "parquet":
            fragments.append(
                parquet_format.make_fragment(
                    str(state.source.path), pafs.LocalFileSystem(), row_groups=groups
                )
            )
        else:
            # Memory-mapped: the batches point into the file's pages, nothing is copied.
            reader = pa.ipc.open_file(pa.memory_map(str(state.source.path)))
            batches.extend(reader.get_batch(g).select(schema.names) for g in groups)
    parts = []
    if fragments or not batches:
        parts.append(
            pads.FileSystemDataset(fragments, schema, parquet_format, pafs.LocalFileSystem())
        )
    if batches:
        parts.append(pads.InMemoryDataset(batches, schema=schema))
    return parts[0] if len(parts) == 1 else pads.UnionDataset(schema, parts)


def parquet_source(result: PruneResult) -> str:
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
    import numpy as np

    parts = []
    whole = []
    for state, keep in zip(result.files, result.keep, strict=True):
        if not keep.any():
            continue
        path = "'" + str(state.source.path).replace("'", "''") + "'"
        if keep.all():
            whole.append(path)
            continue
        ends = np.cumsum(state.layout.rows)
        starts = ends - state.layout.rows
        # Runs of consecutive surviving row groups become one row-number range each.
        edges = np.diff(np.concatenate(([0], keep.astype(np.int8), [0])))
        first, stop = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        ranges = " OR ".join(
            f"({ROW_NUMBER} >= {starts[a]} AND {ROW_NUMBER} < {ends[b - 1]})"
            for a, b in zip(first, stop, strict=True)
        )
        parts.append(
            f"SELECT * EXCLUDE ({ROW_NUMBER}) FROM read_parquet({path}, {ROW_NUMBER}=true) "
            f"WHERE {ranges}"
        )
    if whole:
        # One reader over all whole files: DuckDB spreads them over its threads.
        parts.insert(0, f"SELECT * FROM read_parquet([{', '.join(whole)}])")
    if not parts:
        # Every row group was ruled out: an empty relation with the dataset's columns.
        first_file = "'" + str(result.files[0].source.path).replace("'", "''") + "'"
        parts.append(f"SELECT * FROM read_parquet({first_file}) LIMIT 0")
    return "(" + " UNION ALL BY NAME ".join(parts) + ")"


def select_list(columns: list[str] | str | None) -> str:
    """Return the DuckDB select list for ``columns`` (names, or ClickHouse expression text).

    Args:
        columns: None for every column, a list of column names, or a comma-separated list of
            ClickHouse expressions.

    Returns:
        DuckDB SQL text.

    Raises:
        UnsupportedPredicateError: An expression has no exact DuckDB translation.

    Example:
        >>> select_list(["user_id", "message"])
        '"user_id", "message"'
    """
    from bloomskip.dataset.translate import clickhouse_to_duckdb

    if columns is None or (isinstance(columns, str) and columns.strip() == "*"):
        return "*"
    if isinstance(columns, str):
        import sqlglot

        expressions = sqlglot.parse_one(f"SELECT {columns}", read="clickhouse").expressions
        return ", ".join(clickhouse_to_duckdb(e.sql("clickhouse")) for e in expressions)
    return ", ".join('"' + name.replace('"', '""') + '"' for name in columns)


def run_query(
    result: PruneResult,
    schema,
    where: str,
    columns: list[str] | str | None = None,
    limit: int | None = None,
    connection=None,
):
    """Read the surviving row groups and return the rows satisfying ``where``.

    Args:
        result: The pruning result.
        schema: The dataset's schema.
        where: ClickHouse WHERE expression.
        columns: Columns to return (see :func:`select_list`); all when None.
        limit: At most this many rows.
        connection: A DuckDB connection to run on (a cursor of it is used); a new one when None.

    Returns:
        A ``pyarrow.Table``.

    Raises:
        UnsupportedPredicateError: The WHERE (or a selected expression) has no exact translation.
        BloomskipError: DuckDB rejects the translated query (e.g. an unknown column).

    Example:
        >>> run_query(result, schema, "hasToken(message, 'timeout')", ["user_id"])  # doctest: +SKIP
    """
    import duckdb

    from bloomskip.dataset.translate import clickhouse_to_duckdb

    condition = clickhouse_to_duckdb(where)
    projection = select_list(columns)
    dataset = None
    if all(s.source.format == "parquet" for s in result.files) and ROW_NUMBER not in schema.names:
        source = parquet_source(result)
    else:
        source = VIEW_NAME
        dataset = surviving_dataset(result, schema)
    sql = f"SELECT {projection} FROM {source} WHERE {condition}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    # A cursor is cheap and has its own view names; connecting costs ~10 ms per query.
    cursor = (connection or duckdb.connect()).cursor()
    try:
        if dataset is not None:
            cursor.register(VIEW_NAME, dataset)
        return cursor.sql(sql).to_arrow_table()
    except duckdb.Error as exc:
        raise BloomskipError(f"DuckDB rejected the query {sql!r}: {exc}") from exc
    finally:
        cursor.close()
