"""Human-readable pruning reports (``bloomskip query --explain``) and query output writers."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from bloomskip._atomic import atomic_path, write_atomically
from bloomskip.dataset.prune import Explanation
from bloomskip.errors import BloomskipError

OUTPUT_FORMATS = ("table", "csv", "json", "parquet")


def explain_json(result: Explanation, columns: list[str]) -> dict:
    """What each index skipped and what is left to read, as one JSON-ready object.

    Args:
        result: The pruning result.
        columns: Columns the query reads (bytes are counted over these; all when empty).

    Returns:
        ``{"table", "indexes", "read", "io", "warnings"}``. ``table`` (a Delta or Iceberg
        table, else None): ``format``, ``snapshot``, ``snapshot_files``, ``files_kept`` (by the
        table's partition values and statistics) and ``pruning_predicate`` (what they were given,
        or None). ``indexes``, one per index: ``definition``, ``useful``, ``note`` (why it was
        not used), ``granules`` (indexed granules considered), ``granules_skipped``,
        ``rows_skipped`` and ``bytes_skipped`` (of the columns read; None when the files'
        footers were not read). ``read``: ``files``, ``files_to_read``, ``row_groups``,
        ``row_groups_to_read``, ``rows``, ``rows_to_read``, ``bytes``, ``bytes_to_read`` (None
        when not known). ``io``: the requests and bytes the index cost (``index_requests``,
        ``index_bytes``) and ``data_footers_read``, on a store that counts them (else empty).

    Example:
        >>> explain_json(result, ["user_id"])["indexes"][0]["granules_skipped"]  # doctest: +SKIP
        303
    """
    import numpy as np

    unit_rows = [state.layout.rows for state in result.files]
    unit_bytes = [state.layout.bytes_of(columns) for state in result.files]
    # Files read from an object store's index are described by their granules alone (their
    # footers are not fetched to prune), so their bytes are known only where they were read:
    # the files with surviving row groups, when the explanation was asked to describe them.
    sized = all(state.layout.column_bytes for state in result.files)
    survivors_sized = all(
        state.layout.column_bytes
        for state, keep in zip(result.files, result.keep, strict=True)
        if keep.any()
    )
    indexes = []
    for outcome in result.indexes:
        skipped_bytes = None
        if outcome.useful and sized:
            skipped_bytes = sum(
                int(sizes[~keep].sum())
                for sizes, keep in zip(unit_bytes, outcome.keep, strict=True)
            )
        indexes.append(
            {
                "definition": outcome.definition,
                "useful": outcome.useful,
                "note": outcome.note or ("" if outcome.useful else "not used"),
                "granules": outcome.granules,
                "granules_skipped": outcome.granules_skipped,
                "rows_skipped": outcome.rows_skipped,
                "bytes_skipped": skipped_bytes,
            }
        )
    pairs = list(zip(unit_rows, unit_bytes, result.keep, strict=True))
    read_bytes = int(sum(int(sizes[keep].sum()) for _, sizes, keep in pairs))
    read = {
        "files": len(result.files),
        "files_to_read": int(sum(bool(keep.any()) for keep in result.keep)),
        "row_groups": int(sum(len(rows) for rows in unit_rows)),
        "row_groups_to_read": int(sum(int(np.count_nonzero(keep)) for keep in result.keep)),
        "rows": int(sum(int(rows.sum()) for rows in unit_rows)),
        "rows_to_read": int(sum(int(rows[keep].sum()) for rows, _, keep in pairs)),
        "bytes": int(sum(int(sizes.sum()) for sizes in unit_bytes)) if sized else None,
        "bytes_to_read": read_bytes if sized or survivors_sized else None,
    }
    table = None
    if result.table is not None:
        table = {
            "format": result.table["format"],
            "snapshot": result.table["snapshot"],
            "snapshot_files": result.table["files"],
            "files_kept": result.table["files_kept"],
            "pruning_predicate": result.table["predicate"] or None,
        }
    return {
        "table": table,
        "indexes": indexes,
        "read": read,
        "io": {key: int(value) for key, value in result.io.items()},
        "warnings": list(result.warnings),
    }


def explain_text(result: Explanation, columns: list[str]) -> str:
    """Describe what each index skipped and what is left to read.

    Args:
        result: The pruning result.
        columns: Columns the query reads (bytes are counted over these; all when empty).

    Returns:
        Multi-line text: per index the granules, rows and bytes it skips on its own, then the
        total, then any warnings; the facts of :func:`explain_json`.

    Example:
        >>> print(explain_text(result, ["user_id"]))  # doctest: +SKIP
        index INDEX user_id user_id TYPE bloom_filter(0.01) GRANULARITY 1
          granules skipped: 303/305, rows skipped: 19,857,408, bytes skipped: 158.9 MB
        ...
    """
    facts = explain_json(result, columns)
    lines = []
    table = facts["table"]
    if table is not None:
        lines.append(
            f"table {table['format']} snapshot {table['snapshot']}: its partition values and "
            f"statistics keep {table['files_kept']}/{table['snapshot_files']} files"
            + (
                f" (by {table['pruning_predicate']})"
                if table["pruning_predicate"]
                else " (nothing to prune by)"
            )
        )
    for outcome in facts["indexes"]:
        lines.append(f"index {outcome['definition']}")
        if not outcome["useful"]:
            lines.append(f"  {outcome['note']}")
            continue
        skipped = outcome["bytes_skipped"]
        lines.append(
            f"  granules skipped: {outcome['granules_skipped']}/{outcome['granules']}, "
            f"rows skipped: {outcome['rows_skipped']:,}"
            + (f", bytes skipped: {_size(skipped)}" if skipped is not None else "")
        )
    read = facts["read"]
    lines.append(
        f"read: {read['row_groups_to_read']}/{read['row_groups']} row groups in "
        f"{read['files']} files, {read['rows_to_read']:,}/{read['rows']:,} rows"
        + (
            f", {_size(read['bytes_to_read'])}/{_size(read['bytes'])}"
            if read["bytes"] is not None
            else ""
        )
    )
    io = facts["io"]
    if io:
        lines.append(f"index I/O: {io['index_requests']} requests, {_size(io['index_bytes'])} read")
    if "data_footers_read" in io:
        lines.append(
            f"data I/O: {read['row_groups_to_read']} row groups in {read['files_to_read']} "
            "files to read"
            + (
                f", {_size(read['bytes_to_read'])} of column chunks"
                if read["bytes_to_read"] is not None
                else ""
            )
            + f"; {io['data_footers_read']} footers read to tell"
        )
    lines.extend(f"warning: {warning}" for warning in facts["warnings"])
    return "\n".join(lines)


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{count} B"


def write_output(table, output_format: str, output: str | None) -> None:
    """Write a query result to ``output`` (a file) or standard output.

    Args:
        table: The ``pyarrow.Table`` to write.
        output_format: ``table``, ``csv``, ``json`` (one JSON object per line) or ``parquet``.
        output: A file path; None for standard output.

    Raises:
        BloomskipError: Parquet to a terminal, an unknown format, or an unwritable ``output``.
    """
    import duckdb
    import pyarrow.parquet as pq

    if output_format not in OUTPUT_FORMATS:
        raise BloomskipError(f"unknown format {output_format!r}; use one of {OUTPUT_FORMATS}")
    if output_format == "table":
        text = str(duckdb.from_arrow(table)) if table.num_columns else "(no columns)\n"
        if output is None:
            sys.stdout.write(text)
        else:
            _to_file(output, lambda: write_atomically(output, text.encode("utf-8")))
        return
    if output_format == "parquet" and output is None and sys.stdout.isatty():
        raise BloomskipError("--format parquet writes binary: give --output FILE or redirect")

    def write(path: Path) -> None:
        if output_format == "parquet":
            pq.write_table(table, path)
            return
        # DuckDB writes every Arrow type (lists included) as CSV or JSON lines.
        options = "FORMAT csv, HEADER true" if output_format == "csv" else "FORMAT json"
        from bloomskip._cli import interrupted
        from bloomskip.dataset.query import connect, interrupting_on_sigint

        connection = connect()
        try:
            connection.register("result", table)
            escaped = str(path).replace("'", "''")
            with interrupting_on_sigint(connection):
                connection.execute(f"COPY result TO '{escaped}' ({options})")
        except (duckdb.Error, RuntimeError) as exc:
            if interrupted(exc):
                raise KeyboardInterrupt from exc
            raise
        finally:
            connection.close()

    if output is not None:

        def write_file() -> None:
            with atomic_path(output) as temporary:
                write(temporary)

        _to_file(output, write_file)
        return
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / f"result.{output_format}"
        write(path)
        sys.stdout.flush()
        with open(path, "rb") as handle:
            shutil.copyfileobj(handle, sys.stdout.buffer)
        sys.stdout.buffer.flush()


def _to_file(output: str, writer) -> None:
    """Run ``writer()``, reporting an unwritable ``output`` as a user error, not a traceback."""
    try:
        writer()
    except OSError as exc:
        raise BloomskipError(f"cannot write {output}: {exc}") from exc
