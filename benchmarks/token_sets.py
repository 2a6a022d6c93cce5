"""Benchmark: ``hasAnyTokens`` / ``hasAllTokens`` through a ``tokenbf_v1`` index, against chdb and
DuckDB.

ClickHouse 26.9 uses no text skip index for these functions (ClickHouse#120583); bloomskip
probes each needle token as it probes ``hasToken``. The data is a log (default 4 million rows,
Parquet row groups of 64K rows) whose messages carry a request id that grows with time, so a
row group holds a narrow range of ids; the queries look for two ids (any-of) and for an id with
a common word (all-of). In the same run:

* bloomskip: ``Dataset.query`` on a warm ``Dataset`` (sidecar of ``tokenbf_v1(131072, 3, 0)``,
  one granule per row group), and the row groups it keeps;
* DuckDB: a full scan of the same file with bloomskip's exact filter (the same SQL bloomskip
  runs on the row groups it keeps);
* chdb over the file (``file(..., Parquet)``): ClickHouse's own functions, no index;
* chdb MergeTree holding the same rows with the same index (8,192-row granules): ClickHouse
  reads every granule for ``hasAnyTokens`` (its ``EXPLAIN indexes = 1`` lists no index), and the
  same test written as ``hasToken(..) OR hasToken(..)``, which the index prunes.

Every engine must return the same rows (compared by ``id``). Times are medians of ``--repeat``
interleaved rounds after one warm-up round; ratios are against bloomskip.

Usage: python benchmarks/token_sets.py [--rows N] [--dir DIR] [--repeat R]
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

import chdb
import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from common import median_interleaved

from bloomskip.dataset import Dataset
from bloomskip.dataset.sql.translate import clickhouse_to_duckdb, column_kinds

INDEX = "msg TYPE tokenbf_v1(131072, 3, 0)"
ROW_GROUP_ROWS = 65_536
VERBS = np.array(["GET", "POST", "PUT", "DELETE"])
OUTCOMES = np.array(["ok", "timeout", "refused", "ok", "ok"])


def write_data(path: Path, rows: int) -> None:
    """``id``, and ``msg`` = ``VERB /api/vN req<hex id> OUTCOME``, the id growing with time."""
    if path.exists() and pq.ParquetFile(path).metadata.num_rows == rows:
        return
    rng = np.random.default_rng(32)
    request = np.cumsum(rng.integers(1, 4, rows)).astype(np.int64)
    parts = [
        pa.array(VERBS[rng.integers(0, len(VERBS), rows)]),
        pc.binary_join_element_wise(
            "/api/v", pc.cast(pa.array(rng.integers(1, 4, rows)), pa.string()), ""
        ),
        pc.binary_join_element_wise("req", pa.array([f"{v:x}" for v in request.tolist()]), ""),
        pa.array(OUTCOMES[rng.integers(0, len(OUTCOMES), rows)]),
    ]
    msg = pc.binary_join_element_wise(*parts, " ")
    table = pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)), "msg": msg})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=ROW_GROUP_ROWS)


def clickhouse_granules(session, table: str, where: str) -> str:
    """``kept/total`` granules of the skip index, or ``all`` when EXPLAIN lists none."""
    text = (
        session.query(
            f"EXPLAIN indexes = 1 SELECT id FROM {table} WHERE {where} "
            "SETTINGS use_query_condition_cache = 0",
            "TSVRaw",
        )
        .bytes()
        .decode()
    )
    match = re.search(r"Name: i\s+Description: [^\n]*\s+Parts: \d+/\d+\s+Granules: (\d+/\d+)", text)
    return match.group(1) if match else "all (no index used)"


def ids(result) -> list[int]:
    return sorted(result.column("id").to_pylist())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--dir", help="where to generate the data (default: a temp dir; kept)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    base = Path(args.dir) if args.dir else Path(tempfile.gettempdir()) / "bloomskip-token-sets"
    path = base / f"logs-{args.rows}.parquet"
    write_data(path, args.rows)
    dataset = Dataset(path)
    if dataset.index.definitions() is None:
        dataset.build_index([INDEX], progress=False)
        dataset = Dataset(path)
    first = pq.read_table(path, columns=["msg"]).column("msg")
    one, other = first[args.rows // 3].as_py().split(), first[2 * args.rows // 3].as_py().split()
    queries = [
        f"hasAnyTokens(msg, ['{one[2]}', '{other[2]}'])",
        f"hasAllTokens(msg, '{one[3]} {one[2]}')",
    ]
    equivalents = [
        f"hasToken(msg, '{one[2]}') OR hasToken(msg, '{other[2]}')",
        f"hasToken(msg, '{one[3]}') AND hasToken(msg, '{one[2]}')",
    ]

    session = chdb.session.Session()
    session.query("CREATE DATABASE IF NOT EXISTS bench")
    session.query("DROP TABLE IF EXISTS bench.logs")
    session.query(
        f"CREATE TABLE bench.logs (id Int64, msg String, INDEX i {INDEX} GRANULARITY 1) "
        "ENGINE = MergeTree ORDER BY id"
    )
    session.query(f"INSERT INTO bench.logs SELECT * FROM file('{path}', Parquet)")
    duck = duckdb.connect()
    kinds = column_kinds(pq.read_schema(path))
    print(f"{args.rows:,} rows, row groups of {ROW_GROUP_ROWS:,}, data in {path}")
    for where, equivalent in zip(queries, equivalents, strict=True):
        exact = clickhouse_to_duckdb(where, kinds)
        explanation = dataset.explain(where)
        kept = len(explanation.row_groups())
        total = pq.ParquetFile(path).metadata.num_row_groups
        engines = {
            "bloomskip": lambda w=where: ids(dataset.query(w, columns=["id"])),
            "duckdb full scan": lambda e=exact: ids(
                duck.sql(f"SELECT id FROM read_parquet('{path}') WHERE {e}").to_arrow_table()
            ),
            "chdb file()": lambda w=where: ids(
                session.query(f"SELECT id FROM file('{path}', Parquet) WHERE {w}", "ArrowTable")
            ),
            "chdb MergeTree": lambda w=where: ids(
                session.query(
                    f"SELECT id FROM bench.logs WHERE {w} SETTINGS use_query_condition_cache = 0",
                    "ArrowTable",
                )
            ),
            "chdb MergeTree, hasToken form": lambda w=equivalent: ids(
                session.query(
                    f"SELECT id FROM bench.logs WHERE {w} SETTINGS use_query_condition_cache = 0",
                    "ArrowTable",
                )
            ),
        }
        times, results = median_interleaved(engines, args.repeat)
        rows = results["bloomskip"]
        for name, result in results.items():
            if result != rows:
                raise SystemExit(f"{name} returned {len(result)} rows, bloomskip {len(rows)}")
        print(f"\nWHERE {where}  ({len(rows)} rows)")
        print(f"  bloomskip keeps {kept}/{total} row groups")
        print(
            f"  ClickHouse MergeTree index: {clickhouse_granules(session, 'bench.logs', where)}"
            f" granules; hasToken form: {clickhouse_granules(session, 'bench.logs', equivalent)}"
        )
        for name, seconds in times.items():
            ratio = seconds / times["bloomskip"]
            print(f"  {name:32s} {seconds * 1000:9.1f} ms  x{ratio:6.2f}")


if __name__ == "__main__":
    main()
