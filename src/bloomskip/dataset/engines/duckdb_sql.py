"""DuckDB's own SQL, with each Parquet scan pruned by the dataset's bloomskip index.

``bloomskip.sql(query)`` takes a query in DuckDB's SQL. Each ``read_parquet('…')`` (one path:
a file or a glob) or bare quoted path (``FROM 'logs/*.parquet'``) over local files that a
bloomskip index serves is replaced, in the query's text and nowhere else, by a read of only what
the index keeps for the WHERE conjuncts of that scan's ``SELECT`` over that scan's columns:
files, row groups, row ranges (the access plan of ``Dataset.explain``). DuckDB then runs the
query as written: joins, aggregates, window functions, other tables.

Which conjuncts prune. A conjunct of the ``SELECT``'s WHERE whose columns are all the scan's
(qualified by its alias, or unqualified when the scan is the ``SELECT``'s only source) is
mapped to a ClickHouse atom when its meaning is the same in both, and dropped otherwise:

- ``col = literal``, ``col IN (literals)``: an integer literal against an integer column, a
  string literal against a string column;
- ``col LIKE 'pattern'`` without ``ESCAPE`` and without a backslash (DuckDB's ``LIKE`` has no
  default escape character, ClickHouse's is the backslash); ``contains``, ``starts_with`` /
  ``prefix``, ``ends_with`` / ``suffix`` as the ``LIKE`` patterns they are;
- ``AND`` of conjuncts (an unmapped operand is dropped: the rest still holds for every row the
  conjunct keeps) and ``OR`` of mapped operands (an unmapped operand drops the whole ``OR``).

Every mapped atom is true, for any row, where DuckDB's conjunct is true, and each is
null-rejecting, so pruning the scan by them keeps every row the WHERE keeps, whatever join
the scan is in. What the index decides is ClickHouse's (``Dataset.explain``); the rows are
DuckDB's. A scan is left as written when anything is unsure: options passed to
``read_parquet``, a list of paths, files DuckDB's glob would read that the dataset does not
hold (or the reverse), files of different schemas, ``key=value`` partition folders, a column
the reader names itself (``file_row_number``), no index, or nothing to skip.

``delta_scan('…')`` and ``iceberg_scan('…')`` of a local Delta or Iceberg table's folder with
an index are pruned by the same conjuncts; the scan is replaced by a view of the access plan's
pyarrow form (the snapshot's deletes and partition values applied), registered on the
connection while the query runs.

Files rewritten while the query runs are handled as ``Dataset.query`` handles them: once the
rows are read, every file a pruned scan read is checked against the identity its decision was
made for, and the query is decided and run again when one changed.

Example:
    >>> import bloomskip
    >>> bloomskip.sql("SELECT count(*) FROM 'logs/*.parquet' WHERE user_id = 42").fetchall()
    ... # doctest: +SKIP
    [(3,)]
"""

from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bloomskip.dataset.engines import atoms
from bloomskip.errors import BloomskipError, UnsupportedPredicateError

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from bloomskip.dataset.prune import Explanation

#: A query is decided and read again at most this many times when files change meanwhile.
READ_ATTEMPTS = 3
#: Datasets kept between calls, by path: a ``Dataset`` keeps its index's decoded sections and
#: the files' footers, and checks the files again (``stat``) on every use.
KEPT_DATASETS = 32
_DATASETS: dict[str, object] = {}
#: The table functions of DuckDB's delta and iceberg extensions, by the table format they read.
TABLE_SCANS = {"delta_scan": "delta", "iceberg_scan": "iceberg"}
#: The names pruned table scans are read by while a query runs (``SqlPlan.views``).
TABLE_VIEW_PREFIX = "__bloomskip_table_"
_DEFAULT: list = []
#: Parsed queries kept, by text.
PARSED_KEPT = 64
#: DuckDB's matches of a glob whose pattern is in its last component, with the modification
#: time of the folder listed: adding, removing or renaming a file there changes it.
_GLOBS: dict[str, tuple[int, list[str]]] = {}


@dataclass
class ScanDecision:
    """What the index decided for one Parquet scan of a query.

    Attributes:
        text: The scan as written (``read_parquet('logs/*.parquet')``).
        path: The path it reads.
        where: The ClickHouse WHERE the index was asked about (its mapped conjuncts); None when
            no conjunct maps.
        explanation: The index's decision, None when the scan is left as written.
        reason: Why the scan is left as written, when it is.
        span: Where the scan is in the query's text (``[start, end)``).
        source: What the query reads in its place: a read of the access plan, or the name of
            the view of a table's plan (:attr:`SqlPlan.views`).
        located: Whether the run read only the rows its WHERE holds on, located first.
    """

    text: str
    path: str
    where: str | None = None
    explanation: Explanation | None = field(default=None, repr=False)
    reason: str = ""
    span: tuple[int, int] = (0, 0)
    source: str = ""
    located: bool = False

    def summary(self) -> str:
        """One line: what the scan reads, and why."""
        if self.explanation is None:
            return f"{self.text}: read as written ({self.reason})"
        plan = self.explanation.plan
        total_rows = sum(int(state.layout.rows.sum()) for state in self.explanation.files)
        total_groups = sum(len(state.layout.rows) for state in self.explanation.files)
        return (
            f"{self.text}: reads {len(plan.files)}/{plan.file_count} files, "
            f"{plan.row_group_count}/{total_groups} row groups, {plan.rows:,}/{total_rows:,} "
            f"rows, for WHERE {self.where}"
        )


@dataclass
class SqlPlan:
    """A query with its pruned scans.

    Attributes:
        query: The query as given.
        text: The query DuckDB runs: ``query`` with each pruned scan replaced.
        scans: One :class:`ScanDecision` per Parquet scan found.
        views: The pruned table scans (``delta_scan``, ``iceberg_scan``): the name ``text``
            reads each by, and its decision, whose access plan is registered under that name
            while the query runs.
    """

    query: str
    text: str
    scans: list[ScanDecision]
    views: dict[str, Explanation] = field(default_factory=dict)

    def summary(self) -> str:
        """What each scan reads, one line each (``bloomskip sql --explain``)."""
        if not self.scans:
            return "no Parquet scan: the query runs as written"
        return "\n".join(scan.summary() for scan in self.scans)


def plan_sql(query: str, connection=None) -> SqlPlan:
    """Decide, for each Parquet scan of a DuckDB query, what its index lets it skip.

    Args:
        query: One statement in DuckDB's SQL.
        connection: The DuckDB connection the query will run on (to expand globs as it does);
            a new in-memory one when None.

    Returns:
        The :class:`SqlPlan`; a statement that is not a query, or that sqlglot cannot parse,
        has no scan and runs as written.

    Example:
        >>> plan_sql("SELECT * FROM 'logs/*.parquet' WHERE user_id = 42").summary()
        ... # doctest: +SKIP
        "'logs/*.parquet': reads 1/4 files, 1/120 row groups, 8,192/7,864,320 rows, ..."
    """
    from sqlglot import exp

    statement = _parsed(query)
    if statement is None:
        return SqlPlan(query, query, [])
    # A scan without an alias keeps the name DuckDB gives it only while it is a table
    # function: a query qualifying any column may use that name, and then it is not pruned.
    qualified = any(column.table for column in statement.find_all(exp.Column))
    connection = connection if connection is not None else _connect()
    scans = []
    views = {}
    for table in statement.find_all(exp.Table):
        span = _scan_span(query, table)
        if span is None:
            continue
        path, start, end, table_format = span
        if not table.alias and qualified:
            scans.append(
                ScanDecision(query[start:end], path, reason="no alias, and columns are qualified")
            )
            continue
        if table_format is None:
            decision = _decide(table, path, query[start:end], connection)
        else:
            decision = _decide_table(table, path, query[start:end], table_format)
        decision.span = (start, end)
        scans.append(decision)
        if decision.explanation is None:
            continue
        if table_format is None:
            from bloomskip.dataset.scan.query import parquet_source

            decision.source = parquet_source(decision.explanation)
        else:
            decision.source = f"{TABLE_VIEW_PREFIX}{len(views)}"
            views[decision.source] = decision.explanation
    return SqlPlan(query, _replaced(query, scans), scans, views)


@functools.lru_cache(maxsize=PARSED_KEPT)
def _parsed(query: str):
    """The one query statement of ``query`` as sqlglot parses it (DuckDB's dialect), or None
    (several statements, not a query, or not parseable). Kept by text: the tree is only read."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        statements = sqlglot.parse(query, dialect="duckdb")
    except SqlglotError:
        return None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        return None
    return statements[0]


def _replaced(query: str, scans: list[ScanDecision]) -> str:
    """``query`` with each pruned scan's text replaced by what it reads."""
    for scan in sorted(scans, key=lambda scan: scan.span, reverse=True):
        if scan.explanation is not None:
            start, end = scan.span
            query = query[:start] + scan.source + query[end:]
    return query


def _located(plan: SqlPlan, connection) -> str:
    """The plan's text, each pruned Parquet scan reading only the rows its mapped WHERE holds
    on where locating them first pays (``scan.query.located_source``). A mapped conjunct
    holds wherever DuckDB's does, so no row the query keeps is left out."""
    from bloomskip.dataset.scan.query import located_source

    for scan in plan.scans:
        if scan.explanation is None or scan.source in plan.views:
            continue
        source = located_source(connection, scan.explanation, scan.where)
        if source is not None:
            scan.source, scan.located = source, True
    return _replaced(plan.query, plan.scans)


def sql(query: str, *, connection=None) -> duckdb.DuckDBPyRelation:
    """Run a query in DuckDB's SQL with its Parquet scans pruned by their bloomskip indexes.

    The rows are those DuckDB returns for ``query`` without bloomskip; only the row groups and
    rows each scan reads differ (see the module's description for which scans and WHERE
    conjuncts prune).

    Args:
        query: One statement in DuckDB's SQL.
        connection: A DuckDB connection (its tables, views and settings are the query's); a
            new in-memory one when None.

    Returns:
        A DuckDB relation of the query's rows (read once, here; a statement that is not a
        query is run as written and its relation returned as DuckDB gives it).

    Raises:
        BloomskipError: DuckDB rejects the query (its message, on one line).
        StaleSourceError: Files a pruned scan read changed during each of three attempts.

    Example:
        >>> import bloomskip
        >>> bloomskip.sql("SELECT * FROM read_parquet('logs/*.parquet') WHERE user_id = 42")
        ... # doctest: +SKIP
    """
    relation, _ = sql_with_plan(query, connection=connection)
    return relation


def sql_with_plan(query: str, *, connection=None) -> tuple[duckdb.DuckDBPyRelation, SqlPlan]:
    """:func:`sql`, with the :class:`SqlPlan` whose text gave the rows."""
    import duckdb

    from bloomskip.errors import StaleSourceError

    connection = connection if connection is not None else _connect()
    moved = []
    for _ in range(READ_ATTEMPTS):
        plan = plan_sql(query, connection)
        try:
            if not plan.scans or all(scan.explanation is None for scan in plan.scans):
                return connection.sql(query), plan
            with _prefetching(connection) as prefetch, _registered(connection, plan.views):
                plan.text = _located(plan, connection)
                prefetch(_reads_sparsely(plan))
                table = connection.sql(plan.text).to_arrow_table()
        except duckdb.Error as exc:
            raise _rejected(exc) from exc
        moved = [
            (scan.path, key)
            for scan in plan.scans
            if scan.explanation is not None
            for key in scan.explanation.access_plan().changed()
        ]
        if not moved:
            return connection.from_arrow(table), plan
    raise StaleSourceError(
        f"{moved[0][0]}: {moved[0][1]} changed while the query read it, {READ_ATTEMPTS} times "
        "in a row; run the query again"
    )


@contextlib.contextmanager
def _registered(connection, views: dict):
    """Within the block, each pruned table scan's access plan is a view of ``connection``
    under its name (the pyarrow form: a table's partition values and deletes applied)."""
    for name, explanation in views.items():
        connection.register(name, explanation.access_plan().to_pyarrow())
    try:
        yield
    finally:
        for name in views:
            connection.unregister(name)


def _connect():
    """The connection queries run on when the caller gives none (opened once)."""
    if not _DEFAULT:
        from bloomskip.dataset.scan.query import connect

        _DEFAULT.append(connect())
    return _DEFAULT[0]


@contextlib.contextmanager
def _prefetching(connection):
    """Within the block, DuckDB reads without prefetching (``scan.query.sparse_reads``: rows
    are located first) until the block calls what it is given with another choice.

    A caller's connection gets its setting back after. On bloomskip's own connection, which no
    one else sets, the setting is left as the block chose (``sparse_reads`` remembers it): a
    query whose choice it already is sends no statement (three were a tenth of a point
    lookup's time)."""
    from bloomskip.dataset.scan.query import sparse_reads

    if bool(_DEFAULT) and connection is _DEFAULT[0]:
        sparse_reads(connection, True)
        yield functools.partial(sparse_reads, connection)
        return
    # fetchall, not fetchone: DuckDB refuses other work while a result is unfinished.
    ((before,),) = connection.execute(
        "SELECT current_setting('disable_parquet_prefetching')"
    ).fetchall()
    now = [bool(before)]

    def choose(sparse: bool) -> None:
        if sparse != now[0]:
            sparse_reads(connection, sparse, remembered=False)
            now[0] = sparse

    choose(True)
    try:
        yield choose
    finally:
        choose(bool(before))


def _reads_sparsely(plan: SqlPlan) -> bool:
    """Whether every pruned scan reads located rows, or a few pages of its row groups."""
    from bloomskip.dataset.scan.query import reads_sparsely

    return all(
        scan.located or reads_sparsely(scan.explanation.plan)
        for scan in plan.scans
        if scan.explanation is not None
    )


def _dataset(path: str):
    """The ``Dataset`` of ``path``, kept between calls (:data:`KEPT_DATASETS`)."""
    from bloomskip.dataset import Dataset

    key = str(Path(path).absolute())
    if key not in _DATASETS:
        if len(_DATASETS) >= KEPT_DATASETS:
            _DATASETS.pop(next(iter(_DATASETS)))
        _DATASETS[key] = Dataset(path)
    return _DATASETS[key]


def _rejected(exc: Exception) -> BloomskipError:
    from bloomskip._cli import interrupted

    if interrupted(exc):
        raise KeyboardInterrupt from exc
    text = str(exc).strip()
    reason = text.splitlines()[0] if text else type(exc).__name__
    return BloomskipError(f"DuckDB rejected the query: {reason[:200]}")


def _scan_span(query: str, table) -> tuple[str, int, int, str | None] | None:
    """``(path, start, end, table format)`` of a scan of one path in ``query``'s text: a
    Parquet scan (format None), or ``delta_scan`` / ``iceberg_scan`` of a table's folder; None
    when ``table`` is not one (another table, a scan with options or a list of paths)."""
    from sqlglot import exp

    node = table.this
    table_format = None
    if isinstance(node, exp.Anonymous):
        table_format = TABLE_SCANS.get(str(node.this).lower())
    if isinstance(node, exp.ReadParquet) or table_format is not None:
        arguments = node.expressions
        if len(arguments) != 1 or not (
            isinstance(arguments[0], exp.Literal) and arguments[0].is_string
        ):
            return None
        start = node.meta.get("start")
        if start is None:
            return None
        end = _closing_parenthesis(query, node.meta["end"] + 1)
        return (arguments[0].this, start, end, table_format) if end is not None else None
    if isinstance(node, exp.Identifier) and node.quoted and not table.args.get("db"):
        start, end = node.meta.get("start"), node.meta.get("end")
        if start is None or query[start] != "'":
            return None  # a double-quoted name is a table, not a path
        return node.this, start, end + 1, None
    return None


@functools.lru_cache(maxsize=PARSED_KEPT)
def _closing_parenthesis(query: str, position: int) -> int | None:
    """The end (exclusive) of the parenthesized argument list opening at ``position`` (after
    blanks), found with sqlglot's tokenizer (string literals may hold parentheses)."""
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.tokens import TokenType

    depth = 0
    for token in Dialect.get_or_raise("duckdb").tokenize(query[position:]):
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return position + token.end + 1
        elif depth == 0:
            return None
    return None


def _decide(table, path: str, text: str, connection) -> ScanDecision:
    """The index's decision for one Parquet scan, or why the scan is read as written."""
    decision = ScanDecision(text, path)
    files = _duckdb_files(path, connection)
    if not files:
        decision.reason = "DuckDB reads no file there"
        return decision
    dataset = _opened(decision)
    if dataset is None:
        return decision
    explanation = _explain_scan(decision, dataset, table)
    if explanation is None:
        return decision
    # The explanation's files are the listing its decision was made on.
    if sorted(os.path.abspath(state.source.path) for state in explanation.files) != files:
        decision.reason = "the dataset's files are not those DuckDB reads"
        return decision
    # The decision's listing is the one in use: its reader tells whether its files agree.
    if (
        any(state.source.format != "parquet" for state in explanation.files)
        or not explanation.reader.uniform()
    ):
        decision.reason = "the files' schemas differ"
        return decision
    if explanation.table_files:
        decision.reason = "key=value partition folders"
        return decision
    return _pruning(decision, explanation)


def _decide_table(table, path: str, text: str, table_format: str) -> ScanDecision:
    """The index's decision for one ``delta_scan`` / ``iceberg_scan`` of a table's folder."""
    from bloomskip.dataset.locate import table_format as format_of

    decision = ScanDecision(text, path)
    if "://" in path or format_of(path) != table_format:
        decision.reason = f"not a local {table_format.capitalize()} table's folder"
        return decision
    dataset = _opened(decision)
    explanation = None if dataset is None else _explain_scan(decision, dataset, table)
    return decision if explanation is None else _pruning(decision, explanation)


def _opened(decision: ScanDecision):
    """The ``Dataset`` of the scan's path, or None with ``decision.reason`` saying why not."""
    try:
        return _dataset(decision.path)
    except BloomskipError as exc:
        decision.reason = f"not a dataset: {exc}"
        return None


def _explain_scan(decision: ScanDecision, dataset, table) -> Explanation | None:
    """The index's decision for the scan's mapped WHERE conjuncts (``decision.where``), or
    None with ``decision.reason`` saying why there is none."""
    from bloomskip.dataset.scan.query import FILE_COLUMN, ROW_NUMBER
    from bloomskip.dataset.sql.translate import column_kinds

    # The schema and the decision are of one listing (a lake's; a sidecar's folder has none
    # to share).
    with getattr(dataset.backend, "one_listing", contextlib.nullcontext)():
        schema = dataset.schema
        if ROW_NUMBER in schema.names or FILE_COLUMN in schema.names:
            decision.reason = f"a column is named {ROW_NUMBER!r} or {FILE_COLUMN!r}"
            return None
        atoms = _scan_conjuncts(table, dict(column_kinds(schema)))
        if not atoms:
            decision.reason = "no WHERE conjunct over its columns maps to the index"
            return None
        decision.where = " AND ".join(atoms)
        try:
            return dataset.explain(decision.where)
        except (UnsupportedPredicateError, BloomskipError) as exc:
            decision.reason = f"the index cannot evaluate it: {exc}"
            return None


def _pruning(decision: ScanDecision, explanation: Explanation) -> ScanDecision:
    """``decision`` reading ``explanation``'s plan, unless the index keeps every row."""
    if explanation.plan.rows == sum(int(s.layout.rows.sum()) for s in explanation.files):
        decision.reason = "the index keeps every row"
        return decision
    decision.explanation = explanation
    return decision


def _duckdb_files(path: str, connection) -> list[str]:
    """The files DuckDB reads for ``path`` (its own ``glob``; absolute, sorted); none for a
    directory (DuckDB reads none there either) or a URL."""
    import duckdb

    if "://" in path:
        return []
    folder, pattern = os.path.split(path)
    stamp = None
    if not any(character in folder for character in "*?[{") and pattern:
        try:
            stamp = os.stat(folder or ".").st_mtime_ns
        except OSError:
            stamp = None
    key = os.path.abspath(path)
    if stamp is not None and _GLOBS.get(key, (None,))[0] == stamp:
        # A stale list (two changes within one tick of the folder's clock) can only differ
        # from the dataset's own listing, which is taken anew: the scan is then read as written.
        return _GLOBS[key][1]
    try:
        found = connection.execute("SELECT file FROM glob(?)", [path]).fetchall()
    except duckdb.Error:
        return []
    files = sorted(os.path.abspath(name) for (name,) in found)
    if stamp is not None:
        if len(_GLOBS) >= KEPT_DATASETS:
            _GLOBS.clear()
        _GLOBS[key] = (stamp, files)
    return files


def _scan_conjuncts(table, kinds: dict[str, str]) -> list[str]:
    """The ClickHouse atoms of the WHERE conjuncts of ``table``'s ``SELECT`` that are over
    ``table``'s columns and map (see the module's description)."""
    from sqlglot import exp

    select = table.parent
    while select is not None and not isinstance(select, exp.Select):
        select = select.parent
    if select is None or select.args.get("where") is None:
        return []
    from_ = select.args.get("from") or select.args.get("from_")
    sources = ([from_.this] if from_ is not None else []) + [
        join.this for join in select.args.get("joins") or []
    ]
    if not any(source is table for source in sources):
        return []  # the scan is inside a subquery of this SELECT's FROM: not its WHERE
    scope = _Scope(table.alias or None, len(sources) == 1, kinds)
    where = select.args["where"].this
    conjuncts = list(where.flatten()) if isinstance(where, exp.And) else [where]
    return [atom for atom in map(scope.atom, conjuncts) if atom]


class _Scope:
    """Maps DuckDB predicate nodes over one scan's columns to ClickHouse atom text."""

    def __init__(self, alias: str | None, alone: bool, kinds: dict[str, str]) -> None:
        self.alias = alias.lower() if alias else None
        self.alone = alone
        self.kinds = kinds

    def atom(self, node) -> str | None:
        """ClickHouse text true wherever ``node`` is (for the index), or None."""
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self.atom(node.this)
        if isinstance(node, exp.And):
            parts = [part for part in (self.atom(item) for item in node.flatten()) if part]
            return " AND ".join(f"({part})" for part in parts) if parts else None
        if isinstance(node, exp.Or):
            parts = [self.atom(item) for item in node.flatten()]
            if not all(parts):
                return None
            return " OR ".join(f"({part})" for part in parts)
        if isinstance(node, exp.EQ):
            return self._equality(node.this, node.expression) or self._equality(
                node.expression, node.this
            )
        if isinstance(node, exp.In):
            return self._membership(node)
        if isinstance(node, exp.Like) and not node.args.get("escape"):
            return self._like(node.this, node.expression)
        patterns = {
            exp.Contains: atoms.CONTAINS,
            exp.StartsWith: atoms.STARTS_WITH,
            exp.EndsWith: atoms.ENDS_WITH,
        }
        for kind, shape in patterns.items():
            if isinstance(node, kind):
                return self._substring(node.this, node.expression, shape)
        named = node.name.lower() if isinstance(node, exp.Anonymous) else ""
        if named in ("prefix", "suffix") and len(node.expressions) == 2:
            shape = atoms.STARTS_WITH if named == "prefix" else atoms.ENDS_WITH
            return self._substring(node.expressions[0], node.expressions[1], shape)
        return None

    def _column(self, node) -> tuple[str, str] | None:
        """``(name, kind)`` of a plain column of the scan, or None."""
        from sqlglot import exp

        if not isinstance(node, exp.Column) or node.args.get("db") or node.args.get("catalog"):
            return None
        qualifier = node.table.lower() if node.table else None
        if qualifier is None and not self.alone:
            return None
        if qualifier is not None and qualifier != self.alias:
            return None
        name = node.name
        matches = [column for column in self.kinds if column.lower() == name.lower()]
        if len(matches) != 1:
            return None  # unknown, or names DuckDB would find ambiguous
        return matches[0], self.kinds[matches[0]]

    def _literal(self, node, kind: str) -> str | None:
        """ClickHouse text of a literal DuckDB compares with a ``kind`` column as is."""
        from sqlglot import exp

        if not isinstance(node, exp.Literal):
            return None
        if node.is_string:
            return atoms.string(node.this) if kind == "string" else None
        text = node.this
        if kind in ("int", "uint") and text.isdigit() and int(text) < 1 << 63:
            return str(int(text))
        return None

    def _equality(self, column, literal) -> str | None:
        found = self._column(column)
        if found is None:
            return None
        value = self._literal(literal, found[1])
        return None if value is None else f"{atoms.name(found[0])} = {value}"

    def _membership(self, node) -> str | None:
        found = self._column(node.this)
        if found is None or node.args.get("query") or node.args.get("unnest"):
            return None
        values = [self._literal(item, found[1]) for item in node.expressions]
        if not values or not all(values):
            return None
        return f"{atoms.name(found[0])} IN ({', '.join(values)})"

    def _like(self, column, pattern) -> str | None:
        from sqlglot import exp

        found = self._column(column)
        if found is None or found[1] != "string":
            return None
        if not (isinstance(pattern, exp.Literal) and pattern.is_string) or "\\" in pattern.this:
            return None
        return f"{atoms.name(found[0])} LIKE {atoms.string(pattern.this)}"

    def _substring(self, column, needle, shape: str) -> str | None:
        from sqlglot import exp

        found = self._column(column)
        if found is None or found[1] != "string":
            return None
        if not (isinstance(needle, exp.Literal) and needle.is_string):
            return None
        return atoms.substring(found[0], needle.this, shape)


def run_cli_table(query: str, connection) -> tuple[pa.Table, SqlPlan]:
    """The rows of ``query`` as an Arrow table, with its plan (``bloomskip sql``)."""
    relation, plan = sql_with_plan(query, connection=connection)
    return relation.to_arrow_table(), plan
