"""Benchmark: cold queries on object storage, bloomskip's segmented index against DuckDB.

Starts moto's standalone S3 server on 127.0.0.1 (the server the object-storage tests use), with
a small WSGI middleware that counts, on the server side, every request it answers and every
byte it sends. Generates a log dataset (default 20 million rows in 8 files, row groups of 64K
rows) and uploads it twice: plain to ``s3://<bucket>/plain/``, and with Parquet Bloom filters
on ``user_id`` (written by pyarrow, ``bloom_filter_options``) to ``s3://<bucket>/bloom/``. Then
``bloomskip index build`` indexes the plain copy (``user_id`` bloom_filter(0.01), ``message``
tokenbf_v1), in its own process.

Queries: a point lookup of a present and of an absent ``user_id``, and a token search
(``hasToken(message, RARE_TOKEN)``). Every run of every engine is a new process (a cold
query: nothing cached but the operating system's), the engines interleaved in the same run:

* bloomskip: the whole ``bloomskip query s3://<bucket>/plain --where ... --format csv``
  command; its ``--explain`` gives the index's own requests and bytes;
* duck+arrow: DuckDB over a ``pyarrow.dataset`` of the same objects through the same pyarrow
  S3 filesystem (a full scan: DuckDB pushes the filter down, min/max statistics cannot
  exclude a random id);
* duck+pqbf: DuckDB's own Parquet reader over the Bloom-filter copy, reading through an fsspec
  wrapper of the same pyarrow S3 filesystem (DuckDB has no ``httpfs`` here), so DuckDB's use
  of Parquet Bloom filters is what is measured.

Every engine must return the same rows. Times are medians of ``--repeat`` runs; requests and
bytes are counted by the server for each whole run. The build's requests, and each bloomskip
query's, are also printed by method (``get``, ``head``, ``list``, ``put``) and per file built
or read: the listing gives every object's size and ETag, so neither should send a ``head`` per
file. Peers need ``fsspec`` besides the project's test extra. DuckDB's bridge to Python
filesystems fails now and then; such a duck+pqbf run is run again, and the count of those is
printed.

moto serves a ranged GET by copying the whole object out of its store before slicing it, so on
this server a request costs time in proportion to the object's size; the ``server s`` column
(time spent inside the server, summed over its threads) shows how much of a run that is. Real
object stores do not work that way: read the request counts and bytes beside the times.

Usage: python benchmarks/object_store.py [--rows N] [--files F] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from common import S3_ENV

from bloomskip.dataset.demo import ABSENT_USER_ID, RARE_TOKEN, ROW_GROUP_ROWS, write_logs
from bloomskip.dataset.sql.translate import clickhouse_to_duckdb

INDEXES = ["user_id TYPE bloom_filter(0.01)", "message TYPE tokenbf_v1(8192, 3, 0)"]
BUCKET = "bloomskip-bench"

# The peers' programs, each run as `python -c PROGRAM URI WHERE`; the result goes to standard
# output as CSV, as `bloomskip query --format csv` writes it (so no DuckDB progress bar there).
DUCK_OVER_ARROW = """
import sys, duckdb, pyarrow.csv, pyarrow.dataset as pads, pyarrow.fs as pafs
filesystem, path = pafs.FileSystem.from_uri(sys.argv[1])
data = pads.dataset(path, filesystem=filesystem, format="parquet")
duckdb.execute("SET enable_progress_bar = false")
table = duckdb.sql(f"SELECT * FROM data WHERE {sys.argv[2]}").to_arrow_table()
pyarrow.csv.write_csv(table, sys.stdout.buffer)
"""
DUCK_OVER_FSSPEC = """
import sys, duckdb, pyarrow.csv, pyarrow.fs as pafs
from fsspec.implementations.arrow import ArrowFSWrapper
filesystem, _ = pafs.FileSystem.from_uri(sys.argv[1])
connection = duckdb.connect()
connection.execute("SET enable_progress_bar = false")
connection.register_filesystem(ArrowFSWrapper(filesystem))
sql = f"SELECT * FROM read_parquet('{sys.argv[1]}/*.parquet') WHERE {sys.argv[2]}"
pyarrow.csv.write_csv(connection.sql(sql).to_arrow_table(), sys.stdout.buffer)
"""
BLOOM_PROBE = """
import sys, duckdb, pyarrow.fs as pafs
from fsspec.implementations.arrow import ArrowFSWrapper
filesystem, _ = pafs.FileSystem.from_uri(sys.argv[1])
connection = duckdb.connect()
connection.execute("SET enable_progress_bar = false")
connection.register_filesystem(ArrowFSWrapper(filesystem))
sql = "SELECT count(*) FILTER (bloom_filter_excludes), count(*) FROM parquet_bloom_probe(?, ?, ?)"
print(*connection.execute(sql, [sys.argv[1], "user_id", int(sys.argv[2])]).fetchone())
"""
ENGINES = ["bloomskip", "duck+arrow", "duck+pqbf"]
# What every engine's process pays before its first request.
IMPORTS_ONLY = "import duckdb, pyarrow.csv, pyarrow.dataset, pyarrow.fs"


class CountingApp:
    """WSGI middleware counting what the S3 server answers: requests, bytes, time inside.

    Args:
        app: The server's WSGI application.
    """

    def __init__(self, app) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.requests = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.seconds = 0.0
        self.kinds: Counter[str] = Counter()

    def __call__(self, environ, start_response):
        started = time.perf_counter()
        body = self.app(environ, start_response)
        elapsed = time.perf_counter() - started
        with self.lock:
            self.requests += 1
            self.seconds += elapsed
            self.bytes_received += int(environ.get("CONTENT_LENGTH") or 0)
            self.kinds[_kind(environ)] += 1
        return self._count_body(body)

    def _count_body(self, body):
        try:
            for chunk in body:
                with self.lock:
                    self.bytes_sent += len(chunk)
                yield chunk
        finally:
            if hasattr(body, "close"):
                body.close()

    def snapshot(self) -> dict:
        """The counters now (subtract two snapshots for what happened between them)."""
        with self.lock:
            return {
                "requests": self.requests,
                "sent": self.bytes_sent,
                "received": self.bytes_received,
                "seconds": self.seconds,
                "kinds": Counter(self.kinds),
            }


def _kind(environ) -> str:
    """``list``, ``get``, ``head``, ``put``, … by the S3 path-style request line."""
    method = environ["REQUEST_METHOD"].lower()
    key = environ.get("PATH_INFO", "").strip("/").partition("/")[2]
    if method == "get" and not key:
        return "list"
    return method


def delta(after: dict, before: dict) -> dict:
    """What the server did between two snapshots."""
    out = {name: after[name] - before[name] for name in ("requests", "sent", "received")}
    out["seconds"] = after["seconds"] - before["seconds"]
    out["kinds"] = after["kinds"] - before["kinds"]
    return out


def start_server() -> tuple[CountingApp, str]:
    """moto's S3 server (the app and request handler ``ThreadedMotoServer`` serves) on
    127.0.0.1, wrapped in a :class:`CountingApp`; its endpoint is set in the environment."""
    from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    counter = CountingApp(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, counter, True, request_handler=MotoRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    endpoint = f"http://{host}:{port}"
    os.environ.update(S3_ENV, AWS_ENDPOINT_URL=endpoint)
    return counter, endpoint


# DuckDB's bridge to a Python (fsspec) filesystem fails now and then, more often the more it
# reads: "Failed to read N bytes from Python file at offset O: only M bytes returned", or
# "don't know what type". Such a run of that engine is run again (the failures are counted and
# printed); any other failure stops the benchmark.
FLAKY_ENGINE = "duck+pqbf"
DUCKDB_ERROR = re.compile(rb"_duckdb\.\w*(Error|Exception)")


class RunFailed(Exception):
    """A benchmark process exited with an error."""

    def __init__(self, command: list[str], stderr: bytes) -> None:
        super().__init__(f"{command[:4]} failed:\n{stderr.decode(errors='replace')}")
        self.stderr = stderr


def run(command: list[str]) -> tuple[float, bytes]:
    """Run ``command`` in a new process; its wall time and standard output."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RunFailed(command, done.stderr)
    return seconds, done.stdout


def measured(command: list[str], counter: CountingApp, flaky: bool) -> tuple:
    """``(seconds, server delta, standard output, runs retried)``; a ``flaky`` engine's
    DuckDB errors are retried."""
    for attempt in range(5):
        before = counter.snapshot()
        try:
            seconds, output = run(command)
        except RunFailed as failure:
            if not (flaky and DUCKDB_ERROR.search(failure.stderr)):
                raise
            continue
        return seconds, delta(counter.snapshot(), before), output, attempt
    raise RunFailed(command, b"five DuckDB errors in a row")


def user_ids(csv_output: bytes) -> list[int]:
    """The sorted ``user_id`` column of a CSV result."""
    if not csv_output.strip():
        return []
    table = pacsv.read_csv(pa.BufferReader(csv_output))
    return sorted(int(value) for value in table.column("user_id").to_pylist())


def by_method(kinds: Counter[str]) -> str:
    """``3 get, 0 head, 1 list``: every method counted, ``head`` even when none was sent."""
    counts = Counter({"head": 0, **kinds})
    return ", ".join(f"{count} {kind}" for kind, count in sorted(counts.items()))


def per_file(kinds: Counter[str], files: int) -> str:
    """HEAD and GET requests per file, or ``-`` when no file was read."""
    if not files:
        return "-"
    return f"{kinds['head'] / files:.2f} head, {kinds['get'] / files:.2f} get"


def megabytes(count: float) -> str:
    return f"{count / 1e6:,.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    counter, endpoint = start_server()
    import boto3

    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
    s3, _ = pafs.FileSystem.from_uri(f"s3://{BUCKET}")
    plain_uri, bloom_uri = f"s3://{BUCKET}/plain", f"s3://{BUCKET}/bloom"

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bloomskip-bench-") as scratch:
        for name, options in [
            ("plain", {}),
            ("bloom", {"bloom_filter_options": {"user_id": {"ndv": ROW_GROUP_ROWS, "fpp": 0.01}}}),
        ]:
            written = write_logs(Path(scratch, name), args.rows, files=args.files, **options)
            pafs.copy_files(
                str(Path(scratch, name)), f"{BUCKET}/{name}", pafs.LocalFileSystem(), s3
            )
            if name == "plain":
                middle = pq.ParquetFile(written[len(written) // 2])
                sample = middle.read_row_group(middle.num_row_groups // 2, ["user_id"])
                present = int(sample.column(0)[len(sample) // 2].as_py())
                row_groups = sum(pq.ParquetFile(path).num_row_groups for path in written)
            for path in written:
                path.unlink()  # moto holds its own copy
    sizes = {
        name: sum(info.size for info in s3.get_file_info(pafs.FileSelector(f"{BUCKET}/{name}")))
        for name in ("plain", "bloom")
    }
    print(
        f"data: {args.rows:,} rows, {len(written)} files, {row_groups} row groups per copy; "
        f"plain {megabytes(sizes['plain'])} MB, with Parquet Bloom filters "
        f"{megabytes(sizes['bloom'])} MB; generated and uploaded in "
        f"{time.perf_counter() - started:.0f} s; server {endpoint}"
    )

    # DuckDB must read the Bloom filters pyarrow wrote, through the fsspec wrapper: an absent
    # id is excluded from the row groups of a file but for the filters' false positives.
    probe = [
        sys.executable,
        "-c",
        BLOOM_PROBE,
        f"{bloom_uri}/logs-000.parquet",
        str(ABSENT_USER_ID),
    ]
    excluded, probed = map(int, run(probe)[1].split())
    print(
        f"DuckDB's Parquet Bloom filter probe of an absent id: {excluded}/{probed} row groups of "
        "a file excluded"
    )
    if excluded < probed / 2:
        raise SystemExit("DuckDB does not use the Parquet Bloom filters of the bloom copy")

    bloomskip = [sys.executable, "-m", "bloomskip"]
    build_command = [*bloomskip, "index", "build", plain_uri, "--no-progress"]
    for definition in INDEXES:
        build_command += ["--index", definition]
    before = counter.snapshot()
    build_seconds, _ = run(build_command)
    build = delta(counter.snapshot(), before)
    _, status_json = run([*bloomskip, "index", "status", plain_uri, "--json"])
    status = json.loads(status_json)
    print(
        f"index build (a new process): {build_seconds:.2f} s, {build['requests']} requests, "
        f"{megabytes(build['sent'])} MB read, {megabytes(build['received'])} MB written; "
        f"{len(status['segments'])} segments, {megabytes(status['segment_bytes'])} MB "
        f"({8 * status['segment_bytes'] / args.rows:.2f} bits/row)"
    )
    print(
        f"  build requests by method: {by_method(build['kinds'])}; per file: "
        f"{per_file(build['kinds'], len(written))}"
    )
    for index in status["indexes"]:
        print(f"  {index['definition']}: {megabytes(index['bytes'])} MB")

    queries = [
        ("point, present", f"user_id = {present}"),
        # Inside the ids' min/max range, so Parquet statistics cannot rule it out.
        ("point, absent", f"user_id = {ABSENT_USER_ID}"),
        ("token search", f"hasToken(message, '{RARE_TOKEN}')"),
    ]
    commands = {}
    explained = {}
    kept_files: dict[str, int] = {}
    for label, where in queries:
        duck_where = clickhouse_to_duckdb(where)
        commands[label] = {
            "bloomskip": [*bloomskip, "query", plain_uri, "--where", where, "--format", "csv"],
            "duck+arrow": [sys.executable, "-c", DUCK_OVER_ARROW, plain_uri, duck_where],
            "duck+pqbf": [sys.executable, "-c", DUCK_OVER_FSSPEC, bloom_uri, duck_where],
        }
        _, text = run([*bloomskip, "query", plain_uri, "--where", where, "--explain"])
        text = text.decode()
        io = re.search(r"index I/O: (\d+) requests, (.+) read", text)
        read = re.search(r"read: (\d+/\d+) row groups", text)
        files_read = re.search(r"in (\d+) files to read", text)
        if io is None or read is None:
            raise SystemExit(f"unexpected --explain output:\n{text}")
        explained[label] = (int(io.group(1)), io.group(2), read.group(1))
        kept_files[label] = int(files_read.group(1)) if files_read else 0

    # runs[label][engine]: one (seconds, server delta) per repeat.
    runs = {label: {engine: [] for engine in ENGINES} for label, _ in queries}
    answers: dict[str, list[int]] = {}
    startup = []
    retries: Counter[str] = Counter()
    for repeat in range(args.repeat):
        print(f"run {repeat + 1}/{args.repeat} ...", file=sys.stderr, flush=True)
        startup.append(run([sys.executable, "-c", IMPORTS_ONLY])[0])
        for label, _where in queries:
            for engine in ENGINES:
                seconds, server, output, retried = measured(
                    commands[label][engine], counter, engine == FLAKY_ENGINE
                )
                runs[label][engine].append((seconds, server))
                retries[engine] += retried
                ids = user_ids(output)
                expected = answers.setdefault(label, ids)
                assert ids == expected, f"{label}: {engine} returned {ids}, expected {expected}"

    print()
    print(
        f"{'query':<15} {'engine':<10} {'rows':>4} {'median s':>9} {'vs ours':>8} "
        f"{'requests':>8} {'MB sent':>9} {'server s':>9}  requests by kind"
    )
    for label, _where in queries:
        ours = statistics.median(seconds for seconds, _ in runs[label]["bloomskip"])
        for engine in ENGINES:
            samples = runs[label][engine]
            median = statistics.median(seconds for seconds, _ in samples)
            requests = statistics.median(server["requests"] for _, server in samples)
            sent = statistics.median(server["sent"] for _, server in samples)
            server_seconds = statistics.median(server["seconds"] for _, server in samples)
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(samples[-1][1]["kinds"].items()))
            print(
                f"{label if engine == 'bloomskip' else '':<15} {engine:<10} "
                f"{len(answers[label]):>4} {median:>9.3f} {median / ours:>7.1f}x "
                f"{requests:>8.0f} {megabytes(sent):>9} {server_seconds:>9.2f}  {kinds}"
            )
    print(
        f"a new process importing duckdb and pyarrow, no query: {statistics.median(startup):.3f} s"
    )
    print(
        f"(medians of {args.repeat} runs, each a new process, engines interleaved; vs ours: "
        "the engine's time / bloomskip's; requests, MB sent and server s counted by the S3 "
        "server for the whole run; server s sums the time its threads spent inside moto)"
    )
    if retries.total():
        print(
            "runs that failed in DuckDB's Python filesystem bridge and were run again: "
            + ", ".join(f"{engine} {count}" for engine, count in retries.items() if count)
        )
    print()
    print("bloomskip requests per query by method (server-side, the last run), per file read:")
    for label, _where in queries:
        kinds = runs[label]["bloomskip"][-1][1]["kinds"]
        print(
            f"  {label:<15} {kept_files[label]:>3} files read: {by_method(kinds)}; per file "
            f"read: {per_file(kinds, kept_files[label])}"
        )
    print()
    print("bloomskip --explain (the index's own I/O, counted by bloomskip):")
    for label, (requests, size, read) in explained.items():
        print(f"  {label:<15} index I/O: {requests} requests, {size}; read {read} row groups")
    worst = max(requests for requests, _, _ in explained.values())
    point = min(
        statistics.median(seconds for seconds, _ in runs[label]["duck+arrow"])
        / statistics.median(seconds for seconds, _ in runs[label]["bloomskip"])
        for label in ("point, present", "point, absent")
    )
    print()
    print(
        f"expected: the index costs at most 4 requests per query: {worst} at most, "
        f"{'met' if worst <= 4 else 'NOT met'}"
    )
    print(
        "expected: a cold point lookup >= 5x faster than DuckDB's full scan of the same "
        f"objects: {point:.1f}x at least, {'met' if point >= 5 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
