"""What a build and a query cost in requests, counted by the S3 server itself (issue 33).

The listing gives every object's size and ETag, so no object is asked for its size: a build
sends no ``HEAD`` (each of its reads of a data file is pinned to the listed ETag by
``If-Match``), and neither does a query, whose reads of the files it keeps are pinned so too
(``scan/fetch.py``): nothing is checked after them. A file replaced after it was listed is
still never read as the listed one.
"""

from __future__ import annotations

import io
import secrets
from concurrent.futures import ThreadPoolExecutor

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip import Dataset
from bloomskip._store import open_store
from bloomskip.dataset.listing.files import open_parquet
from bloomskip.errors import StaleSourceError

INDEX = ["INDEX id_bf id TYPE bloom_filter(0.01)"]
FILES = 8
ROWS = 2_000
ROW_GROUP_ROWS = 500
#: In files 0 and 3 only; in every file's id range, so min/max statistics cannot skip a file.
RARE = 1_000_000
#: In file 5 only.
LONE = 2_000_000


def _file(number: int) -> bytes:
    ids = [number * 10 * ROWS + i * 10 for i in range(ROWS)]
    if number in (0, 3):
        ids[ROWS // 2] = RARE
    if number == 5:
        ids[ROWS // 3] = LONE
    sink = io.BytesIO()
    table = pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{number}-{i}" for i in ids]})
    pq.write_table(table, sink, row_group_size=ROW_GROUP_ROWS)
    return sink.getvalue()


def _files(location: str) -> list[str]:
    store = open_store(location)
    keys = [f"part-{number}.parquet" for number in range(FILES)]
    for number, key in enumerate(keys):
        store.put(key, _file(number))
    return keys


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def test_a_build_asks_for_no_size_and_pins_every_read_to_the_listed_etag(bucket, s3_requests):
    location = f"s3://{bucket}/data"
    keys = _files(location)
    etags = {info.key: info.etag for info in open_store(location).list("")}
    mark = s3_requests.mark()
    Dataset(location).build_index(INDEX, progress=False)
    requests = s3_requests.since(mark, bucket)
    # Before: two HEADs per file (pyarrow asked each object's size twice).
    assert [request for request in requests if request.method == "HEAD"] == []
    for key in keys:
        reads = [request for request in requests if request.key == f"data/{key}"]
        assert {request.method for request in reads} == {"GET"}
        assert {request.if_match for request in reads} == {etags[key]}
        # The footer for the schema, the footer for the build, one read per row group (the
        # after-read footer check is gone: every read was of the listed version).
        assert len(reads) == 2 + ROWS // ROW_GROUP_ROWS


@pytest.mark.parametrize("granule", [None, 250])
def test_a_query_sends_no_head_per_file_it_keeps(bucket, s3_requests, granule):
    location = f"s3://{bucket}/data"
    _files(location)
    Dataset(location).build_index(INDEX, granule=granule, progress=False)
    dataset = Dataset(location)
    explanation = dataset.explain(f"id = {RARE}")
    read = sum(keep.any() for keep in explanation.keep)
    assert read >= 2
    etags = {info.key: info.etag for info in open_store(location).list("")}
    mark = s3_requests.mark()
    assert _ids(dataset.run(explanation, f"id = {RARE}")) == [RARE, RARE]
    requests = s3_requests.since(mark, bucket)
    # Before: one HEAD per file read, then one listing of the prefix checking them all; now
    # one GET per file read (each small enough to fetch whole), pinned to its listed ETag.
    assert [request.method for request in requests] == ["GET"] * read
    assert {request.if_match for request in requests} == {
        etags[request.key.removeprefix("data/")] for request in requests
    }
    assert None not in {request.if_match for request in requests}
    # A cold query from the listing on: with fixed-row granules the footers are read as
    # listed too (before: pyarrow sent a HEAD for each of them).
    mark = s3_requests.mark()
    assert _ids(Dataset(location).query(f"id = {RARE}")) == [RARE, RARE]
    assert s3_requests.methods_since(mark, bucket)["HEAD"] == 0


def test_a_query_reading_one_file_sends_one_get_and_no_check(bucket, s3_requests):
    location = f"s3://{bucket}/data"
    _files(location)
    dataset = Dataset(location)
    dataset.build_index(INDEX, progress=False)
    explanation = dataset.explain(f"id = {LONE}")
    assert sum(keep.any() for keep in explanation.keep) == 1
    mark = s3_requests.mark()
    assert _ids(dataset.run(explanation, f"id = {LONE}")) == [LONE]
    # Before: one GET for the footer, one for the row group, one HEAD to check the object.
    assert s3_requests.methods_since(mark, bucket) == {"GET": 1}


def test_identities_now_lists_again_only_when_that_is_fewer_requests(bucket, s3_requests):
    store = open_store(f"s3://{bucket}/objects")
    for name in "abc":
        store.put(name, name.encode())
    listed = {info.key: info for info in store.list("")}
    store.put("b", b"bb")
    store.delete("c")
    mark = s3_requests.mark()
    now = store.identities_now(["a", "b", "c"])
    assert s3_requests.methods_since(mark, bucket) == {"LIST": 1}
    assert now["a"] == listed["a"] and now["c"] is None
    assert (now["b"].size, now["b"].etag != listed["b"].etag) == (2, True)
    mark = s3_requests.mark()
    assert store.identities_now(["a"])["a"].etag == listed["a"].etag
    assert s3_requests.methods_since(mark, bucket) == {"HEAD": 1}


def test_identities_now_lists_again_only_when_no_slower_than_the_heads(bucket, s3_requests):
    # A listing of two pages takes two round trips one after the other; up to 16 HEADs take
    # one: two keys are asked by HEAD, 33 (three rounds of HEADs) by the listing.
    store = open_store(f"s3://{bucket}/many")
    keys = [f"{number:04d}" for number in range(1001)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda key: store.put(key, b"x"), keys))
    mark = s3_requests.mark()
    store.list("")
    assert s3_requests.methods_since(mark, bucket) == {"LIST": 2}
    mark = s3_requests.mark()
    assert all(info is not None for info in store.identities_now(keys[:2]).values())
    assert s3_requests.methods_since(mark, bucket) == {"HEAD": 2}
    mark = s3_requests.mark()
    assert all(info is not None for info in store.identities_now(keys[:33]).values())
    assert s3_requests.methods_since(mark, bucket) == {"LIST": 2}


@pytest.mark.parametrize(
    "where, expected", [(f"id = {RARE}", [RARE, RARE]), (f"id = {LONE}", [LONE])]
)
def test_a_versioned_bucket_is_queried(s3_endpoint, where, expected):
    # Before: a HEAD in a versioned bucket gives a version id that no listing gives, so every
    # file read looked replaced and every query failed after three attempts.
    bucket = f"versioned-{secrets.token_hex(4)}"
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    client.create_bucket(Bucket=bucket)
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    location = f"s3://{bucket}/data"
    _files(location)
    dataset = Dataset(location)
    dataset.build_index(INDEX, progress=False)
    assert _ids(dataset.query(where)) == expected


def _listed(location: str, key: str):
    dataset = Dataset(location)
    files, _ = dataset.backend.list_files()
    listed = next(item for item in files if item.key == key)
    return dataset.backend.writer, listed


def test_an_object_replaced_after_its_listing_is_not_read_as_the_listed_one(bucket):
    location = f"s3://{bucket}/data"
    keys = _files(location)
    writer, listed = _listed(location, keys[0])
    open_store(location).put(keys[0], _file(1))
    # Before: pyarrow asked the size anew and read the new object's footer as the listed one's.
    with pytest.raises(StaleSourceError, match="changed while it was read"):
        open_parquet(writer.source(listed), listed.info.size, listed.info.mtime_ns)


def test_a_decision_whose_footer_was_replaced_after_the_listing_decides_again(bucket, monkeypatch):
    from bloomskip.dataset.backends.lake import LakeDataset

    location = f"s3://{bucket}/data"
    keys = _files(location)
    dataset = Dataset(location)
    dataset.build_index(INDEX, granule=250, progress=False)
    listed = LakeDataset._list_files
    replaced = []

    def list_then_replace(self):
        files = listed(self)
        if not replaced:  # between the first listing and its footer reads
            open_store(location).put(keys[5], _file(0))
            replaced.append(keys[5])
        return files

    monkeypatch.setattr(LakeDataset, "_list_files", list_then_replace)
    # File 5 now holds file 0's rows: RARE is in it, LONE is gone.
    assert _ids(dataset.query(f"id = {RARE}")) == [RARE] * 3
    assert replaced == [keys[5]]
    assert _ids(dataset.query(f"id = {LONE}")) == []


def test_an_object_replaced_while_a_build_reads_it_fails_the_read(bucket):
    location = f"s3://{bucket}/data"
    keys = _files(location)
    writer, listed = _listed(location, keys[0])
    opened = open_parquet(writer.source(listed), listed.info.size, listed.info.mtime_ns)
    assert opened.reader().read_row_group(0).num_rows == ROW_GROUP_ROWS
    open_store(location).put(keys[0], _file(1))
    # The row groups of the listed version, or an error: never the new version's bytes
    # under the listed version's footer.
    with pytest.raises(StaleSourceError, match="changed while it was read"):
        opened.reader().read_row_group(1)
