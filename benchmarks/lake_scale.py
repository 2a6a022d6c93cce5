"""Benchmark: what a cold lookup and a one-file append cost as the lake grows.

A skip index pays at lake scale only if a lookup costs far less than the column and stays flat
as the number of files grows. For each file count of ``--files`` (default 100, 1,000, 10,000),
this script writes a log dataset of that many Parquet files (``--rows`` rows each, one row group
per file), uploads it to moto's S3 server on 127.0.0.1 twice (plain, and with Parquet Bloom
filters on ``user_id`` for the peer), and builds ``user_id bloom_filter(0.01)`` and ``message
tokenbf_v1(8192, 3, 0)`` over the plain copy. Every request the server answers is delayed by
``--latency-ms`` (default 20 ms, what a real object store costs a round trip) and counted, with
its bytes, on the server side. Then, each a new process (a cold query), engines interleaved:

* a point lookup of a present ``user_id`` and a token search (``hasToken(message, ...)``):
  bloomskip (``bloomskip query s3://...``), DuckDB over a ``pyarrow.dataset`` of the same
  objects (a full scan), and DuckDB's own reader over the copy with Parquet Bloom filters;
  for bloomskip also the index's own requests and bytes (``--explain``);
* a one-file append: one more file uploaded, then ``bloomskip index build`` (a refresh):
  its time, and the bytes it wrote to the index.

Every engine must return the same rows. Printed per file count: medians of ``--repeat`` runs,
server requests and bytes, the index's share of them, and the ratios DuckDB / bloomskip.

Usage: python benchmarks/lake_scale.py [--files 100,1000,10000] [--rows N] [--latency-ms MS]
    [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
import sys
import tempfile
import threading
import time

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from common import S3_ENV
from object_store import (
    BUCKET,
    DUCK_OVER_ARROW,
    DUCK_OVER_FSSPEC,
    FLAKY_ENGINE,
    INDEXES,
    CountingApp,
    measured,
    megabytes,
    run,
    user_ids,
)

from bloomskip.dataset.demo import RARE_TOKEN, write_logs
from bloomskip.dataset.sql.translate import clickhouse_to_duckdb

ENGINES = ["bloomskip", "duck+arrow", "duck+pqbf"]


class Delayed:
    """WSGI middleware holding every request for ``seconds`` before the server answers it:
    a round trip to a real object store, overlapped as concurrent requests overlap."""

    def __init__(self, app, seconds: float = 0.0) -> None:
        self.app = app
        self.seconds = seconds

    def __call__(self, environ, start_response):
        if self.seconds:
            time.sleep(self.seconds)
        return self.app(environ, start_response)


def start_server() -> tuple[CountingApp, Delayed, str]:
    """moto's S3 server on 127.0.0.1 behind :class:`Delayed` and :class:`CountingApp`."""
    from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    delayed = Delayed(DomainDispatcherApplication(create_backend_app))
    counter = CountingApp(delayed)
    server = make_server("127.0.0.1", 0, counter, True, request_handler=MotoRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    endpoint = f"http://{host}:{port}"
    os.environ.update(S3_ENV, AWS_ENDPOINT_URL=endpoint)
    return counter, delayed, endpoint


def upload(files: int, rows: int, prefix: str, s3, seed: int, **options) -> int:
    """Write ``files`` log files of ``rows`` rows and copy them under ``prefix`` (the local
    copies go; moto keeps its own); returns a ``user_id`` the middle file holds."""
    with tempfile.TemporaryDirectory(prefix="bloomskip-scale-") as scratch:
        written = write_logs(scratch, files * rows, files=files, seed=seed, **options)
        pafs.copy_files(scratch, f"{BUCKET}/{prefix}", pafs.LocalFileSystem(), s3)
        sample = pq.read_table(written[len(written) // 2], columns=["user_id"]).column(0)
        return int(sample[len(sample) // 2].as_py())


def index_io(bloomskip: list[str], uri: str, where: str) -> tuple[int, str]:
    """The index's own requests and bytes for ``where``, as ``--explain`` counts them."""
    _, text = run([*bloomskip, "query", uri, "--where", where, "--explain"])
    found = re.search(r"index I/O: (\d+) requests, (.+?) read", text.decode())
    if found is None:
        raise SystemExit(f"unexpected --explain output:\n{text.decode()}")
    return int(found.group(1)), found.group(2)


def scale(count: int, args, counter: CountingApp, delayed: Delayed, s3) -> dict:
    """Everything measured at one file count."""
    plain, bloom = f"s3://{BUCKET}/n{count}/plain", f"s3://{BUCKET}/n{count}/bloom"
    delayed.seconds = 0.0  # set-up is not what is measured
    started = time.perf_counter()
    present = upload(count, args.rows, f"n{count}/plain", s3, seed=count)
    bloom_options = {"bloom_filter_options": {"user_id": {"ndv": args.rows, "fpp": 0.01}}}
    upload(count, args.rows, f"n{count}/bloom", s3, seed=count, **bloom_options)
    bloomskip = [sys.executable, "-m", "bloomskip"]
    build = [*bloomskip, "index", "build", plain, "--no-progress"]
    for definition in INDEXES:
        build += ["--index", definition]
    run(build)
    _, status_text = run([*bloomskip, "index", "status", plain, "--json"])
    index_bytes = json.loads(status_text)["segment_bytes"]
    setup = time.perf_counter() - started
    delayed.seconds = args.latency_ms / 1000

    queries = [
        ("point lookup", f"user_id = {present}"),
        ("token search", f"hasToken(message, '{RARE_TOKEN}')"),
    ]
    result = {"files": count, "index_bytes": index_bytes, "setup": setup, "queries": {}}
    for label, where in queries:
        duck_where = clickhouse_to_duckdb(where)
        commands = {
            "bloomskip": [*bloomskip, "query", plain, "--where", where, "--format", "csv"],
            "duck+arrow": [sys.executable, "-c", DUCK_OVER_ARROW, plain, duck_where],
            "duck+pqbf": [sys.executable, "-c", DUCK_OVER_FSSPEC, bloom, duck_where],
        }
        samples = {engine: [] for engine in ENGINES}
        answer = None
        for _ in range(args.repeat):
            for engine in ENGINES:
                seconds, server, output, _ = measured(
                    commands[engine], counter, engine == FLAKY_ENGINE
                )
                samples[engine].append((seconds, server))
                ids = user_ids(output)
                answer = ids if answer is None else answer
                assert ids == answer, f"{label}: {engine} returned {ids}, expected {answer}"
        requests, size = index_io(bloomskip, plain, where)
        result["queries"][label] = {
            "rows": len(answer),
            "index_requests": requests,
            "index_read": size,
            "engines": {
                engine: {
                    "seconds": statistics.median(s for s, _ in samples[engine]),
                    "requests": statistics.median(d["requests"] for _, d in samples[engine]),
                    "sent": statistics.median(d["sent"] for _, d in samples[engine]),
                }
                for engine in ENGINES
            },
        }

    # A one-file append: the refresh indexes it and commits; what it writes is the point.
    delayed.seconds = 0.0
    with tempfile.TemporaryDirectory(prefix="bloomskip-scale-") as scratch:
        (extra,) = write_logs(scratch, args.rows, files=1, seed=count + 1)
        target = f"{BUCKET}/n{count}/plain/appended.parquet"
        with open(extra, "rb") as source, s3.open_output_stream(target) as sink:
            sink.write(source.read())
    delayed.seconds = args.latency_ms / 1000
    before = counter.snapshot()
    seconds, _ = run([*bloomskip, "index", "build", plain, "--no-progress"])
    after = counter.snapshot()
    result["append"] = {
        "seconds": seconds,
        "written": after["received"] - before["received"],
        "requests": after["requests"] - before["requests"],
    }
    return result


def report(results: list[dict], args) -> None:
    print()
    print(
        f"{'files':>6} {'query':<13} {'engine':<10} {'rows':>4} {'median s':>9} "
        f"{'requests':>8} {'MB sent':>8} {'vs ours':>8}"
    )
    for result in results:
        for label, query in result["queries"].items():
            ours = query["engines"]["bloomskip"]["seconds"]
            for engine in ENGINES:
                measured_run = query["engines"][engine]
                print(
                    f"{result['files'] if engine == 'bloomskip' else '':>6} "
                    f"{label if engine == 'bloomskip' else '':<13} {engine:<10} "
                    f"{query['rows']:>4} {measured_run['seconds']:>9.3f} "
                    f"{measured_run['requests']:>8.0f} {megabytes(measured_run['sent']):>8} "
                    f"{measured_run['seconds'] / ours:>7.1f}x"
                )
    print()
    print(
        f"{'files':>6} {'index MB':>9} {'lookup: index requests, read':>30} "
        f"{'token search: index requests, read':>36} {'append: s, KiB written':>24}"
    )
    for result in results:
        point, token = result["queries"]["point lookup"], result["queries"]["token search"]
        append = result["append"]
        print(
            f"{result['files']:>6} {megabytes(result['index_bytes']):>9} "
            f"{point['index_requests']:>12}, {point['index_read']:>15} "
            f"{token['index_requests']:>14}, {token['index_read']:>19} "
            f"{append['seconds']:>13.2f}, {append['written'] / 1024:>8.1f}"
        )
    print()
    print(
        f"(every request delayed {args.latency_ms} ms at the server; medians of {args.repeat} "
        "runs, each a new process, engines interleaved; requests and MB sent counted by the S3 "
        "server for the whole run; vs ours: the engine's time / bloomskip's; the index's own "
        "requests and bytes as bloomskip --explain counts them)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="100,1000,10000")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    counts = [int(text) for text in args.files.split(",")]

    counter, delayed, endpoint = start_server()
    import boto3

    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
    s3, _ = pafs.FileSystem.from_uri(f"s3://{BUCKET}")
    results = []
    for count in counts:
        print(f"{count} files ...", file=sys.stderr, flush=True)
        result = scale(count, args, counter, delayed, s3)
        print(
            f"{count} files of {args.rows:,} rows: written, uploaded twice and indexed in "
            f"{result['setup']:.0f} s; index {megabytes(result['index_bytes'])} MB",
            file=sys.stderr,
            flush=True,
        )
        results.append(result)
    report(results, args)


if __name__ == "__main__":
    main()
