"""``LIKE '%…%'`` through an ``ngrambf_v1`` index on URLs, in the two layouts that
``benchmarks/substring_search.py`` measures (issue 16, target 5).

URLs are ``https://HOST/SECTION/item/ID`` with 16 random hex digits. In arrival order every
trigram of the ids occurs in every granule: the index keeps everything and says it is saturated
for the predicate. Ordered by URL, a granule holds a narrow range of ids and the index skips most
granules. In both layouts the rows are ClickHouse's (chdb over the same files) and every
granule holding a matching row is kept: no false negative.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from bloomskip.dataset import Dataset
from bloomskip.dataset.report import explain_json

ROWS = 24_576
FILES = 2
ROW_GROUP_ROWS = 4096
INDEX = "INDEX u url TYPE ngrambf_v1(3, 4096, 3, 0)"
PREFIXES = sorted(
    f"https://{host}/{section}/item/"
    for host in ("shop.example.com", "api.example.org")
    for section in ("books", "toys")
)
HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


def _table(prefix: np.ndarray, item: np.ndarray, ids: np.ndarray) -> pa.Table:
    shifts = np.arange(15, -1, -1, dtype=np.uint64) * np.uint64(4)
    digits = HEX[((item[:, None] >> shifts) & np.uint64(15)).astype(np.uint8)]
    hexes = pa.array(np.ascontiguousarray(digits).view("S16").ravel(), pa.binary(16))
    url = pc.binary_join_element_wise(
        pa.array(PREFIXES).take(pa.array(prefix)), hexes.cast(pa.string()), ""
    )
    return pa.table({"id": pa.array(ids), "url": url})


def _write(folder: Path, ordered: bool) -> pa.Table:
    """The same rows in arrival order or in URL order; returns them in file order."""
    rng = np.random.default_rng(16)
    prefix = rng.integers(0, len(PREFIXES), ROWS)
    item = rng.integers(0, 1 << 64, ROWS, dtype=np.uint64)
    ids = np.arange(ROWS, dtype=np.int64)
    if ordered:
        # The prefixes are numbered in byte order and none is a prefix of another; fixed-width
        # hex digits sort as their numbers do.
        order = np.lexsort((item, prefix))
        prefix, item, ids = prefix[order], item[order], ids[order]
    table = _table(prefix, item, ids)
    folder.mkdir(parents=True)
    per_file = ROWS // FILES
    for number in range(FILES):
        part = table.slice(number * per_file, per_file)
        pq.write_table(part, folder / f"web-{number}.parquet", row_group_size=ROW_GROUP_ROWS)
    return table


@pytest.fixture(scope="module")
def layouts(tmp_path_factory) -> dict[str, tuple[Dataset, pa.Table]]:
    base = tmp_path_factory.mktemp("substring")
    built = {}
    for name, ordered, granule in (("random", False, "row-group"), ("sorted", True, 512)):
        folder = base / name
        table = _write(folder, ordered)
        dataset = Dataset(folder)
        dataset.build_index([INDEX], granule=granule, progress=False)
        built[name] = (dataset, table)
    return built


def _clickhouse(chdb_session, dataset: Dataset, where: str) -> list[int]:
    text = chdb_session.query(
        f"SELECT id FROM file('{dataset.path}/*.parquet', Parquet) WHERE {where} ORDER BY id",
        "CSV",
    ).bytes()
    return [int(value) for value in text.decode().split()]


def _needles(table: pa.Table) -> list[str]:
    """10-digit id prefixes of rows spread over the data, and one no row holds."""
    urls = table.column("url").to_pylist()
    picked = [urls[i] for i in range(101, ROWS, ROWS // 5)]
    present = [url[url.index("/item/") + 6 :][:10] for url in picked]
    absent = "0123456789"
    assert not any(absent in url for url in urls)
    return [*present, absent]


def _kept_rows(explanation, table: pa.Table) -> set[int]:
    """The ids of the rows in the granules the index keeps."""
    [outcome] = explanation.indexes
    kept = []
    first = 0
    for state, granule_keep in zip(explanation.files, outcome.granule_keep, strict=True):
        rows = np.asarray(state.entry.granule_rows, np.int64)
        row_keep = np.repeat(granule_keep, rows)
        ids = table.column("id").to_numpy()[first : first + len(row_keep)]
        kept.append(ids[row_keep])
        first += len(row_keep)
    return set(np.concatenate(kept).tolist())


def _patterns(needle: str) -> list[str]:
    return [
        f"url LIKE '%/item/{needle}%'",
        f"url LIKE '%{needle[:4]}_{needle[5:]}%'",
        f"url LIKE '%item/{needle[:3]}%{needle[6:9]}%'",
        f"url LIKE 'https://shop.example.com/%/item/{needle}%'",
        f"url NOT LIKE '%/item/{needle}%'",
    ]


@pytest.mark.parametrize("layout", ["random", "sorted"])
def test_like_returns_clickhouses_rows_and_keeps_every_granule_holding_one(
    layouts, chdb_session, layout
):
    dataset, table = layouts[layout]
    for needle in _needles(table):
        for where in _patterns(needle):
            expected = _clickhouse(chdb_session, dataset, where)
            got = sorted(dataset.query(where, ["id"]).column("id").to_pylist())
            assert got == expected, where
            if "NOT LIKE" not in where:
                missing = set(expected) - _kept_rows(dataset.explain(where), table)
                assert not missing, f"{where}: granules of rows {sorted(missing)[:5]} skipped"


def test_urls_in_url_order_are_pruned(layouts, chdb_session):
    dataset, table = layouts["sorted"]
    for needle in _needles(table):
        where = f"url LIKE '%/item/{needle}%'"
        facts = explain_json(dataset.explain(where), ["url"])
        [entry] = facts["indexes"]
        # 48 granules of 512 rows: the trigrams joining "item/" to the id's first digits occur
        # in about one granule per URL prefix.
        assert entry["granules"] == ROWS // 512
        assert entry["granules_skipped"] >= entry["granules"] - 12, entry
        assert not entry["saturated"]
        assert len(_clickhouse(chdb_session, dataset, where)) <= 1


def test_random_urls_saturate_the_index_for_the_predicate(layouts):
    dataset, table = layouts["random"]
    where = f"url LIKE '%/item/{_needles(table)[0]}%'"
    facts = explain_json(dataset.explain(where), ["url"])
    [entry] = facts["indexes"]
    assert entry["useful"] and entry["saturated"]
    assert entry["granules_skipped"] == 0 and entry["granules"] == ROWS // ROW_GROUP_ROWS
