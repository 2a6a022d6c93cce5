"""Long and deep WHERE clauses: they work, or fail with one line, never a RecursionError.

Before: sqlglot's recursive parser ran out of Python frames at 44 nested parentheses, so
``NOT (`` x 3000 and 5,000 parentheses raised RecursionError (a traceback from the CLI), and the
recursive translation did the same on long AND/OR chains (a left-deep tree as deep as it is long).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip._sql import MAX_NESTING
from bloomskip.cli import main
from bloomskip.dataset import Dataset
from bloomskip.dataset.scan.query import REWRITER_LIMIT
from bloomskip.dataset.sql.translate import (
    UnsupportedPredicateError,
    clickhouse_to_duckdb,
    column_kinds,
    conjunctions_under_or,
    integer_lookup,
)

KINDS = column_kinds(pa.schema([("user_id", pa.int64()), ("s", pa.string())]))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("long") / "data"
    directory.mkdir()
    ids = list(range(10_000))
    table = pa.table({"user_id": ids, "s": [f"x{i}" for i in ids], "g": [i // 1000 for i in ids]})
    pq.write_table(table, directory / "a.parquet", row_group_size=1000)
    Dataset(directory).build_index(
        ["user_id TYPE bloom_filter(0.01)", "g TYPE bloom_filter(0.01)"], progress=False
    )
    return directory


@pytest.mark.parametrize(
    "where",
    ["NOT (" * 3000 + "user_id = 1" + ")" * 3000, "(" * 5000 + "user_id = 1" + ")" * 5000],
)
def test_deeper_than_supported_is_one_error_line(data: Path, where: str, capsys) -> None:
    assert main(["query", str(data), "--where", where]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bloomskip: error:"), captured.err[:500]
    assert f"more than the {MAX_NESTING} supported" in lines[0]
    assert "Recursion" not in captured.err and "Traceback" not in captured.err


@pytest.mark.parametrize(
    "where",
    [
        "(" * 200 + "user_id = 3" + ")" * 200,
        "NOT (" * 120 + "user_id = 3" + ")" * 120,
        "NOT " * 100 + "user_id = 3",
    ],
)
def test_deep_nesting_within_the_limit_works(data: Path, where: str) -> None:
    assert Dataset(data).query(where, ["user_id"]).column("user_id").to_pylist() == [3]


def test_long_or_chain_is_one_membership_test(data: Path) -> None:
    terms = 100_000
    where = " OR ".join(f"user_id = {3 * i}" for i in range(terms))
    translated = clickhouse_to_duckdb(where, KINDS)
    assert translated.startswith('"user_id" IN (0, 3, 6, ')


def test_long_chains_query_exactly(data: Path) -> None:
    dataset = Dataset(data)
    where = " OR ".join(f"user_id = {3 * i}" for i in range(5_000))
    assert integer_lookup(where)[0] == "or"  # walked without recursion
    assert dataset.query(where, ["user_id"]).num_rows == 3334
    where = " AND ".join(f"user_id != {i}" for i in range(2_000))
    assert dataset.query(where, ["user_id"]).num_rows == 8_000
    mixed = " OR ".join(f"(user_id = {i} AND s = 'x{i}')" for i in range(1_200))
    assert dataset.query(mixed, ["user_id"]).num_rows == 1_200
    assert dataset.query(f"NOT ({mixed})", ["user_id"]).num_rows == 8_800


def test_ands_under_or_are_counted() -> None:
    # From REWRITER_LIMIT of them on, DuckDB plans without its expression rewriter, whose
    # distributivity rule is quadratic in them (3,000 terms: 37 s to plan, 0.5 s without it).
    assert conjunctions_under_or("(a = 1 AND b = 2) OR (a = 3 AND b = 4) OR c = 5") == 2
    assert conjunctions_under_or("((a = 1 AND b = 2)) OR c = 5") == 1
    assert conjunctions_under_or("a = 1 AND (b = 2 OR c = 3)") == 0
    mixed = " OR ".join(f"(user_id = {i} AND s = 'x{i}')" for i in range(1_200))
    assert conjunctions_under_or(mixed) == 1_200 >= REWRITER_LIMIT
    assert conjunctions_under_or("not parsed (") == 0


def test_long_chain_located_with_pyarrow(data: Path) -> None:
    # g keeps two row groups of ten: the rows are located by pyarrow.compute over the integer
    # tests, which used to be nested (and evaluated) as deep as the chain was long.
    chain = " OR ".join(f"user_id = {i}" for i in range(0, 3_000))
    dataset = Dataset(data)
    where = f"(g = 0 OR g = 2) AND ({chain})"
    assert sum(int(keep.sum()) for keep in dataset.explain(where).keep) == 2
    assert dataset.query(where, ["user_id"]).num_rows == 2_000


def test_long_in_list_works(data: Path) -> None:
    where = "user_id IN (" + ", ".join(str(3 * i) for i in range(20_000)) + ")"
    assert Dataset(data).query(where, ["user_id"]).num_rows == 3334


def test_unsupported_in_a_long_chain_is_one_error() -> None:
    where = " OR ".join(f"user_id = {i}" for i in range(3_000)) + " OR lowerUTF8(s) = 'x'"
    with pytest.raises(UnsupportedPredicateError, match="lowerUTF8"):
        clickhouse_to_duckdb(where, KINDS)


def test_an_error_of_duckdb_is_one_line_naming_the_where(data: Path, capsys) -> None:
    # Before: DuckDB's message (three lines, a caret under the whole generated SQL) was printed.
    assert main(["query", str(data), "--where", "user_id = 1 OR user_id = toFloat32('abc')"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith('bloomskip: error: DuckDB rejected the query (WHERE "user_id = 1')
    assert line.endswith("Could not convert string 'abc' to FLOAT")
