"""Column names that differ only in case are two columns, in every layout, with any index.

ClickHouse's names are case-sensitive. Over a folder whose files name a column ``id`` in one
and ``ID`` in another, its union schema inference (``schema_inference_mode = 'union'``) reads
two columns, each NULL in the other's files; its default inference takes the first listed file's
schema, and gives the same rows for a WHERE over that file's columns. DuckDB, which runs the exact
filter, binds names case-insensitively: the scan must keep the two apart. The reference is chdb.
"""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lake_fixtures import upload

from bloomskip import Dataset

WHERES = [
    "id = 1",
    "ID = 1",
    "id = 3",
    "ID = 3",
    "id IN (1, 2)",
    "ID IN (1, 4)",
    "id = 1 OR ID = 3",
    "isNull(id)",
    "isNotNull(ID) AND v = 'd'",
]
INDEXES = [None, "id TYPE bloom_filter(0.01)", "ID TYPE bloom_filter(0.01)"]


def _write(folder) -> None:
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"id": [1, 2], "v": ["a", "b"]}), folder / "a.parquet")
    pq.write_table(pa.table({"ID": [1, 3], "v": ["c", "d"]}), folder / "b.parquet")
    pq.write_table(pa.table({"v": ["e"], "id": [3], "ID": [4]}), folder / "c.parquet")


def _chdb_rows(chdb_session, folder, where: str) -> list[tuple]:
    text = chdb_session.query(
        f"SELECT v, id, ID FROM file('{folder}/*.parquet', Parquet) WHERE {where} "
        "SETTINGS schema_inference_mode = 'union'",
        "JSONCompact",
    )
    import json

    return sorted(tuple(row) for row in json.loads(text.bytes())["data"])


def _rows(table: pa.Table) -> list[tuple]:
    return sorted(zip(*(table.column(name).to_pylist() for name in ("v", "id", "ID")), strict=True))


@pytest.fixture(params=["sidecar", "segmented", "s3"])
def layout(request, tmp_path):
    """``(a Dataset factory, the local copy of the files)`` for each layout."""
    folder = tmp_path / "data"
    _write(folder)
    if request.param == "sidecar":
        return (lambda: Dataset(folder)), folder
    if request.param == "segmented":
        index = tmp_path / "index"
        return (lambda: Dataset(folder, index_location=index)), folder
    bucket = request.getfixturevalue("bucket")
    upload(folder, f"s3://{bucket}/data")
    return (lambda: Dataset(f"s3://{bucket}/data")), folder


@pytest.mark.parametrize("index", INDEXES)
def test_names_differing_in_case_are_two_columns(layout, index, chdb_session) -> None:
    make, folder = layout
    dataset = make()
    if index is not None:
        dataset.build_index([index], progress=False)
    names = dataset.query("1 = 1").column_names
    assert sorted(names) == ["ID", "id", "v"]
    for where in WHERES:
        assert _rows(dataset.query(where)) == _chdb_rows(chdb_session, folder, where), (
            index,
            where,
        )
    assert dataset.query("ID = 4", ["ID", "v"]).to_pylist() == [{"ID": 4, "v": "e"}]


def test_one_file_holding_both_names(tmp_path, chdb_session) -> None:
    folder = tmp_path / "one"
    folder.mkdir()
    pq.write_table(pa.table({"id": [1, 2], "ID": [2, 1]}), folder / "both.parquet")
    dataset = Dataset(folder)
    dataset.build_index(["ID TYPE bloom_filter(0.01)"], progress=False)
    for where in ["ID = 2", "id = 2", "ID = 1 AND id = 2"]:
        text = chdb_session.query(
            f"SELECT id, ID FROM file('{folder}/both.parquet', Parquet) WHERE {where}", "CSV"
        )
        expected = [tuple(map(int, line.split(","))) for line in text.bytes().decode().split()]
        table = dataset.query(where)
        got = list(zip(table.column("id").to_pylist(), table.column("ID").to_pylist(), strict=True))
        assert got == expected, where
    shutil.rmtree(folder)
