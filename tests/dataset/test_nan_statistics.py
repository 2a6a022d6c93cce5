"""NaN in float columns whose Parquet statistics leave NaN out, against ClickHouse (chdb).

The Parquet format asks writers to leave NaN out of a column chunk's min/max, and pyarrow does.
DuckDB 2.0.1 then decides ``isnan`` from those statistics: ``isnan(f)`` is false for every row,
NaN rows included. Before, ``isNaN(f)`` found no row, and the NaN guard of float comparisons
fell away, so that ``f > 5`` also returned the NaN rows (DuckDB orders NaN above every number).
A DuckDB scan of the whole dataset gives the same wrong rows, so ClickHouse is the reference.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chdb.session import Session

from bloomskip.dataset import Dataset

WHERES = [
    "isNaN(f)",
    "NOT isNaN(f)",
    "NOT isNaN(f) AND id < 500",
    "NOT (isNaN(f) OR isNaN(g))",
    "id = 10 AND isNaN(f)",
    "id = 11 AND isNaN(f)",
    "f > 5",
    "f < 5",
    "NOT (f < 5)",
    "f >= 995",
    "f != 1",
    "f = 7",
    "f IN (7, 20, 21)",
    "f = f",
    "NOT (f = f)",
    "isNaN(g) OR f = 3",
    "g > 0.5",
]


@pytest.fixture(scope="module")
def nan_data(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("nan") / "data"
    directory.mkdir()
    f = np.arange(1000, dtype=np.float64)
    f[::10] = np.nan
    f[5::100], f[6::100] = np.inf, -np.inf  # neither finite nor NaN
    g = (np.arange(1000) % 7 / 7).astype(np.float32)
    g[3::50] = np.nan
    table = pa.table({"id": np.arange(1000, dtype=np.int64), "f": f, "g": g})
    pq.write_table(table, directory / "a.parquet", row_group_size=100)
    statistics = pq.ParquetFile(directory / "a.parquet").metadata.row_group(0).column(1).statistics
    assert statistics.has_min_max and not np.isnan(statistics.max)  # NaN left out, as asked
    return directory


@pytest.mark.parametrize("indexed", [False, True])
@pytest.mark.parametrize("where", WHERES)
def test_nan_rows_are_those_clickhouse_returns(
    nan_data: Path, chdb_session: Session, where: str, indexed: bool, tmp_path: Path
) -> None:
    sidecar = tmp_path / "index"
    dataset = Dataset(nan_data, sidecar=sidecar)
    if indexed:
        dataset.build_index(
            ["id TYPE bloom_filter(0.01)", "f TYPE bloom_filter(0.01)"], progress=False
        )
    text = chdb_session.query(
        f"SELECT id FROM file('{nan_data}/a.parquet', Parquet) WHERE {where} ORDER BY id", "CSV"
    ).bytes()
    expected = [int(value) for value in text.decode().split()]
    got = sorted(dataset.query(where, ["id"]).column("id").to_pylist())
    assert got == expected, f"{where}: {len(got)} rows, ClickHouse {len(expected)}"
