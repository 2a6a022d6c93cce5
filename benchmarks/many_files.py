"""Benchmark: a point lookup over many small files, where per-file overhead decides.

A lake of small files makes a query's fixed cost per file (listing, ``stat``, matching the
index entry, spreading the index's verdict) the figure that grows with the lake. This script
writes ``--files`` Parquet files of ``--rows`` rows each (row groups of ``--group`` rows), builds
``user_id bloom_filter(0.01)`` beside them, and runs, interleaved run by run and reported as
medians:

* ``Dataset.query("user_id = X")`` warm (one ``Dataset`` answering again in this process) and
  its parts: ``explain`` alone (list, match, prune) and ``run`` alone (DuckDB over the kept
  row groups);
* ``bloomskip query DIR --where "user_id = X"`` in a fresh process;
* DuckDB's full scan for the same rows, warm (one connection) and in a fresh process: the peer.

Every run must return the same one row. Ratios printed are DuckDB / bloomskip (> 1: bloomskip
is faster).

Usage: python benchmarks/many_files.py [--files N] [--rows N] [--group N] [--runs R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import fresh

from bloomskip import Dataset


def write_dataset(folder: Path, files: int, rows: int, group: int) -> int:
    """Write the files; returns a ``user_id`` present once (in the middle file)."""
    rng = np.random.default_rng(11)
    present = 0
    for number in range(files):
        ids = rng.integers(0, 10**12, rows)
        if number == files // 2:
            present = int(ids[rows // 2])
        table = pa.table({"user_id": ids, "v": rng.random(rows)})
        pq.write_table(table, folder / f"part-{number:05d}.parquet", row_group_size=group)
    return present


def timed(call) -> tuple[float, object]:
    started = time.perf_counter()
    value = call()
    return time.perf_counter() - started, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--group", type=int, default=250)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        data = Path(temporary) / "data"
        data.mkdir()
        present = write_dataset(data, args.files, args.rows, args.group)
        where = f"user_id = {present}"
        Dataset(data).build_index(["user_id TYPE bloom_filter(0.01)"], progress=False)
        dataset = Dataset(data)
        connection = duckdb.connect()
        scan = f"SELECT * FROM read_parquet('{data}/*.parquet') WHERE user_id = {present}"
        command = [sys.executable, "-m", "bloomskip", "query", str(data), "--where", where]
        command += ["--format", "csv"]
        duckdb_command = [
            sys.executable,
            "-c",
            f'import duckdb; print(duckdb.sql("{scan}").fetchall())',
        ]
        warm = {
            "bloomskip query, warm": lambda: dataset.query(where).num_rows,
            "  explain alone (list, match, prune)": lambda: len(dataset.explain(where).files),
            "  run alone (DuckDB over kept groups)": lambda: dataset.run(decision, where).num_rows,
            "DuckDB full scan, warm": lambda: len(connection.execute(scan).fetchall()),
        }
        decision = dataset.explain(where)
        for call in warm.values():  # untimed: decode the index, open DuckDB, cache pages
            call()
        fresh(command)
        fresh(duckdb_command)
        times: dict[str, list[float]] = {}
        for _ in range(args.runs):
            for name, call in warm.items():
                seconds, value = timed(call)
                times.setdefault(name, []).append(seconds)
                if "explain" not in name and value != 1:
                    raise SystemExit(f"{name}: {value} rows, expected 1")
            for name, argv in (
                ("bloomskip query, fresh process", command),
                ("DuckDB full scan, fresh process", duckdb_command),
            ):
                seconds, out = fresh(argv)
                times.setdefault(name, []).append(seconds)
                if str(present) not in out:
                    raise SystemExit(f"{name}: the row of user_id {present} is missing")
        medians = {name: statistics.median(values) for name, values in times.items()}
        print(
            f"{args.files:,} files x {args.rows:,} rows, row groups of {args.group:,}; "
            f"point lookup of one present id; medians of {args.runs}"
        )
        print(f"{'run':<40} {'median ms':>10}")
        for name, value in medians.items():
            print(f"{name:<40} {value * 1000:>10.1f}")
        warm_ratio = medians["DuckDB full scan, warm"] / medians["bloomskip query, warm"]
        fresh_ratio = (
            medians["DuckDB full scan, fresh process"] / medians["bloomskip query, fresh process"]
        )
        print(f"DuckDB / bloomskip, warm: {warm_ratio:.2f}x; fresh process: {fresh_ratio:.2f}x")


if __name__ == "__main__":
    main()
