"""A file rewritten between a query's listing and its read (issue 27, case 1).

A query decides which row groups to read from each file's identity as listed (local: ``stat``
and footer hash; object store: size and ETag), then reads them. A file replaced in between
must never be read with the old version's row-group numbers or index bits: the answer is
exactly the rows DuckDB's full scan of one version holds, or a one-line error saying the file
changed. Each test replaces the file between ``explain`` and ``run`` (the decision's window),
or keeps rewriting it while queries run.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip import Dataset
from bloomskip._store import open_store
from bloomskip.errors import StaleSourceError

WHERE = "id = 3500"
INDEX = ["INDEX id_bf id TYPE bloom_filter(0.01)"]
NAME = "part-0.parquet"


def _version(path: Path, ids: list[int], row_group_size: int, tag: str) -> None:
    """A Parquet file of ``ids`` (each row tagged with its version) in row groups of a size."""
    table = pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{tag}-{i}" for i in ids]})
    pq.write_table(table, path, row_group_size=row_group_size)


@pytest.fixture
def versions(tmp_path) -> tuple[Path, Path]:
    """Two versions of one file, both holding id 3500: A in row group 3 of four, B (with
    another row count) in row group 0 of six, twice."""
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    _version(first, list(range(4000)), 1000, "a")
    _version(second, [3500, 3500] + list(range(10_000, 12_998)), 500, "b")
    return first, second


def _rows(path: Path) -> list[tuple]:
    """The reference: DuckDB's full scan of one version."""
    query = f"SELECT id, v FROM read_parquet('{path}') WHERE {WHERE} ORDER BY v"
    return duckdb.sql(query).fetchall()


def _answer(table: pa.Table) -> list[tuple]:
    return sorted(zip(table.column("id").to_pylist(), table.column("v").to_pylist(), strict=True))


def _local(kind: str, folder: Path, tmp_path: Path):
    if kind == "sidecar":
        return Dataset(folder)
    return Dataset(folder, index_location=str(tmp_path / "index"))


def _replace_locally(target: Path, source: Path, mtime_ns: int | None = None) -> None:
    """Atomically put a copy of ``source`` at ``target`` (a writer's rename), optionally with
    the modification time the index recorded (so that the index applies to it again)."""
    staging = target.parent / f"_staging-{threading.get_ident()}"
    staging.write_bytes(source.read_bytes())
    if mtime_ns is not None:
        os.utime(staging, ns=(mtime_ns, mtime_ns))
    os.replace(staging, target)


@pytest.mark.parametrize("kind", ["sidecar", "segmented"])
def test_a_local_file_replaced_after_explain_is_read_at_its_new_version(kind, versions, tmp_path):
    first, second = versions
    folder = tmp_path / "data"
    folder.mkdir()
    _replace_locally(folder / NAME, first)
    ds = _local(kind, folder, tmp_path)
    ds.build_index(INDEX, progress=False)
    explanation = ds.explain(WHERE)
    assert [group for _, group in explanation.row_groups()] == [3]  # the index pruned A
    _replace_locally(folder / NAME, second)
    assert _answer(ds.run(explanation, WHERE)) == _rows(second)


def test_an_object_replaced_after_explain_is_read_at_its_new_version(versions, bucket):
    first, second = versions
    location = f"s3://{bucket}/race"
    store = open_store(location)
    store.put(NAME, first.read_bytes())
    ds = Dataset(location)
    ds.build_index(INDEX, progress=False)
    explanation = ds.explain(WHERE)
    assert [group for _, group in explanation.row_groups()] == [3]
    store.put(NAME, second.read_bytes())
    before = ds.store.stats.by_kind.get("head", 0)
    assert _answer(ds.run(explanation, WHERE)) == _rows(second)
    # The read pinned to the listed ETag failed; one HEAD (one file: fewer requests than
    # listing again) confirmed the change, and the query read the file again as it is now,
    # pinned to its new ETag, which needs no check after.
    assert ds.store.stats.by_kind.get("head", 0) - before == 1


def _two_copies(location: str, version):
    """An indexed dataset at ``location`` of two copies of ``version``; and its store."""
    store = open_store(location)
    store.put(NAME, version.read_bytes())
    store.put("part-1.parquet", version.read_bytes())
    ds = Dataset(location)
    ds.build_index(INDEX, progress=False)
    return ds, store


def test_unchanged_objects_are_read_pinned_and_not_checked_after(versions, bucket):
    # Issue 33 changed this: two files read were checked by two HEADs, then by one new
    # listing of the prefix; the reads pinned to the listed ETags need neither.
    first, _ = versions
    ds, _ = _two_copies(f"s3://{bucket}/steady", first)
    explanation = ds.explain(WHERE)
    before = dict(ds.store.stats.by_kind)
    assert _answer(ds.run(explanation, WHERE)) == _rows(first) * 2
    assert ds.store.stats.by_kind.get("head", 0) == before.get("head", 0)
    assert ds.store.stats.by_kind["list"] == before["list"]
    assert ds.store.stats.by_kind["get"] - before.get("get", 0) == 2
    # A file the index skipped whole is not read, nor checked: one footer is, for the
    # result's types (the tail of a file, as its whole when it is small).
    absent = next(
        f"id = {value}"
        for value in range(-1, -100, -1)
        if not ds.explain(f"id = {value}").row_groups()
    )
    explanation = ds.explain(absent)
    before = dict(ds.store.stats.by_kind)
    empty = ds.run(explanation, absent)
    assert (empty.num_rows, empty.schema.names) == (0, ["id", "v"])
    assert ds.store.stats.by_kind["get"] - before["get"] == 1
    assert ds.store.stats.by_kind.get("head", 0) == before.get("head", 0)
    assert ds.store.stats.by_kind["list"] == before["list"]


def test_an_object_replaced_among_several_read_is_read_at_its_new_version(versions, bucket):
    # The failed pinned read is checked by one new listing (cheaper than a HEAD each): it
    # sees the replacement as a HEAD would.
    first, second = versions
    ds, store = _two_copies(f"s3://{bucket}/several", first)
    explanation = ds.explain(WHERE)
    assert [group for _, group in explanation.row_groups()] == [3, 3]
    store.put(NAME, second.read_bytes())
    before = ds.store.stats.by_kind.get("head", 0)
    assert _answer(ds.run(explanation, WHERE)) == sorted(_rows(first) + _rows(second))
    assert ds.store.stats.by_kind.get("head", 0) == before


QUERIES = 50


@pytest.mark.parametrize("kind", ["sidecar", "segmented", "s3"])
def test_queries_racing_a_rewriter_answer_one_version_or_say_it_changed(
    kind, versions, tmp_path, request
):
    first, second = versions
    expected = [_rows(first), _rows(second)]
    if kind == "s3":
        location = f"s3://{request.getfixturevalue('bucket')}/flip"
        store = open_store(location)
        store.put(NAME, first.read_bytes())
        ds = Dataset(location)

        def write(source: Path) -> None:
            # Each write is new bytes (a new ETag): a check after the read cannot tell an
            # object written back byte for byte within the second (docs/queries.md).
            table = pq.read_table(source)
            written = table.replace_schema_metadata({"write": str(time.monotonic_ns())})
            sink = pa.BufferOutputStream()
            pq.write_table(
                written, sink, row_group_size=pq.ParquetFile(source).metadata.row_group(0).num_rows
            )
            store.put(NAME, sink.getvalue().to_pybytes())
    else:
        folder = tmp_path / "data"
        folder.mkdir()
        _replace_locally(folder / NAME, first)
        indexed_mtime = (folder / NAME).stat().st_mtime_ns
        ds = _local(kind, folder, tmp_path)

        def write(source: Path) -> None:
            # A again with A's modification time: the sidecar's identity matches, the index
            # prunes it (the segmented index, which records the change time, scans it).
            _replace_locally(folder / NAME, source, indexed_mtime if source == first else None)

    ds.build_index(INDEX, progress=False)
    # A rewrite every few queries: some queries read a file that changes under them, most
    # read one that does not (a query on the S3 server takes longer).
    pause = 0.2 if kind == "s3" else 0.05
    stop = threading.Event()

    def rewrite() -> None:
        flip = 0
        while not stop.is_set():
            flip += 1
            write(second if flip % 2 else first)
            stop.wait(pause)

    writer = threading.Thread(target=rewrite)
    writer.start()
    answered = changed = 0
    try:
        for _ in range(QUERIES):
            try:
                rows = _answer(ds.query(WHERE))
            except StaleSourceError as exc:
                assert "\n" not in str(exc) and "changed while" in str(exc)
                changed += 1
                continue
            assert rows in expected, rows
            answered += 1
    finally:
        stop.set()
        writer.join()
    assert answered + changed == QUERIES and answered


def test_a_table_file_replaced_after_explain_is_read_at_its_new_version(versions, tmp_path):
    # Before: a Delta or Iceberg table's query read the decision's row groups without checking
    # the files afterwards, so a data file replaced behind the log between explain and run was
    # read with the old version's row-group numbers: id 3500, in row group 0 of B, was lost.
    deltalake = pytest.importorskip("deltalake")
    first, second = versions
    location = tmp_path / "table"
    deltalake.write_deltalake(
        str(location),
        pq.read_table(first),
        writer_properties=deltalake.WriterProperties(max_row_group_size=1000),
    )
    (data_file,) = location.glob("*.parquet")
    ds = Dataset(location)
    ds.build_index(INDEX, progress=False)
    explanation = ds.explain(WHERE)
    kept = [group for _, group in explanation.row_groups()]
    # The index pruned A to the row group holding 3500 (where deltalake put it); B holds it
    # in row group 0 only, which the decision did not keep.
    assert len(kept) == 1 and kept != [0]
    _replace_locally(data_file, second)
    assert _answer(ds.run(explanation, WHERE)) == _rows(second)
    # Decided again from the new listing: the file now differs from the log, and is scanned.
    assert any("changed behind" in line for line in ds.explain(WHERE).warnings)
