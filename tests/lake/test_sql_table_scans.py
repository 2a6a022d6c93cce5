"""``bloomskip.sql`` over ``delta_scan('…')`` and ``iceberg_scan('…')`` of a table's folder.

DuckDB's delta and iceberg extensions return the table's snapshot rows; the reference here is
the same SQL run by DuckDB over the rows the table's own library reads (deltalake, pyiceberg),
registered in place of the scan. A pruned scan must give exactly those rows (deleted rows
dropped), and read fewer.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import bloomskip
from bloomskip.dataset import Dataset
from bloomskip.dataset.engines.duckdb_sql import plan_sql

ROWS = 4_000
GRANULE = 500
INDEXES = ["user_id TYPE bloom_filter(0.01)", "msg TYPE tokenbf_v1(512, 2, 0)"]
DELETED = 7 * 2345 % 100_003  # user 16415, of the first batch


def _rows(number: int) -> pa.Table:
    ids = np.arange(number * ROWS, (number + 1) * ROWS, dtype=np.int64)
    return pa.table(
        {
            "user_id": ids * 7 % 100_003,
            "msg": pa.array([f"req {i} {'timeout' if i % 997 == 0 else 'ok'}" for i in ids]),
        }
    )


@pytest.fixture
def delta(tmp_path):
    from deltalake import DeltaTable, write_deltalake

    location = str(tmp_path / "delta")
    for number in range(3):
        write_deltalake(location, _rows(number), mode="append")
    DeltaTable(location).delete(f"user_id = {DELETED}")
    Dataset(location).build_index(INDEXES, granule=GRANULE, progress=False)
    return "delta_scan", location, DeltaTable(location).to_pyarrow_table()


@pytest.fixture
def iceberg(tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(
        "handoff", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh"
    )
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.events", schema=_rows(0).schema)
    for number in range(3):
        table.append(_rows(number))
    table.delete(f"user_id == {DELETED}")
    location = table.location().removeprefix("file://")
    Dataset(location).build_index(INDEXES, granule=GRANULE, progress=False)
    return "iceberg_scan", location, catalog.load_table("ns.events").scan().to_arrow()


QUERIES = [
    "SELECT * FROM {scan} WHERE user_id = 16415",
    "SELECT * FROM {scan} WHERE user_id IN (70, 140, 16415, 99999)",
    "SELECT * FROM {scan} t WHERE ends_with(t.msg, ' timeout') AND t.user_id > 1000",
    "SELECT d.tier, count(*) AS n FROM {scan} t JOIN dim d ON t.user_id = d.user_id "
    "WHERE t.user_id IN (70, 140, 210) GROUP BY ALL ORDER BY ALL",
]


@pytest.mark.parametrize("table", ["delta", "iceberg"])
@pytest.mark.parametrize("query", QUERIES)
def test_a_pruned_table_scan_gives_the_tables_own_rows(request, table, query) -> None:
    function, location, rows = request.getfixturevalue(table)
    connection = duckdb.connect()
    dim = pa.table({"user_id": [70, 140, 210], "tier": ["gold", "silver", "gold"]})
    connection.register("dim", dim)
    connection.register("reference", rows)
    expected = sorted(connection.sql(query.format(scan="reference")).fetchall())
    text = query.format(scan=f"{function}('{location}')")

    answer = bloomskip.sql(text, connection=connection).fetchall()

    assert sorted(answer) == expected
    assert all(row[0] != DELETED for row in answer if isinstance(row[0], int))
    plan = plan_sql(text, connection)
    (scan,) = plan.scans
    assert scan.explanation is not None, scan.reason
    assert scan.explanation.plan.rows < rows.num_rows
    assert f"{function}(" not in plan.text
    views = connection.sql("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    assert sorted(views) == [("dim",), ("reference",)]  # the plan's view went with the query


def test_a_scan_of_something_else_is_left_as_written(tmp_path, delta) -> None:
    _, location, _ = delta
    plan = plan_sql(f"SELECT * FROM iceberg_scan('{location}') WHERE user_id = 5")
    (scan,) = plan.scans
    assert scan.explanation is None
    assert scan.reason == "not a local Iceberg table's folder"
    assert plan.text == plan.query
