"""The ``parquet_bloom_filter`` dataset index against DuckDB reading the same filters itself.

A folder of F pyarrow files (R row groups of 50,000 rows each, a random 32-hex-digit ``id``
with a Parquet filter at ``fpp`` 0.01, and a double ``payload``) is indexed with
``id TYPE parquet_bloom_filter``; then, for point lookups of present and absent ids, this
prints the median seconds of:

* ``bloomskip explain``: the decision alone (which row groups may hold the id), from the
  index's few reads;
* ``duckdb probe``: DuckDB's ``parquet_bloom_probe`` over every file (the same decision, from
  each file's footer and filters);
* ``bloomskip query`` and ``duckdb query``: ``SELECT * WHERE id = ?`` end to end (DuckDB prunes
  row groups with the files' own filters too);

with the ratios, and the build's seconds and the index's size against the filters' bytes.
Times are medians of ``--runs`` interleaved runs.

Run: ``python benchmarks/parquet_bloom_index.py [--files 20] [--groups 4] [--runs 5]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import median_interleaved

from bloomskip import Dataset

GROUP = 50_000


def _write(folder: Path, files: int, groups: int) -> list[str]:
    rng = np.random.default_rng(7)
    ids = []
    for number in range(files):
        rows = GROUP * groups
        high, low = rng.integers(0, 2**63, rows), rng.integers(0, 2**63, rows)
        id_column = [f"{a:016x}{b:016x}" for a, b in zip(high.tolist(), low.tolist(), strict=True)]
        table = pa.table({"id": id_column, "payload": rng.random(rows)})
        pq.write_table(
            table,
            folder / f"part-{number:04d}.parquet",
            row_group_size=GROUP,
            bloom_filter_options={"id": {"ndv": GROUP, "fpp": 0.01}},
        )
        ids.append(id_column[rows // 3])
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bloomskip-pbf-") as scratch:
        folder = Path(scratch)
        ids = _write(folder, args.files, args.groups)
        data_bytes = sum(path.stat().st_size for path in folder.glob("*.parquet"))
        started = time.perf_counter()
        report = Dataset(folder).build_index(["id TYPE parquet_bloom_filter"], progress=False)
        build = time.perf_counter() - started
        print(
            f"{args.files} files x {args.groups} row groups, {data_bytes / 1e6:.1f} MB of data; "
            f"build {build:.2f} s, index {report.index_bytes / 1e6:.2f} MB"
        )
        dataset = Dataset(folder)
        connection = duckdb.connect()
        glob = f"{folder}/*.parquet"
        print(f"{'lookup':10s} {'bloomskip explain':>18s} {'duckdb probe':>13s} {'ratio':>7s}"
              f" {'bloomskip query':>16s} {'duckdb query':>13s} {'ratio':>7s}")  # fmt: skip
        for label, value in (("present", ids[len(ids) // 2]), ("absent", "0" * 32)):
            where = f"id = '{value}'"
            probe = (
                f"SELECT count(*) FROM parquet_bloom_probe('{glob}', 'id', '{value}') "
                "WHERE NOT bloom_filter_excludes"
            )
            times, results = median_interleaved(
                {
                    "explain": lambda where=where: len(dataset.explain(where).row_groups()),
                    "probe": lambda probe=probe: connection.sql(probe).fetchall()[0][0],
                    "query": lambda where=where: dataset.query(where).num_rows,
                    "duckdb": lambda where=where: len(
                        connection.sql(
                            f"SELECT * FROM read_parquet('{glob}') WHERE {where}"
                        ).fetchall()
                    ),
                },
                args.runs,
            )
            assert results["query"] == results["duckdb"], results
            print(
                f"{label:10s} {times['explain']:17.4f}s {times['probe']:12.4f}s "
                f"{times['probe'] / times['explain']:6.1f}x {times['query']:15.4f}s "
                f"{times['duckdb']:12.4f}s {times['duckdb'] / times['query']:6.1f}x"
                f"   (row groups kept: {results['explain']} vs DuckDB {results['probe']})"
            )


if __name__ == "__main__":
    main()
