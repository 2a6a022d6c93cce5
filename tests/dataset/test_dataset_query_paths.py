"""The fast query paths of a reused Dataset: located point lookups, cached state, re-validation.

Every answer is compared with DuckDB scanning the whole dataset; the caches must never make a
reused ``Dataset`` answer from a stale sidecar, a stale file identity or stale Parquet footers.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dataset_fixtures import INDEXES, make_table, write_dataset

from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.clickhouse.types import clickhouse_type_for
from bloomskip.dataset import Dataset
from bloomskip.dataset.listing.files import IdentityCache, SourceFile
from bloomskip.dataset.prune import CHANGED, INDEXED
from bloomskip.dataset.scan import query as query_module
from bloomskip.dataset.sql.translate import clickhouse_to_duckdb, integer_lookup
from bloomskip.errors import BloomskipError


def _full_scan(directory: Path, where: str, columns: str = "*") -> pa.Table:
    listing = ", ".join(f"'{p}'" for p in sorted(directory.glob("*.parquet")))
    sql = f"SELECT {columns} FROM read_parquet([{listing}]) WHERE {clickhouse_to_duckdb(where)}"
    return duckdb.sql(sql).to_arrow_table()


def _sorted_rows(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda row: row["id"])


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> Path:
    """Four files, row groups of 64, 100, 250 and 1000 rows, indexed with INDEXES."""
    directory = tmp_path_factory.mktemp("paths") / "data"
    write_dataset(directory, [(700, 64), (1000, 100), (1500, 250), (2100, 1000)], seed=11)
    Dataset(directory).build_index(INDEXES, progress=False)
    return directory


def _boundary_keys(directory: Path) -> list[int]:
    """k values at the first and last row of every row group, plus a middle one."""
    keys = []
    for path in sorted(directory.glob("*.parquet")):
        reader = pq.ParquetFile(path)
        for group in range(reader.num_row_groups):
            k = reader.read_row_group(group, ["k"]).column(0)
            picks = [0, len(k) // 2, len(k) - 1]
            keys.extend(int(k[i].as_py()) for i in picks if k[i].is_valid)
    return sorted(set(keys))


@pytest.fixture
def located_calls(monkeypatch) -> list:
    """Records what every locate_matches and locate_in_ranges call returned (None: it did
    not apply)."""
    calls = []
    for name in ("locate_matches", "locate_in_ranges"):
        original = getattr(query_module, name)

        def spy(*args, original=original, **kwargs):
            outcome = original(*args, **kwargs)
            calls.append(outcome)
            return outcome

        monkeypatch.setattr(query_module, name, spy)
    return calls


@pytest.mark.parametrize("arrow_bytes", [query_module.LOCATE_ARROW_BYTES, 0])
def test_located_point_lookups_equal_full_scan(
    indexed: Path, located_calls: list, monkeypatch, arrow_bytes: int
) -> None:
    # 0: DuckDB locates the rows, as it does for large located columns.
    monkeypatch.setattr(query_module, "LOCATE_ARROW_BYTES", arrow_bytes)
    dataset = Dataset(indexed)  # one object for every query, as a user holding it would
    keys = _boundary_keys(indexed)
    rng = np.random.default_rng(5)
    chosen = [int(k) for k in rng.choice(keys, 40, replace=False)]
    absent = [-5, 10**12, keys[0] + 1 if keys[0] + 1 not in keys else -7]
    predicates = [f"k = {k}" for k in chosen + absent]
    predicates += [
        f"k IN ({', '.join(str(k) for k in chosen[:6])})",
        f"k = {chosen[0]} AND v > 0",
        f"k = {chosen[1]} OR k = {chosen[2]}",
        f"k = {chosen[3]} AND id >= 0",
        f"has(tags, 'cart') AND k = {chosen[4]}",  # a list column: not located, one query
    ]
    for where in predicates:
        expected = _sorted_rows(_full_scan(indexed, where))
        assert _sorted_rows(dataset.query(where)) == expected, where
        again = dataset.query(where, ["id", "k"])
        assert _sorted_rows(again) == [{"id": r["id"], "k": r["k"]} for r in expected], where
    located = [outcome for outcome in located_calls if outcome is not None]
    # The integer lookups went through locate_matches, and some found nothing at all.
    assert len(located) >= len(chosen)
    assert any(outcome == {} for outcome in located)
    assert any(outcome for outcome in located)


def test_located_lookup_with_limit(indexed: Path, located_calls: list) -> None:
    keys = _boundary_keys(indexed)
    where = f"k IN ({', '.join(str(k) for k in keys[10:16])})"
    every = {row["id"] for row in _full_scan(indexed, where, "id").to_pylist()}
    assert len(every) > 3
    limited = Dataset(indexed).query(where, ["id"], limit=3)
    assert limited.num_rows == 3
    assert set(limited.column("id").to_pylist()) <= every
    assert any(outcome for outcome in located_calls if outcome is not None)


def test_empty_results_have_the_full_scan_schema(indexed: Path) -> None:
    dataset = Dataset(indexed)
    for columns, sql_columns in ((None, "*"), (["id", "s"], "id, s")):
        expected = _full_scan(indexed, "k = -5", sql_columns)
        for _ in range(2):  # the second answer comes from the cache of empty results
            table = dataset.query("k = -5", columns)
            assert table.num_rows == 0
            assert table.schema == expected.schema


def test_result_types_do_not_depend_on_the_survivors(tmp_path: Path) -> None:
    # An INT96 and an INT64 nanosecond timestamp are both timestamp[ns] to Arrow, but DuckDB
    # reads them as TIMESTAMP and TIMESTAMP_NS. Before: the files counted as alike, and the
    # column came back in microseconds or nanoseconds depending on which file the index kept.
    directory = tmp_path / "timestamps"
    directory.mkdir()
    for name, int96 in (("a", True), ("b", False)):
        table = pa.table(
            {
                "k": [f"{name}{i}" for i in range(10)],
                "ts": pa.array(
                    [1_700_000_000_000_000_000 + i for i in range(10)], pa.timestamp("ns")
                ),
            }
        )
        pq.write_table(table, directory / f"{name}.parquet", use_deprecated_int96_timestamps=int96)
    dataset = Dataset(directory)
    dataset.build_index(["k TYPE bloom_filter"], progress=False)
    listing = f"['{directory / 'a.parquet'}', '{directory / 'b.parquet'}']"
    expected = duckdb.sql(
        f"SELECT * FROM read_parquet({listing}, union_by_name = true) LIMIT 0"
    ).to_arrow_table()
    for where, kept in (
        ("k = 'a1'", [1, 0]),
        ("k = 'b1'", [0, 1]),
        ("k = 'a1' OR k = 'b1'", [1, 1]),
    ):
        assert [int(keep.sum()) for keep in dataset.explain(where).keep] == kept
        assert dataset.query(where).schema == expected.schema, where


def test_unknown_column_in_a_lookup_is_still_a_user_error(indexed: Path) -> None:
    with pytest.raises(BloomskipError, match="Unknown expression or function identifier"):
        Dataset(indexed).query("k = -5", ["no_such_column"])


def test_reused_dataset_detects_a_footer_change_behind_unchanged_size_and_mtime(
    tmp_path: Path, indexed: Path
) -> None:
    directory = tmp_path / "data"
    shutil.copytree(indexed, directory)
    target = directory / "part-1.parquet"
    table = pq.read_table(target)

    def rewrite(tag: bytes) -> None:
        # Same rows and row groups; only a footer metadata value of the same length differs.
        metadata = {**(table.schema.metadata or {}), b"x": tag}
        pq.write_table(table.replace_schema_metadata(metadata), target, row_group_size=100)

    rewrite(b"1")
    Dataset(directory).build_index(INDEXES, progress=False)
    dataset = Dataset(directory)
    where = "k = 1300"
    assert _sorted_rows(dataset.query(where)) == _sorted_rows(_full_scan(directory, where))
    assert all(state.status == INDEXED for state in dataset.explain(where).files)
    before = target.stat()
    rewrite(b"2")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    # Size and modification time match the cached identity; the change time does not, so the
    # footer is hashed again and the sidecar entry is refused.
    statuses = {state.relative_path: state.status for state in dataset.explain(where).files}
    assert statuses["part-1.parquet"] == CHANGED
    assert statuses["part-0.parquet"] == INDEXED
    assert _sorted_rows(dataset.query(where)) == _sorted_rows(_full_scan(directory, where))


def test_reused_dataset_sees_rewritten_data_and_a_rebuilt_sidecar(
    tmp_path: Path, indexed: Path
) -> None:
    directory = tmp_path / "data"
    shutil.copytree(indexed, directory)
    dataset = Dataset(directory)
    keys = _boundary_keys(directory)
    wheres = [f"k = {keys[5]}", f"k = {keys[-5]}", "k = -5"]
    for where in wheres:
        dataset.query(where)  # warm every cache
    # New rows (other ids and keys) in an existing file: row groups, footers and keys change.
    pq.write_table(make_table(900, 77, 50_000), directory / "part-2.parquet", row_group_size=90)
    new_key = int(pq.read_table(directory / "part-2.parquet", columns=["k"]).column(0)[450].as_py())
    for where in [*wheres, f"k = {new_key}"]:
        assert _sorted_rows(dataset.query(where)) == _sorted_rows(_full_scan(directory, where))
    # Another process rebuilds the index with other definitions: the reused object sees it.
    shutil.rmtree(directory / "_bloomskip")
    Dataset(directory).build_index(["INDEX only_k k TYPE bloom_filter(0.02)"], progress=False)
    result = dataset.explain(f"k = {new_key}")
    assert [outcome.definition for outcome in result.indexes] == [
        "INDEX only_k k TYPE bloom_filter(0.02) GRANULARITY 1"
    ]
    assert all(state.status == INDEXED for state in result.files)
    where = f"k = {new_key}"
    assert _sorted_rows(dataset.query(where)) == _sorted_rows(_full_scan(directory, where))


def test_reused_dataset_sees_a_sidecar_rebuilt_with_other_granules(tmp_path: Path) -> None:
    # Before: decoded indexes were keyed by definition and file identities only, so after a
    # rebuild with the same definitions but other granules the reused object probed the old
    # filters against the new granules, and missed rows.
    directory = tmp_path / "granules"
    write_dataset(directory, [(1000, 100), (800, 100)], seed=5)
    definitions = ["INDEX k_bf k TYPE bloom_filter(0.01)"]
    Dataset(directory).build_index(definitions, granule=50, progress=False)
    dataset = Dataset(directory)
    keys = _boundary_keys(directory)[::3]
    for key in keys:
        dataset.query(f"k = {key}", ["id"])  # decode the index over granules of 50 rows
    Dataset(directory).build_index(definitions, granule="row-group", replace=True, progress=False)
    assert dataset.index.definitions().granule == "row-group"
    for key in keys:
        where = f"k = {key}"
        assert _sorted_rows(dataset.query(where, ["id"])) == _sorted_rows(
            _full_scan(directory, where, "id")
        ), where


def test_identity_cache_rereads_the_footer_only_after_a_change(tmp_path: Path, monkeypatch) -> None:
    (path,) = write_dataset(tmp_path / "one", [(300, 100)])
    source = SourceFile(path, "parquet")
    reads = []
    original = SourceFile.identity

    def counting(self):
        reads.append(self.path)
        return original(self)

    monkeypatch.setattr(SourceFile, "identity", counting)
    cache = IdentityCache()
    first = cache.identity(source)
    assert cache.identity(source) == first and len(reads) == 1
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))  # ctime moves
    assert cache.identity(source) == first and len(reads) == 2
    pq.write_table(make_table(200, 3, 0), path, row_group_size=50)
    changed = cache.identity(source)
    assert changed != first and changed == original(source)


@pytest.mark.parametrize(
    "definition",
    [
        "INDEX b (k, d) TYPE bloom_filter(0.05)",
        "INDEX t (s, d) TYPE tokenbf_v1(256, 2, 0)",
        "INDEX n s TYPE ngrambf_v1(3, 512, 2, 7)",
    ],
)
def test_filter_spans_locate_the_same_bytes_as_column_filters(definition: str) -> None:
    table = make_table(2000, 4, 0)
    parsed = parse_index_definition(definition)
    types = {name: clickhouse_type_for(table.schema.field(name).type) for name in ("k", "d", "s")}
    rows = [97] * 20 + [60]
    built = SkipIndex.build(parsed, table, rows, types)
    loaded = SkipIndex.from_bytes(parsed, built.to_bytes(), rows, types)
    for index in (built, loaded):
        for column in range(len(parsed.expressions)):
            flat, offsets = index.column_filters(column)
            buffer, starts, sizes = index.column_filter_spans(column)
            assert np.array_equal(sizes, np.diff(offsets))
            gathered = [bytes(buffer[a : a + n]) for a, n in zip(starts, sizes, strict=True)]
            expected = [bytes(flat[a:b]) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
            assert gathered == expected


def test_integer_lookup_recognizes_only_and_or_of_integer_equalities() -> None:
    assert integer_lookup("id = 42 OR id IN (1, -2)") == (
        "or",
        (("in", "id", (42,)), ("in", "id", (1, -2))),
    )
    assert integer_lookup("5 = k AND (j = 2 OR j IN (3))") == (
        "and",
        (("in", "k", (5,)), ("or", (("in", "j", (2,)), ("in", "j", (3,))))),
    )
    for where in [
        "NOT k = 5",  # NULL handling under NOT is not that of FALSE
        "k = 5 AND v > 0",
        "k IN (1, 2.5)",
        "k = '5'",
        "k = 99999999999999999999",  # beyond int64
        "k IN (SELECT 1)",
        "t.k = 5",
        "k = 1e3",
        "k != 5",
        "hasToken(s, 'x')",
    ]:
        assert integer_lookup(where) is None, where


def test_lookups_on_narrow_unsigned_and_nullable_integers(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    directory = tmp_path / "ints"
    directory.mkdir()
    for number in range(2):
        rows = 3000
        table = pa.table(
            {
                "id": pa.array(np.arange(rows) + number * rows),
                "small": pa.array(rng.integers(-100, 100, rows).astype(np.int8)),
                "mid": pa.array(rng.integers(-50_000, 50_000, rows).astype(np.int32),
                                mask=rng.random(rows) < 0.1),
                "big": pa.array(rng.integers(0, 2**63, rows, dtype=np.uint64) * np.uint64(2)),
            }
        )  # fmt: skip
        pq.write_table(table, directory / f"part-{number}.parquet", row_group_size=100)
    indexes = [f"{c} TYPE bloom_filter(0.05)" for c in ("small", "mid", "big")]
    dataset = Dataset(directory)
    dataset.build_index(indexes, progress=False)
    sample = pq.read_table(directory / "part-1.parquet").slice(1234, 1).to_pylist()[0]
    mid = sample["mid"] if sample["mid"] is not None else 17
    for where in [
        f"small = {sample['small']}",
        "small = 300",  # beyond int8: nothing matches
        f"mid IN (1, 2, -3, {mid})",
        f"mid = {mid} OR small = -5",
        f"big = {sample['big']}",  # uint64 above 2**63 for half the rows: DuckDB evaluates it
        f"big IN ({sample['big']}, 7)",
    ]:
        expected = sorted(_full_scan(directory, where, "id").column("id").to_pylist())
        assert sorted(dataset.query(where, ["id"]).column("id").to_pylist()) == expected, where


def test_row_groups_read_at_once_give_the_rows_of_one_query(
    indexed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A few surviving row groups in several files are read by several cursors at once (a
    # union of one-row-group reads runs on one core); the rows must be those of one query,
    # with and without a LIMIT, with long IN lists (a value table per cursor) and located rows.
    monkeypatch.setattr(query_module.os, "cpu_count", lambda: 3)
    reads = []
    original = query_module._read_groups

    def spy(connection, groups, *args):
        reads.append(len(groups))
        return original(connection, groups, *args)

    monkeypatch.setattr(query_module, "_read_groups", spy)
    dataset = Dataset(indexed)
    keys = _boundary_keys(indexed)
    spread = [int(k) for k in np.array(keys)[np.linspace(0, len(keys) - 1, 6).astype(int)]]
    listed = ", ".join(map(str, spread))
    padding = ", ".join(str(-1 - i) for i in range(80))  # absent: a long IN list (a value table)
    wheres = [
        f"k IN ({listed})",
        f"k IN ({listed}, {padding})",
        f"k IN ({listed}) AND s != ''",
        f"k = {spread[0]} OR k = {spread[-1]}",
        f"(k IN ({listed}) OR k IN ({padding})) AND hasToken(s, 'zebra') = 0",
    ]
    for where in wheres:
        reads.clear()
        got = dataset.query(where)
        assert reads and max(reads) > 1, where  # the parallel path was taken
        assert _sorted_rows(got) == _sorted_rows(_full_scan(indexed, where)), where
        assert got.schema == dataset.query(where, limit=None).schema
        limited = dataset.query(where, limit=2)
        expected = {row["id"] for row in _full_scan(indexed, where).to_pylist()}
        assert limited.num_rows == min(2, len(expected))
        assert {row["id"] for row in limited.to_pylist()} <= expected


@pytest.mark.parametrize(
    "values", [[], [7], [3, 1, 3, -2, 1], [2**62, -(2**63), 0, 2**62], list(range(50, 0, -1)) * 2]
)
def test_distinct_is_numpy_unique(values: list[int]) -> None:
    numbers = np.array(values, np.int64)
    assert query_module._distinct(numbers).tolist() == np.unique(numbers).tolist()


def _query_in_child(directory: str, where: str) -> int:
    return Dataset(directory).query(where).num_rows


def test_a_forked_child_queries_after_its_parent(indexed: Path) -> None:
    # Before: the child inherited the parent's reader pool without its threads, and its reads
    # waited forever.
    import multiprocessing

    keys = _boundary_keys(indexed)
    where = f"k IN ({', '.join(str(k) for k in keys[::9][:20])})"  # read on several threads
    expected = _full_scan(indexed, where).num_rows
    assert Dataset(indexed).query(where).num_rows == expected
    assert query_module._reader_pool.cache_info().currsize == 1  # the parent's pool is up
    with multiprocessing.get_context("fork").Pool(1) as pool:
        answer = pool.apply_async(_query_in_child, (str(indexed), where))
        assert answer.get(timeout=120) == expected


def test_a_half_float_column_is_read_by_duckdb(tmp_path: Path) -> None:
    # Before: the located rows were given to DuckDB as Arrow, which has no half float, and a
    # query DuckDB's own scan answers was refused.
    directory = tmp_path / "half"
    directory.mkdir()
    ids = np.arange(2000, dtype=np.int64)
    halves = pa.array(((ids % 9) - 2).astype(np.float16))
    pq.write_table(pa.table({"id": ids, "h": halves}), directory / "a.parquet", row_group_size=100)
    dataset = Dataset(directory)
    dataset.build_index(["id TYPE bloom_filter(0.01)"], progress=False)
    for where in ("id IN (5, 1005) AND h >= 0", "id = 7 OR id = 1999 AND h < 0"):
        expected = sorted(_full_scan(directory, where, "id").column("id").to_pylist())
        assert sorted(dataset.query(where, ["id"]).column("id").to_pylist()) == expected


def test_a_corrupt_data_page_is_one_clear_error(tmp_path: Path) -> None:
    # The footer is sound, a data page is not (its bytes changed after the index was built).
    # Before: pyarrow's OSError left the command as a traceback.
    directory = tmp_path / "corrupt"
    directory.mkdir()
    for number in range(2):
        table = pa.table({"id": np.arange(2000) % 500, "s": [f"s{i}" for i in range(2000)]})
        pq.write_table(table, directory / f"{number}.parquet", row_group_size=100)
    dataset = Dataset(directory)
    dataset.build_index(["id TYPE bloom_filter(0.01)"], progress=False)
    path = directory / "1.parquet"
    metadata = pq.read_metadata(path)
    data = bytearray(path.read_bytes())
    for group in range(metadata.num_row_groups):
        start = metadata.row_group(group).column(0).data_page_offset
        data[start : start + 40] = bytes(byte ^ 0xA5 for byte in data[start : start + 40])
    path.write_bytes(bytes(data))
    with pytest.raises(BloomskipError) as caught:
        Dataset(directory).query("id = 5")
    message = str(caught.value)
    assert str(path) in message and "\n" not in message
