"""A ``parquet_bloom_filter`` index over an Iceberg table (pyiceberg writing through a SQLite
catalog): the filters are found under the file's own column names after a rename, an int
column promoted to long keeps hashing its old files as INT32, and every lookup returns
pyiceberg's rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from bloomskip import Dataset

pyiceberg = pytest.importorskip("pyiceberg")
from pyiceberg.catalog.sql import SqlCatalog  # noqa: E402
from pyiceberg.types import LongType  # noqa: E402

CATALOG = "bloomskippbf"


@pytest.fixture
def catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SqlCatalog:
    properties = {"uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{tmp_path}/w"}
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{CATALOG.upper()}__TYPE", "sql")
    for key, value in properties.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__{CATALOG.upper()}__{key.upper()}", value)
    catalog = SqlCatalog(CATALOG, **properties)
    catalog.create_namespace("ns")
    return catalog


def _rows(first: int, count: int, text: str = "s", wide: bool = False) -> pa.Table:
    ids = np.arange(first, first + count, dtype=np.int64)
    n = (ids % 500) - 250
    if wide:
        n = np.where(ids % 2 == 0, n, n * 10_000_019)
    return pa.table(
        {
            "id": pa.array(ids),
            "n": pa.array(n, pa.int64() if wide else pa.int32()),
            text: pa.array([f"m{i} word{i % 7}" for i in ids.tolist()]),
        }
    )


def _ids(dataset: Dataset, where: str) -> list[int]:
    return sorted(dataset.query(where, columns=["id"])["id"].to_pylist())


def _reference(table, row_filter: str) -> list[int]:
    return sorted(table.scan(row_filter=row_filter).to_arrow()["id"].to_pylist())


def test_renamed_and_promoted_columns_keep_their_rows(catalog) -> None:
    uri = f"iceberg://{CATALOG}/ns.events"
    first = _rows(0, 2_000)
    table = catalog.create_table(
        "ns.events", schema=first.schema, properties={"write.parquet.row-group-limit": "200"}
    )
    table.append(first)
    indexes = ["INDEX n_pbf n TYPE parquet_bloom_filter", "INDEX s_pbf s TYPE parquet_bloom_filter"]
    Dataset(uri).build_index(indexes, progress=False)
    with table.update_schema() as update:
        update.rename_column("s", "text")
        update.update_column("n", LongType())
    table = catalog.load_table("ns.events")
    table.append(_rows(5_000, 600, "text", wide=True))
    table = catalog.load_table("ns.events")
    Dataset(uri).build_index(progress=False)
    dataset = Dataset(uri)
    lookups = ["text = 'm17 word3'", "text = 'm5017 word5'", "n = -200", "n = -2490004731"]
    for where in lookups:
        assert _ids(dataset, where) == _reference(table, where), where
        explanation = dataset.explain(where)
        assert len(explanation.row_groups()) <= 9, where  # of 13; n = -200 is in 6
