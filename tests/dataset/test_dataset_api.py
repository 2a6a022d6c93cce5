"""Arrow IPC datasets, globs, zero-copy hand-off to DuckDB / Polars, and the demo data."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dataset_fixtures import INDEXES, make_table, write_dataset

from bloomskip.dataset import Dataset, default_sidecar_path
from bloomskip.dataset.demo import RARE_TOKEN, generate_logs, run_demo
from bloomskip.dataset.prune import granules_to_units
from bloomskip.dataset.sql.translate import clickhouse_to_duckdb
from bloomskip.errors import BloomskipError

WHERES = ["hasToken(s, 'naïve')", "k IN (13, 2600)", "has(tags, '東京') AND d = 'red'"]


def _duckdb_ids(table: pa.Table, where: str) -> list[int]:
    connection = duckdb.connect()
    connection.register("source", table)
    sql = f"SELECT id FROM source WHERE {clickhouse_to_duckdb(where)}"
    return sorted(row[0] for row in connection.sql(sql).fetchall())


def test_arrow_ipc_file_record_batch_granules(tmp_path) -> None:
    path = tmp_path / "data.arrow"
    batches = [make_table(rows, seed, seed * 1000).to_batches()[0]
               for seed, rows in enumerate([300, 1, 250, 400])]  # fmt: skip
    source = pa.Table.from_batches(batches)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, source.schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    dataset = Dataset(path)
    assert dataset.files[0].format == "arrow-ipc"
    dataset.build_index(INDEXES, progress=False)
    assert Path(dataset.index_location).is_dir()
    for where in WHERES:
        got = sorted(dataset.query(where, ["id"]).column("id").to_pylist())
        assert got == _duckdb_ids(source, where), where
        assert {group for _, group in dataset.explain(where).row_groups()} <= {0, 1, 2, 3}


def test_glob_dataset_and_handoff_to_duckdb_and_polars(tmp_path) -> None:
    write_dataset(tmp_path / "g", [(900, 100), (700, 64)], seed=3)
    (tmp_path / "g" / "notes.txt").write_text("not data")
    pattern = str(tmp_path / "g" / "part-*.parquet")
    dataset = Dataset(pattern)
    assert Path(dataset.index_location).name.startswith("_bloomskip-")
    dataset.build_index(INDEXES, progress=False)
    source = pa.concat_tables(pq.read_table(f.path) for f in dataset.files)
    where = "k IN (13, 2613) OR k = 5213"
    expected = _duckdb_ids(source, where)
    pruned = dataset.explain(where).to_dataset()
    # Not pruned.count_rows(): pyarrow 26 counts whole files for row-group-subset fragments.
    surviving_rows = pruned.to_table(columns=["id"]).num_rows
    assert surviving_rows < source.num_rows / 2
    assert duckdb.sql("SELECT count(*) FROM pruned").fetchall() == [(surviving_rows,)]
    exact = clickhouse_to_duckdb(where)
    via_duckdb = duckdb.sql(f"SELECT id FROM pruned WHERE {exact}").fetchall()
    assert sorted(row[0] for row in via_duckdb) == expected
    frame = pl.scan_pyarrow_dataset(pruned).filter(pl.col("k").is_in([13, 2613, 5213])).collect()
    assert sorted(frame.get_column("id").to_list()) == expected


def test_handoff_of_files_with_different_schemas_has_the_scan_schema(tmp_path) -> None:
    # Before: the hand-off took each column's type from the first file holding it, so an int64
    # beyond int32 or a string read under int64 failed to cast when a later file survived.
    directory = tmp_path / "drift"
    directory.mkdir()
    first = {"k": ["a0", "a1"], "x": pa.array([1, 2], pa.int32()), "y": [10, 20]}
    pq.write_table(pa.table(first), directory / "part-0.parquet")
    later = {"k": ["b0", "b1"], "x": [2**40, 3], "y": ["p", "q"], "z": [0.5, 1.5]}
    pq.write_table(pa.table(later), directory / "part-1.parquet")
    for dataset in (
        Dataset(directory),
        Dataset(directory, sidecar=default_sidecar_path(directory)),
    ):
        _check_drift(dataset, directory)


def _check_drift(dataset: Dataset, directory) -> None:
    dataset.build_index(["k TYPE bloom_filter(0.01)"], progress=False)
    listing = ", ".join(f"'{path}'" for path in sorted(directory.glob("*.parquet")))
    scan = f"read_parquet([{listing}], union_by_name = true)"
    for where, survivors in (("k = 'b1'", {"part-1"}), ("k IN ('a0', 'b0')", {"part-0", "part-1"})):
        explanation = dataset.explain(where)
        assert {path.stem for path, _ in explanation.row_groups()} == survivors
        handed = explanation.to_dataset()
        assert handed.schema == dataset.scan_schema()
        exact = clickhouse_to_duckdb(where)
        rows = duckdb.sql(f"SELECT * FROM handed WHERE {exact} ORDER BY k").fetchall()
        assert rows == duckdb.sql(f"SELECT * FROM {scan} WHERE {exact} ORDER BY k").fetchall()
        queried = dataset.query(where).sort_by("k").to_pylist()
        assert rows == [tuple(row.values()) for row in queried]


def test_fixed_row_granules_map_to_overlapping_row_groups() -> None:
    assert granules_to_units([4, 4, 2], [False, True, False], [5, 5]).tolist() == [True, True]
    assert granules_to_units([4, 4, 2], [True, False, False], [5, 5]).tolist() == [True, False]
    assert granules_to_units([4, 4, 2], [False, False, True], [5, 5]).tolist() == [False, True]
    assert granules_to_units([3, 3], [False, False], [2, 4]).tolist() == [False, False]
    rows = np.full(10, 7)
    assert granules_to_units(rows, np.ones(10, bool), [70]).tolist() == [True]


def test_empty_row_groups_and_limit(tmp_path) -> None:
    path = tmp_path / "empty.parquet"
    table = make_table(200, 1, 0)
    with pq.ParquetWriter(path, table.schema) as writer:
        writer.write_table(table.slice(0, 0))
        writer.write_table(table, row_group_size=50)
    dataset = Dataset(path)
    dataset.build_index(INDEXES, progress=False)
    assert dataset.query("k >= 0", ["id"], limit=7).num_rows == 7
    assert sorted(dataset.query("k = 13", ["id"]).column("id").to_pylist()) == _duckdb_ids(
        table, "k = 13"
    )


def test_missing_dataset_is_a_user_error(tmp_path) -> None:
    with pytest.raises(BloomskipError, match="no such file"):
        Dataset(tmp_path / "nothing")
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(BloomskipError, match="not a Parquet"):
        Dataset(tmp_path / "x.csv")
    (tmp_path / "cut.parquet").write_bytes(b"PAR1" + b"\0" * 64)  # magic, but no footer
    with pytest.raises(BloomskipError, match="cannot read the schema"):
        Dataset(tmp_path / "cut.parquet").build_index(["x TYPE bloom_filter"], progress=False)
    ipc = tmp_path / "bad.arrow"
    table = pa.table({"x": [1, 2, 3]})
    with pa.ipc.new_file(ipc, table.schema) as writer:
        writer.write_table(table)
    damaged = bytearray(ipc.read_bytes())
    damaged[200:230] = b"\xff" * 30  # inside the record batch's metadata, before the footer
    ipc.write_bytes(bytes(damaged))
    with pytest.raises(BloomskipError, match="bad.arrow: cannot (read|index) it"):
        Dataset(ipc).build_index(["x TYPE bloom_filter"], progress=False)


def test_generated_logs_are_deterministic_and_shaped() -> None:
    first = generate_logs(5000, seed=1, first_row=100)
    assert first.equals(generate_logs(5000, seed=1, first_row=100))
    assert pa.types.is_dictionary(first.schema.field("level").type)
    assert first.column("trace_id").to_pylist()[0].isalnum()
    assert len(first.column("trace_id")[0].as_py()) == 32


def test_demo_runs_and_agrees_with_duckdb(tmp_path, capsys) -> None:
    results = run_demo(tmp_path / "demo", rows=300_000)
    output = capsys.readouterr().out
    assert "point lookup (present)" in output and "DuckDB" in output
    by_query = {row["query"]: row for row in results}
    assert by_query["point lookup (present)"]["rows"] >= 1
    assert by_query["point lookup (absent)"]["rows"] == 0
    for row in results:
        assert row["rows"] == row["duckdb_rows"]
    assert by_query["point lookup (present)"]["scanned"] < 300_000 / 2
    assert RARE_TOKEN in by_query["token search"]["where"]


@pytest.mark.parametrize(
    "definition",
    ["d TYPE bloom_filter(0.01)", "d TYPE tokenbf_v1(64, 2, 0)", "d TYPE ngrambf_v1(2, 64, 3, 5)"],
)
def test_dictionary_column_hashes_distinct_values_once(definition: str) -> None:
    from bloomskip.clickhouse.index import SkipIndex
    from bloomskip.dataset.build.indexing import granule_payloads, prepare_index

    table = make_table(700, 4, 0).select(["d"])
    prepared = prepare_index(definition, table.schema)
    assert dict(prepared.spec.column_types) == {"d": "LowCardinality(String)"}
    # The engine over every row (plain strings) must give the same granule as our
    # distinct-values shortcut over the dictionary column.
    decoded = table.cast(pa.schema([("d", pa.string())]))
    every_row = SkipIndex.build(prepared.definition, decoded, [700], {"d": "String"}).to_bytes()
    assert granule_payloads(table, [prepared]) == [every_row]


def test_directory_with_a_stray_file_and_a_vanished_file(tmp_path) -> None:
    paths = write_dataset(tmp_path / "d", [(200, 50), (200, 50)])
    (tmp_path / "d" / "notes.txt").write_text("not parquet")
    with pytest.raises(BloomskipError, match="not a Parquet"):
        Dataset(tmp_path / "d")
    (tmp_path / "d" / "notes.txt").unlink()
    dataset = Dataset(tmp_path / "d")
    paths[1].unlink()
    # A file removed since the last call is no longer listed: the kept object answers as a new
    # one does.
    assert dataset.query("k = 13").equals(Dataset(tmp_path / "d").query("k = 13"))
    assert [source.path for source in dataset.files] == [paths[0].resolve()]
