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
