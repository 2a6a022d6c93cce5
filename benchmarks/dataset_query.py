"""Benchmark: bloomskip's dataset index against DuckDB and pyarrow on the same Parquet data.

Generates a log dataset (default 20 million rows, row groups of 64K rows) twice: plain, and
with Parquet Bloom filters on ``user_id`` written by pyarrow (``bloom_filter_options``). Then, in
the same run and on the same machine:

* bloomskip: the sidecar index (``user_id`` bloom_filter(0.01), ``message`` tokenbf_v1) prunes
  row groups, DuckDB evaluates the exact predicate on the survivors;
* (a) DuckDB full scan of the plain files;
* (b) DuckDB over the files with Parquet Bloom filters;
* (c) pyarrow.dataset filtering (an Arrow compute expression).

Queries: a point lookup of a present and of an absent ``user_id``, and a token search on
``message``. Every engine must return the same rows. Times are medians of several warm runs.

Usage: python benchmarks/dataset_query.py [--rows N] [--dir DIR] [--repeat R]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from bloomskip.dataset import Dataset
from bloomskip.dataset.demo import RARE_TOKEN, ROW_GROUP_ROWS, write_logs
from bloomskip.dataset.translate import TOKEN_SEPARATOR_CLASS, clickhouse_to_duckdb

INDEXES = ["user_id TYPE bloom_filter(0.01)", "message TYPE tokenbf_v1(8192, 3, 0)"]


def timed(function, repeat: int) -> tuple[float, object]:
    """Median wall time of ``repeat`` runs (after one warm-up) and the last result."""
    result = function()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--dir", help="where to generate the data (default: a temp dir)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bloomskip-bench-"))
    plain, with_bloom = base / "plain", base / "parquet-bloom"

    started = time.perf_counter()
    for target, options in [
        (plain, {}),
        (with_bloom, {"bloom_filter_options": {"user_id": {"ndv": ROW_GROUP_ROWS, "fpp": 0.01}}}),
    ]:
        existing = sorted(target.glob("logs-*.parquet"))
        if sum(pq.ParquetFile(p).metadata.num_rows for p in existing) != args.rows:
            write_logs(target, args.rows, files=args.files, **options)
    print(
        f"data: {args.rows:,} rows in {base} (generated in {time.perf_counter() - started:.0f} s)"
    )

    dataset = Dataset(plain)
    plain_files = [str(f.path) for f in dataset.files]
    bloom_files = sorted(str(p) for p in with_bloom.glob("logs-*.parquet"))

    # DuckDB must see the Parquet Bloom filters pyarrow wrote (an absent id is excluded).
    probe = duckdb.sql(
        f"SELECT bool_and(bloom_filter_excludes) FROM parquet_bloom_probe('{bloom_files[0]}', "
        "'user_id', 12345)"
    ).fetchall()
    assert probe == [(True,)], "pyarrow wrote no Parquet Bloom filter DuckDB can use"

    read_started = time.perf_counter()
    for path in plain_files:
        pq.read_table(path, columns=["user_id", "message"])
    read_seconds = time.perf_counter() - read_started
    dataset.sidecar_path.unlink(missing_ok=True)
    build_started = time.perf_counter()
    report = dataset.build_index(INDEXES, progress=False)
    build_seconds = time.perf_counter() - build_started
    sidecar = dataset.load_sidecar()
    index_sizes = {
        spec.definition: sum(len(entry.payloads[i]) for entry in sidecar.files.values())
        for i, spec in enumerate(sidecar.indexes)
    }

    sample = pq.ParquetFile(plain_files[len(plain_files) // 2]).read_row_group(3, ["user_id"])
    present = int(sample.column(0)[777].as_py())
    absent = int(np.random.default_rng(7).integers(1, 1 << 62))
    queries = [
        ("point lookup, present", f"user_id = {present}", pc.field("user_id") == present),
        ("point lookup, absent", f"user_id = {absent}", pc.field("user_id") == absent),
        (
            "token search",
            f"hasToken(message, '{RARE_TOKEN}')",
            pc.match_substring_regex(
                pc.field("message"),
                pattern=f"(?:^|{TOKEN_SEPARATOR_CLASS}){RARE_TOKEN}(?:$|{TOKEN_SEPARATOR_CLASS})",
            ),
        ),
    ]

    def listing(files: list[str]) -> str:
        return ", ".join(f"'{f}'" for f in files)

    plain_dataset = pads.dataset(plain_files, format="parquet")
    connection = duckdb.connect()
    rows = []
    for label, where, arrow_filter in queries:
        sql_where = clickhouse_to_duckdb(where)
        cold_started = time.perf_counter()
        Dataset(plain).query(where)  # a fresh object: loads and verifies the sidecar
        cold = time.perf_counter() - cold_started
        ours, ours_rows = timed(lambda w=where: dataset.query(w), args.repeat)
        prune_only, _ = timed(lambda w=where: dataset.explain(w), args.repeat)
        pruned = dataset.explain(where)
        scanned = sum(
            int(s.layout.rows[keep].sum())
            for s, keep in zip(pruned.files, pruned.keep, strict=True)
        )

        def duck(files: list[str], w: str = sql_where):
            sql = f"SELECT * FROM read_parquet([{listing(files)}]) WHERE {w}"
            return connection.sql(sql).to_arrow_table()

        full, full_rows = timed(lambda: duck(plain_files), args.repeat)
        bloom, bloom_rows = timed(lambda: duck(bloom_files), args.repeat)
        arrow, arrow_rows = timed(
            lambda f=arrow_filter: plain_dataset.to_table(filter=f), args.repeat
        )
        counts = {ours_rows.num_rows, full_rows.num_rows, bloom_rows.num_rows, arrow_rows.num_rows}
        assert len(counts) == 1, f"{label}: engines disagree: {counts}"
        rows.append(
            (label, ours_rows.num_rows, scanned, cold, ours, prune_only, full, bloom, arrow)
        )

    print()
    print(
        f"build: {build_seconds:.2f} s; one plain read of user_id+message: {read_seconds:.2f} s; "
        f"ratio {build_seconds / read_seconds:.2f}x"
    )
    for definition, size in index_sizes.items():
        print(f"index {definition}: {size / 1e6:.1f} MB, {8 * size / args.rows:.2f} bits/row")
    print(
        f"sidecar: {report.index_bytes / 1e6:.1f} MB, "
        f"{8 * report.index_bytes / args.rows:.2f} bits/row"
    )
    print()
    header = (
        f"{'query':<22} {'rows':>4} {'scanned':>11} {'bloomskip':>10} {'(cold)':>8} {'(prune)':>8} "
        f"{'duck full':>10} {'duck+pqbf':>10} {'pyarrow':>9}   "
        f"{'vs full':>8} {'vs pqbf':>8} {'vs pyarrow':>10}"
    )
    print(header)
    for label, count, scanned, cold, ours, prune_only, full, bloom, arrow in rows:
        print(
            f"{label:<22} {count:>4} {scanned:>11,} {ours * 1e3:>8.1f}ms {cold * 1e3:>6.0f}ms "
            f"{prune_only * 1e3:>6.1f}ms "
            f"{full * 1e3:>8.1f}ms {bloom * 1e3:>8.1f}ms {arrow * 1e3:>7.1f}ms   "
            f"{full / ours:>7.1f}x {bloom / ours:>7.1f}x {arrow / ours:>9.1f}x"
        )
    print("(ratios: other engine's time / bloomskip's; > 1 means bloomskip is faster)")
    print("(cold: first query of a new Dataset, loading the sidecar; prune: index evaluation only)")


if __name__ == "__main__":
    main()
