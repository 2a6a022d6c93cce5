"""ClickHouse atom text for predicates mapped from another engine's (DuckDB's, Polars').

One spelling of names, string literals and substring tests, so that every engine's mapping
writes the WHERE the index evaluates the same way.
"""

from __future__ import annotations

#: ``LIKE`` shapes of the substring tests that match their needle literally.
CONTAINS, STARTS_WITH, ENDS_WITH = "%{}%", "{}%", "%{}"


def name(column: str) -> str:
    """A column name as ClickHouse SQL, always backquoted (a keyword is a name too).

    Example:
        >>> name("from")
        '`from`'
    """
    return "`" + column.replace("\\", "\\\\").replace("`", "\\`") + "`"


def string(value: str) -> str:
    """A ClickHouse string literal holding ``value`` (whose backslashes are its own).

    Example:
        >>> print(string("it's"))
        'it\\'s'
    """
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def substring(column: str, needle: str, shape: str) -> str:
    """``column LIKE pattern`` true exactly where ``column`` holds ``needle`` as ``shape``
    places it (:data:`CONTAINS`, :data:`STARTS_WITH`, :data:`ENDS_WITH`): the needle's own
    ``%``, ``_`` and backslashes escaped.

    Example:
        >>> print(substring("s", "50%", CONTAINS))
        `s` LIKE '%50\\\\%%'
    """
    escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"{name(column)} LIKE {string(shape.format(escaped))}"
