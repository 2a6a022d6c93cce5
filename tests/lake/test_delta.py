"""Delta Lake tables written by the real writer (``deltalake``), indexed and queried by snapshot.

Every query's rows are checked against deltalake's own reader at the same version (filtered
exactly by DuckDB): appends, a copy-on-write delete, a schema change, an overwrite, partitions.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
import pytest
from dataset_fixtures import INDEXES, make_table
from test_dataset_query_corpus import PREDICATES

from bloomskip import BloomskipError, Dataset
from bloomskip.cli import main
from bloomskip.dataset.backends.table import TableDataset
from bloomskip.dataset.listing.tables.delta import storage_options
from bloomskip.dataset.sql.translate import clickhouse_to_duckdb

deltalake = pytest.importorskip("deltalake")
ROW_GROUP_ROWS = 200


def _write(location: str, table: pa.Table, **options) -> None:
    deltalake.write_deltalake(
        location,
        table,
        writer_properties=deltalake.WriterProperties(max_row_group_size=ROW_GROUP_ROWS),
        storage_options=storage_options(location) or None,
        **options,
    )


def _table(location: str, version: int | None = None):
    table = deltalake.DeltaTable(location, storage_options=storage_options(location) or None)
    if version is not None:
        table.load_as_version(version)
    return table


def _expected_ids(location: str, version: int, where: str) -> list[int]:
    """deltalake's reader at ``version``, filtered exactly as the WHERE means."""
    rows = _table(location, version).to_pyarrow_table()  # noqa: F841 - read by DuckDB below
    condition = clickhouse_to_duckdb(where)
    return sorted(r[0] for r in duckdb.sql(f"SELECT id FROM rows WHERE {condition}").fetchall())


def _with_partition(table: pa.Table) -> pa.Table:
    import pyarrow.compute as pc

    part = pc.cast(pc.bit_wise_and(table.column("id"), 1), pa.string())
    return table.append_column("p", part)


@pytest.fixture
def delta_location(request, tmp_path) -> str:
    if getattr(request, "param", "local") == "local":
        return str(tmp_path / "events")
    bucket = request.getfixturevalue("bucket")
    return f"s3://{bucket}/lake/events"


def _sample_keys(location: str) -> dict[str, int]:
    ks = _table(location, 0).to_pyarrow_table().column("k").to_pylist()
    ks = [k for k in ks if k is not None]
    return {"k0": ks[5], "k1": ks[len(ks) // 2], "k2": ks[-3]}


def test_corpus_at_every_version_equals_deltalakes_reader(tmp_path):
    location = str(tmp_path / "events")
    versions = []
    # Written and refreshed version by version, as a table's index is kept up.
    _write(location, _with_partition(make_table(1500, 1, 0)), partition_by=["p"])
    Dataset(location).build_index(INDEXES, progress=False)
    versions.append(0)
    _write(location, _with_partition(make_table(1200, 2, 1500)), mode="append")
    _table(location).delete("id % 5 = 0")
    report = Dataset(location).build_index(progress=False)
    assert report.removed, "the delete rewrote files: their old versions leave the live index"
    extra = _with_partition(make_table(900, 3, 2700))
    extra = extra.append_column("extra", pa.array([f"e{i}" for i in range(900)]))
    _write(location, extra, mode="append", schema_mode="merge")
    replacement = extra.filter(pa.compute.equal(extra.column("p"), "1")).slice(0, 200)
    _write(location, replacement, mode="overwrite", predicate="p = '1'")
    Dataset(location).build_index(progress=False)
    versions = list(range(_table(location).version() + 1))
    assert len(versions) >= 5
    keys = _sample_keys(location)
    pruned = 0
    for version in versions:
        table = Dataset(location, version=version)
        assert isinstance(table.backend, TableDataset) and table.snapshot.snapshot == version
        for template in PREDICATES + ["p = '1'", "p = '0' AND k = {k0}", "extra = 'e7'"]:
            where = template.format(**keys)
            if "extra" in where and version < 3:
                continue  # no such column before the schema change
            explanation = table.explain(where)
            got = table.run(explanation, where, ["id"]).column("id").to_pylist()
            assert sorted(got) == _expected_ids(location, version, where), (version, where)
            pruned += sum(outcome.granules_skipped for outcome in explanation.indexes) > 0
    assert pruned > len(versions) * len(PREDICATES) // 4
    # Version 0's files were all removed or rewritten since; its index is an older manifest's.
    oldest = Dataset(location, version=0).explain(f"k = {keys['k0']}")
    assert all(state.status == "indexed" for state in oldest.files), [
        (state.relative_path, state.status) for state in oldest.files
    ]


def test_a_deleted_row_never_comes_back(tmp_path, capsys):
    """The issue's case: a folder read as files returned rows the table had deleted."""
    location = str(tmp_path / "t")
    _write(location, make_table(1000, 5, 0))
    assert main(["index", "build", location, "--index", "INDEX k_bf k TYPE bloom_filter"]) == 0
    victim = _table(location).to_pyarrow_table().column("k")[10].as_py()
    _table(location).delete(f"k = {victim}")
    capsys.readouterr()
    assert main(["query", location, "--where", f"k = {victim}", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out or "[]") == []
    assert main(["query", location, "--where", f"k = {victim}", "--version", "0"]) == 0
    assert str(victim) in capsys.readouterr().out


def test_refresh_after_one_append_indexes_only_the_new_file(tmp_path):
    location = str(tmp_path / "t")
    _write(location, make_table(800, 1, 0))
    _write(location, make_table(800, 2, 800), mode="append")
    first = Dataset(location).build_index(INDEXES, progress=False)
    assert len(first.rebuilt) == 2
    _write(location, make_table(300, 3, 1600), mode="append")
    refresh = Dataset(location).build_index(progress=False)
    (new_file,) = set(_table(location).file_uris()) - {
        os.path.join(os.path.abspath(location), key) for key in first.rebuilt
    }
    assert [os.path.join(os.path.abspath(location), key) for key in refresh.rebuilt] == [new_file]
    assert refresh.segments_written == 1 and refresh.removed == []
    manifest = Dataset(location).latest_manifest()
    assert manifest.table == {"format": "delta", "snapshot": 2, "sequence": 2}


def test_explain_shows_the_tables_own_pruning_then_the_index(tmp_path, capsys):
    location = str(tmp_path / "t")
    _write(location, _with_partition(make_table(2000, 1, 0)), partition_by=["p"])
    assert main(["index", "build", location, "--index", "INDEX k_bf k TYPE bloom_filter"]) == 0
    capsys.readouterr()
    assert main(["query", location, "--where", "p = '1' AND k = 13", "--explain"]) == 0
    text = capsys.readouterr().out
    assert "table delta snapshot 0: its partition values and statistics keep 1/2 files" in text
    assert "granules skipped" in text


def test_an_index_on_a_partition_column_is_refused(tmp_path, capsys):
    location = str(tmp_path / "t")
    _write(location, _with_partition(make_table(300, 1, 0)), partition_by=["p"])
    assert main(["index", "build", location, "--index", "p TYPE bloom_filter"]) == 2
    err = capsys.readouterr().err
    assert "partition column" in err and err.count("\n") == 1


def test_bad_versions_and_options_are_one_line_errors(tmp_path, capsys):
    location = str(tmp_path / "t")
    _write(location, make_table(300, 1, 0))
    cases = [
        ["query", location, "--where", "k = 1", "--version", "7"],
        ["query", location, "--where", "k = 1", "--snapshot-id", "7"],
        ["query", location, "--where", "k = 1", "--as-of", "yesterday"],
        ["query", location, "--where", "k = 1", "--as-of", "1990-01-01T00:00:00Z"],
        ["query", str(tmp_path), "--where", "k = 1", "--version", "0"],
    ]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("bloomskip: ") and err.count("\n") == 1, (argv, err)
        assert "Traceback" not in err
    _write(location, make_table(100, 2, 300), mode="append")
    with pytest.raises(BloomskipError, match="newest snapshot"):
        Dataset(location, version=0).build_index(INDEXES, progress=False)


def test_a_refused_reader_feature_is_named(tmp_path):
    location = str(tmp_path / "mapped")
    deltalake.DeltaTable.create(
        location,
        schema=make_table(10, 1, 0).schema,
        configuration={"delta.columnMapping.mode": "name"},
    )
    with pytest.raises(BloomskipError, match="columnMapping"):
        Dataset(location)


def test_a_file_changed_behind_the_log_is_scanned_with_a_warning(tmp_path):
    location = tmp_path / "t"
    _write(str(location), make_table(600, 1, 0))
    Dataset(location).build_index(INDEXES, progress=False)
    (data_file,) = sorted(location.glob("*.parquet"))
    import pyarrow.parquet as pq

    rewritten = make_table(700, 9, 0)
    pq.write_table(rewritten, data_file)
    k = rewritten.column("k")[650].as_py()
    table = Dataset(location)
    explanation = table.explain(f"k = {k}")
    assert any("changed behind" in warning for warning in explanation.warnings)
    got = table.run(explanation, f"k = {k}", ["id"]).column("id").to_pylist()
    assert 650 in got  # read from the file as it is now, never pruned with stale bits
    data_file.unlink()
    with pytest.raises(BloomskipError, match="storage does not hold it"):
        Dataset(location).query(f"k = {k}")


@pytest.mark.parametrize("delta_location", ["s3"], indirect=True)
def test_a_table_on_the_s3_server(delta_location):
    try:
        _write(delta_location, make_table(900, 1, 0))
        _write(delta_location, make_table(900, 2, 900), mode="append")
        _table(delta_location).delete("id % 3 = 0")
    except deltalake.exceptions.DeltaError as exc:
        pytest.fail(f"deltalake cannot write to the S3 server: {exc}")
    table = Dataset(delta_location)
    assert isinstance(table.backend, TableDataset)
    table.build_index(INDEXES, progress=False)
    assert table.log.store.uri == f"{delta_location}/_bloomskip"
    keys = _sample_keys(delta_location)
    for version in range(3):
        for template in ("k = {k0}", "hasToken(s, 'timeout')", "k IN ({k0}, {k2})"):
            where = template.format(**keys)
            got = Dataset(delta_location, version=version).query(where, ["id"])
            assert sorted(got.column("id").to_pylist()) == _expected_ids(
                delta_location, version, where
            ), (version, where)


def test_status_and_vacuum_work_on_a_table(tmp_path, capsys):
    location = str(tmp_path / "t")
    _write(location, make_table(300, 1, 0))
    assert main(["index", "build", location, "--index", "INDEX k_bf k TYPE bloom_filter"]) == 0
    capsys.readouterr()
    assert main(["index", "status", location, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["files"] == 1 and status["files_indexed"] == 1
    assert Path(location, "_bloomskip").is_dir()


def test_files_rewritten_with_view_types_are_filtered_exactly(tmp_path):
    """deltalake's delete rewrites a file with ``string_view`` in its Arrow schema beside the
    files written as ``string``; pyarrow's dataset filter has no kernels for view types, so such
    a file must not be filtered by pyarrow (it raised "no kernel matching input types")."""
    import pyarrow.parquet as pq

    location = str(tmp_path / "t")
    table = make_table(600, 4, 0)
    _write(location, table.append_column("name", pa.compute.cast(table.column("id"), pa.string())))
    _write(
        location,
        make_table(400, 5, 600).append_column("name", pa.array([f"{n}" for n in range(600, 1000)])),
        mode="append",
    )
    Dataset(location).build_index(["INDEX name_bf name TYPE bloom_filter(0.01)"], progress=False)
    _table(location).delete("id = 3 OR id = 700")
    types = {
        str(pq.read_schema(uri.removeprefix("file://")).field("name").type)
        for uri in _table(location).file_uris()
    }
    assert "string_view" in types  # the case itself, as deltalake 1.6 writes it
    for where in ["name = '5'", "name = '3'", "name IN ('700', '701', '2')", "s LIKE '%a%'"]:
        got = sorted(Dataset(location).query(where, columns=["id"]).column("id").to_pylist())
        assert got == _expected_ids(location, 2, where), where


def test_a_long_in_list_still_prunes_by_the_tables_partitions(tmp_path, capsys):
    """A list of 64 or more literals is read without sqlglot (``_sql.parse_shared``): the
    table's own pruning must still get it as an ``IN`` (it was silently dropped)."""
    location = str(tmp_path / "t")
    _write(location, _with_partition(make_table(2000, 1, 0)), partition_by=["p"])
    assert main(["index", "build", location, "--index", "INDEX k_bf k TYPE bloom_filter"]) == 0
    capsys.readouterr()
    partitions = ", ".join(["'1'"] + [f"'x{n}'" for n in range(99)])
    where = f"p IN ({partitions}) AND id IN ({', '.join(map(str, range(1, 400, 2)))})"
    assert main(["query", location, "--where", where, "--explain"]) == 0
    assert "its partition values and statistics keep 1/2 files" in capsys.readouterr().out
    got = sorted(Dataset(location).query(where, columns=["id"]).column("id").to_pylist())
    assert got == _expected_ids(location, 0, where)
