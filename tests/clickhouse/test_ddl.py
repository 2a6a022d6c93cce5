"""Index definitions and CREATE TABLE parsing, checked against what chdb accepts and stores."""

from __future__ import annotations

import pyarrow as pa
import pytest

from bloomskip.clickhouse.ddl import (
    IndexDefinition,
    IndexDefinitionError,
    parse_create_table,
    parse_index_definition,
)

# Columns every acceptance probe table has; the index clauses below refer to them.
PROBE_COLUMNS = (
    "a UInt64, s String, fs FixedString(3), b Bool, m Map(String, UInt8), "
    "arrn Array(Nullable(UInt8)), arr2 Array(Array(UInt8)), dec Decimal(10, 2), d32 Date32, "
    "ns Nullable(String), lcn LowCardinality(Nullable(String)), arrs Array(String), "
    "lcs LowCardinality(String), ip6 IPv6, u Nullable(UUID)"
)
PROBE_TYPES = {
    "a": "UInt64",
    "s": "String",
    "fs": "FixedString(3)",
    "b": "Bool",
    "m": "Map(String, UInt8)",
    "arrn": "Array(Nullable(UInt8))",
    "arr2": "Array(Array(UInt8))",
    "dec": "Decimal(10, 2)",
    "d32": "Date32",
    "ns": "Nullable(String)",
    "lcn": "LowCardinality(Nullable(String))",
    "arrs": "Array(String)",
    "lcs": "LowCardinality(String)",
    "ip6": "IPv6",
    "u": "Nullable(UUID)",
}

# Index clauses: some ClickHouse accepts, some it rejects for their arguments or column types.
PROBES = [
    "a TYPE bloom_filter",
    "a TYPE bloom_filter()",
    "a TYPE bloom_filter(0.)",
    "a TYPE bloom_filter(1.)",
    "a TYPE bloom_filter(0.092)",
    "a TYPE bloom_filter(1e-2)",
    "a TYPE bloom_filter(nan)",
    "a TYPE bloom_filter(1)",
    "a TYPE bloom_filter(0)",
    "a TYPE bloom_filter(1.5)",
    "a TYPE bloom_filter(-0.1)",
    "a TYPE bloom_filter(inf)",
    "a TYPE bloom_filter(0x10)",
    "a TYPE bloom_filter('x')",
    "a TYPE bloom_filter(0.1, 2)",
    "a TYPE bloom_filter GRANULARITY 0",
    "a TYPE bloom_filter GRANULARITY 4",
    "(a, s) TYPE bloom_filter",
    "tuple(a, s) TYPE bloom_filter",
    "(a) TYPE bloom_filter",
    "(a, lower(s), upper(fs)) TYPE bloom_filter(0.01) GRANULARITY 3",
    "mapKeys(m) TYPE bloom_filter",
    "mapValues(m) TYPE bloom_filter",
    "m TYPE bloom_filter",
    "arrn TYPE bloom_filter",
    "arr2 TYPE bloom_filter",
    "dec TYPE bloom_filter",
    "d32 TYPE bloom_filter",
    "b TYPE bloom_filter",
    "u TYPE bloom_filter",
    "lcn TYPE bloom_filter",
    "ns TYPE bloom_filter",
    "s TYPE tokenbf_v1(100, 3, 0)",
    "s TYPE tokenbf_v1(100, 300, 0)",
    "s TYPE tokenbf_v1(100, 3, 18446744073709551615)",
    "s TYPE tokenbf_v1(100, 3, 18446744073709551616)",
    "s TYPE tokenbf_v1(100, 3, 0x10)",
    "s TYPE tokenbf_v1(0, 3, 0)",
    "s TYPE tokenbf_v1(100, 0, 0)",
    "s TYPE tokenbf_v1(1073741824, 1, 0)",
    "s TYPE tokenbf_v1(1073741825, 1, 0)",
    "s TYPE tokenbf_v1(100, 3)",
    "s TYPE tokenbf_v1(100, 3, -1)",
    "s TYPE tokenbf_v1(100.0, 3, 1)",
    "s TYPE ngrambf_v1(3, 100, 2, 0)",
    "s TYPE ngrambf_v1(0, 100, 2, 0)",
    "s TYPE ngrambf_v1(300, 100, 2, 0)",
    "s TYPE ngrambf_v1(3, 100, 2)",
    "a TYPE tokenbf_v1(100, 3, 0)",
    "fs TYPE ngrambf_v1(2, 64, 2, 0)",
    "ns TYPE ngrambf_v1(3, 100, 2, 0)",
    "lcn TYPE tokenbf_v1(100, 2, 0)",
    "lcs TYPE tokenbf_v1(100, 2, 0)",
    "arrs TYPE tokenbf_v1(100, 2, 0)",
    "ip6 TYPE tokenbf_v1(100, 2, 0)",
    "lower(s) TYPE tokenbf_v1(100, 2, 0)",
    "mapValues(m) TYPE tokenbf_v1(100, 2, 0)",
    "mapKeys(m) TYPE ngrambf_v1(2, 100, 2, 7)",
]


def _chdb_accepts(clickhouse, clause: str, number: int) -> tuple[bool, str]:
    table = f"{clickhouse.database}.probe_{number}"
    try:
        clickhouse.query(
            f"CREATE TABLE {table} ({PROBE_COLUMNS}, INDEX ix {clause}) "
            "ENGINE = MergeTree ORDER BY tuple()"
        )
    except Exception as exc:  # chdb raises its own error types
        return False, str(exc).splitlines()[0]
    clickhouse.query(f"DROP TABLE {table} SYNC")
    return True, ""


def _bloomskip_accepts(clause: str) -> tuple[bool, str]:
    try:
        definition = parse_index_definition(f"INDEX ix {clause}")
        definition.index_column_types(PROBE_TYPES)
    except IndexDefinitionError as exc:
        return False, str(exc)
    return True, ""


@pytest.mark.parametrize("number", range(len(PROBES)), ids=PROBES)
def test_accepts_exactly_what_chdb_accepts(clickhouse, number: int) -> None:
    clause = PROBES[number]
    expected, chdb_message = _chdb_accepts(clickhouse, clause, number)
    accepted, message = _bloomskip_accepts(clause)
    assert accepted == expected, f"chdb: {chdb_message!r}; bloomskip: {message!r}"


@pytest.mark.parametrize(
    ("clause", "words"),
    [
        ("a TYPE bloom_filter(1)", ["argument 1", "false positive rate"]),
        ("a TYPE bloom_filter(0.1, 0.2)", ["at most one argument"]),
        ("s TYPE tokenbf_v1(0, 3, 0)", ["argument 1", "size_bytes", "zero"]),
        ("s TYPE tokenbf_v1(8, 0, 0)", ["argument 2", "hash_functions", "zero"]),
        ("s TYPE tokenbf_v1(8, 1, -1)", ["argument 3", "seed", "unsigned"]),
        ("s TYPE ngrambf_v1(0, 8, 1, 0)", ["argument 1", "ngram size", "at least 1"]),
        ("s TYPE ngrambf_v1(2, 1073741825, 1, 0)", ["argument 2", "size_bytes", "1073741824"]),
        ("s TYPE ngrambf_v1(2, 8, 1)", ["exactly 4 arguments"]),
        ("s TYPE bloom_filter GRANULARITY 0", ["GRANULARITY", "positive"]),
        ("s TYPE minmax", ["'minmax'", "not a Bloom-filter index"]),
        ("s TYPE bloom_filter(", ["cannot parse"]),
        ("garbage", ["no TYPE"]),
        ("INDEX i", ["no expression"]),
    ],
)
def test_errors_name_the_argument(clause: str, words: list[str]) -> None:
    with pytest.raises(IndexDefinitionError) as caught:
        parse_index_definition(clause)
    assert isinstance(caught.value, ValueError)
    for word in words:
        assert word in str(caught.value)


def test_type_errors_name_the_column() -> None:
    definition = parse_index_definition("INDEX i (a, m) TYPE bloom_filter")
    with pytest.raises(IndexDefinitionError, match=r"column 'm' of type Map\(String, UInt8\)"):
        definition.index_column_types(PROBE_TYPES)
    text = parse_index_definition("INDEX t ns TYPE tokenbf_v1(8, 1, 0)")
    with pytest.raises(IndexDefinitionError, match="Nullable"):
        text.index_column_types(PROBE_TYPES)


def test_defaults_and_derived_parameters() -> None:
    d = parse_index_definition("INDEX i msg TYPE tokenbf_v1(8192, 3, 0) GRANULARITY 2")
    assert (d.name, d.expressions, d.type, d.granularity) == ("i", ("msg",), "tokenbf_v1", 2)
    assert (d.size_bytes, d.hash_functions, d.seed, d.ngram_size, d.tokenizer) == (
        8192, 3, 0, None, "token",
    )  # fmt: skip
    d = parse_index_definition("lower(msg) TYPE ngrambf_v1(4, 1021, 2, 4294967297)")
    assert (d.name, d.granularity, d.ngram_size, d.seed, d.tokenizer) == (
        "lower_msg", 1, 4, 4294967297, "ngram",
    )  # fmt: skip
    d = parse_index_definition("ADD INDEX v (a, `odd name`) TYPE bloom_filter(0.092);")
    assert d.expressions == ("a", "`odd name`")
    assert d.source_columns == ("a", "odd name")
    assert (d.bits_per_row, d.hash_functions, d.false_positive_rate) == (6, 2, 0.092)
    assert parse_index_definition("v TYPE bloom_filter").bits_per_row == 8


def test_create_matches_parse() -> None:
    made = IndexDefinition.create("ngrambf_v1", ["s", "lower(t)"], (3, 256, 2, 0), name="n")
    parsed = parse_index_definition("INDEX n (s, lower(t)) TYPE ngrambf_v1(3, 256, 2, 0)")
    assert made == parsed
    assert parse_index_definition(made.to_sql()) == made


def test_to_sql_round_trips_through_chdb(clickhouse) -> None:
    clauses = [
        parse_index_definition("INDEX i1 (a, lower(s)) TYPE bloom_filter(0.01) GRANULARITY 3"),
        parse_index_definition(
            "INDEX `i 2` mapKeys(m) TYPE ngrambf_v1(3, 100, 2, 9) GRANULARITY 2"
        ),
        parse_index_definition("INDEX i3 arrs TYPE tokenbf_v1(64, 1, 18446744073709551615)"),
        parse_index_definition("INDEX i4 a TYPE bloom_filter"),
    ]
    table = f"{clickhouse.database}.roundtrip"
    clickhouse.query(
        f"CREATE TABLE {table} ({PROBE_COLUMNS}, {', '.join(d.to_sql() for d in clauses)}) "
        "ENGINE = MergeTree ORDER BY tuple()"
    )
    columns, indexes = parse_create_table(clickhouse.metadata_sql("roundtrip"))
    assert indexes == clauses
    # Column types come back in ClickHouse's own spelling, as system.columns shows them.
    reported = clickhouse.arrow(
        f"SELECT name, type FROM system.columns WHERE database = '{clickhouse.database}' "
        "AND table = 'roundtrip' ORDER BY position"
    ).to_pylist()
    assert columns == {row["name"]: row["type"] for row in reported}


def test_create_table_types_match_system_columns(clickhouse) -> None:
    types = [
        "UInt8", "Int16", "UInt32", "Int64", "UInt128", "Int256", "Float32", "Float64", "Bool",
        "Date", "Date32", "DateTime", "DateTime('UTC')", "DateTime64(3)", "DateTime64(6, 'UTC')",
        "UUID", "IPv4", "IPv6", "String", "FixedString(7)", "Enum8('a' = 1, 'b' = -2)",
        "Enum16('x' = 1000)", "Nullable(Int32)", "LowCardinality(String)",
        "LowCardinality(Nullable(FixedString(2)))", "Array(LowCardinality(String))",
        "Array(Array(UInt8))", "Map(String, Array(UInt64))", "Decimal(10, 2)",
    ]  # fmt: skip
    columns = ", ".join(f"c{i} {t}" for i, t in enumerate(types))
    clickhouse.query(
        f"CREATE TABLE {clickhouse.database}.typed ({columns}, "
        "INDEX mm c0 TYPE minmax GRANULARITY 1, INDEX bf c1 TYPE bloom_filter) "
        "ENGINE = MergeTree ORDER BY tuple()"
    )
    sql = clickhouse.metadata_sql("typed")
    assert sql.startswith("ATTACH TABLE")
    parsed, indexes = parse_create_table(sql)
    reported = clickhouse.arrow(
        f"SELECT name, type FROM system.columns WHERE database = '{clickhouse.database}' "
        "AND table = 'typed' ORDER BY position"
    ).to_pylist()
    assert parsed == {row["name"]: row["type"] for row in reported}
    assert [d.name for d in indexes] == ["bf"]  # minmax is not a Bloom-filter index


def test_create_table_errors() -> None:
    with pytest.raises(IndexDefinitionError, match="CREATE/ATTACH TABLE"):
        parse_create_table("SELECT 1")
    with pytest.raises(IndexDefinitionError, match="argument 1"):
        parse_create_table("CREATE TABLE t (s String, INDEX i s TYPE tokenbf_v1(0, 1, 0))")


def test_expressions_evaluate_like_chdb(clickhouse) -> None:
    rows = clickhouse.arrow(
        "SELECT s, lower(s) AS lo, upper(s) AS up, fs, lower(fs) AS flo, m, mapKeys(m) AS mk, "
        "mapValues(m) AS mv FROM (SELECT concat('MiXeD ', toString(number), ' ÄÖü ÉTÉ') AS s, "
        "toFixedString(['Ab', 'cD', 'É'][number % 3 + 1], 3) AS fs, "
        "map(concat('K', toString(number)), number, 'z', 1) AS m FROM numbers(20))"
    )
    table = pa.table({"s": rows["s"], "fs": rows["fs"], "m": rows["m"]})

    def evaluate(text: str) -> pa.ChunkedArray:
        return parse_index_definition(f"{text} TYPE bloom_filter").index_columns[0].evaluate(table)

    assert evaluate("lower(s)").to_pylist() == rows["lo"].to_pylist()
    assert evaluate("upper(s)").to_pylist() == rows["up"].to_pylist()
    assert evaluate("lower(fs)").to_pylist() == rows["flo"].to_pylist()
    assert evaluate("mapKeys(m)").to_pylist() == rows["mk"].to_pylist()
    assert evaluate("mapValues(m)").to_pylist() == rows["mv"].to_pylist()
    sliced = table.slice(5, 7)
    keys = parse_index_definition("mapKeys(m) TYPE bloom_filter").index_columns[0].evaluate(sliced)
    assert keys.to_pylist() == rows["mk"].to_pylist()[5:12]


def test_unsupported_expression_is_named() -> None:
    definition = parse_index_definition("INDEX i a + 1 TYPE bloom_filter")
    assert definition.expressions == ("a + 1",)
    with pytest.raises(IndexDefinitionError, match=r"'a \+ 1' is not supported"):
        definition.index_columns[0].evaluate(pa.table({"a": [1]}))
    with pytest.raises(IndexDefinitionError, match="does not have"):
        parse_index_definition("b TYPE bloom_filter").index_columns[0].evaluate(
            pa.table({"a": [1]})
        )
    with pytest.raises(IndexDefinitionError, match="needs a Map column"):
        parse_index_definition("mapKeys(a) TYPE bloom_filter").index_column_types({"a": "UInt8"})
