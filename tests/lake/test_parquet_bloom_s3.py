"""``read_bloom_filters``, ``inspect`` and ``verify`` over object storage (the moto S3 server
of conftest.py): the same filters as the local file, from a few GETs (footer and filters, never
one request per chunk)."""

from __future__ import annotations

from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.parquet as pq

from bloomskip.parquet import read_bloom_filters
from bloomskip.parquet.verify import inspect_file, verify_file


def test_filters_over_s3(tmp_path: Path, bucket: str, s3_endpoint: str, s3_requests) -> None:
    path = tmp_path / "events.parquet"
    table = pa.table(
        {
            "user": pa.array([f"u{i % 3000}" for i in range(60_000)]),
            "n": pa.array(range(60_000)),
        }
    )
    pq.write_table(
        table, path, row_group_size=10_000, bloom_filter_options={"user": True, "n": True}
    )
    boto3.client("s3", endpoint_url=s3_endpoint).upload_file(str(path), bucket, "t/events.parquet")
    uri = f"s3://{bucket}/t/events.parquet"

    mark = s3_requests.mark()
    remote = read_bloom_filters(uri)
    methods = s3_requests.methods_since(mark, bucket)
    assert remote == read_bloom_filters(path) and len(remote) == 12
    # The footer (one or two reads) and the 12 filters in one coalesced read.
    assert methods["GET"] <= 3, methods
    assert [rg for (rg, c), f in remote.items() if c == "n" and 25_000 in f] == [2]
    assert all("u42" in f for (rg, c), f in remote.items() if c == "user")

    assert inspect_file(uri)["chunks_with_filter"] == 12
    assert verify_file(uri).ok


class _BytesServed:
    """WSGI middleware over the test server's application: the body bytes it sends back for
    GETs of one bucket (ranged reads included), counted by the server."""

    def __init__(self, app, bucket: str) -> None:
        self.app, self.bucket, self.total = app, bucket, 0

    def __call__(self, environ, start_response):
        body = self.app(environ, start_response)
        path = environ.get("PATH_INFO", "").lstrip("/")
        if environ["REQUEST_METHOD"] != "GET" or not path.startswith(self.bucket + "/"):
            return body
        chunks = list(body)
        self.total += sum(len(chunk) for chunk in chunks)
        return chunks


def test_harvest_over_s3_reads_filters_not_data(
    tmp_path: Path, bucket: str, s3_endpoint: str, s3_requests, monkeypatch
) -> None:
    """Over files whose chunks all carry filters, a harvest reads under 10% of the data bytes
    (footer and filters), and the row groups it keeps for a value hold that value's rows."""
    import numpy as np

    from bloomskip.parquet.harvest import harvest_filters, row_groups_passing

    rng = np.random.default_rng(3)
    rows, group = 400_000, 100_000
    ids = rng.integers(0, 2**63, rows)
    table = pa.table(
        {
            "id": pa.array([f"{v:016x}{int(v) * 7 % 2**63:016x}" for v in ids.tolist()]),
            "payload": pa.array(rng.random(rows)),
        }
    )
    path = tmp_path / "ids.parquet"
    options = {"id": {"ndv": group, "fpp": 0.05}}
    pq.write_table(table, path, row_group_size=group, bloom_filter_options=options)
    boto3.client("s3", endpoint_url=s3_endpoint).upload_file(str(path), bucket, "d/ids.parquet")

    served = _BytesServed(s3_requests.app, bucket)
    monkeypatch.setattr(s3_requests, "app", served)
    harvest = harvest_filters(f"s3://{bucket}/d/ids.parquet", ["id"])
    data_bytes = path.stat().st_size
    assert harvest.harvested == 4 and harvest.computed == 0
    assert 0 < served.total <= data_bytes // 10, (served.total, data_bytes)

    for position in (0, 123_456, rows - 1):
        value = table["id"][position].as_py()
        kept = np.flatnonzero(row_groups_passing(harvest.filters["id"], [value]))
        assert position // group in kept
        found = pq.ParquetFile(path).read_row_groups(kept.tolist(), columns=["id"])["id"]
        assert value in found.to_pylist()
    assert not row_groups_passing(harvest.filters["id"], ["absent"]).all()


def test_index_build_over_s3_reads_a_tenth_of_the_data_and_finds_rows(
    tmp_path: Path, bucket: str, s3_endpoint: str, s3_requests, monkeypatch
) -> None:
    """A ``parquet_bloom_filter`` dataset build over object storage is served at most 10% of
    the data bytes (the footers and the filters, counted by the server), and lookups through
    the index find their rows, as DuckDB reads them from the same files."""
    import duckdb
    import numpy as np

    from bloomskip import Dataset

    rng = np.random.default_rng(5)
    rows, group = 200_000, 50_000
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    data_bytes = 0
    tables = []
    for number in range(2):
        ids = rng.integers(0, 2**62, rows)
        table = pa.table(
            {
                "id": pa.array([f"{v:016x}{int(v) * 7 % 2**61:016x}" for v in ids.tolist()]),
                "n": pa.array(ids),
                "payload": pa.array(rng.random(rows)),
            }
        )
        path = tmp_path / f"part-{number}.parquet"
        options = {"id": {"ndv": group, "fpp": 0.05}, "n": {"ndv": group, "fpp": 0.05}}
        pq.write_table(table, path, row_group_size=group, bloom_filter_options=options)
        client.upload_file(str(path), bucket, f"events/part-{number}.parquet")
        data_bytes += path.stat().st_size
        tables.append(table)

    served = _BytesServed(s3_requests.app, bucket)
    monkeypatch.setattr(s3_requests, "app", served)
    location = f"s3://{bucket}/events"
    Dataset(location).build_index(
        ["id TYPE parquet_bloom_filter", "n TYPE parquet_bloom_filter(0.01)"], progress=False
    )
    assert 0 < served.total <= data_bytes // 10, (served.total, data_bytes)
    print(f"build served {served.total} of {data_bytes} data bytes")

    dataset = Dataset(location)
    for number, position in ((0, 0), (1, 123_456), (1, rows - 1)):
        value = tables[number]["id"][position].as_py()
        n = tables[number]["n"][position].as_py()
        for where in (f"id = '{value}'", f"n IN ({n}, 7)", f"id = '{value}' AND n = {n}"):
            explanation = dataset.explain(where)
            assert len(explanation.row_groups()) <= 2, where  # of 8
            found = dataset.query(where)
            assert found["id"].to_pylist() == [value], where
    expected = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{tmp_path}/*.parquet') WHERE id = 'absent'"
    ).fetchall()[0][0]
    assert dataset.query("id = 'absent'").num_rows == expected == 0
