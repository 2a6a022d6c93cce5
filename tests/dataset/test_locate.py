"""Where a dataset location points, decided before any format code loads (issue 28)."""

from __future__ import annotations

import doctest
import importlib
import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip._store import open_store
from bloomskip.dataset.build.segment_writer import SegmentWriter
from bloomskip.dataset.listing.prefix import ListedFile
from bloomskip.dataset.locate import is_remote, table_format


@pytest.mark.parametrize(
    "module", ["bloomskip.dataset.locate", "bloomskip.dataset.build.segment_writer"]
)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_a_local_folder_is_told_apart_by_its_contents(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(pa.table({"a": [1]}), plain / "p.parquet")
    delta = tmp_path / "delta"
    (delta / "_delta_log").mkdir(parents=True)
    iceberg = tmp_path / "iceberg"
    (iceberg / "metadata").mkdir(parents=True)
    (iceberg / "metadata" / "v1.metadata.json").write_text("{}")
    empty_metadata = tmp_path / "not-iceberg"
    (empty_metadata / "metadata").mkdir(parents=True)
    assert table_format(plain) is None
    assert table_format(plain / "p.parquet") is None
    assert table_format(f"{plain}/*.parquet") is None
    assert table_format(delta) == "delta" and table_format(f"file://{delta}/") == "delta"
    assert table_format(iceberg) == "iceberg"
    assert table_format(empty_metadata) is None
    assert table_format(tmp_path / "missing") is None
    assert not is_remote(plain) and not is_remote(f"file://{plain}")
    assert is_remote("s3://bucket/logs") and is_remote("gs://bucket/logs")


def test_a_segment_writer_travels_without_its_open_stores(tmp_path: Path) -> None:
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "p.parquet")
    writer = SegmentWriter(str(tmp_path), str(tmp_path / "_bloomskip"))
    assert writer.store is not None and writer.log is not None  # opened in the driver
    copy = pickle.loads(pickle.dumps(writer))
    assert copy._store is None and copy._log is None and copy._arrow is None
    (info,) = open_store(str(tmp_path)).list("")
    assert copy.read_schema(ListedFile(info.key, info)).names == ["a"]
