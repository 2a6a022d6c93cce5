"""``bloomskip advise`` on 5,000,000 rows with 20 queries: total time and candidates per second.

The data: four Parquet files of 1,250,000 rows in row groups of 131,072 rows, with ``user_id``
(distinct random ids), ``msg`` (log lines: a verb, a path with an id, a status word, a request
id) and ``level`` (four values, all in every granule). The query log has 20 WHERE clauses with
counts: point lookups and IN lists on ``user_id``, hasToken and LIKE on ``msg``, equality on
``level``. ``advise`` measures every candidate on all 5M rows.

The peer is one real build of each recommended index (``Dataset.build_index``, on all cores)
in the same run: a candidate costs about what such a build costs, since it is built by the
same code over the same rows.

    python benchmarks/advise.py [--rows N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bloomskip import Dataset
from bloomskip.advise import advise

VERBS = np.array(["GET", "POST", "PUT", "DELETE"])
WORDS = np.array(["ok", "timeout", "refused", "retry", "slow", "cached", "redirect", "denied"])
LEVELS = np.array(["INFO", "WARN", "ERROR", "DEBUG"])


def write_data(directory: Path, rows: int, files: int = 4) -> None:
    """Write the benchmark's Parquet files (deterministic)."""
    rng = np.random.default_rng(18)
    per_file = rows // files
    for number in range(files):
        ids = rng.permutation(rows)[:per_file].astype(np.int64) + number * rows
        request = rng.integers(0, 1 << 40, per_file)
        msg = pc.binary_join_element_wise(
            pa.array(VERBS[rng.integers(0, len(VERBS), per_file)]),
            pc.binary_join_element_wise(
                "/api/item/", pc.cast(pa.array(ids % 100_000), pa.string()), ""
            ),
            pa.array(WORDS[rng.integers(0, len(WORDS), per_file)]),
            pc.binary_join_element_wise("rq", pc.cast(pa.array(request), pa.string()), ""),
            " ",
        )
        table = pa.table(
            {
                "user_id": ids,
                "msg": msg,
                "level": pa.array(LEVELS[rng.integers(0, len(LEVELS), per_file)]),
            }
        )
        pq.write_table(table, directory / f"part-{number}.parquet", row_group_size=131_072)


def write_queries(path: Path, directory: Path) -> None:
    """Twenty WHERE clauses with counts, constants taken from the data."""
    sample = pq.read_table(next(directory.glob("*.parquet")), columns=["user_id", "msg"])
    ids = sample.column("user_id").to_numpy()
    request = sample.column("msg")[777].as_py().split()[-1]
    lines = [f"{100 - 9 * i}\tuser_id = {int(ids[i * 1_000])}" for i in range(8)]
    lines += [
        f"20\tuser_id IN ({int(ids[5])}, {int(ids[50_000])}, {int(ids[90_000])})",
        "15\tuser_id IN (-1, -2)",
        f"40\thasToken(msg, '{request}')",
        "12\thasToken(msg, 'rq1')",
        f"9\tmsg LIKE '%{request[2:10]}%'",
        "30\thasToken(msg, 'timeout') AND hasToken(msg, 'DELETE')",
        "8\tmsg LIKE '%/api/item/4242 %'",
        "6\tstartsWith(msg, 'PUT /api/item/77 ')",
        "5\tmsg = 'nothing like this'",
        "4\thasToken(msg, 'absent')",
        "25\tlevel = 'ERROR'",
        "10\tlevel IN ('WARN', 'ERROR')",
    ]
    path.write_text("# benchmark query log: COUNT<TAB>WHERE\n" + "\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--keep", type=Path, help="write the data here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.keep or Path(scratch) / "logs"
        directory.mkdir(parents=True, exist_ok=True)
        if not list(directory.glob("*.parquet")):
            write_data(directory, args.rows)
        queries = directory.parent / "queries.txt"
        write_queries(queries, directory)
        started = time.perf_counter()
        advice = advise(directory, queries)
        seconds = time.perf_counter() - started
        count = len(advice.candidates)
        print(f"advise: {advice.rows:,} rows, {len(advice.queries)} queries, {count} candidates")
        print(f"total {seconds:.1f} s, {count / seconds:.2f} candidates/s")
        for recommendation in advice.recommendations:
            chosen = (
                f"{recommendation.index} (granule {recommendation.granule})"
                if recommendation.index
                else "no index"
            )
            print(
                f"  {recommendation.column}: {chosen}, "
                f"rows read {recommendation.rows_read_fraction:.2%}, "
                f"{recommendation.index_bytes:,} B"
            )
            server = recommendation.clickhouse_candidate
            if server is not None:
                print(
                    f"    ClickHouse: {recommendation.clickhouse_ddl} (rows read "
                    f"{server.clickhouse_rows_read_fraction:.2%})"
                )
        for recommendation in advice.recommendations:
            if recommendation.index is None:
                continue
            sidecar = Path(scratch) / f"{recommendation.column}.index"
            build_started = time.perf_counter()
            Dataset(directory, sidecar=sidecar).build_index(
                [recommendation.index], granule=recommendation.granule, progress=False
            )
            build = time.perf_counter() - build_started
            measured = recommendation.candidate.seconds
            print(
                f"peer: one real build of {recommendation.index}: {build:.2f} s; measuring it "
                f"(build + {len(recommendation.candidate.queries)} probes, one thread) took "
                f"{measured:.2f} s ({measured / build:.2f}x)"
            )


if __name__ == "__main__":
    main()
