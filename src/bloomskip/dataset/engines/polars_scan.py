"""A Polars ``LazyFrame`` over a dataset whose pushed-down predicate prunes with its index.

``Dataset.scan_polars()`` registers a Polars IO source (``polars.io.plugins.register_io_source``).
When a query over it is collected, Polars hands the source the columns it needs and the
predicate of the filters it pushed down, as a Polars expression. The source maps that
expression, conservatively, to ClickHouse atoms the index evaluates:

- ``col == literal`` and ``col.is_in([...])``: an integer literal with an integer column, a
  string with a string column;
- ``col.str.contains(literal, literal=True)``, ``col.str.starts_with(literal)``,
  ``col.str.ends_with(literal)``: the ``LIKE`` patterns they are;
- ``&`` (an operand that does not map is dropped) and ``|`` (one that does not map drops the
  whole ``|``); anything else (``~``, ``is_null``, comparisons, regular expressions, casts)
  keeps every granule.

Each mapped atom is true wherever Polars' predicate is true (a null is never kept by a Polars
filter, nor by an atom), so the index's decision (``Dataset.explain``) keeps every granule
holding a row the predicate keeps. Only what the access plan keeps is read, through its Polars
form (``AccessPlan.to_polars``): for local Parquet files of one schema, the kept row ranges by
Polars' own Parquet reader (each file's scan filtered on its row numbers), so the rows and
their types are exactly those of ``pl.scan_parquet`` over the same files with the same filter;
elsewhere (an
object store, a table, files of several schemas) the kept row groups through pyarrow, with a
table's deleted rows dropped and its partition values filled. Polars then applies the
predicate itself. Projection and ``n_rows`` are honoured.

Example:
    >>> frame = Dataset("logs/").scan_polars()  # doctest: +SKIP
    >>> frame.filter(pl.col("user_id") == 42).select("ts", "message").collect()  # doctest: +SKIP
"""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

from bloomskip.dataset.engines import atoms
from bloomskip.errors import BloomskipError

if TYPE_CHECKING:
    import polars as pl

#: The ClickHouse WHERE that keeps every granule: the plan of a scan without a predicate.
EVERYTHING = "1"


def scan_polars(dataset) -> pl.LazyFrame:
    """A ``polars.LazyFrame`` of the dataset's rows, pruned by its index on collection.

    Args:
        dataset: A :class:`~bloomskip.dataset.Dataset` (any location).

    Returns:
        A lazy frame with the schema of the access plan's Polars form
        (:meth:`~bloomskip.dataset.scan.plan.AccessPlan.to_polars`): ``pl.scan_parquet``'s
        for local Parquet files of one schema, else the dataset's Arrow schema.

    Raises:
        BloomskipError: Polars is not installed, or a column's type differs between files.
    """
    try:
        import polars as pl
        from polars.io.plugins import register_io_source
    except ImportError as exc:
        raise BloomskipError(
            "scan_polars needs polars, which is not installed (pip install polars)"
        ) from exc
    from bloomskip.dataset.sql.translate import column_kinds

    conflicts = getattr(dataset.backend, "schema_conflicts", dict)()
    if conflicts:
        raise BloomskipError(
            f"scan_polars reads files whose columns agree; these differ in type: "
            f"{'; '.join(f'{name} ({where})' for name, where in conflicts.items())}"
        )
    schema = dataset.explain(EVERYTHING).access_plan().to_polars().collect_schema()
    kinds = dict(column_kinds(dataset.schema))

    def source(with_columns, predicate, n_rows, batch_size):
        where = polars_where(predicate, kinds) if predicate is not None else None
        plan = dataset.explain(where or EVERYTHING).access_plan()
        if not plan.files:
            yield pl.DataFrame(schema=schema).select(with_columns or list(schema))
            return
        frame = plan.to_polars()
        if predicate is not None:
            frame = frame.filter(predicate)
        if with_columns is not None:
            frame = frame.select(with_columns)
        if n_rows is not None:
            frame = frame.head(n_rows)
        yield frame.collect()

    return register_io_source(source, schema=schema)


def polars_where(predicate, kinds: dict[str, str]) -> str | None:
    """ClickHouse text true wherever the Polars ``predicate`` is (for the index), or None.

    Args:
        predicate: A ``polars.Expr``.
        kinds: Each column's kind (``translate.column_kinds``).

    Returns:
        The mapped atoms (see the module's description), or None when none maps.

    Example:
        >>> import polars as pl
        >>> polars_where((pl.col("k") == 5) & (pl.col("v") > 1.0), {"k": "int", "v": "float64"})
        '`k` = 5'
    """
    try:
        tree = json.loads(predicate.meta.serialize(format="json"))
    except (ValueError, TypeError, AttributeError):
        return None
    return _Mapper(kinds).atom(tree)


class _Mapper:
    """Maps Polars' serialized expression nodes to ClickHouse atom text."""

    def __init__(self, kinds: dict[str, str]) -> None:
        self.kinds = kinds

    def atom(self, node) -> str | None:
        if not isinstance(node, dict) or len(node) != 1:
            return None
        ((kind, body),) = node.items()
        if kind == "BinaryExpr":
            return self._binary(body)
        if kind == "Function":
            return self._function(body)
        return None

    def _binary(self, body: dict) -> str | None:
        operator = body.get("op")
        if operator in ("And", "LogicalAnd"):
            parts = [part for part in (self.atom(body["left"]), self.atom(body["right"])) if part]
            return " AND ".join(f"({part})" for part in parts) if parts else None
        if operator in ("Or", "LogicalOr"):
            parts = [self.atom(body["left"]), self.atom(body["right"])]
            return " OR ".join(f"({part})" for part in parts) if all(parts) else None
        if operator == "Eq":
            for column, literal in ((body["left"], body["right"]), (body["right"], body["left"])):
                name = self._column(column)
                if name is None:
                    continue
                values = self._literals(literal, self.kinds[name])
                if values is not None and len(values) == 1:
                    return f"{atoms.name(name)} = {values[0]}"
        return None

    def _function(self, body: dict) -> str | None:
        inputs = body.get("input") or []
        function = body.get("function")
        if len(inputs) != 2:
            return None
        name = self._column(inputs[0])
        if name is None:
            return None
        kind = self.kinds[name]
        if function == {"Boolean": "IsIn"} or (
            isinstance(function, dict)
            and isinstance(function.get("Boolean"), dict)
            and "IsIn" in function["Boolean"]
        ):
            values = self._literals(inputs[1], kind, many=True)
            return f"{atoms.name(name)} IN ({', '.join(values)})" if values else None
        shape = _pattern_shape(function)
        if shape is None or kind != "string":
            return None
        needle = self._literal_values(inputs[1])
        if needle is None or len(needle) != 1 or not isinstance(needle[0], str):
            return None
        return atoms.substring(name, needle[0], shape)

    def _column(self, node) -> str | None:
        if isinstance(node, dict) and isinstance(node.get("Column"), str):
            name = node["Column"]
            return name if name in self.kinds else None
        return None

    def _literals(self, node, kind: str, many: bool = False) -> list[str] | None:
        """ClickHouse texts of a literal (or, ``many``, a literal list) compared as is with a
        ``kind`` column; None when they are not."""
        values = self._literal_values(node, many)
        if not values:
            return None
        texts = []
        for value in values:
            if kind == "string" and isinstance(value, str):
                texts.append(atoms.string(value))
            elif (
                kind in ("int", "uint")
                and isinstance(value, int)
                and not isinstance(value, bool)
                and 0 <= value < 1 << 63
            ):
                texts.append(str(value))
            else:
                return None
        return texts

    @staticmethod
    def _literal_values(node, many: bool = False) -> list | None:
        """The Python values of a literal node, evaluated by Polars itself (a list literal's
        elements with ``many``); None for anything else or a null."""
        import polars as pl

        if not (isinstance(node, dict) and "Literal" in node):
            return None
        try:
            expression = pl.Expr.deserialize(io.StringIO(json.dumps(node)), format="json")
            series = pl.select(expression.alias("value")).to_series()
        except Exception:  # noqa: BLE001 - anything Polars refuses to evaluate is not mapped
            return None
        if many:
            if series.dtype == pl.List or isinstance(series.dtype, pl.List):
                series = series.explode()
        elif len(series) != 1:
            return None
        values = series.to_list()
        return None if any(value is None for value in values) else values


def _pattern_shape(function) -> str | None:
    """The ``LIKE`` shape of a substring test that matches its needle literally."""
    if not isinstance(function, dict):
        return None
    test = function.get("StringExpr")
    if test == "StartsWith":
        return atoms.STARTS_WITH
    if test == "EndsWith":
        return atoms.ENDS_WITH
    if isinstance(test, dict) and isinstance(test.get("Contains"), dict):
        return atoms.CONTAINS if test["Contains"].get("literal") is True else None
    return None
