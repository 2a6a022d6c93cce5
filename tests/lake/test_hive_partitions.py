"""Hive-style ``key=value`` folders: one rule, ClickHouse's, in every layout, with any index.

ClickHouse (``use_hive_partitioning``, on by default) reads each ``key=value`` folder of a
file's path as a column: the path's value wins over a column the file holds (read as that
column's type), and a column the files lack is typed from the value. The reference is chdb's
``file()`` over the same local files; the layouts are the sidecar index, a segmented index kept
elsewhere, and an S3 prefix.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lake_fixtures import upload

from bloomskip import BloomskipError, Dataset
from bloomskip.dataset.listing.hive import infer_type, path_partitions, read_value

# name -> (folders of (partition path, ids), the file's own column k or None)
DATASETS = {
    "held_int": ([("k=1", [1, 2]), ("k=2", [3, 4])], pa.int64()),
    "held_string": ([("k=1", [1, 2]), ("k=2", [3, 4])], pa.string()),
    "not_held": ([("k=1", [1, 2]), ("k=2", [3, 4])], None),
    "two_levels": ([("region=eu/day=2024-01-01", [1, 2]), ("region=us/day=2024-01-02", [3])], None),
    "hours": ([("hour=2024-01-01 10:00:00", [1]), ("hour=2024-01-01 11:00:00", [2, 3])], None),
    "strings": ([("r=a b", [1]), ("r=a%20b", [2]), ("r=é:'+", [3]), ("r=", [4])], None),
}
WHERES = {
    "held_int": ["k = 1", "k = 9", "id = 1", "k = '1'", "id >= 0", "k IN (2, 9)"],
    "held_string": ["k = '1'", "k = '9'", "id = 1", "id >= 0"],
    "not_held": ["k = 1", "k = 9", "id = 3", "k = '2'", "id >= 0"],
    "two_levels": ["region = 'eu'", "day = '2024-01-02'", "id = 3 AND region = 'us'", "id >= 0"],
    "hours": ["hour = '2024-01-01 11:00:00'", "id = 1", "id >= 0"],
    "strings": ["r = 'a b'", "r = 'a%20b'", "r = ''", "id >= 0", "startsWith(r, 'é')"],
}


def _write(folder, name: str) -> None:
    partitions, held = DATASETS[name]
    for path, ids in partitions:
        directory = folder / path
        directory.mkdir(parents=True)
        columns = {"id": pa.array(ids, pa.int64())}
        if held is not None:
            # The file's own k disagrees with the path's: ClickHouse returns the path's.
            columns["k"] = pa.array([9] * len(ids), pa.int64()).cast(held)
        pq.write_table(pa.table(columns), directory / "part.parquet")


def _chdb_rows(chdb_session, folder, where: str) -> list[str]:
    # The rows ClickHouse reads, filtered by ClickHouse. The LIMIT keeps the filter above the
    # read: pushed into it, ClickHouse 26.9 tests a partition column the files hold against
    # their own values (their statistics), while it returns the path's (k = 1 and k = 9 both
    # match nothing where SELECT * shows k = 1).
    text = chdb_session.query(
        f"SELECT * FROM (SELECT * FROM file('{folder}/**/*.parquet', Parquet) "
        f"LIMIT 9223372036854775807) WHERE {where}",
        "JSONEachRow",
    )
    return sorted(
        json.dumps(json.loads(line), sort_keys=True) for line in text.bytes().splitlines()
    )


def _rows(table: pa.Table) -> list[str]:
    def plain(value):
        return value if isinstance(value, int | str | float | bool) or value is None else str(value)

    return sorted(
        json.dumps({key: plain(value) for key, value in row.items()}, sort_keys=True)
        for row in table.to_pylist()
    )


@pytest.fixture(params=["sidecar", "segmented", "s3"])
def layout(request, tmp_path):
    """A factory of ``(Dataset, local folder)`` for a dataset name, in each layout."""

    def make(name: str):
        folder = tmp_path / name
        _write(folder, name)
        if request.param == "sidecar":
            return Dataset(folder), folder
        if request.param == "segmented":
            return Dataset(folder, index_location=tmp_path / f"{name}-index"), folder
        bucket = request.getfixturevalue("bucket")
        upload(folder, f"s3://{bucket}/{name}")
        return Dataset(f"s3://{bucket}/{name}"), folder

    return make


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_partition_columns_are_clickhouses(layout, name: str, chdb_session) -> None:
    dataset, folder = layout(name)
    for indexed in (False, True):
        if indexed:
            dataset.build_index(["id TYPE bloom_filter(0.01)"], progress=False)
        for where in WHERES[name]:
            assert _rows(dataset.query(where)) == _chdb_rows(chdb_session, folder, where), (
                indexed,
                where,
            )


def test_an_index_over_a_partition_column_is_refused(layout) -> None:
    dataset, _ = layout("held_int")
    with pytest.raises(BloomskipError, match="'k' is a partition column"):
        dataset.build_index(["k TYPE bloom_filter(0.01)"], progress=False)


def test_the_cli_answers_as_chdb(tmp_path, capsys, chdb_session) -> None:
    from bloomskip.cli import main

    folder = tmp_path / "cli"
    _write(folder, "not_held")
    assert main(["index", "build", str(folder), "--index", "id TYPE bloom_filter(0.01)"]) == 0
    capsys.readouterr()
    assert main(["query", str(folder), "--where", "k = 2", "--format", "json"]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(json.dumps(row, sort_keys=True) for row in printed) == _chdb_rows(
        chdb_session, folder, "k = 2"
    )


@pytest.mark.parametrize(
    "value",
    ["1", "-5", "+1", "007", "1.5", "-.5", "nan", "inf", "1e3", "true", "False", "2024-01-01",
     "2024-01-01 10:00:00", "2024-01-01T10:00:00", "2024-01", "eu", "a b", "", "NULL",
     "9223372036854775808"],
)  # fmt: skip
def test_inferred_types_are_chdbs(tmp_path, value: str, chdb_session) -> None:
    folder = tmp_path / f"k={value}"
    folder.mkdir()
    pq.write_table(pa.table({"id": [1]}), folder / "part.parquet")
    text = chdb_session.query(
        f"SELECT toTypeName(k) AS t, toString(k) AS v FROM file('{folder}/part.parquet', Parquet)",
        "JSONEachRow",
    )
    expected = json.loads(text.bytes())
    where = os.fspath(folder / "part.parquet")
    arrow_type = infer_type(value, where)
    clickhouse = {
        pa.int64(): "Int64", pa.uint64(): "UInt64", pa.float64(): "Float64",
        pa.bool_(): "Bool", pa.date32(): "Date", pa.timestamp("s"): "DateTime",
        pa.string(): "String", pa.null(): "Nullable(Nothing)",
    }[arrow_type]  # fmt: skip
    assert expected["t"].replace("LowCardinality(String)", "String") == clickhouse
    got = read_value(value, arrow_type, where)
    if arrow_type == pa.bool_():
        assert expected["v"] == str(got).lower()
    elif arrow_type == pa.float64():
        assert float(expected["v"]) == got or (got != got and expected["v"] == "nan")
    elif arrow_type != pa.null():
        assert expected["v"] == str(got)


def test_path_partitions_follow_clickhouses_extraction() -> None:
    assert path_partitions("/d/a=1/b=x/k=1.parquet") == (("a", "1"), ("b", "x"))
    assert path_partitions("/d/c=1=2/=z/e=/f") == (("c", "1=2"), ("e", ""))
    with pytest.raises(BloomskipError, match="appears twice"):
        path_partitions("/d/k=1/k=2/f")
    assert path_partitions("/d/k=1/k=1/f") == (("k", "1"),)
