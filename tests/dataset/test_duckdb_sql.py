"""``bloomskip.sql``: a query in DuckDB's own SQL, its indexed Parquet scans pruned.

The rows must be exactly DuckDB's for the same text without bloomskip, for random predicate
trees (atoms the index can use and atoms it cannot, under AND / OR / NOT), joins, aggregates
and window functions; and a point lookup must read fewer row groups than the files hold.
"""

from __future__ import annotations

import random

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dataset_fixtures import write_indexed_parts

import bloomskip
from bloomskip.cli import main
from bloomskip.dataset import Dataset
from bloomskip.dataset.engines.duckdb_sql import plan_sql
from bloomskip.errors import BloomskipError

FILES, ROWS, GROUP = 3, 3_000, 300


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    folder = tmp_path_factory.mktemp("duckdb-sql") / "data"
    tables = write_indexed_parts(folder, FILES, ROWS, GROUP, 70, granule=100)
    return folder, pa.concat_tables(tables)


def _sorted(relation) -> list[tuple]:
    return sorted(relation.fetchall(), key=repr)


def _atoms(table: pa.Table, rng: random.Random) -> list[str]:
    ks = [value for value in table.column("k").to_pylist() if value is not None]
    words = ["alpha", "error", "café", "x1", "500", "Привет", "naïve", "zzz-none", "GET"]
    k = rng.choice(ks)
    return [
        f"k = {k}",
        f"k = {rng.choice(ks)}",
        "k = 987654321",
        f"k IN ({', '.join(str(rng.choice(ks)) for _ in range(4))})",
        f"s LIKE '%{rng.choice(words)}%'",
        f"contains(s, '{rng.choice(words)}')",
        f"starts_with(s, '{rng.choice(words)}')",
        f"s LIKE '{rng.choice(words)}_%'",
        f"d = '{rng.choice(['red', 'blue', 'ünïcode', 'none'])}'",
        "v > 0.5",
        "k IS NULL",
        f"s ILIKE '%{rng.choice(words)}%'",
        "len(tags) > 2",
        f"k = -{k}",
        f"'{k}' = k::VARCHAR",
    ]


def _tree(atoms: list[str], rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(atoms)
    shape = rng.random()
    if shape < 0.15:
        return f"NOT ({_tree(atoms, rng, depth - 1)})"
    operator = "AND" if shape < 0.6 else "OR"
    return f"({_tree(atoms, rng, depth - 1)} {operator} {_tree(atoms, rng, depth - 1)})"


def test_random_predicate_trees_give_duckdbs_rows(lake):
    folder, table = lake
    rng = random.Random(11)
    pruned = 0
    for _ in range(120):
        where = _tree(_atoms(table, rng), rng, 3)
        for source in (f"'{folder}/*.parquet'", f"read_parquet('{folder}/*.parquet') AS t"):
            query = f"SELECT id, k, s FROM {source} WHERE {where}"
            expected = _sorted(duckdb.sql(query))
            assert _sorted(bloomskip.sql(query)) == expected, query
        plan = plan_sql(query)
        pruned += plan.scans[0].explanation is not None
    assert pruned > 20, pruned


def test_a_point_lookup_reads_a_few_row_groups(lake):
    folder, table = lake
    k = table.column("k")[1234].as_py()
    query = f"SELECT * FROM read_parquet('{folder}/*.parquet') WHERE k = {k} AND v IS NOT NULL"
    plan = plan_sql(query)
    (scan,) = plan.scans
    assert scan.where == f"`k` = {k}"
    read = scan.explanation.plan
    assert read.row_group_count < FILES * ROWS // GROUP // 5
    assert read.rows < FILES * ROWS // 20
    assert "reads" in plan.summary() and "row groups" in plan.summary()
    assert _sorted(bloomskip.sql(query)) == _sorted(duckdb.sql(query))


def test_joins_aggregates_and_windows_run_as_written(lake):
    folder, table = lake
    connection = duckdb.connect()
    connection.execute(
        "CREATE TABLE colours AS SELECT * FROM (VALUES ('red', 1), ('blue', 2), ('green', 3)) "
        "AS v(name, rank)"
    )
    ks = table.column("k").to_pylist()
    listed = ", ".join(str(value) for value in ks[::500] if value is not None)
    queries = [
        f"SELECT c.rank, count(*), round(sum(t.v), 6) FROM read_parquet('{folder}/*.parquet') AS t "
        f"JOIN colours AS c ON t.d = c.name WHERE t.k IN ({listed}) GROUP BY c.rank",
        f"SELECT c.name, t.id FROM colours AS c LEFT JOIN read_parquet('{folder}/*.parquet') AS t "
        f"ON t.d = c.name WHERE t.k IN ({listed}) OR t.k = 5",
        f"SELECT id, row_number() OVER (PARTITION BY d ORDER BY id) FROM '{folder}/*.parquet' "
        f"WHERE k IN ({listed})",
        f"SELECT d, count(*) FROM '{folder}/*.parquet' WHERE contains(s, 'café') GROUP BY d "
        "HAVING count(*) > 1",
        f"WITH hits AS (SELECT * FROM read_parquet('{folder}/*.parquet') AS t "
        f"WHERE t.k IN ({listed})) SELECT count(*) FROM hits WHERE id % 2 = 0",
        f"SELECT id FROM '{folder}/*.parquet' WHERE k IN ({listed}) AND id IN "
        f"(SELECT id FROM read_parquet('{folder}/part-1.parquet') AS u WHERE u.k IN ({listed}))",
    ]
    for query in queries:
        assert _sorted(bloomskip.sql(query, connection=connection)) == _sorted(
            connection.sql(query)
        ), query
    assert plan_sql(queries[0], connection).scans[0].explanation is not None


def test_scans_it_cannot_prune_are_read_as_written(lake, tmp_path):
    folder, table = lake
    k = table.column("k")[10].as_py()
    cases = {
        f"SELECT * FROM read_parquet('{folder}/*.parquet', union_by_name = true) WHERE k = {k}": 0,
        f"SELECT read_parquet.id FROM read_parquet('{folder}/*.parquet') WHERE k = {k}": 1,
        f"SELECT * FROM read_parquet('{folder}/*.parquet') WHERE v > 0": 1,
        f"SELECT * FROM '{tmp_path}/none-*.parquet' WHERE k = {k}": 1,
    }
    for query, scans in cases.items():
        plan = plan_sql(query)
        assert len(plan.scans) == scans, query
        assert all(scan.explanation is None for scan in plan.scans), query
        assert plan.text == query
    # An unindexed copy: no index, no pruning, DuckDB's rows.
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(table.slice(0, 500), plain / "a.parquet")
    query = f"SELECT id FROM '{plain}/*.parquet' WHERE k = {k}"
    assert plan_sql(query).scans[0].explanation is None
    assert _sorted(bloomskip.sql(query)) == _sorted(duckdb.sql(query))


def test_string_literals_keep_their_backslashes_and_quotes(tmp_path):
    values = ["a\\b", "it's", "50%_off", "plain", "back\\\\slash"]
    table = pa.table({"s": values * 200, "id": list(range(1000))})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=100)
    Dataset(tmp_path).build_index(["s TYPE bloom_filter(0.001)"], granule=10, progress=False)
    for value in values:
        literal = value.replace("'", "''")
        for where in (f"s = '{literal}'", f"contains(s, '{literal}')", f"s IN ('{literal}', 'x')"):
            query = f"SELECT id FROM '{tmp_path}/*.parquet' WHERE {where}"
            assert _sorted(bloomskip.sql(query)) == _sorted(duckdb.sql(query)), query


def test_cli_prints_rows_and_explains(lake, capsys):
    folder, table = lake
    k = table.column("k")[77].as_py()
    query = f"SELECT id FROM '{folder}/*.parquet' WHERE k = {k} ORDER BY id"
    assert main(["sql", query, "--format", "csv"]) == 0
    rows = capsys.readouterr().out.split()
    assert rows == ["id"] + [str(row) for (row,) in duckdb.sql(query).fetchall()]
    assert main(["sql", query, "--explain"]) == 0
    assert "row groups" in capsys.readouterr().out
    assert main(["sql", "SELECT * FROM no_such_table"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "DuckDB rejected the query" in err[0]
    with pytest.raises(BloomskipError):
        bloomskip.sql("SELECT * FROM no_such_table")


def test_cli_reads_the_query_from_standard_input(lake, capsys, monkeypatch):
    import io

    folder, table = lake
    k = table.column("k")[5].as_py()
    query = f"SELECT count(*) AS n FROM '{folder}/*.parquet' WHERE k = {k}"
    monkeypatch.setattr("sys.stdin", io.StringIO(query))
    assert main(["sql", "-", "--format", "csv"]) == 0
    assert capsys.readouterr().out.split() == ["n", str(duckdb.sql(query).fetchall()[0][0])]
    # A statement that is not a query runs as written, its result as DuckDB gives it.
    assert main(["sql", "SET threads = 1"]) == 0
    assert "Success" in capsys.readouterr().out


@pytest.mark.parametrize("setting", [True, False])
def test_a_callers_connection_keeps_its_prefetch_setting(lake, setting):
    folder, table = lake
    connection = duckdb.connect()
    connection.sql(f"SET GLOBAL disable_parquet_prefetching = {setting}")
    k = next(value for value in table.column("k").to_pylist() if value is not None)
    query = f"SELECT id FROM '{folder}/*.parquet' WHERE k = {k}"
    assert _sorted(bloomskip.sql(query, connection=connection)) == _sorted(duckdb.sql(query))
    now = connection.sql("SELECT current_setting('disable_parquet_prefetching')").fetchall()
    assert now == [(setting,)]


def test_the_same_query_sees_files_added_rewritten_and_removed(tmp_path):
    # Kept between calls: the parse, DuckDB's matches of the glob (by the folder's time), the
    # decision (by the files' and the index's state). Each change is seen by the next call.
    folder = tmp_path / "data"
    tables = write_indexed_parts(folder, 2, 600, 100, 5, granule="row-group")
    k = next(value for value in tables[1].column("k").to_pylist() if value is not None)
    query = f"SELECT id, k FROM read_parquet('{folder}/*.parquet') WHERE k = {k} OR k = -1"

    def check(expected_files: int) -> None:
        assert _sorted(bloomskip.sql(query)) == _sorted(duckdb.sql(query))
        assert len(list(folder.glob("*.parquet"))) == expected_files

    check(2)
    check(2)
    # A new file holding the value, and one more holding -1: not indexed, so scanned.
    extra = tables[1].slice(0, 50)
    extra = extra.set_column(
        extra.schema.get_field_index("k"), "k", pa.array([-1] * 50, pa.int64())
    )
    pq.write_table(tables[1], folder / "part-7.parquet", row_group_size=100)
    pq.write_table(extra, folder / "part-8.parquet")
    check(4)
    # A file rewritten in place (another row holds the value now), and one removed.
    rewritten = tables[0].set_column(
        tables[0].schema.get_field_index("k"), "k", pa.array([k] * tables[0].num_rows, pa.int64())
    )
    pq.write_table(rewritten, folder / "part-0.parquet", row_group_size=100)
    (folder / "part-7.parquet").unlink()
    check(3)
    assert len(_sorted(bloomskip.sql(query))) >= tables[0].num_rows


def test_a_scan_is_decided_on_one_listing(tmp_path, monkeypatch):
    # The scan's schema and its decision share one listing of the dataset; the next query,
    # and another thread, list anew.
    import threading

    from bloomskip.dataset.backends.lake import LakeDataset

    folder = tmp_path / "data"
    tables = write_indexed_parts(folder, 2, 600, 100, 9, granule="row-group")
    k = next(value for value in tables[0].column("k").to_pylist() if value is not None)
    query = f"SELECT id FROM read_parquet('{folder}/*.parquet') WHERE k = {k}"
    listings = []
    original = LakeDataset._list_files

    def counted(self):
        listings.append(threading.get_ident())
        return original(self)

    monkeypatch.setattr(LakeDataset, "_list_files", counted)
    assert _sorted(bloomskip.sql(query)) == _sorted(duckdb.sql(query))
    assert len(listings) == 1
    dataset = Dataset(folder).backend
    with dataset.one_listing():
        before = dataset.explain(f"k = {k}")
        pq.write_table(tables[1], folder / "part-9.parquet")
        # Within the block the first listing holds; another thread lists the folder now.
        assert len(dataset.explain(f"k = {k}").files) == len(before.files) == 2
        other = []
        thread = threading.Thread(target=lambda: other.append(dataset.explain(f"k = {k}")))
        thread.start()
        thread.join()
        assert len(other[0].files) == 3
    assert len(dataset.explain(f"k = {k}").files) == 3
    assert _sorted(bloomskip.sql(query)) == _sorted(duckdb.sql(query))


def test_bloomskips_connections_remember_their_prefetch_setting():
    from bloomskip.dataset.scan.query import connect, sparse_reads

    def setting(connection) -> bool:
        ((value,),) = connection.sql(
            "SELECT current_setting('disable_parquet_prefetching')"
        ).fetchall()
        return value

    connection = connect()
    sparse_reads(connection, True)
    assert setting(connection) is True
    # Set behind bloomskip's back: its own connection is not asked again (speed only) ...
    connection.execute("SET GLOBAL disable_parquet_prefetching = false")
    sparse_reads(connection, True)
    assert setting(connection) is False
    sparse_reads(connection, False)
    sparse_reads(connection, True)
    assert setting(connection) is True
    # ... while a caller's connection always gets the statement.
    caller = duckdb.connect()
    sparse_reads(caller, True, remembered=False)
    caller.execute("SET GLOBAL disable_parquet_prefetching = false")
    sparse_reads(caller, True, remembered=False)
    assert setting(caller) is True
