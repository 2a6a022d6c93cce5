"""Benchmark: the same query through the default index, one kept elsewhere, and a sidecar.

The segmented index beside the data (the default of every location since issue 29), the same
layout kept elsewhere (``--index-location``) and the single sidecar file it replaced as the
local default (``--sidecar``) must cost about the same to query: all decide with the same
pruning and hand the same access plan to the same scan. This script writes a log dataset
(``--files`` Parquet files of ``--rows`` rows each, row groups of 65,536 rows) in which one
token (``special``) fills ``--matches`` consecutive rows of the second file, builds the three
indexes (``msg`` tokenbf_v1(8192, 3, 0), ``user_id``
bloom_filter(0.01)), and runs, interleaved run by run and reported as medians:

* ``bloomskip query DIR --where "hasToken(msg, 'special')"`` through each, each a new process
  (interpreter start and imports included);
* the same warm: one ``Dataset`` per layout answering again in this process;
* a point lookup (``user_id = X``) both ways, fresh and warm;
* DuckDB's full scan of the files writing the same rows to Parquet (a fresh process), the
  peer.

Every run must return the same number of rows. The ratios printed are elsewhere / default (the
target of issue 28: at most 1.15) and default / sidecar.

Usage: python benchmarks/index_location.py [--files N] [--rows N] [--matches N] [--runs R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import fresh

from bloomskip import Dataset

TOKEN_SEARCH = "hasToken(msg, 'special')"
INDEXES = ["msg TYPE tokenbf_v1(8192, 3, 0)", "user_id TYPE bloom_filter(0.01)"]


def write_dataset(folder: Path, files: int, rows: int, matches: int) -> int:
    """Write the files; returns a ``user_id`` present once."""
    rng = np.random.default_rng(7)
    words = np.array([f"w{n}" for n in range(5000)], dtype=object)
    present = 0
    for number in range(files):
        ids = rng.integers(0, 10**12, rows)
        messages = "GET /api/" + words[rng.integers(0, len(words), rows)] + " done"
        if number == min(1, files - 1):
            start = min(131_072, max(rows - matches, 0))
            messages[start : start + matches] = "GET /api/special done"
            present = int(ids[rows // 2])
        table = pa.table(
            {"user_id": ids, "msg": pa.array(messages, pa.string()), "v": rng.random(rows)}
        )
        pq.write_table(table, folder / f"part-{number}.parquet", row_group_size=65_536)
    return present


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--matches", type=int, default=500_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        data = Path(temporary) / "data"
        data.mkdir()
        sidecar = Path(temporary) / "one.index"
        elsewhere = Path(temporary) / "index"
        present = write_dataset(data, args.files, args.rows, args.matches)
        Dataset(data).build_index(INDEXES, progress=False)
        Dataset(data, sidecar=sidecar).build_index(INDEXES, progress=False)
        Dataset(data, index_location=elsewhere).build_index(INDEXES, progress=False)
        query = [sys.executable, "-m", "bloomskip", "query", str(data), "--where", TOKEN_SEARCH]
        point = [sys.executable, "-m", "bloomskip", "query", str(data)]
        point += ["--where", f"user_id = {present}", "--format", "csv"]
        output = Path(temporary) / "rows.parquet"
        query += ["--select", "user_id,msg", "--format", "parquet", "--output", str(output)]
        commands = {
            "default index, fresh process": query,
            "sidecar, fresh process": query + ["--sidecar", str(sidecar)],
            "index elsewhere, fresh process": query + ["--index-location", str(elsewhere)],
            "point lookup, default, fresh process": [*point, "--select", "user_id,msg"],
            "point lookup, sidecar, fresh process": [
                *point,
                "--select",
                "user_id,msg",
                "--sidecar",
                str(sidecar),
            ],
            # The same rows written the same way: a full scan, then the Parquet output.
            "DuckDB full scan, fresh process": [
                sys.executable,
                "-c",
                'import duckdb; duckdb.sql("COPY (SELECT user_id, msg FROM read_parquet('
                f"'{data}/*.parquet') WHERE msg LIKE '%/special %') TO '{output}' "
                '(FORMAT parquet)")',
            ],
        }
        datasets = {
            "default": Dataset(data),
            "elsewhere": Dataset(data, index_location=elsewhere),
            "sidecar": Dataset(data, sidecar=sidecar),
        }
        warm_queries = {"token search": TOKEN_SEARCH, "point lookup": f"user_id = {present}"}
        times: dict[str, list[float]] = {}
        counts: dict[str, set[str]] = {}
        for command in commands.values():  # untimed: byte code and page cache
            fresh(command)
        for _ in range(args.runs):
            for name, command in commands.items():
                seconds, _ = fresh(command)
                times.setdefault(name, []).append(seconds)
                if "point lookup" not in name:
                    rows = pq.read_metadata(output).num_rows
                    counts.setdefault("token search", set()).add(str(rows))
            for label, where in warm_queries.items():
                for layout, dataset in datasets.items():
                    started = time.perf_counter()
                    rows = dataset.query(where).num_rows
                    times.setdefault(f"{label}, {layout}, warm", []).append(
                        time.perf_counter() - started
                    )
                    counts.setdefault(label, set()).add(str(rows))
        for label, seen in counts.items():
            if len(seen) != 1:
                raise SystemExit(f"{label}: the runs disagree on the row count: {sorted(seen)}")
        medians = {name: statistics.median(values) for name, values in times.items()}
        print(f"{args.files} files x {args.rows:,} rows; {args.matches:,} rows match the token")
        print(f"{'run':<44} {'median s':>9}")
        for name, value in medians.items():
            print(f"{name:<44} {value:>9.3f}")
        pairs = [
            ("token search, fresh", "default index, fresh process", "sidecar, fresh process"),
            (
                "point lookup, fresh",
                "point lookup, default, fresh process",
                "point lookup, sidecar, fresh process",
            ),
            ("token search, warm", "token search, default, warm", "token search, sidecar, warm"),
            ("point lookup, warm", "point lookup, default, warm", "point lookup, sidecar, warm"),
        ]
        for what, default, other in pairs:
            print(f"default / sidecar ({what}): {medians[default] / medians[other]:.2f}")
        for what, default, other in [
            (
                "token search, fresh",
                "default index, fresh process",
                "index elsewhere, fresh process",
            ),
            ("token search, warm", "token search, default, warm", "token search, elsewhere, warm"),
            ("point lookup, warm", "point lookup, default, warm", "point lookup, elsewhere, warm"),
        ]:
            print(f"elsewhere / default ({what}): {medians[other] / medians[default]:.2f}")
        scan = medians["DuckDB full scan, fresh process"]
        default_fresh = medians["default index, fresh process"]
        print(f"default index / DuckDB full scan (fresh): {default_fresh / scan:.2f}")


if __name__ == "__main__":
    main()
