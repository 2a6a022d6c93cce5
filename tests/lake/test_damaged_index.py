"""A damaged segmented index never hides a row (issue 27): a manifest entry whose checksum or
schema is wrong, a segment schema with a flipped bit, a segment of another index. Each query
returns DuckDB's rows over the files themselves, with a one-line warning, and a refresh build
repairs what it finds damaged. Every case runs on the local disk and on the moto S3 server."""

from __future__ import annotations

import base64
import dataclasses
import json
import time

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lake_fixtures import upload

from bloomskip._store import open_store
from bloomskip.dataset.backends.lake import LakeDataset
from bloomskip.dataset.index.segments import IndexLog, encode_manifest, version_key

INDEX = "user_id TYPE bloom_filter(0.01)"
WHERES = ["user_id = 2", "user_id = 11", "user_id IN (1, 9, 16)", "user_id IN (3, 99)"]


@pytest.fixture(params=["local", "s3"])
def where(request, tmp_path):
    """``(data location, index location)`` on the local disk or in a bucket."""
    if request.param == "local":
        return str(tmp_path / "data"), str(tmp_path / "index")
    bucket = request.getfixturevalue("bucket")
    return f"s3://{bucket}/data", f"s3://{bucket}/index"


def _write(folder, name: str, ids: list[int]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table({"user_id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]})
    pq.write_table(table, folder / name, row_group_size=2)


def _publish(folder, location: str) -> None:
    if location.startswith("s3://"):
        upload(folder, location)


def _two_segments(tmp_path, data: str, index: str) -> LakeDataset:
    """a.parquet (ids 1-8) in one segment, b.parquet (ids 9-16) in another."""
    source = tmp_path / "data"
    _write(source, "a.parquet", list(range(1, 9)))
    _publish(source, data)
    lake = LakeDataset(data, index_location=index)
    lake.build_index([INDEX], progress=False)
    _write(source, "b.parquet", list(range(9, 17)))
    _publish(source, data)
    lake.build_index(progress=False)
    assert len(IndexLog(open_store(index)).latest().segments) == 2
    return lake


def _reference(tmp_path, where_sql: str) -> list[int]:
    """The ids DuckDB's own Parquet reader finds in the files (the same bytes as uploaded)."""
    files = sorted(str(path) for path in (tmp_path / "data").glob("*.parquet"))
    rows = duckdb.sql(f"SELECT user_id FROM read_parquet({files!r}) WHERE {where_sql}")
    return sorted(row[0] for row in rows.fetchall())


def _check_rows(tmp_path, data: str, index: str) -> list[str]:
    """Assert every WHERE returns DuckDB's rows; returns the warnings the queries gave."""
    lake = LakeDataset(data, index_location=index)
    warnings = []
    for where_sql in WHERES:
        explanation = lake.explain(where_sql)
        got = lake.run(explanation, where_sql).column("user_id").to_pylist()
        assert sorted(got) == _reference(tmp_path, where_sql), where_sql
        warnings += explanation.warnings
    assert all("\n" not in line for line in warnings)
    return warnings


def _damage_first_segment(index: str, edit, legacy: bool) -> None:
    """Rewrite, in place, the version that added the first segment (a.parquet's: version 1)
    with ``edit`` applied to that segment's entry; ``legacy``: as a version-1 manifest without
    any checksum (as bloomskip wrote versions before they had one), under the newer record."""
    store = open_store(index)
    key = version_key(1)
    document = json.loads(store.get(key))
    edit(document["segments"][0])
    if legacy:
        for name in ("checksum", "base", "drop_segments", "drop_files"):
            document.pop(name, None)
        document["format_version"] = 1
        for entry in document["segments"]:
            entry.pop("checksum", None)
    store.put(key, json.dumps(document).encode())


def _with_schema_bytes(change):
    def edit(entry: dict) -> None:
        entry["schema"] = base64.b64encode(change(base64.b64decode(entry["schema"]))).decode()

    return edit


def _rename_user_id(raw: bytes) -> bytes:
    schema = pa.ipc.read_schema(pa.py_buffer(raw))
    fields = [
        field.with_name("user_id\x00\x08\x01") if field.name == "user_id" else field
        for field in schema
    ]
    return pa.schema(fields, schema.metadata).serialize().to_pybytes()


def _retype_user_id(raw: bytes) -> bytes:
    schema = pa.ipc.read_schema(pa.py_buffer(raw))
    fields = [
        field.with_type(pa.string()) if field.name == "user_id" else field for field in schema
    ]
    return pa.schema(fields, schema.metadata).serialize().to_pybytes()


def _flip_length_bit(raw: bytes) -> bytes:
    out = bytearray(raw)
    out[7] ^= 0x80  # the message length's sign bit: "negative metadata length"
    return bytes(out)


def _assert_refresh_repairs(tmp_path, data: str, index: str) -> None:
    before = IndexLog(open_store(index)).latest()
    assert before.damaged
    report = LakeDataset(data, index_location=index).build_index(progress=False)
    assert report.version == before.version + 1
    assert "a.parquet" in report.rebuilt
    after = IndexLog(open_store(index)).latest()
    assert after.damaged == ()
    assert after.files().keys() == {"a.parquet", "b.parquet"}
    assert _check_rows(tmp_path, data, index) == []


@pytest.mark.parametrize("legacy", [True, False], ids=["legacy", "sealed"])
def test_a_schema_with_a_damaged_column_name_hides_no_row(tmp_path, where, legacy):
    data, index = where
    _two_segments(tmp_path, data, index)
    _damage_first_segment(index, _with_schema_bytes(_rename_user_id), legacy)
    _write(tmp_path / "data", "b.parquet", list(range(9, 16)) + [30])  # stale in its segment
    _publish(tmp_path / "data", data)
    warnings = _check_rows(tmp_path, data, index)
    reason = "NUL byte" if legacy else "checksum"
    assert any("segments[0] is damaged" in line and reason in line for line in warnings)
    _assert_refresh_repairs(tmp_path, data, index)


@pytest.mark.parametrize(
    ("change", "reason"),
    [(_rename_user_id, "NUL byte"), (_retype_user_id, "column 'user_id' as string")],
)
def test_a_resealed_manifest_with_a_wrong_schema_hides_no_row(tmp_path, where, change, reason):
    """A version whose checksums hold (written so) still has its schemas checked."""
    data, index = where
    _two_segments(tmp_path, data, index)
    store = open_store(index)
    manifest = IndexLog(store).latest()
    first, *rest = manifest.segments
    entry = {"schema": first.schema}
    _with_schema_bytes(change)(entry)
    damaged = dataclasses.replace(first, schema=entry["schema"])
    damaged_manifest = dataclasses.replace(manifest, segments=(damaged, *rest))
    key = version_key(manifest.version)
    store.put(key, encode_manifest(damaged_manifest))
    warnings = _check_rows(tmp_path, data, index)
    assert "checksum" in json.loads(store.get(key))  # the version's checksums hold
    assert any(reason in line for line in warnings)
    _assert_refresh_repairs(tmp_path, data, index)


@pytest.mark.parametrize("legacy", [True, False], ids=["legacy", "sealed"])
def test_a_flipped_bit_in_a_segment_schema_fails_no_query_and_a_refresh_repairs(
    tmp_path, where, legacy
):
    data, index = where
    _two_segments(tmp_path, data, index)
    _damage_first_segment(index, _with_schema_bytes(_flip_length_bit), legacy)
    warnings = _check_rows(tmp_path, data, index)
    reason = "not an Arrow IPC schema" if legacy else "checksum"
    assert any("segments[0] is damaged" in line and reason in line for line in warnings)
    # The dataset's columns come from a.parquet's footer instead.
    assert LakeDataset(data, index_location=index).schema.names == ["user_id", "v"]
    _assert_refresh_repairs(tmp_path, data, index)


def _other_index(tmp_path, data: str, index: str):
    """An index of another dataset whose files have our names (and sizes), other rows."""
    time.sleep(1.1)  # another upload time, as any other dataset's would be
    source = tmp_path / "other"
    _write(source, "a.parquet", list(range(101, 109)))
    _write(source, "b.parquet", list(range(109, 117)))
    other_data, other_index = f"{data}-other", f"{index}-other"
    _publish(source, other_data)
    if not other_data.startswith("s3://"):
        other_data = str(source)
    LakeDataset(other_data, index_location=other_index).build_index([INDEX], progress=False)
    return IndexLog(open_store(other_index))


def test_a_manifest_pointing_at_another_index_segment_hides_no_row(tmp_path, where):
    data, index = where
    source = tmp_path / "data"
    _write(source, "a.parquet", list(range(1, 9)))
    _write(source, "b.parquet", list(range(9, 17)))
    _publish(source, data)
    LakeDataset(data, index_location=index).build_index([INDEX], progress=False)
    other = _other_index(tmp_path, data, index)
    (foreign,) = other.latest().segments
    store = open_store(index)
    store.put(foreign.key, other.store.get(foreign.key))
    log = IndexLog(store)
    manifest = log.latest()
    (ours,) = manifest.segments
    pointed = dataclasses.replace(
        ours,
        key=foreign.key,
        size=foreign.size,
        index_spans=foreign.index_spans,
        directory=foreign.directory,
    )
    store.put(
        version_key(manifest.version + 1),
        encode_manifest(type(manifest)(manifest.version + 1, manifest.granule,
                                       manifest.indexes, (pointed,))),
    )  # fmt: skip
    warnings = _check_rows(tmp_path, data, index)
    assert any("is not this index's" in line for line in warnings)


def test_a_segment_object_replaced_by_another_index_segment_hides_no_row(tmp_path, where):
    data, index = where
    source = tmp_path / "data"
    _write(source, "a.parquet", list(range(1, 9)))
    _write(source, "b.parquet", list(range(9, 17)))
    _publish(source, data)
    LakeDataset(data, index_location=index).build_index([INDEX], progress=False)
    other = _other_index(tmp_path, data, index)
    (foreign,) = other.latest().segments
    store = open_store(index)
    (ours,) = IndexLog(store).latest().segments
    replacement = other.store.get(foreign.key)
    store.put(ours.key, replacement)
    warnings = _check_rows(tmp_path, data, index)
    # Its compressed directory may differ in length from ours: then the object does not
    # read at our spans at all; else its records are another index's. Either way: scanned.
    assert any(
        "is not this index's" in line or f"{ours.key} unreadable" in line for line in warnings
    ), warnings
