"""ClickHouse WHERE clauses translated to DuckDB SQL with exactly the same meaning.

The WHERE a user gives ``bloomskip query`` is ClickHouse SQL: the skip indexes understand it
directly. The exact predicate is then evaluated by DuckDB, so each ClickHouse function is mapped
to a DuckDB expression that returns the same rows. Only constructs whose mapping is known to be
exact are accepted; anything else raises :class:`UnsupportedPredicateError` instead of silently
changing meaning (for instance ClickHouse's ``lower`` is ASCII-only while DuckDB's is Unicode).

Mappings (each is tested against chdb on sample strings):

==========================  ===========================================================
ClickHouse                  DuckDB
==========================  ===========================================================
``hasToken(s, 't')``        ``contains(s, 't') AND regexp_matches(s, SEP 't' SEP)`` where
                            SEP is a string end or an ASCII byte that is not ``[0-9A-Za-z]``
``startsWith(s, p)``        ``starts_with(s, p)``
``endsWith(s, p)``          ``ends_with(s, p)``
``multiSearchAny(s, [..])`` ``contains(s, n1) OR contains(s, n2) ...`` (an empty needle is
                            ``s <> ''``: ClickHouse does not find it in an empty string)
``has(a, x)``               ``list_contains(coalesce(a, []), x)`` (ClickHouse reads a NULL
                            list as ``[]``)
``hasAny(a, [..])``         ``list_has_any(coalesce(a, []), [..])``
``hasAll(a, [..])``         ``list_has_all(coalesce(a, []), [..])``
``s LIKE p``                ``s LIKE p ESCAPE '\\'`` (ClickHouse escapes with ``\\`` by default)
``equals``/``notEquals``    ``=`` / ``<>``
``isNull``/``isNotNull``    ``IS NULL`` / ``IS NOT NULL``
==========================  ===========================================================

plus ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``, ``IN``, ``IS [NOT] NULL``,
``AND``, ``OR``, ``NOT`` and literals. Identifiers are quoted in the output because ClickHouse
names are case-sensitive and DuckDB's unquoted names are not.
"""

from __future__ import annotations

from functools import lru_cache

from bloomskip.errors import BloomskipError

# WHERE texts whose parse / translation is remembered: a Dataset answering the same predicates
# again skips sqlglot (about 0.3 ms a parse). Only immutable results (text, tuples) are cached.
TRANSLATION_CACHE_SIZE = 512

# ASCII bytes that separate ClickHouse tokens: every ASCII byte except [0-9A-Za-z]. Bytes >= 0x80
# (any non-ASCII UTF-8 character) belong to tokens.
TOKEN_SEPARATOR_CLASS = r"[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]"


class UnsupportedPredicateError(BloomskipError, ValueError):
    """A WHERE clause that cannot be translated exactly (or is not valid ClickHouse SQL)."""


def parse_where(where: str):
    """Parse a ClickHouse boolean expression with sqlglot.

    Args:
        where: The WHERE clause text, without the ``WHERE`` keyword.

    Returns:
        The sqlglot expression.

    Raises:
        UnsupportedPredicateError: The text is not a single ClickHouse expression.

    Example:
        >>> parse_where("hasToken(msg, 'error')").sql("clickhouse")
        "hasToken(msg, 'error')"
    """
    from bloomskip._sql import SQLSyntaxError, parse_clickhouse

    try:
        return parse_clickhouse(where)
    except SQLSyntaxError as exc:
        raise UnsupportedPredicateError(f"cannot parse WHERE {where!r}: {exc}") from exc


@lru_cache(maxsize=TRANSLATION_CACHE_SIZE)
def check_where(where: str) -> None:
    """Raise :class:`UnsupportedPredicateError` unless ``where`` parses (remembered per text).

    Args:
        where: The WHERE clause text.

    Raises:
        UnsupportedPredicateError: The text is not a single ClickHouse expression.

    Example:
        >>> check_where("user_id = 1")
    """
    parse_where(where)


def referenced_columns(where: str) -> list[str]:
    """Return the column names a ClickHouse expression reads, in order of first use.

    Args:
        where: ClickHouse expression text.

    Returns:
        Column names, without duplicates.

    Raises:
        UnsupportedPredicateError: The text does not parse.

    Example:
        >>> referenced_columns("user_id = 1 OR hasToken(message, 'x')")
        ['user_id', 'message']
    """
    return list(_referenced_columns(where))


@lru_cache(maxsize=TRANSLATION_CACHE_SIZE)
def _referenced_columns(where: str) -> tuple[str, ...]:
    from sqlglot import exp

    names: list[str] = []
    for column in parse_where(where).find_all(exp.Column):
        if column.name not in names:
            names.append(column.name)
    return tuple(names)


@lru_cache(maxsize=TRANSLATION_CACHE_SIZE)
def integer_lookup(where: str) -> tuple | None:
    """Return the WHERE as AND/OR of integer equality tests, when it is nothing else.

    Such a WHERE (``id = 42``, ``id IN (1, 2) OR other = 7``) is evaluated exactly by
    ``pyarrow.compute`` on integer columns: a NULL compares as NULL, which a WHERE drops like
    FALSE, and without NOT an AND/OR over the tests is TRUE exactly when it is TRUE with every
    NULL read as FALSE.

    Args:
        where: ClickHouse expression text.

    Returns:
        ``("in", column, values)``, ``("and", terms)`` or ``("or", terms)`` (values: a tuple of
        ints within int64, terms: a tuple of the same forms), or None for any other WHERE.

    Example:
        >>> integer_lookup("id = 42 OR id IN (1, -2)")
        ('or', (('in', 'id', (42,)), ('in', 'id', (1, -2))))
    """
    try:
        return _lookup_terms(parse_where(where))
    except UnsupportedPredicateError:
        return None


def _lookup_terms(node) -> tuple | None:
    from sqlglot import exp

    if isinstance(node, exp.Paren):
        return _lookup_terms(node.this)
    if isinstance(node, exp.And | exp.Or):
        left, right = _lookup_terms(node.this), _lookup_terms(node.expression)
        if left is None or right is None:
            return None
        return ("and" if isinstance(node, exp.And) else "or", (left, right))
    if isinstance(node, exp.EQ):
        for column, value in ((node.this, node.expression), (node.expression, node.this)):
            number = _integer_literal(value)
            if isinstance(column, exp.Column) and not column.table and number is not None:
                return ("in", column.name, (number,))
        return None
    if isinstance(node, exp.In) and isinstance(node.this, exp.Column) and not node.this.table:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            return None
        numbers = [_integer_literal(value) for value in node.expressions]
        if not numbers or any(number is None for number in numbers):
            return None
        return ("in", node.this.name, tuple(numbers))
    return None


def _integer_literal(node) -> int | None:
    from sqlglot import exp

    sign = 1
    if isinstance(node, exp.Neg):
        sign, node = -1, node.this
    if not (isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit()):
        return None
    number = sign * int(node.this)
    return number if -(2**63) <= number < 2**63 else None


@lru_cache(maxsize=TRANSLATION_CACHE_SIZE)
def clickhouse_to_duckdb(where: str) -> str:
    """Translate a ClickHouse WHERE expression into DuckDB SQL with the same meaning.

    Args:
        where: ClickHouse expression text, e.g. ``"hasToken(msg, 'GET') AND user_id IN (1, 2)"``.

    Returns:
        DuckDB SQL text for the same predicate.

    Raises:
        UnsupportedPredicateError: A function or construct has no exact DuckDB mapping, or a
            function's arguments are not what ClickHouse accepts (e.g. a hasToken needle holding
            a separator).

    Example:
        >>> clickhouse_to_duckdb("startsWith(url, 'https://')")
        'STARTS_WITH("url", \\'https://\\')'
    """
    return _rewrite(parse_where(where)).sql(dialect="duckdb")


def _rewrite(node):
    """Translate ``node`` bottom-up: children first, so every nested call is translated too."""
    from sqlglot import exp

    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expression):
            node.set(key, _rewrite(value))
        elif isinstance(value, list):
            node.set(key, [_rewrite(v) if isinstance(v, exp.Expression) else v for v in value])
    return _translate_node(node)


def _allowed_node_types():
    from sqlglot import exp

    return (
        exp.And,
        exp.Or,
        exp.Not,
        exp.Paren,
        exp.EQ,
        exp.NEQ,
        exp.GT,
        exp.GTE,
        exp.LT,
        exp.LTE,
        exp.In,
        exp.Between,
        exp.Is,
        exp.Null,
        exp.Boolean,
        exp.Literal,
        exp.Column,
        exp.Identifier,
        exp.Array,
        exp.Neg,
        exp.Tuple,
        exp.Like,
        exp.StartsWith,
        exp.EndsWith,
        exp.ArrayContains,
        exp.Anonymous,
    )


def _translate_node(node):
    from sqlglot import exp

    if not isinstance(node, _allowed_node_types()):
        raise UnsupportedPredicateError(
            f"{node.sql('clickhouse')!r} ({type(node).__name__}) has no exact DuckDB translation"
        )
    if isinstance(node, exp.Identifier):
        return exp.Identifier(this=node.this, quoted=True)
    if isinstance(node, exp.Like):
        return exp.Escape(this=node.copy(), expression=exp.Literal.string("\\"))
    if isinstance(node, exp.StartsWith | exp.EndsWith):
        return node
    if isinstance(node, exp.ArrayContains):
        needle = _non_null_constant(node.expression, "has")
        return exp.func("list_contains", _array_or_empty(node.this), needle)
    if isinstance(node, exp.Anonymous):
        return _translate_function(node.name, list(node.expressions))
    return node


def _translate_function(name: str, arguments: list):
    from sqlglot import exp

    key = name.lower()
    if key == "hastoken":
        haystack, needle = _arguments(name, arguments, 2)
        return _has_token(haystack, _string_constant(needle, name))
    if key == "multisearchany":
        haystack, needles = _arguments(name, arguments, 2)
        texts = [_string_constant(item, name) for item in _array_constant(needles, name)]
        if not texts:
            raise UnsupportedPredicateError(f"{name}: the needle array must not be empty")
        alternatives = [_contains(haystack, text) for text in texts]
        return exp.Paren(this=exp.or_(*alternatives))
    if key in ("hasany", "hasall"):
        array, elements = _arguments(name, arguments, 2)
        for element in _array_constant(elements, name):
            _non_null_constant(element, name)
        function = "list_has_any" if key == "hasany" else "list_has_all"
        return exp.func(function, _array_or_empty(array), elements)
    if key in ("equals", "notequals"):
        left, right = _arguments(name, arguments, 2)
        return exp.Paren(this=(exp.EQ if key == "equals" else exp.NEQ)(this=left, expression=right))
    if key in ("isnull", "isnotnull"):
        (value,) = _arguments(name, arguments, 1)
        test = exp.Is(this=value, expression=exp.Null())
        return exp.Paren(this=test if key == "isnull" else exp.Not(this=test))
    if key == "startswith":
        return exp.StartsWith(this=arguments[0], expression=arguments[1])
    if key == "endswith":
        return exp.EndsWith(this=arguments[0], expression=arguments[1])
    raise UnsupportedPredicateError(f"function {name}() has no exact DuckDB translation")


def _arguments(name: str, arguments: list, count: int) -> list:
    if len(arguments) != count:
        raise UnsupportedPredicateError(f"{name}() takes {count} arguments, not {len(arguments)}")
    return arguments


def _string_constant(node, function: str) -> str:
    from sqlglot import exp

    if not (isinstance(node, exp.Literal) and node.is_string):
        raise UnsupportedPredicateError(
            f"{function}: {node.sql('clickhouse')} is not a string constant"
        )
    return node.this


def _non_null_constant(node, function: str):
    from sqlglot import exp

    # ClickHouse's has/hasAny/hasAll treat NULL as equal to NULL; DuckDB's list functions do
    # not, so a NULL needle has no exact translation.
    if isinstance(node, exp.Null):
        raise UnsupportedPredicateError(f"{function}: a NULL needle is not supported")
    return node


def _array_constant(node, function: str) -> list:
    from sqlglot import exp

    if not isinstance(node, exp.Array):
        raise UnsupportedPredicateError(
            f"{function}: {node.sql('clickhouse')} is not an array constant"
        )
    return list(node.expressions)


def _array_or_empty(array):
    from sqlglot import exp

    # ClickHouse has no NULL arrays: it reads a NULL Parquet list as []. hasAll(a, []) is then
    # true where DuckDB's list_has_all(NULL, []) is NULL.
    return exp.func("coalesce", array, exp.Array(expressions=[]))


def _contains(haystack, needle: str):
    from sqlglot import exp

    # ClickHouse's multiSearchAny finds an empty needle in every string except the empty one.
    if needle == "":
        return exp.NEQ(this=haystack.copy(), expression=exp.Literal.string(""))
    return exp.func("contains", haystack.copy(), exp.Literal.string(needle))


def _has_token(haystack, needle: str):
    from sqlglot import exp

    # ClickHouse refuses needles holding a separator; an empty needle matches nothing.
    if any(byte < 0x80 and not chr(byte).isalnum() for byte in needle.encode("utf-8")):
        raise UnsupportedPredicateError(
            f"hasToken: needle {needle!r} must not contain whitespace or separator characters"
        )
    if needle == "":
        return exp.Boolean(this=False)
    # The needle holds only [0-9A-Za-z] and non-ASCII characters: nothing to escape in RE2.
    pattern = f"(?:^|{TOKEN_SEPARATOR_CLASS}){needle}(?:$|{TOKEN_SEPARATOR_CLASS})"
    # contains() first: cheap, and DuckDB only runs the regex on rows it lets through.
    return exp.Paren(
        this=exp.and_(
            exp.func("contains", haystack, exp.Literal.string(needle)),
            exp.func("regexp_matches", haystack.copy(), exp.Literal.string(pattern)),
        )
    )
