"""Benchmark: the same rows in ``key=value`` folders and in one flat folder.

Files under ``region=…/`` folders have a partition column whose values come from the folder
names (docs/queries.md, "Partition folders"); bloomskip reads such files through pyarrow with
the values as constant columns, while a flat folder is read by DuckDB's own Parquet reader.
This measures what that costs, in the same run, for a point lookup through a ``bloom_filter``
index on ``user_id`` and for a filter on the partition column:

* bloomskip warm, flat folder (the ``region`` column stored in the files);
* bloomskip warm, partition folders (``region`` from the folder names);
* DuckDB over the partition folders (``read_parquet(..., hive_partitioning = true)``), a full
  scan with the same WHERE, the rows fetched as Arrow;
* chdb (in-process ClickHouse): ``file('DIR/**/*.parquet', Parquet)``, the rows fetched as
  Arrow.

Every engine must return the same number of rows. Times are medians of ``--repeat``
interleaved rounds after one warm-up round; the ratios are printed against bloomskip on the
flat folder.

Usage: python benchmarks/partition_folders.py [--rows N] [--dir DIR] [--repeat R]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bloomskip.dataset import Dataset

REGIONS = ["eu", "us", "ap", "sa"]
ROW_GROUP_ROWS = 65_536
INDEX = "user_id TYPE bloom_filter(0.01)"


def write(directory: Path, rows: int) -> None:
    """The same rows twice: ``flat/`` (region stored) and ``folders/region=R/`` (not)."""
    if (directory / "done").exists():
        return
    generator = np.random.default_rng(7)
    per_region = rows // len(REGIONS)
    for number, region in enumerate(REGIONS):
        ids = generator.permutation(per_region).astype(np.int64) + number * per_region
        table = pa.table(
            {
                "user_id": ids,
                "amount": generator.random(per_region),
                "region": [region] * per_region,
            }
        )
        flat = directory / "flat"
        flat.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, flat / f"part-{region}.parquet", row_group_size=ROW_GROUP_ROWS)
        folder = directory / "folders" / f"region={region}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(
            table.drop_columns(["region"]), folder / "part.parquet", row_group_size=ROW_GROUP_ROWS
        )
    for name in ("flat", "folders"):
        Dataset(directory / name).build_index([INDEX], progress=False)
    (directory / "done").write_text("")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8_000_000)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "bs-partitions")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    directory = args.dir / str(args.rows)
    write(directory, args.rows)
    target = args.rows // len(REGIONS) + 12345  # a user_id in region 'us'
    wheres = {"point lookup": f"user_id = {target}", "partition filter": "region = 'ap'"}
    flat, folders = Dataset(directory / "flat"), Dataset(directory / "folders")
    connection = duckdb.connect()
    pattern = f"{directory / 'folders'}/**/*.parquet"
    from chdb.session import Session

    session = Session()
    for label, where in wheres.items():
        engines = {
            "bloomskip, flat folder": lambda where=where: flat.query(where).num_rows,
            "bloomskip, partition folders": lambda where=where: folders.query(where).num_rows,
            "DuckDB full scan, partition folders": lambda where=where: (
                connection.sql(
                    f"SELECT * FROM read_parquet('{pattern}', hive_partitioning = true) "
                    f"WHERE {where}"
                )
                .to_arrow_table()
                .num_rows
            ),
            "chdb, partition folders": lambda where=where: (
                session.query(
                    f"SELECT * FROM file('{pattern}', Parquet) WHERE {where}", "ArrowTable"
                ).num_rows
            ),
        }
        times: dict[str, list[float]] = {name: [] for name in engines}
        counts = {name: run() for name, run in engines.items()}  # warm-up, and the answers
        if len(set(counts.values())) != 1:
            raise SystemExit(f"{label}: the engines disagree: {counts}")
        for _ in range(args.repeat):
            for name, run in engines.items():
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
        base = statistics.median(times["bloomskip, flat folder"])
        print(f"{label} ({where}, {counts['bloomskip, flat folder']} rows), {args.rows:,} rows:")
        for name, values in times.items():
            median = statistics.median(values)
            print(f"  {name:38s} {median * 1e3:9.1f} ms  {median / base:5.2f}x flat")
    session.close()


if __name__ == "__main__":
    main()
