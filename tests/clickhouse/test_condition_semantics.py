"""ClickHouse's own reading of a WHERE, checked against chdb: LIKE escapes, typing errors, limits,
engine disagreements, and predicates long or deep enough to break a recursive compiler."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest
from clickhouse_harness import explain_granules
from sqlglot import exp

from bloomskip.clickhouse.condition import (
    ConditionError,
    IndexCondition,
    _BloomRpnBuilder,
    check_identifiers,
    compile_condition,
    index_never_used_reason,
)
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.clickhouse.part import Part as DiskPart
from bloomskip.clickhouse.part_cli import explain_part
from bloomskip.clickhouse.types import parse_clickhouse_type
from bloomskip.errors import BloomskipError


def _count(part, where: str, use_index: int) -> str:
    return part.harness.query(
        f"SELECT count() FROM {part.qualified_table} WHERE {where} "
        f"SETTINGS use_skip_indexes = {use_index}, use_query_condition_cache = 0"
    ).strip()


def _built(part, name: str) -> SkipIndex:
    return SkipIndex.build(part.indexes[name], part.data, part.granule_rows, part.columns)


@pytest.fixture(scope="module")
def path_part(clickhouse):
    """Windows paths and backslashes, two granules, an ngram and a token index."""
    return clickhouse.create_part(
        {"n": "UInt32", "path": "String"},
        [
            "INDEX ng path TYPE ngrambf_v1(3, 256, 2, 0) GRANULARITY 1",
            "INDEX tk path TYPE tokenbf_v1(256, 2, 0) GRANULARITY 1",
        ],
        "SELECT number, if(number = 5, 'C:\\\\Users\\\\bob\\\\file.txt', "
        "if(number % 2 = 0, 'back\\\\slash', 'other row')) FROM numbers(16)",
        settings={"index_granularity": 8},
    )


def _sql(like_pattern: str) -> str:
    """A LIKE pattern as a SQL string literal (each backslash doubled)."""
    return "'" + like_pattern.replace("\\", "\\\\") + "'"


def _explain(part, where: str, index: str) -> tuple[int, int] | None:
    others = ",".join(name for name in part.indexes if name != index)
    text = part.harness.query(
        f"EXPLAIN indexes = 1 SELECT * FROM {part.qualified_table} WHERE {where} SETTINGS "
        f"use_query_condition_cache = 0, ignore_data_skipping_indices = '{others}'",
        "TabSeparatedRaw",
    )
    return explain_granules(text, index)


# LIKE patterns (before SQL escaping): \U and \b are a backslash and a letter each.
_LITERAL_BACKSLASH = [
    ("LIKE", r"%\Users\bob%"),
    ("LIKE", r"%back\slash%"),
    ("NOT LIKE", r"%\Users%"),
    ("LIKE", r"C:\Users\bob\file.txt"),
]


_LITERAL_BACKSLASH_WHERE = [f"path {op} {_sql(pattern)}" for op, pattern in _LITERAL_BACKSLASH]


@pytest.mark.parametrize("where", _LITERAL_BACKSLASH_WHERE)
def test_like_with_a_literal_backslash_keeps_what_clickhouse_keeps(path_part, where) -> None:
    """ClickHouse reads ``\\U`` in a LIKE pattern as a backslash and a U, matches the rows, and
    uses no text index; bloomskip used to drop the backslash and skip the matching granules
    (0/2 where ClickHouse reads 2/2)."""
    rows = _count(path_part, where, 0)
    assert rows == _count(path_part, where, 1) and int(rows) > 0
    for name in ("ng", "tk"):
        assert _explain(path_part, where, name) is None
        assert len(_built(path_part, name).select(where)) == 2, (name, where)


@pytest.mark.parametrize(
    ("pattern", "rows"),
    [
        (r"%bob\\file%", 1),
        (r"%\\\\Users%", 0),
        (r"%C:\\Users\\%", 1),
        (r"%back\\%", 8),
        # A perfect prefix or suffix is startsWith / endsWith of its literal, backslashes kept.
        (r"C:\Users%", 1),
        (r"%bob\file.txt", 1),
        (r"%\slash", 8),
    ],
)
def test_like_escapes_that_keep_the_index_in_use(path_part, pattern, rows) -> None:
    """``\\\\`` is an escaped backslash: the n-grams around it are probed, as in ClickHouse."""
    where = f"path LIKE {_sql(pattern)}"
    assert _count(path_part, where, 0) == str(rows)
    assert _count(path_part, where, 1) == str(rows)
    for name in ("ng", "tk"):
        kept, _ = _explain(path_part, where, name)
        assert len(_built(path_part, name).select(where)) == kept, (name, where)


@pytest.mark.parametrize("count", [10, 3000])
def test_a_regexp_of_thousands_of_alternatives_is_analysed(path_part, count) -> None:
    """ClickHouse still uses 3,000 alternatives; the analysis recurses once per alternative."""
    where = "match(path, '" + "|".join(f"file{i}x" for i in range(count)) + "|bob')"
    for name in ("ng", "tk"):
        explained = _explain(path_part, where, name)
        selected = _built(path_part, name).select(where)
        assert len(selected) == (2 if explained is None else explained[0]), name
    assert _explain(path_part, where, "ng") == (1, 2)


@pytest.fixture(scope="module")
def typed_part(clickhouse):
    return clickhouse.create_part(
        {
            "n": "UInt32",
            "s": "String",
            "ip6": "IPv6",
            "fs": "FixedString(2)",
            "ls": "LowCardinality(String)",
            "ns": "Nullable(String)",
        },
        [
            "INDEX bs s TYPE bloom_filter GRANULARITY 1",
            "INDEX ts s TYPE tokenbf_v1(256, 2, 0) GRANULARITY 1",
            "INDEX tip ip6 TYPE tokenbf_v1(256, 2, 0) GRANULARITY 1",
            "INDEX bfs fs TYPE bloom_filter GRANULARITY 1",
            "INDEX bls ls TYPE bloom_filter GRANULARITY 1",
            "INDEX tns ns TYPE bloom_filter GRANULARITY 1",
        ],
        "SELECT number, toString(number), "
        "toIPv6(concat('2001:db8::', lower(hex(toUInt16(number))))), "
        "toFixedString(toString(number % 10), 2), toString(number % 7), toString(number) "
        "FROM numbers(64)",
        settings={"index_granularity": 4},
    )


@pytest.mark.parametrize(
    ("where", "words"),
    [
        ("s = 42", "There is no supertype for types String, UInt8"),
        ("42 = s", "There is no supertype for types UInt8, String"),
        ("s = 1.5", "There is no supertype for types String, Float64"),
        ("s != -300", "There is no supertype for types String, Int16"),
        ("s = nan", "There is no supertype for types String, Float64"),
        ("fs < 5", "There is no supertype for types FixedString(2), UInt8"),
        ("ls = 5", "There is no supertype for types String, UInt8"),
        ("ns = 5", "There is no supertype for types String, UInt8"),
    ],
)
def test_string_compared_with_a_number_is_clickhouses_error(typed_part, where, words) -> None:
    with pytest.raises(Exception, match="NO_COMMON_TYPE"):
        _count(typed_part, where, 0)
    column = where.split()[0] if where[0].isalpha() else where.split()[-1]
    names = [name for name, d in typed_part.indexes.items() if d.expressions == (column,)]
    assert names
    for name in names:
        with pytest.raises(ConditionError, match=re.escape(words)) as caught:
            compile_condition(where, typed_part.indexes[name], typed_part.columns)
        assert "\n" not in str(caught.value) and "sqlglot" not in str(caught.value)


def test_multi_search_needle_limit_is_clickhouses(typed_part) -> None:
    needles = ", ".join(f"'n{i}'" for i in range(256))
    where = f"multiSearchAny(s, [{needles}])"
    with pytest.raises(Exception, match="should be at most 255"):
        _count(typed_part, where, 0)
    with pytest.raises(ConditionError, match="multiSearchAny doesn't match: passed 256"):
        compile_condition(where, typed_part.indexes["ts"], typed_part.columns)
    allowed = "multiSearchAny(s, [" + ", ".join(f"'{i} x'" for i in range(255)) + "])"
    kept, _ = typed_part.explain_granules(allowed, "ts")
    assert len(_built(typed_part, "ts").select(allowed)) == kept


def test_identifiers_are_case_sensitive(typed_part) -> None:
    with pytest.raises(Exception, match="UNKNOWN_IDENTIFIER"):
        _count(typed_part, "S = '1'", 0)
    with pytest.raises(ConditionError, match="identifier `S`. Maybe you meant: \\['s'\\]"):
        check_identifiers("n = 1 OR S = '1'", typed_part.columns)
    lambdas_virtual_and_keywords = "arrayExists(x -> x = n, [1]) AND _part != '' OR n = inf"
    check_identifiers(lambdas_virtual_and_keywords, ["s", "n"])
    part = DiskPart(typed_part.path, typed_part.metadata_sql)
    with pytest.raises(ConditionError, match="`N`"):
        explain_part(part, "N = 1")
    assert explain_part(part, "n = 1")["indexes"]


def test_text_index_over_ipv6_is_never_used(typed_part) -> None:
    """Engine disagreement, on purpose: a tokenbf_v1 index over IPv6 tokenizes the 16 bytes of
    each row and the text of the constant, and ClickHouse loses the row."""
    where = "ip6 = '2001:db8::5'"
    assert (_count(typed_part, where, 0), _count(typed_part, where, 1)) == ("1", "0")
    assert typed_part.explain_granules(where, "tip") == (0, 16)
    condition = compile_condition(where, typed_part.indexes["tip"], typed_part.columns)
    assert not condition.useful
    assert len(_built(typed_part, "tip").select(where)) == 16
    assert "never used" in index_never_used_reason("tokenbf_v1", "IPv6")
    assert "never used" in index_never_used_reason("ngrambf_v1", "Array(IPv6)")


@pytest.mark.parametrize(
    ("index_type", "ch_type", "reason"),
    [
        ("bloom_filter", "DateTime64(3)", None),
        ("bloom_filter", "DateTime('Asia/Shanghai')", None),
        ("bloom_filter", "IPv4", None),
        ("bloom_filter", "IPv6", None),
        ("bloom_filter", "Int128", None),
        ("bloom_filter", "UInt256", None),
        ("bloom_filter", "Enum8('a' = 1)", None),
        ("bloom_filter", "Array(LowCardinality(String))", None),
        ("bloom_filter", "Date32", "refuses"),
        ("bloom_filter", "Decimal(10, 2)", "refuses"),
        ("tokenbf_v1", "LowCardinality(String)", None),
        ("tokenbf_v1", "UInt32", "refuses"),
        ("ngrambf_v1", "IPv6", "never used"),
    ],
)
def test_index_never_used_reason(index_type, ch_type, reason) -> None:
    found = index_never_used_reason(index_type, ch_type)
    assert (found is None) == (reason is None)
    if reason is not None:
        assert reason in found and "\n" not in found
    with pytest.raises(ValueError, match="unknown index type"):
        index_never_used_reason("minmax", ch_type)


# ------------------------------------------------------------------------------------------
# Long and deep predicates


def _bloom_index(values: int = 50_000, granule: int = 1000) -> SkipIndex:
    definition = parse_index_definition("INDEX bx x TYPE bloom_filter(0.01) GRANULARITY 1")
    table = pa.table({"x": pa.array(np.arange(values, dtype=np.uint32))})
    rows = np.full(values // granule, granule)
    return SkipIndex.build(definition, table, rows, {"x": "UInt32"})


def _compile_tree(tree: exp.Expression, index: SkipIndex) -> IndexCondition:
    """Compile a tree built in memory, so that the size of the predicate, not sqlglot's parser,
    is what is tested."""
    builder = _BloomRpnBuilder("", ["x"], [parse_clickhouse_type("UInt32")])
    return IndexCondition("<tree>", index.definition, builder.build(tree))


def _or_chain(terms: list[exp.Expression]) -> exp.Expression:
    node = terms[0]
    for term in terms[1:]:
        node = exp.Or(this=node, expression=term)  # left-deep, as sqlglot parses a chain
    return node


_X = exp.column("x")


def _equals(value: int) -> exp.Expression:
    return exp.EQ(this=_X, expression=exp.Literal.number(value))


def test_a_100000_term_or_chain_compiles_and_equals_the_in_list() -> None:
    index = _bloom_index()
    values = list(range(7, 700_007, 7))  # mostly beyond the data
    condition = _compile_tree(_or_chain([_equals(v) for v in values]), index)
    assert condition.atom_count == 1  # merged into one probe of every value
    in_list = exp.In(this=_X, expressions=[exp.Literal.number(v) for v in values])
    expected = _compile_tree(in_list, index).may_match(index)
    assert np.array_equal(condition.may_match(index), expected)


def test_deep_not_and_parenthesis_nesting_compiles() -> None:
    index = _bloom_index()
    equals_five = index.select("x = 5")
    assert equals_five[0] == 0 and len(equals_five) < 50
    node: exp.Expression = _equals(5)
    for _ in range(3000):
        node = exp.Not(this=exp.Paren(this=node))
    even = _compile_tree(node, index).may_match(index)  # an even number of NOTs: x = 5
    assert np.flatnonzero(even).tolist() == equals_five.tolist()
    assert _compile_tree(exp.Not(this=node), index).may_match(index).all()  # x != 5
    nested: exp.Expression = _or_chain([_equals(5), _equals(40_000)])
    for _ in range(5000):
        nested = exp.Paren(this=exp.And(this=nested, expression=_equals(5)))
    deep = _compile_tree(nested, index).may_match(index)
    assert np.flatnonzero(deep).tolist() == equals_five.tolist()


def test_long_and_deep_predicate_text() -> None:
    index = _bloom_index()
    chain = " OR ".join(f"x = {v}" for v in range(983))  # the 14 KB chain of the issue
    in_list = "x IN (" + ", ".join(str(v) for v in range(983)) + ")"
    assert index.select(chain).tolist() == index.select(in_list).tolist()
    with pytest.raises(BloomskipError):
        index.select("NOT (" * 3000 + "x = 1" + ")" * 3000)


def test_parquet_timestamps_use_the_index_as_clickhouse_does(clickhouse, tmp_path) -> None:
    """A Parquet timestamp (with or without a zone) indexed with its default ClickHouse type,
    ``DateTime64(p, 'UTC')`` as ClickHouse reads the file: bloomskip's build from the file and
    ClickHouse's part from the same file keep the same granules for the same comparisons."""
    import pyarrow.parquet as pq

    from bloomskip.clickhouse.types import clickhouse_type_for

    start = np.datetime64("2024-01-01T00:00:00", "us").astype(np.int64)
    micros = start + np.arange(784, dtype=np.int64) * 1_000_001
    table = pa.table(
        {
            "ts": pa.array(micros, pa.timestamp("us", "UTC")),
            "naive": pa.array(micros // 1000, pa.timestamp("ms")),
        }
    )
    path = tmp_path / "events.parquet"
    pq.write_table(table, path)
    types = {field.name: clickhouse_type_for(field.type) for field in table.schema}
    assert types == {"ts": "DateTime64(6, 'UTC')", "naive": "DateTime64(3, 'UTC')"}
    part = clickhouse.create_part(
        types,
        [f"INDEX i_{name} {name} TYPE bloom_filter GRANULARITY 1" for name in types],
        f"SELECT ts, naive FROM file('{path}', Parquet)",
        settings={"index_granularity": 8},
    )
    rows = part.granule_rows
    for name, where in [
        ("ts", "ts = '2024-01-01 00:00:07.000007'"),
        ("ts", "ts IN ('2024-01-01 00:01:00.000060', '2024-01-01 00:10:00')"),
        ("ts", "ts = toDateTime64('2024-01-01 08:00:07.000007', 6, 'Asia/Shanghai')"),
        ("naive", "naive = '2024-01-01 00:00:07'"),
        ("naive", "naive = '2024-01-01 00:02:00.120'"),
    ]:
        kept, total = part.explain_granules(where, f"i_{name}")
        assert kept < total, where
        index = SkipIndex.build(part.indexes[f"i_{name}"], pq.read_table(path), rows, types)
        assert len(index.select(where)) == kept, where
