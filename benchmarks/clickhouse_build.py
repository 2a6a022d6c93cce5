"""Skip-index build speed: bloomskip against ClickHouse (chdb), single thread, same run.

Five cases, 10,000,000 rows each, ``index_granularity = 8192`` (the table of docs/clickhouse.md):

* UInt64 (``cityHash64(number)``) with ``bloom_filter(0.025)``;
* strings of ~17 bytes (``'w<n%1000> v<n>-<n%7>x'``) with ``tokenbf_v1(10240, 3, 0)``;
* the same strings with ``ngrambf_v1(3, 10240, 3, 0)``;
* the same strings with ``sparse_grams(3, 100, 10240, 3, 0)``;
* the same strings with ``bloom_filter(0.025)``.

ClickHouse's cost of an index is the wall time of ``INSERT ... SELECT`` into a MergeTree table
with the index minus the same INSERT without it (``max_threads = 1``, ``max_insert_threads = 1``;
best of ``--repeat``). bloomskip's cost is :meth:`SkipIndex.build` on the same values (already in
Arrow), split into the granule build and the ClickHouse-layout serialization plus LZ4 framing
(what the INSERT also does). Prints rows/s for both and the ratio bloomskip / ClickHouse.

``--jobs 1,2`` also builds on several threads (the C builders split the granules, without the
GIL); ClickHouse stays on one. ``--case sparse`` runs only the cases whose name holds that text.

Usage:
    python benchmarks/clickhouse_build.py [--rows 10000000] [--repeat 3] [--jobs 1,2] [--case TEXT]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import pyarrow as pa

from bloomskip.bits import build_threads
from bloomskip.clickhouse.compression import write_compressed_stream
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex

GRANULARITY = 8192
STRINGS = (
    "concat('w', toString(number % 1000), ' v', toString(number), '-', toString(number % 7), 'x')"
)
CASES = [
    ("UInt64 bloom_filter(0.025)", "v", "UInt64", "cityHash64(number)", "bloom_filter(0.025)"),
    ("String tokenbf_v1(10240,3,0)", "s", "String", STRINGS, "tokenbf_v1(10240, 3, 0)"),
    ("String ngrambf_v1(3,10240,3,0)", "s", "String", STRINGS, "ngrambf_v1(3, 10240, 3, 0)"),
    (
        "String sparse_grams(3,100,10240,3,0)",
        "s",
        "String",
        STRINGS,
        "sparse_grams(3, 100, 10240, 3, 0)",
    ),
    ("String bloom_filter(0.025)", "s", "String", STRINGS, "bloom_filter(0.025)"),
]


def best_of(run, repeat: int, clock=time.perf_counter, warm_up: bool = False) -> float:
    """The least ``clock`` time of ``repeat`` runs (after one untimed run when ``warm_up``)."""
    if warm_up:
        run()
    times = []
    for _ in range(repeat):
        start = clock()
        run()
        times.append(clock() - start)
    return min(times)


def clickhouse_extra_seconds(
    session: object,
    column: str,
    ch_type: str,
    expression: str,
    index: str,
    rows: int,
    repeat: int,
    threads: int | None = 1,
    clock=time.perf_counter,
    warm_up: bool = False,
) -> tuple[float, float]:
    """(insert seconds without the index, extra seconds the index adds), best of ``repeat``.

    ``threads`` None runs the INSERTs with ClickHouse's default threads; ``clock`` and
    ``warm_up`` are :func:`best_of`'s.
    """
    settings = (
        ""
        if threads is None
        else f" SETTINGS max_threads = {threads}, max_insert_threads = {threads}"
    )
    results = []
    for with_index in (False, True):
        clause = f", INDEX i {column} TYPE {index} GRANULARITY 1" if with_index else ""
        session.query("DROP TABLE IF EXISTS bench SYNC")
        session.query(
            f"CREATE TABLE bench ({column} {ch_type}{clause}) ENGINE = MergeTree ORDER BY tuple() "
            f"SETTINGS index_granularity = {GRANULARITY}"
        )

        def insert() -> None:
            session.query("TRUNCATE TABLE bench")
            session.query(f"INSERT INTO bench SELECT {expression} FROM numbers({rows}){settings}")

        results.append(best_of(insert, repeat, clock, warm_up))
    session.query("DROP TABLE IF EXISTS bench SYNC")
    return results[0], results[1] - results[0]


def bloomskip_seconds(
    table: pa.Table, column: str, ch_type: str, index: str, repeat: int, jobs: int = 1
) -> tuple[float, float]:
    """(build seconds on ``jobs`` threads, serialize + LZ4 seconds), best of ``repeat`` each."""
    definition = parse_index_definition(f"INDEX i {column} TYPE {index} GRANULARITY 1")
    rows = table.num_rows
    full, rest = divmod(rows, GRANULARITY)
    granule_rows = np.array([GRANULARITY] * full + ([rest] if rest else []), np.int64)
    built = {}

    def build() -> None:
        with build_threads(jobs):
            built["index"] = SkipIndex.build(definition, table, granule_rows, {column: ch_type})

    def serialize() -> None:
        index = built["index"]
        granules = [index.granule_bytes(j) for j in range(index.index_granule_count)]
        write_compressed_stream(granules, "LZ4")

    return best_of(build, repeat), best_of(serialize, repeat)


def main() -> None:
    """Run every case and print the comparison table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", default="1", help="bloomskip thread counts, e.g. 1,2")
    parser.add_argument("--case", default="", help="only the cases whose name holds this text")
    args = parser.parse_args()
    jobs = sorted({int(j) for j in args.jobs.split(",")})

    from chdb import session as chdb_session

    with tempfile.TemporaryDirectory(prefix="bloomskip-bench-") as workdir:
        session = chdb_session.Session(workdir)
        try:
            cases = [case for case in CASES if args.case in case[0]]
            _compare(session, cases, args.rows, args.repeat, jobs)
        finally:
            session.close()


def _compare(session: object, cases: list, rows: int, repeat: int, jobs: list[int]) -> None:
    """Run every case in ``session`` and print the comparison table."""
    header = (
        f"{'case':36} {'CH insert s':>11} {'CH index s':>10} {'CH rows/s':>12} "
        f"{'jobs':>4} {'bs build s':>10} {'bs ser s':>8} {'bs rows/s':>12} {'ratio':>6}"
    )
    print(
        f"{rows:,} rows, index_granularity {GRANULARITY}, ClickHouse on one thread, "
        f"best of {repeat}"
    )
    print(header)
    for name, column, ch_type, expression, index in cases:
        table = session.query(f"SELECT {expression} AS {column} FROM numbers({rows})", "ArrowTable")
        base, extra = clickhouse_extra_seconds(
            session, column, ch_type, expression, index, rows, repeat
        )
        ch_rate = rows / extra if extra > 0 else float("inf")
        for j in jobs:
            build, serialize = bloomskip_seconds(table, column, ch_type, index, repeat, j)
            our_rate = rows / (build + serialize)
            print(
                f"{name:36} {base:11.3f} {extra:10.3f} {ch_rate:12,.0f} {j:4d} {build:10.3f} "
                f"{serialize:8.3f} {our_rate:12,.0f} {our_rate / ch_rate:6.2f}"
            )
    print("ratio = bloomskip rows/s / ClickHouse rows/s (> 1: bloomskip is faster)")


if __name__ == "__main__":
    main()
