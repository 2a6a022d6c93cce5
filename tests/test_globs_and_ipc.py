"""Globs inside an indexed folder use the folder's index, and folders of Arrow IPC files
(issue 17): the rows are always those DuckDB returns over the raw files, whatever the index."""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from bloomskip.cli import main
from bloomskip.dataset import Dataset
from bloomskip.dataset.sql.translate import clickhouse_to_duckdb
from bloomskip.errors import BloomskipError

INDEXES = ["INDEX k_bf k TYPE bloom_filter(0.01)", "INDEX s_tok s TYPE tokenbf_v1(1024, 3, 0)"]
WORDS = ["alpha", "beta", "timeout", "naïve", "東京", "error"]
# Present in one file only, absent, and token searches: each is pruned by one of the indexes.
WHERES = [
    "k = 1313",
    "k = -5",
    "k IN (13, 2613, 5213)",
    "hasToken(s, 'timeout')",
    "hasToken(s, 'naïve') AND k < 3000",
    "k = 1313 OR hasToken(s, '東京')",
]


def make_table(first: int, rows: int) -> pa.Table:
    """Ids ``first..``, a clustered key ``k`` with nulls, words in ``s`` with nulls."""
    ids = np.arange(first, first + rows, dtype=np.int64)
    words = np.array(WORDS, dtype=object)
    text = words[ids % len(WORDS)] + " " + words[(ids // 7) % len(WORDS)]
    return pa.table(
        {
            "id": ids,
            "k": pa.array(ids * 13 // 10, mask=ids % 23 == 0),
            "s": pa.array(text.tolist(), mask=ids % 31 == 0),
        }
    )


def write_parquet(directory: Path, name: str, first: int, rows: int, group: int = 100) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    pq.write_table(make_table(first, rows), path, row_group_size=group)
    return path


def write_ipc(path: Path, table: pa.Table, batch_rows: int, how: str = "ipc") -> None:
    """An Arrow IPC file of ``batch_rows``-row record batches (``how="feather"``: LZ4)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if how == "feather":
        feather.write_feather(table, path, chunksize=batch_rows)  # compressed, version 2
        return
    with pa.ipc.new_file(str(path), table.schema) as writer:
        writer.write_table(table, max_chunksize=batch_rows)


def duckdb_ids(files: list[Path], where: str) -> list[int]:
    """The reference: DuckDB over the raw files (Parquet by its reader, IPC through Arrow)."""
    connection = duckdb.connect()
    if files[0].suffix == ".parquet":
        source = "read_parquet([" + ", ".join(f"'{path}'" for path in files) + "])"
    else:
        tables = []
        for path in files:
            with pa.memory_map(str(path)) as handle:
                tables.append(pa.ipc.open_file(handle).read_all())
        connection.register("source", pa.concat_tables(tables))
        source = "source"
    sql = f"SELECT id FROM {source} WHERE {clickhouse_to_duckdb(where)} ORDER BY id"
    return [row[0] for row in connection.sql(sql).fetchall()]


def ids_of(dataset: Dataset, where: str) -> list[int]:
    return sorted(dataset.query(where, ["id"]).column("id").to_pylist())


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """``dir/part-0..3.parquet`` and ``dir/sub/extra-0.parquet``, indexed as a folder."""
    directory = tmp_path / "dir"
    for number, rows in enumerate([900, 700, 500, 300]):
        write_parquet(directory, f"part-{number}.parquet", number * 1000, rows)
    write_parquet(directory / "sub", "extra-0.parquet", 5000, 400)
    Dataset(directory).build_index(INDEXES, progress=False)
    return directory


def _error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# -- a glob inside an indexed folder --------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern",
    ["*.parquet", "part-1*.parquet", "part-[02].parquet", "sub/*.parquet", "**/*.parquet"],
)
def test_a_glob_inside_an_indexed_folder_uses_the_folders_index(folder: Path, pattern) -> None:
    # Before: the glob looked for an index of its own (_bloomskip-<hash>.index) only, found
    # none and scanned every file; nothing was skipped.
    dataset = Dataset(str(folder / pattern))
    assert dataset.index_location == str(folder / "_bloomskip")
    assert dataset.backend.borrowed_from == folder.resolve()
    files = [source.path for source in dataset.files]
    for where in WHERES:
        assert ids_of(dataset, where) == duckdb_ids(files, where), where
    explanation = dataset.explain("k = -5")
    (bloom,) = [outcome for outcome in explanation.indexes if "k_bf" in outcome.definition]
    groups = sum(len(state.layout.rows) for state in explanation.files)
    assert bloom.useful and bloom.granules == groups
    assert bloom.granules_skipped >= groups * 0.9
    assert all(state.status == "indexed" for state in explanation.files)
    assert any(str(folder / "_bloomskip") in warning for warning in explanation.warnings)


def test_files_the_folder_index_does_not_cover_are_scanned(folder: Path) -> None:
    write_parquet(folder, "part-9.parquet", 9000, 300)  # after the build
    changed = folder / "part-1.parquet"
    pq.write_table(make_table(7000, 650), changed, row_group_size=50)  # rewritten since
    os.utime(changed, ns=(1, 1))
    dataset = Dataset(str(folder / "part-*.parquet"))
    assert dataset.index_location == str(folder / "_bloomskip")
    files = [source.path for source in dataset.files]
    for where in WHERES + ["k = 11713", "k = 9113"]:  # the new rows of part-1 and part-9
        assert ids_of(dataset, where) == duckdb_ids(files, where), where
    assert ids_of(dataset, "k = 9113") == [7010]
    assert ids_of(dataset, "k = 11713") == [9010]
    states = {state.source.path.name: state.status for state in dataset.explain("k = 1").files}
    assert states["part-9.parquet"] == "not indexed"
    assert states["part-1.parquet"] == "changed since indexing"
    assert states["part-0.parquet"] == "indexed"
    status = dataset.status()
    assert status["index"] == str(folder / "_bloomskip")
    assert status["not_indexed"] == ["part-9.parquet"] and status["stale"] == ["part-1.parquet"]
    assert status["missing"] == []  # sub/extra-0.parquet is not the glob's


def test_status_of_a_glob_names_only_its_own_missing_files(folder: Path) -> None:
    (folder / "part-2.parquet").unlink()
    status = Dataset(str(folder / "part-*.parquet")).status()
    assert status["missing"] == ["part-2.parquet"]
    assert status["files_indexed"] == 3


def test_a_glob_without_an_indexed_folder_keeps_its_own_index(tmp_path: Path) -> None:
    directory = tmp_path / "plain"
    for number in range(2):
        write_parquet(directory, f"part-{number}.parquet", number * 1000, 500)
    dataset = Dataset(str(directory / "*.parquet"))
    assert dataset.backend.borrowed_from is None
    assert Path(dataset.index_location).name.startswith("_bloomskip-")
    assert any("no index" in warning for warning in dataset.explain("k = 1").warnings)
    dataset.build_index(INDEXES, progress=False)
    assert Path(dataset.index_location).parent == directory
    assert ids_of(Dataset(str(directory / "*.parquet")), "k = 1313") == [1010]


def test_building_a_glob_served_by_its_folder_gives_it_its_own_index(folder: Path) -> None:
    folder_index = folder / "_bloomskip"
    before = sorted((p.name, p.read_bytes()) for p in folder_index.rglob("*") if p.is_file())
    pattern = str(folder / "part-1*.parquet")
    with pytest.raises(BloomskipError, match="indexed by the folder's index"):
        Dataset(pattern).build_index(None, progress=False)
    with pytest.raises(BloomskipError, match="bloomskip index drop"):
        Dataset(pattern).drop_index("k_bf")
    report = Dataset(pattern).build_index(["INDEX s_tok s TYPE tokenbf_v1(256, 2, 0)"])
    assert any("now has its own index" in warning for warning in report.warnings)
    # The folder's other files keep their index.
    assert (
        sorted((p.name, p.read_bytes()) for p in folder_index.rglob("*") if p.is_file()) == before
    )
    dataset = Dataset(pattern)
    assert dataset.backend.borrowed_from is None
    assert Path(dataset.index_location).name.startswith("_bloomskip-")
    files = [source.path for source in dataset.files]
    for where in WHERES:
        assert ids_of(dataset, where) == duckdb_ids(files, where), where


def test_query_explain_names_the_index_used(folder: Path, capsys) -> None:
    pattern = str(folder / "part-1*.parquet")
    assert main(["query", pattern, "--where", "k = -5", "--explain"]) == 0
    out = capsys.readouterr().out
    assert f"using the folder's index {folder / '_bloomskip'}" in out
    assert "granules skipped: 7/7" in out
    assert main(["query", pattern, "--where", "k = -5", "--explain", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert any(str(folder / "_bloomskip") in warning for warning in facts["warnings"])
    assert facts["read"]["row_groups_to_read"] == 0
    assert main(["query", pattern, "--where", "k = 1313", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert [json.loads(line)["id"] for line in captured.out.splitlines()] == [1010]
    assert "using the folder's index" in captured.err


# -- folders of Arrow IPC files -------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".arrow", ".feather", ".ipc"])
def test_a_folder_of_arrow_ipc_files(tmp_path: Path, suffix: str) -> None:
    # Before: "a directory dataset must hold only Parquet files".
    directory = tmp_path / "ipc"
    how = "feather" if suffix == ".feather" else "ipc"
    for number, (rows, batch) in enumerate([(900, 100), (700, 64), (1, 1)]):
        write_ipc(directory / f"part-{number}{suffix}", make_table(number * 1000, rows), batch, how)
    write_ipc(directory / "sub" / f"deep{suffix}", make_table(5000, 300), 50, how)
    dataset = Dataset(directory)
    assert {source.format for source in dataset.files} == {"arrow-ipc"}
    report = dataset.build_index(INDEXES, progress=False)
    assert report.index == str(directory / "_bloomskip") and len(report.rebuilt) == 4
    files = [source.path for source in dataset.files]
    for where in WHERES:
        assert ids_of(dataset, where) == duckdb_ids(files, where), where
    # A record batch is the granule, as for one IPC file: part-0's 9 batches, part-1's 11, ...
    explanation = dataset.explain("k = -5")
    assert [len(state.layout.rows) for state in explanation.files] == [9, 11, 1, 6]
    (bloom,) = [outcome for outcome in explanation.indexes if "k_bf" in outcome.definition]
    assert bloom.granules == 27 and bloom.granules_skipped >= 24
    surviving = explanation.row_groups()
    assert len(surviving) <= 3
    handed = dataset.explain("k = 1313").to_dataset()  # noqa: F841 - read by DuckDB
    exact = clickhouse_to_duckdb("k = 1313")
    assert duckdb.sql(f"SELECT id FROM handed WHERE {exact}").fetchall() == [(1010,)]
    # A glob inside the folder uses the folder's index.
    glob = Dataset(str(directory / f"part-*{suffix}"))
    assert glob.index_location == str(directory / "_bloomskip")
    assert ids_of(glob, "k = 1313") == [1010]


def test_arrow_ipc_folder_from_the_command_line(tmp_path: Path, capsys) -> None:
    directory = tmp_path / "ipc"
    for number in range(2):
        write_ipc(directory / f"part-{number}.arrow", make_table(number * 1000, 600), 100)
    argv = ["index", "build", str(directory), "--index", INDEXES[0], "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["files"] == 2
    assert main(["query", str(directory), "--where", "k = 1313", "--explain", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["read"]["row_groups"] == 12 and facts["read"]["row_groups_to_read"] <= 2
    assert main(["query", str(directory), "--where", "k = 1313", "--format", "json"]) == 0
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == [1010]


def test_a_folder_mixing_parquet_and_arrow_is_refused_naming_the_files(
    tmp_path: Path, capsys
) -> None:
    directory = tmp_path / "mixed"
    write_parquet(directory, "a.parquet", 0, 100)
    write_parquet(directory, "b.parquet", 100, 100)
    write_ipc(directory / "c.arrow", make_table(200, 100), 50)
    with pytest.raises(BloomskipError, match=r"2 Parquet \(a.parquet, b.parquet\) and 1 Arrow"):
        Dataset(directory).explain("k = 1")
    with pytest.raises(BloomskipError, match=r"c.arrow"):
        Dataset(str(directory / "*")).explain("k = 1")
    assert main(["query", str(directory), "--where", "k = 1"]) == 2
    line = _error_line(capsys)
    assert "a.parquet, b.parquet" in line and "c.arrow" in line
    # Each format on its own is a dataset.
    assert ids_of(Dataset(str(directory / "*.parquet")), "k = 130") == [100]
    assert ids_of(Dataset(str(directory / "*.arrow")), "k = 260") == [200]


def test_arrow_ipc_files_with_different_schemas_are_refused_by_name(tmp_path: Path) -> None:
    directory = tmp_path / "drift"
    write_ipc(directory / "a.arrow", make_table(0, 100), 50)
    write_ipc(directory / "b.arrow", make_table(100, 100).drop_columns(["s"]), 50)
    dataset = Dataset(directory)
    with pytest.raises(BloomskipError, match=r"must share one schema: a.arrow has .* b.arrow has"):
        dataset.query("k = 1")
    with pytest.raises(BloomskipError, match="must share one schema"):
        dataset.explain("k = 1").to_dataset()


def test_an_arrow_ipc_stream_is_named_as_one(tmp_path: Path) -> None:
    directory = tmp_path / "streams"
    directory.mkdir()
    table = make_table(0, 10)
    with (
        pa.OSFile(str(directory / "a.arrow"), "wb") as sink,
        pa.ipc.new_stream(sink, table.schema) as writer,
    ):
        writer.write_table(table)
    with pytest.raises(BloomskipError, match="a.arrow: an Arrow IPC stream, not an Arrow IPC file"):
        Dataset(directory).explain("k = 1")
