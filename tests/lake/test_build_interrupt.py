"""Ctrl-C during a build of an object-store lake (a real ``bloomskip`` process, a real S3 server):
the build stops at its next granule, says so in one line with status 130, and deletes the
segments it wrote and did not commit; the version before it stays as it was and answers
queries."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import boto3
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from lake_fixtures import upload

from bloomskip import Dataset
from bloomskip.cli import main
from bloomskip.dataset.backends.lake import LakeDataset

FILES = 16
ROWS = 120_000
WORDS = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor " * 3
# Three n-gram indexes of eight hashes over 240-character text: 10-20 seconds of hashing on two
# cores (measured), so that the build is still running when it is interrupted.
HEAVY = [f"INDEX n{size} msg TYPE ngrambf_v1({size}, 65536, 8, {size})" for size in (3, 4, 5)]
# A build with tasks of two files each (the planner's own knob), so that some tasks have
# written their segments when the build is interrupted.
SMALL_TASKS = (
    "import sys; from bloomskip.dataset.build import tasks; tasks.TASK_MAX_FILES = 2; "
    "from bloomskip.cli import main; main()"
)


@pytest.fixture
def lake(bucket, tmp_path) -> tuple[str, str]:
    """``(data, index)`` in a bucket: 16 files of 120,000 rows (12 row groups each), indexed
    once by ``id`` (version 1)."""
    local = tmp_path / "text"
    local.mkdir()
    for number in range(FILES):
        ids = pa.array(np.arange(number * ROWS, (number + 1) * ROWS, dtype=np.int64))
        text = pc.binary_join_element_wise(pc.cast(ids, pa.string()), pa.scalar(WORDS), "-")
        pq.write_table(
            pa.table({"id": ids, "msg": text}),
            local / f"part-{number:02}.parquet",
            row_group_size=10_000,
        )
    data, index = f"s3://{bucket}/data", f"s3://{bucket}/index"
    upload(local, data)
    argv = ["index", "build", data, "--index-location", index, "--index", "id TYPE bloom_filter"]
    assert main(argv) == 0
    return data, index


def _segments(index: str) -> set[str]:
    bucket, _, prefix = index.removeprefix("s3://").partition("/")
    pages = boto3.client("s3").get_paginator("list_objects_v2")
    return {
        item["Key"].removeprefix(f"{prefix}/")
        for page in pages.paginate(Bucket=bucket, Prefix=f"{prefix}/segments/")
        for item in page.get("Contents", [])
    }


def _interrupt(command: list[str], ready) -> tuple[int, str, float]:
    """Start ``command``, send it SIGINT once ``ready()`` holds, and return its status, its
    stderr and the seconds from the signal to its exit."""
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while child.poll() is None and not ready(child):
            time.sleep(0.02)
        assert child.poll() is None, "the build ended before it could be interrupted"
        child.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, err = child.communicate(timeout=120)  # a hang guard, not a measure
        stopped = time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, err, stopped


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("tasks", ["one-task", "tasks-of-two-files"])
def test_ctrl_c_stops_a_build_at_once_and_deletes_what_it_wrote(lake, tasks) -> None:
    data, index = lake
    committed = LakeDataset(data, index_location=index).latest_manifest()
    before = _segments(index)
    assert before == {segment.key for segment in committed.segments}
    definitions = [option for text in HEAVY for option in ("--index", text)]
    build = ["index", "build", data, "--index-location", index, *definitions]
    if tasks == "one-task":
        # The whole lake is one task: interrupted inside it, once it has hashed a while.
        command = [sys.executable, "-m", "bloomskip", *build]
        status, err, stopped = _interrupt(command, lambda child: _cpu_seconds(child.pid) > 3)
    else:
        # Interrupted once a task has written its segment, while others still run.
        command = [sys.executable, "-c", SMALL_TASKS, *build]
        status, err, stopped = _interrupt(command, lambda child: len(_segments(index)) > 1)
    print(f"\n{tasks}: exited {stopped:.2f} s after SIGINT")
    assert (status, err) == (130, "bloomskip: interrupted\n")
    # Every segment left is one the committed version names: none of the interrupted build's.
    after = LakeDataset(data, index_location=index)
    assert after.log.version_numbers() == [committed.version]
    assert _segments(index) == before
    answer = Dataset(data, index_location=index).query("id = 250123", ["id"])
    assert answer.column("id").to_pylist() == [250123]
    assert len(after.explain("id = 250123").plan.files) < FILES  # the index still prunes


def test_an_interrupted_build_on_dask_stops_its_tasks_and_deletes_their_segments(
    lake, cluster, monkeypatch
) -> None:
    import _thread
    import threading

    from bloomskip.dataset.build import tasks

    _, client = cluster
    monkeypatch.setattr(tasks, "TASK_MAX_FILES", 2)
    data, index = lake
    before = _segments(index)
    interrupted = []

    def interrupt_once_a_task_wrote() -> None:
        deadline = time.monotonic() + 120
        while len(_segments(index)) <= len(before) and time.monotonic() < deadline:
            time.sleep(0.02)
        interrupted.append(time.monotonic())
        _thread.interrupt_main()  # Ctrl-C, as the main thread sees it

    watcher = threading.Thread(target=interrupt_once_a_task_wrote)
    watcher.start()
    with pytest.raises(KeyboardInterrupt):
        LakeDataset(data, index_location=index).build_index(HEAVY, progress=False, client=client)
    print(f"\ndask: the build raised {time.monotonic() - interrupted[0]:.2f} s after Ctrl-C")
    watcher.join()
    # The tasks still running stopped (none is left on the workers), and what the finished
    # ones wrote is gone.
    assert not any(client.processing().values())
    assert _segments(index) == before
    assert Dataset(data, index_location=index).query("id = 7", ["id"]).num_rows == 1
