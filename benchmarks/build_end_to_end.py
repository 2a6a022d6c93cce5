"""Index build end to end: whole bloomskip commands against ClickHouse's marginal index cost.

One Parquet file (default 10,000,000 rows in row groups of 65,536) holds the columns of
``benchmarks/clickhouse_build.py``: ``v`` UInt64 (``cityHash64(number)``) and ``s``, strings of
~17 bytes. For each case, in the same run:

* ClickHouse's marginal cost of the index: the wall time of ``INSERT ... SELECT`` into a MergeTree
  table with the index minus the same INSERT without it (``index_granularity = 8192``,
  GRANULARITY 1), once with ``max_threads = 1, max_insert_threads = 1`` and once with ClickHouse's
  default threads (best of ``--repeat``);
* ``bloomskip clickhouse simulate FILE --index ...`` (8192-row granules, as the INSERT): a fresh
  process (interpreter start, imports, Parquet read, hashes, filters, LZ4 framing) on one thread
  per CPU, and :func:`simulate_file` with ``jobs=N`` in a fresh process and warm;
* ``bloomskip index build DIR --index ... --jobs N`` (row-group granules; the index is written):
  a fresh process, and the warm in-process call (``Dataset.build_index``) for each ``--jobs``;
* one plain pyarrow read of the indexed column (``pq.read_table``, one thread and all threads),
  the floor an index build cannot go below.

Ratios: ``vs CH`` = ClickHouse marginal seconds / bloomskip seconds (> 1: bloomskip is faster);
``vs read`` = bloomskip seconds / plain-read seconds (the target is <= 1.3).

``--clock cpu`` measures CPU seconds instead (every thread, fresh processes included): steadier
on a loaded machine, and the same as wall seconds for one thread on a quiet one.

Usage:
    python benchmarks/build_end_to_end.py [--rows 10000000] [--repeat 3] [--jobs 1,2]
        [--dir DIR] [--cases v-bloom,s-token,s-ngram,s-bloom] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import inspect
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

# The sibling script (its folder is on sys.path when this one runs): one ClickHouse measurement.
from clickhouse_build import GRANULARITY, STRINGS, best_of, clickhouse_extra_seconds

from bloomskip.clickhouse.simulate import simulate_file
from bloomskip.dataset import Dataset

# A bloomskip from before simulate_file(jobs=...) is measured too (before / after), in one row.
HAS_JOBS = "jobs" in inspect.signature(simulate_file).parameters
ROW_GROUP_ROWS = 65_536
# name -> (column, ClickHouse type, expression over numbers(), index type)
CASES = {
    "v-bloom": ("v", "UInt64", "cityHash64(number)", "bloom_filter(0.025)"),
    "s-token": ("s", "String", STRINGS, "tokenbf_v1(10240, 3, 0)"),
    "s-ngram": ("s", "String", STRINGS, "ngrambf_v1(3, 10240, 3, 0)"),
    "s-bloom": ("s", "String", STRINGS, "bloom_filter(0.025)"),
}


# "wall": elapsed seconds (the targets). "cpu": CPU seconds of this process and its finished
# children, every thread counted (steadier on a loaded machine; for one thread it is the wall time
# of a quiet machine).
CLOCK = {"name": "wall"}


def _now() -> float:
    if CLOCK["name"] == "wall":
        return time.perf_counter()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _best(run, repeat: int) -> float:
    """Best of ``repeat`` runs after one untimed run (file cache, imports, first allocations)."""
    return best_of(run, repeat, _now, warm_up=True)


def write_data(path: Path, rows: int, session) -> None:
    """The benchmark's Parquet file, written once (reused when it has the right row count)."""
    if path.exists() and pq.ParquetFile(path).metadata.num_rows == rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    table = session.query(
        f"SELECT cityHash64(number) AS v, {STRINGS} AS s FROM numbers({rows})", "ArrowTable"
    )
    # chdb exports String as binary; a Parquet reader sees what a user's file would hold.
    table = table.cast(
        table.schema.set(1, table.schema.field(1).with_type(__import__("pyarrow").string()))
    )
    pq.write_table(table, path, row_group_size=ROW_GROUP_ROWS)


def _fresh(arguments: list[str], repeat: int) -> float:
    """Best wall time of a fresh ``bloomskip`` process (interpreter start included)."""
    command = [sys.executable, "-m", "bloomskip", *arguments]

    def run() -> None:
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)

    return _best(run, repeat)


def main() -> None:
    """Run every case and print the comparison table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", default=f"1,{os.cpu_count() or 1}")
    parser.add_argument("--dir", help="where the data file is kept (default: a temp dir)")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--no-clickhouse", action="store_true", help="skip the chdb peers")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    args = parser.parse_args()
    CLOCK["name"] = args.clock
    jobs = sorted({int(j) for j in args.jobs.split(",")})
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]

    from chdb import session as chdb_session

    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bloomskip-e2e-"))
    with tempfile.TemporaryDirectory(prefix="bloomskip-e2e-ch-") as workdir:
        session = chdb_session.Session(workdir)
        try:
            data = base / "data" / "data.parquet"
            write_data(data, args.rows, session)
            peers = {}
            for name in cases:
                column, ch_type, expression, index = CASES[name]
                if args.no_clickhouse:
                    peers[name] = (float("nan"), float("nan"))
                    continue
                peers[name] = tuple(
                    clickhouse_extra_seconds(
                        session, column, ch_type, expression, index, args.rows, args.repeat,
                        threads, _now, warm_up=True,
                    )[1]
                    for threads in (1, None)
                )  # fmt: skip
        finally:
            session.close()
        _report(data, args.rows, args.repeat, jobs, cases, peers)


def _report(data: Path, rows: int, repeat: int, jobs: list[int], cases, peers) -> None:
    folder = data.parent
    index_folder = folder / "_bloomskip"
    print(
        f"{rows:,} rows, Parquet row groups of {ROW_GROUP_ROWS:,}, simulate granules of "
        f"{GRANULARITY}, best of {repeat}; {os.cpu_count()} CPUs; {CLOCK['name']} seconds"
    )
    print(
        f"{'case':9} {'what':34} {'jobs':>4} {'seconds':>8} {'CH 1t s':>8} {'vs CH':>6} "
        f"{'CH all s':>8} {'vs CH':>6} {'read s':>7} {'vs read':>7}"
    )
    read_by_jobs = {}
    for name in cases:
        column, ch_type, _, index = CASES[name]
        one, default = peers[name]
        for j in jobs:
            read_by_jobs[j] = _best(
                lambda j=j, column=column: pq.read_table(data, columns=[column], use_threads=j > 1),
                repeat,
            )
        definition = f"INDEX i {column} TYPE {index} GRANULARITY 1"
        rows_out = []
        # The CLI builds on one thread per CPU; simulate_file(jobs=N) picks the count.
        simulate_args = ["clickhouse", "simulate", str(data), "--index", definition]
        rows_out.append(("simulate CLI, fresh process", 0, _fresh(simulate_args, repeat)))
        for j in jobs if HAS_JOBS else [0]:
            code = (
                "from bloomskip.clickhouse.simulate import simulate_file; "
                f"simulate_file({str(data)!r}, [{definition!r}], []"
                + (f", jobs={j})" if HAS_JOBS else ")")
            )

            def fresh_simulate(code=code) -> None:
                subprocess.run([sys.executable, "-c", code], check=True)

            rows_out.append(("simulate_file, fresh process", j, _best(fresh_simulate, repeat)))
            rows_out.append(
                (
                    "simulate_file, warm call",
                    j,
                    _best(
                        lambda d=definition, j=j: simulate_file(
                            data, [d], [], **({"jobs": j} if HAS_JOBS else {})
                        ),
                        repeat,
                    ),
                )
            )
        for j in jobs:
            build_args = ["index", "build", str(folder), "--index", definition, "--jobs", str(j)]

            def fresh_build(build_args=build_args) -> None:
                shutil.rmtree(index_folder, ignore_errors=True)
                subprocess.run(
                    [sys.executable, "-m", "bloomskip", *build_args],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )

            rows_out.append(("index build, fresh process", j, _best(fresh_build, repeat)))

            def warm_build(j=j, definition=definition) -> None:
                shutil.rmtree(index_folder, ignore_errors=True)
                Dataset(folder).build_index([definition], jobs=j, progress=False)

            rows_out.append(("index build, warm call", j, _best(warm_build, repeat)))
        shutil.rmtree(index_folder, ignore_errors=True)
        for what, j, seconds in rows_out:
            read = read_by_jobs[j or max(jobs)]
            print(
                f"{name:9} {what:34} {j or 'all':>4} {seconds:8.3f} {one:8.3f} "
                f"{one / seconds:6.2f} "
                f"{default:8.3f} {default / seconds:6.2f} {read:7.3f} {seconds / read:7.2f}"
            )
        print(
            f"{name:9} {'plain pyarrow read of ' + column:34} "
            + " ".join(f"jobs {j}: {read_by_jobs[j]:.3f} s" for j in jobs)
        )
        print(
            f"{name:9} {'target (1.5x ClickHouse)':34} one thread <= {one / 1.5:.3f} s, all "
            f"threads <= {default / 1.5:.3f} s; reading the column alone takes "
            f"{read_by_jobs[min(jobs)]:.3f} s and {read_by_jobs[max(jobs)]:.3f} s"
        )
    print(
        "vs CH = ClickHouse marginal s / bloomskip s (> 1: bloomskip faster); "
        "vs read = bloomskip s / plain read s"
    )


if __name__ == "__main__":
    main()
