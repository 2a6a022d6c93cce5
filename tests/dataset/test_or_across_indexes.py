"""An OR (or NOT) over atoms that different indexes evaluate prunes with each index.

ClickHouse evaluates skip indexes one at a time, so ``k = X OR has(tags, 'W')`` with an index
on each keeps every granule; bloomskip decides each atom with the indexes that evaluate it and
combines the verdicts. The rows must stay exactly ClickHouse's (chdb over the same file), for
random AND / OR / NOT trees over several indexes, at row-group and at row-count granules.
"""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
import pytest
from dataset_fixtures import INDEXES, WORDS, make_table

from bloomskip.cli import main
from bloomskip.dataset import Dataset
from bloomskip.dataset.prune import boolean_tree

if TYPE_CHECKING:
    from chdb.session import Session

ROWS, GROUP = 6_000, 40


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    base = tmp_path_factory.mktemp("or-across")
    path = base / "data.parquet"
    table = make_table(ROWS, 23, 0)
    pq.write_table(table, path, row_group_size=GROUP)
    by_group = Dataset(path, sidecar=base / "_groups.index")
    by_group.build_index(INDEXES, granule="row-group", progress=False)
    by_rows = Dataset(path, sidecar=base / "_rows.index")
    by_rows.build_index(INDEXES, granule=120, progress=False)
    return path, table, {"row groups": by_group, "120 rows": by_rows}


def _clickhouse(session: Session, path, where: str) -> list[int]:
    text = session.query(
        f"SELECT id FROM file('{path}', Parquet) WHERE {where} ORDER BY id", "CSV"
    ).bytes()
    return [int(value) for value in text.decode().split()]


def _kept_row_groups(dataset: Dataset, where: str) -> int:
    return sum(int(keep.sum()) for keep in dataset.explain(where).keep)


def test_an_or_of_two_indexed_point_atoms_reads_what_each_atom_keeps(corpus, chdb_session):
    path, table, datasets = corpus
    k = table.column("k")
    present = k[ROWS // 3].as_py()
    where = f"k = {present} OR has(tags, 'zzz-absent')"
    for name, dataset in datasets.items():
        alone = _kept_row_groups(dataset, f"k = {present}") + _kept_row_groups(
            dataset, "has(tags, 'zzz-absent')"
        )
        explanation = dataset.explain(where)
        kept = sum(int(keep.sum()) for keep in explanation.keep)
        assert explanation.across is not None, name
        assert 1 <= kept <= alone < ROWS // GROUP // 10, (name, kept, alone)
        got = sorted(dataset.query(where, ["id"]).column("id").to_pylist())
        assert got == _clickhouse(chdb_session, path, where), name


def test_an_or_over_two_columns_skips_in_explain_json(corpus, capsys):
    path, table, datasets = corpus
    present = table.column("k")[100].as_py()
    where = f"k = {present} OR d = 'nope'"
    sidecar = datasets["row groups"].index_location
    code = main(["query", str(path), "--sidecar", sidecar, "--where", where, "--explain", "--json"])
    assert code == 0
    facts = json.loads(capsys.readouterr().out)
    # k_bf keeps about 5% of the granules falsely, d_bf about 2.5%: without the combination
    # the OR read every row.
    across = facts["across"]
    assert across["granules"] - 20 <= across["granules_skipped"] < across["granules"]
    assert GROUP <= facts["read"]["rows_to_read"] <= 20 * GROUP
    # Each index alone keeps every granule: the other atom is unknown to it.
    for index in facts["indexes"]:
        if index["useful"]:
            assert index["granules_skipped"] == 0, index["name"]


def _atom(rng: random.Random, table) -> str:
    k = table.column("k")
    value = k[rng.randrange(ROWS)].as_py()
    word = rng.choice(WORDS).replace("'", "")
    kind = rng.randrange(8)
    if kind == 0:
        return f"k = {value if value is not None else -1}"
    if kind == 1:
        return f"k = {rng.randrange(10**6, 10**7)}"  # absent
    if kind == 2:
        return f"hasToken(s, '{word}')"
    if kind == 3:
        return f"has(tags, '{word}')"
    if kind == 4:
        return f"d = '{rng.choice(['red', 'ünïcode', 'nope'])}'"
    if kind == 5:
        return f"s LIKE '%{word}%'"
    if kind == 6:
        return f"k IN ({value if value is not None else -1}, {rng.randrange(10**6, 10**7)})"
    return f"hasToken(s, 'zz{rng.randrange(100)}')"  # absent


def _tree(rng: random.Random, table, depth: int) -> str:
    if depth == 0 or rng.random() < 0.25:
        return _atom(rng, table)
    shape = rng.randrange(5)
    if shape == 0:
        return f"NOT ({_tree(rng, table, depth - 1)})"
    operator = "AND" if shape == 1 else "OR"
    operands = [_tree(rng, table, depth - 1) for _ in range(rng.randrange(2, 4))]
    return "(" + f" {operator} ".join(operands) + ")"


def test_random_trees_over_several_indexes_return_clickhouse_rows(corpus, chdb_session):
    path, table, datasets = corpus
    rng = random.Random(20261204)
    combined = 0
    for _ in range(60):
        where = _tree(rng, table, 3)
        expected = _clickhouse(chdb_session, path, where)
        for name, dataset in datasets.items():
            explanation = dataset.explain(where)
            combined += explanation.across is not None
            got = sorted(dataset.query(where, ["id"]).column("id").to_pylist())
            assert got == expected, (name, where, len(got), len(expected))
    assert combined >= 20  # the trees do exercise the combination


def test_boolean_tree_pushes_not_down_and_needs_an_or():
    assert boolean_tree("a = 1 AND NOT (b = 2 OR c = 3)", 8) is None
    assert boolean_tree("NOT (a = 1 AND b = 2)", 8) == ("or", ["NOT (a = 1)", "NOT (b = 2)"])
    assert boolean_tree("a = 1 OR b = 2 OR c = 3", 2) is None  # past the atom limit
    assert boolean_tree("(a = 1 OR b = 2) AND NOT NOT c = 3", 8) == (
        "and",
        [("or", ["a = 1", "b = 2"]), "c = 3"],
    )
