"""Table formats (Delta Lake, Apache Iceberg) as one snapshot-shaped view (docs/tables.md).

A table's data files come from its log or metadata at one snapshot, never from listing its
storage: a folder of a Delta table also holds the files its log has removed. Each format module
(:mod:`bloomskip.dataset.listing.tables.delta`, :mod:`bloomskip.dataset.listing.tables.iceberg`)
maps its own metadata field
by field onto a :class:`~bloomskip.dataset.listing.tables.snapshot.TableSnapshot` (defined there,
also importable from here); this module tells which format a location holds and opens it, and
writes the part of a WHERE a table's own file pruning can use.
:class:`~bloomskip.dataset.backends.table.TableDataset` indexes and queries the snapshot.

Example:
    >>> snapshot = open_table("logs_delta/", version=3)  # doctest: +SKIP
    >>> [item.key for item in snapshot.files][:1]  # doctest: +SKIP
    ['part-00000-….parquet']
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from bloomskip.clickhouse.kinds import column_kind
from bloomskip.dataset.listing.tables.snapshot import (
    TableFile,
    TableSnapshot,
    parse_timestamp,
)
from bloomskip.dataset.locate import ICEBERG_SCHEME, table_format
from bloomskip.errors import BloomskipError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "ICEBERG_SCHEME",
    "MAX_IN_VALUES",
    "TableFile",
    "TableSnapshot",
    "file_pruning_predicate",
    "open_table",
    "parse_timestamp",
    "table_format",
]


def open_table(
    location: str | os.PathLike,
    *,
    version: int | None = None,
    snapshot_id: int | None = None,
    as_of: str | None = None,
) -> TableSnapshot:
    """Read a Delta table (a folder or prefix holding ``_delta_log/``) or an Iceberg table
    (``iceberg://CATALOG/NAMESPACE.TABLE``) at one snapshot.

    Args:
        location: The table.
        version: A Delta version.
        snapshot_id: An Iceberg snapshot id.
        as_of: An ISO-8601 timestamp: the newest snapshot committed at or before it.

    Returns:
        The :class:`TableSnapshot`.

    Raises:
        BloomskipError: Not a table, a version of the wrong format or that does not exist, a
            table feature whose rows bloomskip cannot reproduce exactly (named).
        StorageError: The table or its catalog cannot be reached.
    """
    text = os.fspath(location)
    kind = table_format(text)
    if kind is None:
        raise BloomskipError(
            f"{text}: not a table (no _delta_log/ folder, no Iceberg metadata/ folder, not "
            "iceberg://CATALOG/NAMESPACE.TABLE)"
        )
    if kind == "iceberg":
        if version is not None:
            raise BloomskipError(
                "--version is a Delta version; an Iceberg table takes --snapshot-id"
            )
        from bloomskip.dataset.listing.tables.iceberg import open_iceberg

        return open_iceberg(text, snapshot_id=snapshot_id, as_of=as_of)
    if snapshot_id is not None:
        raise BloomskipError("--snapshot-id is an Iceberg snapshot; a Delta table takes --version")
    from bloomskip.dataset.listing.tables.delta import open_delta

    return open_delta(text, version=version, as_of=as_of)


#: Longest IN list handed to a table's own pruning (a longer one prunes nothing there).
MAX_IN_VALUES = 1000
_SIMPLE_NAME = __import__("re").compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def file_pruning_predicate(where: str, schema: pa.Schema) -> str | None:
    """The part of a ClickHouse WHERE a table's own file pruning can use, as simple SQL.

    The result is implied by ``where``: every row matching ``where`` matches it, so a file it
    rules out holds no matching row. It keeps comparisons of an integer or string column with a
    constant of that type (``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``IN``, ``BETWEEN``) and
    ``IS [NOT] NULL``, joined by AND and OR; anything else (functions, floats, dates, NOT) is
    dropped from an AND and makes an OR match everything. Identifiers are double-quoted.

    Args:
        where: A ClickHouse WHERE expression.
        schema: The table's schema.

    Returns:
        The SQL text, or None when nothing of ``where`` can prune files.

    Example:
        >>> import pyarrow as pa
        >>> file_pruning_predicate("user_id = 7 AND hasToken(msg, 'x')",
        ...                        pa.schema([("user_id", pa.int64()), ("msg", pa.string())]))
        '("user_id" = 7)'
    """
    from bloomskip._sql import parse_shared
    from bloomskip.errors import UnsupportedPredicateError

    try:
        tree = parse_shared(where)
    except UnsupportedPredicateError:
        return None
    kinds = {}
    for item in schema:
        kind = _PRUNING_KINDS.get(column_kind(item.type))
        if kind is not None and _SIMPLE_NAME.fullmatch(item.name):
            kinds[item.name] = kind
    return _implied(tree, kinds)


# Column kinds (bloomskip.clickhouse.kinds) whose constants this module writes: integers and
# strings, which ClickHouse and the table's own pruning compare alike.
_PRUNING_KINDS = {"int": "integer", "uint": "integer", "string": "string"}


_COMPARISONS = {"EQ": "=", "NEQ": "!=", "LT": "<", "LTE": "<=", "GT": ">", "GTE": ">="}
_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _implied(node, kinds: dict[str, str]) -> str | None:
    """Iterative over AND/OR chains (they may be thousands long); None means TRUE."""
    from sqlglot import exp

    from bloomskip._sql import literal_list

    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And | exp.Or):
        parts = [_implied(child, kinds) for child in node.flatten()]
        if isinstance(node, exp.And):
            kept = [part for part in parts if part is not None]
            return " AND ".join(f"({part})" for part in kept) if kept else None
        if any(part is None for part in parts):
            return None
        return " OR ".join(f"({part})" for part in parts)
    name = type(node).__name__.upper()
    if name in _COMPARISONS:
        return _comparison(node.this, _COMPARISONS[name], node.expression, kinds)
    if isinstance(node, exp.Between):
        low = _comparison(node.this, ">=", node.args.get("low"), kinds)
        high = _comparison(node.this, "<=", node.args.get("high"), kinds)
        kept = [part for part in (low, high) if part is not None]
        return " AND ".join(kept) if kept else None
    if isinstance(node, exp.In) and not node.args.get("query") and not node.args.get("unnest"):
        column = _column(node.this, kinds)
        values = node.expressions
        if column is None or not values or len(values) > MAX_IN_VALUES:
            return None
        listed = literal_list(values[0]) if len(values) == 1 else None
        if listed is not None:  # a long list the parser read in one step (_sql.parse_shared)
            return _listed_in(column, listed, kinds[column])
        literals = [_literal(value, kinds[column]) for value in values]
        if any(literal is None for literal in literals):
            return None
        return f'"{column}" IN ({", ".join(literals)})'
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        column = _column(node.this, kinds)
        return f'"{column}" IS NULL' if column is not None else None
    if isinstance(node, exp.Not) and isinstance(node.this, exp.Is):
        inner = node.this
        column = _column(inner.this, kinds) if isinstance(inner.expression, exp.Null) else None
        return f'"{column}" IS NOT NULL' if column is not None else None
    return None


def _listed_in(column: str, listed, kind: str) -> str | None:
    """``column IN (...)`` from a :class:`~bloomskip._sql.LiteralList`, by :func:`_literal`'s
    rules; None when it is too long, an array, or of another kind than the column."""
    if listed.array or len(listed) > MAX_IN_VALUES:
        return None
    if kind == "integer" and listed.kind == "int":
        values = listed.values.tolist()
        if any(not -(2**63) <= value < 2**63 for value in values):
            return None
        return f'"{column}" IN ({", ".join(map(str, values))})'
    if kind == "string" and listed.kind == "string":
        if any(len(text) > 4096 or any(ord(c) < 32 for c in text) for text in listed.values):
            return None
        quoted = ("'" + text.replace("'", "''") + "'" for text in listed.values)
        return f'"{column}" IN ({", ".join(quoted)})'
    return None


def _comparison(left, operator: str, right, kinds: dict[str, str]) -> str | None:
    column = _column(left, kinds)
    constant = right
    if column is None:
        column, constant, operator = _column(right, kinds), left, _FLIPPED[operator]
    if column is None or constant is None:
        return None
    literal = _literal(constant, kinds[column])
    return f'"{column}" {operator} {literal}' if literal is not None else None


def _column(node, kinds: dict[str, str]) -> str | None:
    from sqlglot import exp

    if isinstance(node, exp.Column) and not node.table and node.name in kinds:
        return node.name
    return None


def _literal(node, kind: str) -> str | None:
    """The SQL text of a constant of the column's kind; None for any other constant (a
    conversion ClickHouse would make is not guessed at)."""
    from sqlglot import exp

    negative = isinstance(node, exp.Neg)
    if negative:
        node = node.this
    if not isinstance(node, exp.Literal):
        return None
    if kind == "integer" and not node.is_string:
        text = node.this
        if not text.isdigit() or len(text) > 19:
            return None
        value = -int(text) if negative else int(text)
        return str(value) if -(2**63) <= value < 2**63 else None
    if kind == "string" and node.is_string and not negative:
        text = node.this
        if len(text) > 4096 or any(ord(character) < 32 for character in text):
            return None
        return "'" + text.replace("'", "''") + "'"
    return None
