"""The index's commit log (docs/segments.md, "Commits" and "Checkpoints"), on the local disk
and on a real S3-API server: a commit writes what it changes, not the whole index; a reader
takes the newest checkpoint and the records after it, and gets exactly the version each commit
made; damaged checkpoints and version-1 manifests are read past; hostile records and
checkpoints are refused naming the field."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

from bloomskip import FormatError
from bloomskip._store import open_store
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.dataset.index.segments import (
    CHECKPOINT_INTERVAL,
    Change,
    IndexLog,
    Manifest,
    SegmentEntry,
    _checksum,
    checkpoint_key,
    checkpoint_number,
    decode_checkpoint,
    decode_record,
    encode_checkpoint,
    encode_manifest,
    version_key,
)
from bloomskip.dataset.index.sidecar import FileEntry, IndexSpec, Sidecar
from bloomskip.dataset.listing.files import FileIdentity

SPECS = (IndexSpec("INDEX a a TYPE bloom_filter(0.01) GRANULARITY 1", (("a", "Int64"),)),)
OTHER = (IndexSpec("INDEX a a TYPE bloom_filter(0.2) GRANULARITY 1", (("a", "Int64"),)),)


def _payload(spec: IndexSpec, n: int) -> bytes:
    table = pa.table({"a": pa.array([n, n + 1, n + 2], pa.int64())})
    return SkipIndex.build(parse_index_definition(spec.definition), table, [3]).to_bytes()


def _segment(log: IndexLog, paths: list[str], tag: str, specs=SPECS) -> SegmentEntry:
    files = {
        path: FileEntry(
            path,
            "parquet",
            FileIdentity(10 + n, 7, "0" * 64),
            [3],
            [_payload(spec, n) for spec in specs],
        )
        for n, path in enumerate(paths)
    }
    identities = {path: {"size": 10 + n, "etag": f'"{tag}-{n}"'} for n, path in enumerate(paths)}
    return log.write_segment(Sidecar("row-group", list(specs), files), identities)


def _checkpoints(log: IndexLog) -> list[int]:
    return sorted(
        checkpoint_number(info.key)
        for info in log.store.list("versions/")
        if checkpoint_number(info.key) is not None
    )


def test_an_append_writes_the_same_few_bytes_however_large_the_index(location):
    """The record of a one-file append names that file's segment only: the same size over an
    index of 20 files and one of 4,000 (the manifest of version 1 grew with the file count)."""
    written = {}
    for files in (20, 4000):
        log = IndexLog(open_store(f"{location}/at-{files}"))
        paths = [f"part-{n:05d}.parquet" for n in range(files)]
        log.commit(Change("row-group", SPECS, [_segment(log, paths, "first")]))
        append = _segment(log, ["new.parquet"], "new")
        before = log.store.stats.bytes_written
        log.commit(Change("row-group", SPECS, [append]))
        written[files] = log.store.stats.bytes_written - before
        assert written[files] < 2048, written
    assert abs(written[4000] - written[20]) <= 16, written


def test_readers_get_every_version_each_commit_made(store):
    """Random builds, re-indexes, removals, compactions, index drops and rebuilds: a fresh
    reader of each version gets exactly what its commit returned, over checkpoints and records
    alike."""
    rng = random.Random(29)
    log = IndexLog(store)
    made: dict[int, Manifest] = {}
    specs = SPECS
    names = [f"f{n:03d}.parquet" for n in range(40)]
    for step in range(3 * CHECKPOINT_INTERVAL):
        current = log.latest()
        live = sorted(current.files()) if current is not None else []
        action = rng.choice(["add", "add", "reindex", "remove", "compact", "rebuild"])
        if action == "rebuild" and current is not None:
            specs = OTHER if specs == SPECS else SPECS
            paths = live or names[:3]
            change = Change(
                "row-group",
                specs,
                [_segment(log, paths, f"r{step}", specs)],
                replace_all=True,
                base_definitions=(current.granule, current.indexes),
            )
        elif action == "remove" and len(live) > 3:
            change = Change("row-group", specs, removed=frozenset(rng.sample(live, 2)))
        elif action == "compact" and current is not None and len(current.segments) > 2:
            merged = current.segments[:2]
            paths = [path for segment in merged for path in segment.files]
            change = Change(
                "row-group",
                specs,
                [_segment(log, paths, f"c{step}", specs)],
                only_if_in=frozenset(segment.key for segment in merged),
            )
        else:
            pool = live if action == "reindex" and live else names
            paths = rng.sample(pool, min(len(pool), rng.randint(1, 5)))
            change = Change("row-group", specs, [_segment(log, paths, f"a{step}", specs)])
        committed = log.commit(change)
        made[committed.version] = committed
        if step == 12:
            dropped = log.commit(Change("row-group", specs, drop="a"))
            made[dropped.version] = dropped
            specs = ()
            assert dropped.indexes == () and all(not s.index_spans for s in dropped.segments)
    assert _checkpoints(log), "no checkpoint after three intervals of commits"
    for number, manifest in made.items():
        fresh = IndexLog(open_store(store.uri))
        fresh.version_objects()
        assert fresh.read_version(number) == manifest, number


def test_a_reader_reads_a_checkpoint_and_at_most_an_interval_of_records(store):
    log = IndexLog(store)
    for step in range(2 * CHECKPOINT_INTERVAL + 3):
        log.commit(Change("row-group", SPECS, [_segment(log, [f"f{step}.parquet"], f"{step}")]))
    assert _checkpoints(log) == [CHECKPOINT_INTERVAL, 2 * CHECKPOINT_INTERVAL]
    reader = IndexLog(store)
    listed = reader.version_objects()
    before = store.stats.by_kind.get("get", 0)
    manifest = reader.read_version(max(listed), listed[max(listed)])
    # The checkpoint of version 20 and the records of versions 21-23.
    assert store.stats.by_kind["get"] - before == 4
    assert len(manifest.files()) == 2 * CHECKPOINT_INTERVAL + 3


def test_a_damaged_checkpoint_is_read_past(store):
    log = IndexLog(store)
    for step in range(CHECKPOINT_INTERVAL + 2):
        log.commit(Change("row-group", SPECS, [_segment(log, [f"f{step}.parquet"], f"{step}")]))
    expected = IndexLog(store).latest()
    (key,) = [info.key for info in store.list("versions/") if checkpoint_number(info.key)]
    data = bytearray(store.get(key))
    data[len(data) // 2] ^= 0x10
    store.put(key, bytes(data))
    assert IndexLog(store).latest() == expected  # from the records alone


def test_a_version_1_manifest_is_read_and_the_next_commit_checkpoints(store):
    """An index written before records: its whole version-1 manifest is the base of the next
    commit, which writes a checkpoint so that no reader fetches the old manifest again."""
    log = IndexLog(store)
    first = _segment(log, ["a.parquet", "b.parquet"], "1")
    document = json.loads(encode_manifest(Manifest(1, "row-group", SPECS, (first,))))
    for name in ("checksum", "base", "drop_segments", "drop_files"):
        document.pop(name)
    document["format_version"] = 1
    for entry in document["segments"]:
        entry.pop("checksum")
    store.put(version_key(1), json.dumps(document).encode())
    assert IndexLog(store).latest().files().keys() == {"a.parquet", "b.parquet"}
    second = log.commit(Change("row-group", SPECS, [_segment(log, ["b.parquet"], "2")]))
    assert _checkpoints(log) == [2]
    reader = IndexLog(store)
    listed = reader.version_objects()
    assert reader.read_version(2, listed[2]) == second
    assert version_key(1) not in reader.read_version(2).objects


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d.update(base=d["version"]), "base"),
        (lambda d: d.update(drop_files="a.parquet"), "drop_files"),
        (lambda d: d.update(drop_segments=[1]), "drop_segments"),
        (lambda d: d.pop("checksum"), "checksum"),
        (lambda d: d.update(format_version=3), "format_version"),
    ],
)
def test_hostile_records_are_refused_naming_the_field(store, edit, field):
    log = IndexLog(store)
    log.commit(Change("row-group", SPECS, [_segment(log, ["a.parquet"], "1")]))
    log.commit(Change("row-group", SPECS, [_segment(log, ["b.parquet"], "2")]))
    document = json.loads(store.get(version_key(2)))
    edit(document)
    if field != "checksum":  # resealed: the fields themselves are checked too
        header = {name: value for name, value in document.items() if name != "segments"}
        document["checksum"] = _checksum(header, "manifest", "")
    data = json.dumps(document).encode()
    with pytest.raises(FormatError, match=field):
        decode_record(data, "s3://b/versions/2.json", 2)


def _checkpoint_of(log: IndexLog) -> bytes:
    log.commit(Change("row-group", SPECS, [_segment(log, ["a.parquet", "b.parquet"], "1")]))
    return encode_checkpoint(log.latest())


def test_hostile_checkpoints_are_refused_naming_the_field(store):
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = _checkpoint_of(IndexLog(store))
    key = checkpoint_key(1, data)
    assert decode_checkpoint(data, "cp", key).files().keys() == {"a.parquet", "b.parquet"}
    with pytest.raises(FormatError, match="SHA-256"):
        decode_checkpoint(data[:-1] + b"x", "cp", key)
    with pytest.raises(FormatError, match="differs from its key"):
        decode_checkpoint(data, "cp", checkpoint_key(2, data))

    def resealed(table: pa.Table) -> dict:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        out = sink.getvalue().to_pybytes()
        return {"data": out, "key": checkpoint_key(1, out), "source": "cp"}

    table = pq.read_table(pa.BufferReader(data))
    header = json.loads(table.schema.metadata[b"bloomskip"])
    bad_segment = table.set_column(0, "segment", pa.array([0, 5], pa.int32()))
    with pytest.raises(FormatError, match="segment"):
        decode_checkpoint(**resealed(bad_segment))
    no_etag = table.set_column(table.column_names.index("etag"), "etag", pa.nulls(2, pa.string()))
    with pytest.raises(FormatError, match="etag"):
        decode_checkpoint(**resealed(no_etag))
    header["segments"][0]["files"] = 3
    miscounted = table.replace_schema_metadata({"bloomskip": json.dumps(header)})
    with pytest.raises(FormatError, match="files"):
        decode_checkpoint(**resealed(miscounted))
    with pytest.raises(FormatError, match="bloomskip"):
        decode_checkpoint(**resealed(table.replace_schema_metadata({})))


def test_appends_are_compacted_by_tier_and_rows_stay_exact(tmp_path, lake_at):
    """One-file appends each write a small segment; the build that fills a tier merges it, so
    the number of segments a lookup reads stays small, and every query returns DuckDB's rows."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq
    from lake_fixtures import upload

    from bloomskip.dataset.backends.lake import LakeDataset
    from bloomskip.dataset.index.segments import COMPACTION_TIER_SEGMENTS

    data, index = lake_at
    source = tmp_path / "data"
    source.mkdir()
    counts = []
    merged = 0
    for number in range(3 * COMPACTION_TIER_SEGMENTS):
        ids = list(range(number * 100, number * 100 + 100))
        pq.write_table(pa.table({"user_id": ids}), source / f"part-{number:03d}.parquet")
        if data.startswith("s3://"):
            upload(source, data)
        lake = LakeDataset(data, index_location=index)
        report = lake.build_index(["user_id TYPE bloom_filter(0.01)"] if not number else None,
                                  progress=False)  # fmt: skip
        merged += report.segments_merged
        counts.append(len(lake.latest_manifest().segments))
    # Each tier keeps fewer than a full tier's segments: twelve appends fill two tiers.
    assert max(counts) <= 2 * (COMPACTION_TIER_SEGMENTS - 1), counts
    assert merged >= 2 * COMPACTION_TIER_SEGMENTS and counts[-1] < len(counts), counts
    files = sorted(str(path) for path in source.glob("*.parquet"))
    for where_sql in ("user_id = 150", "user_id IN (7, 1099, 5000)", "user_id = 99999"):
        lake = LakeDataset(data, index_location=index)
        got = sorted(lake.run(lake.explain(where_sql), where_sql).column("user_id").to_pylist())
        query = f"SELECT user_id FROM read_parquet({files!r}) WHERE {where_sql}"
        assert got == sorted(row[0] for row in duckdb.sql(query).fetchall()), where_sql
    manual = LakeDataset(data, index_location=index).compact()
    assert (
        manual is None
        or len(LakeDataset(data, index_location=index).latest_manifest().segments) == 1
    )
