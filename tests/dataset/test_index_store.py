"""One index-store interface over both layouts, and listings as objects (issue 28, items 1-3).

Every dataset holds an ``IndexStore`` (``Dataset.index``): a single-file sidecar or a segmented
index answer the same questions (layout, location, definitions, size) and take the same
maintenance (drop one index, drop all), so that a new layout is a new store.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bloomskip
from bloomskip import BloomskipError, FormatError
from bloomskip.dataset.index.store import IndexStore, SegmentStore, SidecarStore
from bloomskip.dataset.listing.folder import FolderListing
from bloomskip.dataset.listing.local import LocalListing
from bloomskip.dataset.listing.tables.listing import TableListing

deltalake = pytest.importorskip("deltalake")

INDEXES = ["user_id TYPE bloom_filter(0.01)", "INDEX m msg TYPE tokenbf_v1(512, 2, 0)"]


def _table(start: int, rows: int = 500) -> pa.Table:
    return pa.table(
        {
            "user_id": pa.array(range(start, start + rows), pa.int64()),
            "msg": [f"m{i} x" for i in range(start, start + rows)],
        }
    )


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    for number in range(3):
        pq.write_table(_table(number * 500), data / f"p{number}.parquet", row_group_size=100)
    return data


def _datasets(folder: Path, tmp_path: Path):
    delta = tmp_path / "delta"
    deltalake.write_deltalake(str(delta), pa.concat_tables([_table(0), _table(500)]))
    return [
        (bloomskip.Dataset(folder), LocalListing, SegmentStore, "segmented", folder / "_bloomskip"),
        (
            bloomskip.Dataset(folder, sidecar=folder / "_bloomskip.index"),
            FolderListing,
            SidecarStore,
            "sidecar",
            folder / "_bloomskip.index",
        ),
        (
            bloomskip.Dataset(folder, index_location=tmp_path / "elsewhere"),
            LocalListing,
            SegmentStore,
            "segmented",
            tmp_path / "elsewhere",
        ),
        (bloomskip.Dataset(delta), TableListing, SegmentStore, "segmented", delta / "_bloomskip"),
    ]


def test_every_layout_answers_the_same_questions(folder: Path, tmp_path: Path) -> None:
    for dataset, listing, kind, layout, location in _datasets(folder, tmp_path):
        assert type(dataset.listing) is listing
        store = dataset.index
        assert isinstance(store, IndexStore) and type(store) is kind
        assert store.layout == layout and dataset.segmented == (layout == "segmented")
        assert Path(store.location) == location
        assert store.definitions() is None and store.size() == 0  # nothing built yet
        report = dataset.build_index(INDEXES, progress=False)
        assert report.index == store.location and report.layout == layout
        definitions = store.definitions()
        assert [spec.definition.split()[1] for spec in definitions.indexes] == ["user_id", "m"]
        assert definitions.granule == "row-group"
        assert store.size() == report.index_bytes > 0
        status = dataset.status()
        assert store.size() == status["segment_bytes" if layout == "segmented" else "index_bytes"]

        store.drop_index("m")
        assert [spec.definition.split()[1] for spec in store.definitions().indexes] == ["user_id"]
        ids = dataset.query("user_id = 777", ["user_id"]).column("user_id").to_pylist()
        assert ids == [777]
        with pytest.raises(BloomskipError, match="m"):
            store.drop_index("m")  # gone: the names left are listed
        assert store.drop() >= 1
        assert store.definitions() is None and store.size() == 0
        if layout == "sidecar":
            with pytest.raises(BloomskipError, match="no index at"):
                store.drop()


def test_a_sidecar_is_verified_once_per_change_of_its_stat(folder: Path) -> None:
    dataset = bloomskip.Dataset(folder, sidecar=folder / "_bloomskip.index")
    dataset.build_index(INDEXES[:1], progress=False)
    store = dataset.index
    first = store.load()
    assert store.load() is first  # unchanged: not read again
    dataset.build_index(INDEXES[1:], progress=False)  # rewritten with a second index
    second = store.load()
    assert second is not first and len(second.indexes) == 2

    # A sidecar damaged in place is read again (its stat changed) and refused, named.
    data = bytearray(store.path.read_bytes())
    data[40] ^= 0xFF
    store.path.write_bytes(bytes(data))
    os.utime(store.path, ns=(1, 1))
    with pytest.raises(FormatError, match="_bloomskip.index"):
        store.load()
    # A query is not an error: it scans, and says why.
    explanation = dataset.explain("user_id = 5")
    assert any("index ignored" in line for line in explanation.warnings)
    assert dataset.query("user_id = 5", ["user_id"]).num_rows == 1


def test_a_segment_read_once_is_not_read_again(folder: Path, tmp_path: Path, monkeypatch) -> None:
    # Before: every query fetched and verified the sections of every segment it used again
    # (a warm point lookup through an index kept elsewhere spent ~3 ms of 18 on it).
    from bloomskip.dataset.index import store as store_module

    dataset = bloomskip.Dataset(folder, index_location=tmp_path / "elsewhere")
    dataset.build_index(INDEXES, progress=False)
    first = dataset.explain("user_id = 777")
    assert first.io["index_bytes"] > 0
    again = dataset.explain("user_id = 777")
    assert again.io["index_bytes"] == 0  # the manifest and the segment's part are kept
    assert again.row_groups() == first.row_groups()
    # A token search needs the other index's part: its header and the token's slices are read,
    # then kept; another token or value reads its own few slices only (the parts are sliced).
    assert dataset.explain("hasToken(msg, 'm1500')").io["index_bytes"] > 0
    assert dataset.explain("hasToken(msg, 'm1500')").io["index_bytes"] == 0
    (segment,) = dataset.index.latest().segments
    for where in ("hasToken(msg, 'm1501')", "user_id = 778"):
        read = dataset.explain(where).io["index_bytes"]
        # (0 when the slices it tests came with an earlier read: small parts' slices coalesce)
        assert read < min(length for _, length, _, _ in segment.index_spans) // 4, where
        assert dataset.explain(where).io["index_bytes"] == 0, where

    # A new segment (another file indexed) is read; the kept ones are bounded in bytes.
    pq.write_table(_table(5000), folder / "p9.parquet", row_group_size=100)
    dataset.build_index(progress=False)
    monkeypatch.setattr(store_module, "SEGMENT_CACHE_BYTES", 1)
    after = dataset.explain("user_id = 5001")
    assert after.io["index_bytes"] > 0 and [Path(p).name for p, _ in after.row_groups()] == [
        "p9.parquet"
    ]
    assert len(dataset.index._views) == 1  # the most recent segment only
    assert dataset.query("user_id = 5001", ["user_id"]).column("user_id").to_pylist() == [5001]


def test_both_layouts_keep_derived_state_under_one_rule(folder: Path, tmp_path: Path) -> None:
    # One cache policy (backends/cache.py): what a dataset derives is kept while its files as
    # listed and its index are unchanged, and dropped whole when any of them changes. Before:
    # a segmented index unified its files' schemas again for every query.
    for dataset in (
        bloomskip.Dataset(folder, sidecar=tmp_path / "side.index"),
        bloomskip.Dataset(folder, index_location=tmp_path / "elsewhere"),
    ):
        dataset.build_index(INDEXES, progress=False)
        cache = dataset.backend._cache
        assert dataset.query("user_id = 5", ["user_id"]).num_rows == 1
        schema, engines = cache.schema, dict(cache.engines)
        assert schema is not None and engines
        assert dataset.query("user_id = 6", ["user_id"]).num_rows == 1
        assert cache.schema is schema and cache.engines.keys() >= engines.keys()
        added = folder / f"new-{dataset.index.layout}.parquet"
        pq.write_table(_table(9000), added, row_group_size=100)
        assert dataset.query("user_id = 9001", ["user_id"]).num_rows == 1  # scanned: new
        assert cache.schema is not schema
        added.unlink()
