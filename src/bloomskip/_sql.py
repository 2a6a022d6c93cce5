"""ClickHouse SQL parsing with sqlglot, with errors a person can read."""

from __future__ import annotations

from bloomskip.errors import BloomskipError

__all__ = ["SQLSyntaxError", "parse_clickhouse"]


class SQLSyntaxError(BloomskipError, ValueError):
    """SQL that does not parse; the message is sqlglot's first error, on one line."""


def parse_clickhouse(sql: str):  # noqa: ANN201 - a sqlglot expression
    """Parse one ClickHouse expression or statement.

    Args:
        sql: The text.

    Returns:
        The sqlglot expression tree.

    Raises:
        SQLSyntaxError: The text does not parse. sqlglot's own message spans lines and carries
            terminal colour codes around the bad token; this keeps its first description only.

    Example:
        >>> parse_clickhouse("hasToken(msg, 'x')").sql("clickhouse")
        "hasToken(msg, 'x')"
    """
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        return sqlglot.parse_one(sql, read="clickhouse")
    except SqlglotError as exc:
        errors = getattr(exc, "errors", None)
        reason = errors[0].get("description") if errors else None
        raise SQLSyntaxError(reason or str(exc).splitlines()[0]) from exc
