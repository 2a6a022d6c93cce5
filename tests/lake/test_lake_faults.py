"""Faults and hostile input on the object-storage path: each gives the source's rows or a
one-line bloomskip error, and nothing of the user's is deleted."""

from __future__ import annotations

import json
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dataset_fixtures import INDEXES, write_dataset
from lake_fixtures import upload
from test_dataset_query_corpus import _oracle

from bloomskip import BloomskipError, FormatError, StorageError
from bloomskip._cli import EXIT_INTERRUPTED, run_command
from bloomskip._store import open_store
from bloomskip.cli import main
from bloomskip.dataset.backends.lake import LakeDataset
from bloomskip.dataset.index.segments import Change, IndexLog, version_key


def _write(path, values, **columns):
    pq.write_table(pa.table({"k": values, **columns}), path, row_group_size=2)


def test_a_local_rewrite_with_the_old_size_and_mtime_is_scanned(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    target = data / "a.parquet"
    _write(target, [1, 2, 3, 4])
    lake = LakeDataset(data, index_location=tmp_path / "index")
    lake.build_index(["k TYPE bloom_filter(0.01)"], progress=False)
    before = os.stat(target)
    _write(target, [1, 2, 3, 5000])  # same size, other rows
    assert os.stat(target).st_size == before.st_size
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # as cp -p / touch -r do
    assert LakeDataset(data, index_location=tmp_path / "index").query("k = 5000").num_rows == 1


def test_vacuum_and_drop_delete_only_what_bloomskip_wrote(bucket, tmp_path):
    index = open_store(f"s3://{bucket}/idx")
    index.put("segments/2024/user-data.parquet", b"PAR1 user data")
    index.put("versions/notes.txt", b"notes")
    data = tmp_path / "data"
    write_dataset(data, [(40, 10)])
    upload(data, f"s3://{bucket}/data")
    lake = LakeDataset(f"s3://{bucket}/data", index_location=f"s3://{bucket}/idx")
    lake.build_index(INDEXES[:1], progress=False)
    lake.build_index(INDEXES[1:2], progress=False)  # other definitions: replaces the segment
    assert len(lake.vacuum(keep_versions=1, min_age_seconds=0)) == 2  # version 1, its segment
    assert lake.drop() == 3  # version 2, the checkpoint the vacuum wrote of it, its segment
    assert {info.key for info in index.list("")} == {
        "segments/2024/user-data.parquet",
        "versions/notes.txt",
    }


def test_an_index_location_holding_the_dataset_is_refused(bucket):
    with pytest.raises(BloomskipError, match="holds the dataset"):
        LakeDataset(f"s3://{bucket}/data", index_location=f"s3://{bucket}")


def test_an_index_location_inside_the_dataset_is_not_read_as_data(bucket, tmp_path):
    data = tmp_path / "data"
    write_dataset(data, [(40, 10), (30, 10)])
    upload(data, f"s3://{bucket}/d")
    for _ in range(2):
        lake = LakeDataset(f"s3://{bucket}/d", index_location=f"s3://{bucket}/d/inner/idx")
        lake.build_index(INDEXES[:1], progress=False)
        assert lake.query("k = -5").num_rows == 0
        assert lake.status()["files_indexed"] == 2


def test_a_segment_vacuumed_before_the_commit_fails_the_build_and_heals(bucket, tmp_path):
    data = tmp_path / "data"
    write_dataset(data, [(40, 10), (30, 10)])
    location = f"s3://{bucket}/heal"
    upload(data, location)
    lake = LakeDataset(location)
    lake.build_index(INDEXES[:1], progress=False)
    log = lake.log
    (old,) = log.latest().segments
    # A build's steps, with a vacuum (--min-age 0) run between its segment and its commit.
    segment = log.write_segment(
        log.read_segment(old, [0], log.latest().indexes), old.files, old.schema
    )
    assert segment.key in lake.vacuum(keep_versions=1, min_age_seconds=0)
    with pytest.raises(StorageError, match="was deleted"):
        log.commit(Change("row-group", log.latest().indexes, [segment]))
    status = LakeDataset(location).status()
    assert status["segments_missing"] == [segment.key]
    report = LakeDataset(location).build_index(progress=False)
    assert sorted(report.rebuilt) == sorted(p.name for p in data.iterdir())
    assert LakeDataset(location).status()["segments_missing"] == []
    assert LakeDataset(location).query("k = -5").num_rows == 0


def test_files_whose_column_types_arrow_cannot_unify_are_read_as_duckdb_reads_them(
    tmp_path, capsys
):
    # Before: one error ("cannot be read as one"); the sidecar layout read them with DuckDB.
    data = tmp_path / "data"
    data.mkdir()
    _write(data / "a.parquet", [1, 2], x=[1, 2])
    _write(data / "b.parquet", [3, 4], x=["p", "q"])
    code = main(
        ["index", "build", str(data), "--index-location", str(tmp_path / "i"), "--index", "k TYPE "
         "bloom_filter(0.01)"]
    )  # fmt: skip
    assert code == 0
    lake = LakeDataset(data, index_location=tmp_path / "i")
    assert lake.schema.field("x").type == pa.string()
    assert lake.query("k = 3 OR x = '2'").sort_by("k").to_pylist() == [
        {"k": 2, "x": "2"},
        {"k": 3, "x": "p"},
    ]


def test_hostile_manifest_numbers_and_spans(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _write(data / "a.parquet", [1, 2, 3, 4])
    index = tmp_path / "index"
    lake = LakeDataset(data, index_location=index)
    lake.build_index(["k TYPE bloom_filter(0.01)"], progress=False)
    store = open_store(index)
    document = json.loads(store.get(version_key(1)))
    document["segments"][0]["size"] = 2**62
    document["segments"][0]["index_spans"] = [[0, 2**62]]
    store.put(version_key(2), json.dumps(document).encode())
    explanation = LakeDataset(data, index_location=index).explain("k = 3")
    assert any("unreadable" in warning for warning in explanation.warnings)
    assert LakeDataset(data, index_location=index).query("k = 3").num_rows == 1
    store.put(version_key(3), b'{"format": "bloomskip-manifest", "version": ' + b"9" * 5000 + b"}")
    with pytest.raises(FormatError, match="not JSON"):
        IndexLog(store).latest()


def test_interrupt_is_one_line_and_exit_130(capsys):
    import argparse

    def interrupted(args):
        raise KeyboardInterrupt

    assert run_command(argparse.Namespace(func=interrupted)) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "bloomskip: interrupted\n"


def test_links_are_followed_and_unreadable_folders_are_errors(tmp_path):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    _write(data / "sub" / "a.parquet", [1, 2])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _write(elsewhere / "b.parquet", [3, 4])
    (data / "linked").symlink_to(elsewhere, target_is_directory=True)
    (data / "loop").symlink_to(data, target_is_directory=True)
    lake = LakeDataset(data, index_location=tmp_path / "index")
    assert sorted(listed.key for listed in lake.list_files()[0]) == [
        "linked/b.parquet",
        "sub/a.parquet",
    ]
    assert lake.query("k >= 1").num_rows == 4


def test_a_rewritten_file_with_a_new_column_is_queried_by_it(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _write(data / "a.parquet", [1, 2])
    _write(data / "b.parquet", [3, 4])
    LakeDataset(data, index_location=tmp_path / "i").build_index(
        ["k TYPE bloom_filter(0.01)"], progress=False
    )
    _write(data / "b.parquet", [3, 4], y=[5, 6])
    lake = LakeDataset(data, index_location=tmp_path / "i")
    assert lake.query("y = 5").to_pylist() == [{"k": 3, "y": 5}]


def test_a_pyarrow_filesystem_lists_and_reads_the_data(tmp_path):
    import pyarrow.fs as pafs

    data = tmp_path / "data"
    data.mkdir()
    _write(data / "a.parquet", [1, 2, 3, 4])
    filesystem = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    lake = LakeDataset("data", filesystem=filesystem, index_location=tmp_path / "i")
    lake.build_index(["k TYPE bloom_filter(0.01)"], progress=False)
    lake = LakeDataset("data", filesystem=filesystem, index_location=tmp_path / "i")
    explanation = lake.explain("k = 999")
    assert not any(keep.any() for keep in explanation.keep)  # pruned by the index
    assert lake.query("k = 3").num_rows == 1
    _write(data / "a.parquet", [999, 2, 3, 4])
    assert (
        LakeDataset("data", filesystem=filesystem, index_location=tmp_path / "i")
        .query("k = 999")
        .num_rows
        == 1
    )
    with pytest.raises(BloomskipError, match="give index_location"):
        LakeDataset("data", filesystem=filesystem)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # A single local file is served (tests/dataset/test_segmented_local_files.py), but
        # not by an index kept where its folder's files are listed.
        (["index", "status", "{data}/a.parquet", "--index-location", "{data}"], "of its own"),
        (["index", "status", "az://acct/container/x"], "abfs://"),
    ],
)
def test_cli_usage_errors_name_the_fix(argv, message, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    _write(data / "a.parquet", [1, 2])
    argv = [part.format(data=data, tmp=tmp_path) for part in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_removing_a_file_drops_it_from_the_index(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _write(data / "a.parquet", [1, 2])
    _write(data / "b.parquet", [3, 4])
    LakeDataset(data, index_location=tmp_path / "i").build_index(
        ["k TYPE bloom_filter(0.01)"], progress=False
    )
    os.remove(data / "b.parquet")
    report = LakeDataset(data, index_location=tmp_path / "i").build_index(progress=False)
    assert report.removed == ["b.parquet"] and report.rebuilt == []
    shutil.rmtree(tmp_path / "i")
    assert LakeDataset(data, index_location=tmp_path / "i").status()["version"] is None


def test_the_first_segmented_build_migrates_a_folders_sidecar(tmp_path):
    from bloomskip import Dataset

    data = tmp_path / "data"
    data.mkdir()
    _write(data / "a.parquet", [1, 2, 3, 4])
    _write(data / "b.parquet", [5, 6, 7, 8])
    sidecar = data / "_bloomskip.index"  # where a folder's sidecar was kept by default
    Dataset(data, sidecar=sidecar).build_index(["k TYPE bloom_filter(0.01)"], progress=False)
    _write(data / "b.parquet", [5, 6, 7, 9])  # changed since: indexed from its data
    lake = LakeDataset(data, index_location=tmp_path / "index")
    report = lake.build_index(["k TYPE bloom_filter(0.01)"], progress=False)
    assert sorted(report.rebuilt) == ["a.parquet", "b.parquet"]
    assert report.migrated == ["a.parquet"]
    local = Dataset(data, sidecar=sidecar)
    local.build_index(progress=False)  # refreshes b in the sidecar, as the lake did
    for where in ("k = 3", "k = 9", "k = 8", "k = 100"):
        assert [k.tolist() for k in lake.explain(where).keep] == [
            k.tolist() for k in local.explain(where).keep
        ], where
        assert lake.query(where).num_rows == local.query(where).num_rows, where


def test_access_denied_is_one_line_naming_the_uri(bucket, s3_endpoint, capsys):
    import urllib.request

    def require_auth(count: str) -> None:
        # moto's own switch: after `count` requests, every request must carry known IAM keys.
        request = urllib.request.Request(
            f"{s3_endpoint}/moto-api/reset-auth",
            data=count.encode(),
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        urllib.request.urlopen(request).read()

    location = f"s3://{bucket}/denied"
    require_auth("0")
    try:
        with pytest.raises(StorageError, match=rf"{location}.*access denied"):
            open_store(location).list("")
        assert main(["query", location, "--where", "k = 1"]) == 2
    finally:
        require_auth("inf")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and location in err and "access denied" in err


def test_no_duckdb_connection_of_ours_draws_a_progress_bar(tmp_path):
    # DuckDB draws it on stdout after 2 s even into a pipe, where it would corrupt CSV output.
    from bloomskip import Dataset
    from bloomskip.dataset.scan.query import connect

    data = tmp_path / "data"
    data.mkdir()
    _write(data / "a.parquet", [1, 2])
    setting = "SELECT current_setting('enable_progress_bar')"
    assert connect().execute(setting).fetchone() == (False,)
    assert Dataset(data).duckdb_connection().execute(setting).fetchone() == (False,)


# -- a corrupt newest manifest version -------------------------------------------------------


def _three_files(tmp_path, request, where: str) -> tuple[list[str], str, str]:
    """Three Parquet files (local paths), the dataset's location and its index location."""
    data = tmp_path / "data"
    write_dataset(data, [(400, 90), (300, 90), (500, 90)])
    files = sorted(str(path) for path in data.glob("*.parquet"))
    if where == "local":
        return files, str(data), str(tmp_path / "index")
    bucket = request.getfixturevalue("bucket")
    upload(data, f"s3://{bucket}/data")
    return files, f"s3://{bucket}/data", f"s3://{bucket}/idx"


#: A newest version that does not read: bytes that are not JSON, and a version cut short.
DAMAGES = {
    "garbage": lambda valid: b"\x00\xff\xfe garbage \x80" * 7,
    "truncated": lambda valid: valid[: len(valid) // 2],
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
@pytest.mark.parametrize("where", ["local", "s3"])
@pytest.mark.parametrize("new_index", [False, True], ids=["refresh", "new-index"])
def test_a_corrupt_newest_version_is_superseded_by_the_next_build(
    tmp_path, request, capsys, where, damage, new_index
):
    files, data, index = _three_files(tmp_path, request, where)
    LakeDataset(data, index_location=index).build_index(INDEXES[:1], progress=False)
    LakeDataset(data, index_location=index).build_index(INDEXES[1:2], progress=False)  # v2
    store = open_store(index)
    store.put(version_key(3), DAMAGES[damage](store.get(version_key(2))))
    cli = ["--index-location", index]

    # status reports the version it passes over; vacuum keeps the newest readable version
    # and every segment it names, though its window (one version) holds only the damaged one.
    assert main(["index", "status", data, *cli]) == 0
    captured = capsys.readouterr()
    assert "version 2," in captured.out
    assert captured.err.count("\n") == 1 and "manifest version 3 is unreadable" in captured.err
    assert "00000000000000000003.json" in captured.err
    assert main(["index", "status", data, *cli, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["version"] == 2 and len(status["unreadable_versions"]) == 1
    referenced = {segment.key for segment in IndexLog(store).read_version(2).segments}
    assert main(["index", "vacuum", data, *cli, "--keep-versions", "1", "--min-age", "0"]) == 0
    capsys.readouterr()
    assert IndexLog(store).version_numbers() == [2, 3]
    assert referenced <= {info.key for info in store.list("segments/")}

    argv = ["index", "build", data, *cli] + (["--index", INDEXES[3]] if new_index else [])
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "version 4" in captured.out
    warnings = captured.err.splitlines()
    assert len(warnings) == 1 and "manifest version 3 is unreadable" in warnings[0]
    assert "started from version 2, the newest readable one" in warnings[0]
    lake = LakeDataset(data, index_location=index)
    manifest = lake.latest_manifest()
    assert manifest.version == 4
    assert len(manifest.indexes) == (3 if new_index else 2)
    assert len(manifest.files()) == 3
    assert lake.status()["unreadable_versions"] == []
    for where_clause in ("k = 7", "k IN (3, 150, 999)", "hasToken(s, 'timeout')", "k > 0"):
        explanation = lake.explain(where_clause)
        assert not explanation.warnings, (where_clause, explanation.warnings)
        got = sorted(lake.run(explanation, where_clause, ["id"]).column("id").to_pylist())
        assert got == _oracle(files, where_clause)[0], where_clause
    assert main(["index", "vacuum", data, *cli, "--keep-versions", "1", "--min-age", "0"]) == 0
    assert IndexLog(store).version_numbers() == [4]
    fresh = LakeDataset(data, index_location=index)
    assert not fresh.explain("k = 7").warnings
    got = sorted(fresh.query("k = 7", columns=["id"]).column("id").to_pylist())
    assert got == _oracle(files, "k = 7")[0]


def test_when_no_version_reads_a_refresh_says_to_build_with_index(tmp_path, capsys):
    files, data, index = _three_files(tmp_path, None, "local")
    LakeDataset(data, index_location=index).build_index(INDEXES[:1], progress=False)
    open_store(index).put(version_key(1), b"{")
    assert main(["index", "build", data, "--index-location", index]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "manifest version 1 is unreadable" in err and "build with --index" in err
    argv = ["index", "build", data, "--index-location", index, "--index", INDEXES[0]]
    assert main(argv) == 0
    assert "started from no index" in capsys.readouterr().err
    lake = LakeDataset(data, index_location=index)
    assert lake.latest_manifest().version == 2
    got = sorted(lake.query("k = 7", columns=["id"]).column("id").to_pylist())
    assert got == _oracle(files, "k = 7")[0]
