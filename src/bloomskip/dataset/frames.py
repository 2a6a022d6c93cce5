"""``to_polars`` and ``to_pandas``, written once over any dataset's ``query``."""

from __future__ import annotations

from collections.abc import Sequence


class FrameConversions:
    """``to_polars`` and ``to_pandas`` over a dataset's ``query``: the same rows, as a Polars
    ``LazyFrame`` or a pandas ``DataFrame``.

    Any class with bloomskip's ``query(where, columns)`` (a ``pyarrow.Table`` of exactly the
    matching rows) can inherit them: the rows are then that query's, for a Delta or Iceberg
    table with its deleted rows dropped and its partition values filled. Neither Polars nor
    pandas is a dependency: each is imported only by its method.
    """

    def to_polars(self, where: str, columns: Sequence[str] | str | None = None):  # noqa: ANN201
        """Return the rows matching ``where`` as a ``polars.LazyFrame``.

        What is done now and what is lazy: pruning, reading the surviving row groups and the
        exact filter run when this is called, as in ``query`` (DuckDB, with ClickHouse's
        meaning of the WHERE, docs/queries.md), so the rows are exactly those of a scan of the
        whole dataset, never more. The frame is a lazy plan over that Arrow result, shared
        without a copy: what is chained on it (``filter``, ``group_by``, ``join`` ...) runs at
        ``collect()``. The index cannot prune what Polars filters later; put what should use
        it in ``where``.

        Args:
            where: ClickHouse WHERE expression.
            columns: Columns to return (names, or ClickHouse expressions as one
                comma-separated string); all when None.

        Returns:
            A ``polars.LazyFrame`` with the columns of ``query``'s result (NULL and NaN stay
            distinct).

        Raises:
            BloomskipError: Polars is not installed, or as ``query`` raises
                (``UnsupportedPredicateError`` for a WHERE without an exact translation).

        Example:
            >>> frame = Dataset("logs/").to_polars("hasToken(msg, 'timeout')")  # doctest: +SKIP
            >>> frame.group_by("user_id").len().collect()  # doctest: +SKIP
        """
        from bloomskip.errors import BloomskipError

        try:
            import polars as pl
        except ImportError as exc:
            raise BloomskipError(
                "to_polars needs polars, which is not installed (pip install polars)"
            ) from exc
        return pl.from_arrow(self.query(where, columns), rechunk=False).lazy()

    def scan_polars(self):  # noqa: ANN201
        """Return the dataset as a ``polars.LazyFrame`` whose filters prune with the index.

        Unlike :meth:`to_polars`, nothing is read now and the WHERE is Polars' own: the
        predicate Polars pushes down when the frame is collected (``filter``) is mapped to the
        index's atoms where the meaning is the same (``==``, ``is_in``, ``str.contains``
        with ``literal=True``, ``str.starts_with``, ``str.ends_with``, ``&``, ``|``; anything
        else keeps every granule), only what the index keeps is read (the access plan's
        ``to_polars``: local Parquet by Polars' own reader, row ranges included), and Polars
        applies the predicate: over local files of one schema the rows are exactly
        ``pl.scan_parquet``'s with the same filter; on an object store or a table, the
        dataset's rows (a table's deletes applied) (``engines/polars_scan.py``,
        docs/queries.md).

        Returns:
            A ``polars.LazyFrame``.

        Raises:
            BloomskipError: Polars is not installed.

        Example:
            >>> frame = Dataset("logs/").scan_polars()  # doctest: +SKIP
            >>> frame.filter(pl.col("user_id") == 42).collect()  # doctest: +SKIP
        """
        from bloomskip.dataset.engines.polars_scan import scan_polars

        return scan_polars(self)

    def to_pandas(
        self,
        where: str,
        columns: Sequence[str] | str | None = None,
        *,
        dtype_backend: str = "pyarrow",
    ):  # noqa: ANN201
        """Return the rows matching ``where`` as a ``pandas.DataFrame`` (read now, eagerly).

        The rows are those of ``query`` (pruning, then the exact filter in DuckDB).

        Args:
            where: ClickHouse WHERE expression.
            columns: Columns to return; all when None.
            dtype_backend: ``"pyarrow"`` (default): every column an ``ArrowDtype`` of its
                Arrow type, so each value is as stored (64-bit integers beside NULLs, NULL and
                NaN apart). ``"numpy"``: NumPy dtypes, as ``pyarrow.Table.to_pandas()`` gives
                them: an integer column holding NULLs becomes ``float64`` (inexact beyond
                2**53) and NULL reads as NaN.

        Returns:
            A ``pandas.DataFrame`` with a default ``RangeIndex``.

        Raises:
            BloomskipError: pandas is not installed, an unknown ``dtype_backend``, or as
                ``query`` raises.

        Example:
            >>> Dataset("logs/").to_pandas("user_id = 42", ["ts", "message"])  # doctest: +SKIP
        """
        from bloomskip.errors import BloomskipError

        if dtype_backend not in ("pyarrow", "numpy"):
            raise BloomskipError(
                f"dtype_backend must be 'pyarrow' or 'numpy', not {dtype_backend!r}"
            )
        try:
            import pandas as pd
        except ImportError as exc:
            raise BloomskipError(
                "to_pandas needs pandas, which is not installed (pip install pandas)"
            ) from exc
        table = self.query(where, columns)
        if dtype_backend == "pyarrow":
            return table.to_pandas(types_mapper=pd.ArrowDtype)
        return table.to_pandas()


__all__ = ["FrameConversions"]
