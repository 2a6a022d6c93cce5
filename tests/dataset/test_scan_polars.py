"""``Dataset.scan_polars()``: Polars' own filters, pruned by the index, Polars' own rows.

Random predicate trees of atoms the index can use and atoms it cannot, under ``&``, ``|`` and
``~``, must give exactly the frame ``pl.scan_parquet`` gives over the same files (values and
types), with projection and ``head``; and a point lookup must map to the index's atom.
"""

from __future__ import annotations

import random

import polars as pl
import pyarrow.parquet as pq
import pytest
from dataset_fixtures import write_indexed_parts

from bloomskip.dataset import Dataset
from bloomskip.dataset.engines.polars_scan import polars_where
from bloomskip.errors import BloomskipError

FILES, ROWS, GROUP = 3, 3_000, 300


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scan-polars") / "data"
    write_indexed_parts(folder, FILES, ROWS, GROUP, 90, granule=100)
    return folder, sorted(str(path) for path in folder.glob("*.parquet")), Dataset(folder)


def _atoms(files: list[str], rng: random.Random) -> list[pl.Expr]:
    ks = pl.scan_parquet(files).select("k").drop_nulls().collect()["k"].to_list()
    words = ["alpha", "error", "café", "x1", "500", "naïve", "zzz-none", "GET", "a_b"]
    return [
        pl.col("k") == rng.choice(ks),
        pl.col("k") == 987654321,
        pl.col("k").is_in([rng.choice(ks) for _ in range(4)]),
        pl.col("s").str.contains(rng.choice(words), literal=True),
        pl.col("s").str.contains(rng.choice(words)),
        pl.col("s").str.starts_with(rng.choice(words)),
        pl.col("s").str.ends_with(rng.choice(words)),
        pl.col("d") == rng.choice(["red", "blue", "none"]),
        pl.col("v") > 0.5,
        pl.col("k").is_null(),
        pl.col("k") > rng.choice(ks),
        pl.col("tags").list.len() > 2,
        pl.col("k").eq_missing(rng.choice(ks)),
    ]


def _tree(atoms: list[pl.Expr], rng: random.Random, depth: int) -> pl.Expr:
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(atoms)
    shape = rng.random()
    if shape < 0.15:
        return ~_tree(atoms, rng, depth - 1)
    left, right = _tree(atoms, rng, depth - 1), _tree(atoms, rng, depth - 1)
    return left & right if shape < 0.6 else left | right


def test_random_filters_give_polars_own_rows(lake):
    folder, files, dataset = lake
    frame = dataset.scan_polars()
    assert frame.collect_schema() == pl.scan_parquet(files).collect_schema()
    rng = random.Random(5)
    mapped = 0
    for _ in range(80):
        predicate = _tree(_atoms(files, rng), rng, 3)
        got = frame.filter(predicate).sort("id").collect()
        expected = pl.scan_parquet(files).filter(predicate).sort("id").collect()
        assert got.equals(expected), str(predicate)
        assert got.schema == expected.schema
        kinds = {"k": "int", "s": "string", "d": "string", "v": "float64", "id": "int"}
        mapped += polars_where(predicate, kinds) is not None
    assert mapped > 20, mapped


def test_projection_head_and_the_index_atom(lake):
    folder, files, dataset = lake
    k = pl.scan_parquet(files).select("k").drop_nulls().collect()["k"][1234]
    predicate = (pl.col("k") == k) & (pl.col("v").is_not_null())
    assert polars_where(predicate, {"k": "int", "v": "float64"}) == f"(`k` = {k})"
    frame = dataset.scan_polars().filter(predicate).select("id", "k")
    expected = pl.scan_parquet(files).filter(predicate).select("id", "k").collect()
    assert frame.collect().sort("id").equals(expected.sort("id"))
    every = dataset.scan_polars().filter(pl.col("d") == "red")
    assert every.head(7).collect().height == 7
    assert every.select(pl.len()).collect().item() == (
        pl.scan_parquet(files).filter(pl.col("d") == "red").select(pl.len()).collect().item()
    )
    assert dataset.explain(f"k = {k}").plan.rows < FILES * ROWS // 10


def test_the_mapping_keeps_polars_meaning():
    kinds = {"k": "int", "u": "uint", "s": "string"}
    assert polars_where(pl.col("s").str.contains("a%_\\", literal=True), kinds) == (
        "`s` LIKE '%a\\\\%\\\\_\\\\\\\\%'"
    )
    assert polars_where(pl.col("s").str.contains("a.b"), kinds) is None  # a regular expression
    assert polars_where(pl.col("k") == "5", kinds) is None  # a string against an integer
    assert polars_where(pl.col("k") == -5, kinds) is None
    assert polars_where(~(pl.col("k") == 5), kinds) is None
    assert polars_where((pl.col("k") == 5) | (pl.col("k") > 9), kinds) is None
    assert polars_where(pl.col("s").is_in(["a", "b'c"]), kinds) == "`s` IN ('a', 'b\\'c')"


def test_columns_of_different_types_are_refused(tmp_path):
    import pyarrow as pa

    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"a": ["x", "y"]}), tmp_path / "b.parquet")
    with pytest.raises(BloomskipError, match="differ in type: a"):
        Dataset(tmp_path).scan_polars()


def test_arrow_ipc_and_a_file_with_one_more_column_are_read(tmp_path):
    import pyarrow as pa
    import pyarrow.feather as feather

    ipc = tmp_path / "ipc"
    ipc.mkdir()
    feather.write_feather(pa.table({"k": [1, 2, 3], "s": ["a", "b", "c"]}), ipc / "a.arrow")
    feather.write_feather(pa.table({"k": [4, 5], "s": ["d", "e"]}), ipc / "b.arrow")
    wide = tmp_path / "wide"
    wide.mkdir()
    pq.write_table(pa.table({"k": [1, 2, 3], "s": ["a", "b", "c"]}), wide / "a.parquet")
    pq.write_table(pa.table({"k": [6, 7], "s": ["f", "g"], "x": [1.5, 2.5]}), wide / "c.parquet")
    expected = {
        ipc: ([(2, "b"), (5, "e")], ["k", "s"]),
        wide: ([(2, "b", None), (7, "g", 2.5)], ["k", "s", "x"]),
    }
    for folder, (rows, columns) in expected.items():
        dataset = Dataset(folder)
        dataset.build_index(["k TYPE bloom_filter(0.01)"], progress=False)
        frame = dataset.scan_polars().filter(pl.col("k").is_in([2, 5, 7])).collect()
        assert sorted(frame.rows()) == rows
        assert frame.columns == columns
