"""Benchmark: ``url LIKE '%…%'`` through an ``ngrambf_v1`` index, against DuckDB and chdb.

Generates a web-log dataset (default 20 million rows, Parquet row groups of 64K rows) with
URLs ``https://HOST/SECTION/item/ID``, ``ID`` 16 random hex digits, in two layouts holding the
same rows:

* ``random``: rows in arrival order. Every trigram of the hex ids occurs in every granule, so
  ``ngrambf_v1(3, 32768, 3, 0)`` cannot skip anything: the index is saturated for the
  predicate, and bloomskip must cost no more than the scan it falls back to.
* ``sorted``: the same rows ordered by URL (a table clustered by its URL, as a ClickHouse
  ``ORDER BY url`` keeps it), indexed with 8,192-row granules. A granule then holds a narrow
  range of ids, and the trigrams that join ``item/`` to the id's first digits (``m/d``,
  ``/d6``) occur in few granules: the index skips most row groups.

The query is ``url LIKE '%/item/PREFIX%'`` for the 10-digit prefix of an id in the data
(matching a row or a few). ``--rows 2000000`` makes a quick run (the sorted layout then keeps
about a row group per URL prefix out of 32, and fixed costs weigh more). In the same run, for
each layout:

* bloomskip warm: the same ``Dataset`` answers again (sidecar, decoded index and DuckDB
  connection reused; the sources re-validated by ``stat``);
* bloomskip cold: a new ``Dataset`` per run (reads and verifies the sidecar header and the
  sections the query uses, opens a DuckDB connection);
* bloomskip prune only: ``Dataset.explain`` on the warm object;
* DuckDB: a full scan of the same files with the same LIKE (it has no backslash, so the
  ClickHouse text is DuckDB SQL of the same meaning), on one connection (default settings);
* DuckDB over the row groups the index keeps (``parquet_source``), the same LIKE: the floor
  of bloomskip's exact step;
* chdb (in-process ClickHouse): ``file('DIR/*.parquet', Parquet)``, one session.

Every engine must return the same rows (compared by the unique ``id`` column). Times are
medians of ``--repeat`` interleaved rounds (each engine once per round) after one warm-up
round. The targets (issue 16, target 5) are printed beside the ratios. The data is kept in
``--dir`` (default: a folder in the temp directory) for the next run.

Usage: python benchmarks/substring_search.py [--rows N] [--dir DIR] [--repeat R] [--files F]
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
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.dataset import Dataset
from bloomskip.dataset.report import explain_text
from bloomskip.dataset.scan.query import parquet_source

INDEX = "url TYPE ngrambf_v1(3, 32768, 3, 0)"
ROW_GROUP_ROWS = 65_536
# Few URL prefixes: ordered by URL, each prefix's ids run through every leading digit once, so
# the index keeps about one row group per prefix.
HOSTS = ["shop.example.com", "api.example.org"]
SECTIONS = ["books", "toys"]
ID_DIGITS = 16
PATTERN_DIGITS = 10
# (layout, granule of the sidecar)
LAYOUTS = [("random", "row-group"), ("sorted", 8192)]


def generate(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows' URL prefix number (host and section), 64-bit ids and other column values,
    vectorized; the sorted layout orders rows by (prefix, id), which is the URL order."""
    rng = np.random.default_rng(seed)
    prefix = rng.integers(0, len(HOSTS) * len(SECTIONS), rows, dtype=np.int64)
    item = rng.integers(0, 1 << 64, rows, dtype=np.uint64)
    status = rng.choice(np.array([200, 200, 200, 200, 301, 404, 500], np.int16), rows)
    return prefix, item, status


def url_prefixes() -> list[str]:
    """Every ``https://HOST/SECTION/item/`` in URL (byte) order, by prefix number."""
    return sorted(f"https://{host}/{section}/item/" for host in HOSTS for section in SECTIONS)


def table_of(prefix: np.ndarray, item: np.ndarray, status: np.ndarray, ids: np.ndarray):
    """The Arrow table of some rows (ids are the rows' numbers in arrival order)."""
    hex_digits = np.frombuffer(b"0123456789abcdef", np.uint8)
    shifts = np.arange(ID_DIGITS - 1, -1, -1, dtype=np.uint64) * np.uint64(4)
    nibbles = ((item[:, None] >> shifts) & np.uint64(15)).astype(np.uint8)
    digits = np.ascontiguousarray(hex_digits[nibbles]).view(f"S{ID_DIGITS}").ravel()
    hexes = pa.array(digits, pa.binary(ID_DIGITS)).cast(pa.string())
    url = pc.binary_join_element_wise(pa.array(url_prefixes()).take(pa.array(prefix)), hexes, "")
    return pa.table(
        {
            "id": pa.array(ids),
            "ts": pa.array(1_700_000_000_000 + ids * 3, pa.timestamp("ms")),
            "status": pa.array(status),
            "bytes": pa.array((item >> np.uint64(50)).astype(np.int64)),
            "url": url,
        }
    )


def write_layout(target: Path, rows: int, files: int, layout: str) -> None:
    """Write ``rows`` rows as ``files`` Parquet files in ``layout`` order (skipped when the
    folder already holds them)."""
    existing = sorted(target.glob("web-*.parquet"))
    if existing and sum(pq.ParquetFile(p).metadata.num_rows for p in existing) == rows:
        return
    for path in existing:
        path.unlink()
    target.mkdir(parents=True, exist_ok=True)
    prefix, item, status = generate(rows)
    ids = np.arange(rows, dtype=np.int64)
    if layout == "sorted":
        # URL order: the prefixes are numbered in byte order (none is a prefix of another),
        # and the ids' fixed-width hex digits sort as their numbers do.
        order = np.lexsort((item, prefix))
        prefix, item, status, ids = prefix[order], item[order], status[order], ids[order]
    per_file = -(-rows // files)
    for number in range(files):
        part = slice(number * per_file, min(rows, (number + 1) * per_file))
        table = table_of(prefix[part], item[part], status[part], ids[part])
        path = target / f"web-{number:03d}.parquet"
        temporary = path.with_name(f".{path.name}.tmp")
        pq.write_table(table, temporary, row_group_size=ROW_GROUP_ROWS)
        temporary.replace(path)


def interleaved(engines: dict, repeat: int) -> tuple[dict, dict]:
    """Median wall time of each engine over ``repeat`` rounds that run every engine once (after
    one untimed round), so that a load changing during the run weighs on all alike; and each
    engine's last result."""
    results = {name: run() for name, run in engines.items()}
    times: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(repeat):
        for name, run in engines.items():
            started = time.perf_counter()
            results[name] = run()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in times.items()}, results


def ids_of(table) -> np.ndarray:
    return np.sort(table.column("id").to_numpy())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--dir", help="where to generate the data (default: a temp dir; kept)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    base = Path(args.dir) if args.dir else Path(tempfile.gettempdir()) / "bloomskip-substring"

    prefix, item, status = generate(args.rows)
    one = slice(args.rows // 3, args.rows // 3 + 1)
    full_url = table_of(prefix[one], item[one], status[one], np.zeros(1, np.int64))["url"][0]
    full_url = full_url.as_py()
    needle = full_url[full_url.index("/item/") : full_url.index("/item/") + 6 + PATTERN_DIGITS]
    where = f"url LIKE '%{needle}%'"
    del prefix, item, status
    print(f"query: {where}  ({args.rows:,} rows, {args.files} files, data in {base})")

    duck = duckdb.connect()
    session = chdb.session.Session()
    results = []
    for layout, granule in LAYOUTS:
        folder = base / f"rows-{args.rows}-prefixes-{len(HOSTS) * len(SECTIONS)}" / layout
        started = time.perf_counter()
        write_layout(folder, args.rows, args.files, layout)
        generated = time.perf_counter() - started
        dataset = Dataset(folder)
        definitions = dataset.index.definitions()
        if (
            definitions is None
            or [parse_index_definition(spec.definition) for spec in definitions.indexes]
            != [parse_index_definition(INDEX)]
            or str(definitions.granule) != str(granule)
        ):
            if definitions is not None:
                dataset.drop()
            build_started = time.perf_counter()
            dataset.build_index([INDEX], granule=granule, progress=False)
            built = f"index built in {time.perf_counter() - build_started:.1f} s"
            dataset = Dataset(folder)
        else:
            built = "index reused"
        print(f"\n[{layout}] data ready in {generated:.0f} s, {built}, granule {granule}")

        explanation = dataset.explain(where)
        kept = sum(int(k.sum()) for k in explanation.keep)
        total = sum(len(k) for k in explanation.keep)
        print("  " + explain_text(explanation, []).replace("\n", "\n  ").rstrip())
        glob = f"{folder}/web-*.parquet"
        surviving = parquet_source(explanation)

        engines = {
            "warm": lambda d=dataset: d.query(where),
            "cold": lambda f=folder: Dataset(f).query(where),
            "prune": lambda d=dataset: d.explain(where),
            "duckdb": lambda g=glob: duck.sql(
                f"SELECT * FROM read_parquet('{g}') WHERE {where}"
            ).to_arrow_table(),
            "floor": lambda s=surviving: duck.sql(
                f"SELECT * FROM {s} WHERE {where}"
            ).to_arrow_table(),
            "chdb": lambda g=glob: session.query(
                f"SELECT * FROM file('{g}', Parquet) WHERE {where}", "ArrowTable"
            ),
        }
        times, answers = interleaved(engines, args.repeat)
        warm, cold, prune, full, floor, clickhouse = (times[name] for name in engines)
        reference = ids_of(answers["duckdb"])
        for name in ("warm", "cold", "floor", "chdb"):
            if not np.array_equal(ids_of(answers[name]), reference):
                raise SystemExit(f"[{layout}] {name} returned other rows than DuckDB's scan")
        results.append(
            (layout, granule, len(reference), kept, total, warm, cold, prune, full, floor)
            + (clickhouse,)
        )

    print()
    print(
        f"{'layout':<8} {'granule':>9} {'rows':>4} {'kept':>9} {'warm':>9} {'cold':>9} "
        f"{'prune':>8} {'duck full':>9} {'duck kept':>9} {'chdb':>9}"
    )
    for layout, granule, count, kept, total, *times in results:
        warm, cold, prune, full, floor, clickhouse = times
        print(
            f"{layout:<8} {granule!s:>9} {count:>4} {f'{kept}/{total}':>9} "
            + " ".join(f"{t * 1e3:>7.1f}ms" for t in (warm, cold))
            + f" {prune * 1e3:>6.2f}ms "
            + " ".join(f"{t * 1e3:>7.1f}ms" for t in (full, floor, clickhouse))
        )
    print()
    print("speed-up of bloomskip (other engine's time / bloomskip's; > 1: bloomskip is faster)")
    for layout, _granule, _count, kept, total, *times in results:
        warm, cold, _prune, full, _floor, clickhouse = times
        if kept == total:
            target, needed = "no index can prune: >= 1.0x the DuckDB scan", full / warm >= 1.0
        else:
            target = ">= 5x DuckDB's scan and > 1x chdb"
            needed = full / warm >= 5.0 and clickhouse / warm > 1.0
        print(
            f"{layout:<8} warm: {full / warm:5.2f}x DuckDB, {clickhouse / warm:5.2f}x chdb; "
            f"cold: {full / cold:5.2f}x DuckDB, {clickhouse / cold:5.2f}x chdb  "
            f"(target, warm: {target}: {'met' if needed else 'NOT met'})"
        )
    print(
        "(warm: the same Dataset answers again; cold: a new Dataset per query; prune: "
        "Dataset.explain only, warm; duck kept: DuckDB over the row groups bloomskip keeps, "
        "the floor of its exact filter)"
    )


if __name__ == "__main__":
    main()
