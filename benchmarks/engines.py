"""Benchmark: the engines users already query with, with and without bloomskip's index.

Generates a log dataset (default 20 million rows, files of 1Mi rows in 64Ki-row row groups, as
issue 31 sets it), indexed with ``user_id`` ``bloom_filter(0.01)`` and ``message``
``tokenbf_v1(8192, 3, 0)`` (granules of a row group, or ``--granule ROWS``; a folder keeps the
index it was first given), and a small dimension table (one row per
user of a few hundred). Four queries, each written as a user writes it in DuckDB's SQL and in
Polars: a point lookup, an ``IN`` of 10 values, a token-ish substring search
(``contains(message, ' job123 ')``), and a join of the point lookup's rows with the dimension
table, aggregated.

Locally, per query and engine, in one run:

* DuckDB: ``duckdb`` over ``read_parquet('…/*.parquet')`` against ``bloomskip.sql`` of the same
  text;
* Polars: ``pl.scan_parquet(files)`` against ``Dataset.scan_polars()`` with the same filter.

On moto's S3 server on 127.0.0.1 (``--s3``; DuckDB here has no ``httpfs``, so it reads the
objects through pyarrow's S3 filesystem):

* DuckDB over ``pyarrow.dataset`` of the prefix against DuckDB over the access plan
  (``Dataset(uri).explain(where).access_plan().to_duckdb()``), same SQL;
* Polars' ``scan_parquet('s3://…')`` against the plan's ``to_polars()``.

Every pair must return the same rows (checked, the run stops otherwise). Times are warm, in one
process, medians of interleaved runs; the ratio is the engine's time without bloomskip over
its time with it.

Usage: python benchmarks/engines.py [--rows N] [--dir DIR] [--granule G] [--repeat R] [--s3]
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import threading
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from common import S3_ENV, median_interleaved

import bloomskip
from bloomskip.dataset import Dataset
from bloomskip.dataset.demo import generate_logs

INDEXES = ["user_id TYPE bloom_filter(0.01)", "message TYPE tokenbf_v1(8192, 3, 0)"]
FILE_ROWS = 1 << 20
ROW_GROUP = 1 << 16
DIMENSION_USERS = 500


def write_data(folder: Path, rows: int, granule: str | int) -> list[Path]:
    """Files of :data:`FILE_ROWS` rows in :data:`ROW_GROUP`-row row groups (reused when
    complete), indexed."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for number, start in enumerate(range(0, rows, FILE_ROWS)):
        path = folder / f"logs-{number:03d}.parquet"
        if not path.exists():
            table = generate_logs(min(FILE_ROWS, rows - start), 0, start)
            pq.write_table(table, folder / f".{path.name}", row_group_size=ROW_GROUP)
            (folder / f".{path.name}").replace(path)
        paths.append(path)
    dataset = Dataset(folder)
    if not dataset.status().get("indexes"):
        dataset.build_index(INDEXES, granule=granule, progress=False)
    return paths


def pick_values(paths: list[Path]) -> dict:
    """A present user, ten present users, and a job id from the middle of the data."""
    middle = pq.read_table(paths[len(paths) // 2], columns=["user_id", "message"])
    rng = np.random.default_rng(7)
    rows = rng.choice(middle.num_rows, 11, replace=False)
    users = [middle["user_id"][int(row)].as_py() for row in rows]
    job = middle["message"][int(rows[0])].as_py().split(" for ")[1].split()[0]
    return {"user": users[0], "users": users[1:], "job": job}


def queries(values: dict, source: str) -> dict[str, tuple[str, object]]:
    """Per query, its DuckDB SQL over ``source`` and the Polars plan over a frame ``lf``."""
    user, users, job = values["user"], values["users"], values["job"]
    listed = ", ".join(map(str, users))
    return {
        "point lookup": (
            f"SELECT * FROM {source} WHERE user_id = {user}",
            lambda lf, dim: lf.filter(pl.col("user_id") == user),
        ),
        "IN of 10": (
            f"SELECT * FROM {source} WHERE user_id IN ({listed})",
            lambda lf, dim: lf.filter(pl.col("user_id").is_in(users)),
        ),
        "substring": (
            f"SELECT * FROM {source} WHERE contains(message, ' {job} ')",
            lambda lf, dim: lf.filter(pl.col("message").str.contains(f" {job} ", literal=True)),
        ),
        "join + aggregate": (
            f"SELECT d.region, l.level, count(*) AS n FROM {source} l "
            f"JOIN dim d ON l.user_id = d.user_id WHERE l.user_id IN ({listed}) "
            "GROUP BY ALL ORDER BY ALL",
            lambda lf, dim: (
                lf.filter(pl.col("user_id").is_in(users))
                .join(dim, on="user_id")
                .group_by("region", "level")
                .agg(pl.len().alias("n"))
                .sort("region", "level")
            ),
        ),
    }


def dimension(values: dict) -> pa.Table:
    """One row per user: the queried ones and a few hundred others."""
    rng = np.random.default_rng(3)
    others = rng.integers(1, 1 << 62, DIMENSION_USERS - 11).tolist()
    ids = [values["user"], *values["users"], *others]
    regions = [f"region-{number % 7}" for number in range(len(ids))]
    return pa.table({"user_id": pa.array(ids, pa.int64()), "region": regions})


def rows_of(result) -> list[tuple]:
    """Rows as sorted tuples, from a DuckDB result list or a Polars frame."""
    if isinstance(result, pl.DataFrame):
        result = result.rows()
    return sorted(result, key=repr)


def compare(label: str, functions: dict, repeat: int) -> list[str]:
    """Time ``functions`` (``without`` / ``with`` per engine), check equal rows, format."""
    times, results = median_interleaved(functions, repeat)
    lines = []
    for engine in ("DuckDB", "Polars"):
        plain, pruned = results[f"{engine} alone"], results[f"{engine} + bloomskip"]
        if rows_of(plain) != rows_of(pruned):
            raise SystemExit(f"{label}, {engine}: rows differ with and without bloomskip")
        alone, with_index = times[f"{engine} alone"], times[f"{engine} + bloomskip"]
        lines.append(
            f"| {label} | {engine} | {len(rows_of(plain)):,} | {alone * 1e3:,.1f} | "
            f"{with_index * 1e3:,.1f} | {alone / with_index:.1f}x |"
        )
    return lines


def local_rows(folder: Path, paths: list[Path], values: dict, repeat: int) -> list[str]:
    connection = duckdb.connect()
    dim = dimension(values)
    connection.register("dim", dim)
    dim_lf = pl.from_arrow(dim).lazy()
    files = [str(path) for path in paths]
    plain_lf = pl.scan_parquet(files)
    pruned_lf = Dataset(folder).scan_polars()
    lines = []
    source = f"read_parquet('{folder}/*.parquet')"
    for label, (sql, polars_query) in queries(values, source).items():
        functions = {
            "DuckDB alone": lambda sql=sql: connection.sql(sql).fetchall(),
            "DuckDB + bloomskip": lambda sql=sql: bloomskip.sql(
                sql, connection=connection
            ).fetchall(),
            "Polars alone": lambda q=polars_query: q(plain_lf, dim_lf).collect(),
            "Polars + bloomskip": lambda q=polars_query: q(pruned_lf, dim_lf).collect(),
        }
        lines.extend(compare(label, functions, repeat))
    return lines


def start_s3() -> str:
    """moto's S3 server on 127.0.0.1; its endpoint is set in the environment."""
    from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = DomainDispatcherApplication(create_backend_app)
    server = make_server("127.0.0.1", 0, app, True, request_handler=MotoRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    os.environ.update(S3_ENV, AWS_ENDPOINT_URL=endpoint)
    return endpoint


def s3_rows(paths: list[Path], values: dict, repeat: int, granule: str | int) -> list[str]:
    import boto3
    import pyarrow.fs as pafs

    endpoint = start_s3()
    client = boto3.client("s3", endpoint_url=endpoint)
    client.create_bucket(Bucket="lake")
    for path in paths:
        client.upload_file(str(path), "lake", f"logs/{path.name}")
    uri = "s3://lake/logs"
    dataset = Dataset(uri)
    dataset.build_index(INDEXES, granule=granule, progress=False)
    filesystem = pafs.S3FileSystem(endpoint_override=endpoint, scheme="http", region="us-east-1")
    whole = pads.dataset("lake/logs/", filesystem=filesystem, format="parquet")
    storage = {
        "aws_endpoint_url": endpoint,
        "aws_allow_http": "true",
        "aws_region": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    plain_lf = pl.scan_parquet(f"{uri}/*.parquet", storage_options=storage)
    dim = dimension(values)
    dim_lf = pl.from_arrow(dim).lazy()
    connection = duckdb.connect()
    connection.register("dim", dim)
    connection.register("whole", whole)
    wheres = {
        "point lookup": f"user_id = {values['user']}",
        "IN of 10": f"user_id IN ({', '.join(map(str, values['users']))})",
        "substring": f"message LIKE '% {values['job']} %'",
        "join + aggregate": f"user_id IN ({', '.join(map(str, values['users']))})",
    }
    lines = []
    for label, (sql, polars_query) in queries(values, "whole").items():
        where = wheres[label]

        def pruned_duckdb(sql=sql, where=where):
            relation = dataset.explain(where).access_plan().to_duckdb(connection)
            return relation.query("whole", sql).fetchall()

        def pruned_polars(polars_query=polars_query, where=where):
            return polars_query(dataset.explain(where).access_plan().to_polars(), dim_lf).collect()

        functions = {
            "DuckDB alone": lambda sql=sql: connection.sql(sql).fetchall(),
            "DuckDB + bloomskip": pruned_duckdb,
            "Polars alone": lambda q=polars_query: q(plain_lf, dim_lf).collect(),
            "Polars + bloomskip": pruned_polars,
        }
        lines.extend(compare(f"{label} (S3)", functions, repeat))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--dir", type=Path, default=None, help="where the data is kept")
    parser.add_argument("--granule", default="row-group", help="row-group or a row count")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--s3", action="store_true", help="also on moto's S3 server")
    args = parser.parse_args()
    base = args.dir or Path(tempfile.gettempdir()) / f"bloomskip-engines-{args.rows}"
    folder = base / "logs"
    granule = args.granule if args.granule == "row-group" else int(args.granule)
    paths = write_data(folder, args.rows, granule)
    values = pick_values(paths)
    built = Dataset(folder).status()["granule"]
    print(
        f"{args.rows:,} rows in {len(paths)} files of {ROW_GROUP:,}-row row groups "
        f"({sum(p.stat().st_size for p in paths) / 1e6:,.0f} MB) at {folder}; "
        f"index {', '.join(INDEXES)}, granule {built}; warm, medians of {args.repeat}"
    )
    print("| query | engine | rows | alone ms | + bloomskip ms | ratio |")
    print("|---|---|---|---|---|---|")
    for line in local_rows(folder, paths, values, args.repeat):
        print(line, flush=True)
    if args.s3:
        for line in s3_rows(paths, values, args.repeat, granule):
            print(line, flush=True)


if __name__ == "__main__":
    main()
