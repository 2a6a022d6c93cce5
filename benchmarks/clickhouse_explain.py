"""Benchmark: ``bloomskip clickhouse explain`` on a large real part, against ClickHouse itself.

Builds (with chdb) a one-part MergeTree table of ``--rows`` rows (default 100 million) with a
``bloom_filter`` index on a high-cardinality UInt64 column and a ``tokenbf_v1`` index on a String
column (reused on a second run with the same ``--workdir``), then, for each index:

* bloomskip, in a fresh subprocess: open the part, read and verify the index (every checksum,
  every mark), evaluate the predicate; timed cold (first call in the process) and warm, split into
  reading and evaluating; memory as the tracemalloc peak (numpy and bytes allocations are
  traced) and the growth of the process's own peak RSS (VmHWM);
* ClickHouse (chdb, same part): ``EXPLAIN indexes = 1`` of the same predicate, first call and best
  of 3 in the process that built the table, first and second call in a fresh process (the
  session's start not timed, as bloomskip's imports are not), and ``SELECT count()`` with the
  index;

and prints seconds, granules/s, memory against the index size, and the ratios.

Usage:
    python benchmarks/clickhouse_explain.py [--rows 100000000] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# v = intHash64(number): the probe value is present in exactly one row.
PROBE = 1234567
INDEXES = {
    "iv": ("v", "bloom_filter(0.025)", "v = {v_probe}"),
    "itok": ("s", "tokenbf_v1(8192, 3, 0)", f"hasToken(s, 'w{PROBE}')"),
}

CHILD = """
import json, sys, time, tracemalloc
import numpy, pyarrow, sqlglot
from bloomskip.clickhouse import condition, ddl, index
from bloomskip.clickhouse.part import Part, clear_index_cache
from bloomskip.clickhouse.part_cli import explain_part

def high_water():
    # VmHWM is this process's own peak RSS (ru_maxrss would carry the parent's over exec).
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

part_dir, sql_path, name, where = sys.argv[1:5]
sql = open(sql_path).read()
base = high_water()
runs = []
# The first run pays one-time costs (SQL dialect set-up, first calls); the second finds the
# verified index in Part.read_index's cache, as ClickHouse's warm EXPLAIN finds it in its
# skipping-index cache: for a part written in the last seconds the cache compares the blocks'
# checksums with the file's (decoding nothing), for an older one its file identity.
for _ in range(2):
    start = time.perf_counter()
    part = Part.open(part_dir, sql)
    stored = part.read_index(name)
    read = time.perf_counter()
    selected = stored.skip_index.select(where)
    runs.append((read - start, time.perf_counter() - read))
    del part, stored
peak_rss = high_water() - base
entry = explain_part(Part.open(part_dir, sql), where, [name])["indexes"][0]
assert entry["selected"] == selected.tolist()
clear_index_cache()  # the memory of a read that verifies, not of one the cache answers
tracemalloc.start()
stored = Part.open(part_dir, sql).read_index(name)
read_peak = tracemalloc.get_traced_memory()[1]
tracemalloc.reset_peak()
stored.skip_index.select(where)
select_peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({"runs": runs, "peak_rss": peak_rss, "read_peak": read_peak,
                  "select_peak": select_peak, "granules_total": entry["granules_total"],
                  "granules_selected": entry["granules_selected"]}))
"""


CHDB_CHILD = """
import sys, time
from chdb import session
chdb = session.Session(sys.argv[1])
times = []
for _ in range(2):
    start = time.perf_counter()
    chdb.query(sys.argv[2], "TSVRaw").bytes()
    times.append(time.perf_counter() - start)
chdb.close()
print(*times)
"""


def _chdb_fresh(chdb_path: Path, sql: str) -> list[float]:
    """chdb's first and second ``sql`` in a new process (the session's start not timed)."""
    out = subprocess.run(
        [sys.executable, "-c", CHDB_CHILD, str(chdb_path), sql],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [float(value) for value in out.split()]


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

    def text(sql: str) -> str:
        return chdb.query(sql, "TSVRaw").bytes().decode()

    index_sql = ", ".join(
        f"INDEX {name} {column} TYPE {kind} GRANULARITY 1"
        for name, (column, kind, _) in INDEXES.items()
    )
    started = time.perf_counter()
    chdb.query("CREATE DATABASE IF NOT EXISTS bench")
    existing = text("SELECT sum(rows) FROM system.parts WHERE table = 't' AND active").strip()
    if existing != str(args.rows):
        chdb.query("DROP TABLE IF EXISTS bench.t")
        chdb.query(
            f"CREATE TABLE bench.t (k UInt64, v UInt64, s String, {index_sql}) "
            "ENGINE = MergeTree ORDER BY k "
            "SETTINGS index_granularity = 8192, min_bytes_for_wide_part = 0"
        )
        chdb.query(
            "INSERT INTO bench.t SELECT number, intHash64(number), concat('w', toString(number)) "
            f"FROM numbers({args.rows}) SETTINGS max_insert_block_size = {args.rows}, "
            f"min_insert_block_size_rows = {args.rows}, min_insert_block_size_bytes = 0"
        )
        chdb.query("OPTIMIZE TABLE bench.t FINAL")
        print(f"built {args.rows:,} rows in {time.perf_counter() - started:.1f} s in {workdir}")
    else:
        print(f"reusing the {args.rows:,}-row table in {workdir}")
    v_probe = text(f"SELECT intHash64({PROBE})").strip()
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
    measured = []
    for name, (_, kind, where_template) in INDEXES.items():
        where = where_template.format(v_probe=v_probe)
        others = ",".join(other for other in INDEXES if other != name)
        # Part-level statistics and the condition cache would answer without the index.
        suffix = (
            f"SETTINGS ignore_data_skipping_indices = '{others}', use_query_condition_cache = 0, "
            "use_statistics_for_part_pruning = 0"
        )
        explain_sql = f"EXPLAIN indexes = 1 SELECT k FROM bench.t WHERE {where} {suffix}"
        first_explain = _timed(lambda sql=explain_sql: text(sql), repeat=1)
        best_explain = _timed(lambda sql=explain_sql: text(sql))
        explained = text(explain_sql)
        clickhouse_kept = explained[explained.index(f"Name: {name}") :].split("Granules: ")[1]
        count_sql = f"SELECT count() FROM bench.t WHERE {where} {suffix}"
        count_seconds = _timed(lambda sql=count_sql: text(sql), repeat=1)

        in_process = (clickhouse_kept.split()[0], first_explain, best_explain, count_seconds)
        measured.append((name, kind, where, explain_sql, in_process))
    # Each fresh process below runs alone: a live session's background threads would take the
    # cores from it, and a fresh chdb process may open the data folder only once this one let go.
    chdb.close()
    for name, kind, where, explain_sql, in_process in measured:
        clickhouse_kept, first_explain, best_explain, count_seconds = in_process
        origin = part_dir / f"skp_idx_{name}.idx"
        # A small index lives in the part's skp_idx.packed archive instead.
        idx_stat = (origin if origin.exists() else part_dir / "skp_idx.packed").stat()
        age = time.time() - max(idx_stat.st_mtime, idx_stat.st_ctime)
        ours = _child(part_dir, sql_path, name, where)
        fresh_first, fresh_second = _chdb_fresh(workdir / "chdb", explain_sql)
        compressed, uncompressed, marks = sizes[name]
        granules = ours["granules_total"]
        print(
            f"\nindex {name} {kind}: {granules:,} granules, {compressed / 1e6:.1f} MB on disk, "
            f"{uncompressed / 1e6:.1f} MB uncompressed, marks {marks / 1e3:.1f} kB; "
            f"written {age:.1f} s before bloomskip's first read"
        )
        print(
            f"  WHERE {where}: bloomskip keeps {ours['granules_selected']:,} granules, "
            f"ClickHouse {clickhouse_kept}"
        )
        totals = []
        for label, (read_seconds, select_seconds) in zip(
            ("cold", "warm"), ours["runs"], strict=True
        ):
            total = read_seconds + select_seconds
            totals.append(total)
            print(
                f"  bloomskip {label}: {total:7.3f} s = read+verify {read_seconds:.3f} s "
                f"({granules / read_seconds:,.0f} granules/s) + evaluate {select_seconds:.3f} s; "
                f"{granules / total:,.0f} granules/s; vs chdb EXPLAIN first "
                f"{total / first_explain:.1f}x, best {total / best_explain:.1f}x, "
                f"vs SELECT count() {total / count_seconds:.2f}x"
            )
        print(
            f"  chdb: EXPLAIN first {first_explain:.3f} s, best of 3 {best_explain:.3f} s; "
            f"SELECT count() {count_seconds:.3f} s"
        )
        print(
            f"  chdb, fresh process: EXPLAIN first {fresh_first:.3f} s, second "
            f"{fresh_second:.3f} s; bloomskip cold {totals[0] / fresh_first:.1f}x its first, "
            f"warm {totals[1] / fresh_second:.1f}x its second"
        )
        print(
            f"  bloomskip memory (x uncompressed index): read+verify peak "
            f"{ours['read_peak'] / 1e6:.1f} MB = {ours['read_peak'] / uncompressed:.2f}x, "
            f"evaluate peak {ours['select_peak'] / 1e6:.1f} MB = "
            f"{ours['select_peak'] / uncompressed:.2f}x; process peak RSS growth "
            f"{ours['peak_rss'] / 1e6:.1f} MB = {ours['peak_rss'] / uncompressed:.2f}x"
        )
    if not args.workdir:
        print(f"\nthe table stays in {workdir}; delete it when done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
