"""A ``sparse_grams`` index over Parquet files, in the sidecar and in the segmented (bit-sliced)
layout: the rows equal ClickHouse's (chdb over the same files), the index skips granules, and
every granule holding a matching row is kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip.dataset import Dataset

ROWS = 12_000
INDEX = "INDEX sg url TYPE sparse_grams(3, 100, 2048, 3, 0)"
PREDICATES = [
    "url LIKE '%/item/4242/%'",
    "url LIKE '%/item/42%'",
    "url LIKE '%/tag/7/edit%'",
    "url LIKE '%/item/9_9/%'",
    "url = 'https://shop.example/item/77/view?u=1'",
    "url IN ('https://shop.example/user/13/edit#5', 'nothing')",
    "startsWith(url, 'https://例え.jp/tag/12')",
    "endsWith(url, '/view?u=1')",
    "multiSearchAny(url, ['/item/1234/', '/user/999/'])",
    "match(url, 'item/(11|12)/v')",
    "url LIKE '%no such text%'",
    "url NOT LIKE '%/item/42%'",
]


def _write(folder: Path) -> None:
    rng = np.random.default_rng(32)
    section = rng.choice(["item", "user", "tag"], ROWS)
    host = rng.choice(["https://shop.example", "http://x.org", "https://例え.jp"], ROWS)
    ids = np.sort(rng.integers(0, 5000, ROWS))  # ordered: a granule holds a narrow id range
    tails = rng.choice(["/view?u=1", "/edit#5", "/view?u=2"], ROWS)
    url = [f"{h}/{s}/{i}{t}" for h, s, i, t in zip(host, section, ids, tails, strict=True)]
    table = pa.table({"id": pa.array(np.arange(ROWS)), "url": pa.array(url)})
    folder.mkdir(parents=True)
    for number in range(2):
        part = table.slice(number * ROWS // 2, ROWS // 2)
        pq.write_table(part, folder / f"part-{number}.parquet", row_group_size=3000)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, Dataset]:
    base = tmp_path_factory.mktemp("sparse_grams")
    _write(base / "data")
    sidecar = Dataset(base / "data")
    sidecar.build_index([INDEX], granule=500, progress=False)
    segmented = Dataset(base / "data", index_location=base / "segments")
    segmented.build_index([INDEX], granule=500, progress=False)
    return {"sidecar": sidecar, "segmented": segmented}


def _clickhouse(chdb_session, folder: Path, where: str) -> list[int]:
    text = chdb_session.query(
        f"SELECT id FROM file('{folder}/*.parquet', Parquet) WHERE {where} ORDER BY id", "CSV"
    ).bytes()
    return [int(value) for value in text.decode().split()]


@pytest.mark.parametrize("layout", ["sidecar", "segmented"])
def test_rows_equal_clickhouse_and_pruning_keeps_them(datasets, chdb_session, layout) -> None:
    dataset = datasets[layout]
    folder = Path(datasets["sidecar"].path)
    skipped_somewhere = False
    for where in PREDICATES:
        expected = _clickhouse(chdb_session, folder, where)
        got = sorted(dataset.query(where, ["id"]).column("id").to_pylist())
        assert got == expected, where
        explanation = dataset.explain(where)
        [outcome] = explanation.indexes
        kept_ids: list[int] = []
        first = 0
        for state, keep in zip(explanation.files, outcome.granule_keep, strict=True):
            rows = np.repeat(keep, np.asarray(state.entry.granule_rows, np.int64))
            ids = np.arange(first, first + rows.size)
            kept_ids += ids[rows].tolist()
            first += rows.size
        if "NOT LIKE" not in where:
            assert set(expected) <= set(kept_ids), where
        skipped_somewhere |= len(kept_ids) < ROWS
    assert skipped_somewhere


def test_layouts_decide_alike(datasets) -> None:
    for where in PREDICATES:
        sidecar = datasets["sidecar"].explain(where).indexes[0].granule_keep
        segmented = datasets["segmented"].explain(where).indexes[0].granule_keep
        assert [k.tolist() for k in sidecar] == [k.tolist() for k in segmented], where


def test_needle_pruning_is_selective(datasets) -> None:
    explanation = datasets["sidecar"].explain("url LIKE '%/item/4242/%'")
    kept = sum(int(k.sum()) for k in explanation.indexes[0].granule_keep)
    total = sum(k.size for k in explanation.indexes[0].granule_keep)
    assert kept <= total // 4, (kept, total)
