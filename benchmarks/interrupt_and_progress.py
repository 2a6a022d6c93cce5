"""Benchmark: how soon Ctrl-C ends a build on an object store, and what a query's progress costs.

Starts moto's standalone S3 server on 127.0.0.1 (the server the object-storage tests use) and
uploads a lake of ``--files`` Parquet files of 120,000 rows (row groups of 10,000 rows) holding
240-character text, indexed once by ``id``. Then:

* Ctrl-C: ``--runs`` times, ``bloomskip index build s3://...`` adding three n-gram indexes (a
  build of some ten seconds here, one task) gets SIGINT once it has used ``--after`` CPU-seconds;
  printed are the seconds from the signal to the process's exit, its status and stderr, and
  whether any segment the committed version does not name was left. One uninterrupted run of the
  same build is timed beside them.
* Progress: ``Dataset.query`` of a scan (``v = 3 OR v = 5``, nothing pruned) over the same files
  on the local disk and on the server, with ``progress=False`` (one read) and ``progress=True``
  (read in steps, the bar drawn to a discarded stderr), interleaved run by run; medians of
  ``--runs``.

Usage: python benchmarks/interrupt_and_progress.py [--files N] [--runs R] [--after SECONDS]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROWS = 120_000
WORDS = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor " * 3
HEAVY = [f"INDEX n{size} msg TYPE ngrambf_v1({size}, 65536, 8, {size})" for size in (3, 4, 5)]


def write_lake(folder: Path, files: int) -> None:
    for number in range(files):
        ids = pa.array(np.arange(number * ROWS, (number + 1) * ROWS, dtype=np.int64))
        text = pc.binary_join_element_wise(pc.cast(ids, pa.string()), pa.scalar(WORDS), "-")
        table = pa.table({"id": ids, "v": pc.bit_wise_and(ids, 7), "msg": text})
        pq.write_table(table, folder / f"part-{number:03}.parquet", row_group_size=10_000)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def interrupted_build(command: list[str], after: float) -> tuple[float, int, str]:
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while child.poll() is None and cpu_seconds(child.pid) < after:
        time.sleep(0.01)
    if child.poll() is not None:
        raise SystemExit("the build ended before it was interrupted: raise --files")
    child.send_signal(signal.SIGINT)
    sent = time.perf_counter()
    _, err = child.communicate()
    return time.perf_counter() - sent, child.returncode, err.strip()


def left_over(data: str, index: str) -> int:
    from bloomskip.dataset.backends.lake import LakeDataset

    lake = LakeDataset(data, index_location=index)
    named = {segment.key for segment in lake.latest_manifest().segments}
    present = {info.key for info in lake.log.store.list("segments/")}
    return len(present - named)


def timed_query(dataset, where: str, progress: bool) -> tuple[float, int]:
    with contextlib.redirect_stderr(io.StringIO()):
        started = time.perf_counter()
        rows = dataset.query(where, ["id"], progress=progress).num_rows
    return time.perf_counter() - started, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--after", type=float, default=2.0, help="CPU-seconds before SIGINT")
    args = parser.parse_args()

    import boto3
    from moto.server import ThreadedMotoServer

    from bloomskip import Dataset
    from bloomskip._store import open_store

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(
        AWS_ENDPOINT_URL=f"http://{host}:{port}",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_REGION="us-east-1",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    boto3.client("s3").create_bucket(Bucket="bench")
    data, index = "s3://bench/data", "s3://bench/index"
    try:
        with tempfile.TemporaryDirectory() as folder:
            local = Path(folder)
            write_lake(local, args.files)
            store = open_store(data)
            for path in sorted(local.iterdir()):
                store.put(path.name, path.read_bytes())
            Dataset(data, index_location=index).build_index(
                ["id TYPE bloom_filter"], progress=False
            )
            build = [sys.executable, "-m", "bloomskip", "index", "build", data]
            build += ["--index-location", index, *sum((["--index", text] for text in HEAVY), [])]

            print(f"Ctrl-C after {args.after} CPU-seconds of a build of {args.files} files:")
            stops = []
            for run in range(args.runs):
                stopped, status, err = interrupted_build(build, args.after)
                stops.append(stopped)
                print(
                    f"  run {run + 1}: exited {stopped:.2f} s after SIGINT, status {status}, "
                    f"{err!r}, {left_over(data, index)} segments left over"
                )
            print(f"  median {statistics.median(stops):.2f} s, max {max(stops):.2f} s")
            started = time.perf_counter()
            subprocess.run(build, check=True, capture_output=True)
            print(f"  the same build uninterrupted: {time.perf_counter() - started:.2f} s")

            where = "v = 3 OR v = 5"
            for name, location in (("local", str(local)), ("s3", data)):
                dataset = Dataset(location, index_location=f"{index}-{name}")
                dataset.build_index(["id TYPE bloom_filter"], progress=False)
                times = {False: [], True: []}
                counts = set()
                for _ in range(args.runs):
                    for progress in (False, True):
                        seconds, rows = timed_query(dataset, where, progress)
                        times[progress].append(seconds)
                        counts.add(rows)
                assert len(counts) == 1, counts
                off, on = (statistics.median(times[key]) for key in (False, True))
                print(
                    f"scan of {args.files * ROWS:,} rows ({name}): one read {off:.3f} s, "
                    f"in steps with the bar {on:.3f} s ({on / off:.2f}x)"
                )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
