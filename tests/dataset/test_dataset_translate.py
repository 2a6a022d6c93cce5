"""ClickHouse -> DuckDB predicate translation, checked against chdb on the same Parquet file.

ClickHouse is reached through the run's shared chdb session (``chdb_session``): the stateless
``chdb.query`` cannot run while that session is open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip.dataset.sql.translate import (
    UnsupportedPredicateError,
    clickhouse_to_duckdb,
    column_kinds,
    parse_where,
    referenced_columns,
)

if TYPE_CHECKING:
    from chdb.session import Session

STRINGS = [
    "alpha beta",
    "alpha-beta_gamma",
    "alphabet",
    "xalpha",
    "ALPHA",
    "GET /api/v1/users?id=42 HTTP/1.1",
    "https://example.com/a%20b",
    "100% done_now",
    "a_b a%b a\\b",
    "Привет мир",
    "приветмир alpha",
    "snow☃man ☃",
    "café alpha",
    "cafébar",
    "tab\talpha\nnewline",
    "",
    " ",
    "¥",
    "error 500: timeout",
    "Error500",
    None,
]
TAGS = [
    ["alpha", "beta"],
    ["gamma"],
    [],
    ["alpha", None],
    None,
    ["Привет", "☃"],
] * 4


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("translate") / "sample.parquet"
    rows = len(STRINGS)
    table = pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "s": pa.array(STRINGS, pa.string()),
            "tags": pa.array(TAGS[:rows], pa.list_(pa.string())),
            "n": pa.array([i if i % 5 else None for i in range(rows)], pa.int64()),
        }
    )
    pq.write_table(table, path)
    return str(path)


PREDICATES = [
    "hasToken(s, 'alpha')",
    "hasToken(s, 'beta')",
    "hasToken(s, 'gamma')",
    "hasToken(s, 'ALPHA')",
    "hasToken(s, 'Привет')",
    "hasToken(s, 'мир')",
    "hasToken(s, 'snow')",
    "hasToken(s, '☃')",
    "hasToken(s, 'café')",
    "hasToken(s, 'caf')",
    "hasToken(s, 'v1')",
    "hasToken(s, '500')",
    "hasToken(s, 'newline')",
    "hasToken(s, '')",
    "startsWith(s, 'alpha')",
    "startsWith(s, '')",
    "startsWith(s, 'Прив')",
    "endsWith(s, 'alpha')",
    "endsWith(s, '☃')",
    "multiSearchAny(s, ['pha', 'мир'])",
    "multiSearchAny(s, [''])",
    "multiSearchAny(s, ['%', '\\\\'])",
    "s LIKE '%alpha%'",
    "s LIKE 'alpha%'",
    "s LIKE '_'",
    "s LIKE '___'",
    "s LIKE '%\\\\%%'",
    "s LIKE '%\\\\_%'",
    "s LIKE '%a\\\\\\\\b'",
    "s LIKE 'Привет%'",
    "s LIKE '%☃'",
    "s NOT LIKE '%alpha%'",
    "like(s, '%beta%')",
    "s = 'alphabet'",
    "s != 'alphabet'",
    "equals(s, '¥')",
    "notEquals(s, '')",
    "s IN ('alpha beta', 'ALPHA', 'nope')",
    "s NOT IN ('alpha beta', 'ALPHA')",
    "has(tags, 'alpha')",
    "has(tags, 'Привет')",
    "hasAny(tags, ['gamma', '☃'])",
    "hasAll(tags, ['alpha', 'beta'])",
    "hasAll(tags, [])",
    "hasAny(tags, [])",
    "n = 3 OR n IS NULL",
    "isNull(n)",
    "isNotNull(n) AND n BETWEEN 2 AND 11",
    "NOT hasToken(s, 'alpha') AND n > 3",
    "(hasToken(s, 'alpha') OR startsWith(s, 'GET')) AND NOT (n < 2)",
    "not(equals(n, 4))",
    "n >= 10 AND n <= 14 AND n <> 12",
    "n IN (1, 2, 3) OR s IN ('¥')",
]


@pytest.mark.parametrize("predicate", PREDICATES)
def test_translation_matches_clickhouse(sample: str, predicate: str, chdb_session: Session) -> None:
    expected = chdb_session.query(
        f"SELECT id FROM file('{sample}', Parquet) WHERE {predicate} ORDER BY id", "CSV"
    ).bytes()
    expected_ids = [int(v) for v in expected.decode().split()]
    translated = clickhouse_to_duckdb(predicate)
    rows = duckdb.sql(
        f"SELECT id FROM read_parquet('{sample}') WHERE {translated} ORDER BY id"
    ).fetchall()
    assert [row[0] for row in rows] == expected_ids, translated


def test_has_token_rejects_separators_like_clickhouse(chdb_session: Session) -> None:
    with pytest.raises(RuntimeError, match="separator"):
        chdb_session.query("SELECT hasToken('a b', 'a b')", "CSV")
    with pytest.raises(UnsupportedPredicateError, match="separator"):
        clickhouse_to_duckdb("hasToken(s, 'a b')")


@pytest.mark.parametrize(
    "predicate",
    ["hasToken(s, t)", "s LIKE s", "match(s, s)", "lowerUTF8(s) = 'x'", "CAST(n AS String) = '1'"],
)
def test_constructs_without_exact_mapping_are_refused(predicate: str) -> None:
    with pytest.raises(UnsupportedPredicateError):
        clickhouse_to_duckdb(predicate)


@pytest.mark.parametrize("predicate", ["length(s) = 3", "empty(s)"])
def test_type_dependent_functions_need_the_column_types(predicate: str) -> None:
    with pytest.raises(UnsupportedPredicateError, match="must be a String or Array"):
        clickhouse_to_duckdb(predicate)
    kinds = column_kinds(pa.schema([("s", pa.string())]))
    assert "STRLEN" in clickhouse_to_duckdb(predicate, kinds)


KINDS = column_kinds(
    pa.schema(
        [
            ("s", pa.string()),
            ("n", pa.int64()),
            ("f", pa.float32()),
            ("tags", pa.list_(pa.string())),
        ]
    )
)


@pytest.mark.parametrize(
    ("pattern", "duckdb_pattern"),
    [
        # ClickHouse: \%, \_ and \\ escape; a backslash before anything else is a backslash.
        ("%\\\\Users\\\\bob%", "%\\\\Users\\\\bob%"),
        ("%\\Users%", "%\\\\Users%"),
        ("%back\\slash%", "%back\\\\slash%"),
        ("a\\%b", "a\\%b"),
        ("a\\_b", "a\\_b"),
        ("x\\\\\\\\", "x\\\\"),
    ],
)
def test_like_escapes_are_read_as_clickhouse_reads_them(pattern: str, duckdb_pattern: str) -> None:
    assert clickhouse_to_duckdb(f"s LIKE '{pattern}'", KINDS) == (
        f"\"s\" LIKE '{duckdb_pattern}' ESCAPE '\\'"
    )


@pytest.mark.parametrize("pattern", ["%ab%", "ab%", "%ab", "a_b", "%a%b_%", "é_%", "", "%"])
def test_a_like_pattern_without_a_backslash_is_given_without_escape(pattern: str) -> None:
    # DuckDB rewrites a plain LIKE into contains / prefix / suffix pushed into its Parquet scan;
    # LIKE ... ESCAPE runs like_escape on every row (1.5-2.2x the scan, issue 16). Without a
    # backslash both mean the same: checked on strings holding the wildcards themselves.
    import duckdb

    sql = clickhouse_to_duckdb(f"s LIKE '{pattern}'", KINDS)
    assert sql == f"\"s\" LIKE '{pattern}'"
    strings = ["ab", "xaby", "a_b", "a%b", "axb", "é", "éx", "", "%", "_", "aab", "ba"]
    strings_table = pa.table({"s": strings})  # noqa: F841 - read by DuckDB by name
    escaped = f"\"s\" LIKE '{pattern}' ESCAPE '\\'"
    found = duckdb.sql(f"SELECT s FROM strings_table WHERE {sql} ORDER BY s").fetchall()
    assert found == duckdb.sql(f"SELECT s FROM strings_table WHERE {escaped} ORDER BY s").fetchall()


def test_like_pattern_ending_in_a_backslash_is_refused_as_clickhouse_does(
    chdb_session: Session,
) -> None:
    with pytest.raises(RuntimeError, match="Invalid escape sequence at the end of LIKE pattern"):
        chdb_session.query("SELECT 'x' LIKE 'x\\\\'", "CSV")
    with pytest.raises(UnsupportedPredicateError, match="Invalid escape sequence at the end"):
        clickhouse_to_duckdb("s LIKE 'x\\\\'", KINDS)


@pytest.mark.parametrize(
    ("predicate", "message"),
    [
        ("S = 'x'", "Unknown expression or function identifier `S`. Maybe you meant: \\['s'\\]"),
        ("s = 42", "There is no supertype for types String, UInt8"),
        ("-1 = s", "There is no supertype for types Int8, String"),
        (
            "multiSearchAny(s, [" + ", ".join(["'a'"] * 256) + "])",
            "passed 256, should be at most 255",
        ),
        ("system('ls')", "not an expression"),
        ("in(n, (1, 2))", "write x IN"),
        ("s", "Invalid type for filter"),
        ("n = 'abc'", "Cannot convert string 'abc' to type Int64"),
    ],
)
def test_what_clickhouse_refuses_is_refused_in_its_words(predicate: str, message: str) -> None:
    with pytest.raises(UnsupportedPredicateError, match=message):
        clickhouse_to_duckdb(predicate, KINDS)


def test_nan_and_inf_are_numbers_not_columns() -> None:
    assert referenced_columns("f = nan OR f > -inf OR f = NaN OR f < Inf") == ["f"]
    assert "CAST('nan' AS DOUBLE)" in clickhouse_to_duckdb("f = nan", KINDS)


def test_command_text_prints_no_sqlglot_warning(capfd) -> None:
    with pytest.raises(UnsupportedPredicateError):
        clickhouse_to_duckdb("system('ls')", KINDS)
    captured = capfd.readouterr()
    assert "Falling back" not in captured.err + captured.out


def test_parse_error_is_a_user_error() -> None:
    with pytest.raises(UnsupportedPredicateError, match="cannot parse"):
        clickhouse_to_duckdb("s = = 1")


def test_referenced_columns_in_order() -> None:
    assert referenced_columns("n = 1 OR hasToken(s, 'x') AND has(tags, 'y') OR n = 2") == [
        "n",
        "s",
        "tags",
    ]


@pytest.mark.parametrize(
    ("where", "expected", "unexpected"),
    [
        ("user_id = ", "the expression is incomplete", "<class"),
        ("hasToken(msg, ", "cannot parse WHERE", "<class"),
        ("user_id IN (1,", "cannot parse WHERE", "function form"),
        ("in(user_id, (1, 2))", "instead of the function form", "<class"),
        ("a = 1 AND in(user_id, (1, 2))", "instead of the function form", "<class"),
    ],
)
def test_parse_errors_speak_sql_not_sqlglot(where: str, expected: str, unexpected: str) -> None:
    with pytest.raises(UnsupportedPredicateError) as caught:
        parse_where(where)
    message = str(caught.value)
    assert expected in message and unexpected not in message and "\n" not in message
