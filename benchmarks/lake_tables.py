"""Benchmark: bloomskip's index over a Delta Lake and an Apache Iceberg table, against each
table's own reader and DuckDB over the snapshot's files.

Generates a log dataset (default 20 million rows, ``bloomskip.dataset.demo``'s generator: a
random 64-bit ``user_id`` that min/max statistics cannot prune, a ``message`` text column with a
rare token, a low-cardinality ``level``) and writes the same rows, in ``--files`` appends with
row groups of 64K rows, twice:

* a Delta table, with ``deltalake.write_deltalake`` (``delta.enableDeletionVectors=true``);
* an Iceberg table, with pyiceberg's ``SqlCatalog`` (a SQLite file and a local warehouse),
  configured the pyiceberg way, by ``PYICEBERG_CATALOG__BENCH__*`` environment variables, so
  that every process opens it as ``iceberg://bench/bench.logs``.

Then a few rows are deleted from each with the table's own writer (``DeltaTable.delete``,
``Table.delete``), so that readers must follow the delete: one of the deleted ids is queried.
Neither writer writes delete files here: deltalake 1.6 rewrites the file (copy-on-write) even
with deletion vectors enabled, and pyiceberg 0.12 falls back to copy-on-write from
merge-on-read; the benchmark prints how many deletion vectors / delete files the snapshot holds
(DuckDB's peer reads the snapshot's data files only, so it would ignore them: it is then marked).
The data is cached in ``--work-dir`` and reused when it holds the same rows.

``bloomskip index build`` indexes each table (``user_id`` bloom_filter(0.01), ``message``
tokenbf_v1(32768, 3, 0)) in its own process. Queries: a point lookup of a present, an absent
and a deleted ``user_id``, and a token search (``hasToken(message, RARE_TOKEN)``). Engines:

* bloomskip: the whole ``bloomskip query TABLE --where ... --format csv`` command;
* own reader: the table's own query path with its statistics pruning: for Delta, deltalake's
  ``QueryBuilder`` (DataFusion, file and row-group pruning by statistics, deletion vectors
  applied); for Iceberg, ``table.scan(row_filter=...).to_arrow()`` (pyiceberg prunes files by
  manifest statistics and row groups by Parquet statistics; a token search has no row filter
  there, so it scans the table's batches and filters each with Arrow's regex kernel);
* duckdb: DuckDB's ``read_parquet`` over the current snapshot's data files, listed by the
  table's library in the same process (``DeltaTable.file_uris()``, ``plan_files()``).

Each cold run is a new ``python`` process (its imports included), the engines interleaved;
warm runs repeat the query on objects held in this process (an open ``DeltaTable`` and its
``QueryBuilder``, a loaded Iceberg table, a DuckDB connection, a ``bloomskip.Dataset``). Every
engine in every mode must return the same ``user_id`` values, or the benchmark stops. Times are
medians of ``--repeat`` runs (warm: after one warm-up run).

Usage: python benchmarks/lake_tables.py [--rows N] [--files F] [--work-dir DIR] [--repeat R]
    [--tables delta,iceberg] [--no-warm]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from bloomskip.dataset.demo import ABSENT_USER_ID, RARE_TOKEN, ROW_GROUP_ROWS, generate_logs
from bloomskip.dataset.sql.translate import TOKEN_SEPARATOR_CLASS, clickhouse_to_duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dataset_query import timed  # noqa: E402 - one timing rule for the benchmarks

INDEXES = ["user_id TYPE bloom_filter(0.01)", "message TYPE tokenbf_v1(32768, 3, 0)"]
CATALOG = "bench"
TABLE_NAME = "bench.logs"
ICEBERG_URI = f"iceberg://{CATALOG}/{TABLE_NAME}"
TOKEN_PATTERN = f"(?:^|{TOKEN_SEPARATOR_CLASS}){RARE_TOKEN}(?:$|{TOKEN_SEPARATOR_CLASS})"
ENGINES = ["bloomskip", "own reader", "duckdb"]
# Rows deleted after writing (rows of the second append, each named by its user_id).
DELETED_IDS = 3

# The peers' programs, each run as `python -c PROGRAM TABLE ARGUMENT`; the result goes to
# standard output as CSV, as `bloomskip query --format csv` writes it.
DELTA_OWN = """
import sys, pyarrow as pa, pyarrow.csv
from deltalake import DeltaTable, QueryBuilder
builder = QueryBuilder().register("logs", DeltaTable(sys.argv[1]))
result = builder.execute(f"SELECT * FROM logs WHERE {sys.argv[2]}")
table = pa.RecordBatchReader.from_stream(result).read_all()
# DataFusion's string_view columns as strings, for the CSV writer.
strings = [f.with_type(pa.string()) if f.type == pa.string_view() else f for f in table.schema]
pyarrow.csv.write_csv(table.cast(pa.schema(strings)), sys.stdout.buffer)
"""
ICEBERG_OWN = """
import sys, pyarrow.csv
from pyiceberg.catalog import load_catalog
catalog, _, name = sys.argv[1].removeprefix("iceberg://").partition("/")
table = load_catalog(catalog).load_table(name)
pyarrow.csv.write_csv(table.scan(row_filter=sys.argv[2]).to_arrow(), sys.stdout.buffer)
"""
# pyiceberg's row filters have no regex: the table's batches, each filtered by Arrow.
ICEBERG_OWN_REGEX = """
import sys, pyarrow as pa, pyarrow.compute as pc, pyarrow.csv
from pyiceberg.catalog import load_catalog
catalog, _, name = sys.argv[1].removeprefix("iceberg://").partition("/")
reader = load_catalog(catalog).load_table(name).scan().to_arrow_batch_reader()
kept = [b.filter(pc.match_substring_regex(b["message"], sys.argv[2])) for b in reader]
pyarrow.csv.write_csv(pa.Table.from_batches(kept, reader.schema), sys.stdout.buffer)
"""
DUCK_DELTA = """
import sys, duckdb, pyarrow.csv
from deltalake import DeltaTable
files = DeltaTable(sys.argv[1]).file_uris()
duckdb.execute("SET enable_progress_bar = false")
sql = f"SELECT * FROM read_parquet({files!r}) WHERE {sys.argv[2]}"
pyarrow.csv.write_csv(duckdb.sql(sql).to_arrow_table(), sys.stdout.buffer)
"""
DUCK_ICEBERG = """
import sys, duckdb, pyarrow.csv
from urllib.parse import unquote, urlparse
from pyiceberg.catalog import load_catalog
catalog, _, name = sys.argv[1].removeprefix("iceberg://").partition("/")
table = load_catalog(catalog).load_table(name)
files = [unquote(urlparse(t.file.file_path).path) for t in table.scan().plan_files()]
duckdb.execute("SET enable_progress_bar = false")
sql = f"SELECT * FROM read_parquet({files!r}) WHERE {sys.argv[2]}"
pyarrow.csv.write_csv(duckdb.sql(sql).to_arrow_table(), sys.stdout.buffer)
"""
EXPLAIN_SUMMARY = ("table ", "read:", "index I/O:", "data I/O:")
# What a process of each engine pays before it reads anything.
IMPORTS = {
    "deltalake": "import deltalake, pyarrow.csv",
    "pyiceberg": "import pyiceberg.catalog.sql, pyarrow.csv",
    "duckdb": "import duckdb, pyarrow.csv",
}


def run(command: list[str]) -> tuple[float, bytes]:
    """Run ``command`` in a new process; its wall time and standard output."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(
            f"{command[:5]} failed (exit {done.returncode}):\n"
            + done.stderr.decode(errors="replace")
        )
    return seconds, done.stdout


def user_ids(result: bytes | pa.Table) -> list[int]:
    """The sorted ``user_id`` column of a CSV result or a table."""
    if isinstance(result, bytes):
        if not result.strip():
            return []
        result = pacsv.read_csv(pa.BufferReader(result))
    return sorted(int(value) for value in result.column("user_id").to_pylist())


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def iceberg_environment(work: Path) -> dict[str, str]:
    """The pyiceberg configuration of the benchmark's catalog, as environment variables."""
    prefix = f"PYICEBERG_CATALOG__{CATALOG.upper()}__"
    return {
        prefix + "TYPE": "sql",
        prefix + "URI": f"sqlite:///{work / 'catalog.db'}",
        prefix + "WAREHOUSE": (work / "warehouse").as_uri(),
    }


def log_chunk(rows: int, first_row: int) -> pa.Table:
    """``rows`` generated log rows in types both table formats store as they are: a UTC
    timestamp in microseconds (Iceberg's precision) and a plain string ``level``."""
    table = generate_logs(rows, 0, first_row)
    table = table.set_column(
        table.schema.get_field_index("ts"), "ts", table["ts"].cast(pa.timestamp("us", "UTC"))
    )
    return table.set_column(
        table.schema.get_field_index("level"), "level", table["level"].cast(pa.string())
    )


def write_tables(work: Path, rows: int, files: int) -> dict:
    """Write the Delta and the Iceberg table (the same rows), delete a few rows from each;
    what was written, with the writers' times."""
    from deltalake import DeltaTable, WriterProperties, write_deltalake
    from pyiceberg.catalog import load_catalog
    from pyiceberg.expressions import In

    for stale in ("delta", "warehouse", "catalog.db", "tables.json"):
        path = work / stale
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    delta_path = work / "delta"
    (work / "warehouse").mkdir(parents=True)
    # deltalake writes uncompressed files under WriterProperties that name no compression (and
    # Snappy under none); pyiceberg's default is ZSTD.
    properties = WriterProperties(max_row_group_size=ROW_GROUP_ROWS, compression="ZSTD")
    catalog = load_catalog(CATALOG)
    catalog.create_namespace(TABLE_NAME.partition(".")[0])
    iceberg = None
    seconds = {"generate": 0.0, "delta write": 0.0, "iceberg write": 0.0}
    per_file = -(-rows // files)
    present = deleted = None
    for number in range(files):
        first = number * per_file
        count = min(per_file, rows - first)
        if count <= 0:
            break
        started = time.perf_counter()
        chunk = log_chunk(count, first)
        seconds["generate"] += time.perf_counter() - started
        ids = chunk["user_id"]
        if number == files // 2:
            present = int(ids[count // 2].as_py())
        if number == 1 or (files == 1 and number == 0):
            deleted = [int(ids[i].as_py()) for i in range(5, 5 + DELETED_IDS)]
        started = time.perf_counter()
        write_deltalake(
            delta_path,
            chunk,
            mode="error" if number == 0 else "append",
            configuration={"delta.enableDeletionVectors": "true"} if number == 0 else None,
            writer_properties=properties,
        )
        seconds["delta write"] += time.perf_counter() - started
        started = time.perf_counter()
        if iceberg is None:
            iceberg = catalog.create_table(
                TABLE_NAME,
                schema=chunk.schema,
                properties={"write.parquet.row-group-limit": str(ROW_GROUP_ROWS)},
            )
        iceberg.append(chunk)
        seconds["iceberg write"] += time.perf_counter() - started
        del chunk, ids
    started = time.perf_counter()
    DeltaTable(delta_path).delete(
        f"user_id IN ({', '.join(map(str, deleted))})", writer_properties=properties
    )
    seconds["delta delete"] = time.perf_counter() - started
    started = time.perf_counter()
    iceberg.delete(In("user_id", deleted))
    seconds["iceberg delete"] = time.perf_counter() - started
    state = {"rows": rows, "files": files, "present": present, "deleted": deleted}
    state["seconds"] = seconds
    (work / "tables.json").write_text(json.dumps(state))
    return state


def delta_state(path: Path) -> tuple[list[str], int, int]:
    """The current snapshot's data files, rows (as its own query counts them) and deletion
    vectors of the Delta table."""
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(path)
    vectors = pa.RecordBatchReader.from_stream(table.deletion_vectors()).read_all()
    counted = QueryBuilder().register("logs", table).execute("SELECT count(*) AS n FROM logs")
    rows = pa.RecordBatchReader.from_stream(counted).read_all()["n"][0].as_py()
    if rows != table.count():
        raise SystemExit(f"{path}: deltalake counts {table.count()} rows, its query {rows}")
    return table.file_uris(), rows, vectors.num_rows


def iceberg_state(table) -> tuple[list[str], int, int]:
    """The current snapshot's data files (local paths), rows (as its own scan counts them,
    deletes applied) and delete files."""
    tasks = list(table.scan().plan_files())
    files = [unquote(urlparse(task.file.file_path).path) for task in tasks]
    return files, table.scan().count(), sum(len(task.delete_files) for task in tasks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--files", type=int, default=8, help="appends per table")
    parser.add_argument("--work-dir", help="where the tables go (default: a temp dir)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--tables", default="delta,iceberg", help="which tables to query (both are written)"
    )
    parser.add_argument(
        "--no-warm", action="store_true", help="only cold runs (each a new process)"
    )
    args = parser.parse_args()
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="bloomskip-lake-bench-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ.update(iceberg_environment(work))

    import duckdb
    from deltalake import DeltaTable, QueryBuilder
    from pyiceberg.catalog import load_catalog

    marker = work / "tables.json"
    state = json.loads(marker.read_text()) if marker.exists() else {}
    if (state.get("rows"), state.get("files")) == (args.rows, args.files):
        print(f"data: reusing the tables in {work}")
    else:
        print(f"data: writing {args.rows:,} rows twice in {work} ...", file=sys.stderr)
        state = write_tables(work, args.rows, args.files)
    delta_path = work / "delta"
    iceberg_table = load_catalog(CATALOG).load_table(TABLE_NAME)
    delta_files, delta_rows, vectors = delta_state(delta_path)
    iceberg_files, iceberg_rows, delete_files = iceberg_state(iceberg_table)
    expected_rows = args.rows - len(state["deleted"])
    if {delta_rows, iceberg_rows} != {expected_rows}:
        raise SystemExit(
            f"the tables hold {delta_rows:,} (Delta) and {iceberg_rows:,} (Iceberg) rows, "
            f"expected {expected_rows:,}"
        )
    seconds = state["seconds"]
    print(
        f"data: {args.rows:,} rows generated in {seconds['generate']:.0f} s, written in "
        f"{args.files} appends, then {len(state['deleted'])} rows deleted"
    )
    iceberg_location = Path(unquote(urlparse(iceberg_table.location()).path))
    tables = {
        "delta": {
            "uri": str(delta_path),
            "files": delta_files,
            "index": delta_path / "_bloomskip",
            "folder": delta_path,
            "writer": "deltalake",
            "deletes": (vectors, "deletion vectors"),
        },
        "iceberg": {
            "uri": ICEBERG_URI,
            "files": iceberg_files,
            "index": iceberg_location / "_bloomskip",
            "folder": iceberg_location / "data",
            "writer": "pyiceberg",
            "deletes": (delete_files, "delete files"),
        },
    }
    chosen = args.tables.split(",")
    if not chosen or set(chosen) - set(tables):
        raise SystemExit(f"--tables: a comma-separated subset of {', '.join(tables)}")
    tables = {name: table for name, table in tables.items() if name in chosen}
    deleted_id = state["deleted"][0]
    for name, table in tables.items():
        size = sum(os.path.getsize(path) for path in table["files"])
        # The rows the delete removed are still in the folder, in files the snapshot dropped:
        # a reader that lists the folder instead of the snapshot returns them.
        live = {os.path.realpath(path) for path in table["files"]}
        removed = [
            str(p) for p in table["folder"].glob("*.parquet") if str(p.resolve()) not in live
        ]
        stale = 0
        if removed:
            sql = f"SELECT count(*) FROM read_parquet({removed!r}) WHERE user_id = {deleted_id}"
            stale = duckdb.execute(sql).fetchall()[0][0]
        count, kind = table["deletes"]
        print(
            f"  {name}: {table['uri']}; {len(table['files'])} data files, {size / 1e6:,.1f} MB; "
            f"{table['writer']} wrote it in {seconds[name + ' write']:.1f} s and deleted in "
            f"{seconds[name + ' delete']:.1f} s; the snapshot has {count} {kind}; "
            f"{len(removed)} files removed from it hold the deleted id {stale} times"
        )
        table["ignores deletes"] = count > 0

    bloomskip = [sys.executable, "-m", "bloomskip"]
    for name, table in tables.items():
        shutil.rmtree(table["index"], ignore_errors=True)
        command = [*bloomskip, "index", "build", table["uri"], "--no-progress"]
        for definition in INDEXES:
            command += ["--index", definition]
        table["build"], _ = run(command)
        if not table["index"].is_dir():
            raise SystemExit(f"{name}: no index in {table['index']} after the build")
        table["index bytes"] = folder_bytes(table["index"])
        print(
            f"  {name}: bloomskip index build (a new process) {table['build']:.2f} s, "
            f"{table['index bytes'] / 1e6:.1f} MB "
            f"({8 * table['index bytes'] / args.rows:.2f} bits/row); "
            f"{table['writer']}'s write took {seconds[name + ' write']:.1f} s"
        )

    token_where = f"hasToken(message, '{RARE_TOKEN}')"
    queries = [
        ("point, present", f"user_id = {state['present']}"),
        # Inside the ids' min/max range, so statistics cannot rule it out.
        ("point, absent", f"user_id = {ABSENT_USER_ID}"),
        ("point, deleted", f"user_id = {deleted_id}"),
        ("token search", token_where),
    ]

    def delta_where(where: str) -> str:
        # DataFusion's SQL: the same rule as the DuckDB translation, in its function names.
        if where == token_where:
            return (
                f"strpos(message, '{RARE_TOKEN}') > 0 AND regexp_like(message, '{TOKEN_PATTERN}')"
            )
        return where

    python = [sys.executable, "-c"]
    commands: dict[tuple[str, str], dict[str, list[str]]] = {}
    for name, table in tables.items():
        uri = table["uri"]
        for label, where in queries:
            if name == "delta":
                own = [*python, DELTA_OWN, uri, delta_where(where)]
            elif where == token_where:
                own = [*python, ICEBERG_OWN_REGEX, uri, TOKEN_PATTERN]
            else:
                own = [*python, ICEBERG_OWN, uri, where]
            duck = DUCK_DELTA if name == "delta" else DUCK_ICEBERG
            commands[name, label] = {
                "bloomskip": [*bloomskip, "query", uri, "--where", where, "--format", "csv"],
                "own reader": own,
                "duckdb": [*python, duck, uri, clickhouse_to_duckdb(where)],
            }

    explained = {}
    for name, table in tables.items():
        for label, where in queries:
            _, text = run([*bloomskip, "query", table["uri"], "--where", where, "--explain"])
            explained[name, label] = text.decode().strip()

    answers: dict[str, list[int]] = {}
    # DuckDB's rows where it reads a snapshot with delete files or vectors it does not apply.
    unchecked: dict[tuple[str, str], int] = {}

    def check(key: tuple[str, str], engine: str, ids: list[int]) -> None:
        if engine.startswith("duckdb") and tables[key[0]]["ignores deletes"]:
            unchecked[key] = len(ids)
            return
        expected = answers.setdefault(key[1], ids)
        if ids != expected:
            raise SystemExit(
                f"{key[0]}, {key[1]}: {engine} returned {len(ids)} rows {ids[:5]}, "
                f"expected {len(expected)} rows {expected[:5]}"
            )

    cold = {key: {engine: [] for engine in ENGINES} for key in commands}
    startup = {library: [] for library in IMPORTS}
    for repeat in range(args.repeat):
        print(f"cold run {repeat + 1}/{args.repeat} ...", file=sys.stderr, flush=True)
        for library, program in IMPORTS.items():
            startup[library].append(run([sys.executable, "-c", program])[0])
        for key, by_engine in commands.items():
            for engine, command in by_engine.items():
                took, output = run(command)
                cold[key][engine].append(took)
                check(key, engine, user_ids(output))

    warm: dict[tuple[str, str], dict[str, float]] = {}
    if not args.no_warm:
        from bloomskip import Dataset

        print("warm runs ...", file=sys.stderr, flush=True)
        builder = QueryBuilder().register("logs", DeltaTable(delta_path))
        connection = duckdb.connect()
        connection.execute("SET enable_progress_bar = false")
        # As bloomskip's own connection does: footer caching is no advantage of bloomskip's.
        connection.execute("SET GLOBAL parquet_metadata_cache = true")
        datasets = {name: Dataset(table["uri"]) for name, table in tables.items()}

        def iceberg_token_scan() -> pa.Table:
            reader = iceberg_table.scan().to_arrow_batch_reader()
            kept = [
                batch.filter(pc.match_substring_regex(batch["message"], TOKEN_PATTERN))
                for batch in reader
            ]
            return pa.Table.from_batches(kept, reader.schema)

        for name, table in tables.items():
            for label, where in queries:
                files, condition = table["files"], clickhouse_to_duckdb(where)
                sql = f"SELECT * FROM read_parquet({files!r}) WHERE {condition}"
                if name == "delta":
                    delta_sql = f"SELECT * FROM logs WHERE {delta_where(where)}"

                    def own(s=delta_sql):
                        return pa.RecordBatchReader.from_stream(builder.execute(s)).read_all()
                elif where == token_where:
                    own = iceberg_token_scan
                else:

                    def own(w=where):
                        return iceberg_table.scan(row_filter=w).to_arrow()

                engines = {
                    "bloomskip": lambda d=datasets[name], w=where: d.query(w),
                    "own reader": own,
                    "duckdb": lambda s=sql: connection.sql(s).to_arrow_table(),
                }
                warm[name, label] = {}
                for engine, function in engines.items():
                    took, result = timed(function, args.repeat)
                    warm[name, label][engine] = took
                    check((name, label), f"{engine} (warm)", user_ids(result))

    print()
    print(
        f"{'table':<8} {'query':<15} {'engine':<10} {'rows':>4} {'cold s':>8} {'vs ours':>8} "
        f"{'warm s':>8} {'vs ours':>8}"
    )
    for key in commands:
        name, label = key
        ours_cold = statistics.median(cold[key]["bloomskip"])
        for engine in ENGINES:
            median = statistics.median(cold[key][engine])
            line = (
                f"{name if label == queries[0][0] and engine == 'bloomskip' else '':<8} "
                f"{label if engine == 'bloomskip' else '':<15} {engine:<10} "
                f"{len(answers[label]):>4} {median:>8.3f} {median / ours_cold:>7.1f}x"
            )
            if key in warm:
                took = warm[key][engine]
                line += f" {took:>8.4f} {took / warm[key]['bloomskip']:>7.1f}x"
            if engine == "duckdb" and key in unchecked:
                line += f"  (ignores the snapshot's deletes: {unchecked[key]} rows, not compared)"
            print(line)
    print(
        "process start, imports only: "
        + ", ".join(f"{lib} {statistics.median(t):.3f} s" for lib, t in startup.items())
    )
    print(
        f"(medians of {args.repeat} runs; cold: each run a new process, imports included, "
        "engines interleaved; warm: the same objects in one process, after a warm-up run; "
        "vs ours: the engine's time / bloomskip's; every engine returned the same user_ids)"
    )
    print(
        "(own reader: Delta, deltalake's QueryBuilder (DataFusion); Iceberg, pyiceberg's "
        "scan(row_filter=...).to_arrow(), and for the token search, which has no row filter "
        "there, its whole scan filtered batch by batch with Arrow's regex kernel; duckdb: "
        "read_parquet over the files of the snapshot, listed by deltalake / pyiceberg; warm, "
        "with parquet_metadata_cache on, as bloomskip's connection has it)"
    )
    print()
    print("bloomskip --explain:")
    for (name, label), text in explained.items():
        print(f"  {name}, {label}:")
        lines = text.splitlines()
        # Its summary lines: the table's own pruning, the index's, and what is read.
        summary = [line for line in lines if line.startswith(EXPLAIN_SUMMARY)] or lines
        for line in summary:
            print(f"    {line}")

    print()
    for name in tables:
        ratios = {"cold": [], "warm": []}
        for label in ("point, present", "point, absent"):
            runs = cold[name, label]
            ratios["cold"].append(
                statistics.median(runs["own reader"]) / statistics.median(runs["bloomskip"])
            )
            if (name, label) in warm:
                times = warm[name, label]
                ratios["warm"].append(times["own reader"] / times["bloomskip"])
        for mode, values in ratios.items():
            if values:
                worst = min(values)
                print(
                    f"expected: a {mode} point lookup on {name} >= 10x faster than the table's "
                    f"own reader: {worst:.1f}x at least, {'met' if worst >= 10 else 'NOT met'}"
                )


if __name__ == "__main__":
    main()
