"""Long ``IN`` lists of plain literals, read once and without sqlglot (issue 17, issue 16 target 4).

A long literal list is read by one regular expression into numpy / a tuple
(:class:`bloomskip._sql.LiteralList`), converted to the index column's type in one step, and
given to DuckDB as an Arrow table it joins. Each fast path is checked against what does not
take it: DuckDB and chdb over the raw files for the rows, and the element-wise conversion of
the same values (an OR of comparisons) for the granules an index keeps.

Before: a 100,000-value ``IN`` was parsed by sqlglot (about 1.5 s), copied and printed again for
DuckDB (1.4 s), its values converted and hashed one Python object at a time, and DuckDB then
parsed and planned 100,000 constants (2-4 s on 3M rows): 6.6 s from the command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip._sql import LITERAL_LIST_MIN, literal_list, parse_shared
from bloomskip.cli import main
from bloomskip.clickhouse.condition import compile_condition
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.dataset import Dataset
from bloomskip.dataset.sql.translate import (
    clickhouse_to_duckdb,
    clickhouse_to_duckdb_tables,
    column_kinds,
    integer_lookup,
)
from bloomskip.errors import UnsupportedPredicateError

ROWS = 60_000
WORDS = ["alpha", "beta, gamma", "délta", "x y", "", "ε"]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """Three files, 2,000-row row groups: ``user_id`` (with NULLs), ``small`` (UInt8),
    ``f`` (float), ``s`` (strings with commas, blanks and non-ASCII), indexed."""
    directory = tmp_path_factory.mktemp("long_in") / "data"
    directory.mkdir()
    rng = np.random.default_rng(5)
    ids = rng.integers(-(2**40), 2**40, ROWS)
    words = [f"{WORDS[i % len(WORDS)]}{i}" for i in range(ROWS)]
    for number in range(3):
        part = slice(number * ROWS // 3, (number + 1) * ROWS // 3)
        chunk = ids[part]
        table = pa.table(
            {
                "user_id": pa.array(chunk, mask=(chunk % 97 == 0)),
                "small": pa.array(np.abs(chunk) % 256, pa.uint8()),
                "f": pa.array(chunk % 1000, pa.float64()),
                "s": pa.array(words[part]),
            }
        )
        pq.write_table(table, directory / f"part-{number}.parquet", row_group_size=2_000)
    Dataset(directory).build_index(
        [
            "user_id TYPE bloom_filter(0.001)",
            "small TYPE bloom_filter(0.01)",
            "s TYPE bloom_filter(0.01)",
            "INDEX st s TYPE tokenbf_v1(4096, 3, 0)",
        ],
        progress=False,
    )
    return directory


@pytest.fixture(scope="module")
def ids(data: Path) -> np.ndarray:
    table = pq.ParquetFile(data / "part-1.parquet").read(columns=["user_id"])
    return table.column(0).drop_null().to_numpy()


def _duckdb_ids(data: Path, sql_where: str) -> list:
    files = ", ".join(f"'{path}'" for path in sorted(data.glob("*.parquet")))
    rows = duckdb.sql(f"SELECT user_id FROM read_parquet([{files}]) WHERE {sql_where}")
    return sorted(row[0] for row in rows.fetchall() if row[0] is not None)


def _chdb_ids(chdb_session, data: Path, where: str) -> list:
    # The query is longer than ClickHouse's default max_query_size (256 KiB), which applies to
    # the parse itself (a SETTINGS clause comes too late): raised for the call, then restored.
    chdb_session.query("SET max_query_size = 100000000", "CSV")
    try:
        result = chdb_session.query(
            f"SELECT user_id FROM file('{data}/*.parquet', Parquet) WHERE {where}", "ArrowTable"
        )
    finally:
        chdb_session.query("SET max_query_size = 262144", "CSV")
    return sorted(v for v in result.column(0).to_pylist() if v is not None)


def _in_list(values) -> str:
    return ", ".join(map(str, values))


def test_the_values_are_read_without_sqlglot() -> None:
    values = list(range(-3, 200))
    tree = parse_shared(f"x IN ({_in_list(values)}) AND y = 1")
    membership = tree.this
    literals = literal_list(membership.expressions[0])
    assert literals is not None and literals.kind == "int"
    assert literals.values.tolist() == values and literals.values.dtype == np.int64
    # Printed as written: a message or a canonical name shows the list itself.
    assert membership.sql("clickhouse") == f"x IN ({_in_list(values)})"
    strings = parse_shared("s IN (" + ", ".join(f"'a, {i}'" for i in range(70)) + ")")
    assert literal_list(strings.expressions[0]).values[:2] == ("a, 0", "a, 1")


@pytest.mark.parametrize(
    "where",
    [
        # Not a list sqlglot would parse as plain literals, or not a list at all.
        "s = 'x IN (" + _in_list(range(100)) + ")'",
        "x IN (" + _in_list(range(100)) + ") -- a comment",
        "x IN (" + _in_list(range(100)) + ", 0x10)",
        "x IN (" + _in_list(range(100)) + ", 1.5)",
        "x IN (" + _in_list(range(100)) + ", 007)",
        "x IN (-1, " + _in_list(range(100)) + ", 18446744073709551615)",
        "x IN (" + _in_list(range(100)) + ", 99999999999999999999999)",
        "x IN (" + ", ".join(f"'it''s {i}'" for i in range(100)) + ")",
        "x IN (" + ", ".join(f"'\\x41{i}'" for i in range(100)) + ")",
        "x IN (" + _in_list(range(LITERAL_LIST_MIN - 1)) + ")",
        "x IN (" + _in_list(range(100)) + ") OR __bloomskip_literal_list_0 = 1",
    ],
)
def test_what_sqlglot_must_read_is_left_to_it(where: str) -> None:
    tree = parse_shared(where)
    assert not any(literal_list(node) is not None for node in tree.walk())


def test_a_where_is_parsed_once_per_query(data: Path, ids: np.ndarray) -> None:
    dataset = Dataset(data)
    dataset.query("user_id = 1")  # the index expressions' own texts are parsed (once) here
    where = f"user_id IN ({_in_list(ids[:500].tolist())}) AND small != 7"
    before = parse_shared.cache_info()
    dataset.query(where)
    after = parse_shared.cache_info()
    # Checked, compiled for four indexes, located and translated: one parse, the rest hits.
    assert after.misses - before.misses == 1
    assert after.hits - before.hits >= 3


def _rng_values(ids: np.ndarray, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.integers(-(2**62), 2**62, count)
    values[:50] = rng.choice(ids, 50)
    return values


def test_a_100000_value_in_gives_the_rows_of_duckdb_and_clickhouse(
    data: Path, ids: np.ndarray, tmp_path: Path, chdb_session, capsys
) -> None:
    values = _in_list(_rng_values(ids, 100_000, 1).tolist())
    for where in (f"user_id IN ({values})", f"user_id NOT IN ({values})"):
        expected = _duckdb_ids(data, where)
        assert expected == _chdb_ids(chdb_session, data, where)
        assert 50 <= len(expected) < ROWS
        got = Dataset(data).query(where, ["user_id"]).column(0).to_pylist()
        assert sorted(v for v in got if v is not None) == expected
        where_file = tmp_path / "where.sql"
        where_file.write_text(where)
        argv = ["query", str(data), "--where-file", str(where_file), "--select", "user_id"]
        assert main(argv + ["--format", "json"]) == 0
        rows = [json.loads(line)["user_id"] for line in capsys.readouterr().out.splitlines()]
        assert sorted(v for v in rows if v is not None) == expected


def test_values_beyond_the_column_type(data: Path, ids: np.ndarray, chdb_session) -> None:
    # uint64 values (past int64) on an Int64 column: they match nothing, the others still do.
    big = [2**63 + i for i in range(100)] + np.abs(ids[:30]).tolist() + ids[30:60].tolist()
    where = f"user_id IN ({_in_list(sorted(set(v for v in big if v >= 0)))})"
    assert literal_list(parse_shared(where).expressions[0]).values.dtype == np.uint64
    expected = _chdb_ids(chdb_session, data, where)
    assert expected == _duckdb_ids(data, where)
    assert sorted(Dataset(data).query(where, ["user_id"]).column(0).to_pylist()) == expected
    # UInt8: 300 and -5 cannot be held, so ClickHouse's set leaves them out.
    where = f"small IN ({_in_list([-5, 300] + list(range(100, 180)))})"
    got = Dataset(data).query(where, ["user_id"]).num_rows
    counted = duckdb.sql(f"SELECT count(*) FROM read_parquet('{data}/*.parquet') WHERE {where}")
    assert got == counted.fetchall()[0][0] > 0


def test_a_long_string_list_gives_the_rows_of_duckdb(data: Path, chdb_session) -> None:
    listed = [f"{WORDS[i % len(WORDS)]}{i}" for i in range(0, ROWS, 7)] + ["nowhere"] * 3
    where = "s IN (" + ", ".join(f"'{text}'" for text in listed) + ")"
    assert literal_list(parse_shared(where).expressions[0]).kind == "string"
    expected = _chdb_ids(chdb_session, data, where)
    assert len(expected) > 1000 and expected == _duckdb_ids(data, where)
    got = Dataset(data).query(where, ["user_id"]).column(0).to_pylist()
    assert sorted(v for v in got if v is not None) == expected
    numbers = "s IN (" + _in_list(range(100)) + ")"  # ClickHouse turns them into text
    got = Dataset(data).query(numbers, ["user_id"]).column(0).to_pylist()
    assert sorted(v for v in got if v is not None) == _chdb_ids(chdb_session, data, numbers)


def test_the_text_and_table_translations_give_the_same_rows(data: Path, ids: np.ndarray) -> None:
    kinds = column_kinds(pq.ParquetFile(data / "part-0.parquet").schema_arrow)
    where = (
        f"(user_id IN ({_in_list(ids[:300].tolist())}) OR f IN ({_in_list(range(0, 900, 3))}))"
        " AND s NOT IN (" + ", ".join(f"'alpha{i}'" for i in range(0, 3000, 6)) + ")"
    )
    text = clickhouse_to_duckdb(where, kinds)
    joined, tables = clickhouse_to_duckdb_tables(where, kinds)
    # The integer and string lists on their own kinds become tables; the float column's list
    # is converted element by element and stays text.
    assert len(tables) == 2 and "IN (SELECT" in joined and "IN (0, 3, 6" in joined
    connection = duckdb.connect()
    for name, table in tables:
        connection.register(name, table)
    source = f"read_parquet('{data}/*.parquet')"
    counts = [
        connection.execute(f"SELECT count(*) FROM {source} WHERE {sql}").fetchone()[0]
        for sql in (text, joined, f"NOT ({text})", f"NOT ({joined})")
    ]
    assert counts[0] == counts[1] > 300 and counts[2] == counts[3] > 0


def test_integer_lookup_of_a_literal_list() -> None:
    values = list(range(-10, 90))
    term = integer_lookup(f"user_id IN ({_in_list(values)}) OR user_id = 5")
    assert (
        term[0] == "or"
        and term[1][0][2].tolist() == values
        and term[1][1] == ("in", "user_id", (5,))
    )
    # Beyond int64 the lookup does not apply (pyarrow compares int64).
    assert integer_lookup(f"user_id IN ({_in_list(range(2**63, 2**63 + 100))})") is None


@pytest.mark.parametrize(
    ("column_type", "values"),
    [
        ("Int64", [-(2**40) + 7 * i for i in range(100)]),
        ("UInt8", [-5, 300, *range(0, 256, 3)]),
        ("UInt64", [2**63 + i for i in range(50)] + list(range(50))),
        ("Float64", list(range(-50, 50))),
        ("String", list(range(100))),
    ],
)
def test_pruning_equals_the_element_wise_conversion(column_type: str, values: list) -> None:
    # An OR of comparisons is converted value by value (the path chdb checks for short lists
    # in tests/clickhouse) and merged into one IN atom: the literal list must keep the same
    # granules.
    rng = np.random.default_rng(3)
    if column_type == "String":
        column = pa.array([str(v) for v in rng.integers(0, 400, 40_000)])
    elif column_type == "Float64":
        column = pa.array(rng.integers(-400, 400, 40_000).astype(np.float64))
    else:
        info = {"Int64": (-(2**40), 2**40), "UInt8": (0, 256), "UInt64": (0, 2**63 + 200)}
        low, high = info[column_type]
        dtype = {"Int64": pa.int64(), "UInt8": pa.uint8(), "UInt64": pa.uint64()}[column_type]
        raw = rng.integers(
            low, high, 40_000, dtype=np.uint64 if column_type == "UInt64" else np.int64
        )
        raw[::997] = np.array(values[-1], raw.dtype)  # some present
        column = pa.array(raw, dtype)
    definition = parse_index_definition("INDEX i v TYPE bloom_filter(0.001) GRANULARITY 1")
    index = SkipIndex.build(definition, pa.table({"v": column}), [512] * (40_000 // 512) + [64])
    types = {"v": column_type}
    listed = compile_condition(f"v IN ({_in_list(values)})", definition, types)
    # A number is compared with a String column only inside IN (ClickHouse refuses `s = 5`).
    quote = "'" if column_type == "String" else ""
    chained = compile_condition(
        " OR ".join(f"v = {quote}{v}{quote}" for v in values), definition, types
    )
    assert literal_list(parse_shared(listed.where).expressions[0]) is not None
    assert listed.useful == chained.useful
    assert (listed.may_match(index) == chained.may_match(index)).all()
    if column_type in ("Int64", "UInt64"):
        assert 0 < int(listed.may_match(index).sum()) < len(index)


def test_a_list_no_value_of_fits_leaves_the_index_unused() -> None:
    definition = parse_index_definition("v TYPE bloom_filter")
    where = f"v IN ({_in_list(range(300, 400))})"
    assert not compile_condition(where, definition, {"v": "UInt8"}).useful


def test_escaped_literals_after_a_list_are_read_from_the_parsed_text() -> None:
    # A literal with \x escapes is decoded from the text at its offsets (sqlglot reads '\xff'
    # as the character U+00FF, two bytes in UTF-8; ClickHouse as the byte 0xFF). The offsets
    # are those of the text sqlglot read, where the list is a short name: read in the WHERE
    # itself they pointed into the list, and the row's granule was skipped.
    words = pa.array([b"alpha\xff%d" % i for i in range(8_192)], pa.binary())
    definition = parse_index_definition("INDEX i s TYPE bloom_filter(0.001) GRANULARITY 1")
    index = SkipIndex.build(definition, pa.table({"s": words}), [256] * 32)
    where = f"n IN ({_in_list(range(1_000, 1_200))}) AND s = 'alpha\\xff300'"
    mask = compile_condition(where, definition, {"s": "String"}).may_match(index)
    assert mask[300 // 256] and mask.sum() < 4


def test_a_long_array_is_read_without_sqlglot_where_a_function_takes_it() -> None:
    needles = ", ".join(f"'n{i}'" for i in range(300))
    numbers = _in_list(range(100))
    tree = parse_shared(f"multiSearchAny(s, [{needles}]) AND hasAny(a, [{numbers}])")
    found = [literal_list(node) for node in tree.walk() if literal_list(node) is not None]
    assert [(item.kind, item.array, len(item)) for item in found] == [
        ("string", True, 300),
        ("int", True, 100),
    ]
    assert tree.sql("clickhouse").startswith(f"multiSearchAny(s, [{needles}])")
    # A subscript and a comparison are not a function's argument: sqlglot reads them.
    for where in (f"m[{numbers}] = 1", f"a = [{numbers}]"):
        assert not any(literal_list(node) is not None for node in parse_shared(where).walk())


def test_20000_needles_are_refused_in_clickhouses_words(data: Path, capsys) -> None:
    # Before: sqlglot parsed the 20,000 strings first (1.4 s), to refuse them.
    where = "multiSearchAny(s, [" + ", ".join(f"'n{i}'" for i in range(20_000)) + "])"
    assert literal_list(parse_shared(where).expressions[1]) is not None
    with pytest.raises(UnsupportedPredicateError, match="passed 20000, should be at most 255"):
        Dataset(data).query(where)
    assert main(["query", str(data), "--where", where]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "should be at most 255" in line


def test_long_arrays_give_the_rows_of_clickhouse(data: Path, chdb_session) -> None:
    words = [f"{WORDS[i % len(WORDS)]}{i}" for i in range(0, ROWS, 13)]
    for where in (
        "has([" + ", ".join(f"'{word}'" for word in words) + "], s)",
        "multiSearchAny(s, [" + ", ".join(f"'a{i}9'" for i in range(200)) + "])",
    ):
        assert any(literal_list(node) is not None for node in parse_shared(where).walk())
        expected = _chdb_ids(chdb_session, data, where)
        got = Dataset(data).query(where, ["user_id"]).column(0).to_pylist()
        assert sorted(v for v in got if v is not None) == expected and len(expected) > 50


def test_a_long_needle_array_prunes_as_short_ones_do() -> None:
    # Arrays shorter than LITERAL_LIST_MIN are parsed by sqlglot; an OR of their
    # multiSearchAny atoms merges into one atom of all the needles.
    words = pa.array([f"a w{i} b" for i in range(8_192)])
    definition = parse_index_definition("INDEX t s TYPE tokenbf_v1(512, 2, 0) GRANULARITY 1")
    index = SkipIndex.build(definition, pa.table({"s": words}), [128] * 64)
    needles = [f"' w{i} '" for i in range(0, 2_048, 16)][: 2 * (LITERAL_LIST_MIN - 1)]
    half = len(needles) // 2
    whole = f"multiSearchAny(s, [{', '.join(needles)}])"
    halves = " OR ".join(
        f"multiSearchAny(s, [{', '.join(part)}])" for part in (needles[:half], needles[half:])
    )
    types = {"s": "String"}
    masks = [compile_condition(w, definition, types).may_match(index) for w in (whole, halves)]
    assert (masks[0] == masks[1]).all() and 0 < masks[0].sum() < len(index)
