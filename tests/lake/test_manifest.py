"""Segments and manifest versions on the local disk and on a real S3-API server: commits that
concurrent builders both land, a reader that always sees one complete version, a builder killed
mid-build that loses nothing, and corrupt objects reported with their URI."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading

import pyarrow as pa
import pytest

from bloomskip import CommitConflictError, FormatError
from bloomskip._store import open_store
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.dataset.index.segments import (
    Change,
    IndexLog,
    Manifest,
    SegmentEntry,
    checkpoint_number,
    decode_manifest,
    encode_manifest,
    version_key,
)
from bloomskip.dataset.index.sidecar import FileEntry, IndexSpec, Sidecar
from bloomskip.dataset.listing.files import FileIdentity

SPECS = (
    IndexSpec("INDEX a a TYPE bloom_filter(0.01) GRANULARITY 1", (("a", "Int64"),)),
    IndexSpec("INDEX b b TYPE tokenbf_v1(256, 2, 0) GRANULARITY 1", (("b", "String"),)),
)


def _payload(number: int, fill: int, n: int) -> bytes:
    """Index ``number``'s real granules (rows 10 and 5) over values that depend on ``fill``."""
    definition = parse_index_definition(SPECS[number].definition)
    if number == 0:
        table = pa.table(
            {"a": pa.array([fill * 1000 + n * 100 + i for i in range(15)], pa.int64())}
        )
    else:
        table = pa.table({"b": [f"w{fill} n{n} r{i}" for i in range(15)]})
    return SkipIndex.build(definition, table, [10, 5]).to_bytes()


def _sidecar(paths: list[str], fill: int = 1) -> Sidecar:
    files = {
        path: FileEntry(
            path,
            "parquet",
            FileIdentity(100 + n, 7, "0" * 64),
            [10, 5],
            [_payload(0, fill, n), _payload(1, fill, n)],
        )
        for n, path in enumerate(paths)
    }
    return Sidecar("row-group", list(SPECS), files)


def _add(log: IndexLog, paths: list[str], fill: int = 1):
    sidecar = _sidecar(paths, fill)
    identities = {path: {"size": 100 + n, "etag": f'"{fill}-{n}"'} for n, path in enumerate(paths)}
    segment = log.write_segment(sidecar, identities)
    return log.commit(Change("row-group", SPECS, [segment]))


def test_segments_round_trip_and_read_only_the_needed_ranges(store):
    log = IndexLog(store)
    manifest = _add(log, ["x/a.parquet", "x/b.parquet"])
    assert manifest.version == 1
    latest = IndexLog(open_store(store.uri)).latest()
    assert latest == manifest
    (segment,) = latest.segments
    before, bytes_before = store.stats.requests, store.stats.bytes_read
    opened = log.read_segment(segment, [1], SPECS)
    # The directory and the parts' headers lie together at the start: the directory and index
    # 1's header came in one request of the bytes up to its end; no slice yet.
    assert store.stats.requests == before + 1
    header_at, _, head, _ = segment.index_spans[1]
    assert store.stats.bytes_read - bytes_before == header_at + head
    assert opened.files["x/b.parquet"].payloads[1] == _payload(1, 1, 1)
    assert opened.files["x/a.parquet"].payloads[1] == _payload(1, 1, 0)
    assert opened.files["x/a.parquet"].payloads[0] == _payload(0, 1, 0)  # fetched on demand


def test_adding_files_writes_one_segment_and_one_version(store):
    log = IndexLog(store)
    _add(log, [f"f{n}.parquet" for n in range(20)])
    objects_before = {info.key: info for info in store.list("")}
    manifest = _add(log, ["new.parquet"], fill=9)
    objects_after = {info.key: info for info in store.list("")}
    new = set(objects_after) - set(objects_before)
    assert len(new) == 2 and version_key(2) in new
    for key, info in objects_before.items():  # nothing written before was touched
        assert (objects_after[key].size, objects_after[key].etag) == (info.size, info.etag)
    assert len(manifest.files()) == 21


def test_reindexing_a_file_moves_it_to_the_new_segment(store):
    log = IndexLog(store)
    _add(log, ["a.parquet", "b.parquet"])
    manifest = _add(log, ["b.parquet"], fill=5)
    files = manifest.files()
    assert files["a.parquet"][0].key != files["b.parquet"][0].key
    assert files["b.parquet"][1] == {"size": 100, "etag": '"5-0"'}
    opened = log.read_segment(files["b.parquet"][0], [0], SPECS)
    assert opened.files["b.parquet"].payloads[0] == _payload(0, 5, 0)


def test_concurrent_builders_on_disjoint_files_all_commit(store):
    barrier = threading.Barrier(4)
    errors = []

    def builder(number: int) -> None:
        log = IndexLog(open_store(store.uri))
        sidecar = _sidecar([f"w{number}/{n}.parquet" for n in range(3)], number)
        identities = {path: {"size": 1, "etag": '"e"'} for path in sidecar.files}
        segment = log.write_segment(sidecar, identities)
        barrier.wait()
        try:
            log.commit(Change("row-group", SPECS, [segment]))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=builder, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    log = IndexLog(store)
    assert log.version_numbers() == [1, 2, 3, 4]
    assert sorted(log.latest().files()) == sorted(
        f"w{number}/{n}.parquet" for number in range(4) for n in range(3)
    )


def test_a_change_of_definitions_meanwhile_is_a_conflict(store):
    log = IndexLog(store)
    segment = log.write_segment(_sidecar(["a.parquet"]), {"a.parquet": {"size": 1, "etag": '"e"'}})
    _add(log, ["b.parquet"])
    other = Change("row-group", SPECS[:1], [segment])
    with pytest.raises(CommitConflictError, match="definitions"):
        log.commit(other)


def test_compaction_keeps_files_rebuilt_meanwhile(store):
    log = IndexLog(store)
    first = _add(log, ["a.parquet", "b.parquet"]).segments[0]
    merged = log.write_segment(
        _sidecar(["a.parquet", "b.parquet"]),
        {"a.parquet": {"size": 1, "etag": '"e"'}, "b.parquet": {"size": 1, "etag": '"e"'}},
    )
    _add(log, ["b.parquet"], fill=7)  # b is re-indexed before the compaction commits
    manifest = log.commit(Change("row-group", SPECS, [merged], only_if_in=frozenset({first.key})))
    files = manifest.files()
    assert files["a.parquet"][0].key == merged.key
    assert files["b.parquet"][1] == {"size": 100, "etag": '"7-0"'}
    assert first.key not in {segment.key for segment in manifest.segments}


def _build_and_die(location: str, stage: str) -> None:
    log = IndexLog(open_store(location))
    sidecar = _sidecar(["late.parquet"])
    segment = log.write_segment(sidecar, {"late.parquet": {"size": 1, "etag": '"e"'}})
    if stage == "after-segment":
        os.kill(os.getpid(), signal.SIGKILL)
    log.commit(Change("row-group", SPECS, [segment]))


@pytest.mark.parametrize("stage", ["after-segment", "during-segment"])
def test_a_killed_builder_leaves_the_previous_version_readable(store, location, stage):
    log = IndexLog(store)
    before = _add(log, ["a.parquet"])
    context = multiprocessing.get_context("spawn")
    if stage == "during-segment":
        # Killed at an arbitrary moment of its run: before, while or after it writes.
        process = context.Process(target=_build_and_die, args=(location, "commit"))
        process.start()
        process.join(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.join()
    else:
        process = context.Process(target=_build_and_die, args=(location, stage))
        process.start()
        process.join()
        assert process.exitcode == -signal.SIGKILL
    latest = IndexLog(open_store(location)).latest()
    assert latest.version in (1, 2)
    assert latest.files().keys() >= before.files().keys()
    for segment in latest.segments:
        log.read_segment(segment, [0, 1], SPECS)


def test_corrupt_or_truncated_objects_name_their_uri(store):
    log = IndexLog(store)
    manifest = _add(log, ["a.parquet"])
    (segment,) = manifest.segments
    data = store.get(segment.key)
    store.put(segment.key, data[: segment.index_spans[0][0] + 5])
    with pytest.raises(FormatError, match=segment.key):
        log.read_segment(segment, [0], SPECS)
    store.put(version_key(2), b'{"format": "bloomskip-manifest", "format_version": 1')
    with pytest.raises(FormatError, match=r"versions/00000000000000000002\.json.*field manifest"):
        log.latest()


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d.update(format="delta"), "format"),
        (lambda d: d.update(format_version=99), "format_version"),
        (lambda d: d.update(version=-1), "version"),
        (lambda d: d["segments"][0].update(key="../../etc/passwd"), r"segments\[0\]\.key"),
        (lambda d: d["segments"][0].update(index_spans=[[0, 20], [90, 30]]), r"index_spans\[1\]"),
        (lambda d: d["segments"][0].update(index_spans=[[0, 1]]), r"segments\[0\]\.index_spans"),
        (lambda d: d["segments"][0].update(files={}), r"segments\[0\]\.files"),
        (lambda d: d["segments"].append(dict(d["segments"][0])), "segments"),
    ],
)
def test_hostile_manifests_are_refused_naming_the_field(edit, field):
    import json

    segment = SegmentEntry(
        "segments/18d3c0a5-9f1e2d3c4b5a6978.bsk",
        100,
        ((0, 50), (50, 50)),
        {"a.parquet": {"size": 1, "etag": '"e"'}},
    )
    document = json.loads(encode_manifest(Manifest(1, "row-group", SPECS, (segment,))))
    decode_manifest(json.dumps(document).encode(), "s3://b/versions/1.json")  # valid as written
    edit(document)
    with pytest.raises(FormatError, match=field):
        decode_manifest(json.dumps(document).encode(), "s3://b/versions/1.json")


def test_vacuum_keeps_what_recent_versions_use_and_drop_removes_all(store):
    log = IndexLog(store)
    for number in range(4):
        _add(log, ["a.parquet"], fill=number + 1)  # each version replaces a's segment
    orphan = log.write_segment(_sidecar(["b.parquet"]), {"b.parquet": {"size": 1, "etag": '"e"'}})
    deleted = log.vacuum(keep_versions=1, min_age_seconds=0)
    assert version_key(4) not in deleted and orphan.key in deleted
    assert log.version_numbers() == [4]
    # Version 4 stays readable without the records before it: the vacuum checkpointed it.
    checkpoints = [info.key for info in store.list("versions/") if checkpoint_number(info.key)]
    assert [checkpoint_number(key) for key in checkpoints] == [4]
    assert {info.key for info in store.list("segments/")} == {
        segment.key for segment in IndexLog(store).latest().segments
    }
    young = log.write_segment(_sidecar(["c.parquet"]), {"c.parquet": {"size": 1, "etag": '"e"'}})
    assert young.key not in log.vacuum(keep_versions=1, min_age_seconds=3600)
    assert log.drop() == 4  # the version, its checkpoint, its segment and the young one
    assert store.list("") == [] and log.latest() is None


def test_a_commit_supersedes_a_corrupt_newest_version(store):
    log = IndexLog(store)
    first = _add(log, ["a.parquet"])
    store.put(version_key(2), b"\x00\xff not a manifest")
    manifest, newest, unreadable = log.latest_readable()
    assert (manifest.version, newest) == (1, 2)
    assert len(unreadable) == 1 and "versions/00000000000000000002.json" in unreadable[0]
    # The damaged version fills the window of one: the newest readable one stays, whole.
    assert log.vacuum(keep_versions=1, min_age_seconds=0) == []
    third = _add(log, ["b.parquet"], fill=2)  # built on version 1, numbered after version 2
    assert third.version == 3 and set(third.files()) == {"a.parquet", "b.parquet"}
    assert log.latest() == third
    deleted = log.vacuum(keep_versions=1, min_age_seconds=0)
    assert sorted(deleted) == [version_key(1), version_key(2)]
    assert first.segments[0].key in {info.key for info in store.list("segments/")}
