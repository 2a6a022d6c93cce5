"""The query contract (docs/queries.md), clause by clause: bloomskip's rows are ClickHouse's.

Every WHERE of the corpus runs through bloomskip over Parquet data written by pyarrow, DuckDB,
Polars and pandas, three ways (no index; an index with one granule per row group; an index with
8,192-row granules), and through ClickHouse itself (chdb, ``file('dir/*.parquet', Parquet)``,
the same files). The ids returned must be the same; where ClickHouse refuses a clause, bloomskip
must raise a BloomskipError, not return rows. Over files with different schemas, where
ClickHouse's answer is undefined, the reference is DuckDB's ``union_by_name`` scan, written by
hand for each clause (not produced by the translation under test), and the result's columns and
types must not depend on which files the index keeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip.dataset import Dataset
from bloomskip.errors import BloomskipError

if TYPE_CHECKING:
    from chdb.session import Session

ROWS_PER_FILE, FILES, GROUP_ROWS = 4_000, 3, 1_000
SPECIAL = [
    "C:\\Users\\bob\\file.txt",
    "back\\slash here",
    "100% done",
    "a_b c",
    "a%b c",
    "ends with \\",
    "tab\there",
    "line\nbreak",
    "nul\x00byte",
    "Привет мир",
    "ПРИВЕТ МИР",
    "ſtraße STRASSE",
    "Kelvin \u212a k",
    "Σίσυφος ς σ",
    "東京 tokyo",
    "café CAFÉ",
    "GET /api/v1/users?id=42 HTTP/1.1",
    "error: timeout after 500ms",
    "",
    " ",
]
WORDS = ["alpha", "beta", "gamma", "error", "timeout", "GET", "user", "naïve", "☃snow", "x1"]
CATEGORIES = ["red", "green", "blue", "ünïcode", "black"]
FLOATS = [0.1, 0.5, 1.0, float("nan"), float("inf"), float("-inf"), 2.5, -0.0, 3.25, None]
INDEXES = [
    "INDEX id_bf id TYPE bloom_filter(0.01)",
    "INDEX k_bf k TYPE bloom_filter(0.01)",
    "INDEX s_tok s TYPE tokenbf_v1(2048, 3, 0)",
    "INDEX s_ng s TYPE ngrambf_v1(3, 2048, 3, 0)",
    "INDEX d_bf d TYPE bloom_filter",
    "INDEX tags_bf tags TYPE bloom_filter(0.01)",
    "INDEX u_bf u TYPE bloom_filter(0.01)",
    "INDEX ip_bf ip TYPE bloom_filter(0.01)",
    "INDEX n_bf n TYPE bloom_filter(0.01)",
]


def base_table(first: int, rows: int) -> pa.Table:
    """Rows ``first..``: special strings (backslashes, %, _, NUL, case pairs) among words."""
    ids = np.arange(first, first + rows)
    texts = []
    for i in ids.tolist():  # test data only
        if i % 3 == 0:
            texts.append(SPECIAL[(i // 3) % len(SPECIAL)])
        elif i % 29 == 0:
            texts.append(None)
        else:
            texts.append(f"{WORDS[i % 10]} {WORDS[(i // 10) % 10]}-{i % 97}")
    tags = []
    for i in ids.tolist():
        if i % 17 == 0:
            tags.append(None)
        elif i % 13 == 0:
            tags.append([WORDS[i % 10], None])
        else:
            tags.append([WORDS[(i + j) % 10] for j in range(i % 3)])
    floats = [FLOATS[i % len(FLOATS)] for i in ids.tolist()]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([f"k{i}" for i in ids.tolist()]),
            "s": pa.array(texts, pa.string()),
            "d": pa.DictionaryArray.from_arrays(
                pa.array(ids % len(CATEGORIES), pa.int32()), pa.array(CATEGORIES)
            ),
            "tags": pa.array(tags, pa.list_(pa.string())),
            "u": pa.array(
                np.where(ids % 5 == 0, np.uint64(2**63 - 3) + (ids % 7).astype(np.uint64), ids),
                pa.uint64(),
            ),
            "f32": pa.array(floats, pa.float32()),
            "f64": pa.array([None if v is None else v * 3 for v in floats], pa.float64()),
            "ts": pa.array(1_700_000_000_000 + ids * 60_000, pa.timestamp("ms", tz="UTC")),
            "tsz": pa.array(
                1_700_000_000_000_000 + ids * 3_600_000_000, pa.timestamp("us", tz="Asia/Shanghai")
            ),
            "ip": pa.array([f"10.{i % 4}.{(i // 4) % 256}.{i % 251}" for i in ids.tolist()]),
            "b": pa.array([None if i % 11 == 0 else i % 2 == 0 for i in ids.tolist()]),
            "n": pa.array([None if i % 7 == 0 else i % 100 for i in ids.tolist()], pa.int32()),
        }
    )


def write_with(writer: str, table: pa.Table, path: Path) -> None:
    if writer == "pyarrow":
        pq.write_table(table, path, row_group_size=GROUP_ROWS)
    elif writer == "duckdb":
        connection = duckdb.connect()
        connection.register("t", table)
        connection.execute(f"COPY t TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE {GROUP_ROWS})")
        connection.close()
    elif writer == "polars":
        import polars as pl

        pl.from_arrow(table).write_parquet(path, row_group_size=GROUP_ROWS)
    else:
        import pandas as pd

        frame = table.to_pandas()
        assert isinstance(frame, pd.DataFrame)
        frame.to_parquet(path, index=False, row_group_size=GROUP_ROWS)


class Corpus:
    """A dataset in three configurations, and ClickHouse's reading of the same files."""

    def __init__(self, directory: Path, chdb_session: Session) -> None:
        self.directory = directory
        self.chdb = chdb_session
        plain = Dataset(directory, sidecar=directory / "_none.index")
        by_group = Dataset(directory, sidecar=directory / "_groups.index")
        by_rows = Dataset(directory, sidecar=directory / "_rows.index")
        by_group.build_index(INDEXES, granule="row-group", progress=False)
        by_rows.build_index(INDEXES, granule=8192, progress=False)
        self.configurations = {"no index": plain, "row groups": by_group, "8192 rows": by_rows}

    def clickhouse(self, where: str) -> list[int] | str:
        try:
            text = self.chdb.query(
                f"SELECT id FROM file('{self.directory}/*.parquet', Parquet) WHERE {where} "
                "ORDER BY id",
                "CSV",
            ).bytes()
        except Exception as exc:  # chdb raises RuntimeError with ClickHouse's message
            return str(exc).splitlines()[0]
        return [int(v) for v in text.decode().split()]

    def check(self, where: str) -> None:
        expected = self.clickhouse(where)
        for name, dataset in self.configurations.items():
            if isinstance(expected, str):
                with pytest.raises(BloomskipError):
                    dataset.query(where, ["id"])
                continue
            got = sorted(dataset.query(where, ["id"]).column("id").to_pylist())
            assert got == expected, f"{name}: {len(got)} rows, ClickHouse {len(expected)}"


@pytest.fixture(scope="module")
def corpora(tmp_path_factory, chdb_session: Session) -> dict[str, Corpus]:
    built = {}
    for writer in ("pyarrow", "duckdb", "polars", "pandas"):
        directory = tmp_path_factory.mktemp(f"corpus-{writer}")
        for number in range(FILES):
            table = base_table(number * ROWS_PER_FILE, ROWS_PER_FILE)
            write_with(writer, table, directory / f"part-{number}.parquet")
        built[writer] = Corpus(directory, chdb_session)
    return built


def _clauses() -> list[str]:
    """The pyarrow corpus: every construct of docs/queries.md, its edge cases, and errors."""
    clauses = []
    for value in (0, 1, 2999, 4000, 11999, 12000, -1):
        clauses += [f"id = {value}", f"id IN ({value}, {value + 3})", f"{value} = id"]
    clauses += [
        "id != 5 AND id < 10",
        "id BETWEEN 100 AND 110",
        "id NOT BETWEEN 3 AND 11990",
        "id > 11990 OR id < 3",
        "id IN (1, NULL)",
        "NOT (id IN (1, NULL)) AND id < 4",
        "id IN (NULL)",
        "id = '42'",
        "id IN ('1', '42')",
        "id = 1.5",
        "id = 42.0",
        "equals(id, 7)",
        "notEquals(id, 7) AND id < 9",
        "k = 'k15'",
        "k = 'k11999'",
        "k = 'nope'",
        "k IN ('k1', 'k2', 'k9000')",
        "k = 'k15' OR k = 'k9001'",
        "k LIKE 'k12%'",
        "k LIKE 'k1_'",
        "k LIKE '%99'",
        "startsWith(k, 'k119')",
        "endsWith(k, '777')",
        "k != 'k1' AND id < 3",
        "k NOT IN ('k0', 'k1') AND id < 4",
    ]
    for pattern in [
        "%\\\\Users\\\\bob%",
        "C:\\\\Users%",
        "%back\\\\slash%",
        "%\\\\slash%",
        "%\\\\%",
        "%\\\\\\\\%",
        "%with \\\\\\\\",
        "%\\%%",
        "100\\% done",
        "%\\_%",
        "a\\_b%",
        "a_b%",
        "a%b%",
        "%\\\\s%",
        "%\\\\b%",
        "%\\\\U%",
        "%\\\\Z%",
        "tab\\there",
        "tab%here",
        "line_break",
        "line%",
        "%\\nbreak",
        "nul\\0byte",
        "nul_byte",
        "%\\0%",
        "Привет%",
        "%мир",
        "П_ИВЕТ%",
        "%東京%",
        "__ tokyo",
        "caf_ %",
        "%",
        "_",
        "",
        " ",
        "%timeout%",
        "%alpha beta%",
        "GET /api/v1/users?id=42 HTTP/1.1",
        "%?id=42%",
        "%x1-%",
    ]:
        clauses += [f"s LIKE '{pattern}'", f"s NOT LIKE '{pattern}'"]
    clauses += [
        "like(s, '%alpha%')",
        "notLike(s, '%alpha%') AND id < 50",
        "s LIKE 'ends with \\\\'",
    ]
    for pattern in [
        "%привет%",
        "%ПРИВЕТ%",
        "привет мир",
        "%мир",
        "%STRASSE%",
        "%ſtraße%",
        "%s%",
        "%k%",
        "kelvin%",
        "%σ%",
        "%Σ%",
        "σίσυφος%",
        "%café%",
        "CAFÉ%",
        "%CAF_%",
        "%\\\\users\\\\%",
        "get /api%",
        "%TIMEOUT%",
        "%Alpha Beta%",
    ]:
        clauses.append(f"s ILIKE '{pattern}'")
    clauses += ["s NOT ILIKE '%alpha%' AND id < 40"]
    for token in [
        "alpha",
        "timeout",
        "error",
        "GET",
        "get",
        "500ms",
        "x1",
        "naïve",
        "snow",
        "☃snow",
        "東京",
        "tokyo",
        "мир",
        "Привет",
        "bob",
        "Users",
        "",
        "nope",
        "byte",
        "here",
    ]:
        clauses.append(f"hasToken(s, '{token}')")
    for token in ["ALPHA", "привет", "TOKYO", "users", "Get", "x1"]:
        clauses.append(f"hasTokenCaseInsensitive(s, '{token}')")
    clauses += [
        "multiSearchAny(s, ['timeout', 'мир'])",
        "multiSearchAny(s, ['\\\\', '%'])",
        "multiSearchAny(s, [''])",
        "multiSearchAny(s, ['\\0'])",
        "multiSearchAny(s, ['zzz'])",
        "multiSearchAny(s, ['ПРИВЕТ', 'ſ', '東京'])",
        "startsWith(s, 'alpha')",
        "startsWith(s, 'C:\\\\')",
        "startsWith(s, '')",
        "startsWith(s, 'Прив')",
        "endsWith(s, '\\\\')",
        "endsWith(s, 'мир')",
        "endsWith(s, '-5')",
        "s = ''",
        "s = ' '",
        "s = 'nul\\0byte'",
        "s = 'line\\nbreak'",
        "s = 'C:\\\\Users\\\\bob\\\\file.txt'",
        "s IN ('100% done', 'a_b c', 'Привет мир')",
        "s IN (42, 'a%b c')",
        "s != '' AND id < 30",
        "s IS NULL",
        "s IS NOT NULL AND id < 20",
        "isNull(s)",
        "isNotNull(s) AND id < 10",
        "lower(s) = 'привет мир'",
        "lower(s) = 'café café'",
        "upper(s) = 'CAFé CAFÉ'",
        "lower(s) LIKE '%alpha%'",
        "upper(s) = 'ПРИВЕТ МИР'",
        "length(s) = 0",
        "length(s) = 19",
        "length(s) > 30",
        "empty(s)",
        "notEmpty(s) AND id < 10",
        "position(s, 'мир') = 14",
        "position(s, 'bob') > 0",
        "position(s, '') = 1 AND id < 5",
        "position(s, 'zzz') = 0 AND id < 5",
        "match(s, '^alpha')",
        "match(s, 'a.b')",
        "match(s, 'line.break')",
        "match(s, '^.{10}$')",
        "match(s, '\\\\\\\\')",
        "match(s, '[0-9]{3}ms')",
        "match(s, '(?i)привет')",
        "match(s, '')",
    ]
    clauses += [
        "d = 'red'",
        "d = 'ünïcode'",
        "d IN ('blue', 'nope')",
        "d != 'red' AND id < 12",
        "d LIKE '%n%'",
        "startsWith(d, 'bl')",
        "d = 'RED'",
        "hasToken(d, 'black')",
    ]
    clauses += [
        "has(tags, 'alpha')",
        "has(tags, 'naïve')",
        "has(tags, 'nope')",
        "has(tags, NULL)",
        "hasAny(tags, ['x1', '☃snow'])",
        "hasAll(tags, ['alpha', 'beta'])",
        "hasAll(tags, [])",
        "hasAny(tags, [])",
        "empty(tags)",
        "notEmpty(tags)",
        "length(tags) = 2",
        "NOT has(tags, 'alpha') AND id < 40",
    ]
    big = 2**63
    clauses += [
        f"u = {big - 3}",
        f"u = {big}",
        f"u = {big + 3}",
        f"u IN ({big - 1}, {big + 2}, 5)",
        f"u > {big}",
        f"u >= {big - 3} AND id < 100",
        "u = 7",
        "u = -1",
        "u IN (-1, 18446744073709551615)",
        f"u = '{big}'",
        "u < 10",
    ]
    clauses += [
        "f32 = 0.1",
        "f32 = 0.5",
        "f32 IN (0.1, 0.5)",
        "f32 IN (0.5, 2.5, 3.25)",
        "f32 = toFloat32(0.1)",
        "toFloat32(0.1) = f32",
        "f32 = '0.1'",
        "f32 > 0",
        "f32 >= 1",
        "f32 < 1",
        "f32 != 0.5",
        "NOT (f32 > 0)",
        "f32 = nan",
        "f32 != nan",
        "f32 = inf",
        "f32 = -inf",
        "f32 > -inf",
        "f32 < inf",
        "isNaN(f32)",
        "NOT isNaN(f32)",
        "f32 BETWEEN 0 AND 1",
        "f32 = 0",
        "f32 = 1",
        "f64 = 0.3",
        "f64 = 1.5",
        "f64 > 1",
        "f64 <= 1.5",
        "f64 != 1.5",
        "isNaN(f64)",
        "f64 = nan",
        "f64 > -inf",
        "f64 IN (1.5, nan)",
        "f64 = Inf",
        "f64 > NaN",
    ]
    clauses += [
        "ts = '2023-11-14 22:13:20'",
        "ts > '2023-11-20 00:00:00'",
        "ts < '2023-11-15'",
        "tsz = '2023-11-14 22:13:20'",
        "tsz > '2024-01-01 00:00:00'",
        "toDate(ts) = '2023-11-15'",
        "toDate(tsz) = '2024-01-05'",
        "toDate(ts) = toDate('2023-11-16')",
        "ts IS NULL",
        "ts = 'not a time'",
    ]
    clauses += [
        "ip = '10.1.0.1'",
        "ip IN ('10.0.0.0', '10.3.255.250')",
        "startsWith(ip, '10.2.1.')",
        "ip LIKE '10.3.%.7'",
        "ip = '10.1.0.1' OR ip = '10.2.0.2'",
        "b",
        "b = 1",
        "b = true",
        "NOT b AND id < 30",
        "b IS NULL",
        "n = 5",
        "n IN (5, 99)",
        "n IS NULL AND id < 30",
        "n > 97",
        "n = 5 AND hasToken(s, 'alpha')",
    ]
    clauses += [
        "hasToken(s, 'timeout') AND id > 6000",
        "(hasToken(s, 'alpha') OR d = 'red') AND NOT has(tags, 'x1') AND id < 200",
        "id = 5 OR k = 'k9' OR s LIKE '%Users%'",
        "NOT (hasToken(s, 'alpha') OR hasToken(s, 'beta')) AND id < 50",
        "(id = 1 OR id = 2) AND (k = 'k1' OR k = 'k3')",
        "((((id = 3))))",
        "NOT NOT id = 3",
        "not(equals(id, 4)) AND id < 6",
        "and(id > 3, id < 6)",
        "or(id = 3, id = 7)",
        "1",
        "0",
        "NULL",
        "id = 3 AND 1",
        " OR ".join(f"id = {value}" for value in range(0, 3000, 7)),
        "id IN (" + ", ".join(str(value) for value in range(0, 12000, 3)) + ")",
        "NOT (" * 100 + "id = 3" + ")" * 100,
    ]
    # Clauses ClickHouse refuses: bloomskip must refuse them too.
    clauses += [
        "s = 42",
        "42 = s",
        "k = 1",
        "ID = 1",
        "Id = 1",
        "nope = 1",
        "s LIKE 'x\\\\'",
        "s LIKE 1",
        "hasToken(s, 'a b')",
        "hasTokenCaseInsensitive(s, 'a.b')",
        "multiSearchAny(s, [" + ", ".join(f"'n{i}'" for i in range(256)) + "])",
        "system('ls')",
        "s",
        "id = 'abc'",
        "f32 = 'abc'",
        "d = 0",
        "tags = 'a'",
        "(" * 300 + "id = 3" + ")" * 300,
        "NOT (" * 600 + "id = 3" + ")" * 600,
        "id = = 1",
        "hasToken(s)",
    ]
    return clauses


CLAUSES = _clauses()
# ClickHouse answers these; bloomskip refuses them with a one-line error rather than guess
# (docs/queries.md lists what the exact path supports).
REFUSED = [
    "f64 = f32 * 3",
    "CAST(id AS String) = '5'",
    "s ILIKE '%a%' ESCAPE '\\\\'",
    "lowerUTF8(s) = 'привет мир'",
    "toString(id) = '5'",
    "ts > 0",
]
# The clauses every writer's files answer: writers differ in physical types (strings, lists,
# dictionaries, timestamps), not in what a WHERE means.
SHARED = [
    clause
    for clause in CLAUSES
    if any(
        column in clause
        for column in ("k ", "s LIKE", "ILIKE", "hasToken", "tags", "f32", "ts ", "u ", "d ")
    )
][::3]


@pytest.mark.parametrize("where", CLAUSES)
def test_pyarrow_files(corpora: dict[str, Corpus], where: str) -> None:
    corpora["pyarrow"].check(where)


@pytest.mark.parametrize("writer", ["duckdb", "polars", "pandas"])
@pytest.mark.parametrize("where", SHARED)
def test_other_writers(corpora: dict[str, Corpus], writer: str, where: str) -> None:
    corpora[writer].check(where)


@pytest.mark.parametrize("where", REFUSED)
def test_refused_clauses(corpora: dict[str, Corpus], where: str) -> None:
    from bloomskip.dataset.sql.translate import UnsupportedPredicateError

    corpus = corpora["pyarrow"]
    assert isinstance(corpus.clickhouse(where), list)
    with pytest.raises(UnsupportedPredicateError):
        corpus.configurations["row groups"].query(where, ["id"])


@pytest.mark.parametrize("writer", ["pyarrow", "duckdb", "polars", "pandas"])
def test_result_types_are_the_full_scans(corpora: dict[str, Corpus], writer: str) -> None:
    """Dictionary, timestamp unit and zone, list field names: as DuckDB's scan of all files."""
    corpus = corpora[writer]
    for where, duckdb_where in [
        ("id = 5", "id = 5"),
        ("id = -1", "id = -1"),
        ("startsWith(s, 'error')", "starts_with(s, 'error')"),
        ("id < 3000", "id < 3000"),
    ]:
        expected = duckdb.sql(
            f"SELECT * FROM read_parquet('{corpus.directory}/*.parquet') WHERE {duckdb_where}"
        ).to_arrow_table()
        for name, dataset in corpus.configurations.items():
            got = dataset.query(where)
            assert got.schema.equals(expected.schema), (name, where, got.schema)
            # repr: NaN equals NaN there, not in Table.equals.
            assert repr(got.sort_by("id").to_pylist()) == repr(
                expected.sort_by("id").to_pylist()
            ), (name, where)


def test_corpus_size() -> None:
    assert len(set(CLAUSES)) >= 300
    assert len(SHARED) >= 40


# -- files with different schemas ------------------------------------------------------------

DRIFT = [
    # (ClickHouse WHERE for bloomskip, the same predicate in DuckDB SQL over the unified scan)
    ("k = 'k5'", "k = 'k5'"),
    ("k = 'k1500'", "k = 'k1500'"),
    ("k = 'k2500'", "k = 'k2500'"),
    ("k = 'k1500' OR k = 'k2500'", "k = 'k1500' OR k = 'k2500'"),
    ("k = 'k5' OR k = 'k2500'", "k = 'k5' OR k = 'k2500'"),
    ("k = 'nope'", "k = 'nope'"),
    ("extra = 'e1501'", "extra = 'e1501'"),
    ("extra IS NULL AND k LIKE 'k1%'", "extra IS NULL AND k LIKE 'k1%'"),
    ("hasToken(extra, 'e2600')", "extra = 'e2600'"),
    ("id = '2600'", "id = '2600'"),
    ("id IN ('5', '2999')", "id IN ('5', '2999')"),
    ("startsWith(k, 'k29')", "starts_with(k, 'k29')"),
    ("k = 'k5' OR extra = 'e1501' OR id = '2999'", "k = 'k5' OR extra = 'e1501' OR id = '2999'"),
]


@pytest.fixture(scope="module")
def drift(tmp_path_factory) -> tuple[Path, list[Dataset]]:
    """part-0: id int64, k; part-1 adds ``extra``; part-2 stores ``id`` as a string."""
    directory = tmp_path_factory.mktemp("drift")
    ids = np.arange(3000)
    parts = [
        pa.table({"id": pa.array(ids[:1000]), "k": [f"k{i}" for i in range(1000)]}),
        pa.table(
            {
                "id": pa.array(ids[1000:2000]),
                "k": [f"k{i}" for i in range(1000, 2000)],
                "extra": [f"e{i}" if i % 2 else None for i in range(1000, 2000)],
            }
        ),
        pa.table(
            {
                "id": [str(i) for i in range(2000, 3000)],
                "k": [f"k{i}" for i in range(2000, 3000)],
                "extra": [f"e{i}" for i in range(2000, 3000)],
            }
        ),
    ]
    for number, table in enumerate(parts):
        pq.write_table(table, directory / f"part-{number}.parquet", row_group_size=250)
    indexes = ["k TYPE bloom_filter(0.01)", "extra TYPE tokenbf_v1(1024, 3, 0)"]
    datasets = [Dataset(directory, sidecar=directory / "_none.index")]
    for granule in ("row-group", 8192):
        dataset = Dataset(directory, sidecar=directory / f"_{granule}.index")
        dataset.build_index(indexes, granule=granule, progress=False)
        datasets.append(dataset)
    return directory, datasets


@pytest.mark.parametrize(("where", "duckdb_where"), DRIFT)
def test_files_with_different_schemas(drift, where: str, duckdb_where: str) -> None:
    directory, datasets = drift
    expected = duckdb.sql(
        f"SELECT * FROM read_parquet('{directory}/*.parquet', union_by_name = true) "
        f"WHERE {duckdb_where} ORDER BY k"
    ).to_arrow_table()
    assert expected.num_rows > 0 or "nope" in where
    for dataset in datasets:
        got = dataset.query(where)
        assert got.schema.equals(expected.schema), (got.schema, expected.schema)
        assert got.sort_by("k").equals(expected)


def test_index_over_a_column_only_later_files_have_prunes(drift) -> None:
    _, datasets = drift
    result = datasets[1].explain("extra = 'e1501'")
    # part-0 has no extra (NULL everywhere): its row groups are skipped, not read.
    assert not result.keep[0].any()
    assert result.keep[1].any()


def test_index_over_a_column_whose_type_differs_is_refused(drift) -> None:
    directory, _ = drift
    with pytest.raises(BloomskipError, match="'id' has different types.*part-0.parquet: int64"):
        Dataset(directory, sidecar=directory / "_id.index").build_index(
            ["id TYPE bloom_filter"], progress=False
        )
