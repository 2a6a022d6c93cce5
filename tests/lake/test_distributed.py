"""Builds on all local cores and on a real Dask cluster (``distributed.LocalCluster``: a
scheduler over TCP on 127.0.0.1 and two worker processes) give the same segments, byte for byte,
as a build in one process; a worker killed mid-build is replaced and the index is the same."""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from dataset_fixtures import INDEXES, write_dataset
from lake_fixtures import upload

from bloomskip import BloomskipError, Dataset
from bloomskip._store import open_store
from bloomskip.cli import main
from bloomskip.dataset.backends.lake import LakeDataset
from bloomskip.dataset.build import tasks as lake_build


@pytest.fixture
def small_tasks(monkeypatch):
    """Plans of several tasks even for a small dataset (the planner's own knob)."""
    monkeypatch.setattr(lake_build, "TASK_MAX_FILES", 2)


def _segments(location: str, index_location: str | None = None) -> list[bytes]:
    lake = LakeDataset(location, index_location=index_location)
    manifest = lake.latest_manifest()
    return [lake.log.store.get(segment.key) for segment in manifest.segments]


@pytest.fixture
def lake_data(bucket, tmp_path):
    local = tmp_path / "data"
    write_dataset(local, [(300, 50), (200, 64), (500, 100), (120, 7), (90, 30)], seed=11)
    location = f"s3://{bucket}/dist"
    upload(local, location)
    return location


def test_jobs_and_a_cluster_write_the_same_segments(lake_data, cluster, small_tasks, tmp_path):
    _, client = cluster
    indexes = INDEXES
    built = {}
    for name, options in {
        "jobs1": {"jobs": 1},
        "jobs2": {"jobs": 2},
        "dask": {"client": client},
    }.items():
        location = str(tmp_path / f"index-{name}")
        report = LakeDataset(lake_data, index_location=location).build_index(
            indexes, progress=False, **options
        )
        assert report.segments_written == 3 and len(report.rebuilt) == 5
        built[name] = _segments(lake_data, location)
    assert built["jobs1"] == built["jobs2"] == built["dask"]
    lake = LakeDataset(lake_data, index_location=str(tmp_path / "index-dask"))
    assert lake.status()["files_indexed"] == 5
    assert lake.query("hasToken(s, 'missing')").num_rows == 0


@pytest.mark.parametrize("granule", ["row-group", 64, 7])
def test_files_split_into_row_group_ranges_give_the_whole_file_segments(
    granule, lake_data, cluster, monkeypatch, tmp_path
):
    """A file larger than a task is built in row-group ranges (on different workers) and
    joined: the segment is the one a whole-file task writes, byte for byte, with fixed-row
    granules that straddle the ranges (64 and 7 rows over row groups of 7 to 100 rows)."""
    _, client = cluster
    monkeypatch.setattr(lake_build, "TASK_MAX_FILES", 1)
    whole = str(tmp_path / "whole")
    LakeDataset(lake_data, index_location=whole).build_index(
        INDEXES, granule=granule, progress=False, jobs=1
    )
    # Every file is now larger than a task: each row group becomes a range of its own.
    monkeypatch.setattr(lake_build, "TASK_TARGET_BYTES", 1)
    lake = LakeDataset(lake_data)
    files, _ = lake.list_files()
    planned = lake_build.plan_tasks(
        files, 1, 1, {listed.key: lake.writer.row_group_bytes(listed) for listed in files}
    )
    assert [len(task.ranges) for task in planned] == [6, 4, 5, 18, 3]
    for name, options in {"jobs": {"jobs": 2}, "dask": {"client": client}}.items():
        location = str(tmp_path / name)
        report = LakeDataset(lake_data, index_location=location).build_index(
            INDEXES, granule=granule, progress=False, **options
        )
        assert report.segments_written == 5
        assert _segments(lake_data, location) == _segments(lake_data, whole), name
    split = LakeDataset(lake_data, index_location=str(tmp_path / "dask"))
    assert split.query("k = 17").equals(
        LakeDataset(lake_data, index_location=whole).query("k = 17")
    )


@pytest.mark.parametrize("kind", ["local-files", "delta-table"])
def test_other_datasets_give_the_same_segments_on_a_cluster(kind, cluster, small_tasks, tmp_path):
    """Local files of other shapes (fixed granules across row groups, a schema that gains a
    column), and a Delta table whose files come from its log: the same bytes everywhere."""
    import pyarrow.parquet as pq
    from dataset_fixtures import make_table

    _, client = cluster
    location = str(tmp_path / "data")
    if kind == "local-files":
        write_dataset(Path(location), [(700, 90), (64, 64), (333, 333), (1000, 128)], seed=3)
        extra = make_table(400, 9, 5000).append_column("z", pa.array(range(400), pa.int64()))
        pq.write_table(extra, Path(location, "part-9.parquet"), row_group_size=150)
        options = {"granule": 100}
    else:
        import deltalake

        for number in range(4):
            deltalake.write_deltalake(
                location,
                make_table(500, number, 500 * number),
                mode="append",
                writer_properties=deltalake.WriterProperties(max_row_group_size=120),
            )
        options = {}
    built = {}
    for name, run in {
        "jobs1": {"jobs": 1},
        "jobs2": {"jobs": 2},
        "dask": {"client": client},
    }.items():
        index = str(tmp_path / f"index-{name}")
        Dataset(location, index_location=index).build_index(
            INDEXES, progress=False, **options, **run
        )
        built[name] = _segments(location, index)
    assert len(built["jobs1"]) >= 2
    assert built["jobs1"] == built["jobs2"] == built["dask"]


def test_files_are_batched_into_even_tasks():
    from bloomskip._store import ObjectInfo
    from bloomskip.dataset.listing.prefix import ListedFile

    def files(*sizes):
        return [
            ListedFile(f"{n:03d}.parquet", ObjectInfo("", size, 0)) for n, size in enumerate(sizes)
        ]

    # 8 files of 185 at a target of 1024: two tasks of four, not 1,110 + 370.
    plan = lake_build.plan_tasks(files(*[185] * 8), 1024, 512)
    assert [len(task.files) for task in plan] == [4, 4]
    # At most max_files per task; a split file is a task of its own, in key order.
    plan = lake_build.plan_tasks(files(*[1] * 10), 1024, 3)
    assert [len(task.files) for task in plan] == [3, 2, 3, 2]
    # Sizes that are not all equal still make the even cut (this one was cut 5 + 3).
    plan = lake_build.plan_tasks(files(185, 184, 185, 184, 186, 185, 185, 185), 1024, 512)
    assert [len(task.files) for task in plan] == [4, 4]
    listed = files(10, 300, 10, 10)
    plan = lake_build.plan_tasks(listed, 100, 512, {listed[1].key: [100, 100, 100]})
    assert [(task.files[0].key, len(task.files), len(task.ranges)) for task in plan] == [
        ("000.parquet", 3, 0),
        ("001.parquet", 1, 3),
    ]


def test_split_ranges_are_cut_by_bytes_into_even_ranges():
    assert lake_build.split_ranges([], 10) == ()
    assert lake_build.split_ranges([5], 10) == ((0, 1),)
    assert lake_build.split_ranges([4, 4, 4, 4, 4], 10) == ((0, 3), (3, 5))
    assert lake_build.split_ranges([30, 1, 1], 10) == ((0, 1), (1, 2), (2, 3))
    # 185 at a target of 128: two even halves, not 128 + 57.
    assert lake_build.split_ranges([5] * 37, 128) == ((0, 19), (19, 37))
    assert lake_build.split_ranges([7, 1, 1, 1, 7], 1) == tuple((n, n + 1) for n in range(5))
    for sizes in ([3, 9, 1, 1, 12, 4, 4], [1] * 100, [50, 1, 1, 1, 1, 50]):
        for target in (1, 5, 10, 30, 1000):
            ranges = lake_build.split_ranges(sizes, target)
            assert ranges[0][0] == 0 and ranges[-1][1] == len(sizes)
            assert all(a[1] == b[0] and a[0] < a[1] for a, b in itertools.pairwise(ranges))
            assert ranges[-1][0] < ranges[-1][1]
            assert len(ranges) == min(len(sizes), -(-sum(sizes) // target))


@pytest.mark.parametrize("split", [False, True], ids=["batches", "row-group-ranges"])
def test_a_killed_worker_is_replaced_and_the_index_is_the_same(
    split, lake_data, cluster, small_tasks, monkeypatch, tmp_path
):
    local, client = cluster
    if split:  # the parts a dead worker held are built again before their file is joined
        monkeypatch.setattr(lake_build, "TASK_TARGET_BYTES", 1)
    reference = str(tmp_path / "reference")
    LakeDataset(lake_data, index_location=reference).build_index(INDEXES, progress=False, jobs=1)
    pids = list(client.run(os.getpid).values())
    target = str(tmp_path / "killed")
    errors = []

    def build() -> None:
        try:
            LakeDataset(lake_data, index_location=target).build_index(
                INDEXES, progress=False, client=client
            )
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=build)
    thread.start()
    deadline = time.monotonic() + 30
    while not client.processing() or not any(client.processing().values()):
        if time.monotonic() > deadline or not thread.is_alive():
            break
        time.sleep(0.01)
    os.kill(pids[0], signal.SIGKILL)  # mid-build: its tasks are run again elsewhere
    thread.join(120)
    assert errors == []
    assert _segments(lake_data, target) == _segments(lake_data, reference)
    client.wait_for_workers(2, timeout=60)  # the nanny restarted it


@pytest.mark.parametrize("where", ["dask", "threads"])
def test_a_failed_build_leaves_the_previous_version(
    where, lake_data, cluster, small_tasks, tmp_path
):
    options = {"client": cluster[1]} if where == "dask" else {"jobs": 2}
    index = str(tmp_path / "index")
    LakeDataset(lake_data, index_location=index).build_index(INDEXES, progress=False)
    before = _segments(lake_data, index)
    open_store(lake_data).put("zz-broken.parquet", b"not parquet at all")
    with pytest.raises(BloomskipError, match="zz-broken.parquet"):
        LakeDataset(lake_data, index_location=index).build_index(progress=False, **options)
    lake = LakeDataset(lake_data, index_location=index)
    assert lake.latest_manifest().version == 1 and _segments(lake_data, index) == before
    open_store(lake_data).delete("zz-broken.parquet")
    assert lake.vacuum(min_age_seconds=0) == []  # the failed task wrote no segment


def test_cli_jobs_and_scheduler(lake_data, cluster, tmp_path, capsys):
    local, _ = cluster
    definitions = sum((["--index", text] for text in INDEXES), [])
    index = str(tmp_path / "i")
    argv = ["index", "build", lake_data, "--index-location", index, *definitions]
    assert main([*argv, "--jobs", "2"]) == 0
    assert main([*argv, "--scheduler", local.scheduler_address]) == 0
    assert "0 (re)indexed" in capsys.readouterr().out.splitlines()[-1]


def test_unreachable_scheduler_is_one_line(lake_data, capsys):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = main(["index", "build", lake_data, "--index", INDEXES[0], "--scheduler",
                 f"tcp://127.0.0.1:{port}"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach the Dask scheduler" in err


# A worker process whose Python cannot import bloomskip (as on a cluster where it was not
# installed): the import is blocked before the worker starts.
WORKER_WITHOUT_BLOOMSKIP = """
import sys
sys.modules["bloomskip"] = None
from distributed.cli.dask_worker import main
sys.argv = ["dask-worker", sys.argv[1], "--nthreads", "1", "--no-nanny", "--no-dashboard",
            "--host", "127.0.0.1"]
main()
"""


def test_workers_without_bloomskip_give_a_one_line_error(lake_data, tmp_path, capsys):
    import subprocess
    import sys

    from distributed import Client, LocalCluster

    # A dashboard on a free port: distributed reads None as its default, 8787, which the
    # module's cluster holds, and its warning would reach the captured stderr.
    with LocalCluster(
        n_workers=0, processes=True, host="127.0.0.1", dashboard_address=":0"
    ) as local:
        worker = subprocess.Popen(
            [sys.executable, "-c", WORKER_WITHOUT_BLOOMSKIP, local.scheduler_address],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with Client(local) as client:
                client.wait_for_workers(1, timeout=60)
                with pytest.raises(BloomskipError, match="install the same bloomskip") as caught:
                    LakeDataset(lake_data).build_index(INDEXES, progress=False, client=client)
                assert "\n" not in str(caught.value)
            assert main(
                ["index", "build", lake_data, "--index", INDEXES[0], "--scheduler",
                 local.scheduler_address]
            ) == 2  # fmt: skip
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "bloomskip" in err, err
        finally:
            worker.kill()
            worker.wait()
    assert LakeDataset(lake_data).latest_manifest() is None  # nothing was committed


@pytest.mark.parametrize("granule", ["row-group", 64])
def test_a_folders_sidecar_is_built_by_the_same_scheduler(granule, cluster, monkeypatch, tmp_path):
    """One build scheduler for both layouts (issue 28): a sidecar's files are build tasks too,
    run on threads or on the Dask workers, split into row-group ranges when large; the sidecar
    is the same bytes every way. Before: a sidecar build on Dask was refused."""
    from bloomskip import Dataset

    _, client = cluster
    data = tmp_path / "data"
    write_dataset(data, [(300, 50), (200, 64), (500, 100), (120, 7)], seed=5)
    built = {}
    for name, options, target, max_files in [
        ("jobs1", {"jobs": 1}, None, None),
        ("jobs2", {"jobs": 2}, None, 1),
        ("dask", {"client": client}, None, 2),
        ("dask-ranges", {"client": client}, 1, None),  # every row group a task of its own
        ("ranges", {"jobs": 2}, 1, None),
    ]:
        if target is not None:
            monkeypatch.setattr(lake_build, "TASK_TARGET_BYTES", target)
        if max_files is not None:
            monkeypatch.setattr(lake_build, "TASK_MAX_FILES", max_files)
        sidecar = tmp_path / f"{name}.index"
        dataset = Dataset(data, sidecar=sidecar)
        # In two steps: the second build computes only the index the first lacks, and
        # splices it into the reused sections.
        dataset.build_index(INDEXES[:1], granule=granule, progress=False, **options)
        report = dataset.build_index(INDEXES[1:], progress=False, **options)
        assert report.layout == "sidecar" and len(report.rebuilt) == 4
        built[name] = sidecar.read_bytes()
        monkeypatch.undo()
    assert len(set(built.values())) == 1
    dataset = Dataset(data, sidecar=tmp_path / "dask.index")
    assert dataset.status()["files_indexed"] == 4
    assert dataset.query("hasToken(s, 'missing')").num_rows == 0
