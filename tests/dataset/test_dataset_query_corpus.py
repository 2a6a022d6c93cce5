"""Pruned queries return exactly DuckDB's full-scan rows, and no kept-granule set misses a row."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dataset_fixtures import INDEXES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bloomskip.dataset import Dataset
from bloomskip.dataset.sql.translate import clickhouse_to_duckdb

if TYPE_CHECKING:
    from chdb.session import Session

PREDICATES = [
    "k = {k0}",
    "k = {k1}",
    "k = -5",
    "{k0} = k",
    "k IN ({k0}, {k2}, -7)",
    "k = {k0} OR k = {k2}",
    "NOT k = {k0}",
    "k != {k1}",
    "k IS NULL",
    "k = {k0} AND v > 0",
    "k = {k0} AND 1",
    "hasToken(s, 'timeout')",
    "hasToken(s, '東京')",
    "hasToken(s, 'naïve')",
    "hasToken(s, 'missing')",
    "hasToken(s, 'x1')",
    "hasToken(s, '500')",
    "hasToken(s, 'snow')",
    "startsWith(s, 'alpha ')",
    "startsWith(s, 'Привет')",
    "startsWith(s, '☃snow-')",
    "endsWith(s, ' мир')",
    "endsWith(s, '_東京')",
    "multiSearchAny(s, ['東京', 'naïve'])",
    "multiSearchAny(s, [' 404 ', 'zzz'])",
    "multiSearchAny(s, ['qqq'])",
    "s LIKE '%timeout%'",
    "s LIKE 'alpha %'",
    "s LIKE '%café%'",
    "s LIKE '%x1 v2%'",
    "s LIKE '%/500/%'",
    "s LIKE '%\\\\%%'",
    "s LIKE 'naïve_%'",
    "s NOT LIKE '%a%'",
    "s = 'alpha'",
    "s = 'naïve'",
    "s IN ('alpha', 'beta gamma', 'Привет')",
    "s = ''",
    "isNull(s)",
    "d = 'ünïcode'",
    "d IN ('red', 'nope')",
    "d = 'nope'",
    "has(tags, '東京')",
    "has(tags, 'nope')",
    "hasAny(tags, ['naïve', '☃snow'])",
    "hasAll(tags, ['alpha', 'beta'])",
    "hasAll(tags, ['x1', '500'])",
    "hasAll(tags, [])",
    "hasToken(s, 'timeout') AND k = {k1}",
    "(has(tags, 'x1') OR d = 'black') AND NOT hasToken(s, 'alpha')",
    "hasToken(s, '東京') OR has(tags, 'naïve')",
    "s IS NOT NULL AND k = {k2}",
    "NOT (hasToken(s, 'alpha') OR hasToken(s, 'beta'))",
    "equals(k, {k2}) AND notEquals(d, 'red')",
]


def _files(directory: Path) -> list[str]:
    return sorted(str(p) for p in directory.glob("*.parquet"))


def _sample_keys(directory: Path) -> dict[str, int]:
    column = pq.read_table(_files(directory)[1], columns=["k"]).column("k")
    values = [v for v in column.to_pylist() if v is not None]
    return {"k0": values[5], "k1": values[len(values) // 2], "k2": values[-3]}


def _oracle(files: list[str], where: str) -> tuple[list[int], set[tuple[str, int]]]:
    listing = ", ".join(f"'{f}'" for f in files)
    rows = duckdb.sql(
        f"SELECT id, filename, file_row_number FROM read_parquet([{listing}], filename=true, "
        f"file_row_number=true) WHERE {clickhouse_to_duckdb(where)}"
    ).fetchall()
    groups = set()
    ends = {f: np.cumsum([pq.ParquetFile(f).metadata.row_group(g).num_rows
                          for g in range(pq.ParquetFile(f).metadata.num_row_groups)])
            for f in files}  # fmt: skip
    for _, filename, row_number in rows:
        groups.add((filename, int(np.searchsorted(ends[filename], row_number, side="right"))))
    return sorted(row[0] for row in rows), groups


@pytest.fixture(scope="module", params=["row-group", 300])
def indexed(request, dataset_dir: Path, tmp_path_factory) -> Dataset:
    sidecar = tmp_path_factory.mktemp("sidecar") / f"index-{request.param}.bsx"
    dataset = Dataset(dataset_dir, sidecar=sidecar)
    dataset.build_index(INDEXES, granule=request.param, progress=False)
    return dataset


def test_corpus_matches_duckdb_full_scan(indexed: Dataset, dataset_dir: Path) -> None:
    files = _files(dataset_dir)
    keys = _sample_keys(dataset_dir)
    pruned_predicates = 0
    for template in PREDICATES:
        where = template.format(**keys)
        expected_ids, matching_groups = _oracle(files, where)
        result = indexed.explain(where)
        assert not result.warnings, (where, result.warnings)
        surviving = {(str(path), group) for path, group in result.row_groups()}
        assert matching_groups <= surviving, f"{where}: a granule with matches was skipped"
        got = indexed.query(where, ["id"]).column("id").to_pylist()
        assert sorted(got) == expected_ids, where
        if sum(outcome.granules_skipped for outcome in result.indexes) > 0:
            pruned_predicates += 1
    # The indexes must actually prune: most of the corpus can use at least one index.
    assert pruned_predicates >= len(PREDICATES) // 3


def test_absent_key_prunes_most_granules(indexed: Dataset, dataset_dir: Path) -> None:
    result = indexed.explain("k = -5")
    (bloom,) = [o for o in result.indexes if o.definition.startswith("INDEX k_bf")]
    # bloom_filter(0.05): false positives are allowed, but only a few percent of granules.
    assert bloom.granules_skipped >= 0.8 * bloom.granules
    assert len(result.row_groups()) < 0.2 * sum(len(s.layout.rows) for s in result.files)
    assert indexed.query("k = -5").num_rows == 0


def test_clickhouse_agrees_on_pruned_rows(
    indexed: Dataset, dataset_dir: Path, chdb_session: Session
) -> None:
    keys = _sample_keys(dataset_dir)
    for where in ["hasToken(s, '東京')", "startsWith(s, 'alpha ')", "k IN ({k0}, {k2})"]:
        where = where.format(**keys)
        pattern = str(dataset_dir / "*.parquet")
        csv = chdb_session.query(
            f"SELECT id FROM file('{pattern}', Parquet) WHERE {where}", "CSV"
        ).bytes()
        got = indexed.query(where, ["id"]).column("id").to_pylist()
        assert sorted(got) == sorted(int(v) for v in csv.decode().split()), where


def test_like_never_skips_rows_whose_tokens_extend_past_the_wildcards(tmp_path: Path) -> None:
    # 'xnaïve timeouty' matches '%naïve timeout%' but holds neither token 'naïve' nor 'timeout':
    # a tokenbf index may only probe tokens that no wildcard touches (none here).
    path = tmp_path / "like.parquet"
    texts = ["xnaïve timeouty", "other words", "ab cd", "xabYcdz", "alpha5 beta", "zalpha5 beta"]
    pq.write_table(pa.table({"id": range(len(texts)), "s": texts}), path, row_group_size=1)
    dataset = Dataset(path)
    dataset.build_index(["s TYPE tokenbf_v1(256, 2, 0)"], progress=False)
    for pattern in ["%naïve timeout%", "%ab_cd%", "%b%", "alpha5 %", "%lpha5 beta"]:
        where = f"s LIKE '{pattern}'"
        expected, _ = _oracle([str(path)], where)
        assert expected, pattern
        assert sorted(dataset.query(where, ["id"]).column("id").to_pylist()) == expected, pattern


ATOMS = [p for p in PREDICATES if " AND " not in p and " OR " not in p and "NOT" not in p]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_boolean_combinations_never_miss_rows(indexed: Dataset, dataset_dir: Path, data):
    keys = _sample_keys(dataset_dir)
    atoms = st.sampled_from([atom.format(**keys) for atom in ATOMS])
    tree = st.recursive(
        atoms,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda pair: f"({pair[0]}) AND ({pair[1]})"),
            st.tuples(inner, inner).map(lambda pair: f"({pair[0]}) OR ({pair[1]})"),
            inner.map(lambda text: f"NOT ({text})"),
        ),
        max_leaves=5,
    )
    where = data.draw(tree)
    expected_ids, matching_groups = _oracle(_files(dataset_dir), where)
    surviving = {(str(path), group) for path, group in indexed.explain(where).row_groups()}
    assert matching_groups <= surviving, where
    assert sorted(indexed.query(where, ["id"]).column("id").to_pylist()) == expected_ids, where
