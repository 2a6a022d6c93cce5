"""``advise`` on data whose best indexes are known, checked against a real build and explain."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from bloomskip import Dataset
from bloomskip.advise import advise
from bloomskip.advise.advisor import ABSOLUTE_SLACK, RELATIVE_SLACK
from bloomskip.advise.candidates import (
    MAX_TEXT_HASHES,
    false_positive_rate,
    filter_bits,
    text_size,
)
from bloomskip.advise.queries import Query, parse_queries
from bloomskip.errors import BloomskipError


def _rows_read_by_explain(dataset: Dataset, where: str) -> int:
    """Rows ``Dataset.explain``'s access plan reads: what the exact filter reads (the kept
    granules' rows for Parquet)."""
    return dataset.explain(where).plan.rows


def _ideal_rows(directory, where: str, granule: int = 8192) -> int:
    """Rows of the finest granules the advisor tries (8,192 rows of a file) that hold a
    matching row: what a perfect index reads, as a query reads kept granules by row range.
    By DuckDB with the query path's translation (tested against chdb in tests/dataset)."""
    import pyarrow.parquet as pq

    from bloomskip.dataset.sql.translate import clickhouse_to_duckdb

    condition = clickhouse_to_duckdb(where)
    total = 0
    for path in sorted(directory.glob("*.parquet")):
        rows = pq.ParquetFile(path).metadata.num_rows
        holding = duckdb.sql(
            f"SELECT DISTINCT file_row_number // {granule} FROM "
            f"read_parquet('{path}', file_row_number = true) WHERE {condition}"
        ).fetchall()
        total += sum(min(granule, rows - number * granule) for (number,) in holding)
    return total


def test_the_best_index_known_in_advance_is_recommended(advice, advise_data) -> None:
    directory, _, _ = advise_data
    by_column = {r.column: r for r in advice.recommendations}
    assert list(by_column) == ["user_id", "msg", "code"]
    # Point lookups of distinct integers: bloom_filter; lookups of one distinct token per row:
    # tokenbf_v1 (an n-gram filter needs many more bits for the same rows); four values that
    # are in every granule: no index pays.
    assert by_column["user_id"].candidate.type == "bloom_filter"
    assert by_column["msg"].candidate.type == "tokenbf_v1"
    assert by_column["code"].index is None
    assert by_column["code"].clickhouse_ddl is None
    assert "pays for itself" in by_column["code"].reason
    # Both reach the best a read can: the finest granules holding a matching row.
    for column in ("user_id", "msg"):
        chosen = by_column[column].candidate
        weights = sum(q["count"] for q in chosen.queries)
        ideal = sum(q["count"] * _ideal_rows(directory, q["where"]) for q in chosen.queries)
        ideal /= weights * advice.rows
        assert ideal <= chosen.rows_read_fraction <= ideal * (1 + RELATIVE_SLACK) + ABSOLUTE_SLACK


def test_rows_read_equal_a_real_build_and_explain(advice, advise_data, tmp_path) -> None:
    directory, _, _ = advise_data
    chosen = [r.candidate for r in advice.recommendations if r.candidate is not None]
    # One more of each column and granule: fixed granules across row groups, ending short.
    others = {}
    for candidate in advice.candidates:
        others.setdefault((candidate.column, candidate.granule), candidate)
    picks = chosen + [c for c in others.values() if c not in chosen]
    assert {c.granule for c in picks} >= {"row-group", 8192, 32768, 65536}
    for number, candidate in enumerate(picks):
        dataset = Dataset(directory, sidecar=tmp_path / f"{number}.index")
        dataset.build_index([candidate.index], granule=candidate.granule, progress=False)
        assert dataset.status()["indexes"][0]["bytes"] == candidate.index_bytes
        for query in candidate.queries:
            read = _rows_read_by_explain(dataset, query["where"])
            assert read == round(query["rows_read_fraction"] * advice.rows), (candidate, query)


def test_a_sample_measures_whole_row_groups(advise_data) -> None:
    directory, queries, _ = advise_data
    sampled = advise(directory, queries, columns=["user_id"], sample_rows=40_000)
    # Whole row groups (16,384 rows, the last of each file 1,696) adding up to 40,000 or more.
    whole = {full * 16_384 + short * 1_696 for full in range(13) for short in range(3)}
    assert 40_000 <= sampled.sample_rows < 80_000
    assert sampled.sample_rows in whole
    assert sampled.rows == 200_000
    assert [r.column for r in sampled.recommendations] == ["user_id"]
    assert {c.column for c in sampled.candidates} == {"user_id"}


def test_a_budget_keeps_only_the_candidates_within_it(advice, advise_data) -> None:
    directory, queries, _ = advise_data
    budget = 6.0
    limited = advise(directory, queries, columns=["user_id"], budget_bits_per_row=budget)
    chosen = limited.recommendations[0]
    assert chosen.bits_per_row <= budget
    assert all(c.fits_budget == (c.bits_per_row <= budget) for c in limited.candidates)
    assert not any(c.pareto and not c.fits_budget for c in limited.candidates)


def test_no_candidate_fits_a_tiny_budget(advise_data) -> None:
    directory, queries, _ = advise_data
    with pytest.raises(BloomskipError, match=r"no candidate fits --budget-bits-per-row 1e-06; the"):
        advise(directory, queries, columns=["user_id"], budget_bits_per_row=1e-6)


def test_the_pareto_front_is_the_undominated_candidates(advice) -> None:
    for column in ("user_id", "msg"):
        mine = [c for c in advice.candidates if c.column == column]
        front = [c for c in mine if c.pareto]
        assert front
        for c in mine:
            dominated = any(
                o.index_bytes <= c.index_bytes
                and o.rows_read_fraction <= c.rows_read_fraction
                and (o.index_bytes, o.rows_read_fraction) != (c.index_bytes, c.rows_read_fraction)
                for o in mine
            )
            assert c.pareto == (not dominated)


def test_text_sizes_follow_the_formula() -> None:
    for items in (10, 1_000, 40_000):
        for rate in (0.1, 0.01, 0.001):
            for k in range(1, MAX_TEXT_HASHES + 1):
                bits = filter_bits(items, rate, k)
                assert false_positive_rate(items, bits, k) == pytest.approx(rate, rel=1e-9)
            size, hashes, derivation = text_size(items, rate)
            assert size & (size - 1) == 0 and 256 <= size <= 65536
            assert 1 <= hashes <= MAX_TEXT_HASHES
            if size < 65536:  # not clamped: the size reaches the rate
                assert false_positive_rate(items, 8 * size, hashes) <= rate
            assert "m = -n*k/ln(1-p^(1/k))" in derivation


def test_the_query_file_format() -> None:
    text = (
        "# log\n\n  user_id = 1\n12\thasToken(msg, 'a')\n   # indented comment\n3\tcode IN (1, 2)\n"
    )
    assert parse_queries(text, "q.txt") == [
        Query("user_id = 1", 1, 3),
        Query("hasToken(msg, 'a')", 12, 4),
        Query("code IN (1, 2)", 3, 6),
    ]
    with pytest.raises(BloomskipError, match=r"^q.txt:1: the count must be at least 1"):
        parse_queries("0\tv = 1\n", "q.txt")
    with pytest.raises(BloomskipError, match=r"^q.txt: no WHERE clause"):
        parse_queries("# nothing\n\n", "q.txt")


@pytest.mark.parametrize(
    "module",
    [
        "bloomskip.advise.queries",
        "bloomskip.advise.candidates",
        "bloomskip.advise.measure",
        "bloomskip.advise.report",
        "bloomskip.advise.cli",
    ],
)
def test_docstring_examples(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_a_column_no_index_can_serve_gets_none(advise_data) -> None:
    directory, _, _ = advise_data
    advice = advise(directory, ["user_id > 1000", "code < 2"])
    assert [(r.column, r.index) for r in advice.recommendations] == [
        ("user_id", None),
        ("code", None),
    ]
    assert advice.candidates == []
    reason = advice.recommendations[0].reason
    assert reason.startswith("no index can serve these queries: bloom_filter: no condition")
    assert "; tokenbf_v1: index 'user_id': column 'user_id' of type Int64: " in reason


def test_a_column_name_that_needs_quoting(tmp_path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = np.arange(60_000, dtype=np.int64)
    pq.write_table(pa.table({"user id": ids}), tmp_path / "t.parquet", row_group_size=8192)
    advice = advise(tmp_path / "t.parquet", ["`user id` = 12345", "`user id` IN (1, 59999)"])
    chosen = advice.recommendations[0]
    assert chosen.index.startswith("`user id` TYPE bloom_filter(")
    assert " ADD INDEX user_id_bf `user id` TYPE bloom_filter(" in chosen.clickhouse_ddl
    dataset = Dataset(tmp_path / "t.parquet", sidecar=tmp_path / "i.index")
    dataset.build_index([chosen.index], granule=chosen.granule, progress=False)
    for query in chosen.candidate.queries:
        read = _rows_read_by_explain(dataset, query["where"])
        assert read == round(query["rows_read_fraction"] * advice.rows)
