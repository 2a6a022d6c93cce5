"""An index must be worth its bytes (issue 33): what an average query of the whole log saves of
the column (its compressed size from the Parquet footers) against the index's size; every
recommended index in one ``bloomskip index build`` command at one granule."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip import Dataset
from bloomskip.advise import advise
from bloomskip.advise.advisor import _common_granule, _Plan, _recommend
from bloomskip.advise.candidates import Candidate
from bloomskip.advise.measure import sampled_units
from bloomskip.cli import main

#: The rare LIKE's log: 162 queries in all, the LIKE on msg counted once.
RARE_LOG_WEIGHT = 162


def write_weighted_log(path: Path, lines: list[tuple[int, str]]) -> None:
    """A query log of ``(count, WHERE)`` lines."""
    text = "".join(f"{count}\t{where}\n" for count, where in lines)
    path.write_text("# COUNT<TAB>WHERE\n" + text, encoding="utf-8")


def _rare_like_log(values: dict) -> list[tuple[int, str]]:
    """Point lookups and token searches of weight 161 on user_id and trace_id, and one LIKE
    on msg counted once."""
    ids, traces = values["user_id"], values["trace_id"]
    lookups = [20, 15, 12, 10, 9, 8, 7, 6, 5, 4]
    lines = [(count, f"user_id = {ids[i * 997]}") for i, count in enumerate(lookups)]
    lines.append((2, f"user_id IN ({ids[3]}, {ids[50_000]}, {ids[99_999]})"))
    searches = [20, 15, 10, 8, 5, 3]
    lines += [
        (count, f"hasToken(trace_id, '{traces[i * 1231 + 5]}')") for i, count in enumerate(searches)
    ]
    lines.append((2, "hasToken(trace_id, 'tr000000000000')"))
    took = values["msg"][12_345].split()[-1]  # "took=NNNNNus"
    lines.append((1, f"msg LIKE '%{took}%'"))
    assert sum(count for count, _ in lines) == RARE_LOG_WEIGHT
    return lines


@pytest.fixture(scope="module")
def rare_like(text_search_data, tmp_path_factory):
    """``(dataset folder, query log, advice)`` for the log of :func:`_rare_like_log`."""
    directory, values = text_search_data
    log = tmp_path_factory.mktemp("rare-like") / "queries.txt"
    write_weighted_log(log, _rare_like_log(values))
    return directory, log, advise(directory, log)


def _footer_bytes(directory) -> dict:
    sizes: dict = {}
    for path in sorted(directory.glob("*.parquet")):
        metadata = pq.ParquetFile(path).metadata
        for group in range(metadata.num_row_groups):
            for column in range(metadata.num_columns):
                chunk = metadata.row_group(group).column(column)
                sizes[chunk.path_in_schema] = (
                    sizes.get(chunk.path_in_schema, 0) + chunk.total_compressed_size
                )
    return sizes


def test_a_rare_like_gets_no_index_as_large_as_its_column(rare_like) -> None:
    _, _, advice = rare_like
    by_column = {r.column: r for r in advice.recommendations}
    found = [c for c in advice.candidates if c.column == "msg"]
    # What the issue saw recommended: the n-gram index reading the fewest rows for the LIKE is
    # as large as the column, and saves per query of the log 1/162 of the rows it skips (a
    # sparse_grams index, which holds the n-grams and longer grams, may read fewer still).
    fewest = min(found, key=lambda c: (c.rows_read_fraction, c.index_bytes))
    assert fewest.type in ("ngrambf_v1", "sparse_grams")
    assert fewest.rows_read_fraction < 0.2
    assert fewest.index_share > 0.95
    assert fewest.saved_share == pytest.approx((1 - fewest.rows_read_fraction) / RARE_LOG_WEIGHT)
    msg = by_column["msg"]
    assert msg.index is None and msg.granule is None and msg.clickhouse_ddl is None
    assert msg.reason.startswith(
        f"no candidate is worth its bytes: the one saving the most, msg TYPE {fewest.type}("
    )
    assert not any(c.worth_its_bytes() or c.worth_its_bytes(clickhouse=True) for c in found)
    # The lookups, 161 of the 162 queries, pay for theirs.
    assert by_column["user_id"].candidate.type == "bloom_filter"
    assert by_column["trace_id"].candidate.type == "tokenbf_v1"
    for column in ("user_id", "trace_id"):
        chosen = by_column[column]
        assert chosen.saved_share * chosen.column_bytes > chosen.index_bytes
        assert chosen.granule == advice.granule


def test_what_a_candidate_saves_per_query_of_the_log(rare_like) -> None:
    _, _, advice = rare_like
    for candidate in advice.candidates:
        share = sum(q["count"] for q in candidate.queries) / RARE_LOG_WEIGHT
        assert candidate.saved_share == pytest.approx(share * (1 - candidate.rows_read_fraction))
        assert candidate.clickhouse_saved_share == pytest.approx(
            share * (1 - candidate.clickhouse_rows_read_fraction)
        )
        assert candidate.worth_its_bytes() == (
            candidate.saved_share * candidate.column_bytes > candidate.index_bytes
        )


def test_column_sizes_come_from_the_parquet_footers(rare_like) -> None:
    directory, _, advice = rare_like
    sizes = _footer_bytes(directory)
    assert {r.column: r.column_bytes for r in advice.recommendations} == sizes
    for candidate in advice.candidates:
        assert candidate.column_bytes == sizes[candidate.column]
        assert candidate.index_share == candidate.index_bytes / sizes[candidate.column]


def test_text_output_shows_sizes_shares_and_one_build_command(rare_like, capsys) -> None:
    directory, log, advice = rare_like
    assert main(["advise", str(directory), "--where-file", str(log)]) == 0
    out = capsys.readouterr().out
    sizes = _footer_bytes(directory)
    assert f"msg: 1 query (weight 1), 0.62% of the log's weight; column {sizes['msg']:,} B " in out
    for column, size in sizes.items():
        assert f"{column}: " in out and f"column {size:,} B compressed" in out
    for r in advice.recommendations:
        if r.index is not None:
            assert f"({r.bits_per_row:.3f} bits/row, {r.index_share:.2%} of the column)" in out
    fewest = min(
        (c for c in advice.candidates if c.column == "msg"),
        key=lambda c: (c.rows_read_fraction, c.index_bytes),
    )
    line = next(
        line for line in out.splitlines() if line.endswith(f"  {fewest.index} [8,192 rows]")
    )
    assert f" {fewest.index_share:.2%} " in line and f" {fewest.saved_share:.2%} " in line
    # One command, every recommended index in it, at the one granule.
    assert out.count("bloomskip index build") == 1
    indexes = [r.index for r in advice.recommendations if r.index is not None]
    assert len(indexes) == 2
    command = (
        f"bloomskip index build {shlex.quote(str(directory))} --index {shlex.quote(indexes[0])} "
        f"--index {shlex.quote(indexes[1])} --granule {advice.granule}"
    )
    assert f"  {command}" in out.splitlines()


def test_json_carries_the_command_and_the_sizes(rare_like, capsys) -> None:
    directory, log, advice = rare_like
    assert main(["advise", str(directory), "--where-file", str(log), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["build_command"] == advice.build_command(str(directory))
    assert document["granule"] == advice.granule
    sizes = _footer_bytes(directory)
    for item in document["recommendations"]:
        assert "build_command" not in item
        assert item["column_compressed_bytes"] == sizes[item["column"]]
        expected = item["index_bytes"] / sizes[item["column"]]
        assert item["index_share_of_column"] == pytest.approx(expected)
    msg = next(item for item in document["recommendations"] if item["column"] == "msg")
    assert msg["index"] is None and msg["index_share_of_column"] == 0.0
    for candidate in document["candidates"]:
        saved = candidate["saved_share_per_query"] * candidate["column_compressed_bytes"]
        assert candidate["worth_its_bytes"] == (saved > candidate["index_bytes"])


def test_the_one_command_builds_every_index_as_measured(rare_like, tmp_path) -> None:
    directory, _, advice = rare_like
    sidecar = tmp_path / "all.index"
    arguments = shlex.split(advice.build_command(str(directory)))
    assert arguments[:3] == ["bloomskip", "index", "build"]
    assert main([*arguments[1:], "--sidecar", str(sidecar)]) == 0
    dataset = Dataset(directory, sidecar=sidecar)
    status = dataset.status()
    assert status["granule"] == advice.granule
    chosen = [r.candidate for r in advice.recommendations if r.candidate is not None]
    assert [item["bytes"] for item in status["indexes"]] == [c.index_bytes for c in chosen]
    for candidate in chosen:
        for query in candidate.queries:
            read = dataset.explain(query["where"]).plan.rows
            assert read == round(query["rows_read_fraction"] * advice.rows), query


def test_like_queries_of_most_weight_get_their_text_index(advise_data, tmp_path) -> None:
    directory, _, _ = advise_data
    first = pq.read_table(directory / "part-0.parquet", columns=["user_id", "msg"])
    ids, messages = first.column("user_id").to_pylist(), first.column("msg").to_pylist()
    lines = [(count, f"user_id = {ids[i * 997]}") for i, count in enumerate([10, 8, 6])]
    # "evt u<id> <word>": '%<id> <two letters>%' has no token a tokenbf_v1 could use whole.
    patterns = [messages[i * 4099 + 7].split(" u", 1)[1][:-1] for i in range(7)]
    counts = [40, 30, 20, 15, 10, 8, 5]
    lines += [(count, f"msg LIKE '%{p}%'") for count, p in zip(counts, patterns, strict=True)]
    write_weighted_log(tmp_path / "queries.txt", lines)
    advice = advise(directory, tmp_path / "queries.txt")
    msg = next(r for r in advice.recommendations if r.column == "msg")
    assert msg.candidate is not None and msg.candidate.type == "ngrambf_v1"
    assert msg.candidate.worth_its_bytes()
    # 128 of 152: the LIKEs save more of the column per query than the index holds.
    assert msg.saved_share > msg.index_share > 0.05
    assert msg.clickhouse_ddl is not None
    assert f"--index {shlex.quote(msg.index)}" in advice.build_command()
    assert msg.granule == advice.granule


def _synthetic(column: str, granule, rows: float, index_bytes: int) -> Candidate:
    """A measured candidate of one query counted once in a log of two, on a column of 1,000 B."""
    candidate = Candidate(
        column,
        "bloom_filter",
        f"{column} TYPE bloom_filter(0.01)",
        granule,
        0.01,
        clickhouse_granule_rows=granule if isinstance(granule, int) else None,
        index_bytes=index_bytes,
        rows_read_fraction=rows,
        clickhouse_rows_read_fraction=rows,
        queries=[{"count": 1}],
    )
    candidate.weigh(1000, 2)
    return candidate


def test_the_common_granule_saves_the_most_over_all_columns() -> None:
    # a saves 450 B per query at 8,192 rows, 350 B at row groups; b is worth its bytes only at
    # row groups (250 B saved, 200 B of index; at 8,192 rows 250 B saved, 600 B of index).
    a = [_synthetic("a", 8192, 0.1, 100), _synthetic("a", "row-group", 0.3, 100)]
    b = [_synthetic("b", 8192, 0.5, 600), _synthetic("b", "row-group", 0.5, 200)]
    granule, choices = _common_granule({"a": a, "b": b})
    assert granule == "row-group"  # 350 + 250 B saved, against 450 B at 8,192 rows
    assert choices["a"][0] is a[1] and choices["b"][0] is b[1]
    # With a reading nothing at 8,192 rows (500 B saved), 8,192 rows wins, and b gets no index
    # there: its reason names the granule it would have been worth its bytes at.
    a = [_synthetic("a", 8192, 0.0, 100), _synthetic("a", "row-group", 0.6, 100)]
    granule, choices = _common_granule({"a": a, "b": b})
    assert granule == 8192 and choices["b"][0] is None
    none = _recommend("b", b, _Plan("b", None, []), None, "t", granule, choices["b"], 1000)
    assert none.index is None and none.clickhouse_ddl is None
    assert none.reason.startswith(
        "at the common granule (8,192 rows): no candidate is worth its bytes: the one saving the "
        "most, b TYPE bloom_filter(0.01) [8,192 rows], reads 50.00% of the rows, so an average "
        "query of the log saves 25.00% of the column's 1,000 B, but the index is 60.00% of it; "
        "b TYPE bloom_filter(0.01) [row-group] would be"
    )
    # No column worth an index anywhere: no granule, nothing to build.
    assert _common_granule({"b": [b[0]]}) == (None, {})


def test_column_bytes_of_every_file_from_the_footers(tmp_path) -> None:
    values = np.arange(50_000, dtype=np.int64)
    pq.write_table(pa.table({"v": values, "w": values * 3}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"v": values[::-1].copy()}), tmp_path / "b.parquet")
    files = Dataset(tmp_path).files
    expected = _footer_bytes(tmp_path)
    assert sampled_units(files, None)[2] == expected  # w: only a.parquet holds it
    assert sampled_units(files, 1)[2] == expected  # the sample's size does not change it
    ipc = tmp_path / "ipc" / "t.arrow"
    ipc.parent.mkdir()
    batch = pa.record_batch({"v": values, "s": pa.array([str(x) for x in values.tolist()])})
    with pa.ipc.new_file(ipc, batch.schema) as writer:
        writer.write_batch(batch)
        writer.write_batch(batch)
    assert sampled_units(Dataset(ipc).files, None)[2] == {
        "v": 2 * batch.column(0).nbytes,
        "s": 2 * batch.column(1).nbytes,
    }


def test_a_column_with_no_stored_bytes_gets_no_index(tmp_path) -> None:
    # A key=value folder's column is in no file: no query can save any of its bytes.
    for number, day in enumerate(("a", "b")):
        (tmp_path / f"dt={day}").mkdir()
        values = np.arange(number * 50_000, (number + 1) * 50_000, dtype=np.int64)
        pq.write_table(pa.table({"v": values}), tmp_path / f"dt={day}" / "p.parquet")
    advice = advise(tmp_path, ["dt = 'a'", "v = 5"])
    by_column = {r.column: r for r in advice.recommendations}
    assert by_column["dt"].column_bytes == 0 and by_column["dt"].index_share is None
    assert by_column["dt"].index is None
    assert by_column["dt"].reason == (
        "no candidate is worth its bytes: the column has no stored bytes in the files, so no "
        "query saves any"
    )
    assert by_column["v"].index is not None
    assert advice.build_command() == (
        f"bloomskip index build {shlex.quote(str(tmp_path))} --index "
        f"{shlex.quote(by_column['v'].index)} --granule {advice.granule}"
    )


def test_sparse_grams_candidates_for_a_like(rare_like) -> None:
    """A LIKE on a String column makes sparse_grams(3, 100, ...) a candidate, sized and measured
    like the other text indexes, its --index text a valid definition."""
    from bloomskip.clickhouse.ddl import parse_index_definition

    _, _, advice = rare_like
    sparse = [c for c in advice.candidates if c.column == "msg" and c.type == "sparse_grams"]
    assert sparse
    for candidate in sparse:
        definition = parse_index_definition(candidate.index)
        assert (definition.min_ngram_length, definition.max_ngram_length) == (3, 100)
        assert candidate.rows_read_fraction < 1
