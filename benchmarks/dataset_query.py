"""Benchmark: bloomskip's dataset index against DuckDB and pyarrow on the same Parquet data.

Generates a log dataset (default 20 million rows, row groups of 64K rows) twice: plain, and
with Parquet Bloom filters on ``user_id`` written by pyarrow (``bloom_filter_options``). Then, in
the same run and on the same machine:

* bloomskip: the index (``user_id`` bloom_filter(0.01), ``message`` tokenbf_v1) prunes
  row groups, DuckDB evaluates the exact predicate on the survivors;
* (a) DuckDB full scan of the plain files;
* (b) DuckDB over the files with Parquet Bloom filters;
* (c) pyarrow.dataset filtering (an Arrow compute expression);
* (d) chdb (in-process ClickHouse) over the same plain files (``file(..., Parquet)``);
* (e) Polars (``scan_parquet`` with the filter pushed into the scan).

Queries: a point lookup of a present and of an absent ``user_id``, a token search on
``message``, and ``user_id IN`` lists of 10 and of 1,000 present values. Every engine must
return the same rows. Times are medians of several runs:

* bloomskip warm: the same ``Dataset`` object answers again (the headline: what a program
  holding a ``Dataset`` sees; its sidecar, decoded indexes and DuckDB connection are reused,
  the sources re-validated by ``stat``);
* bloomskip cold: a new ``Dataset`` for every run (reads and verifies the sidecar's header and
  the payload sections of the indexes the query uses, hashes the source footers, opens a
  DuckDB connection), as one ``bloomskip query`` command does minus the interpreter start;
* the DuckDB peers on one connection with default settings, and DuckDB over the Parquet Bloom
  filter files once more with ``parquet_metadata_cache`` on, the setting bloomskip's own
  connection uses (so that footer caching is not counted as bloomskip's advantage).

Usage: python benchmarks/dataset_query.py [--rows N] [--dir DIR] [--repeat R]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import chdb
import duckdb
import numpy as np
import polars as pl
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from bloomskip.dataset import Dataset
from bloomskip.dataset.demo import RARE_TOKEN, ROW_GROUP_ROWS, write_logs
from bloomskip.dataset.sql.translate import TOKEN_SEPARATOR_CLASS, clickhouse_to_duckdb

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


def holding_floor(files: list[str], where: str, connection, repeat: int):
    """The least any engine that reads whole row groups spends on the query: DuckDB reading
    just the row groups that hold the matching rows (no index, no false positive).

    Returns:
        ``(row groups holding a row, row groups in all, median seconds)``, the seconds None when
        more than 16 row groups or all of them hold a row (then their count is the floor: the
        read is a scan); None when no row matches.
    """
    listing = ", ".join(f"'{f}'" for f in files)
    found = connection.sql(
        f"SELECT filename, file_row_number FROM read_parquet([{listing}], filename=true, "
        f"file_row_number=true) WHERE {where}"
    ).fetchall()
    holding = {}
    ends_of = {}  # each file's row-group ends, read once
    total_groups = sum(pq.ParquetFile(name).metadata.num_row_groups for name in files)
    for name, row in found:
        if name not in ends_of:
            metadata = pq.ParquetFile(name).metadata
            sizes = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
            ends_of[name] = np.cumsum(sizes)
        ends = ends_of[name]
        group = int(np.searchsorted(ends, row, side="right"))
        first = int(ends[group - 1]) if group else 0
        holding[(name, group)] = (first, int(ends[group]) - 1)
    if not holding:
        return None
    if len(holding) > 16 or len(holding) == total_groups:
        return len(holding), total_groups, None
    parts = " UNION ALL ".join(
        f"SELECT * EXCLUDE (file_row_number) FROM read_parquet('{name}', file_row_number=true) "
        f"WHERE file_row_number BETWEEN {first} AND {last} AND {where}"
        for (name, _), (first, last) in holding.items()
    )
    seconds, _ = timed(lambda: connection.sql(parts).to_arrow_table(), repeat)
    return len(holding), total_groups, seconds


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
    if dataset.index.definitions() is not None:
        dataset.drop()
    build_started = time.perf_counter()
    report = dataset.build_index(INDEXES, progress=False)
    build_seconds = time.perf_counter() - build_started
    index_sizes = {item["definition"]: item["bytes"] for item in dataset.status()["indexes"]}

    middle = pq.ParquetFile(plain_files[len(plain_files) // 2])
    sample = middle.read_row_group(middle.num_row_groups // 2, ["user_id"])
    present = int(sample.column(0)[len(sample) // 2].as_py())
    absent = int(np.random.default_rng(7).integers(1, 1 << 62))
    token_pattern = f"(?:^|{TOKEN_SEPARATOR_CLASS}){RARE_TOKEN}(?:$|{TOKEN_SEPARATOR_CLASS})"
    # (label, ClickHouse WHERE, pyarrow filter, Polars filter, target)
    queries = [
        (
            "point lookup, present",
            f"user_id = {present}",
            pc.field("user_id") == present,
            pl.col("user_id") == present,
            "warm >= 20x duck full, >= 2x duck+pqbf",
        ),
        (
            "point lookup, absent",
            f"user_id = {absent}",
            pc.field("user_id") == absent,
            pl.col("user_id") == absent,
            "warm >= 30x duck full",
        ),
        (
            "token search",
            f"hasToken(message, '{RARE_TOKEN}')",
            pc.match_substring_regex(pc.field("message"), pattern=token_pattern),
            pl.col("message").str.contains(token_pattern),
            "warm >= 10x duck full",
        ),
    ]
    # IN lists of present values, spread over the files (one id from every so many rows).
    all_ids = pads.dataset(plain_files, format="parquet").to_table(columns=["user_id"])
    for count in (10, 1_000):
        rng = np.random.default_rng(count)
        picked = all_ids.column(0).take(rng.choice(all_ids.num_rows, count, replace=False))
        values = [int(v) for v in picked.to_numpy()]
        listed = ", ".join(map(str, values))
        queries.append(
            (
                f"IN, {count:,} present values",
                f"user_id IN ({listed})",
                pc.field("user_id").isin(values),
                pl.col("user_id").is_in(values),
                "warm faster than every peer",
            )
        )

    def listing(files: list[str]) -> str:
        return ", ".join(f"'{f}'" for f in files)

    plain_dataset = pads.dataset(plain_files, format="parquet")
    connection = duckdb.connect()
    cached_connection = duckdb.connect()
    cached_connection.execute("SET GLOBAL parquet_metadata_cache = true")
    chdb_session = chdb.session.Session()
    chdb_source = f"file('{plain}/logs-*.parquet', Parquet)"
    rows = []
    for label, where, arrow_filter, polars_filter, target in queries:
        sql_where = clickhouse_to_duckdb(where)
        # A fresh object each run: loads and verifies the sidecar, opens a DuckDB connection.
        cold, _ = timed(lambda w=where: Dataset(plain).query(w), args.repeat)
        ours, ours_rows = timed(lambda w=where: dataset.query(w), args.repeat)
        prune_only, _ = timed(lambda w=where: dataset.explain(w), args.repeat)
        pruned = dataset.explain(where)
        scanned = sum(
            int(s.layout.rows[keep].sum())
            for s, keep in zip(pruned.files, pruned.keep, strict=True)
        )

        def duck(files: list[str], w: str = sql_where, on=connection):
            sql = f"SELECT * FROM read_parquet([{listing(files)}]) WHERE {w}"
            return on.sql(sql).to_arrow_table()

        full, full_rows = timed(lambda: duck(plain_files), args.repeat)
        bloom, bloom_rows = timed(lambda: duck(bloom_files), args.repeat)
        bloom_cached, _ = timed(lambda: duck(bloom_files, on=cached_connection), args.repeat)
        arrow, arrow_rows = timed(
            lambda f=arrow_filter: plain_dataset.to_table(filter=f), args.repeat
        )
        clickhouse, clickhouse_rows = timed(
            lambda w=where: chdb_session.query(
                f"SELECT * FROM {chdb_source} WHERE {w}", "ArrowTable"
            ),
            args.repeat,
        )
        polars, polars_rows = timed(
            lambda f=polars_filter: pl.scan_parquet(plain_files).filter(f).collect(), args.repeat
        )
        floor = holding_floor(plain_files, sql_where, cached_connection, args.repeat)
        counts = {
            ours_rows.num_rows,
            full_rows.num_rows,
            bloom_rows.num_rows,
            arrow_rows.num_rows,
            clickhouse_rows.num_rows,
            polars_rows.height,
        }
        assert len(counts) == 1, f"{label}: engines disagree: {counts}"
        rows.append(
            (label, ours_rows.num_rows, scanned, ours, cold, prune_only, full, bloom, bloom_cached)
            + (arrow, clickhouse, polars, floor, target)
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
    peer_names = ("duck full", "duck+pqbf", "pqbf+mdc", "pyarrow", "chdb", "polars")
    header = (
        f"{'query':<26} {'rows':>5} {'scanned':>10} {'warm':>9} {'cold':>9} {'prune':>8} "
        + " ".join(f"{name:>9}" for name in peer_names)
    )
    print(header)
    for label, count, scanned, ours, cold, prune_only, *peers, _floor, _target in rows:
        times = " ".join(f"{t * 1e3:>7.1f}ms" for t in (ours, cold))
        print(
            f"{label:<26} {count:>5} {scanned:>10,} {times} {prune_only * 1e3:>6.1f}ms "
            + " ".join(f"{t * 1e3:>7.1f}ms" for t in peers)
        )
    print()
    print("speed-up of bloomskip (other engine's time / bloomskip's; > 1: bloomskip is faster)")
    print(f"{'query':<26} {'':>5} " + " ".join(f"{'vs ' + name:>12}" for name in peer_names))
    for label, _count, _scanned, ours, cold, _prune, *peers, floor, target in rows:
        for name, time_taken in (("warm", ours), ("cold", cold)):
            ratios = [peer / time_taken for peer in peers]
            print(
                f"{label if name == 'warm' else '':<26} {name:>5} "
                + " ".join(f"{r:>11.1f}x" for r in ratios)
                + (f"   target: {target}" if name == "warm" else "")
            )
        if floor is not None and floor[2] is None:
            groups, total_groups, _ = floor
            print(
                f"{'':<26} floor: {groups} of the {total_groups} row groups hold a row, so no "
                f"index can skip more than {total_groups - groups} of them"
            )
        elif floor is not None:
            groups, _, seconds = floor
            print(
                f"{'':<26} floor: one DuckDB query reading only the {groups} row group(s) "
                f"holding the rows takes {seconds * 1e3:.1f} ms (its full scan takes "
                f"{peers[0] / seconds:.1f}x that)"
            )
    print(
        "(warm: the same Dataset answers again, the headline; cold: a new Dataset per query, "
        "verifying the sidecar header and the sections it reads;\n prune: index evaluation "
        "only, warm; "
        "pqbf+mdc: DuckDB over the Parquet Bloom filter files with parquet_metadata_cache on)"
    )


if __name__ == "__main__":
    main()
