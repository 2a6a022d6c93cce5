"""Delta partition values that a storage path must percent-encode (issue 26).

deltalake writes the partition value ``a b`` to the folder ``region=a%20b/`` and logs the path
as a URI, encoded once more: ``region=a%2520b/…``. Its own file pruning (``file_uris``) names
the same file as the table's URI joined with the unencoded folder name. A query whose WHERE
handed a part to that pruning (``id >= 0``) lost every partition whose value needed encoding:
a space, ``:``, ``'``, ``%``, ``/``, ``=``, ``+``, a backslash, non-ASCII letters, and every
timestamp (``hour=2024-01-01%2010%3A00%3A00.000000/``).

The judge is deltalake's own reader at every version, its rows filtered here in Python, never
by bloomskip's translation; with and without an index, on a local folder and on the S3 server.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bloomskip import Dataset
from bloomskip.cli import main
from bloomskip.dataset.listing.tables.delta import storage_options

deltalake = pytest.importorskip("deltalake")

#: Partition values whose folder names need percent-encoding, a plain one, and a null.
REGIONS = [
    "plain",
    "a b",
    "c:d",
    "e'f",
    "g%h",
    "i/j",
    "k=l",
    "m+n",
    "o\\p",
    "é",
    "a%20b",
    "中文",
    'x{y}[z]^#?*|<>"~`',
    None,
]
#: The second has microseconds: the protocol's text form then carries six digits.
HOURS = [datetime(2024, 1, 1, 10, tzinfo=UTC), datetime(2024, 1, 1, 11, 30, 15, 123456, tzinfo=UTC)]
COLUMNS = ["id", "k", "region", "hour"]
INDEX = "INDEX k_bf k TYPE bloom_filter(0.01) GRANULARITY 1"


def _rows(first: int, count: int) -> pa.Table:
    ids = range(first, first + count)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([(n * 7919) % 1009 for n in ids], pa.int64()),
            "region": pa.array([REGIONS[n % len(REGIONS)] for n in ids], pa.string()),
            "hour": pa.array(
                [HOURS[(n // len(REGIONS)) % 2] for n in ids], pa.timestamp("us", "UTC")
            ),
        }
    )


def _literal(text: str) -> str:
    """``text`` as a ClickHouse string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _write(location: str, table: pa.Table, **options) -> None:
    deltalake.write_deltalake(
        location, table, storage_options=storage_options(location) or None, **options
    )


def _reference(location: str, version: int) -> tuple[list[dict], pa.Schema]:
    """deltalake's rows at ``version`` by id, and their schema: ``to_pyarrow_table``, or
    DataFusion through ``QueryBuilder`` where deletion vectors need it (``to_pyarrow_table``
    refuses them; ``QueryBuilder`` hangs against the S3 server, which no vector test uses)."""
    table = deltalake.DeltaTable(
        location, version=version, storage_options=storage_options(location) or None
    )
    if "deletionVectors" in (table.protocol().reader_features or ()):
        result = deltalake.QueryBuilder().register("t", table).execute("SELECT * FROM t")
        rows = pa.table(result.read_all())
    else:
        rows = table.to_pyarrow_table()
    rows = rows.select(COLUMNS)
    return sorted(rows.to_pylist(), key=lambda row: row["id"]), rows.schema


def _cases(reference: list[dict], values: list[str]) -> list[tuple[str, object]]:
    """WHEREs, each with what it means for one of the reader's rows; one per partition value
    of ``values``."""
    ks = [row["k"] for row in reference]
    cases = [
        ("id >= 0", lambda row: True),  # the case: a WHERE only the table's pruning uses
        ("region IS NULL", lambda row: row["region"] is None),
        (
            "region != 'plain' AND id >= 3",
            lambda row: row["region"] not in (None, "plain") and row["id"] >= 3,
        ),
        ("region IN ('a b', 'g%h', 'é')", lambda row: row["region"] in ("a b", "g%h", "é")),
        ("hour = '2024-01-01 10:00:00'", lambda row: row["hour"] == HOURS[0]),
        (f"k = {ks[3]}", lambda row, k=ks[3]: row["k"] == k),
        (f"k IN ({ks[5]}, {ks[-2]})", lambda row, a=ks[5], b=ks[-2]: row["k"] in (a, b)),
    ]
    for value in values:
        cases.append(
            (f"region = {_literal(value)} AND id >= 0", lambda row, v=value: row["region"] == v)
        )
    return cases


def _type(arrow_type: pa.DataType):
    """A column's type as far as a reader's choice does not change it: DataFusion returns
    strings as ``string_view``, DuckDB labels a zoned timestamp with its session's zone (the
    instants are the same; rows compare them as zoned datetimes)."""
    if pa.types.is_string_view(arrow_type):
        return pa.string()
    if pa.types.is_timestamp(arrow_type) and arrow_type.tz is not None:
        return pa.timestamp(arrow_type.unit, "UTC")
    return arrow_type


def _check_every_version(location: str, versions: range, values: list[str]) -> int:
    """Every case at every version returns deltalake's rows; returns the granules skipped."""
    skipped = 0
    for version in versions:
        reference, schema = _reference(location, version)
        dataset = Dataset(location, version=version)
        for where, keep in _cases(reference, values):
            explanation = dataset.explain(where)
            got = dataset.run(explanation, where, COLUMNS)
            rows = sorted(got.to_pylist(), key=lambda row: row["id"])
            assert rows == [row for row in reference if keep(row)], (version, where)
            assert [_type(item.type) for item in got.schema] == [
                _type(item.type) for item in schema
            ], (version, where)
            skipped += sum(outcome.granules_skipped for outcome in explanation.indexes)
    return skipped


@pytest.fixture(params=["local", "s3"])
def table_location(request, tmp_path) -> str:
    """A new table's location: a local folder whose name needs encoding too, or an S3 prefix."""
    if request.param == "local":
        return str(tmp_path / "my lake é" / "events")
    return f"s3://{request.getfixturevalue('bucket')}/lake/events"


def test_encoded_partitions_at_every_version_equal_deltalakes_reader(table_location, capsys):
    location = table_location
    _write(location, _rows(0, 2 * len(REGIONS)), partition_by=["region", "hour"])
    _write(location, _rows(100, len(REGIONS)), mode="append")
    deltalake.DeltaTable(location, storage_options=storage_options(location) or None).delete(
        "id % 3 = 0"
    )
    again = _rows(200, 3 * len(REGIONS))
    again = again.filter(pc.equal(again.column("region"), "a b"))
    _write(location, again, mode="overwrite", predicate="region = 'a b'")
    versions = range(4)
    # A value's own WHERE tests deltalake's pruning of the log, the same wherever the files are:
    # on the S3 server (a request per file per query), a few values do.
    values = REGIONS[:-1] if "://" not in location else ["a b", "g%h", "o\\p", "é"]

    # Without an index: the table's pruning, then the exact filter.
    _check_every_version(location, versions, values)
    # The table's pruning is used, not bypassed: it keeps the folders of one value.
    dataset = Dataset(location)
    explanation = dataset.explain("region = 'a b'")
    wanted = {item.key for item in dataset.snapshot.files if item.partition["region"] == "a b"}
    assert {state.relative_path for state in explanation.files} == wanted
    assert 0 < len(wanted) < explanation.table["files"]
    assert all(key.startswith("region=a%20b/hour=2024-01-01%20") for key in wanted)

    assert main(["index", "build", location, "--index", INDEX]) == 0
    assert _check_every_version(location, versions, values) > 0
    status = Dataset(location).status()
    assert status["files_indexed"] == status["files"] == len(dataset.snapshot.files)

    capsys.readouterr()
    for version in versions:
        argv = ["query", location, "--where", "id >= 0", "--version", str(version)]
        assert main([*argv, "--format", "json"]) == 0
        ids = sorted(json.loads(line)["id"] for line in capsys.readouterr().out.splitlines())
        assert ids == [row["id"] for row in _reference(location, version)[0]], version


def test_a_path_is_decoded_once_whatever_the_writer_escaped(tmp_path):
    """Spark leaves a space as it is in a folder name (``region=a b/``) and logs the path as
    ``region=a%20b/``; a deletion vector names its file by a URI of the table's."""
    from test_delta_deletion_vectors import delete_rows

    location = tmp_path / "my lake é" / "events"
    table = _rows(0, 2 * len(REGIONS))
    deltalake.write_deltalake(
        location,
        table,
        partition_by=["region"],
        configuration={"delta.enableDeletionVectors": "true"},
    )
    log = location / "_delta_log" / f"{0:020d}.json"
    text = log.read_text()
    assert "region=a%2520b/" in text  # deltalake's own escaping, which Spark does not do
    log.write_text(text.replace("region=a%2520b/", "region=a%20b/"))
    shutil.move(location / "region=a%20b", location / "region=a b")
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    folders = ("region=a%20b/", "region=g%2525h/", "region=%25C3%25A9/", "region=plain/")
    chosen = [action["add"]["path"] for action in actions if "add" in action]
    chosen = [path for path in chosen if path.startswith(folders)]
    assert len(chosen) == len(folders)
    for path in chosen:
        delete_rows(str(location), path, [1])
    versions = range(len(chosen) + 1)
    assert Path(location, "region=a b").is_dir()
    reference, _ = _reference(str(location), versions[-1])
    assert len(reference) == len(table) - len(chosen)  # the reader applies every vector
    _check_every_version(str(location), versions, REGIONS[:-1])
