"""Benchmark: ``bloomskip query`` from a cold start, against fresh-process DuckDB and chdb.

Every measurement is a new process, as a user running one command gets it: the interpreter
starts, imports what it needs, answers and exits. For each size (``--rows``) a log dataset is
generated twice (plain, and with Parquet Bloom filters on ``user_id`` written by pyarrow) and
kept in ``--dir`` between runs; the plain copy gets a bloomskip index (``user_id``
bloom_filter(0.01)). Then, interleaved run by run and reported as medians:

* ``bloomskip query DIR --where "user_id = X"`` (present, and absent within the value range);
* DuckDB in a fresh ``python -c``: a full scan of the plain files, and a scan of the files with
  Parquet Bloom filters (which DuckDB uses to skip row groups);
* chdb (in-process ClickHouse) in a fresh ``python -c``: ``file('DIR/*.parquet', Parquet)``;
* a 100,000-value ``user_id IN (...)`` given with ``--where-file``, against DuckDB given the same
  list (a few values present), full scan.

Every engine must return the same number of rows. The script also prints the time of
``bloomskip --help`` and what a cold ``query`` imports (``python -X importtime``), with pandas
called out: nothing on a query's path should load it. And it prints the floor under any cold
query that reads Parquet with pyarrow and filters with DuckDB: a fresh interpreter that only
imports ``pyarrow.parquet`` and ``duckdb`` and opens one DuckDB connection, against the time the
2x target allows, and what share of DuckDB's own full-scan process its import and connection
take (above half, no program that answers with DuckDB can be twice as fast).

The processes keep compiled modules as an installed package does: with
``PYTHONDONTWRITEBYTECODE`` set (some shells and CI set it) an editable install compiles every
bloomskip module from source in every process, some 0.3-0.7 s. The children run without it,
with their byte code under ``--dir`` (``PYTHONPYCACHEPREFIX``), after one untimed run of each
command (which also brings the files into the page cache, for every engine alike).

Usage: python benchmarks/cold_cli.py [--rows N [N ...]] [--dir DIR] [--runs R]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from bloomskip.dataset import Dataset
from bloomskip.dataset.demo import ROW_GROUP_ROWS, write_logs

INDEX = "user_id TYPE bloom_filter(0.01)"
FILES = 8
# The imports a cold query is measured for (cumulative time of each, as -X importtime gives it).
WATCHED = (
    "numpy",
    "pyarrow",
    "pyarrow.parquet",
    "pyarrow.compute",
    "pyarrow.dataset",
    "pandas",
    "sqlglot",
    "duckdb",
    "bloomskip",
)

# Each peer prints the number of rows it returned; the rows are fetched as Arrow, as
# bloomskip's are before it prints them.
DUCKDB = """
import sys, duckdb
sql = f"SELECT * FROM read_parquet('{sys.argv[1]}') WHERE {open(sys.argv[2]).read()}"
print(duckdb.sql(sql).to_arrow_table().num_rows)
"""
# What any cold query that reads Parquet with pyarrow and filters with DuckDB pays first.
FLOOR = "import duckdb, pyarrow.parquet; duckdb.connect()"
# What DuckDB's own fresh process pays before it reads a byte: the part of the peer that no
# program answering with DuckDB can halve.
DUCKDB_FLOOR = "import duckdb; duckdb.connect()"
CHDB = """
import sys, chdb
sql = f"SELECT * FROM file('{sys.argv[1]}', Parquet) WHERE {open(sys.argv[2]).read()}"
print(chdb.query(sql, "ArrowTable").num_rows)
"""


def prepare(base: Path, rows: int) -> tuple[Path, Path]:
    """The plain and the Parquet-Bloom-filter copies of ``rows`` rows, generated once."""
    plain, with_bloom = base / f"rows-{rows}" / "plain", base / f"rows-{rows}" / "parquet-bloom"
    for target, options in [
        (plain, {}),
        (with_bloom, {"bloom_filter_options": {"user_id": {"ndv": ROW_GROUP_ROWS, "fpp": 0.01}}}),
    ]:
        existing = sorted(target.glob("logs-*.parquet"))
        if sum(pq.ParquetFile(p).metadata.num_rows for p in existing) != rows:
            for path in existing:
                path.unlink()
            write_logs(target, rows, files=FILES, **options)
    dataset = Dataset(plain)
    definitions = dataset.index.definitions()
    if definitions is None or INDEX not in [spec.definition for spec in definitions.indexes]:
        dataset.build_index([INDEX], progress=False)
    return plain, with_bloom


def values(plain: Path, count: int, present: int) -> tuple[int, int, list[int]]:
    """A present ``user_id``, an absent one within the range, and ``count`` values for an
    ``IN`` list of which ``present`` occur in the data."""
    files = sorted(plain.glob("logs-*.parquet"))
    middle = pq.ParquetFile(files[len(files) // 2])
    sample = middle.read_row_group(middle.num_row_groups // 2, ["user_id"]).column(0)
    sample = sample.to_numpy()
    rng = np.random.default_rng(7)
    absent = int(rng.integers(1, 1 << 62))
    listed = rng.integers(1, 1 << 62, count, dtype=np.int64)
    listed[:present] = sample[:present]
    return int(sample[len(sample) // 2]), absent, listed.tolist()


# The children's environment (see the module docstring); set by main.
ENVIRONMENT: dict[str, str] = {}


def run(command: list[str]) -> tuple[float, str]:
    """Wall time of one fresh process and its standard output."""
    started = time.perf_counter()
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, env=ENVIRONMENT or None
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} ... failed:\n{done.stderr[-2000:]}")
    return elapsed, done.stdout


def row_count(engine: str, output: str) -> int:
    if engine == "bloomskip":  # JSON lines: one row a line
        return sum(1 for line in output.splitlines() if line.strip())
    return int(output.strip().splitlines()[-1])


def compare(cases: dict[str, list[str]], runs: int) -> dict[str, float]:
    """Median wall time of each command over ``runs`` interleaved rounds; the row counts of
    every command must agree."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    counts: dict[str, int] = {}
    for command in cases.values():
        run(command)  # untimed: byte code written, files in the page cache
    for _ in range(runs):
        for name, command in cases.items():
            elapsed, output = run(command)
            times[name].append(elapsed)
            counts[name] = row_count(name.split()[0], output)
    if len(set(counts.values())) != 1:
        raise SystemExit(f"the engines disagree on the rows: {counts}")
    return {name: statistics.median(values) for name, values in times.items()}


def import_profile(command: list[str]) -> tuple[float, dict[str, float]]:
    """Total import time of ``command`` run under ``-X importtime`` and the heaviest packages."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *command],
        capture_output=True,
        text=True,
        env=ENVIRONMENT or None,
    )
    total, heavy = 0.0, {}
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if match is None:
            continue
        cumulative, depth, name = int(match.group(1)) / 1e6, len(match.group(2)), match.group(3)
        if depth == 1:  # a top-level import: its time includes everything it imported
            total += cumulative
        if name in WATCHED:
            heavy[name] = max(heavy.get(name, 0.0), cumulative)
    return total, heavy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[8_000_000, 20_000_000])
    parser.add_argument("--dir", type=Path, default=None, help="data folder (kept for reruns)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--in-values", type=int, default=100_000)
    args = parser.parse_args()
    base = args.dir or Path(tempfile.gettempdir()) / "bloomskip-cold-cli"
    ENVIRONMENT.update(os.environ)
    ENVIRONMENT.pop("PYTHONDONTWRITEBYTECODE", None)
    ENVIRONMENT["PYTHONPYCACHEPREFIX"] = str(base / "pycache")
    python = sys.executable
    bloomskip = [python, "-m", "bloomskip"]

    help_times = [run([*bloomskip, "--help"])[0] for _ in range(args.runs + 1)][1:]
    help_imports, _ = import_profile(["-m", "bloomskip", "--help"])  # compiled by the runs
    print(
        f"bloomskip --help: {statistics.median(help_times) * 1e3:.0f} ms "
        f"(imports {help_imports * 1e3:.0f} ms; target < 150 ms)"
    )

    floor_commands = {
        "interpreter": [python, "-c", "pass"],
        "imports": [python, "-c", FLOOR],
        "duckdb": [python, "-c", DUCKDB_FLOOR],
    }
    floor_times: dict[str, list[float]] = {name: [] for name in floor_commands}
    for _ in range(args.runs + 1):
        for name, command in floor_commands.items():
            floor_times[name].append(run(command)[0])
    floor = {name: statistics.median(times[1:]) for name, times in floor_times.items()}
    print(
        f"floor: a fresh interpreter {floor['interpreter'] * 1e3:.0f} ms; importing "
        f"pyarrow.parquet and duckdb and connecting {floor['imports'] * 1e3:.0f} ms; "
        f"importing duckdb alone and connecting {floor['duckdb'] * 1e3:.0f} ms"
    )

    for rows in args.rows:
        started = time.perf_counter()
        plain, with_bloom = prepare(base, rows)
        present, absent, listed = values(plain, args.in_values, present=20)
        print(f"\n{rows:,} rows in {plain.parent} (ready in {time.perf_counter() - started:.0f} s)")
        plain_glob, bloom_glob = f"{plain}/logs-*.parquet", f"{with_bloom}/logs-*.parquet"
        work = Path(tempfile.mkdtemp(prefix="bloomskip-cold-"))

        def where_file(name: str, text: str, folder: Path = work) -> str:
            path = folder / name
            path.write_text(text)
            return str(path)

        first = True
        print(f"{'query':<26} {'bloomskip':>10} {'duck full':>10} {'duck+pqbf':>10} "
              f"{'chdb':>10}   speed-up vs full / pqbf / chdb")  # fmt: skip
        for label, where in [
            ("point lookup, present", f"user_id = {present}"),
            ("point lookup, absent", f"user_id = {absent}"),
        ]:
            text = where_file(f"{label.split()[-1]}.sql", where)
            cases = {
                "bloomskip": [*bloomskip, "query", str(plain), "--where", where]
                + ["--format", "json"],
                "duckdb full": [python, "-c", DUCKDB, plain_glob, text],
                "duckdb pqbf": [python, "-c", DUCKDB, bloom_glob, text],
                "chdb": [python, "-c", CHDB, plain_glob, text],
            }
            medians = compare(cases, args.runs)
            if first:  # after the runs: byte code written, nothing is compiled while timed
                imports, heavy = import_profile(cases["bloomskip"][1:])
                first = False
            ours = medians["bloomskip"]
            print(
                f"{label:<26} "
                + " ".join(f"{medians[name] * 1e3:>8.0f}ms" for name in cases)
                + "   "
                + " / ".join(f"{medians[name] / ours:.2f}x" for name in list(cases)[1:])
            )
            print(
                f"{'':<26} target: <= {medians['duckdb full'] / 2 * 1e3:.0f} ms (2x DuckDB's "
                f"full scan) and <= {medians['duckdb pqbf'] * 1e3:.0f} ms (DuckDB over Parquet "
                f"Bloom filters); the import floor is {floor['imports'] * 1e3:.0f} ms"
            )
            print(
                f"{'':<26} DuckDB's own import and connection are "
                f"{floor['duckdb'] / medians['duckdb full']:.0%} of its full-scan process"
            )
        in_text = where_file("in.sql", "user_id IN (" + ", ".join(map(str, listed)) + ")")
        medians = compare(
            {
                "bloomskip": [*bloomskip, "query", str(plain), "--where-file", in_text]
                + ["--format", "json"],
                "duckdb full": [python, "-c", DUCKDB, plain_glob, in_text],
            },
            args.runs,
        )
        size = Path(in_text).stat().st_size / 1e3
        in_label = f"IN, {len(listed):,} values ({size:.0f} KB)"
        print(
            f"{in_label:<26} "
            f"{medians['bloomskip'] * 1e3:>8.0f}ms {medians['duckdb full'] * 1e3:>8.0f}ms"
            f"{'':>24}   {medians['duckdb full'] / medians['bloomskip']:.2f}x "
            "(target: bloomskip within 2x of DuckDB, >= 0.5x)"
        )
        listed_heavy = ", ".join(
            f"{name} {seconds * 1e3:.0f} ms"
            for name, seconds in sorted(heavy.items(), key=lambda item: -item[1])
            if seconds >= 0.005
        )
        print(f"cold query imports: {imports * 1e3:.0f} ms; heaviest: {listed_heavy}")
        print(f"pandas imported by a cold query: {'yes' if 'pandas' in heavy else 'no'}")


if __name__ == "__main__":
    main()
