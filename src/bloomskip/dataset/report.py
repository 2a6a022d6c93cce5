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


def explain_text(result: Explanation, columns: list[str]) -> str:
    """Describe what each index skipped and what is left to read.

    Args:
        result: The pruning result.
        columns: Columns the query reads (bytes are counted over these; all when empty).

    Returns:
        Multi-line text: per index the granules, rows and bytes it skips on its own, then the
        total, then any warnings.

    Example:
        >>> print(explain_text(result, ["user_id"]))  # doctest: +SKIP
        index INDEX user_id user_id TYPE bloom_filter(0.01) GRANULARITY 1
          granules skipped: 303/305, rows skipped: 19,857,408, bytes skipped: 158.9 MB
        ...
    """
    import numpy as np

    unit_rows = [state.layout.rows for state in result.files]
    unit_bytes = [state.layout.bytes_of(columns) for state in result.files]
    total_units = sum(len(rows) for rows in unit_rows)
    total_rows = int(sum(rows.sum() for rows in unit_rows))
    total_bytes = int(sum(sizes.sum() for sizes in unit_bytes))
    # Files read from an object store's index are described by their granules alone (their
    # footers are not fetched to prune), so their bytes are known only where they were read:
    # the files with surviving row groups, when the explanation was asked to describe them.
    sized = all(state.layout.column_bytes for state in result.files)
    survivors_sized = all(
        state.layout.column_bytes
        for state, keep in zip(result.files, result.keep, strict=True)
        if keep.any()
    )
    lines = []
    for outcome in result.indexes:
        lines.append(f"index {outcome.definition}")
        if not outcome.useful:
            lines.append(f"  {outcome.note or 'not used'}")
            continue
        skipped_bytes = sum(
            int(sizes[~keep].sum()) for sizes, keep in zip(unit_bytes, outcome.keep, strict=True)
        )
        lines.append(
            f"  granules skipped: {outcome.granules_skipped}/{outcome.granules}, "
            f"rows skipped: {outcome.rows_skipped:,}"
            + (f", bytes skipped: {_size(skipped_bytes)}" if sized else "")
        )
    read_units = int(sum(int(np.count_nonzero(keep)) for keep in result.keep))
    pairs = list(zip(unit_rows, unit_bytes, result.keep, strict=True))
    read_rows = int(sum(int(rows[keep].sum()) for rows, _, keep in pairs))
    read_bytes = int(sum(int(sizes[keep].sum()) for _, sizes, keep in pairs))
    lines.append(
        f"read: {read_units}/{total_units} row groups in {len(result.files)} files, "
        f"{read_rows:,}/{total_rows:,} rows"
        + (f", {_size(read_bytes)}/{_size(total_bytes)}" if sized else "")
    )
    if result.io:
        lines.append(
            f"index I/O: {result.io['index_requests']} requests, "
            f"{_size(result.io['index_bytes'])} read"
        )
    if "data_footers_read" in result.io:
        lines.append(
            f"data I/O: {read_units} row groups in "
            f"{sum(bool(keep.any()) for keep in result.keep)} files to read"
            + (f", {_size(read_bytes)} of column chunks" if survivors_sized else "")
            + f"; {result.io['data_footers_read']} footers read to tell"
        )
    lines.extend(f"warning: {warning}" for warning in result.warnings)
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
        from bloomskip.dataset.query import connect

        connection = connect()
        try:
            connection.register("result", table)
            escaped = str(path).replace("'", "''")
            connection.execute(f"COPY result TO '{escaped}' ({options})")
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
