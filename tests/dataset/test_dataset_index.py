"""The sidecar layout's life cycle (``sidecar=``, the single-file index before segments):
incremental builds, changed sources, corrupt sidecars, SIGKILL mid-build."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from dataset_fixtures import INDEXES, make_table, write_dataset

from bloomskip.dataset import Dataset
from bloomskip.dataset.index.sidecar import read_sidecar
from bloomskip.dataset.locate import default_sidecar_path
from bloomskip.dataset.sql.translate import clickhouse_to_duckdb
from bloomskip.errors import BloomskipError, FormatError

WHERE = "hasToken(s, '東京') OR k = 1300"


def _full_scan_ids(directory: Path, where: str) -> list[int]:
    listing = ", ".join(f"'{p}'" for p in sorted(directory.glob("*.parquet")))
    sql = f"SELECT id FROM read_parquet([{listing}]) WHERE {clickhouse_to_duckdb(where)}"
    return sorted(row[0] for row in duckdb.sql(sql).fetchall())


def _sidecar_dataset(directory: Path) -> Dataset:
    """``directory`` (or a file) with its index in the sidecar layout, at the path that
    layout gives it by default."""
    return Dataset(directory, sidecar=default_sidecar_path(directory))


def _ids(dataset: Dataset, where: str) -> list[int]:
    return sorted(dataset.query(where, ["id"]).column("id").to_pylist())


@pytest.fixture
def fresh(tmp_path: Path, dataset_dir: Path) -> Path:
    directory = tmp_path / "data"
    shutil.copytree(dataset_dir, directory)
    _sidecar_dataset(directory).build_index(INDEXES, progress=False)
    return directory


def test_rebuild_reindexes_only_new_or_changed_files(fresh: Path) -> None:
    dataset = _sidecar_dataset(fresh)
    assert dataset.build_index(INDEXES, progress=False).rebuilt == []
    pq.write_table(make_table(800, 99, 10_000), fresh / "part-1.parquet", row_group_size=64)
    pq.write_table(make_table(300, 98, 20_000), fresh / "part-9.parquet", row_group_size=64)
    dataset = _sidecar_dataset(fresh)
    assert dataset.build_index(None, progress=False).rebuilt == ["part-1.parquet", "part-9.parquet"]
    assert _sidecar_dataset(fresh).build_index(None, progress=False).rebuilt == []
    assert _ids(_sidecar_dataset(fresh), WHERE) == _full_scan_ids(fresh, WHERE)


def test_definitions_given_again_keep_every_index(fresh: Path) -> None:
    """Issue 17: a build with some definitions used to drop the others without a word."""
    before = read_sidecar(fresh / "_bloomskip.index")
    report = _sidecar_dataset(fresh).build_index(INDEXES[:2], progress=False)
    assert report.rebuilt == []
    assert read_sidecar(report.sidecar).indexes == before.indexes


def test_a_new_index_is_added_and_only_it_is_computed(fresh: Path) -> None:
    before = read_sidecar(fresh / "_bloomskip.index")
    extra = "INDEX v_bf v TYPE bloom_filter(0.1)"
    report = _sidecar_dataset(fresh).build_index([extra], progress=False)
    after = read_sidecar(report.sidecar)
    assert [spec.definition for spec in after.indexes][: len(INDEXES)] == [
        spec.definition for spec in before.indexes
    ]
    assert after.indexes[-1].definition == "INDEX v_bf v TYPE bloom_filter(0.1) GRANULARITY 1"
    # The old sections are the same bytes; the new index equals a build of it alone.
    Dataset(fresh, sidecar=fresh.parent / "alone.index").build_index([extra], progress=False)
    alone = read_sidecar(fresh.parent / "alone.index")
    for name, entry in after.files.items():
        assert list(entry.payloads)[:-1] == list(before.files[name].payloads)
        assert list(entry.payloads)[-1] == list(alone.files[name].payloads)[0]
    assert _ids(_sidecar_dataset(fresh), "v > 0.5 AND k = 13") == _full_scan_ids(
        fresh, "v > 0.5 AND k = 13"
    )


def test_a_changed_definition_needs_replace(fresh: Path) -> None:
    changed = "INDEX k_bf k TYPE bloom_filter(0.2)"
    with pytest.raises(BloomskipError, match="give --replace"):
        _sidecar_dataset(fresh).build_index([changed], progress=False)
    report = _sidecar_dataset(fresh).build_index([changed], replace=True, progress=False)
    assert len(report.rebuilt) == 3
    definitions = [spec.definition for spec in read_sidecar(report.sidecar).indexes]
    assert definitions[0] == "INDEX k_bf k TYPE bloom_filter(0.2) GRANULARITY 1"
    assert len(definitions) == len(INDEXES)
    with pytest.raises(BloomskipError, match="granule"):
        _sidecar_dataset(fresh).build_index(None, granule=100, progress=False)
    assert (
        _sidecar_dataset(fresh).build_index(None, granule=100, replace=True, progress=False).rebuilt
    )


def test_two_builds_at_once_keep_both_indexes(dataset_dir: Path, tmp_path: Path) -> None:
    import threading

    directory = tmp_path / "data"
    shutil.copytree(dataset_dir, directory)
    errors = []

    def build(definition: str) -> None:
        try:
            _sidecar_dataset(directory).build_index([definition], progress=False)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=build, args=(text,))
        for text in ("INDEX k_bf k TYPE bloom_filter", "INDEX s_tok s TYPE tokenbf_v1(512, 2, 0)")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    names = {
        spec.definition.split()[1] for spec in read_sidecar(directory / "_bloomskip.index").indexes
    }
    assert names == {"k_bf", "s_tok"}


def test_changed_file_is_scanned_and_answered_correctly(fresh: Path) -> None:
    # Rewrite part-0 with different rows: the old index must not be trusted for it.
    pq.write_table(make_table(1500, 1234, 0), fresh / "part-0.parquet", row_group_size=97)
    dataset = _sidecar_dataset(fresh)
    result = dataset.explain(WHERE)
    assert result.changed_files == ["part-0.parquet"]
    assert any(w.startswith("1 file changed since it was indexed") for w in result.warnings)
    state = next(s for s in result.files if s.relative_path == "part-0.parquet")
    assert state.entry is None
    assert result.keep[result.files.index(state)].all()
    assert _ids(dataset, WHERE) == _full_scan_ids(fresh, WHERE)


def test_footer_change_with_same_size_and_mtime_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "one.parquet"
    table = make_table(400, 5, 0).replace_schema_metadata({"tag": "QZXJ7"})
    pq.write_table(table, path, row_group_size=100)
    dataset = _sidecar_dataset(path)
    dataset.build_index(INDEXES[:1], progress=False)
    stat = path.stat()
    data = path.read_bytes()
    assert data.count(b"QZXJ7") == 1
    path.write_bytes(data.replace(b"QZXJ7", b"QZXJ8"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    result = _sidecar_dataset(path).explain("k = 13")
    assert result.files[0].status == "changed since indexing"
    assert len(result.row_groups()) == 4


def test_missing_file_and_new_file(fresh: Path) -> None:
    (fresh / "part-2.parquet").unlink()
    pq.write_table(make_table(500, 77, 50_000), fresh / "part-7.parquet", row_group_size=100)
    dataset = _sidecar_dataset(fresh)
    result = dataset.explain(WHERE)
    assert result.unindexed_files == ["part-7.parquet"]
    assert any(w.startswith("1 file is not indexed") for w in result.warnings)
    assert _ids(dataset, WHERE) == _full_scan_ids(fresh, WHERE)


def _sections(sidecar: Path) -> tuple[int, dict]:
    """The payload area's start and the version-2 header of ``sidecar``."""
    data = sidecar.read_bytes()
    (header_length,) = struct.unpack_from("<I", data, 12)
    return 16 + header_length + 32, json.loads(data[16 : 16 + header_length])


def test_corrupt_sidecar_header_falls_back_to_a_scan(fresh: Path) -> None:
    sidecar = fresh / "_bloomskip.index"
    data = bytearray(sidecar.read_bytes())
    data[40] ^= 0x40  # inside the header
    sidecar.write_bytes(bytes(data))
    dataset = _sidecar_dataset(fresh)
    with pytest.raises(FormatError, match="checksum"):
        dataset.load_sidecar()
    result = dataset.explain(WHERE)
    assert any("checksum mismatch" in w for w in result.warnings)
    assert all(keep.all() for keep in result.keep)
    assert _ids(dataset, WHERE) == _full_scan_ids(fresh, WHERE)
    # build replaces a corrupt sidecar
    _sidecar_dataset(fresh).build_index(INDEXES, progress=False)
    assert len(read_sidecar(sidecar).files) == 3


def test_corrupt_section_scans_only_the_file_it_covers(fresh: Path) -> None:
    sidecar = fresh / "_bloomskip.index"
    payload_start, header = _sections(sidecar)
    names = [f["path"] for f in header["files"]]
    (k_bf,) = [
        i for i, x in enumerate(header["indexes"]) if x["definition"].startswith("INDEX k_bf")
    ]
    offset, length, _ = header["files"][names.index("part-1.parquet")]["payloads"][k_bf]
    data = bytearray(sidecar.read_bytes())
    data[payload_start + offset + length // 2] ^= 0x01
    sidecar.write_bytes(bytes(data))
    dataset = _sidecar_dataset(fresh)
    dataset.load_sidecar()  # the header is intact: only that section is refused, when read
    where = "k = 1300"
    result = dataset.explain(where)
    assert any("part-1.parquet" in w and "corrupt" in w for w in result.warnings)
    outcome = result.indexes[k_bf]
    assert outcome.useful
    by_name = {state.relative_path: n for n, state in enumerate(result.files)}
    assert outcome.keep[by_name["part-1.parquet"]].all()  # scanned for this index
    assert not outcome.keep[by_name["part-0.parquet"]].all()  # still pruned by it
    assert _ids(dataset, where) == _full_scan_ids(fresh, where)
    # build re-indexes the file whose section is corrupt, and only that one
    assert _sidecar_dataset(fresh).build_index(None, progress=False).rebuilt == ["part-1.parquet"]
    assert not any("corrupt" in w for w in _sidecar_dataset(fresh).explain(where).warnings)


@pytest.mark.parametrize("position", [i / 23 for i in range(24)])
def test_any_flipped_byte_on_disk_never_gives_a_wrong_answer(fresh: Path, position) -> None:
    sidecar = fresh / "_bloomskip.index"
    data = bytearray(sidecar.read_bytes())
    data[min(int(position * len(data)), len(data) - 1)] ^= 0x10
    sidecar.write_bytes(bytes(data))
    with pytest.raises(FormatError):  # detected in the header or in the section holding it
        for entry in read_sidecar(sidecar).files.values():
            list(entry.payloads)
    # A query reads only the sections it needs: whether or not it meets the flipped byte, the
    # answer is the full scan's.
    assert _ids(_sidecar_dataset(fresh), WHERE) == _full_scan_ids(fresh, WHERE)


def test_no_sidecar_scans_and_refresh_without_definitions_fails(tmp_path: Path) -> None:
    directory = tmp_path / "plain"
    write_dataset(directory, [(300, 50)])
    dataset = _sidecar_dataset(directory)
    assert dataset.explain("k = 1").warnings[0].startswith("no index at")
    assert _ids(dataset, "k = 13") == _full_scan_ids(directory, "k = 13")
    with pytest.raises(BloomskipError, match="no --index"):
        dataset.build_index(None)


def test_bad_definitions_are_user_errors(fresh: Path) -> None:
    dataset = _sidecar_dataset(fresh)
    for definition, message in [
        ("nope TYPE bloom_filter", "not a column"),
        ("k TYPE tokenbf_v1(0, 1, 0)", "tokenbf"),
        ("k TYPE bloom_filter GRANULARITY 2", "GRANULARITY"),
        ("v TYPE tokenbf_v1(64, 2, 0)", "Float64"),
        ("k", "expected 'EXPR TYPE"),  # no TYPE clause at all
        ("k TYPE minmax", "not a Bloom-filter index"),
    ]:
        with pytest.raises(BloomskipError, match=message):
            dataset.build_index([definition], progress=False)
    with pytest.raises(BloomskipError, match="--granule"):
        dataset.build_index(INDEXES, granule="0")


KILL_SCRIPT = """
import sys
from bloomskip.dataset import Dataset
Dataset(sys.argv[1], sidecar=sys.argv[1] + "/_bloomskip.index").build_index(
    [sys.argv[2]], replace=True, progress=False
)
"""


def test_sigkill_during_build_leaves_old_index_or_none(tmp_path: Path) -> None:
    directory = tmp_path / "big"
    write_dataset(directory, [(20_000, 100)] * 2)
    _sidecar_dataset(directory).build_index(["k TYPE bloom_filter"], progress=False)
    sidecar = directory / "_bloomskip.index"
    old = read_sidecar(sidecar)
    # 400 granules x 64 KiB: the new sidecar takes a while to write, so the kill lands mid-way.
    outcomes = set()
    killed_while_writing = False
    for attempt, delay in enumerate((None, 0.0, 0.3, 0.8, None)):
        # A different seed each time, so that every run has a new sidecar to write.
        heavy = f"s TYPE tokenbf_v1(65536, 2, {attempt})"
        process = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(directory), heavy])
        if delay is None:  # kill as soon as the temporary file of the new sidecar appears
            deadline = time.monotonic() + 60
            while not list(directory.glob("._bloomskip.index.*")) and process.poll() is None:
                assert time.monotonic() < deadline
                time.sleep(0.001)
            killed_while_writing |= process.poll() is None
        else:
            time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        current = read_sidecar(sidecar)  # never corrupt: FormatError would fail the test
        if current == old:
            outcomes.add("old")
        else:
            assert current.indexes[-1].definition.startswith("INDEX s s TYPE tokenbf_v1(65536")
            outcomes.add("new")
            old = current
    assert "old" in outcomes, outcomes
    assert killed_while_writing  # at least one kill landed while the new sidecar was written


def test_file_without_the_index_column_is_indexed_as_nulls(tmp_path: Path) -> None:
    # Before: "part-5.parquet: cannot index it" -- the schema came from the first file only.
    directory = tmp_path / "mixed"
    write_dataset(directory, [(200, 50)])
    pq.write_table(make_table(100, 3, 500).drop_columns(["s"]), directory / "part-5.parquet")
    dataset = _sidecar_dataset(directory)
    dataset.build_index(INDEXES, progress=False)
    result = dataset.explain("hasToken(s, 'timeout')")
    assert not result.keep[1].any()  # no s in part-5: NULL, never a token
    expected = duckdb.sql(
        f"SELECT id FROM read_parquet('{directory}/*.parquet', union_by_name = true) "
        "WHERE regexp_matches(s, '(^|[\\x00-\\x2f\\x3a-\\x40\\x5b-\\x60\\x7b-\\x7f])"
        "timeout($|[\\x00-\\x2f\\x3a-\\x40\\x5b-\\x60\\x7b-\\x7f])')"
    ).fetchall()
    assert sorted(row[0] for row in expected) == _ids(dataset, "hasToken(s, 'timeout')")
    assert len(expected) > 0


def test_checksummed_but_malformed_payload_is_not_trusted(fresh: Path) -> None:
    from bloomskip.dataset.index.sidecar import write_sidecar

    sidecar_path = fresh / "_bloomskip.index"
    sidecar = read_sidecar(sidecar_path)
    entry = sidecar.files["part-0.parquet"]
    # k_bf: the last granule is cut short, under a valid section checksum
    entry.payloads = [entry.payloads[0][:-3], *entry.payloads[1:]]
    write_sidecar(sidecar, sidecar_path)
    dataset = _sidecar_dataset(fresh)
    result = dataset.explain("k = 1300")
    (k_index,) = [o for o in result.indexes if o.definition.startswith("INDEX k_bf")]
    assert not k_index.useful and k_index.note.startswith("not used:")
    assert any(w.startswith("index INDEX k_bf") for w in result.warnings)
    assert all(keep.all() for keep in result.keep)
    assert _ids(dataset, "k = 1300") == _full_scan_ids(fresh, "k = 1300")


def _write_v1(sidecar, path: Path) -> None:
    """Write ``sidecar`` in format version 1 (the documented layout; no longer written)."""
    import hashlib

    offset, payloads, files = 0, [], []
    for entry in sidecar.files.values():
        blobs = []
        for payload in entry.payloads:
            blobs.append([offset, len(payload)])
            payloads.append(bytes(payload))
            offset += len(payload)
        identity = entry.identity
        files.append({"path": entry.path, "format": entry.format, "size": identity.size,
                      "mtime_ns": identity.mtime_ns, "footer_sha256": identity.footer_sha256,
                      "granule_rows": entry.granule_rows, "payloads": blobs})  # fmt: skip
    indexes = [{"definition": s.definition, "column_types": dict(s.column_types)}
               for s in sidecar.indexes]  # fmt: skip
    header = json.dumps({"granule": sidecar.granule, "indexes": indexes, "files": files}).encode()
    body = struct.pack("<8sHHI", b"BSKIPIDX", 1, 0, len(header)) + header + b"".join(payloads)
    body += struct.pack("<Q", offset)
    path.write_bytes(body + hashlib.sha256(body).digest())


def test_v1_sidecar_is_used_and_upgraded_by_build(fresh: Path) -> None:
    sidecar_path = fresh / "_bloomskip.index"
    current = read_sidecar(sidecar_path)
    for entry in current.files.values():
        entry.payloads = list(entry.payloads)  # read now: the file is rewritten in place below
    _write_v1(current, sidecar_path)
    assert struct.unpack_from("<H", sidecar_path.read_bytes(), 8) == (1,)
    dataset = _sidecar_dataset(fresh)
    result = dataset.explain("k = 1300")
    assert result.warnings == [] and any(o.granules_skipped for o in result.indexes)
    assert _ids(dataset, "k = 1300") == _full_scan_ids(fresh, "k = 1300")
    assert _ids(dataset, WHERE) == _full_scan_ids(fresh, WHERE)
    assert (
        _sidecar_dataset(fresh).build_index(None, progress=False).rebuilt == []
    )  # nothing re-indexed
    assert struct.unpack_from("<H", sidecar_path.read_bytes(), 8) == (2,)  # but rewritten as v2
    assert read_sidecar(sidecar_path) == current


def test_an_index_no_predicate_can_use_is_warned_about() -> None:
    import pyarrow as pa

    from bloomskip.dataset.build.indexing import never_used_warnings, prepare_index

    schema = pa.schema([("ip", pa.binary(16)), ("k", pa.int64())])
    useless = prepare_index("ip TYPE tokenbf_v1(512, 2, 0)", schema, {"ip": "IPv6"})
    (warning,) = never_used_warnings(useless)
    assert warning.startswith("index 'INDEX") and "can never be used" in warning
    assert "\n" not in warning
    assert never_used_warnings(prepare_index("k TYPE bloom_filter", schema)) == []


def test_status_and_dropping_one_index(fresh: Path) -> None:
    dataset = _sidecar_dataset(fresh)
    status = dataset.status()
    assert status["files"] == status["files_indexed"] == 3
    assert [item["definition"].split()[1] for item in status["indexes"]] == [
        text.split()[1] for text in INDEXES
    ]
    assert all(item["bytes"] > 0 for item in status["indexes"])
    before = read_sidecar(fresh / "_bloomskip.index")
    dataset.drop_index("s_tok")
    after = read_sidecar(fresh / "_bloomskip.index")
    names = [spec.definition.split()[1] for spec in before.indexes]
    assert [spec.definition.split()[1] for spec in after.indexes] == [
        name for name in names if name != "s_tok"
    ]
    dropped = names.index("s_tok")
    for name, entry in after.files.items():
        old = list(before.files[name].payloads)
        assert list(entry.payloads) == old[:dropped] + old[dropped + 1 :]
    assert _ids(_sidecar_dataset(fresh), WHERE) == _full_scan_ids(fresh, WHERE)
    pq.write_table(make_table(300, 98, 20_000), fresh / "part-9.parquet", row_group_size=64)
    assert _sidecar_dataset(fresh).status()["not_indexed"] == ["part-9.parquet"]
    with pytest.raises(BloomskipError, match="no index named"):
        _sidecar_dataset(fresh).drop_index("s_tok")
