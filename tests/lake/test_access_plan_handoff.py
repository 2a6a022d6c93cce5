"""``Explanation.access_plan()``: the plan handed to other engines, read exactly as decided.

Every form (pyarrow, and DataFusion through it; DuckDB; Polars) must give, once the engine
applies the predicate, exactly the rows the engine finds over all the files alone; the DuckDB
and Polars forms read the plan's row ranges and nothing more. Locations: a folder with its
default index, partition folders, files of two schemas, an index kept elsewhere, a bucket.
"""

from __future__ import annotations

import os

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lake_fixtures import upload

from bloomskip.dataset import Dataset
from bloomskip.dataset.scan.plan import access_plan
from bloomskip.errors import BloomskipError

ROWS, GROUP, GRANULE = 4_000, 1_000, 100
INDEXES = ["user_id TYPE bloom_filter(0.01)", "msg TYPE tokenbf_v1(512, 2, 0)"]


def _table(number: int) -> pa.Table:
    ids = np.arange(number * ROWS, (number + 1) * ROWS, dtype=np.int64)
    return pa.table(
        {
            "user_id": ids * 7 % 100_003,
            "msg": pa.array([f"req {i} {'timeout' if i % 997 == 0 else 'ok'}" for i in ids]),
            "v": ids.astype(np.float64) / 3,
        }
    )


def _write(folder, files: int = 3, widen: bool = False) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for number in range(files):
        table = _table(number)
        if widen and number == files - 1:
            table = table.append_column("extra", pa.array(np.arange(ROWS, dtype=np.int32)))
        path = folder / f"part-{number}.parquet"
        pq.write_table(table, path, row_group_size=GROUP)
        paths.append(str(path))
    return paths


def _duckdb_rows(sql: str) -> list[tuple]:
    return sorted(duckdb.connect().sql(sql).fetchall())


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("handoff") / "data"
    files = _write(root)
    Dataset(root).build_index(INDEXES, granule=GRANULE, progress=False)
    return root, files


QUERIES = [
    ("user_id = 7 * 2345 % 100003", pl.col("user_id") == 7 * 2345 % 100_003),
    ("user_id IN (0, 70, 140, 99999)", pl.col("user_id").is_in([0, 70, 140, 99_999])),
    ("hasToken(msg, 'timeout')", pl.col("msg").str.contains("timeout", literal=True)),
]
DUCKDB_WHERE = {
    QUERIES[0][0]: "user_id = 16415",
    QUERIES[1][0]: "user_id IN (0, 70, 140, 99999)",
    QUERIES[2][0]: "contains(msg, 'timeout')",
}
DATAFUSION_WHERE = {**DUCKDB_WHERE, QUERIES[2][0]: "msg LIKE '%timeout%'"}


@pytest.mark.parametrize(("where", "polars_filter"), QUERIES)
def test_every_form_gives_the_engines_own_rows(folder, where, polars_filter) -> None:
    from datafusion import SessionContext

    root, files = folder
    plan = Dataset(root).explain(where).access_plan()
    duck_where = DUCKDB_WHERE[where]
    expected = _duckdb_rows(f"SELECT * FROM read_parquet({files}) WHERE {duck_where}")
    assert expected  # the queries match something

    assert sorted(plan.to_duckdb().filter(duck_where).fetchall()) == expected
    frame = plan.to_polars().filter(polars_filter).collect()
    assert sorted(frame.rows()) == expected
    assert frame.schema == pl.scan_parquet(files).collect_schema()

    context = SessionContext()
    context.register_dataset("events", plan.to_pyarrow())
    fused = context.sql(f"SELECT * FROM events WHERE {DATAFUSION_WHERE[where]}")
    assert sorted(tuple(row.values()) for row in fused.to_arrow_table().to_pylist()) == expected


@pytest.mark.parametrize("where", ["user_id = 16415", "user_id IN (70, 3500, 6300)"])
def test_duckdb_and_polars_read_only_the_plans_rows(folder, where) -> None:
    root, _ = folder
    plan = Dataset(root).explain(where).access_plan()
    assert 0 < plan.rows < ROWS  # granules below the row group: ranges, not row groups
    # Rows 10, 500 and 900 of the first file: three ranges in one row group.
    assert where.startswith("user_id =") or max(len(a.row_ranges) for a in plan.files) >= 3
    assert plan.to_duckdb().count("*").fetchall() == [(plan.rows,)]
    assert plan.to_polars().select(pl.len()).collect().item() == plan.rows
    # pyarrow selects row groups: the kept granules' row groups, whole.
    assert plan.to_pyarrow().to_table().num_rows == plan.row_group_count * GROUP


def test_the_plan_names_each_files_identity(folder) -> None:
    root, _ = folder
    plan = Dataset(root).explain("hasToken(msg, 'timeout')").access_plan()
    described = plan.to_dict()
    assert described["files_read"] == len(plan.files) > 0
    for entry in described["files"]:
        status = os.stat(root / entry["key"])
        assert entry["identity"] == {"size": status.st_size, "modified_ns": status.st_mtime_ns}
        assert entry["path"] == str(root / entry["key"])


def test_a_rewritten_file_shows_in_changed(tmp_path) -> None:
    root = tmp_path / "data"
    files = _write(root, files=2)
    Dataset(root).build_index(INDEXES, progress=False)
    plan = Dataset(root).explain("user_id = 16415").access_plan()
    assert plan.changed() == []
    rewritten = next(access.path for access in plan.files)
    pq.write_table(_table(5), rewritten, row_group_size=GROUP)
    assert plan.changed() == [os.path.basename(rewritten)]
    assert files  # written


def test_files_of_two_schemas_read_with_the_datasets_columns(tmp_path) -> None:
    root = tmp_path / "drift"
    files = _write(root, widen=True)
    dataset = Dataset(root)
    dataset.build_index(INDEXES, progress=False)
    plan = dataset.explain("user_id = 16415").access_plan()
    relation = plan.to_duckdb()
    assert relation.columns == ["user_id", "msg", "v", "extra"]
    expected = _duckdb_rows(
        f"SELECT * FROM read_parquet({files}, union_by_name = true) WHERE user_id = 16415"
    )
    assert sorted(relation.filter("user_id = 16415").fetchall()) == expected
    frame = plan.to_polars().filter(pl.col("user_id") == 16415).collect()
    assert sorted(frame.rows()) == expected


def test_partition_folders_carry_their_values(tmp_path) -> None:
    root = tmp_path / "parts"
    for day in ("2026-01-01", "2026-01-02"):
        _write(root / f"day={day}", files=1)
    dataset = Dataset(root)
    dataset.build_index(INDEXES, progress=False)
    plan = dataset.explain("user_id = 16415").access_plan()
    rows = plan.to_duckdb().filter("user_id = 16415").fetchall()
    answer = dataset.query("user_id = 16415").to_pylist()
    assert sorted(rows) == sorted(tuple(row.values()) for row in answer)
    assert len(rows) == 2  # one per day: the same files under both
    assert plan.to_duckdb().columns[-1] == "day"
    frame = plan.to_polars().filter(pl.col("user_id") == 16415).collect()
    assert sorted(frame.rows()) == sorted(rows)


@pytest.mark.parametrize("place", ["elsewhere", "s3"])
def test_a_segmented_index_hands_off_the_same_rows(tmp_path, place, request) -> None:
    local = tmp_path / "data"
    files = _write(local)
    if place == "elsewhere":
        dataset = Dataset(local, index_location=tmp_path / "index")
    else:
        bucket = request.getfixturevalue("bucket")
        upload(local, f"s3://{bucket}/data")
        dataset = Dataset(f"s3://{bucket}/data")
    dataset.build_index(INDEXES, progress=False)
    plan = dataset.explain("user_id = 16415").access_plan()
    expected = _duckdb_rows(f"SELECT * FROM read_parquet({files}) WHERE user_id = 16415")
    assert sorted(plan.to_duckdb().filter("user_id = 16415").fetchall()) == expected
    frame = plan.to_polars().filter(pl.col("user_id") == 16415).collect()
    assert sorted(frame.rows()) == expected
    assert plan.changed() == []
    if place == "s3":
        assert plan.files[0].identity["etag"]


def test_a_plan_built_by_hand_has_no_files_to_read() -> None:
    plan = access_plan([("a.parquet", "a.parquet", [4])], [np.array([True])])
    with pytest.raises(BloomskipError, match="make it with Dataset.explain"):
        plan.to_duckdb()


def test_scan_polars_reads_a_bucket(tmp_path, bucket) -> None:
    local = tmp_path / "data"
    files = _write(local)
    upload(local, f"s3://{bucket}/data")
    dataset = Dataset(f"s3://{bucket}/data")
    dataset.build_index(INDEXES, granule=GRANULE, progress=False)
    wanted = pl.col("user_id").is_in([16415, 70, 99_999])
    frame = dataset.scan_polars().filter(wanted).collect()
    expected = pl.scan_parquet(files).filter(wanted).collect()
    assert sorted(frame.rows()) == sorted(expected.rows())
    assert frame.schema == expected.schema


def test_scan_polars_drops_a_delta_tables_deleted_rows(tmp_path) -> None:
    from deltalake import DeltaTable, write_deltalake

    location = tmp_path / "table"
    for number in range(2):
        write_deltalake(str(location), _table(number), mode="append")
    DeltaTable(str(location)).delete("user_id = 16415")
    dataset = Dataset(location)
    dataset.build_index(INDEXES, progress=False)
    wanted = pl.col("user_id").is_in([16415, 70, 140])
    frame = dataset.scan_polars().filter(wanted).collect()
    expected = pl.from_arrow(DeltaTable(str(location)).to_pyarrow_table()).filter(wanted)
    assert sorted(frame.rows()) == sorted(expected.rows())
    assert 16415 not in frame["user_id"].to_list()
