"""The dataset index keeps exactly the granules ClickHouse keeps for the same data and indexes.

One Parquet file with row groups of 40 rows is, to ClickHouse, a MergeTree part with fixed
40-row granules. chdb builds that part from the same file, and ``EXPLAIN indexes = 1`` gives,
per skip index (the others ignored), how many granules it keeps. The part lives in database
``dataset_agreement`` of the run's shared chdb session.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
import pytest
from dataset_fixtures import make_table

from bloomskip.dataset import Dataset

if TYPE_CHECKING:
    from chdb.session import Session

DATABASE = "dataset_agreement"
ROWS, GROUP = 6_000, 40
INDEXES = {
    "k_bf": "k TYPE bloom_filter(0.05)",
    "s_tok": "s TYPE tokenbf_v1(512, 2, 0)",
    "s_ng": "s TYPE ngrambf_v1(3, 512, 2, 7)",
    "d_bf": "d TYPE bloom_filter",
    "tags_bf": "tags TYPE bloom_filter(0.01)",
}
PREDICATES = [
    "k = 1300",
    "k IN (13, 26000, -1)",
    "k = -5",
    "hasToken(s, '東京')",
    "hasToken(s, 'x1') AND hasToken(s, 'v2')",
    "startsWith(s, 'alpha ')",
    "endsWith(s, ' мир')",
    "multiSearchAny(s, [' 404 ', '東京'])",
    "s LIKE '%naïve timeout%'",
    "s = 'alpha'",
    "d = 'ünïcode'",
    "d IN ('nope', 'zzz')",
    "has(tags, '東京')",
    "hasAny(tags, ['x1', 'v2'])",
    "hasAll(tags, ['alpha', 'naïve'])",
    "NOT hasToken(s, 'alpha')",
    "hasToken(s, '500') OR startsWith(s, 'Привет')",
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory, chdb_session: Session):
    base = tmp_path_factory.mktemp("agreement")
    path = base / "data.parquet"
    pq.write_table(make_table(ROWS, 11, 0), path, row_group_size=GROUP)
    dataset = Dataset(path)
    dataset.build_index([f"INDEX {name} {text}" for name, text in INDEXES.items()], progress=False)
    chdb_session.query(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    indexes = ",\n".join(f"INDEX {name} {text} GRANULARITY 1" for name, text in INDEXES.items())
    chdb_session.query(
        f"""CREATE TABLE {DATABASE}.t (id Int64, k Nullable(Int64), s String,
            d LowCardinality(String), tags Array(String), v Float64, {indexes})
            ENGINE = MergeTree ORDER BY tuple()
            SETTINGS index_granularity = {GROUP}, index_granularity_bytes = 0"""
    )
    chdb_session.query(f"INSERT INTO {DATABASE}.t SELECT * FROM file('{path}', Parquet)")
    return dataset, chdb_session


def _clickhouse_kept(session, where: str, name: str) -> int | None:
    others = ",".join(n for n in INDEXES if n != name)
    text = (
        session.query(
            f"EXPLAIN indexes = 1 SELECT id FROM {DATABASE}.t WHERE {where} SETTINGS "
            f"ignore_data_skipping_indices = '{others}', use_query_condition_cache = 0",
            "TSVRaw",
        )
        .bytes()
        .decode()
    )
    match = re.search(
        rf"Name: {name}\s+Description: [^\n]*\s+Parts: \d+/\d+\s+Granules: (\d+)/", text
    )
    return int(match.group(1)) if match else None


@pytest.mark.parametrize("where", PREDICATES)
def test_kept_granules_equal_clickhouse(setup, where: str) -> None:
    dataset, session = setup
    assert (
        session.query(
            f"SELECT count() FROM system.parts WHERE database = '{DATABASE}' AND table = 't' "
            "AND active"
        )
        .bytes()
        .strip()
        == b"1"
    )
    result = dataset.explain(where)
    for outcome in result.indexes:
        name = outcome.definition.split()[1]
        ours = outcome.granules - outcome.granules_skipped if outcome.useful else ROWS // GROUP
        theirs = _clickhouse_kept(session, where, name)
        # ClickHouse leaves an index it cannot use out of EXPLAIN: it keeps every granule.
        assert ours == (ROWS // GROUP if theirs is None else theirs), (where, name)
