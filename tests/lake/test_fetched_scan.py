"""A query over object storage fetches what its plan reads into local copies (scan/fetch.py).

Every read is a ranged GET pinned to the listed ETag: small files whole, larger ones their tail
(the footer) and then only the row groups kept, plus what follows the last row group (page
indexes, Bloom filters). DuckDB reads the copies by path, so the rows must be exactly those of
DuckDB's own full scan of the same bytes, whatever the copy leaves as holes.
"""

from __future__ import annotations

import io
import tempfile

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip import Dataset
from bloomskip._store import open_store
from bloomskip.dataset.scan import fetch
from bloomskip.errors import FormatError

ROWS = 16_000
ROW_GROUP_ROWS = 2_000
#: In row group 5 of file 1 only.
RARE = 7_777_777
INDEXES = [
    "INDEX id_bf id TYPE bloom_filter(0.01)",
    "INDEX note_tok note TYPE tokenbf_v1(4096, 3, 0)",
]


def _table(number: int) -> pa.Table:
    ids = [number * 1_000_000 + i for i in range(ROWS)]
    if number == 1:
        ids[5 * ROW_GROUP_ROWS + 17] = RARE
    notes = [
        f"row {i} of file {number} says {'needle' if i == 9_001 else 'hay'} {i * 7919}" for i in ids
    ]
    return pa.table({"id": pa.array(ids, pa.int64()), "note": notes})


def _upload(location: str, **options) -> dict[str, bytes]:
    store = open_store(location)
    files = {}
    for number in range(3):
        sink = io.BytesIO()
        pq.write_table(_table(number), sink, row_group_size=ROW_GROUP_ROWS, **options)
        files[f"part-{number}.parquet"] = sink.getvalue()
        store.put(f"part-{number}.parquet", files[f"part-{number}.parquet"])
    return files


def _expected(files: dict[str, bytes], where: str, tmp_path) -> list[tuple]:
    """DuckDB's full scan of the same bytes."""
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    sql = (
        f"SELECT id, note FROM read_parquet('{tmp_path}/part-*.parquet') WHERE {where} ORDER BY id"
    )
    return duckdb.sql(sql).fetchall()


def _rows(table: pa.Table) -> list[tuple]:
    return sorted(
        zip(table.column("id").to_pylist(), table.column("note").to_pylist(), strict=True)
    )


@pytest.fixture
def large(monkeypatch):
    """Every file counts as large: fetched by its tail and its kept row groups, each apart
    (no gap between them is read), so the copies hold holes wherever nothing was kept."""
    monkeypatch.setattr(fetch, "WHOLE_FILE_BYTES", 0)
    monkeypatch.setattr(fetch, "TAIL_BYTES", 4096)
    monkeypatch.setattr(fetch, "COALESCE_GAP", 0)


@pytest.mark.parametrize("granule", [None, 500])
@pytest.mark.parametrize(
    "options",
    [{}, {"write_page_index": True, "bloom_filter_options": {"id": {"ndv": ROWS, "fpp": 0.01}}}],
    ids=["plain", "page-index-and-bloom-filters"],
)
def test_a_large_file_fetches_its_tail_then_the_row_groups_kept(
    bucket, s3_requests, large, granule, options, tmp_path
):
    location = f"s3://{bucket}/data"
    files = _upload(location, **options)
    Dataset(location).build_index(INDEXES, granule=granule, progress=False)
    etags = {info.key: info.etag for info in open_store(location).list("")}
    for where in [f"id = {RARE}", "hasToken(note, 'needle')", "id IN (1000005, 2000003, 5)"]:
        dataset = Dataset(location)
        explanation = dataset.explain(where)
        mark = s3_requests.mark()
        duck_where = where.replace("hasToken(note, 'needle')", "note LIKE '% needle %'")
        assert _rows(dataset.run(explanation, where)) == _expected(files, duck_where, tmp_path)
        requests = s3_requests.since(mark, bucket)
        assert {request.method for request in requests} == {"GET"}
        assert all(
            request.if_match == etags[request.key.removeprefix("data/")] for request in requests
        )
        kept = {
            state.relative_path: keep.nonzero()[0].tolist()
            for state, keep in zip(explanation.files, explanation.keep, strict=True)
            if keep.any()
        }
        assert {request.key.removeprefix("data/") for request in requests} == set(kept)
        for key, groups in kept.items():
            _check_ranges(files[key], groups, [r for r in requests if r.key == f"data/{key}"])


def _check_ranges(data: bytes, groups: list[int], requests: list) -> None:
    """The reads of one file: its tail first, then ranges covering every kept row group and,
    unless most of the file was wanted (then all of it), nothing before the first of them."""
    ranges = []
    for request in requests:
        first, _, last = request.range.removeprefix("bytes=").partition("-")
        ranges.append((int(first), int(last) + 1))
    assert ranges[0] == (len(data) - fetch.TAIL_BYTES, len(data))
    metadata = pq.read_metadata(pa.BufferReader(data))
    spans = [_span(metadata.row_group(group)) for group in groups]
    for low, high in spans:
        assert any(start <= low and high <= end for start, end in ranges[1:])
    if min(start for start, _ in ranges[1:]) > 0:
        assert min(start for start, _ in ranges[1:]) == spans[0][0]


def _span(row_group) -> tuple[int, int]:
    """Where a row group's column chunks lie, by pyarrow's reading of the footer."""
    starts, ends = [], []
    for number in range(row_group.num_columns):
        chunk = row_group.column(number)
        start = chunk.data_page_offset
        if chunk.has_dictionary_page:
            start = min(start, chunk.dictionary_page_offset)
        starts.append(start)
        ends.append(start + chunk.total_compressed_size)
    return min(starts), max(ends)


def test_the_rare_value_is_read_from_its_one_row_group(bucket, s3_requests, large, tmp_path):
    location = f"s3://{bucket}/one"
    files = _upload(location)
    Dataset(location).build_index(INDEXES[:1], progress=False)
    dataset = Dataset(location)
    explanation = dataset.explain(f"id = {RARE}")
    assert [(str(path).rsplit("/")[-1], group) for path, group in explanation.row_groups()] == [
        ("part-1.parquet", 5)
    ]
    mark = s3_requests.mark()
    assert _rows(dataset.run(explanation, f"id = {RARE}")) == _expected(
        files, f"id = {RARE}", tmp_path
    )
    lengths = [request.length for request in s3_requests.since(mark, bucket)]
    # The tail, then one range: the row group and what follows the last one (the footer).
    assert len(lengths) == 2 and lengths[0] == 4096
    assert lengths[1] < len(files["part-1.parquet"]) // 4


def test_many_row_groups_kept_apart_are_read_by_row_number_from_the_holed_copy(
    bucket, s3_requests, large, tmp_path
):
    # 200 row groups, every third holding 'a': 67 kept, more than the scan reads one query
    # each, and a third of the file, so the copy is mostly holes between them.
    groups = 200
    kinds = [("a" if group % 3 == 0 else "b") for group in range(groups) for _ in range(100)]
    table = pa.table(
        {
            "id": pa.array(range(groups * 100), pa.int64()),
            "note": [f"{k} {i}" for i, k in enumerate(kinds)],
            "k": kinds,
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=100)
    location = f"s3://{bucket}/spread"
    open_store(location).put("part-0.parquet", sink.getvalue())
    Dataset(location).build_index(["INDEX k_bf k TYPE bloom_filter(0.001)"], progress=False)
    dataset = Dataset(location)
    explanation = dataset.explain("k = 'a'")
    kept = explanation.keep[0].nonzero()[0].tolist()
    assert kept == list(range(0, groups, 3))
    mark = s3_requests.mark()
    found = dataset.run(explanation, "k = 'a'")
    assert sorted(found.column("id").to_pylist()) == [i for i, k in enumerate(kinds) if k == "a"]
    requests = s3_requests.since(mark, bucket)
    _check_ranges(sink.getvalue(), kept, requests)
    assert sum(request.length for request in requests) < len(sink.getvalue()) // 2


def test_a_plan_reading_nothing_has_the_types_of_one_reading_rows(bucket, s3_requests):
    location = f"s3://{bucket}/types"
    _upload(location)
    Dataset(location).build_index(INDEXES[:1], progress=False)
    dataset = Dataset(location)
    found = dataset.query(f"id = {RARE}")
    absent = next(
        f"id = {value}"
        for value in range(-1, -100, -1)
        if not dataset.explain(f"id = {value}").row_groups()
    )
    mark = s3_requests.mark()
    empty = dataset.query(absent)
    assert empty.num_rows == 0 and empty.schema == found.schema
    # The footer of one file, for those types; nothing checked after.
    assert s3_requests.methods_since(mark, bucket)["GET"] == 1
    assert s3_requests.methods_since(mark, bucket)["HEAD"] == 0


def test_a_plan_beyond_the_budget_is_streamed_and_checked_after(
    bucket, s3_requests, monkeypatch, tmp_path
):
    monkeypatch.setattr(fetch, "FETCH_BYTES", 0)
    _check_streamed(bucket, s3_requests, f"s3://{bucket}/budget", tmp_path)


def _check_streamed(bucket, s3_requests, location: str, tmp_path) -> None:
    """A rare-value lookup at ``location`` returns DuckDB's rows from a read this module did
    not pin: the file read is checked once the read is done (one HEAD or one listing)."""
    files = _upload(location)
    Dataset(location).build_index(INDEXES[:1], progress=False)
    dataset = Dataset(location)
    explanation = dataset.explain(f"id = {RARE}")
    mark = s3_requests.mark()
    assert _rows(dataset.run(explanation, f"id = {RARE}")) == _expected(
        files, f"id = {RARE}", tmp_path
    )
    methods = s3_requests.methods_since(mark, bucket)
    assert methods["HEAD"] + methods["LIST"] == 1


def test_the_local_copies_are_deleted_after_the_query_and_after_a_failure(
    bucket, monkeypatch, tmp_path
):
    location = f"s3://{bucket}/copies"
    _upload(location)
    Dataset(location).build_index(INDEXES[:1], progress=False)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    dataset = Dataset(location)
    assert dataset.query(f"id = {RARE}").num_rows == 1
    assert list(scratch.iterdir()) == []
    with pytest.raises(Exception, match="no_such_column"):
        dataset.query(f"id = {RARE} AND no_such_column = 1")
    assert list(scratch.iterdir()) == []


def _footer(table: pa.Table, **options) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    return sink.getvalue()


def test_hostile_tails_are_format_errors_naming_the_object_and_offset():
    data = _footer(_table(0), row_group_size=ROW_GROUP_ROWS)
    size = len(data)
    with pytest.raises(
        FormatError, match=rf"s3://b/x: not a Parquet file \(no PAR1 magic at offset {size - 4}\)"
    ):
        fetch._footer_length(data[:-1] + b"X", size, "s3://b/x")
    huge = data[:-8] + (size).to_bytes(4, "little") + b"PAR1"
    with pytest.raises(
        FormatError, match=rf"s3://b/x: footer length {size} at offset {size - 8} exceeds"
    ):
        fetch._footer_length(huge, size, "s3://b/x")
    with pytest.raises(FormatError, match="s3://b/x: not a Parquet file"):
        fetch._footer_length(b"PAR1", 4, "s3://b/x")
    length = fetch._footer_length(data, size, "s3://b/x")
    tail = data[size - length - 8 :]
    garbled = tail[:10] + bytes(len(tail) - 18) + tail[-8:]
    with pytest.raises(FormatError, match="s3://b/x: footer unreadable"):
        fetch._row_group_spans(garbled, size, [0], [ROW_GROUP_ROWS] * 8, "s3://b/x")
    disagreeing = (
        r"s3://b/x: its footer's row groups hold \[2000, 2000, 2000, 2000, …\] \(8 row groups\) "
        r"rows, the decision's \[16000\] \(1 row group\)"
    )
    with pytest.raises(FormatError, match=disagreeing):
        fetch._row_group_spans(tail, size, [0], [ROWS], "s3://b/x")
    with pytest.raises(
        FormatError, match=r"s3://b/x: row group \d+, column 0: bytes .* lie outside the file"
    ):
        fetch._row_group_spans(tail, size // 2, [0], [ROW_GROUP_ROWS] * 8, "s3://b/x")
    spans = fetch._row_group_spans(tail, size, [2], [ROW_GROUP_ROWS] * 8, "s3://b/x")
    assert len(spans) == 2 and spans[-1][1] == size and spans[0][1] <= spans[-1][0]


def test_without_local_scratch_space_the_plan_is_streamed(
    bucket, s3_requests, monkeypatch, tmp_path
):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-folder"))
    _check_streamed(bucket, s3_requests, f"s3://{bucket}/scratchless", tmp_path)


def test_a_full_scratch_disk_streams_the_plan_and_leaves_no_copy(bucket, monkeypatch, tmp_path):
    import errno

    location = f"s3://{bucket}/full"
    files = _upload(location)
    Dataset(location).build_index(INDEXES[:1], progress=False)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fetch, "_write_at", full)
    rows = Dataset(location).query(f"id = {RARE}")
    assert _rows(rows) == _expected(files, f"id = {RARE}", tmp_path)
    assert list(scratch.iterdir()) == []
