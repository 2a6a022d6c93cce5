"""Benchmark: a segmented index build on 1 and 2 local threads, and on 1 and 2 Dask workers.

Generates a log dataset (default 20 million rows in 8 Parquet files, row groups of 64K rows)
in a scratch folder and builds the indexes ``user_id`` bloom_filter(0.01) and ``message``
tokenbf_v1 over it into a new index location each run, the modes interleaved in the same run:

* ``jobs 1`` / ``jobs 2``: ``LakeDataset(...).build_index(..., jobs=N)`` in this process;
* ``dask 1`` / ``dask 2``: ``build_index(..., client=...)`` on a ``distributed.LocalCluster``
  of 1 or 2 worker processes (one thread each) on 127.0.0.1, started before the timed runs;
* ``cli 1`` / ``cli 2``: the whole ``bloomskip index build ... --jobs N`` command in a new
  process, once each (at the default task size only: the command has no task-size option).

``jobs N`` runs the tasks one after another in this process, building each file's row groups
on N threads (the C granule builders run without the GIL); on Dask each task runs on one worker
thread, one task per worker at a time.

The build plans tasks of about ``TASK_TARGET_BYTES`` of Parquet each; ``--task-bytes`` sets
that planner's knob in this driver before each build (several values: one table each). A file
larger than a task is split into row-group ranges built as tasks of their own (``--files 1``
makes one 1.5 GB file, two ranges at the default). Every mode must write the same segments,
byte for byte (compared in manifest order).

It also measures the fixed costs a task pays besides its work: a scheduler round trip
(``client.submit`` of a no-op, median of 50), a segment write (``IndexLog.write_segment`` of a
small sidecar, median of 20) and a manifest commit (``IndexLog.commit`` of a small change,
median of 20), on the local disk and, with ``--s3``, on moto's S3 server as
benchmarks/object_store.py starts it (moto copies whole objects per request: read its figures
as an upper bound, not as a real store's).

Usage: python benchmarks/distributed_build.py [--rows N] [--files F] [--repeat R]
       [--task-bytes B [B ...]] [--s3]
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bloomskip.dataset.build.tasks as lake_build
from bloomskip._store import open_store
from bloomskip.dataset.backends.lake import LakeDataset
from bloomskip.dataset.demo import write_logs
from bloomskip.dataset.index.segments import Change, IndexLog, SegmentEntry

sys.path.insert(0, str(Path(__file__).resolve().parent))
from object_store import BUCKET, INDEXES, delta, start_server  # noqa: E402

MODES = ["jobs 1", "jobs 2", "dask 1", "dask 2"]
MIB = 1 << 20


def noop() -> None:
    """A task that does nothing: its time is the scheduler's round trip."""


def segment_digests(location: str) -> list[str]:
    """The SHA-256 of each segment of the newest manifest at ``location``, in manifest order."""
    log = IndexLog(open_store(location))
    manifest = log.latest()
    return [hashlib.sha256(log.store.get(segment.key)).hexdigest() for segment in manifest.segments]


def manifest_bytes(location: str) -> int:
    """The size of the newest manifest version at ``location``."""
    sizes = IndexLog(open_store(location)).version_sizes()
    return sizes[max(sizes)]


def build(data: Path, location: str, mode: str, clients: dict) -> float:
    """One full build of ``data`` into the new ``location`` in ``mode``; its wall time."""
    lake = LakeDataset(data, index_location=location)
    kind, workers = mode.split()
    started = time.perf_counter()
    if kind == "jobs":
        lake.build_index(INDEXES, progress=False, jobs=int(workers))
    else:
        lake.build_index(INDEXES, progress=False, client=clients[int(workers)])
    return time.perf_counter() - started


def build_cli(data: Path, location: str, jobs: int) -> float:
    """The whole ``bloomskip index build`` command in a new process; its wall time."""
    command = [sys.executable, "-m", "bloomskip", "index", "build", str(data), "--no-progress"]
    command += ["--index-location", location, "--jobs", str(jobs)]
    for definition in INDEXES:
        command += ["--index", definition]
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def overheads(small: Path, location: str, label: str) -> None:
    """Print the median time of a small segment write and of a small manifest commit."""
    lake = LakeDataset(small, index_location=location)
    lake.build_index(INDEXES, progress=False, jobs=1)
    manifest = lake.log.latest()
    entry = manifest.segments[0]
    sidecar = lake.log.read_segment(entry, range(len(manifest.indexes)), manifest.indexes)
    identities = entry.files
    writes = []
    for _ in range(20):
        started = time.perf_counter()
        lake.log.write_segment(sidecar, identities, entry.schema)
        writes.append(time.perf_counter() - started)
    commits = []
    for _ in range(20):
        change = Change(manifest.granule, manifest.indexes, [entry])
        started = time.perf_counter()
        lake.log.commit(change)
        commits.append(time.perf_counter() - started)
    print(
        f"  segment write, {label}: {1e3 * statistics.median(writes):.2f} ms "
        f"({entry.size:,} bytes, median of 20)"
    )
    print(
        f"  manifest commit, {label}: {1e3 * statistics.median(commits):.2f} ms "
        f"({manifest_bytes(location):,}-byte manifest of 1 segment, median of 20)"
    )


def manifest_at_scale(small: Path, location: str, files: int, per_segment: int) -> None:
    """Print the time of a commit that creates a manifest of ``files`` files, and of a small
    commit on top of it (which reads, decodes and rewrites it, as every build's commit does).

    The files are synthetic names with an object store's identity (size and ETag), in
    segments of ``per_segment`` files that all point at one real small segment: the manifest
    has the size and shape of a real one, but is not an index to query."""
    lake = LakeDataset(small, index_location=location)
    lake.build_index(INDEXES, progress=False, jobs=1)
    manifest = lake.log.latest()
    entry = manifest.segments[0]
    segments = [
        SegmentEntry(
            entry.key,
            entry.size,
            entry.index_spans,
            {
                f"logs/date=2026-01-01/part-{number:08d}.parquet": {
                    "size": 10_000_000 + number,
                    "etag": f'"{number:032x}"',
                }
                for number in range(first, min(first + per_segment, files))
            },
            entry.schema,
        )
        for first in range(0, files, per_segment)
    ]
    started = time.perf_counter()
    lake.log.commit(Change(manifest.granule, manifest.indexes, segments))
    created = time.perf_counter() - started
    size = manifest_bytes(location)
    started = time.perf_counter()
    lake.log.commit(Change(manifest.granule, manifest.indexes, [entry]))
    on_top = time.perf_counter() - started
    print(
        f"  manifest of {files:,} files in {len(segments):,} segments: {size:,} bytes "
        f"({size / files:.0f} bytes/file); the commit creating it {created:.2f} s, a small "
        f"commit on top of it (read, decode, apply, encode, write) {on_top:.2f} s"
    )


def s3_costs(small: Path, listing_objects: int) -> None:
    """On moto: the requests of a small build by kind, and the time of one LIST page."""
    import boto3
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    counter, endpoint = start_server()
    s3 = boto3.client("s3", endpoint_url=endpoint)
    s3.create_bucket(Bucket=BUCKET)
    overheads(small, f"s3://{BUCKET}/overheads", "moto S3")
    data = Path(small.parent, "two")
    written = write_logs(data, 4 * 65_536, files=2)
    s3fs, _ = pafs.FileSystem.from_uri(f"s3://{BUCKET}")
    pafs.copy_files(str(data), f"{BUCKET}/two", pafs.LocalFileSystem(), s3fs)
    groups = sum(pq.ParquetFile(path).num_row_groups for path in written)
    before = counter.snapshot()
    LakeDataset(f"s3://{BUCKET}/two").build_index(INDEXES, progress=False, jobs=1)
    build = delta(counter.snapshot(), before)
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(build["kinds"].items()))
    print(
        f"  a build on moto S3 of {len(written)} files, {groups} row groups: "
        f"{build['requests']} requests ({kinds}), {build['sent'] / 1e6:.1f} MB read, "
        f"{build['received'] / 1e6:.2f} MB written"
    )
    for number in range(listing_objects):
        s3.put_object(Bucket=BUCKET, Key=f"many/part-{number:06d}.parquet", Body=b"")
    store = open_store(f"s3://{BUCKET}/many")
    pages = []
    for _ in range(5):
        started = time.perf_counter()
        listed = store.list("")
        pages.append(time.perf_counter() - started)
    print(
        f"  one LIST page of {len(listed):,} objects on moto S3: "
        f"{1e3 * statistics.median(pages):.1f} ms (median of 5)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--task-bytes",
        type=int,
        nargs="+",
        default=[lake_build.TASK_TARGET_BYTES, 128 * MIB],
        metavar="B",
        help="task sizes to plan with (default: the planner's default, and 128 MiB)",
    )
    parser.add_argument("--s3", action="store_true", help="also time the overheads on moto S3")
    parser.add_argument(
        "--manifest-files",
        type=int,
        default=1_000_000,
        help="files in the synthetic manifest whose commit is timed (default 10**6)",
    )
    parser.add_argument(
        "--files-per-segment",
        type=int,
        default=107,
        help="its files per segment (default 107: 1 GiB tasks of 10 MB files)",
    )
    args = parser.parse_args()

    from distributed import Client, LocalCluster

    # The scheduler's and nannies' INFO lines (start, close) would bury the tables.
    logging.getLogger("distributed").setLevel(logging.ERROR)
    default_target = lake_build.TASK_TARGET_BYTES
    with tempfile.TemporaryDirectory(prefix="bloomskip-distributed-") as scratch:
        data = Path(scratch, "data")
        started = time.perf_counter()
        written = write_logs(data, args.rows, files=args.files)
        size = sum(path.stat().st_size for path in written)
        print(
            f"data: {args.rows:,} rows, {len(written)} files, {size / 1e6:,.1f} MB of Parquet "
            f"(64K-row groups), generated in {time.perf_counter() - started:.0f} s; "
            f"{os.cpu_count()} CPUs"
        )
        lister = LakeDataset(data, index_location=str(Path(scratch, "listing")))
        listed = lister.list_files()[0]
        clusters, clients = [], {}
        for workers in (1, 2):
            cluster = LocalCluster(
                n_workers=workers,
                processes=True,
                threads_per_worker=1,
                host="127.0.0.1",
                dashboard_address=":0",
                silence_logs=logging.ERROR,
            )
            clusters.append(cluster)
            clients[workers] = Client(cluster)
        try:
            counter = 0
            for target in args.task_bytes:
                lake_build.TASK_TARGET_BYTES = target
                group_bytes = {
                    item.key: lister.writer.row_group_bytes(item)
                    for item in listed
                    if item.info.size > target
                }
                plan = lake_build.plan_tasks(listed, target, lake_build.TASK_MAX_FILES, group_bytes)
                times: dict[str, list[float]] = {mode: [] for mode in MODES}
                reference = None
                for repeat in range(args.repeat):
                    print(
                        f"task bytes {target:,}: run {repeat + 1}/{args.repeat} ...",
                        file=sys.stderr,
                        flush=True,
                    )
                    for mode in MODES:
                        counter += 1
                        location = str(Path(scratch, f"index-{counter}"))
                        times[mode].append(build(data, location, mode, clients))
                        digests = segment_digests(location)
                        if reference is None:
                            reference = digests, manifest_bytes(location)
                        assert digests == reference[0], f"{mode}: segments differ from jobs 1"
                        shutil.rmtree(location)
                cli = {}
                if target == default_target:
                    for jobs in (1, 2):
                        counter += 1
                        location = str(Path(scratch, f"index-{counter}"))
                        cli[jobs] = build_cli(data, location, jobs)
                        assert segment_digests(location) == reference[0], f"cli {jobs}: differ"
                        shutil.rmtree(location)
                report(target, plan, times, cli, args, size, reference)
            lake_build.TASK_TARGET_BYTES = default_target

            print()
            print("per-task overheads:")
            round_trips = []
            for _ in range(50):
                started = time.perf_counter()
                clients[2].submit(noop, pure=False).result()
                round_trips.append(time.perf_counter() - started)
            print(
                "  scheduler round trip (client.submit of a no-op on the 2-worker cluster): "
                f"{1e3 * statistics.median(round_trips):.2f} ms (median of 50)"
            )
            small = Path(scratch, "small")
            write_logs(small, 65_536, files=1)
            overheads(small, str(Path(scratch, "overheads")), "local disk")
            manifest_at_scale(
                small, str(Path(scratch, "large")), args.manifest_files, args.files_per_segment
            )
            if args.s3:
                s3_costs(small, 1000)
        finally:
            for client in clients.values():
                client.close()
            for cluster in clusters:
                cluster.close()


def report(target, plan, times, cli, args, size, reference) -> None:
    """Print one task size's table."""
    sizes = ", ".join(
        f"{sum(item.info.size for item in task.files) / 1e6:,.0f}"
        + (f" in {len(task.ranges)} row-group ranges" if task.ranges else "")
        for task in plan
    )
    print()
    print(
        f"task target {target / MIB:,.0f} MiB: {len(plan)} tasks (MB of Parquet each: {sizes}); "
        f"{len(reference[0])} segments, manifest {reference[1]:,} bytes; segments byte-identical "
        f"in every mode{' and the CLI' if cli else ''}"
    )
    print(f"{'mode':<8} {'median s':>9} {'min s':>7} {'max s':>7} {'MB/s':>7} {'Mrows/s':>8}")
    medians = {}
    for mode in MODES:
        medians[mode] = statistics.median(times[mode])
        print(
            f"{mode:<8} {medians[mode]:>9.2f} {min(times[mode]):>7.2f} {max(times[mode]):>7.2f} "
            f"{size / 1e6 / medians[mode]:>7.1f} {args.rows / 1e6 / medians[mode]:>8.2f}"
        )
    for jobs, seconds in cli.items():
        print(
            f"{'cli ' + str(jobs):<8} {seconds:>9.2f} {'':>7} {'':>7} {size / 1e6 / seconds:>7.1f} "
            f"{args.rows / 1e6 / seconds:>8.2f}  (one run, a new process)"
        )
    print(
        f"2 vs 1: jobs {medians['jobs 1'] / medians['jobs 2']:.2f}x, "
        f"dask {medians['dask 1'] / medians['dask 2']:.2f}x"
        + (f", cli {cli[1] / cli[2]:.2f}x" if cli else "")
        + f"  (medians of {args.repeat} runs, modes interleaved, a new index location each run)"
    )


if __name__ == "__main__":
    main()
