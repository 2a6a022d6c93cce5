"""Harvesting a file's Bloom filters for an index, and the = / IN rule of DuckDB's
``parquet_bloom_probe``: the row groups kept equal DuckDB's where the writer stored the filter,
and a computed filter (a chunk that carries none) never drops a row group holding the value."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from bloomskip.errors import FormatError
from bloomskip.parquet.harvest import harvest_filters, row_groups_passing

ROWS, GROUP = 40_000, 10_000


@pytest.fixture(scope="module")
def mixed_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``k`` and ``s`` carry filters (pyarrow's); ``f`` and ``l`` do not."""
    rng = np.random.default_rng(7)
    path = tmp_path_factory.mktemp("harvest") / "mixed.parquet"
    k = rng.integers(0, 10**9, ROWS)
    table = pa.table(
        {
            "k": pa.array(k),
            "s": pa.array([f"s{v}" for v in k]),
            "f": pa.array(np.where(np.arange(ROWS) % 1000 == 0, -0.0, k / 8.0)),
            "l": pa.array([[int(v), int(v) + 1] for v in k]),
        }
    )
    pq.write_table(table, path, row_group_size=GROUP, bloom_filter_options={"k": True, "s": True})
    return path


def _duckdb_keeps(path: Path, column: str, literal: str) -> np.ndarray:
    rows = duckdb.sql(
        f"SELECT row_group_id, bloom_filter_excludes FROM parquet_bloom_probe('{path}', "
        f"'{column}', {literal}) ORDER BY row_group_id"
    ).fetchall()
    return np.array([not excludes for _rg, excludes in rows])


def test_harvest_reads_stored_filters_and_computes_the_rest(mixed_file: Path) -> None:
    harvest = harvest_filters(mixed_file, ["k", "s", "f", "l.list.element"])
    assert harvest.harvested == 8 and harvest.computed == 8
    assert all(len(filters) == 4 for filters in harvest.filters.values())
    table = pq.read_table(mixed_file)
    for rg in range(4):
        rows = table.slice(rg * GROUP, GROUP)
        for column, values in [
            ("k", rows["k"]),
            ("s", rows["s"]),
            ("f", rows["f"]),
            ("l.list.element", pc.list_flatten(rows["l"])),
        ]:
            assert harvest.filters[column][rg].contains_batch(values).all(), (column, rg)


@pytest.mark.parametrize("column", ["k", "s"])
def test_row_groups_equal_duckdb_where_the_writer_stored_filters(
    mixed_file: Path, column: str
) -> None:
    filters = harvest_filters(mixed_file, [column]).filters[column]
    table = pq.read_table(mixed_file, columns=[column])[column]
    present = [table[i].as_py() for i in (0, GROUP + 5, 3 * GROUP + 9)]
    absent = [-1, 10**9 + 7] if column == "k" else ["nope", "s-1"]
    for value in [*present, *absent]:
        literal = repr(value) if column == "k" else f"'{value}'"
        expected = _duckdb_keeps(mixed_file, column, literal)
        assert row_groups_passing(filters, [value]).tolist() == expected.tolist()
    # IN: the union of its literals' row groups, as DuckDB keeps them one by one.
    literals = [present[0], present[2], absent[0]]
    expected = np.zeros(4, bool)
    for value in literals:
        literal = repr(value) if column == "k" else f"'{value}'"
        expected |= _duckdb_keeps(mixed_file, column, literal)
    assert row_groups_passing(filters, literals).tolist() == expected.tolist()


def test_computed_filters_keep_every_row_group_holding_the_value(mixed_file: Path) -> None:
    harvest = harvest_filters(mixed_file, ["f", "l.list.element"])
    table = pq.read_table(mixed_file)
    for position in (0, 17, GROUP * 2 + 3, ROWS - 1):
        rg = position // GROUP
        f_value = table["f"][position].as_py()
        assert row_groups_passing(harvest.filters["f"], [f_value])[rg]
        element = table["l"][position].as_py()[1]
        assert row_groups_passing(harvest.filters["l.list.element"], [element])[rg]
    # The column holds -0.0 in every row group: a probe for 0.0 keeps them all (SQL equality).
    assert row_groups_passing(harvest.filters["f"], [0.0]).all()
    assert row_groups_passing(harvest.filters["f"], [0.0625 + 10**9]).sum() <= 1


def test_literals_that_are_no_value_of_the_column_keep_everything(mixed_file: Path) -> None:
    filters = harvest_filters(mixed_file, ["k"]).filters["k"]
    assert row_groups_passing(filters, ["not a number"]).all()
    assert not row_groups_passing(filters, [None]).any()
    assert row_groups_passing([None, None], [1]).all()


def test_unknown_column(mixed_file: Path) -> None:
    with pytest.raises(FormatError, match="no column nope"):
        harvest_filters(mixed_file, ["nope"])
