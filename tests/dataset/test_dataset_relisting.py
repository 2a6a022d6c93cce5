"""A ``Dataset`` kept between calls sees the files as they are at each call (issue: a kept
object missed files added after it was made, and its build left them unindexed).

The reference is a new ``Dataset`` over the same folder, and chdb over the same files."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip.dataset import Dataset

INDEX = "id TYPE bloom_filter(0.01)"


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def _chdb_ids(chdb_session, pattern: str, where: str) -> list[int]:
    text = chdb_session.query(f"SELECT id FROM file('{pattern}', Parquet) WHERE {where}", "CSV")
    return sorted(int(line) for line in text.bytes().decode().split())


def _write(path, ids: list[int]) -> None:
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path)


@pytest.mark.parametrize("glob", [False, True], ids=["folder", "glob"])
def test_kept_dataset_sees_files_added_and_removed(tmp_path, glob: bool, chdb_session) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    _write(folder / "a.parquet", [1, 2])
    target = str(folder / "*.parquet") if glob else str(folder)
    kept = Dataset(target)
    kept.build_index([INDEX], progress=False)
    assert _ids(kept.query("id = 3")) == []

    _write(folder / "b.parquet", [3, 4])
    where = "id = 3"
    expected = _chdb_ids(chdb_session, str(folder / "*.parquet"), where)
    assert expected == [3]
    assert _ids(kept.query(where)) == expected == _ids(Dataset(target).query(where))
    assert len(kept.files) == 2
    assert kept.status()["not_indexed"] == ["b.parquet"]

    report = kept.build_index(progress=False)
    assert report.rebuilt == ["b.parquet"] and report.files == 2
    status = kept.status()
    assert status["files_indexed"] == 2 and status["not_indexed"] == []
    # The new file's bits are in the index: an absent id keeps none of its row groups.
    assert kept.explain("id = 99").row_groups() == []
    assert _ids(kept.query(where)) == expected

    (folder / "a.parquet").unlink()
    assert _ids(kept.query("id = 1")) == [] == _ids(Dataset(target).query("id = 1"))
    assert kept.status()["missing"] == ["a.parquet"]
    assert [source.path.name for source in kept.files] == ["b.parquet"]


def test_kept_dataset_schema_follows_new_files(tmp_path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    _write(folder / "a.parquet", [1])
    kept = Dataset(folder)
    assert kept.schema.names == ["id"]
    pq.write_table(pa.table({"id": [2], "extra": ["x"]}), folder / "b.parquet")
    assert kept.schema.names == Dataset(folder).schema.names == ["id", "extra"]
    assert kept.query("extra = 'x'").to_pylist() == [{"id": 2, "extra": "x"}]


def test_kept_glob_uses_a_folder_index_built_later(tmp_path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    _write(folder / "a.parquet", [1, 2])
    _write(folder / "b.parquet", [3, 4])
    kept = Dataset(str(folder / "*.parquet"))
    assert "no index" in " ".join(kept.explain("id = 3").warnings)
    Dataset(folder).build_index([INDEX], progress=False)
    # The index a glob reads is found when the Dataset is made: a new one uses the folder's.
    kept = Dataset(str(folder / "*.parquet"))
    explanation = kept.explain("id = 3")
    assert kept.index_location == str(folder / "_bloomskip")
    assert [path.name for path, _ in explanation.row_groups()] == ["b.parquet"]
