"""A dataset on a real S3-API server (and in a local folder) with a segmented index.

The rows every query returns are checked against DuckDB's full scan of the same files; what the
index keeps against the local sidecar index of the same files (itself checked against
ClickHouse). Object counts and ETags show that adding a file rewrites nothing.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dataset_fixtures import INDEXES, write_dataset
from lake_fixtures import upload
from test_dataset_query_corpus import PREDICATES, _oracle, _sample_keys

from bloomskip import BloomskipError, Dataset
from bloomskip._store import open_store
from bloomskip.cli import main
from bloomskip.dataset.backends.lake import LakeDataset
from bloomskip.dataset.index.segments import IndexLog


@pytest.fixture(scope="module")
def local_data(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("lake") / "data"
    write_dataset(directory, [(1500, 97), (2600, 250), (2100, 1000)])
    return directory


@pytest.fixture
def lake_location(request, tmp_path, local_data) -> str:
    """The dataset copied to a fresh location: a local folder, or a prefix in a bucket."""
    if getattr(request, "param", "s3") == "local":
        target = tmp_path / "copy"
        shutil.copytree(local_data, target)
        return str(target)
    bucket = request.getfixturevalue("bucket")
    location = f"s3://{bucket}/warehouse/logs"
    upload(local_data, location)
    return location


def _lake(location: str, tmp_path: Path) -> Dataset:
    if location.startswith("s3://"):
        return Dataset(location)
    return Dataset(location, index_location=str(tmp_path / "index"))


@pytest.mark.parametrize("lake_location", ["s3", "local"], indirect=True)
def test_corpus_on_object_storage_matches_duckdb_full_scan(lake_location, local_data, tmp_path):
    lake = _lake(lake_location, tmp_path)
    assert isinstance(lake, Dataset) and isinstance(lake.backend, LakeDataset)
    report = lake.build_index(INDEXES, progress=False)
    assert report.version == 1 and len(report.rebuilt) == 3 and report.segments_written == 1
    local = Dataset(local_data, sidecar=tmp_path / "sidecar.index")
    local.build_index(INDEXES, progress=False)
    files = sorted(str(p) for p in local_data.glob("*.parquet"))
    keys = _sample_keys(local_data)
    pruned = 0
    for template in PREDICATES:
        where = template.format(**keys)
        expected_ids, _ = _oracle(files, where)
        explanation = lake.explain(where)
        assert not explanation.warnings, (where, explanation.warnings)
        # The same granules as the local sidecar index of the same files.
        local_keep = [keep.tolist() for keep in local.explain(where).keep]
        assert [keep.tolist() for keep in explanation.keep] == local_keep, where
        got = lake.run(explanation, where, ["id"]).column("id").to_pylist()
        assert sorted(got) == expected_ids, where
        pruned += sum(outcome.granules_skipped for outcome in explanation.indexes) > 0
    assert pruned >= len(PREDICATES) // 3


def test_a_cold_point_lookup_costs_few_index_requests(lake_location, local_data, tmp_path):
    _lake(lake_location, tmp_path).build_index(INDEXES, progress=False)
    keys = _sample_keys(local_data)
    for where in (f"k = {keys['k0']}", "hasToken(s, 'timeout')", "s LIKE '%x1 v2%'"):
        cold = Dataset(lake_location)  # a new process's view: nothing cached
        explanation = cold.explain(where)
        used = sum(outcome.useful for outcome in explanation.indexes)
        assert used >= 1
        # One listing (data and manifest versions), the manifest, one read of the segment's
        # directory and part headers, and one coalesced read of the slices each index used
        # probes (a small segment's slices lie within the coalescing gap of each other); on
        # an object store also the index's own listing of its versions, which lets it be
        # read while the data's listing is in flight.
        remote = 1 if "://" in lake_location else 0
        assert explanation.io["index_requests"] <= 3 + remote + used, (where, explanation.io)
        assert (
            explanation.io["index_bytes"]
            < open_store(lake_location + "/_bloomskip").list("segments/")[0].size + 4096
        )


def test_adding_a_file_writes_one_segment_and_one_version(bucket, tmp_path):
    location = f"s3://{bucket}/many"
    local = tmp_path / "many"
    write_dataset(local, [(20, 10)] * 300, seed=3)
    upload(local, location)
    LakeDataset(location).build_index(["INDEX k_bf k TYPE bloom_filter(0.05)"], progress=False)
    index = open_store(location + "/_bloomskip")
    before = {info.key: info for info in index.list("")}
    extra = tmp_path / "extra"
    write_dataset(extra, [(20, 10)], seed=99)
    (name,) = [p.name for p in extra.iterdir()]
    open_store(location).put(f"new-{name}", (extra / name).read_bytes())
    report = LakeDataset(location).build_index(progress=False)
    after = {info.key: info for info in index.list("")}
    assert report.rebuilt == [f"new-{name}"] and report.version == 2
    assert len(set(after) - set(before)) == 2
    assert all(after[key].etag == info.etag for key, info in before.items())
    new_segment = next(key for key in set(after) - set(before) if key.startswith("segments/"))
    manifest = after[next(key for key in set(after) - set(before) if key.startswith("versions/"))]
    assert report.bytes_written == after[new_segment].size + manifest.size
    assert after[new_segment].size < 4096  # that one file's index, not the dataset's
    assert len(LakeDataset(location).status()["segments"]) == 2


def test_concurrent_builders_both_commit_and_every_file_ends_indexed(bucket, tmp_path):
    location = f"s3://{bucket}/race"
    local = tmp_path / "race"
    write_dataset(local, [(50, 10)] * 6, seed=5)
    upload(local, location)
    barrier = threading.Barrier(2)
    errors = []

    def build() -> None:
        barrier.wait()
        try:
            LakeDataset(location).build_index(INDEXES[:1], progress=False)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    status = LakeDataset(location).status()
    assert status["version"] == 2
    assert status["files_indexed"] == status["files"] == 6


def test_a_rewritten_object_is_scanned_not_pruned(bucket, local_data, tmp_path):
    location = f"s3://{bucket}/rewrite"
    upload(local_data, location)
    LakeDataset(location).build_index(INDEXES, progress=False)
    # Rewrite the first file with other rows (one that the old bits would prune away).
    first = sorted(local_data.glob("*.parquet"))[0]
    table = pq.read_table(first)
    table = table.set_column(table.schema.get_field_index("k"), "k", pq.read_table(first)["k"])
    new = tmp_path / "new.parquet"
    rows = table.to_pylist()
    rows[0]["k"] = 987654321
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), new, row_group_size=97)
    open_store(location).put(first.name, new.read_bytes())
    lake = LakeDataset(location)
    explanation = lake.explain("k = 987654321")
    states = {state.relative_path: state.status for state in explanation.files}
    assert states[first.name] == "changed since indexing"
    assert lake.run(explanation, "k = 987654321", ["id"]).num_rows == 1
    assert LakeDataset(location).status()["stale"] == [first.name]


def test_a_corrupt_segment_never_hides_rows(bucket, local_data):
    location = f"s3://{bucket}/corrupt"
    upload(local_data, location)
    lake = LakeDataset(location)
    lake.build_index(INDEXES, progress=False)
    index = open_store(location + "/_bloomskip")
    (segment,) = [info for info in index.list("segments/")]
    data = bytearray(index.get(segment.key))
    data[len(data) // 2] ^= 0xFF  # inside a payload section
    index.put(segment.key, bytes(data))
    keys = _sample_keys(local_data)
    where = f"k = {keys['k0']}"
    files = sorted(str(p) for p in local_data.glob("*.parquet"))
    expected, _ = _oracle(files, where)
    explanation = LakeDataset(location).explain(where)
    got = LakeDataset(location).run(explanation, where, ["id"]).column("id").to_pylist()
    assert sorted(got) == expected
    index.put(segment.key, bytes(data[:100]))  # truncated: the whole segment is unreadable
    explanation = LakeDataset(location).explain(where)
    assert any("unreadable" in warning for warning in explanation.warnings)
    got = LakeDataset(location).run(explanation, where, ["id"]).column("id").to_pylist()
    assert sorted(got) == expected


def test_a_corrupt_manifest_scans_everything_and_build_names_it(bucket, local_data):
    location = f"s3://{bucket}/badmanifest"
    upload(local_data, location)
    LakeDataset(location).build_index(INDEXES, progress=False)
    index = open_store(location + "/_bloomskip")
    index.put("versions/00000000000000000002.json", b"{not json")
    explanation = LakeDataset(location).explain("k = 5")
    assert any("versions/00000000000000000002.json" in w for w in explanation.warnings)
    assert all(keep.all() for keep in explanation.keep)
    # A build starts from the newest readable version, says so, and supersedes the bad one.
    report = LakeDataset(location).build_index(progress=False)
    assert report.version == 3
    assert any("versions/00000000000000000002.json" in w for w in report.warnings)
    assert not LakeDataset(location).explain("k = 5").warnings


def test_cli_on_object_storage(bucket, local_data, capsys):
    location = f"s3://{bucket}/cli"
    upload(local_data, location)
    assert main(["index", "build", location, *sum((["--index", i] for i in INDEXES), [])]) == 0
    assert "version 1" in capsys.readouterr().out
    assert main(["query", location, "--where", "hasToken(s, 'timeout')", "--explain"]) == 0
    assert "index I/O:" in capsys.readouterr().out
    assert main(["index", "status", location, "--json"]) == 0
    import json

    status = json.loads(capsys.readouterr().out)
    assert status["version"] == 1 and status["files_indexed"] == 3
    # The row-group sizes beside the granule, from the files' own footers.
    import numpy as np
    import pyarrow.parquet as pq

    rows = [
        parquet.metadata.row_group(group).num_rows
        for parquet in (pq.ParquetFile(path) for path in sorted(local_data.glob("*.parquet")))
        for group in range(parquet.num_row_groups)
    ]
    assert status["granule"] == "row-group"
    assert status["row_groups"] == {
        "files": 3,
        "of_files": 3,
        "row_groups": len(rows),
        "min_rows": min(rows),
        "median_rows": int(np.median(rows)),
        "max_rows": max(rows),
    }
    assert main(["index", "status", location]) == 0
    assert f"granule: a row group; row groups: median {int(np.median(rows)):,} rows" in (
        capsys.readouterr().out
    )
    assert main(["index", "drop", location]) == 0
    assert main(["index", "status", location]) == 0
    assert "no index" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["query", "s3://no-such-bucket-bloomskip/x", "--where", "k = 1"], "no-such-bucket"),
        (["index", "status", "ftp://host/x"], "unknown scheme"),
    ],
)
def test_cli_errors_are_one_line(argv, message, capsys, s3_endpoint):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("bloomskip: error:")


def test_index_log_api_is_the_one_the_dataset_uses(bucket, local_data):
    location = f"s3://{bucket}/api"
    upload(local_data, location)
    LakeDataset(location).build_index(INDEXES, progress=False)
    log = IndexLog(open_store(location + "/_bloomskip"))
    assert sorted(log.latest().files()) == sorted(p.name for p in local_data.glob("*.parquet"))


def test_adding_one_file_to_two_thousand_rewrites_nothing(tmp_path):
    import pyarrow as pa

    data = tmp_path / "data"
    data.mkdir()
    for number in range(2000):
        pq.write_table(pa.table({"k": [number, number + 1]}), data / f"part-{number:05d}.parquet")
    index = tmp_path / "index"
    LakeDataset(data, index_location=index).build_index(
        ["k TYPE bloom_filter(0.01)"], progress=False
    )
    before = {path: path.stat() for path in index.rglob("*") if path.is_file()}
    pq.write_table(pa.table({"k": [123456]}), data / "part-99999.parquet")
    report = LakeDataset(data, index_location=index).build_index(progress=False)
    after = {path: path.stat() for path in index.rglob("*") if path.is_file()}
    new = set(after) - set(before)
    assert report.rebuilt == ["part-99999.parquet"] and len(new) == 2
    for path, stat in before.items():  # no existing object was rewritten
        assert (after[path].st_ino, after[path].st_mtime_ns, after[path].st_size) == (
            stat.st_ino,
            stat.st_mtime_ns,
            stat.st_size,
        )
    segment = next(path for path in new if path.parent.name == "segments")
    manifest = next(path for path in new if path.parent.name == "versions")
    assert report.bytes_written == after[segment].st_size + after[manifest].st_size
    assert after[segment].st_size < 2048  # that one file's index
    assert LakeDataset(data, index_location=index).query("k = 123456").num_rows == 1


@pytest.mark.parametrize("lake_location", ["s3", "local"], indirect=True)
def test_definitions_are_added_replaced_and_dropped_by_name(lake_location, local_data, tmp_path):
    lake = _lake(lake_location, tmp_path)
    lake.build_index(INDEXES[:2], progress=False)
    report = lake.build_index([INDEXES[3]], progress=False)
    names = [spec.definition.split()[1] for spec in lake.latest_manifest().indexes]
    assert names == ["k_bf", "s_tok", "d_bf"] and len(report.rebuilt) == 3
    with pytest.raises(BloomskipError, match="give --replace"):
        lake.build_index(["INDEX k_bf k TYPE bloom_filter(0.3)"], progress=False)
    lake.build_index(["INDEX k_bf k TYPE bloom_filter(0.3)"], replace=True, progress=False)
    segments_before = {segment.key for segment in lake.latest_manifest().segments}
    lake.drop_index("s_tok")
    manifest = lake.latest_manifest()
    assert [spec.definition.split()[1] for spec in manifest.indexes] == ["k_bf", "d_bf"]
    assert {segment.key for segment in manifest.segments} == segments_before  # nothing rewritten
    files = sorted(str(p) for p in local_data.glob("*.parquet"))
    keys = _sample_keys(local_data)
    for where in (f"k = {keys['k0']}", "d = 'nope'", "hasToken(s, 'timeout')"):
        explanation = lake.explain(where)
        assert not explanation.warnings, explanation.warnings
        got = lake.run(explanation, where, ["id"]).column("id").to_pylist()
        assert sorted(got) == _oracle(files, where)[0], where
    with pytest.raises(BloomskipError, match="no index named 'nope'"):
        lake.drop_index("nope")


@pytest.mark.parametrize("lake_location", ["local", "s3"], indirect=True)
def test_a_long_in_list_is_joined_as_a_table_with_the_same_rows(
    lake_location, local_data, tmp_path
):
    """5,000 values: given to DuckDB as an Arrow table it joins (translate's value tables),
    registered on the query's cursor; the rows are DuckDB's over the raw files."""
    lake = _lake(lake_location, tmp_path)
    lake.build_index(INDEXES, progress=False)
    values = [*range(-2500, 2500, 2), 10**12]
    files = sorted(str(path) for path in local_data.glob("*.parquet"))
    for where in [
        f"k IN ({', '.join(map(str, values))})",
        f"k NOT IN ({', '.join(map(str, values))}) AND id < 900",
        f"s IN ({', '.join(repr(f'w{n}') for n in range(3000))}, 'alpha')",
    ]:
        got = sorted(lake.query(where, columns=["id"]).column("id").to_pylist())
        assert got == _oracle(files, where)[0], where[:40]
