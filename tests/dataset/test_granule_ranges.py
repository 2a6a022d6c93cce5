"""Granules below the row group are read as such: the access plan reads the kept granules' rows.

Files with big row groups (here 2,000 rows) indexed with 100-row granules: the plan's row ranges
are runs of kept granules, the scan reads those rows only (DuckDB's ``file_row_number``
pushdown), and the rows are exactly ClickHouse's (chdb over the same files) for point lookups,
``IN`` lists, ORs over two indexes, token and substring searches, with and without ``LIMIT``.
"""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dataset_fixtures import write_indexed_parts

from bloomskip.cli import main
from bloomskip.dataset import Dataset

if TYPE_CHECKING:
    from chdb.session import Session

FILES, ROWS, GROUP, GRANULE = 3, 6_000, 2_000, 100


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    base = tmp_path_factory.mktemp("granule-ranges")
    folder = base / "data"
    tables = write_indexed_parts(folder, FILES, ROWS, GROUP, 40, granule=GRANULE)
    return folder, tables, Dataset(folder)


def _clickhouse(session: Session, folder, where: str) -> list[int]:
    text = session.query(
        f"SELECT id FROM file('{folder}/*.parquet', Parquet) WHERE {where} ORDER BY id", "CSV"
    ).bytes()
    return [int(value) for value in text.decode().split()]


def _wheres(tables) -> list[str]:
    rng = random.Random(7)
    ks = [value for table in tables for value in table.column("k").to_pylist() if value]
    picked = rng.sample(ks, 12)
    return [
        f"k = {picked[0]}",
        f"k = {picked[1]}",
        "k = 123456789",
        f"k IN ({', '.join(map(str, picked[2:12]))})",
        f"k = {picked[3]} OR d = 'no-such-colour'",
        f"k = {picked[4]} OR has(tags, 'naïve')",
        f"k = {picked[5]} AND d = 'red'",
        f"NOT (k != {picked[6]})",
        "hasToken(s, 'naïve')",
        "s LIKE '%café-x1%'",
        f"hasToken(s, '500') AND k < {picked[7]}",
    ]


def test_the_plan_reads_the_kept_granules_rows_only(corpus):
    folder, tables, dataset = corpus
    present = tables[1].column("k")[4_321].as_py()
    plan = dataset.explain(f"k = {present}").plan
    assert plan.files, "the matching granule is read"
    for access in plan.files:
        ranges = access.row_ranges
        assert (ranges[:, 0] % GRANULE == 0).all(), ranges
        assert ((ranges[:, 1] % GRANULE == 0) | (ranges[:, 1] == ROWS)).all(), ranges
        assert (ranges[1:, 0] > ranges[:-1, 1]).all(), "sorted, disjoint, not adjacent"
        held = int(access.group_rows[access.row_groups].sum())
        assert access.rows < held, (access.rows, held)
    holding = dataset.explain(f"k = {present}")
    row = 1 * ROWS + 4_321
    access = next(a for a in holding.plan.files if a.number == 1)
    assert any(start <= row - ROWS < stop for start, stop in access.row_ranges.tolist())


@pytest.mark.parametrize("limit", [None, 3])
def test_rows_equal_clickhouses_over_the_same_files(corpus, chdb_session, limit):
    folder, tables, dataset = corpus
    for where in _wheres(tables):
        expected = _clickhouse(chdb_session, folder, where)
        got = dataset.query(where, ["id"], limit=limit).column("id").to_pylist()
        if limit is None:
            assert sorted(got) == expected, where
        else:
            assert len(got) == min(limit, len(expected)), where
            assert set(got) <= set(expected), where
        # Every matching row lies in a range the plan reads: no granule holding one is skipped.
        plan = dataset.explain(where).plan
        read = {
            (access.number, row)
            for access in plan.files
            for start, stop in access.row_ranges.tolist()
            for row in range(start, stop)
        }
        for row in expected:
            assert (row // ROWS, row % ROWS) in read, (where, row)


def test_an_or_over_two_indexes_reads_a_few_granules(corpus, chdb_session):
    folder, tables, dataset = corpus
    present = tables[2].column("k")[999].as_py()
    where = f"k = {present} OR d = 'no-such-colour'"
    plan = dataset.explain(where).plan
    # Without the granule ranges the OR read whole 2,000-row row groups; each index's false
    # positives keep a few 100-row granules.
    assert 0 < plan.rows <= FILES * ROWS // 10, plan.rows
    got = sorted(dataset.query(where, ["id"]).column("id").to_pylist())
    assert got == _clickhouse(chdb_session, folder, where)


def test_explain_json_counts_the_rows_of_the_kept_granules(corpus, capsys):
    folder, tables, dataset = corpus
    present = tables[0].column("k")[77].as_py()
    where = f"k = {present}"
    assert main(["query", str(folder), "--where", where, "--explain", "--json"]) == 0
    read = json.loads(capsys.readouterr().out)["read"]
    plan = dataset.explain(where).plan
    assert read["rows_to_read"] == plan.rows
    kept_groups = sum(int(a.group_rows[a.row_groups].sum()) for a in plan.files)
    assert read["rows_to_read"] < kept_groups
    assert read["row_groups_to_read"] == plan.row_group_count


def test_an_and_of_two_indexes_intersects_their_granules_not_their_row_groups(tmp_path):
    rows = 4_000
    rng = np.random.default_rng(3)
    table = pa.table({"a": rng.permutation(rows), "b": rng.permutation(rows) + rows})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=GROUP)
    dataset = Dataset(tmp_path)
    indexes = ["a TYPE bloom_filter(0.001)", "b TYPE bloom_filter(0.001)"]
    dataset.build_index(indexes, granule=GRANULE, progress=False)
    a, b = table.column("a").to_pylist(), table.column("b").to_pylist()
    finer = 0
    for row in range(0, rows, 97):
        # b's value of a row in another granule of the same row group
        other = (row // GROUP) * GROUP + (row + GRANULE * 3) % GROUP
        where = f"a = {a[row]} AND b = {b[other]}"
        explanation = dataset.explain(where)
        both = np.logical_and.reduce([o.granule_keep[0] for o in explanation.indexes])
        read = sum(access.rows for access in explanation.plan.files)
        assert read == int(both.sum()) * GRANULE, where
        by_groups = np.logical_and.reduce([o.keep[0] for o in explanation.indexes])
        finer += int(by_groups.sum()) > int(explanation.keep[0].sum())
        assert dataset.query(where).num_rows == 0
    # Each index keeps a granule of the row group, never the same one: the row group is skipped.
    assert finer >= 30, finer


def test_index_status_sets_the_granule_beside_the_row_groups(corpus, tmp_path, capsys):
    folder, tables, dataset = corpus
    assert main(["index", "status", str(folder), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["granule"] == GRANULE
    assert status["row_groups"] == {
        "files": FILES,
        "of_files": FILES,
        "row_groups": FILES * ROWS // GROUP,
        "min_rows": GROUP,
        "median_rows": GROUP,
        "max_rows": GROUP,
    }
    assert main(["index", "status", str(folder)]) == 0
    text = capsys.readouterr().out
    assert f"granule: {GRANULE} rows; row groups: median {GROUP:,} rows" in text
    assert "large row groups" not in text
    # Row groups of more than 65,536 rows under a row-group granule: the status says what to use.
    big = tmp_path / "big"
    big.mkdir()
    pq.write_table(pa.table({"a": np.arange(200_000)}), big / "a.parquet", row_group_size=100_000)
    Dataset(big).build_index(["a TYPE bloom_filter"], progress=False)
    assert main(["index", "status", str(big)]) == 0
    assert "large row groups: for Parquet, 'index build --granule 8192 --replace'" in (
        capsys.readouterr().out
    )
