"""Benchmark: long, machine-generated WHERE clauses, bloomskip against DuckDB on the same files.

Generates a log dataset (default 2 million rows in 4 Parquet files, row groups of 64K rows),
indexes ``user_id`` (bloom_filter), ``message`` (tokenbf_v1) and ``url`` (ngrambf_v1), then times
the predicate shapes that used to be slow to prune (``--cases`` picks some):

* ``in``: ``user_id IN (...)`` with 40,000 integers (a few of them present);
* ``in100k``: the same with 100,000 integers (issue 17: within 2x of DuckDB's full scan);
* ``multisearch``: ``multiSearchAny(url, [...])`` with 255 needles (ClickHouse's limit);
* ``match``: ``match(url, ...)`` with a pattern of about 300 KB (an alternation of literals);
* ``refuse``: the time to refuse ``multiSearchAny`` with 20,000 needles (more than 255);
* ``linear``: prune time of ``IN`` lists of 10,000 to 160,000 values, and per value.

For each: ``prune`` (parse, compile against every index, probe) on a warm ``Dataset``, the whole
``query`` (prune plus DuckDB on the surviving row groups), and DuckDB's own full scan with the
same predicate; every run uses a new WHERE text (other values), so no cache answers it. The
answer's row count must equal DuckDB's. Times are medians of ``--repeat`` runs.

Usage: python benchmarks/long_predicates.py [--rows N] [--dir DIR] [--repeat R] [--cases a,b]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq

from bloomskip.dataset import Dataset
from bloomskip.dataset.demo import write_logs

INDEXES = [
    "user_id TYPE bloom_filter(0.01)",
    "message TYPE tokenbf_v1(8192, 3, 0)",
    "url TYPE ngrambf_v1(3, 8192, 3, 0)",
]


def in_list(rng: np.random.Generator, present: np.ndarray, count: int = 40_000) -> tuple[str, str]:
    values = rng.integers(0, 2**62, count, dtype=np.int64)
    values[:5] = rng.choice(present, 5)
    text = ", ".join(map(str, values.tolist()))
    return f"user_id IN ({text})", f"user_id IN ({text})"


def needles(rng: np.random.Generator, count: int) -> list[str]:
    return [f"/items/{value}" for value in rng.integers(0, 10**6, count).tolist()]


def multi_search(rng: np.random.Generator, count: int = 255) -> tuple[str, str]:
    words = needles(rng, count)
    clickhouse = "multiSearchAny(url, [" + ", ".join(f"'{w}'" for w in words) + "])"
    duck = " OR ".join(f"contains(url, '{w}')" for w in words)
    return clickhouse, duck


def long_match(rng: np.random.Generator) -> tuple[str, str]:
    # About 300 KB: '/items/(123456|...)$' over 40,000 six-digit alternatives.
    alternatives = "|".join(str(v) for v in rng.integers(100_000, 10**6, 43_000).tolist())
    pattern = f"/items/({alternatives})$"
    return f"match(url, '{pattern}')", f"regexp_matches(url, '{pattern}')"


def median_time(function, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for run in range(repeat):
        started = time.perf_counter()
        result = function(run)
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", default="in,in100k,multisearch,match,refuse,linear")
    args = parser.parse_args()
    chosen = set(args.cases.split(","))
    directory = args.dir or Path(tempfile.mkdtemp(prefix="bloomskip-long-"))
    if not any(directory.glob("*.parquet")):
        write_logs(directory, args.rows, files=4)
    dataset = Dataset(directory)
    dataset.build_index(INDEXES)
    present = pq.read_table(sorted(directory.glob("*.parquet"))[0], columns=["user_id"])
    present = present.column(0).to_numpy()
    connection = duckdb.connect()
    scan = f"read_parquet('{directory}/*.parquet')"

    cases = {
        "in": ("IN, 40,000 integers", lambda rng: in_list(rng, present)),
        "in100k": ("IN, 100,000 integers", lambda rng: in_list(rng, present, 100_000)),
        "multisearch": ("multiSearchAny, 255 needles", multi_search),
        "match": ("match, 300 KB pattern", long_match),
    }
    print(f"{'predicate':30} {'size':>8} {'prune':>9} {'query':>9} {'duckdb':>9} {'rows':>6}")
    for key, (name, make) in cases.items():
        if key not in chosen:
            continue
        texts = [make(np.random.default_rng(run)) for run in range(2 * args.repeat)]
        prune, _ = median_time(lambda run, t=texts: dataset.explain(t[run][0]), args.repeat)
        query, table = median_time(
            lambda run, t=texts: dataset.query(t[args.repeat + run][0]), args.repeat
        )
        duck, count = median_time(
            lambda run, t=texts: connection.execute(
                f"SELECT count(*) FROM {scan} WHERE {t[args.repeat + run][1]}"
            ).fetchone()[0],
            args.repeat,
        )
        if table.num_rows != count:
            raise SystemExit(f"{name}: bloomskip {table.num_rows} rows, DuckDB {count}")
        size = len(texts[0][0]) / 1024
        print(
            f"{name:30} {size:7.0f}K {prune * 1e3:8.0f}ms {query * 1e3:8.0f}ms "
            f"{duck * 1e3:8.0f}ms {count:6}   query/duckdb {duck / query:.2f}x"
        )
    if "refuse" in chosen:
        too_many = (
            "multiSearchAny(url, ["
            + ", ".join(f"'{w}'" for w in needles(np.random.default_rng(1), 20_000))
            + "])"
        )
        started = time.perf_counter()
        try:
            dataset.query(too_many)
        except Exception as exc:  # the refusal is the result being timed
            refusal = f"{type(exc).__name__}: {str(exc)[:70]}"
        else:
            raise SystemExit("20,000 needles were not refused (ClickHouse refuses more than 255)")
        print(
            f"multiSearchAny, 20,000 needles refused in {time.perf_counter() - started:.2f} s "
            f"({refusal})"
        )
    if "linear" in chosen:
        print("prune time of user_id IN (n values), warm:")
        for count in (10_000, 20_000, 40_000, 80_000, 160_000):
            # Seeds of their own: no earlier case's WHERE (and its compiled condition) recurs.
            rngs = [np.random.default_rng(100 + run) for run in range(3)]
            texts = [in_list(rng, present, count)[0] for rng in rngs]
            seconds, _ = median_time(lambda run, t=texts: dataset.explain(t[run]), len(texts))
            per_value = seconds / count * 1e6
            print(f"  {count:>7,} values: {seconds * 1e3:7.0f} ms, {per_value:.2f} us a value")


if __name__ == "__main__":
    main()
