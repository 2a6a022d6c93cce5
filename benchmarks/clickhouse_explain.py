"""Benchmark: ``bloomskip clickhouse explain`` on a large real part, against ClickHouse itself.

Builds (with chdb) a one-part MergeTree table of ``--rows`` rows (default 100 million) with a
``bloom_filter`` index on a high-cardinality UInt64 column and a ``tokenbf_v1`` index on a String
column, then, for each index, times

* bloomskip: open the part, read and verify the index (every checksum), evaluate the predicate,
  in a fresh subprocess whose peak RSS above an import-only baseline is the memory we kept;
* ClickHouse: ``EXPLAIN indexes = 1`` of the same predicate in chdb (the engine reads the same
  index file; best of 3, warm), and a full ``SELECT count()`` with the index for scale,

and prints seconds, granules/s, memory against the index size, and the ratios.

Usage:
    python benchmarks/clickhouse_explain.py [--rows 100000000] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INDEXES = {
    "iv": ("v", "bloom_filter(0.025)", "v = 1234567"),
    "itok": ("s", "tokenbf_v1(8192, 3, 0)", "hasToken(s, 'w1234567')"),
}

CHILD = """
import json, resource, sys, time
import numpy, pyarrow, sqlglot
from bloomskip.clickhouse import condition, ddl, index
from bloomskip.clickhouse.part import Part
from bloomskip.clickhouse.part_cli import explain_part
part_dir, sql_path, name, where = sys.argv[1:5]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
runs = []
for _ in range(2):  # the first run pays one-time costs (SQL dialect set-up, first calls)
    start = time.perf_counter()
    part = Part.open(part_dir, open(sql_path).read())
    entry = explain_part(part, where, [name])["indexes"][0]
    runs.append(time.perf_counter() - start)
    del part
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
# A third run under tracemalloc (numpy and bytes allocations are traced) gives the peak of
# what the run itself allocates, independent of memory the allocator kept from earlier runs.
import tracemalloc
tracemalloc.start()
explain_part(Part.open(part_dir, open(sql_path).read()), where, [name])
traced = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
entry.pop("selected")
print(json.dumps({"cold": runs[0], "warm": runs[1], "peak_bytes": (peak - base) * 1024,
                  "traced_bytes": traced, **entry}))
"""


def _child(part_dir: Path, sql: Path, index: str, where: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(part_dir), str(sql), index, where],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)


def _timed(function, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000_000)
    parser.add_argument("--workdir", type=Path, default=None, help="where chdb writes the table")
    args = parser.parse_args()

    from chdb import session

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bloomskip-bench-"))
    chdb = session.Session(str(workdir / "chdb"))
    index_sql = ", ".join(
        f"INDEX {name} {column} TYPE {kind} GRANULARITY 1"
        for name, (column, kind, _) in INDEXES.items()
    )
    started = time.perf_counter()
    chdb.query("CREATE DATABASE IF NOT EXISTS bench")
    chdb.query("DROP TABLE IF EXISTS bench.t")
    chdb.query(
        f"CREATE TABLE bench.t (k UInt64, v UInt64, s String, {index_sql}) ENGINE = MergeTree "
        "ORDER BY k SETTINGS index_granularity = 8192, min_bytes_for_wide_part = 0"
    )
    chdb.query(
        "INSERT INTO bench.t SELECT number, intHash64(number), concat('w', toString(number)) "
        f"FROM numbers({args.rows}) SETTINGS max_insert_block_size = {args.rows}, "
        f"min_insert_block_size_rows = {args.rows}, min_insert_block_size_bytes = 0"
    )
    chdb.query("OPTIMIZE TABLE bench.t FINAL")
    print(f"built {args.rows:,} rows in {time.perf_counter() - started:.1f} s under {workdir}")

    def text(sql: str) -> str:
        return chdb.query(sql, "TSVRaw").bytes().decode()

    part_dir = Path(text("SELECT path FROM system.parts WHERE table = 't' AND active").strip())
    metadata = Path(text("SELECT metadata_path FROM system.tables WHERE name = 't'").strip())
    sql_path = metadata if metadata.is_absolute() else workdir / "chdb" / metadata
    sizes = {
        line.split("\t")[0]: [int(value) for value in line.split("\t")[1:]]
        for line in text(
            "SELECT name, data_compressed_bytes, data_uncompressed_bytes, marks_bytes "
            "FROM system.data_skipping_indices WHERE table = 't'"
        ).splitlines()
    }
    for name, (_, kind, where) in INDEXES.items():
        others = ",".join(other for other in INDEXES if other != name)
        suffix = (
            f"SETTINGS ignore_data_skipping_indices = '{others}', use_query_condition_cache = 0"
        )
        explain_sql = f"EXPLAIN indexes = 1 SELECT k FROM bench.t WHERE {where} {suffix}"
        first_explain = _timed(lambda sql=explain_sql: text(sql), repeat=1)
        explain_seconds = _timed(lambda sql=explain_sql: text(sql))
        count_sql = f"SELECT count() FROM bench.t WHERE {where} {suffix}"
        count_seconds = _timed(lambda sql=count_sql: text(sql), repeat=1)
        ours = _child(part_dir, sql_path, name, where)
        compressed, uncompressed, marks = sizes[name]
        peak = ours["peak_bytes"]
        granules = ours["granules_total"]
        print(
            f"\nindex {name} {kind}: {granules:,} granules, {compressed / 1e6:.1f} MB on disk, "
            f"{uncompressed / 1e6:.1f} MB uncompressed, marks {marks / 1e3:.1f} kB"
        )
        print(f"  WHERE {where}: kept {ours['granules_selected']:,} granules")
        for label, seconds in (("cold", ours["cold"]), ("warm", ours["warm"])):
            print(
                f"  bloomskip explain ({label}) {seconds:8.3f} s {granules / seconds:12,.0f} "
                f"granules/s   ratio to chdb EXPLAIN first {seconds / first_explain:6.1f}x, "
                f"best {seconds / explain_seconds:6.1f}x, to SELECT count() "
                f"{seconds / count_seconds:5.2f}x"
            )
        print(
            f"  chdb EXPLAIN first {first_explain:.3f} s, best of 3 {explain_seconds:.3f} s; "
            f"SELECT count() {count_seconds:.3f} s"
        )
        traced = ours["traced_bytes"]
        print(
            f"  bloomskip memory: peak allocated {traced / 1e6:.1f} MB = "
            f"{traced / uncompressed:.2f}x the uncompressed index ({traced / compressed:.2f}x its "
            f"size on disk); peak RSS growth {peak / 1e6:.1f} MB"
        )
    chdb.close()
    self_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"\n(benchmark process peak RSS {self_peak / 1e3:.0f} MB; workdir {workdir})")
    if not args.workdir:
        print(f"remove it with: rm -r {workdir}" if os.path.exists(workdir) else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
