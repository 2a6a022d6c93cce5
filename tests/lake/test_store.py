"""The storage layer against a real S3-API server and the local disk.

Identities from one listing, create-only puts that exactly one racer wins, coalesced ranges, and
one-line errors naming the URI.
"""

from __future__ import annotations

import re
import socket
import threading
import time

import pytest

from bloomskip import StorageError
from bloomskip._store import COALESCE_GAP, coalesce, open_store


def test_put_get_list_and_identities(store, location):
    store.put("data/a.parquet", b"x" * 10)
    store.put("data/b.parquet", b"y" * 20)
    store.put("other/c", b"z")
    before = store.stats.requests
    listed = store.list("data/")
    assert store.stats.requests == before + 1
    assert [(info.key, info.size) for info in listed] == [
        ("data/a.parquet", 10),
        ("data/b.parquet", 20),
    ]
    assert all(info.mtime_ns > 0 for info in listed)
    if location.startswith("s3://"):
        # An object store's identity is its ETag: a rewrite with other bytes changes it.
        etag = listed[0].etag
        assert etag
        store.put("data/a.parquet", b"w" * 10)
        assert store.list("data/a")[0].etag not in (None, etag)
    assert store.get("data/b.parquet") == b"y" * 20
    # A prefix is a prefix of characters, as on S3, also locally.
    assert [info.key for info in store.list("data/a")] == ["data/a.parquet"]


def test_put_if_absent_has_exactly_one_winner(store):
    results = []
    barrier = threading.Barrier(8)

    def racer(number: int) -> None:
        barrier.wait()
        results.append((store.put_if_absent("versions/1.json", f"{number}".encode()), number))

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [number for won, number in results if won]
    assert len(winners) == 1
    assert store.get("versions/1.json") == f"{winners[0]}".encode()
    assert not store.put_if_absent("versions/1.json", b"late")


def test_ranges_are_coalesced_into_few_requests(store):
    data = bytes(range(256)) * (3 * COALESCE_GAP // 256)
    store.put("seg", data)
    before = store.stats.requests
    ranges = [(10, 5), (100, 50), (3 * COALESCE_GAP - 7, 7), (0, 4)]
    assert store.get_ranges("seg", ranges) == [data[s : s + n] for s, n in ranges]
    assert store.stats.requests == before + 2  # the three near the start share one request
    assert store.stats.bytes_read < len(data) // 2


def test_coalesce_merges_overlaps_and_near_ranges():
    assert coalesce([(0, 10), (5, 10), (30, 1)], gap=20) == [(0, 31)]
    assert coalesce([(0, 10), (31, 1)], gap=20) == [(0, 10), (31, 1)]
    assert coalesce([]) == []


def test_missing_object_and_bucket_name_the_uri(store, location, s3_endpoint):
    with pytest.raises(StorageError, match="no such"):
        store.get("nope.json")
    try:
        store.get("nope.json")
    except StorageError as exc:
        assert location in str(exc) and "\n" not in str(exc)
    missing = open_store("s3://no-such-bucket-bloomskip/x")
    with pytest.raises(StorageError, match="s3://no-such-bucket-bloomskip/x"):
        missing.list("")


def test_unreachable_endpoint_fails_fast(monkeypatch, s3_endpoint):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    store = open_store("s3://bucket/prefix")
    started = time.monotonic()
    # The store the user named, the endpoint and the cause; the client's text is the cause's.
    message = f"s3://bucket/prefix: cannot reach the object store at http://127.0.0.1:{port} "
    with pytest.raises(StorageError, match=re.escape(message + "(connection refused)")):
        store.get("k")
    assert time.monotonic() - started < 60  # bounded retries, not object_store's minutes


def test_local_location_that_cannot_be_written(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    store = open_store(str(blocker / "index"))
    with pytest.raises(StorageError, match="cannot write"):
        store.put_if_absent("versions/1.json", b"{}")


def test_unknown_scheme_is_refused():
    with pytest.raises(StorageError, match="unknown scheme 'ftp'"):
        open_store("ftp://host/x")


def test_file_uri_is_the_local_path(tmp_path):
    assert open_store(tmp_path.as_uri()).uri == str(tmp_path)


def test_data_filesystem_reads_the_same_objects(store):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"x": [1, 2, 3]})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    store.put("data/part-0.parquet", sink.getvalue().to_pybytes())
    filesystem, base = store.arrow_filesystem()
    assert pq.read_table(f"{base}/data/part-0.parquet", filesystem=filesystem).equals(table)
