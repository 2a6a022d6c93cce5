"""Segments of format 2 (bit-sliced parts, docs/sliced-layout.md) in the lake: the same
decisions as the per-file ClickHouse granules of a sidecar over the same files, lookups that
read a small share of the index, a damaged slice that hides no row, and format-1 segments
migrated by the next build without reading a data file."""

from __future__ import annotations

import dataclasses
import os
import random
import stat

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from lake_fixtures import upload

from bloomskip import Dataset
from bloomskip._store import open_store
from bloomskip.dataset.backends.lake import LakeDataset
from bloomskip.dataset.index.segments import (
    IndexLog,
    SegmentEntry,
    encode_manifest,
    version_key,
)
from bloomskip.dataset.index.sidecar import FileEntry, Sidecar, encode_sidecar

INDEXES = [
    "user_id TYPE bloom_filter(0.01)",
    "msg TYPE tokenbf_v1(2048, 3, 0)",
    "url TYPE ngrambf_v1(3, 1024, 2, 7)",
]
WHERES = [
    "user_id = 1234",
    "user_id = 99999999",
    "user_id IN (5, 77777, 4321)",
    "hasToken(msg, 'tok17')",
    "hasToken(msg, 'absent')",
    "url LIKE '%/item/42/%'",
    "user_id = 1234 OR hasToken(msg, 'tok3')",
    "NOT (user_id = 7) AND url LIKE '%/item/1%'",
    "msg = 'tok5 tok6'",
]


def _write_files(
    folder, count: int, rows: int = 200, seed: int = 29, row_groups: int = 4, id_range=50_000
) -> None:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        ids = [rng.randrange(0, id_range) for _ in range(rows)]
        table = pa.table(
            {
                "user_id": pa.array(ids, pa.int64()),
                "msg": [f"tok{rng.randrange(200)} tok{rng.randrange(200)}" for _ in range(rows)],
                "url": [f"https://x.org/item/{rng.randrange(500)}/" for _ in range(rows)],
            }
        )
        pq.write_table(
            table, folder / f"part-{number:04d}.parquet", row_group_size=rows // row_groups
        )


def _duckdb(folder, where_sql: str) -> list[int]:
    files = sorted(str(path) for path in folder.glob("*.parquet"))
    sql = f"SELECT user_id FROM read_parquet({files!r}) WHERE {where_sql.replace('hasToken', '_t')}"
    connection = duckdb.connect()
    connection.create_function("_t", lambda text, token: token in text.split(" "), [str, str], bool)
    return sorted(row[0] for row in connection.sql(sql).fetchall())


def test_decisions_equal_the_sidecar_granules_and_rows_equal_duckdb(tmp_path):
    data = tmp_path / "data"
    _write_files(data, 12)
    sidecar = Dataset(data)
    sidecar.build_index(INDEXES, progress=False)
    lake = LakeDataset(str(data), index_location=str(tmp_path / "index"))
    lake.build_index(INDEXES, progress=False)
    assert all(segment.directory for segment in lake.latest_manifest().segments)
    pruned = 0
    for where_sql in WHERES:
        ours = lake.explain(where_sql)
        theirs = sidecar.explain(where_sql)
        assert not ours.warnings, ours.warnings
        keep = {
            state.relative_path: list(k) for state, k in zip(ours.files, ours.keep, strict=True)
        }
        expected = {
            state.relative_path: list(k) for state, k in zip(theirs.files, theirs.keep, strict=True)
        }
        assert keep == expected, where_sql
        pruned += sum(not kept for row in keep.values() for kept in row)
        got = sorted(lake.run(ours, where_sql).column("user_id").to_pylist())
        assert got == _duckdb(data, where_sql), where_sql
    assert pruned > 100  # the indexes did prune: the comparison can fail


def test_a_lookup_reads_a_small_share_of_the_index(tmp_path, lake_at):
    """The issue's shape: 300 files of 1,000 rows, one row group each, a point lookup and a
    token search each read under 2% of the index (today's manifest, the segment's directory,
    the part's header and the slices probed)."""
    data, index = lake_at
    # High-cardinality ids (as in benchmarks/lake_scale.py): every full granule has one
    # distinct count, so one bucket of bloom_filter slices (docs/sliced-layout.md).
    _write_files(tmp_path / "data", 300, rows=1000, row_groups=1, id_range=1 << 62)
    if data.startswith("s3://"):
        upload(tmp_path / "data", data)
    indexes = ["user_id TYPE bloom_filter(0.01)", "msg TYPE tokenbf_v1(8192, 3, 0)"]
    LakeDataset(data, index_location=index).build_index(indexes, progress=False)
    store = open_store(index)
    size = sum(info.size for info in store.list(""))
    present = pq.read_table(tmp_path / "data" / "part-0150.parquet").column("user_id")[7]
    for where_sql in (f"user_id = {present}", "hasToken(msg, 'tok17')"):
        lake = LakeDataset(data, index_location=index)
        before = lake.log.store.stats.bytes_read
        explanation = lake.explain(where_sql)
        read = lake.log.store.stats.bytes_read - before
        assert not explanation.warnings
        assert read < 0.02 * size, (where_sql, read, size)


def test_a_damaged_slice_hides_no_row(tmp_path):
    data = tmp_path / "data"
    _write_files(data, 6)
    index = tmp_path / "index"
    lake = LakeDataset(str(data), index_location=str(index))
    lake.build_index(INDEXES[:1], progress=False)
    (segment,) = lake.latest_manifest().segments
    _, length, head, slices_at = segment.index_spans[0]
    path = index / segment.key
    raw = bytearray(path.read_bytes())
    # Clear every byte of the slices: a probe of any value finds no bit, unless refused.
    raw[slices_at : slices_at + length - head] = bytes(length - head)
    os.chmod(path, stat.S_IWUSR | stat.S_IRUSR)
    path.write_bytes(bytes(raw))
    lake = LakeDataset(str(data), index_location=str(index))
    for where_sql in ("user_id = 1234", "user_id IN (5, 4321)"):
        explanation = lake.explain(where_sql)
        assert any("CRC32" in line or "not used" in line for line in explanation.warnings)
        got = sorted(lake.run(explanation, where_sql).column("user_id").to_pylist())
        assert got == _duckdb(data, where_sql)


def _format_1_segment(log: IndexLog, sidecar: Sidecar, identities: dict) -> SegmentEntry:
    """A segment as bloomskip wrote them before format 2: one sidecar part per index."""
    parts = []
    for number in range(len(sidecar.indexes)):
        files = {
            path: FileEntry(e.path, e.format, e.identity, e.granule_rows, [e.payloads[number]])
            for path, e in sidecar.files.items()
        }
        parts.append(
            encode_sidecar(Sidecar(sidecar.granule, [sidecar.indexes[number]], files)).data
        )
    spans, offset = [], 0
    for part in parts:
        spans.append((offset, len(part)))
        offset += len(part)
    key = "segments/1-0123456789abcdef.bsk"
    log.store.put_if_absent(key, b"".join(parts))
    return SegmentEntry(key, offset, tuple(spans), identities, "")


def test_format_1_segments_are_migrated_without_reading_the_data(tmp_path):
    """An index of format-1 segments (per-file sidecar parts) is rewritten bit-sliced by the
    next build, from its own bits: no file is indexed again, and every decision stays."""
    data = tmp_path / "data"
    _write_files(data, 5)
    index = tmp_path / "index"
    lake = LakeDataset(str(data), index_location=str(index))
    lake.build_index(INDEXES, progress=False)
    manifest = lake.latest_manifest()
    (segment,) = manifest.segments
    log = IndexLog(open_store(str(index)))
    sidecar = log.read_segment(segment, range(len(INDEXES)), manifest.indexes)
    # Format-1 segments recorded each file's footer hash; any 64 hex digits do here.
    entries = {
        path: FileEntry(
            e.path,
            e.format,
            dataclasses.replace(e.identity, footer_sha256="ab" * 32),
            e.granule_rows,
            list(e.payloads),
        )
        for path, e in sidecar.files.items()
    }
    log.drop()
    old = _format_1_segment(
        log, Sidecar(manifest.granule, list(manifest.indexes), entries), dict(segment.files)
    )
    legacy = type(manifest)(1, manifest.granule, manifest.indexes, (old,))
    log.store.put(version_key(1), encode_manifest(legacy))
    before = LakeDataset(str(data), index_location=str(index))
    assert before.latest_manifest().segments[0].directory is None
    decisions = {where_sql: before.explain(where_sql).keep for where_sql in WHERES}
    report = LakeDataset(str(data), index_location=str(index)).build_index(progress=False)
    assert report.segments_merged == 1 and report.rebuilt == [], report
    after = LakeDataset(str(data), index_location=str(index))
    assert all(segment.directory for segment in after.latest_manifest().segments)
    for where_sql in WHERES:
        explanation = after.explain(where_sql)
        assert not explanation.warnings
        assert [list(k) for k in explanation.keep] == [list(k) for k in decisions[where_sql]]
        got = sorted(after.run(explanation, where_sql).column("user_id").to_pylist())
        assert got == _duckdb(data, where_sql)
