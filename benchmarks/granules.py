"""Benchmark: granules below the row group, on Parquet as pyarrow and DuckDB write it by default.

Generates a log dataset (default 20 million rows in 5 files) written by pyarrow with its
defaults (1Mi-row row groups), the same rows rewritten by DuckDB with its own (122,880-row row
groups), and a pyarrow copy with Parquet Bloom filters on ``user_id`` and ``trace_id``. Each
layout is indexed three times (``user_id`` and ``trace_id`` ``bloom_filter(0.01)``, ``message``
``tokenbf_v1(8192, 3, 0)``): granules of a row group, of 65,536 rows and of 8,192 rows.

Queries: a point lookup of a present and of an absent ``user_id``, a token search (a job id
whose rows are a few neighbouring granules), an ``IN`` of 10 present values, and an OR over two
indexes (``user_id = X OR trace_id = 'T'``). Per query, in one run:

* bloomskip warm (the same ``Dataset`` answers again) and as a fresh ``bloomskip query``
  process (interpreter start, import and the index's header included);
* DuckDB's full scan of the plain files (default settings), also as a fresh ``duckdb`` Python
  process, and with ``disable_parquet_prefetching`` (what bloomskip's own connection sets);
* DuckDB over the files with Parquet Bloom filters;
* Polars (``scan_parquet`` with the filter pushed into the scan).

Every engine must return the same rows. Times are medians of interleaved runs; ratios are the
peer's time over bloomskip's. ``rows read`` is the access plan's (``--explain --json``'s
``read.rows_to_read``).

Usage: python benchmarks/granules.py [--rows N] [--files F] [--dir DIR] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow.parquet as pq
from common import fresh, median_interleaved

from bloomskip.dataset import Dataset
from bloomskip.dataset.demo import generate_logs
from bloomskip.dataset.sql.translate import TOKEN_SEPARATOR_CLASS, clickhouse_to_duckdb

INDEXES = [
    "user_id TYPE bloom_filter(0.01)",
    "trace_id TYPE bloom_filter(0.01)",
    "message TYPE tokenbf_v1(8192, 3, 0)",
]
GRANULES = ["row-group", 65_536, 8_192]


def write_data(base: Path, rows: int, files: int) -> dict[str, Path]:
    """The three layouts (reused when already complete): pyarrow's defaults, DuckDB's, and
    pyarrow's with Parquet Bloom filters on the point-lookup columns."""
    folders = {name: base / name for name in ("pyarrow", "duckdb", "pyarrow-pqbf")}
    per_file = -(-rows // files)
    filters = {column: {"ndv": 1 << 20, "fpp": 0.01} for column in ("user_id", "trace_id")}
    bloom = {"bloom_filter_options": filters}
    for number in range(files):
        count = min(per_file, rows - number * per_file)
        name = f"logs-{number:03d}.parquet"
        if all((folder / name).exists() for folder in folders.values()):
            continue
        table = generate_logs(count, 0, number * per_file)
        for folder, options in ((folders["pyarrow"], {}), (folders["pyarrow-pqbf"], bloom)):
            folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, folder / f".{name}", **options)
            (folder / f".{name}").replace(folder / name)
        folders["duckdb"].mkdir(parents=True, exist_ok=True)
        target = folders["duckdb"] / f".{name}"
        duckdb.sql(
            f"COPY (SELECT * FROM read_parquet('{folders['pyarrow'] / name}')) TO '{target}' "
            "(FORMAT parquet)"
        )
        target.replace(folders["duckdb"] / name)
    return folders


def count_of(output: str) -> int:
    return int(output.strip().splitlines()[-1])


def queries_for(folder: Path) -> list[tuple[str, str]]:
    """``(label, ClickHouse WHERE)``: values picked from the data itself."""
    files = sorted(folder.glob("logs-*.parquet"))
    middle = pq.read_table(files[len(files) // 2], columns=["user_id", "trace_id"])
    rows = middle.num_rows
    present = middle.column("user_id")[rows // 2 + 123].as_py()
    other = middle.column("user_id")[rows // 5].as_py()
    trace = pq.read_table(files[-1], columns=["trace_id"]).column(0)[rows // 3].as_py()
    rng = np.random.default_rng(10)
    picked = []
    for path in rng.choice(files, 10):
        column = pq.read_table(path, columns=["user_id"]).column(0)
        picked.append(column[int(rng.integers(0, len(column)))].as_py())
    job = (len(files) * rows // 2) // 5000
    return [
        ("point, present", f"user_id = {present}"),
        ("point, absent", "user_id = 1234567890123456789"),
        ("token search", f"hasToken(message, 'job{job}')"),
        ("IN, 10 values", f"user_id IN ({', '.join(map(str, picked))})"),
        ("OR, two indexes", f"user_id = {other} OR trace_id = '{trace}'"),
    ]


def duckdb_where(where: str) -> str:
    """The WHERE in DuckDB's SQL (bloomskip's translation, which the rows check)."""
    return clickhouse_to_duckdb(where)


def polars_filter(where: str):
    """The same predicate as a Polars expression."""
    if where.startswith("hasToken"):
        token = where.split("'")[1]
        pattern = f"(?:^|{TOKEN_SEPARATOR_CLASS}){token}(?:$|{TOKEN_SEPARATOR_CLASS})"
        return pl.col("message").str.contains(pattern)
    if " IN (" in where:
        values = [int(v) for v in where.split("(")[1].rstrip(")").split(",")]
        return pl.col("user_id").is_in(values)
    if " OR " in where:
        left, right = where.split(" OR ")
        return (pl.col("user_id") == int(left.split("=")[1])) | (
            pl.col("trace_id") == right.split("'")[1]
        )
    return pl.col("user_id") == int(where.split("=")[1])


CONNECTIONS: dict = {}


def connection(prefetch: bool):
    """One DuckDB connection per setting, with DuckDB's defaults but for prefetching."""
    if prefetch not in CONNECTIONS:
        CONNECTIONS[prefetch] = duckdb.connect()
        if not prefetch:
            CONNECTIONS[prefetch].execute("SET GLOBAL disable_parquet_prefetching = true")
    return CONNECTIONS[prefetch]


def measure(dataset, index: Path, files: list, bloom_files: list, where: str, args) -> dict:
    """One query's times (warm, interleaved; then fresh processes) and rows read."""
    sql = duckdb_where(where)
    listing = ", ".join(f"'{f}'" for f in files)
    bloom_listing = ", ".join(f"'{f}'" for f in bloom_files)
    full_sql = f"SELECT * FROM read_parquet([{listing}]) WHERE {sql}"
    bloom_sql = f"SELECT * FROM read_parquet([{bloom_listing}]) WHERE {sql}"
    warm, results = median_interleaved(
        {
            "bloomskip": lambda: dataset.query(where),
            "duck full": lambda: connection(True).sql(full_sql).to_arrow_table(),
            "duck no prefetch": lambda: connection(False).sql(full_sql).to_arrow_table(),
            "duck+pqbf": lambda: connection(True).sql(bloom_sql).to_arrow_table(),
            "polars": lambda: pl.scan_parquet(files).filter(polars_filter(where)).collect(),
        },
        args.repeat,
    )
    counts = {
        name: (result.height if isinstance(result, pl.DataFrame) else result.num_rows)
        for name, result in results.items()
    }
    assert len(set(counts.values())) == 1, f"{where}: engines disagree: {counts}"
    bloomskip = [
        sys.executable,
        "-m",
        "bloomskip",
        "query",
        str(dataset.path),
        "--sidecar",
        str(index),
        "--where",
        where,
    ]
    explained = json.loads(fresh([*bloomskip, "--explain", "--json"])[1])["read"]
    duck_script = "import duckdb,sys; print(duckdb.sql(sys.argv[1]).to_arrow_table().num_rows)"
    cold_ours, cold_duck = [], []
    for _ in range(args.fresh_repeat):
        seconds, out = fresh([*bloomskip, "--format", "csv"])
        cold_ours.append(seconds)
        assert len(out.strip().splitlines()) - 1 == counts["bloomskip"], out[:200]
        seconds, out = fresh([sys.executable, "-c", duck_script, full_sql])
        cold_duck.append(seconds)
        assert count_of(out) == counts["bloomskip"], out
    return {
        "rows": counts["bloomskip"],
        "rows_read": explained["rows_to_read"],
        "rows_total": explained["rows"],
        **warm,
        "fresh bloomskip": statistics.median(cold_ours),
        "fresh duck full": statistics.median(cold_duck),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--dir", help="where to generate the data (default: a temp dir)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--fresh-repeat", type=int, default=3)
    parser.add_argument("--layouts", default="pyarrow,duckdb")
    args = parser.parse_args()
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bloomskip-granules-"))
    started = time.perf_counter()
    folders = write_data(base, args.rows, args.files)
    print(
        f"data: {args.rows:,} rows in {args.files} files per layout under {base} "
        f"({time.perf_counter() - started:.0f} s)"
    )
    table = []
    for layout in args.layouts.split(","):
        plain = folders[layout]
        files = sorted(str(p) for p in plain.glob("logs-*.parquet"))
        bloom_files = sorted(str(p) for p in folders["pyarrow-pqbf"].glob("logs-*.parquet"))
        group_rows = pq.ParquetFile(files[0]).metadata.row_group(0).num_rows
        queries = queries_for(plain)
        for granule in GRANULES:
            index = base / f"{layout}-{granule}.index"
            dataset = Dataset(plain, sidecar=index)
            if not index.exists():
                dataset.build_index(INDEXES, granule=granule, progress=False)
            for label, where in queries:
                row = measure(dataset, index, files, bloom_files, where, args)
                row.update(layout=layout, row_group_rows=group_rows, granule=granule, query=label)
                table.append(row)
                report_line(row)
    print()
    print("ratios: the peer's time over bloomskip's (> 1: bloomskip is faster)")
    header = (
        f"{'layout':<8} {'granule':>9} {'query':<16} {'read':>7} {'warm ms':>8} "
        f"{'duck':>6} {'no-pf':>6} {'pqbf':>6} {'polars':>6} {'fresh ms':>9} {'duck':>6}"
    )
    print(header)
    for row in table:
        ours = row["bloomskip"]
        print(
            f"{row['layout']:<8} {str(row['granule']):>9} {row['query']:<16} "
            f"{row['rows_read'] / row['rows_total']:>6.2%} {ours * 1e3:>8.1f} "
            f"{row['duck full'] / ours:>5.1f}x {row['duck no prefetch'] / ours:>5.1f}x "
            f"{row['duck+pqbf'] / ours:>5.1f}x {row['polars'] / ours:>5.1f}x "
            f"{row['fresh bloomskip'] * 1e3:>9.0f} "
            f"{row['fresh duck full'] / row['fresh bloomskip']:>5.2f}x"
        )
    print(
        f"(cores: {os.cpu_count()}; warm medians of {args.repeat} interleaved rounds, fresh "
        f"processes medians of {args.fresh_repeat}; duck = DuckDB's full scan with default "
        "settings, no-pf = with disable_parquet_prefetching, pqbf = DuckDB over the files with "
        "Parquet Bloom filters)"
    )


def report_line(row: dict) -> None:
    print(
        f"{row['layout']} row groups of {row['row_group_rows']:,}, granule {row['granule']}: "
        f"{row['query']}: {row['rows']} rows, read {row['rows_read']:,}/{row['rows_total']:,}; "
        f"warm bloomskip {row['bloomskip'] * 1e3:.1f} ms, DuckDB {row['duck full'] * 1e3:.1f} ms "
        f"(no prefetch {row['duck no prefetch'] * 1e3:.1f}), duck+pqbf "
        f"{row['duck+pqbf'] * 1e3:.1f} ms, Polars {row['polars'] * 1e3:.1f} ms; fresh "
        f"bloomskip {row['fresh bloomskip'] * 1e3:.0f} ms, "
        f"DuckDB {row['fresh duck full'] * 1e3:.0f} ms",
        flush=True,
    )


if __name__ == "__main__":
    main()
