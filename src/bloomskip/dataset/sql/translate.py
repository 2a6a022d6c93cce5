"""ClickHouse WHERE clauses translated to DuckDB SQL with exactly the same meaning.

The WHERE a user gives ``bloomskip query`` is ClickHouse SQL, and its rows are those ClickHouse
returns for it over the same files (docs/queries.md). The skip indexes understand it directly;
the exact predicate is then evaluated by DuckDB, so each ClickHouse construct is mapped to a
DuckDB expression that returns the same rows, typed as ClickHouse types the columns of the
dataset (:func:`column_kinds`). Only constructs whose mapping is known to be exact are accepted;
anything else raises :class:`UnsupportedPredicateError`, and what ClickHouse itself refuses is
refused in ClickHouse's words. Each mapping is tested against chdb.

==============================  ======================================================
ClickHouse                      DuckDB
==============================  ======================================================
``hasToken(s, 't')``            ``contains(s, 't') AND regexp_matches(s, SEP 't' SEP)``
                                where SEP is a string end or an ASCII byte that is not
                                ``[0-9A-Za-z]``
``hasTokenCaseInsensitive``     the same over ``s`` and ``t`` with ASCII letters lowered
``hasAnyTokens`` /              an OR / AND of that test per needle token (a string needle
``hasAllTokens(s, n)``          split by the default tokenizer, array elements as given);
                                no needle: FALSE (NULL for a NULL ``s``); an array ``s``:
                                its elements joined by a space (a list of other elements
                                than strings is refused)
``startsWith`` / ``endsWith``   ``starts_with`` / ``ends_with``
``multiSearchAny(s, [..])``     ``contains(s, n1) OR ...`` (an empty needle is ``s <> ''``);
                                at most 255 needles, as ClickHouse
``has(a, x)``                   ``list_contains(coalesce(a, []), x)`` (a NULL list is ``[]``
                                in ClickHouse); ``has(a, NULL)``: ``a`` holds a NULL
``hasAny`` / ``hasAll``         ``list_has_any`` / ``list_has_all`` over ``coalesce(a, [])``
``s LIKE p``                    ``s LIKE p' ESCAPE '\\'`` where ``p'`` re-escapes ``p`` as
                                ClickHouse reads it: ``\\%``, ``\\_``, ``\\\\`` escape,
                                a backslash before any other character is a backslash;
                                ``s LIKE p'`` when ``p'`` holds no backslash (DuckDB then
                                pushes it into its scan as ``contains`` / prefix / suffix)
``s ILIKE '%x%'``               ``s ILIKE ...`` (ClickHouse's substring search)
``s ILIKE p`` (other shapes)    ``regexp_full_match(s, RE, 'is')`` (ClickHouse's RE2 path)
``match(s, re)``                ``regexp_matches(s, re, 's')`` (``.`` matches a newline)
``lower`` / ``upper``           ``translate`` of ASCII letters only (ClickHouse's are ASCII)
``length`` / ``empty``          byte length ``strlen``; ``len(coalesce(a, []))`` for arrays
``position(s, n)``              the byte offset of DuckDB's ``strpos`` match
``isNaN``, ``toFloat32``,       ``NOT isfinite AND NOT isinf`` (DuckDB's ``isnan`` trusts
                                Parquet statistics without NaN), ``CAST(x AS FLOAT)``,
                                ``CAST(x AS DOUBLE)``,
``toFloat64``, ``toDate``       ``CAST('YYYY-MM-DD' AS DATE)`` / the UTC date of a timestamp
``ts = 'date-time text'``       the text read at the column's precision p (its fraction cut to
                                p digits, as ClickHouse's DateTime64(p)): ``CAST(.. AS
                                TIMESTAMP)``, or ``make_timestamp_ns(ticks)`` for p = 9;
                                ``timezone('UTC', ..)`` of that for a zoned column
``d = 'date text'``             ``CAST('YYYY-MM-DD' AS DATE)`` of the date ClickHouse reads
``x IN (...)``                  NULL elements dropped (ClickHouse ignores them); string
                                elements converted to the column's type
``=``, ``<``, ... on floats     IEEE: a NaN compares false (DuckDB orders NaN above all);
                                a Float32 column compares as Float64, as ClickHouse does
``x IN (...)`` on floats        by bit pattern, as ClickHouse's set (``f IN (0)`` is not
                                true for -0.0): a zero or NaN ``x`` compares
                                ``CAST(x AS BIT)``, in a CASE (see bitwise_membership)
==============================  ======================================================

plus ``!=``, ``BETWEEN``, ``IS [NOT] NULL``, ``AND``/``OR``/``NOT``, ``equals``/``notEquals``,
``isNull``/``isNotNull``, literals (``nan`` and ``inf`` included). Identifiers are quoted in
the output and checked against the dataset's columns case-sensitively, as ClickHouse does.
The tree is rewritten iteratively: 100,000-term AND/OR chains translate like short ones. A long
``IN`` list of plain literals (read without sqlglot, see :func:`bloomskip._sql.parse_shared`)
is copied into the SQL as written, or, for :func:`clickhouse_to_duckdb_tables`, given to DuckDB
as an Arrow table of its values (``x IN (SELECT value FROM t)``), which DuckDB answers with a
hash join instead of parsing and planning a list of 100,000 constants.
"""

from __future__ import annotations

import calendar
import hashlib
import re
from datetime import date
from functools import lru_cache

from bloomskip.clickhouse.kinds import (
    column_kind,
    read_date_text,
    read_datetime_text,
    timestamp_scale,
)
from bloomskip.clickhouse.tokenizers import (
    DEFAULT_TOKENIZER,
    TOKEN_SET_FUNCTIONS,
    TOKENIZER_NAMES,
    LikeWildcard,
    needle_tokens,
    split_like_pattern,
)
from bloomskip.errors import UnsupportedPredicateError

# WHERE texts whose parse / translation is remembered: a Dataset answering the same predicates
# again skips sqlglot (about 0.3 ms a parse). Only immutable results (text, tuples) are cached.
TRANSLATION_CACHE_SIZE = 512

# ASCII bytes that separate ClickHouse tokens: every ASCII byte except [0-9A-Za-z]. Bytes >= 0x80
# (any non-ASCII UTF-8 character) belong to tokens.
TOKEN_SEPARATOR_CLASS = r"[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]"

# hasAnyTokens / hasAllTokens and their aliases, as the translation's lower-cased keys.
_TOKEN_SET_KEYS = frozenset(name.lower() for name in TOKEN_SET_FUNCTIONS)

# ClickHouse refuses more needles than this in multiSearchAny.
MAX_NEEDLES = 255

ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
ASCII_LOWER = ASCII_UPPER.lower()

# Column kinds: how ClickHouse types a column read from Parquet / Arrow, for comparisons
# (bloomskip.clickhouse.kinds.column_kind); the translation has no typing of other kinds (a
# UUID, a Map), which it calls "other". A timestamp's kind names its DateTime64 scale (see
# column_kinds), which says how ClickHouse reads a constant compared with it.
_TRANSLATED_KINDS = frozenset(
    {"int", "uint", "float32", "float64", "bool", "string", "binary", "list", "date"}
)
_TIMESTAMP_KIND = re.compile(r"(timestamptz|timestamp)\(([0-9])\)")
# TIMESTAMP_NS values DuckDB holds (int64 nanoseconds but its two infinities); ClickHouse's
# DateTime64(9) holds the same but for the two extreme ticks, which are not modelled.
_NS_RANGE = (-(2**63) + 2, 2**63 - 2)
# The days a ClickHouse Date holds (UInt16 days since 1970).
_DATE_RANGE = (date(1970, 1, 1), date(2149, 6, 6))
NUMERIC_KINDS = frozenset({"int", "uint", "float32", "float64", "bool"})
FLOAT_KINDS = frozenset({"float32", "float64"})
STRING_KINDS = frozenset({"string", "binary"})


def column_kinds(schema, file_schema=None) -> tuple[tuple[str, str], ...]:
    """Return each column's kind as the translation types it: ``(name, kind)`` pairs.

    Args:
        schema: The dataset's ``pyarrow.Schema`` as DuckDB scans it (one unified schema).
        file_schema: The files' schema as pyarrow reads them, when ``schema`` is DuckDB's
            reading: a timestamp's precision is taken from it (DuckDB reads a Parquet
            millisecond timestamp as microseconds; ClickHouse reads it, and compares
            constants with it, at milliseconds). A column it does not hold: from ``schema``.

    Returns:
        Pairs in ``schema`` order; kinds are ``int``, ``uint``, ``float32``, ``float64``,
        ``bool``, ``string``, ``binary``, ``list``, ``date``, ``other``, and ``timestamp(p)``
        or ``timestamptz(p)`` (without / with a zone) for a timestamp ClickHouse reads as
        ``DateTime64(p)`` (:func:`bloomskip.clickhouse.kinds.timestamp_scale`).

    Example:
        >>> import pyarrow as pa
        >>> scan = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", "UTC"))])
        >>> column_kinds(scan, pa.schema([("ts", pa.timestamp("ms", "UTC"))]))
        (('id', 'int'), ('ts', 'timestamptz(3)'))
    """
    files = {} if file_schema is None else {field.name: field.type for field in file_schema}
    kinds = []
    for field in schema:
        kind = column_kind(field.type)
        if kind in ("timestamp", "timestamptz"):
            scale = timestamp_scale(files.get(field.name, field.type))
            kind = f"{kind}({timestamp_scale(field.type) if scale is None else scale})"
        elif kind not in _TRANSLATED_KINDS:
            kind = "other"
        kinds.append((field.name, kind))
    return tuple(kinds)


def _timestamp_scale(kind: str) -> int | None:
    """The DateTime64 scale of a timestamp kind (``timestamp(3)``: 3), None for other kinds."""
    match = _TIMESTAMP_KIND.fullmatch(kind)
    return int(match.group(2)) if match else None


def duckdb_aliases(names) -> tuple[tuple[str, str], ...]:
    """The names DuckDB must see in place of columns whose names differ only in case.

    ClickHouse's names are case-sensitive (``id`` and ``ID`` are two columns, as its
    ``schema_inference_mode = 'union'`` reads a folder whose files name them so); DuckDB binds
    names case-insensitively and would read the two as one. Each such column is scanned under
    an alias of its own, which the translated WHERE and select list name instead.

    Args:
        names: The dataset's column names (case-sensitive, each once).

    Returns:
        ``(name, alias)`` pairs for the clashing names only (empty when none clash).

    Example:
        >>> duckdb_aliases(["id", "ID", "v"])
        (('id', '__bloomskip_case_0'), ('ID', '__bloomskip_case_1'))
    """
    folded: dict[str, list[str]] = {}
    for name in names:
        folded.setdefault(name.casefold(), []).append(name)
    clashing = [name for name in names if len(folded[name.casefold()]) > 1]
    return tuple((name, f"__bloomskip_case_{n}") for n, name in enumerate(clashing))


def parse_where(where: str):
    """Parse a ClickHouse boolean expression with sqlglot.

    Args:
        where: The WHERE clause text, without the ``WHERE`` keyword.

    Returns:
        The sqlglot expression, shared with every other reader of the same text (see
        :func:`bloomskip._sql.parse_shared`): copy it before modifying it.

    Raises:
        UnsupportedPredicateError: The text is not a single ClickHouse expression (or nests
            too deeply, see :data:`bloomskip._sql.MAX_NESTING`), or is not UTF-8 text.

    Example:
        >>> parse_where("hasToken(msg, 'error')").sql("clickhouse")
        "hasToken(msg, 'error')"
    """
    from sqlglot import exp

    from bloomskip._sql import SQLSyntaxError, parse_shared

    try:
        where.encode("utf-8")
    except UnicodeEncodeError as exc:  # undecodable bytes of a command line, say
        raise UnsupportedPredicateError(
            f"WHERE {_short(where)} is not UTF-8 text (character {exc.start})"
        ) from exc
    try:
        tree = parse_shared(where)
    except SQLSyntaxError as exc:
        hint = ""
        if _FUNCTION_FORM_IN.search(where):
            hint = "; write x IN (...) instead of the function form in(x, (...))"
        raise UnsupportedPredicateError(f"cannot parse WHERE {_short(where)}: {exc}{hint}") from exc
    if not isinstance(tree, exp.Condition) or isinstance(tree, exp.Command):
        raise UnsupportedPredicateError(f"cannot parse WHERE {_short(where)}: not an expression")
    return tree


# ``in(`` where an operator or nothing comes before it: the function form, which sqlglot cannot
# parse (``x IN (`` has an operand before it).
_FUNCTION_FORM_IN = re.compile(r"(?i)(?:^|[(,]|\b(?:and|or|not)\b)\s*in\s*\(")


def _short(text: str) -> str:
    return repr(text if len(text) <= 200 else text[:200] + "...")


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
        Column names, without duplicates (``nan`` and ``inf`` are numbers, not columns).

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

    names: dict[str, None] = {}
    for node in parse_where(where).walk(bfs=False):
        if isinstance(node, exp.Column) and not _is_number_word(node):
            names.setdefault(node.name)
    return tuple(names)


def _is_number_word(column) -> bool:
    """ClickHouse reads unquoted ``nan`` and ``inf`` (any case) as Float64 constants."""
    identifier = column.this
    return (
        not column.table
        and not getattr(identifier, "quoted", False)
        and column.name.lower() in ("nan", "inf")
    )


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
        ints within int64, or a read-only ``int64`` numpy array for a long literal list; terms:
        a tuple of two or more of the same forms, a chain of one operator flattened into one
        term), or None for any other WHERE.

    Example:
        >>> integer_lookup("id = 42 OR id IN (1, -2)")
        ('or', (('in', 'id', (42,)), ('in', 'id', (1, -2))))
    """
    from sqlglot import exp

    try:
        root = parse_where(where)
    except UnsupportedPredicateError:
        return None
    # Post-order without recursion: a long OR chain is a tree as deep as it is long. Chains
    # of one operator are flattened into one n-ary term, so the result nests only where AND
    # and OR alternate (a nesting the parser bounds).
    done: dict[int, list | tuple] = {}
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if isinstance(node, exp.Paren | exp.And | exp.Or) and not expanded:
            stack.append((node, True))
            children = [node.this] if isinstance(node, exp.Paren) else [node.this, node.expression]
            stack.extend((child, False) for child in children)
            continue
        if isinstance(node, exp.Paren):
            done[id(node)] = done.pop(id(node.this))
        elif isinstance(node, exp.And | exp.Or):
            operator = "and" if isinstance(node, exp.And) else "or"
            terms: list = []
            for child in (node.this, node.expression):
                term = done.pop(id(child))
                if isinstance(term, list) and term[0] == operator:
                    terms.extend(term[1])
                else:
                    terms.append(term)
            done[id(node)] = [operator, terms]
        else:
            term = _lookup_leaf(node)
            if term is None:
                return None
            done[id(node)] = term
    return _frozen(done[id(root)])


@lru_cache(maxsize=TRANSLATION_CACHE_SIZE)
def conjunctions_under_or(where: str) -> int:
    """Count the operands of OR that are ANDs (``(a AND b) OR (c AND d)`` has two).

    DuckDB's expression rewriter takes time quadratic in this count (its distributivity rule
    compares every pair of them): the query runner plans such a WHERE without that rewriter.

    Args:
        where: ClickHouse expression text.

    Returns:
        The count (0 for a WHERE that does not parse).

    Example:
        >>> conjunctions_under_or("(a = 1 AND b = 2) OR (a = 3 AND b = 4) OR c = 5")
        2
    """
    from sqlglot import exp

    try:
        root = parse_where(where)
    except UnsupportedPredicateError:
        return 0
    count = 0
    for node in root.walk(bfs=False):
        if isinstance(node, exp.Or):
            for child in (node.this, node.expression):
                count += isinstance(child.unnest(), exp.And)
    return count


def _frozen(term):
    """The lists built by :func:`integer_lookup` as tuples (recursion only where AND and OR
    alternate)."""
    if isinstance(term, list):
        return (term[0], tuple(_frozen(item) for item in term[1]))
    return term


def _lookup_leaf(node) -> tuple | None:
    from sqlglot import exp

    if isinstance(node, exp.EQ):
        for column, value in ((node.this, node.expression), (node.expression, node.this)):
            number = _integer_literal(value)
            if _plain_column(column) and number is not None:
                return ("in", column.name, (number,))
        return None
    if isinstance(node, exp.In) and _plain_column(node.this):
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            return None
        literals = _literal_list_of(node)
        if literals is not None:
            if literals.kind != "int" or literals.values.dtype != "int64":
                return None
            return ("in", node.this.name, literals.values)
        numbers = [_integer_literal(value) for value in node.expressions]
        if not numbers or any(number is None for number in numbers):
            return None
        return ("in", node.this.name, tuple(numbers))
    return None


def _plain_column(node) -> bool:
    from sqlglot import exp

    return isinstance(node, exp.Column) and not node.table and not _is_number_word(node)


def _integer_literal(node) -> int | None:
    from sqlglot import exp

    sign = 1
    if isinstance(node, exp.Neg):
        sign, node = -1, node.this
    if not (isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit()):
        return None
    number = sign * int(node.this)
    return number if -(2**63) <= number < 2**63 else None


def clickhouse_to_duckdb(
    where: str,
    columns: tuple[tuple[str, str], ...] | None = None,
    predicate: bool = True,
    aliases: tuple[tuple[str, str], ...] = (),
) -> str:
    """Translate a ClickHouse WHERE expression into DuckDB SQL with the same meaning.

    Args:
        where: ClickHouse expression text, e.g. ``"hasToken(msg, 'GET') AND user_id IN (1, 2)"``.
        columns: The dataset's columns and kinds (:func:`column_kinds`). With them, names are
            checked (case-sensitively) and comparisons typed as ClickHouse types them; without
            them, every column is taken to exist and constructs whose meaning depends on a
            column's type (``length``, ``empty``, a string compared with a number) are refused.
        predicate: Whether the expression is a WHERE (which must be a number or a boolean, as
            ClickHouse requires of a filter) rather than a selected value.
        aliases: ``(name, alias)`` pairs (:func:`duckdb_aliases`): a column named here is
            written as its alias, the name the scan gives it in DuckDB.

    Returns:
        DuckDB SQL text for the same predicate.

    Raises:
        UnsupportedPredicateError: A function or construct has no exact DuckDB mapping, or
            ClickHouse itself would refuse it (an unknown column, a String compared with a
            number, more than 255 needles, a hasToken needle holding a separator, ...).

    Example:
        >>> clickhouse_to_duckdb("startsWith(url, 'https://')")
        'STARTS_WITH("url", \\'https://\\')'
    """
    return _translate_cached(where, columns, predicate, False, aliases)[0]


def clickhouse_to_duckdb_tables(
    where: str,
    columns: tuple[tuple[str, str], ...],
    aliases: tuple[tuple[str, str], ...] = (),
) -> tuple[str, tuple[tuple[str, object], ...]]:
    """:func:`clickhouse_to_duckdb` for a query that can register Arrow tables with DuckDB.

    A long ``IN`` list of plain literals compared with an integer or string column becomes
    ``"x" IN (SELECT "value" FROM NAME)`` over an Arrow table of its values: the same rows (the
    values hold no NULL, so a NULL ``x`` gives NULL as with the list), and DuckDB joins 100,000
    values in a tenth of the time it takes to parse them as SQL text.

    Args:
        where: ClickHouse expression text.
        columns: The dataset's columns and kinds (:func:`column_kinds`).
        aliases: As :func:`clickhouse_to_duckdb` takes them.

    Returns:
        ``(sql, tables)``: the DuckDB SQL, and the ``(name, pyarrow.Table)`` pairs to register
        on the connection that runs it (a name is a digest of its values).

    Raises:
        UnsupportedPredicateError: As :func:`clickhouse_to_duckdb`.

    Example:
        >>> where = "k IN (" + ", ".join(map(str, range(100))) + ")"
        >>> sql, tables = clickhouse_to_duckdb_tables(where, (("k", "int"),))
        >>> sql.startswith('"k" IN (SELECT "value" FROM __bloomskip_set_'), tables[0][1].num_rows
        (True, 100)
    """
    return _translate_cached(where, columns, True, True, aliases)


@lru_cache(maxsize=TRANSLATION_CACHE_SIZE)
def _translate_cached(
    where: str, columns: tuple | None, predicate: bool, with_tables: bool, aliases: tuple = ()
) -> tuple[str, tuple]:
    from bloomskip._sql import call_deep

    kinds = dict(columns) if columns is not None else None
    translator = _Translator(kinds, with_tables, dict(aliases))
    # A copy of its own: the translation rewrites the tree in place, and the parse is shared
    # with the condition compiler (a copy costs a third to a half of a parse).
    tree = translator.translate(call_deep(parse_where(where).copy), predicate)
    tables = tuple(translator.tables.items())
    plain = _plain_sql(tree)
    if plain is not None:
        return plain, tables
    # The tree is this call's own: nothing needs sqlglot's copy of it (a tenth of the time).
    return call_deep(lambda: tree.sql("duckdb", copy=False)), tables


class _Translator:
    """Rewrites a ClickHouse tree into a DuckDB tree, children before parents, with no
    recursion; each result carries its ClickHouse kind in ``meta["kind"]``."""

    def __init__(
        self,
        kinds: dict[str, str] | None,
        with_tables: bool = False,
        aliases: dict[str, str] | None = None,
    ) -> None:
        self.kinds = kinds
        self.aliases = aliases or {}
        self.table = self.handlers()
        # Long literal lists as Arrow tables (name -> table), when the caller registers them.
        self.with_tables = with_tables
        self.tables: dict[str, object] = {}

    def translate(self, root, predicate: bool = True):
        # Reversed pre-order visits every node after all of its descendants.
        nodes = list(root.walk(bfs=False))
        result = root
        for node in reversed(nodes):
            # Where the node sits, taken before its handler may re-parent it inside the
            # replacement (e.g. a comparison wrapped in a CASE).
            parent, key, index = node.parent, node.arg_key, node.index
            new = self.node(node)
            if new is not node:
                if node is result:
                    result = new
                else:
                    parent.set(key, new, index)
        non_filter = STRING_KINDS | {"list", "other", "date"}
        kind = _kind(result)
        if predicate and (kind in non_filter or _timestamp_scale(kind) is not None):
            raise UnsupportedPredicateError(
                f"Invalid type for filter in WHERE: {result.sql('clickhouse')} is not a number "
                "or a boolean"
            )
        return result

    # -- leaves ---------------------------------------------------------------------------
    def node(self, node):
        handler = self.table.get(type(node))
        if handler is None:
            raise UnsupportedPredicateError(
                f"{_short(node.sql('clickhouse'))} is not supported in a bloomskip WHERE"
            )
        return handler(node)

    def handlers(self) -> dict:
        """Handler of each sqlglot node class (exact classes: a subclass is not accepted)."""
        from sqlglot import exp

        def same(node):
            return node

        def boolean(node):
            return _typed(node, "bool")

        table = {
            exp.Column: self.column,
            exp.Identifier: same,
            exp.DataType: same,
            exp.Literal: self.literal,
            exp.Null: lambda n: _typed(n, "null"),
            exp.Boolean: boolean,
            exp.Neg: self.negation,
            exp.Paren: lambda n: _typed(n, _kind(n.this)),
            exp.And: self.conjunction,
            exp.Or: self.disjunction,
            exp.Not: boolean,
            exp.Is: boolean,
            exp.Tuple: same,
            exp.Array: lambda n: _typed(n, "list"),
            exp.Between: self.between,
            exp.In: self.membership,
            exp.Escape: self.refuse_escape,
            exp.ILike: self.ilike,
            exp.Like: self.like,
            exp.StartsWith: self.affix,
            exp.EndsWith: self.affix,
            exp.ArrayContains: self.has,
            exp.Lower: self.case,
            exp.Upper: self.case,
            exp.RegexpLike: self.match,
            exp.StrPosition: self.position,
            exp.Length: self.length,
            exp.IsNan: self.is_nan,
            exp.Anonymous: self.function,
            exp.Var: self.literal_list,
        }
        for klass in (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE):
            table[klass] = self.comparison
        return table

    def disjunction(self, node):
        """``x = a OR x = b OR ...`` becomes ``x IN (a, b, ...)``: the same in three-valued
        logic, and DuckDB plans a long OR chain in time quadratic in its length."""
        from sqlglot import exp

        return _typed(_merged(node, exp.EQ, exp.In, False) or node, "bool")

    def conjunction(self, node):
        """``x <> a AND x <> b AND ...`` becomes ``x NOT IN (a, b, ...)`` (see disjunction)."""
        from sqlglot import exp

        return _typed(_merged(node, exp.NEQ, exp.In, True) or node, "bool")

    def column(self, node):
        from sqlglot import exp

        if _is_number_word(node):
            constant = _typed(_float_constant(node.name.lower()), "float64")
            constant.meta["number_word"] = node.name.lower()
            return constant
        if node.table:
            raise UnsupportedPredicateError(
                f"{node.sql('clickhouse')}: a WHERE over a dataset names columns without a table"
            )
        name = node.name
        kind = "any"
        if self.kinds is not None:
            if name not in self.kinds:
                raise UnsupportedPredicateError(
                    f"Unknown expression or function identifier `{name}`"
                    + _suggestion(name, self.kinds)
                )
            kind = self.kinds[name]
        column = exp.column(exp.Identifier(this=self.aliases.get(name, name), quoted=True))
        if kind == "float32":
            # ClickHouse compares a Float32 with a Float64 constant as Float64: 0.1 (Float64)
            # is no Float32 value, so f32 = 0.1 holds for no row. Widening is exact.
            column = exp.Cast(this=column, to=exp.DataType.build("DOUBLE"))
        return _typed(column, kind)

    def literal(self, node):
        if node.is_string:
            return _typed(node, "string")
        text = node.this
        return _typed(node, "int" if text.isdigit() else "float64")

    def literal_list(self, node):
        """A long literal ``IN`` list or array (``bloomskip._sql.LiteralList``): membership
        reads a list; an array is a constant ``Array``, printed as written."""
        literals = _literal_list_of(node)
        if literals is None:
            raise UnsupportedPredicateError(
                f"{_short(node.sql('clickhouse'))} is not supported in a bloomskip WHERE"
            )
        return _typed(node, "list" if literals.array else "literal list")

    def negation(self, node):
        from sqlglot import exp

        inner = _kind(node.this)
        if inner not in NUMERIC_KINDS | {"any"}:
            raise UnsupportedPredicateError(f"{node.sql('clickhouse')}: negation of a non-number")
        # The signs of a zero and of a NaN tell them apart in an IN set (see bitwise_membership).
        if node.this.meta.get("number_word") == "nan":
            # ClickHouse's parser reads `-nan` as the literal nan, sign bit clear (verified with
            # chdb: 0x7ff8..., where -(nan) negates it to 0xfff8...).
            return node.this
        literal = node.this.unnest()
        if (
            isinstance(literal, exp.Literal)
            and _kind(literal) == "float64"
            and float(literal.this) == 0
        ):
            # ClickHouse reads 0.0 as a Float64, whose negation is -0.0; DuckDB reads it as a
            # DECIMAL, whose negation is 0 (a DOUBLE +0.0).
            return _typed(
                exp.Cast(this=exp.Literal.string("-0.0"), to=exp.DataType.build("DOUBLE")),
                "float64",
            )
        return _typed(node, "int" if inner in ("int", "uint") else inner)

    # -- comparisons ----------------------------------------------------------------------
    def comparison(self, node):
        from sqlglot import exp

        left, right = node.this, node.expression
        left, right = self.coerce(left, right, node), self.coerce(right, left, node)
        node.set("this", left)
        node.set("expression", right)
        floats = [side for side in (left, right) if _kind(side) in FLOAT_KINDS]
        if not floats:
            return _typed(node, "bool")
        # IEEE comparisons: NaN is equal to, less and greater than nothing (DuckDB orders NaN
        # above every number and equal to itself); NULL stays NULL.
        nulls = exp.or_(
            *(exp.Is(this=side.copy(), expression=exp.Null()) for side in (left, right)),
            copy=False,
        )
        nans = exp.or_(*(_nan_test(side.copy()) for side in floats), copy=False)
        return _typed(
            exp.Case(
                ifs=[
                    exp.If(this=nulls, true=exp.Null()),
                    exp.If(this=nans, true=exp.Boolean(this=isinstance(node, exp.NEQ))),
                ],
                default=node,
            ),
            "bool",
        )

    def coerce(self, side, other, node):
        """Type ``side`` against ``other`` as ClickHouse's comparison does."""
        from sqlglot import exp

        kind, other_kind = _kind(side), _kind(other)
        if "any" in (kind, other_kind) or "null" in (kind, other_kind):
            return side
        if kind == "string" and isinstance(side, exp.Literal) and other_kind != "string":
            # ClickHouse converts a string constant to the other side's type.
            return _string_constant_as(side, other_kind, node)
        if kind in STRING_KINDS and other_kind in NUMERIC_KINDS - {"bool"}:
            first, second = (side, other) if node.this is side else (other, side)
            raise UnsupportedPredicateError(
                f"There is no supertype for types {_clickhouse_type(first)}, "
                f"{_clickhouse_type(second)} because some of them are String/FixedString/Enum "
                f"and some of them are not (in {_short(node.sql('clickhouse'))})"
            )
        temporal = "Date32" if kind == "date" else "DateTime64"
        if (kind == "date" or _timestamp_scale(kind) is not None) and other_kind in NUMERIC_KINDS:
            raise UnsupportedPredicateError(
                f"{_short(node.sql('clickhouse'))}: a {temporal} compared with a number is "
                "not supported; compare with a string constant such as '2024-01-01 00:00:00'"
            )
        if kind == "list" or other_kind == "list":
            if kind != other_kind:
                raise UnsupportedPredicateError(
                    f"{_short(node.sql('clickhouse'))}: an array compared with a non-array"
                )
            raise UnsupportedPredicateError(
                f"{_short(node.sql('clickhouse'))}: array comparisons are not supported"
            )
        return side

    def between(self, node):
        from sqlglot import exp

        low = exp.GTE(this=node.this.copy(), expression=node.args["low"])
        high = exp.LTE(this=node.this, expression=node.args["high"])
        both = exp.and_(self.comparison(low), self.comparison(high), copy=False)
        return _typed(exp.Paren(this=both), "bool")

    def membership(self, node):
        from sqlglot import exp

        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise UnsupportedPredicateError(
                f"{_short(node.sql('clickhouse'))}: IN takes a list of constants here"
            )
        value = node.this
        kind = _kind(value)
        literals = _literal_list_of(node)
        if literals is not None:
            fast = self.literal_membership(node, literals, kind)
            if fast is not None:
                return fast
            # Any other column kind: element by element, as a list sqlglot parsed.
            node.set("expressions", _literal_nodes(literals))
        elements = []
        for element in node.expressions:
            element_kind = _kind(element)
            if element_kind == "null":
                continue  # ClickHouse leaves NULL out of an IN set (transform_null_in = 0)
            if element_kind == "string" and kind not in STRING_KINDS | {"any"}:
                element = _string_constant_as(element, kind, node)
            elif kind in STRING_KINDS and element_kind == "int":
                # ClickHouse converts the set's numbers to the String column's type.
                element = exp.Literal.string(_integer_text(element))
            elif kind in STRING_KINDS and element_kind not in ("string", "any"):
                raise UnsupportedPredicateError(
                    f"{_short(node.sql('clickhouse'))}: only strings and whole numbers can be "
                    "looked up in a String column"
                )
            if element_kind == "list" or kind == "list":
                raise UnsupportedPredicateError(
                    f"{_short(node.sql('clickhouse'))}: IN over arrays is not supported"
                )
            elements.append(element)
        if not elements:
            # x IN () is FALSE, and NULL for a NULL x.
            return _typed(
                exp.Paren(
                    this=exp.and_(exp.Is(this=value, expression=exp.Null()), exp.Null(), copy=False)
                ),
                "bool",
            )
        node.set("expressions", elements)
        if kind in FLOAT_KINDS:
            return self.bitwise_membership(node)
        return _typed(node, "bool")

    def bitwise_membership(self, node):
        """``x IN (...)`` over floats, as ClickHouse's set compares: by bit pattern.

        ClickHouse looks a float up in the set of its constants (converted to the column's
        type) by its bits (verified with chdb): ``f IN (0)`` holds for 0.0, not -0.0, and
        ``f IN (nan)`` for a NaN of nan's bits only, where ``f = 0`` (IEEE) holds for both
        zeros. DuckDB's ``IN`` compares as its ``=`` does (-0.0 = 0.0, any NaN equal to any
        NaN). That is the same for a non-zero number; a zero or a NaN is compared by its bits
        with the constants that are not non-zero number literals (any of which may be a zero
        or a NaN). As a CASE, which DuckDB does not decide from Parquet min/max statistics:
        those leave NaN out, and DuckDB skips a row group whose other values are all one
        number by evaluating a plain ``IN`` (or its NOT) at that number.
        """
        from sqlglot import exp

        value = node.this
        exact = [element for element in node.expressions if not _nonzero_number(element)]

        def bits(side):
            double = side.copy()
            if not (isinstance(side, exp.Cast) and side.to.this == exp.DataType.Type.DOUBLE):
                double = exp.Cast(this=double, to=exp.DataType.build("DOUBLE"))
            return exp.Cast(this=double, to=exp.DataType.build("BIT"))

        zero_or_nan = exp.or_(
            exp.EQ(this=value.copy(), expression=exp.Literal.number(0)),
            _nan_test(value.copy()),
            copy=False,
        )
        by_bits = (
            exp.In(this=bits(value), expressions=[bits(element) for element in exact])
            if exact
            else exp.Boolean(this=False)
        )
        return _typed(
            exp.Case(
                ifs=[
                    exp.If(this=exp.Is(this=value.copy(), expression=exp.Null()), true=exp.Null()),
                    exp.If(this=zero_or_nan, true=by_bits),
                ],
                default=node,
            ),
            "bool",
        )

    def literal_membership(self, node, literals, kind: str):
        """``x IN (long literal list)`` where no element needs converting, or None.

        Integers compared with an integer column, and strings with a string column, are kept
        as they are by :meth:`membership`; the list is then copied as written, or becomes a
        table of its values (see :func:`clickhouse_to_duckdb_tables`).
        """
        from sqlglot import exp

        integers = literals.kind == "int"
        if kind not in (("int", "uint", "any") if integers else ("string", "binary", "any")):
            return None
        if not self.with_tables or kind == "any":
            return _typed(node, "bool")
        name, table = _values_table(literals, kind)
        self.tables[name] = table
        query = exp.Var(this=f'SELECT "{SET_COLUMN}" FROM {name}')  # printed as written
        return _typed(exp.In(this=node.this, expressions=[query]), "bool")

    # -- string predicates ----------------------------------------------------------------
    def refuse_escape(self, node):
        raise UnsupportedPredicateError(
            f"{_short(node.sql('clickhouse'))}: LIKE ... ESCAPE is not supported; ClickHouse "
            "escapes LIKE patterns with a backslash"
        )

    def like(self, node):
        return _negated(node, self.like_match(node))

    def ilike(self, node):
        return _negated(node, self.ilike_match(node))

    def like_match(self, node):
        from sqlglot import exp

        self.require_string(node.this, "like")
        pattern = _like_pattern(node.expression, "like")
        return _typed(_escaped_like(exp.Like, node.this, split_like_pattern(pattern)), "bool")

    def ilike_match(self, node):
        from sqlglot import exp

        self.require_string(node.this, "ilike")
        pattern = _like_pattern(node.expression, "ilike")
        like = split_like_pattern(pattern)
        parts = like.parts
        if (
            len(parts) == 3
            and parts[0] is parts[2] is LikeWildcard.ANY
            and isinstance(parts[1], str)
        ):
            # '%text%': ClickHouse searches the text case-insensitively, code point by code
            # point (its lower and upper case), as DuckDB's ILIKE does.
            return _typed(_escaped_like(exp.ILike, node.this, like), "bool")
        # Any other pattern: ClickHouse matches an RE2 regular expression case-insensitively;
        # DuckDB's regexp functions are RE2 too.
        regex = "".join(
            _RE2_WILDCARDS[part] if isinstance(part, LikeWildcard) else _re2_literal(part)
            for part in parts
        )
        return _typed(
            exp.func(
                "regexp_full_match",
                node.this,
                exp.Literal.string(regex),
                exp.Literal.string("is"),
                copy=False,
            ),
            "bool",
        )

    def affix(self, node):
        from sqlglot import exp

        name = "startsWith" if isinstance(node, exp.StartsWith) else "endsWith"
        self.require_string(node.this, name)
        self.require_string(node.expression, name)
        return _typed(node, "bool")

    def match(self, node):
        from sqlglot import exp

        self.require_string(node.this, "match")
        pattern = _string_constant(node.expression, "match")
        # ClickHouse's match: RE2, unanchored, and '.' matches a line break.
        return _typed(
            exp.func(
                "regexp_matches",
                node.this,
                exp.Literal.string(pattern),
                exp.Literal.string("s"),
                copy=False,
            ),
            "bool",
        )

    def case(self, node):
        from sqlglot import exp

        name = "lower" if isinstance(node, exp.Lower) else "upper"
        self.require_string(node.this, name)
        source, target = (
            (ASCII_UPPER, ASCII_LOWER) if name == "lower" else (ASCII_LOWER, ASCII_UPPER)
        )
        return _typed(_ascii_translate(node.this, source, target), "string")

    def position(self, node):
        from sqlglot import exp

        if node.args.get("position") is not None or node.args.get("occurrence") is not None:
            raise UnsupportedPredicateError(
                "position: the start-position argument is not supported"
            )
        haystack, needle = node.this, node.args.get("substr")
        self.require_string(haystack, "position")
        self.require_string(needle, "position")
        # ClickHouse counts bytes from 1 (0: not found); DuckDB's strpos counts characters.
        found = exp.func("strpos", haystack, needle)
        before = exp.func(
            "strlen",
            exp.func(
                "substr",
                haystack.copy(),
                exp.Literal.number(1),
                exp.Sub(this=found.copy(), expression=exp.Literal.number(1)),
            ),
        )
        return _typed(
            exp.Case(
                ifs=[
                    exp.If(
                        this=exp.EQ(this=found.copy(), expression=exp.Literal.number(0)),
                        true=exp.Literal.number(0),
                    )
                ],
                default=exp.Add(this=before, expression=exp.Literal.number(1)),
            ),
            "uint",
        )

    def length(self, node):
        value = node.this
        kind = _kind(value)
        if kind in STRING_KINDS:
            from sqlglot import exp

            return _typed(exp.func("strlen", value), "uint")
        if kind == "list":
            from sqlglot import exp

            return _typed(exp.func("len", _array_or_empty(value)), "uint")
        raise UnsupportedPredicateError(
            f"length: {value.sql('clickhouse')} must be a String or Array column"
            + (" (the column types are not known here)" if kind == "any" else "")
        )

    def is_nan(self, node):
        kind = _kind(node.this)
        if kind not in NUMERIC_KINDS | {"any", "null"}:
            raise UnsupportedPredicateError(
                f"Illegal type of argument of function isNaN: {node.this.sql('clickhouse')}"
            )
        return _typed(_nan_test(node.this), "bool")

    def has(self, node):
        from sqlglot import exp

        array, needle = node.this, node.expression
        self.require_array(array, "has")
        if isinstance(needle, exp.Null):
            # ClickHouse's has() finds NULL among the elements: a list with fewer non-NULL
            # elements than elements holds one.
            listed = _array_or_empty(array)
            return _typed(
                exp.GT(
                    this=exp.func("len", listed),
                    expression=exp.func("list_count", listed.copy()),
                ),
                "bool",
            )
        return _typed(exp.func("list_contains", _array_or_empty(array), needle), "bool")

    def token_set(self, name: str, arguments: list):
        """``hasAnyTokens`` / ``hasAllTokens`` (and the singular aliases) with the default
        tokenizer: an OR / AND of :func:`_has_token` per needle token
        (:func:`bloomskip.clickhouse.tokenizers.needle_tokens`). An array haystack is its
        elements joined by a space, a separator, so its tokens are those of its elements."""
        from sqlglot import exp

        if name not in TOKEN_SET_FUNCTIONS:
            # ClickHouse's function names are case-sensitive here (verified with chdb).
            proper = [n for n in TOKEN_SET_FUNCTIONS if n.lower() == name.lower()]
            raise UnsupportedPredicateError(
                f"Function with name `{name}` does not exist. Maybe you meant: {proper}"
            )
        if len(arguments) not in (2, 3):
            plural = "" if len(arguments) == 1 else "s"
            raise UnsupportedPredicateError(
                f"An incorrect number of arguments was specified for function '{name}'. "
                "Expected 2 mandatory arguments and 1 optional argument, got "
                f"{len(arguments)} argument{plural}"
            )
        haystack, needles = arguments[0], arguments[1]
        if len(arguments) == 3:
            tokenizer = _string_constant(arguments[2], name)
            if tokenizer not in TOKENIZER_NAMES:
                raise UnsupportedPredicateError(f"Unknown tokenizer: '{tokenizer}'")
            if tokenizer != DEFAULT_TOKENIZER:
                raise UnsupportedPredicateError(
                    f"{name}: bloomskip reads only the default tokenizer "
                    f"'{DEFAULT_TOKENIZER}', not '{tokenizer}'"
                )
        kind = _kind(haystack)
        if kind not in STRING_KINDS | {"list", "any", "null"}:
            raise UnsupportedPredicateError(
                f"A value of illegal type was provided as 1st argument 'input' to function "
                f"'{name}'. Expected: String, FixedString, Array(String) or Array(FixedString), "
                f"got: {haystack.sql('clickhouse')}"
            )
        if isinstance(needles, exp.Null):
            return _typed(exp.Null(), "bool")  # a NULL needle makes every row NULL
        if _kind(needles) in ("list", "literal list"):
            elements = _array_constant(needles, name)
            if not all(isinstance(e, exp.Literal) and e.is_string for e in elements):
                raise UnsupportedPredicateError(
                    f"A value of illegal type was provided as 2nd argument 'needles' to "
                    f"function '{name}'. Expected: const String or const Array(String), got: "
                    f"{needles.sql('clickhouse')}"
                )
            read = needle_tokens([e.this.encode("utf-8") for e in elements])
        elif isinstance(needles, exp.Literal) and needles.is_string:
            read = needle_tokens(needles.this.encode("utf-8"))
        else:
            raise UnsupportedPredicateError(
                f"A value of illegal type was provided as 2nd argument 'needles' to function "
                f"'{name}'. Expected: const String or const Array(String), got: "
                f"{needles.sql('clickhouse')}"
            )
        if kind == "list":
            # ClickHouse has no NULL arrays (a NULL list is []); NULL elements hold no token
            # (DuckDB's array_to_string skips them, and is NULL when they are all it has).
            # Concatenating an empty VARCHAR[] makes DuckDB refuse a list of other elements,
            # which ClickHouse refuses too, where array_to_string would print them.
            strings = exp.func(
                "list_concat",
                _array_or_empty(haystack),
                exp.Cast(this=exp.Array(expressions=[]), to=exp.DataType.build("VARCHAR[]")),
                copy=False,
            )
            joined = exp.func("array_to_string", strings, exp.Literal.string(" "))
            haystack = exp.func("coalesce", joined, exp.Literal.string(""), copy=False)
        every = TOKEN_SET_FUNCTIONS[name] == "all"
        if not read.tokens or (every and not read.complete):
            # False for every row but a NULL string, which stays NULL (verified with chdb).
            null = exp.If(this=exp.Is(this=haystack.copy(), expression=exp.Null()), true=exp.Null())
            false = exp.Case(ifs=[null], default=exp.Boolean(this=False))
            return _typed(exp.Paren(this=false), "bool")
        tests = [_has_token(haystack.copy(), t.decode("utf-8"), name) for t in read.tokens]
        combined = exp.and_(*tests, copy=False) if every else exp.or_(*tests, copy=False)
        return _typed(exp.Paren(this=combined), "bool")

    def require_string(self, node, function: str) -> None:
        kind = _kind(node)
        if kind not in STRING_KINDS | {"any", "null"}:
            raise UnsupportedPredicateError(
                f"Illegal type of argument {node.sql('clickhouse')} of function {function}: "
                "a String is expected"
            )

    def require_array(self, node, function: str) -> None:
        if _kind(node) not in ("list", "any"):
            raise UnsupportedPredicateError(
                f"Illegal type of argument {node.sql('clickhouse')} of function {function}: "
                "an Array is expected"
            )

    # -- functions without a sqlglot class ------------------------------------------------
    def function(self, node):
        from sqlglot import exp

        name = node.name
        key = name.lower()
        arguments = list(node.expressions)
        if key in ("hastoken", "hastokencaseinsensitive"):
            haystack, needle = _arguments(name, arguments, 2)
            self.require_string(haystack, name)
            text = _string_constant(needle, name)
            if key == "hastokencaseinsensitive":
                # ClickHouse lowers ASCII letters only, in the needle and the haystack.
                text = text.translate(str.maketrans(ASCII_UPPER, ASCII_LOWER))
                haystack = _ascii_translate(haystack, ASCII_UPPER, ASCII_LOWER)
            return _typed(_has_token(haystack, text, name), "bool")
        if key in _TOKEN_SET_KEYS:
            return self.token_set(name, arguments)
        if key == "multisearchany":
            haystack, needles = _arguments(name, arguments, 2)
            self.require_string(haystack, name)
            texts = [_string_constant(item, name) for item in _array_constant(needles, name)]
            if len(texts) > MAX_NEEDLES:
                raise UnsupportedPredicateError(
                    f"Number of arguments for function {name} doesn't match: passed "
                    f"{len(texts)}, should be at most {MAX_NEEDLES}"
                )
            if not texts:
                raise UnsupportedPredicateError(f"{name}: the needle array must not be empty")
            alternatives = [_contains(haystack, text) for text in texts]
            return _typed(exp.Paren(this=exp.or_(*alternatives, copy=False)), "bool")
        if key in ("hasany", "hasall"):
            array, elements = _arguments(name, arguments, 2)
            self.require_array(array, name)
            for element in _array_constant(elements, name):
                _non_null_constant(element, name)
            function = "list_has_any" if key == "hasany" else "list_has_all"
            return _typed(exp.func(function, _array_or_empty(array), elements), "bool")
        if key in ("equals", "notequals"):
            left, right = _arguments(name, arguments, 2)
            compare = exp.EQ if key == "equals" else exp.NEQ
            return _typed(
                exp.Paren(this=self.comparison(compare(this=left, expression=right))), "bool"
            )
        if key in ("isnull", "isnotnull"):
            (value,) = _arguments(name, arguments, 1)
            test = exp.Is(this=value, expression=exp.Null())
            return _typed(exp.Paren(this=test if key == "isnull" else exp.Not(this=test)), "bool")
        if key in ("startswith", "endswith"):
            haystack, affix = _arguments(name, arguments, 2)
            klass = exp.StartsWith if key == "startswith" else exp.EndsWith
            return self.affix(klass(this=haystack, expression=affix))
        if key in ("empty", "notempty"):
            (value,) = _arguments(name, arguments, 1)
            size = self.length(exp.Length(this=value))
            compare = exp.EQ if key == "empty" else exp.NEQ
            return _typed(
                exp.Paren(this=compare(this=size, expression=exp.Literal.number(0))), "bool"
            )
        if key in ("tofloat32", "tofloat64"):
            (value,) = _arguments(name, arguments, 1)
            if _kind(value) not in NUMERIC_KINDS | {"any", "string", "null"}:
                raise UnsupportedPredicateError(
                    f"{name}: {value.sql('clickhouse')} is not a number"
                )
            if _kind(value) == "string" and not isinstance(value, exp.Literal):
                raise UnsupportedPredicateError(f"{name}: only a string constant can be converted")
            target = "FLOAT" if key == "tofloat32" else "DOUBLE"
            converted = exp.Cast(this=value, to=exp.DataType.build(target))
            if key == "tofloat32":
                converted = exp.Cast(this=converted, to=exp.DataType.build("DOUBLE"))
            return _typed(converted, "float32" if key == "tofloat32" else "float64")
        if key == "todate":
            (value,) = _arguments(name, arguments, 1)
            return _typed(self.to_date(value, name), "date")
        if key in ("like", "notlike", "ilike", "notilike"):
            haystack, pattern = _arguments(name, arguments, 2)
            klass = exp.ILike if "ilike" in key else exp.Like
            matched = (self.ilike if klass is exp.ILike else self.like)(
                klass(this=haystack, expression=pattern)
            )
            return _typed(exp.Not(this=matched) if key.startswith("not") else matched, "bool")
        raise UnsupportedPredicateError(
            f"function {name} is not supported in a bloomskip WHERE (see docs/queries.md)"
        )

    def to_date(self, value, name: str):
        from sqlglot import exp

        kind = _kind(value)
        if kind == "string" and isinstance(value, exp.Literal):
            day = read_date_text(value.this)
            if day is not None and not _DATE_RANGE[0] <= day <= _DATE_RANGE[1]:
                # toDate saturates there (verified with chdb: '1899-12-31' is 1970-01-01).
                raise UnsupportedPredicateError(
                    f"{name}: {value.this!r} is outside the range of Date "
                    f"({_DATE_RANGE[0]} to {_DATE_RANGE[1]})"
                )
            return _string_constant_as(value, "date", value)
        if kind == "date":
            return value
        if _timestamp_scale(kind) is not None:
            if kind.startswith("timestamptz"):
                # ClickHouse reads a zoned Parquet timestamp as DateTime64(p, 'UTC'): its UTC
                # date.
                value = exp.func("timezone", exp.Literal.string("UTC"), value)
            return exp.Cast(this=value, to=exp.DataType.build("DATE"))
        raise UnsupportedPredicateError(
            f"{name}: {value.sql('clickhouse')} must be a string constant, a Date or a timestamp"
        )


#: The column of a long literal list's values table (see clickhouse_to_duckdb_tables).
SET_COLUMN = "value"

# A number as sqlglot keeps a ClickHouse numeric literal that DuckDB reads the same way.
_PLAIN_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?")
_PLAIN_COMPARISONS = {"EQ": "=", "NEQ": "<>", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<="}


def _plain_sql(root) -> str | None:
    """DuckDB text of a translated tree of columns, literals, comparisons, ``IN``, ``IS NULL``
    and AND / OR / NOT (a point lookup's), or None for any other tree.

    sqlglot's DuckDB generator takes 40-80 ms to set up in a fresh process, more than the rest
    of a cold point lookup's translation; these few node kinds are printed here exactly as it
    prints them (tests/test_cold_imports.py compares the two). Walked without recursion
    (chains may be thousands long).
    """
    from sqlglot import exp

    texts: dict[int, str] = {}
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        children = _plain_children(node, exp)
        if children is None:
            return None
        if not expanded and children:
            stack.append((node, True))
            stack.extend((child, False) for child in children)
            continue
        parts = [texts.pop(id(child)) for child in children]
        text = _plain_text(node, parts, exp)
        if text is None:
            return None
        texts[id(node)] = text
    return texts[id(root)]


def _plain_children(node, exp) -> list | None:
    """The operands :func:`_plain_text` prints, or None for a node it does not print."""
    kind = type(node)
    keys = {key for key, value in node.args.items() if value is not None and value != []}
    if kind is exp.Column:
        identifier = node.this
        plain = keys == {"this"} and isinstance(identifier, exp.Identifier)
        return [] if plain and identifier.args.get("quoted") else None
    if kind in (exp.Literal, exp.Var, exp.Null, exp.Boolean):
        return []
    if kind in (exp.Not, exp.Paren, exp.Neg):
        return [node.this] if keys == {"this"} else None
    if kind.__name__ in _PLAIN_COMPARISONS or kind in (exp.And, exp.Or):
        return [node.this, node.expression] if keys == {"this", "expression"} else None
    if kind is exp.Is:
        plain = keys == {"this", "expression"} and isinstance(node.expression, exp.Null)
        return [node.this] if plain else None
    if kind is exp.In:
        return [node.this, *node.expressions] if keys == {"this", "expressions"} else None
    return None


def _plain_text(node, parts: list[str], exp) -> str | None:
    """One node as sqlglot's DuckDB generator prints it: the tree's own ``Paren`` nodes group,
    nothing else is added."""
    kind = type(node)
    if kind is exp.Column:
        return '"' + node.name.replace('"', '""') + '"'
    if kind is exp.Literal:
        if node.is_string:
            return "'" + node.this.replace("'", "''") + "'"
        return node.this if _PLAIN_NUMBER.fullmatch(node.this) else None
    if kind is exp.Var:
        return node.this  # a literal list or a values-table query, as written for DuckDB
    if kind is exp.Null:
        return "NULL"
    if kind is exp.Boolean:
        return "TRUE" if node.this else "FALSE"
    if kind is exp.Not:
        return f"NOT {parts[0]}"
    if kind is exp.Paren:
        return f"({parts[0]})"
    if kind is exp.Neg:
        return f"- {parts[0]}" if parts[0].startswith("-") else f"-{parts[0]}"
    if kind is exp.Is:
        return f"{parts[0]} IS NULL"
    if kind is exp.In:
        return f"{parts[0]} IN ({', '.join(parts[1:])})"
    operator = "AND" if kind is exp.And else "OR" if kind is exp.Or else None
    operator = operator or _PLAIN_COMPARISONS[kind.__name__]
    return f"{parts[0]} {operator} {parts[1]}"


def _literal_list_of(node):
    """The ``bloomskip._sql.LiteralList`` of ``x IN (...)`` (or of the list's own node)."""
    from sqlglot import exp

    from bloomskip._sql import literal_list

    if isinstance(node, exp.In):
        expressions = node.expressions
        literals = literal_list(expressions[0]) if len(expressions) == 1 else None
        return None if literals is None or literals.array else literals
    return literal_list(node)


def _literal_nodes(literals) -> list:
    """The elements of a literal list as typed sqlglot literals, as the parser gives them."""
    from sqlglot import exp

    if literals.kind == "string":
        return [_typed(exp.Literal.string(text), "string") for text in literals.values]
    nodes = []
    for number in literals.values.tolist():
        literal = _typed(exp.Literal.number(abs(number)), "int")
        nodes.append(_typed(exp.Neg(this=literal), "int") if number < 0 else literal)
    return nodes


def _values_table(literals, kind: str):
    """``(name, pyarrow.Table)``: a literal list's values in the column :data:`SET_COLUMN`,
    typed as the column compares (strings as VARCHAR or BLOB), named by a digest of them."""
    import numpy as np
    import pyarrow as pa

    if literals.kind == "int":
        values = literals.values
        arrow_type = pa.int64() if values.dtype == np.int64 else pa.uint64()
        array = pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(values)])
    else:
        # Built from buffers: pyarrow.array on Python objects imports pandas (see condition).
        encoded = [text.encode("utf-8") for text in literals.values]
        offsets = np.zeros(len(encoded) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
        arrow_type = pa.large_string() if kind == "string" else pa.large_binary()
        array = pa.Array.from_buffers(
            arrow_type,
            len(encoded),
            [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))],
        )
    digest = hashlib.blake2b(f"{arrow_type}:{literals.text}".encode(), digest_size=12)
    return f"__bloomskip_set_{digest.hexdigest()}", pa.table({SET_COLUMN: array})


def _merged(node, compare, membership, negated: bool):
    """The membership test equal to ``node`` (an AND/OR of two tests), or None.

    Each side is ``column <compare> constant`` or a membership test this function built (an
    ``In`` marked ``meta["merged"]``, under a ``Not`` when ``negated``); the left side grows in
    place, so a chain of n terms is merged in O(n).
    """
    from sqlglot import exp

    def as_membership(side):
        target = side.this if negated and isinstance(side, exp.Not) else side
        if isinstance(target, membership) and target.meta.get("merged"):
            return target
        return None

    def as_test(side):
        # Translated columns carry no table (translation refuses one).
        if type(side) is compare and isinstance(side.this, exp.Column):
            value = side.expression
            inner = value.this if isinstance(value, exp.Neg) else value
            if isinstance(inner, exp.Literal):
                return side.this, value
        return None

    right = as_test(node.expression)
    if right is None:
        return None
    grown = as_membership(node.this)
    if grown is not None:
        if grown.this.name != right[0].name:
            return None
        grown.append("expressions", right[1])
        return node.this
    left = as_test(node.this)
    if left is None or left[0].name != right[0].name:
        return None
    test = _typed(membership(this=left[0], expressions=[left[1], right[1]]), "bool")
    test.meta["merged"] = True
    return exp.Not(this=test) if negated else test


def _nan_test(value):
    """DuckDB SQL true exactly when ``value`` is NaN (NULL for NULL), as ``isnan`` would be.

    Not ``isnan``: DuckDB (2.0.1) decides ``isnan`` from Parquet min/max statistics, which leave
    NaN out as the Parquet format asks (pyarrow writes them so), and then answers false for
    every NaN row. ``isfinite`` and ``isinf`` are evaluated on the values; NaN is the one value
    that is neither. In a CASE: DuckDB skips a row group whose min and max are one number by
    evaluating a plain filter at that number, which loses the row group's NaN rows; it does not
    do that with a CASE.
    """
    from sqlglot import exp

    neither = exp.and_(
        exp.not_(exp.func("isfinite", value), copy=False),
        exp.not_(exp.func("isinf", value.copy()), copy=False),
        copy=False,
    )
    return exp.Case(
        ifs=[exp.If(this=exp.Is(this=value.copy(), expression=exp.Null()), true=exp.Null())],
        default=neither,
    )


def _negated(original, translated):
    """``translated``, negated when ``original`` is ``x NOT LIKE p`` (sqlglot's ``negate``)."""
    from sqlglot import exp

    if original.args.get("negate"):
        return _typed(exp.Not(this=exp.Paren(this=translated)), "bool")
    return translated


def _typed(node, kind: str):
    node.meta["kind"] = kind
    return node


def _kind(node) -> str:
    return node.meta.get("kind", "any") if node.meta else "any"


def _float_constant(word: str):
    from sqlglot import exp

    return exp.Cast(this=exp.Literal.string(word), to=exp.DataType.build("DOUBLE"))


def _nonzero_number(node) -> bool:
    """Whether ``node`` is a number literal, or minus one, whose value is not zero."""
    from sqlglot import exp

    literal = node.this if isinstance(node, exp.Neg) else node
    if not isinstance(literal, exp.Literal) or literal.is_string:
        return False
    try:
        return float(literal.this) != 0
    except ValueError:
        return False


def _suggestion(name: str, kinds: dict[str, str]) -> str:
    close = [column for column in kinds if column.lower() == name.lower()]
    return f". Maybe you meant: {close}" if close else ""


def _clickhouse_type(node) -> str:
    """The ClickHouse type name of a side of a comparison, for ClickHouse's error message."""
    from sqlglot import exp

    kind = _kind(node)
    if kind in STRING_KINDS:
        return "String"
    literal = node.this if isinstance(node, exp.Neg) else node
    if isinstance(literal, exp.Literal) and not literal.is_string and literal.this.isdigit():
        value = int(literal.this) * (-1 if isinstance(node, exp.Neg) else 1)
        for bits in (8, 16, 32, 64, 128, 256):
            if 0 <= value < 2**bits:
                return f"UInt{bits}"
            if -(2 ** (bits - 1)) <= value < 0:
                return f"Int{bits}"
    return {
        "int": "Int64",
        "uint": "UInt64",
        "float32": "Float32",
        "float64": "Float64",
        "bool": "Bool",
    }.get(kind, kind)


def _integer_text(node) -> str:
    from sqlglot import exp

    if isinstance(node, exp.Neg):
        return "-" + node.this.this
    return str(int(node.this))


def _string_constant_as(literal, kind: str, context):
    """A string constant converted to a column's type, as ClickHouse converts it."""
    from sqlglot import exp

    text = literal.this
    scale = _timestamp_scale(kind)
    if scale is not None:
        zoned = kind.startswith("timestamptz")
        return _typed(_timestamp_constant(text, scale, zoned, context), kind)
    if kind == "date":
        day = read_date_text(text)
        if day is None:
            raise UnsupportedPredicateError(
                f"Cannot parse string {text!r} as Date (in {_short(context.sql('clickhouse'))})"
            )
        written = exp.Literal.string(day.isoformat())
        return _typed(exp.Cast(this=written, to=exp.DataType.build("DATE")), kind)
    if kind in ("int", "uint") and not re.fullmatch(r"\d+" if kind == "uint" else r"-?\d+", text):
        raise UnsupportedPredicateError(
            f"Cannot convert string {text!r} to type {'UInt64' if kind == 'uint' else 'Int64'} "
            f"(in {_short(context.sql('clickhouse'))})"
        )
    types = {"int": "HUGEINT", "uint": "UHUGEINT", "float64": "DOUBLE", "bool": "BOOLEAN"}
    if kind == "float32":
        value = exp.Cast(this=literal, to=exp.DataType.build("FLOAT"))
        return _typed(exp.Cast(this=value, to=exp.DataType.build("DOUBLE")), kind)
    if kind in types:
        return _typed(exp.Cast(this=literal, to=exp.DataType.build(types[kind])), kind)
    return literal


def _timestamp_constant(text: str, scale: int, zoned: bool, context):
    """DuckDB's value of a date-time text compared with a ``DateTime64(scale)`` column.

    ClickHouse reads Parquet / Arrow timestamps as ``DateTime64(scale, 'UTC')``, and the
    constant in UTC at the column's precision: its fraction cut (not rounded) to ``scale``
    digits (verified with chdb: a millisecond column's ``.123`` equals ``'… .123456'``, a
    nanosecond column's ``.123456`` does not equal ``'… .123456789'``). DuckDB is given exactly
    that value, as a TIMESTAMP (microseconds) up to scale 6 and as TIMESTAMP_NS from its
    nanosecond count beyond: DuckDB compares a column with it at the finer of the two
    precisions, which holds both exactly. A zoned column compares with the UTC instant.
    """
    from sqlglot import exp

    reading = read_datetime_text(text)
    if reading is None:
        raise UnsupportedPredicateError(
            f"Cannot parse string {text!r} as DateTime64 (in {_short(context.sql('clickhouse'))})"
        )
    reading = reading._replace(fraction=reading.fraction[:scale])
    if scale <= 6:
        # Written with at most 6 fraction digits, which DuckDB's cast reads exactly.
        written = exp.Literal.string(reading.text())
        naive = exp.Cast(this=written, to=exp.DataType.build("TIMESTAMP"))
    else:
        ticks = calendar.timegm(reading.moment.timetuple()) * 10**9 + int(
            reading.fraction.ljust(9, "0")
        )
        if not _NS_RANGE[0] <= ticks <= _NS_RANGE[1]:
            raise UnsupportedPredicateError(
                f"Decimal math overflow: while converting {text!r} to DateTime64(9, 'UTC') "
                f"(in {_short(context.sql('clickhouse'))})"
            )
        naive = exp.func("make_timestamp_ns", exp.Literal.number(ticks))
    if zoned:
        return exp.func("timezone", exp.Literal.string("UTC"), naive)
    return naive


def _ascii_translate(value, source: str, target: str):
    from sqlglot import exp

    return exp.func(
        "translate", value, exp.Literal.string(source), exp.Literal.string(target), copy=False
    )


def _escaped_like(operator, operand, like):
    """DuckDB's ``operand LIKE p`` (or ILIKE) for a ClickHouse pattern split by
    ``split_like_pattern``, ``p`` its canonical spelling.

    The canonical spelling means the same under DuckDB's ``ESCAPE '\\'``. Without a backslash
    it means the same with no escape character (DuckDB's LIKE has none), and then no ESCAPE is
    written: DuckDB rewrites a plain LIKE into contains / prefix / suffix tests pushed into its
    Parquet scan, where ``LIKE ... ESCAPE`` runs ``like_escape`` on every row (1.3-2.2x the
    scan's time, issue 16, benchmarks/substring_search.py).
    """
    from sqlglot import exp

    escaped = like.escaped()
    converted = operator(this=operand, expression=exp.Literal.string(escaped))
    if "\\" not in escaped:
        return converted
    return exp.Escape(this=converted, expression=exp.Literal.string("\\"))


def _like_pattern(node, function: str) -> str:
    from sqlglot import exp

    if not (isinstance(node, exp.Literal) and node.is_string):
        raise UnsupportedPredicateError(
            f"{function}: the pattern {node.sql('clickhouse')} must be a string constant"
        )
    return node.this


_RE2_WILDCARDS = {LikeWildcard.ANY: ".*", LikeWildcard.ONE: "."}


def _re2_literal(text: str) -> str:
    return "".join(re.escape(char) if char.isascii() else char for char in text)


def _arguments(name: str, arguments: list, count: int) -> list:
    if len(arguments) != count:
        raise UnsupportedPredicateError(
            f"Number of arguments for function {name} doesn't match: passed {len(arguments)}, "
            f"should be {count}"
        )
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

    # ClickHouse's hasAny/hasAll treat NULL as equal to NULL; DuckDB's list functions do
    # not, so a NULL element has no exact translation.
    if isinstance(node, exp.Null):
        raise UnsupportedPredicateError(f"{function}: a NULL element is not supported")
    return node


def _array_constant(node, function: str) -> list:
    from sqlglot import exp

    literals = _literal_list_of(node)
    if literals is not None and literals.array:
        return _literal_nodes(literals)
    if not isinstance(node, exp.Array):
        raise UnsupportedPredicateError(
            f"{function}: {node.sql('clickhouse')} is not an array constant"
        )
    return list(node.expressions)


def _array_or_empty(array):
    from sqlglot import exp

    # ClickHouse has no NULL arrays: it reads a NULL Parquet list as []. hasAll(a, []) is then
    # true where DuckDB's list_has_all(NULL, []) is NULL.
    return exp.func("coalesce", array, exp.Array(expressions=[]), copy=False)


def _contains(haystack, needle: str):
    from sqlglot import exp

    # ClickHouse's multiSearchAny finds an empty needle in every string except the empty one.
    if needle == "":
        return exp.NEQ(this=haystack.copy(), expression=exp.Literal.string(""))
    return exp.func("contains", haystack.copy(), exp.Literal.string(needle), copy=False)


def _has_token(haystack, needle: str, function: str = "hasToken"):
    from sqlglot import exp

    # ClickHouse refuses needles holding a separator; an empty needle matches nothing.
    if any(byte < 0x80 and not chr(byte).isalnum() for byte in needle.encode("utf-8")):
        raise UnsupportedPredicateError(
            f"{function}: needle {needle!r} must not contain whitespace or separator characters"
        )
    if needle == "":
        return exp.Boolean(this=False)
    # The needle holds only [0-9A-Za-z] and non-ASCII characters: nothing to escape in RE2.
    pattern = f"(?:^|{TOKEN_SEPARATOR_CLASS}){needle}(?:$|{TOKEN_SEPARATOR_CLASS})"
    # contains() first: cheap, and DuckDB only runs the regex on rows it lets through.
    return exp.Paren(
        this=exp.and_(
            exp.func("contains", haystack, exp.Literal.string(needle), copy=False),
            exp.func("regexp_matches", haystack.copy(), exp.Literal.string(pattern), copy=False),
            copy=False,
        )
    )
