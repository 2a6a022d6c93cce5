"""A segmented index over every kind of local dataset: a glob, one file, Arrow IPC files (issue
29, item 1, stage 1).

Before, ``Dataset(path, index_location=...)`` took only a folder of Parquet files: a glob or a
single file was refused ("not one object or a glob") and an Arrow IPC file was "not a Parquet
file by its name". Now the segmented backend lists local files exactly as the sidecar does
(``listing/local.py`` over ``FolderListing``), and its rows are the sidecar's and DuckDB's over
the raw files.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dataset_fixtures import INDEXES, make_table, write_dataset

import bloomskip
from bloomskip import BloomskipError
from bloomskip.dataset.backends.lake import LakeDataset
from bloomskip.dataset.index.segments import CHECKPOINT_INTERVAL
from bloomskip.dataset.listing.folder import FolderListing
from bloomskip.dataset.listing.local import LocalListing
from bloomskip.dataset.sql.translate import clickhouse_to_duckdb

# Point lookups (one file's, none's, several files') and token searches, each pruned.
WHERES = [
    "k = 1313",
    "k = -5",
    "k IN (13, 5213, 9113)",
    "hasToken(s, 'timeout')",
    "hasToken(s, '東京') AND k < 4000",
    "k = 1313 OR hasToken(s, 'naïve')",
    "has(tags, 'café')",
]
PRUNED = ["k = 1313", "k = -5", "k IN (13, 5213, 9113)"]


def _write_ipc(path: Path, table: pa.Table, batch_rows: int) -> None:
    """An Arrow IPC file, replaced whole (a reader mapping the old one keeps its bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    written = path.with_name(f".{path.name}.tmp")
    with pa.ipc.new_file(str(written), table.schema) as writer:
        writer.write_table(table, max_chunksize=batch_rows)
    os.replace(written, path)


def _read(path: Path) -> pa.Table:
    if path.suffix == ".parquet":
        return pq.read_table(path)
    with pa.OSFile(str(path)) as handle:  # read into memory: the file may be rewritten
        return pa.ipc.open_file(handle).read_all()


def _duckdb_ids(files: list[Path], where: str) -> list[int]:
    """The reference: DuckDB over the raw files (Parquet by its reader, IPC through Arrow)."""
    connection = duckdb.connect()
    if files[0].suffix == ".parquet":
        source = "read_parquet([" + ", ".join(f"'{path}'" for path in files) + "])"
    else:
        connection.register("source", pa.concat_tables([_read(path) for path in files]))
        source = "source"
    sql = f"SELECT id FROM {source} WHERE {clickhouse_to_duckdb(where)} ORDER BY id"
    return [row[0] for row in connection.sql(sql).fetchall()]


def _ids(dataset, where: str) -> list[int]:
    return sorted(dataset.query(where, ["id"]).column("id").to_pylist())


@pytest.fixture()
def parquet_folder(tmp_path: Path) -> Path:
    """``data/part-0..2.parquet`` and ``data/sub/part-10.parquet``, with hidden files beside."""
    data = tmp_path / "data"
    write_dataset(data, [(3000, 500), (2000, 400), (2500, 500)])
    (data / "sub").mkdir()
    pq.write_table(make_table(1500, 10, 7500), data / "sub" / "part-10.parquet", row_group_size=300)
    (data / "_SUCCESS").write_bytes(b"")
    (data / ".part-0.parquet.crc").write_bytes(b"x")
    return data


@pytest.fixture()
def ipc_folder(tmp_path: Path) -> Path:
    data = tmp_path / "ipc"
    for number in range(3):
        _write_ipc(data / f"part-{number}.arrow", make_table(2000, number, number * 2000), 400)
    return data


def _cases(parquet_folder: Path, ipc_folder: Path) -> dict[str, str]:
    return {
        "glob": str(parquet_folder / "*.parquet"),
        "recursive glob": str(parquet_folder / "**" / "part-1*.parquet"),
        "file": str(parquet_folder / "part-1.parquet"),
        "ipc folder": str(ipc_folder),
        "ipc glob": str(ipc_folder / "part-[12].arrow"),
    }


@pytest.mark.parametrize("case", ["glob", "recursive glob", "file", "ipc folder", "ipc glob"])
def test_a_segmented_index_serves_the_rows_of_the_sidecar_and_of_duckdb(
    case: str, parquet_folder: Path, ipc_folder: Path, tmp_path: Path
) -> None:
    path = _cases(parquet_folder, ipc_folder)[case]
    segmented = bloomskip.Dataset(path, index_location=tmp_path / "index")
    sidecar = bloomskip.Dataset(path)
    assert segmented.segmented and type(segmented.listing) is LocalListing
    listed = FolderListing(path).list()
    files = [source.path for source in listed.files]
    keys = [Path(os.path.relpath(file, listed.root)).as_posix() for file in files]
    report = segmented.build_index(INDEXES, progress=False)
    sidecar.build_index(INDEXES, progress=False)
    # Exactly the sidecar's files, named as it names them (relative to the same root).
    assert report.rebuilt == keys and report.layout == "segmented"
    assert [state.relative_path for state in segmented.explain("k = 1").files] == keys
    for where in WHERES:
        expected = _duckdb_ids(files, where)
        assert _ids(segmented, where) == _ids(sidecar, where) == expected, where
    for where in PRUNED:
        explanation = segmented.explain(where)
        units = sum(len(state.layout.rows) for state in explanation.files)
        assert len(explanation.row_groups()) < units, where
        assert explanation.row_groups() == sidecar.explain(where).row_groups(), where
    status = segmented.status()
    assert status["files_indexed"] == len(keys) and not status["not_indexed"]


@pytest.mark.parametrize("case", ["glob", "file", "ipc folder"])
def test_a_changed_file_is_scanned_and_a_new_one_picked_up_by_the_next_build(
    case: str, parquet_folder: Path, ipc_folder: Path, tmp_path: Path
) -> None:
    path = _cases(parquet_folder, ipc_folder)[case]
    dataset = bloomskip.Dataset(path, index_location=tmp_path / "index")
    dataset.build_index(INDEXES, progress=False)
    files = [source.path for source in FolderListing(path).list().files]
    changed = files[-1]
    # The row k = -5 now lives in the changed file: an index that pruned it would lose it.
    table = _read(changed)
    k = table.column("k").to_pylist()
    k[7] = -5
    table = table.set_column(table.schema.get_field_index("k"), "k", pa.array(k, pa.int64()))
    if changed.suffix == ".parquet":
        pq.write_table(table, changed, row_group_size=500)
    else:
        _write_ipc(changed, table, 400)
    with pytest.warns(bloomskip.BloomskipWarning):
        explanation = dataset.explain("k = -5")
    assert explanation.changed_files == [explanation.files[-1].relative_path]
    assert _ids(dataset, "k = -5") == _duckdb_ids(files, "k = -5") == [table["id"][7].as_py()]
    if case == "file":
        return  # one file's dataset has no room for another
    added = changed.with_name(f"part-9{changed.suffix}")
    new = make_table(500, 99, 50_000)
    if added.suffix == ".parquet":
        pq.write_table(new, added, row_group_size=100)
    else:
        _write_ipc(added, new, 100)
    lookup = f"k = {new['k'][3].as_py()}"
    with pytest.warns(bloomskip.BloomskipWarning):
        assert _ids(dataset, lookup) == _duckdb_ids(files + [added], lookup)
    report = dataset.build_index(progress=False)
    assert report.rebuilt == sorted([explanation.files[-1].relative_path, added.name])
    explanation = dataset.explain(lookup)
    assert not explanation.changed_files and not explanation.unindexed_files
    assert _ids(dataset, lookup) == _duckdb_ids(files + [added], lookup)


@pytest.mark.parametrize("pattern", ["", "*.parquet"])
def test_a_warm_local_query_stats_each_file_once(
    pattern: str, parquet_folder: Path, tmp_path: Path, monkeypatch
) -> None:
    dataset = bloomskip.Dataset(parquet_folder / pattern, index_location=tmp_path / "index")
    dataset.build_index(INDEXES, progress=False)
    where = "k = 1313"
    expected = _ids(dataset, where)  # warm: index read, DuckDB open
    read = {str(path) for path, _ in dataset.explain(where).row_groups()}
    counts: dict[str, int] = {}
    real_stat = os.stat

    def counting_stat(path, *args, **kwargs):
        name = str(os.fspath(path))
        if name.endswith(".parquet") and "*" not in name:  # the files, not the pattern
            counts[name] = counts.get(name, 0) + 1
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counting_stat)
    assert _ids(dataset, where) == expected
    monkeypatch.undo()
    # A folder's listing stats each file through its directory entry (os.scandir), a glob's
    # with one os.stat each; the files read are stat-ed once more, after the read.
    listed = {str(source.path) for source in FolderListing(parquet_folder / pattern).list().files}
    once = dict.fromkeys(listed, 1) if pattern else {}
    assert read and counts == {**once, **{name: once.get(name, 0) + 1 for name in read}}


def test_an_index_inside_the_folder_is_not_listed_as_data(parquet_folder: Path) -> None:
    touched = parquet_folder / "part-0.parquet"
    for index in (parquet_folder / "idx", parquet_folder / "_bloomskip"):
        for path in (parquet_folder, parquet_folder / "**" / "*.parquet"):
            dataset = bloomskip.Dataset(path, index_location=index)
            dataset.build_index(INDEXES[:1], progress=False)
            for number in range(CHECKPOINT_INTERVAL + 1):
                # A file touched is indexed again: a commit each, then a Parquet checkpoint
                # inside the index, which the recursive glob would otherwise match.
                os.utime(touched, ns=(number * 10**9, number * 10**9))
                dataset.build_index(progress=False)
            assert list(index.glob("versions/*.checkpoint.*.parquet"))
            keys = [state.relative_path for state in dataset.explain("k = 1313").files]
            assert keys == [
                os.path.relpath(source.path, parquet_folder)
                for source in FolderListing(path, skip=index).list().files
            ]
            assert not any(key.startswith(("idx/", "_bloomskip/")) for key in keys)
            assert dataset.status()["files_indexed"] == len(keys)
            dataset.drop()


def test_object_stores_still_take_only_a_prefix() -> None:
    for location in ("s3://bucket/logs/*.parquet", "s3://bucket/logs/part-0.parquet"):
        with pytest.raises(BloomskipError, match="not one object or a glob"):
            LakeDataset(location)


def test_a_segment_says_whether_its_files_hold_exactly_its_schema(tmp_path: Path) -> None:
    # Before: a segment recorded its files' unified schema only, so a file lacking a column
    # the others hold looked like them, and DuckDB was told to read it by path as if it had.
    from bloomskip.dataset.build.segment_writer import FILES_KEY
    from bloomskip.dataset.index.segments import decode_schema

    folder = tmp_path / "wide"
    folder.mkdir()
    pq.write_table(pa.table({"k": [1, 2, 3], "s": ["a", "b", "c"]}), folder / "a.parquet")
    pq.write_table(pa.table({"k": [6, 7], "s": ["f", "g"], "x": [1.5, 2.5]}), folder / "c.parquet")
    same = tmp_path / "same"
    same.mkdir()
    for name, start in (("a", 0), ("b", 10)):
        pq.write_table(pa.table({"k": [start, start + 1]}), same / f"{name}.parquet")
    for location, kind in ((folder, b"several"), (same, b"one")):
        dataset = bloomskip.Dataset(location)
        dataset.build_index(["k TYPE bloom_filter(0.01)"], progress=False)
        dataset.build_index(["INDEX again k TYPE bloom_filter(0.05)"], progress=False)
        dataset.compact()  # the merged segment says what the segments it merged said
        (segment,) = dataset.backend.latest_manifest().segments
        assert decode_schema(segment.schema).metadata[FILES_KEY] == kind
    rows = bloomskip.Dataset(folder).query("k IN (2, 7)").sort_by("k").to_pylist()
    assert rows == [{"k": 2, "s": "b", "x": None}, {"k": 7, "s": "g", "x": 2.5}]
    assert bloomskip.Dataset(same).query("k = 11").to_pylist() == [{"k": 11}]
