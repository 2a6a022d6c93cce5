"""The ClickHouse DDL ``advise`` prints, run in real ClickHouse (chdb): the data granules its
``EXPLAIN indexes = 1`` selects for each query equal the ones ``advise`` measured."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

DATABASE = "advise_clickhouse"


def _granules(explain: str, index_name: str) -> tuple[int, int] | None:
    """``(kept, total)`` from the ``Granules: x/y`` line of ``index_name``; None if absent."""
    lines = [line.strip() for line in explain.splitlines()]
    for number, line in enumerate(lines):
        if line == f"Name: {index_name}":
            for following in lines[number + 1 : number + 8]:
                if following.startswith("Granules:"):
                    kept, total = following.split(":", 1)[1].strip().split("/")
                    return int(kept), int(total)
    return None


def _check_in_clickhouse(query, chdb_session, directory, ddl: str, index_name: str, candidate):
    """Create a table, run ``ddl`` on it, insert the files; compare EXPLAIN with ``candidate``.

    Returns:
        The number of queries compared.
    """
    files = sorted(directory.glob("*.parquet"))
    table = f"{DATABASE}.events"
    query(f"DROP TABLE IF EXISTS {table} SYNC")
    # Granules of exactly 8,192 rows (no adaptive granularity), rows in file order.
    query(
        f"CREATE TABLE {table} (user_id Int64, msg String, code Int64) ENGINE = MergeTree "
        "ORDER BY tuple() SETTINGS index_granularity = 8192, index_granularity_bytes = 0"
    )
    query(ddl.format(table=table))
    query(f"SYSTEM STOP MERGES {table}")
    for path in files:  # one part per file, as a build cuts granules per file
        query(
            f"INSERT INTO {table} SELECT * FROM file('{path}', Parquet) "
            "SETTINGS max_threads = 1, input_format_parquet_preserve_order = 1"
        )
    stored = chdb_session.query(
        f"SELECT user_id FROM {table} ORDER BY _part, _part_offset", "ArrowTable"
    ).column(0)
    expected = pa.concat_tables([pq.read_table(path) for path in files]).column("user_id")
    assert stored.equals(expected)
    total = 2 * 13  # two parts of 100,000 rows: 12 granules of 8,192 and one of 1,696
    for measured in candidate.queries:
        explain = query(
            f"EXPLAIN indexes = 1 SELECT * FROM {table} WHERE {measured['where']} "
            "SETTINGS use_skip_indexes = 1, use_query_condition_cache = 0",
            "TabSeparatedRaw",
        )
        granules = _granules(explain, index_name)
        assert granules is None or granules[1] == total
        kept = granules[0] if granules is not None else total  # index not used: all read
        assert kept == measured["clickhouse_granules_kept"], (ddl, measured)
    query(f"DROP TABLE {table} SYNC")
    return len(candidate.queries)


def test_the_ddl_selects_in_clickhouse_what_advise_measured(
    chdb_session, advice, advise_data
) -> None:
    directory, _, _ = advise_data

    def query(sql: str, fmt: str = "CSV") -> str:
        return chdb_session.query(sql, fmt).bytes().decode()

    query(f"CREATE DATABASE IF NOT EXISTS {DATABASE} ENGINE = Atomic")
    checked = 0
    for recommendation in advice.recommendations:
        server = recommendation.clickhouse_candidate
        if server is None:
            assert recommendation.clickhouse_ddl is None
            continue
        ddl = recommendation.clickhouse_ddl.replace(
            f"ALTER TABLE {advice.table} ", "ALTER TABLE {table} ", 1
        )
        index_name = ddl.split(" ADD INDEX ", 1)[1].split()[0]
        checked += _check_in_clickhouse(query, chdb_session, directory, ddl, index_name, server)
    assert checked >= 10
    # Coarser index granules too: GRANULARITY 2 (the 16,384-row groups), 4 and 8.
    for column in ("user_id", "msg"):
        for granule in ("row-group", 32768, 65536):
            candidate = next(
                c for c in advice.candidates if c.column == column and c.granule == granule
            )
            expected = 2 if granule == "row-group" else granule // 8192
            assert candidate.clickhouse_granularity == expected
            ddl = (
                f"ALTER TABLE {{table}} ADD INDEX i {candidate.index} "
                f"GRANULARITY {candidate.clickhouse_granularity}"
            )
            _check_in_clickhouse(query, chdb_session, directory, ddl, "i", candidate)
