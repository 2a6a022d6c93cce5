"""The query file of ``bloomskip advise``: WHERE clauses, one a line, each with an optional count.

A line is either a WHERE clause (ClickHouse SQL, counted once) or a whole number, a TAB and a
WHERE clause: the number of times the query ran (a query log, e.g. ``uniq`` counts exported with
``count() ... GROUP BY query``). Blank lines and lines whose first non-blank character is ``#``
are skipped. Each clause is checked as every query is: it must parse, name only columns of the
dataset (ClickHouse matches names exactly), and translate to DuckDB SQL, since the advisor
evaluates it exactly on the data.

Example:
    >>> parse_queries("# top queries\\n120\\tuser_id = 42\\nhasToken(msg, 'x')\\n", "q.txt")
    [Query(where='user_id = 42', count=120, line=2), Query(where="hasToken(msg, 'x')", count=1, \
line=3)]
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from bloomskip.errors import BloomskipError

# A count: digits then one TAB. Nothing else at the start of a WHERE is digits and a TAB.
_COUNTED = re.compile(r"^\s*(\d+)\t(.*)$")


@dataclass(frozen=True)
class Query:
    """One WHERE clause of the query file.

    Attributes:
        where: The clause, without surrounding white space.
        count: How many times it ran (its weight), at least 1.
        line: Its line number in the file (1-based).
    """

    where: str
    count: int
    line: int


def parse_queries(text: str, origin: str) -> list[Query]:
    """Split a query file's text into :class:`Query` objects (syntax only; see
    :func:`check_queries`).

    Args:
        text: The file's text.
        origin: The file's name, for messages.

    Returns:
        The queries in file order.

    Raises:
        BloomskipError: A count of 0, a count without a WHERE, or no query at all.

    Example:
        >>> parse_queries("3\\tv = 1", "q.txt")[0].count
        3
    """
    queries = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        count, where = 1, line
        counted = _COUNTED.match(raw)
        if counted is not None:
            count, where = int(counted.group(1)), counted.group(2).strip()
            if count < 1:
                raise BloomskipError(f"{origin}:{number}: the count must be at least 1, not 0")
            if not where:
                raise BloomskipError(f"{origin}:{number}: a count without a WHERE clause")
        queries.append(Query(where, count, number))
    if not queries:
        raise BloomskipError(
            f"{origin}: no WHERE clause (one a line, optionally 'COUNT<TAB>WHERE'; blank lines "
            "and # comments are skipped)"
        )
    return queries


def read_queries(path: str | os.PathLike) -> list[Query]:
    """Read a query file (see the module docstring for its format).

    Args:
        path: The file.

    Returns:
        The queries in file order.

    Raises:
        BloomskipError: The file cannot be read, is not UTF-8, or holds no query (or a bad
            count); the message names the file (and the line).

    Example:
        >>> read_queries("queries.txt")  # doctest: +SKIP
        [Query(where='user_id = 42', count=120, line=2)]
    """
    from bloomskip._cli import read_user_text

    origin = os.fspath(path)
    return parse_queries(read_user_text(path, origin), origin)


def check_queries(queries: list[Query], schema, origin: str) -> list[tuple[str, ...]]:
    """Check each query against the dataset and return the columns each reads.

    The same checks as a query: the clause parses (``translate.check_where``), names only
    columns of the dataset (``condition.check_identifiers``, ClickHouse's exact matching) and
    has an exact DuckDB translation (``translate.clickhouse_to_duckdb``).

    Args:
        queries: From :func:`read_queries`.
        schema: The schema of the dataset's scan (``Dataset.scan_schema``).
        origin: The query file's name, for messages.

    Returns:
        Per query, the columns it reads, in order of first use.

    Raises:
        BloomskipError: ``FILE:LINE: <why>`` for the first bad query.

    Example:
        >>> import pyarrow as pa
        >>> check_queries([Query("v = 1", 1, 1)], pa.schema([("v", pa.int64())]), "q.txt")
        [('v',)]
    """
    from bloomskip.clickhouse.condition import check_identifiers
    from bloomskip.dataset.sql.translate import (
        check_where,
        clickhouse_to_duckdb,
        column_kinds,
        referenced_columns,
    )

    kinds = column_kinds(schema)
    columns = []
    for query in queries:
        try:
            check_where(query.where)
            check_identifiers(query.where, schema.names)
            clickhouse_to_duckdb(query.where, kinds)
            columns.append(tuple(referenced_columns(query.where)))
        except BloomskipError as exc:
            raise BloomskipError(f"{origin}:{query.line}: {exc}") from exc
    return columns
