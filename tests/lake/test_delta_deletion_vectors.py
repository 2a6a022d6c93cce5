"""Delta deletion vectors: rows a deletion vector removes never come back from a query.

deltalake (delta-rs) reads deletion vectors but writes copy-on-write deletes even where the
table enables them, so :func:`delete_rows` writes the commit a merge-on-read writer (Spark,
Databricks) writes: the data file is removed and added again with a ``deletionVector``
descriptor, the vector stored in a ``deletion_vector_<uuid>.bin`` file as the Delta protocol
lays it out. The judge of every answer is deltalake's own reader (DataFusion through
``QueryBuilder``, which applies the vectors), never bloomskip: the test also checks that
deltalake sees exactly the positions written.
"""

from __future__ import annotations

import json
import struct
import time
import uuid
import zlib
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from dataset_fixtures import INDEXES, make_table
from test_dataset_query_corpus import PREDICATES

from bloomskip import Dataset
from bloomskip.cli import main
from bloomskip.dataset.sql.translate import clickhouse_to_duckdb
from bloomskip.errors import StorageError

deltalake = pytest.importorskip("deltalake")

#: The Delta protocol's Z85 alphabet (ZeroMQ's), for a vector's UUID in its descriptor.
Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
#: ``RoaringBitmapArray``'s magic number for the portable 64-bit serialization.
PORTABLE_MAGIC = 1681511377
#: A 32-bit Roaring bitmap of array containers only (the portable format's cookie).
NO_RUN_COOKIE = 12346


def _z85(data: bytes) -> str:
    text = []
    for start in range(0, len(data), 4):
        value = int.from_bytes(data[start : start + 4], "big")
        chunk = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chunk.append(Z85[digit])
        text.extend(reversed(chunk))
    return "".join(text)


def _roaring(positions: np.ndarray) -> bytes:
    """``positions`` (under 2**32, at most 4096 per 65536) in the portable serialization."""
    values = np.unique(positions.astype(np.uint32))
    keys = np.unique(values >> 16)
    header = struct.pack("<II", NO_RUN_COOKIE, len(keys))
    containers = []
    for key in keys:
        low = (values[(values >> 16) == key] & 0xFFFF).astype("<u2")
        header += struct.pack("<HH", int(key), len(low) - 1)
        containers.append(low.tobytes())
    offset = len(header) + 4 * len(keys)
    for container in containers:
        header += struct.pack("<I", offset)
        offset += len(container)
    bitmap = header + b"".join(containers)
    return struct.pack("<IQI", PORTABLE_MAGIC, 1, 0) + bitmap  # one 32-bit bitmap, high key 0


def delete_rows(
    location: str, file_path: str, positions: list[int], outside: Path | None = None
) -> Path:
    """Commit a deletion vector removing ``positions`` (all of them so far) from one file.

    Args:
        location: The table's folder.
        file_path: The data file's path as its add action holds it.
        positions: Every row position the file has lost.
        outside: A folder to store the vector in, named by an absolute URI (``storageType``
            ``p``), instead of the table's folder.

    Returns:
        The vector's file.
    """
    root = Path(location)
    log = sorted((root / "_delta_log").glob("*.json"))
    adds = {}
    for commit in log:
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                adds[action["add"]["path"]] = action["add"]
    add = adds[file_path]
    data = _roaring(np.asarray(positions))
    name = uuid.uuid4()
    stored = (outside or root) / f"deletion_vector_{name}.bin"
    with open(stored, "wb") as out:
        out.write(
            b"\x01" + struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
        )
    vector = {
        "storageType": "p" if outside else "u",
        "pathOrInlineDv": stored.as_uri() if outside else _z85(name.bytes),
        "offset": 1,
        "sizeInBytes": len(data),
        "cardinality": len(set(positions)),
    }
    now = int(time.time() * 1000)
    removed = {
        "path": file_path,
        "dataChange": True,
        "deletionTimestamp": now,
        "extendedFileMetadata": True,
        "partitionValues": add["partitionValues"],
        "size": add["size"],
    }
    if "deletionVector" in add:
        removed["deletionVector"] = add["deletionVector"]
    actions = [
        {"commitInfo": {"timestamp": now, "operation": "DELETE"}},
        {"remove": removed},
        {"add": {**add, "deletionVector": vector, "modificationTime": now}},
    ]
    version = len(log)
    target = root / "_delta_log" / f"{version:020d}.json"
    target.write_text("".join(json.dumps(action) + "\n" for action in actions))
    return stored


def _reader_rows(location: str, version: int) -> pa.Table:
    """deltalake's rows at ``version``, deletion vectors applied by its DataFusion reader."""
    table = deltalake.DeltaTable(location, version=version)
    result = deltalake.QueryBuilder().register("t", table).execute("SELECT * FROM t")
    return pa.table(result.read_all())


def _expected_ids(location: str, version: int, where: str) -> list[int]:
    rows = _reader_rows(location, version)  # noqa: F841 - read by DuckDB below
    condition = clickhouse_to_duckdb(where)
    return sorted(r[0] for r in duckdb.sql(f"SELECT id FROM rows WHERE {condition}").fetchall())


@pytest.fixture
def table_with_vectors(tmp_path) -> tuple[str, dict]:
    """Versions 0 and 1: a file each, then indexed; 2: a vector on the first file; 3: a bigger
    vector on it (Spark's rewrite of a vector holds the old positions too); 4: a vector on the
    second file."""
    location = str(tmp_path / "events")
    writer = deltalake.WriterProperties(max_row_group_size=200)
    for number, (rows, first) in enumerate([(1200, 0), (900, 1200)]):
        deltalake.write_deltalake(
            location,
            make_table(rows, number + 1, first),
            mode="append" if number else "error",
            writer_properties=writer,
            configuration={"delta.enableDeletionVectors": "true"} if number == 0 else None,
        )
    first, second = (  # in commit order: 1,200 rows, then 900
        action["add"]["path"]
        for commit in sorted(Path(location, "_delta_log").glob("*.json"))
        for action in map(json.loads, commit.read_text().splitlines())
        if "add" in action
    )
    ks = _reader_rows(location, 1).column("k").to_pylist()
    keys = {"k0": ks[5], "k1": ks[len(ks) // 2], "k2": ks[-3]}
    Dataset(location).build_index(INDEXES, progress=False)
    # Rows matching the sample keys are among the deleted ones: a stale read would show them.
    early = [5, 6, 199, 200, 201, 600, 1199]
    delete_rows(location, first, early)
    delete_rows(location, first, early + list(range(300, 420)) + [0, 1])
    delete_rows(location, second, [0, 897, 898, 899])
    return location, keys


def test_deltalake_reads_the_vectors_as_written(table_with_vectors):
    location, _ = table_with_vectors
    table = deltalake.DeltaTable(location)
    vectors = pa.RecordBatchReader.from_stream(table.deletion_vectors()).read_all()
    deleted = sorted(
        len(mask) - sum(mask) for mask in vectors.column("selection_vector").to_pylist()
    )
    assert deleted == [4, 129]
    assert _reader_rows(location, 4).num_rows == 2100 - 133


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_corpus_at_every_version_equals_deltalakes_reader(table_with_vectors, version):
    location, keys = table_with_vectors
    dataset = Dataset(location, version=version)
    for template in PREDICATES:
        where = template.format(**keys)
        got = sorted(dataset.query(where, columns=["id"]).column("id").to_pylist())
        assert got == _expected_ids(location, version, where), (version, where)


def test_a_vector_changes_no_file_so_a_refresh_indexes_nothing(table_with_vectors, capsys):
    location, keys = table_with_vectors
    report = Dataset(location).build_index(progress=False)
    assert report.rebuilt == []
    victim = _reader_rows(location, 0).column("k")[5].as_py()
    assert main(["query", location, "--where", f"k = {victim}", "--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]  # JSON lines
    assert sorted(row["id"] for row in rows) == _expected_ids(location, 4, f"k = {victim}")
    assert 5 not in {row["id"] for row in rows}


# -- vectors that cannot be read, or live outside the table -----------------------------------


@pytest.fixture
def one_vector(tmp_path) -> tuple[str, str]:
    """An indexed table of one file (500 rows), then a commit deleting rows 1 to 3 of it."""
    location = str(tmp_path / "events")
    deltalake.write_deltalake(
        location,
        make_table(500, 1, 0),
        configuration={"delta.enableDeletionVectors": "true"},
    )
    Dataset(location).build_index(INDEXES, progress=False)
    (path,) = deltalake.DeltaTable(location).file_uris()
    return location, Path(path).name


def _damage(vector: Path, how: str) -> None:
    if how == "corrupt":
        data = bytearray(vector.read_bytes())
        data[12] ^= 0xFF  # inside the bitmap: its CRC-32 no longer matches
        vector.write_bytes(bytes(data))
    elif how == "truncated":
        vector.write_bytes(vector.read_bytes()[:9])
    else:
        vector.unlink()


def _assert_refused(location: str, vector: Path, capsys) -> None:
    """The library raises StorageError naming the table and the vector; the CLI prints that on
    one line and exits 2. deltalake's reader refuses the version too (never rows without the
    deletes)."""
    with pytest.raises(deltalake.exceptions.DeltaError):
        _reader_rows(location, 1)
    with pytest.raises(StorageError) as raised:
        Dataset(location)
    message = str(raised.value)
    assert message.startswith(location) and vector.name in message
    assert "\n" not in message
    capsys.readouterr()
    assert main(["query", location, "--where", "id = 5"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err
    assert vector.name in lines[0] and "deletion vector" in lines[0]


@pytest.mark.parametrize("how", ["corrupt", "truncated", "missing"])
def test_an_unreadable_vector_is_a_storage_error(one_vector, how, capsys):
    location, file_path = one_vector
    vector = delete_rows(location, file_path, [1, 2, 3])
    _damage(vector, how)
    _assert_refused(location, vector, capsys)


def test_a_vector_outside_the_table_is_applied_as_deltalake_applies_it(
    one_vector, tmp_path, capsys
):
    location, file_path = one_vector
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    vector = delete_rows(location, file_path, [1, 2, 3, 250], outside=elsewhere)
    assert _reader_rows(location, 1).num_rows == 496
    dataset = Dataset(location)
    for where in ["id >= 0", "id IN (1, 2, 3, 4, 250)", "k = 7"]:
        got = sorted(dataset.query(where, columns=["id"]).column("id").to_pylist())
        assert got == _expected_ids(location, 1, where), where
    vector.unlink()  # and once it is gone, it is refused as a vector inside the table is
    _assert_refused(location, vector, capsys)
