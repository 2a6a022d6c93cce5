"""Generated data whose best indexes are known, and a query log over it (issue 18)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

#: Two files of 100,000 rows in row groups of 16,384 rows: 7 row groups each, the last one of
#: 1,696 rows, so that fixed granules of 8,192 rows and more carry over row groups and end short.
FILE_ROWS = 100_000
ROW_GROUP_ROWS = 16_384
FILES = 2


def write_advise_data(directory: Path) -> dict:
    """Write the data; return the constants the queries use.

    Columns (known cardinalities):
        ``user_id``: 200,000 distinct integers in random order (a point lookup matches one row).
        ``msg``: ``"evt u<user_id> <word>"``: one distinct ``u…`` token per row, and one of
            eight words; hasToken on the ``u…`` token matches one row.
        ``code``: ``row % 4``: each of its four values is in every granule.
    """
    rng = np.random.default_rng(18)
    ids = rng.permutation(FILES * FILE_ROWS).astype(np.int64) * 7 + 3
    words = np.array(["ok", "slow", "retry", "fail", "cache", "miss", "hit", "drop"])
    directory.mkdir(parents=True, exist_ok=True)
    for number in range(FILES):
        part = ids[number * FILE_ROWS : (number + 1) * FILE_ROWS]
        msg = pc.binary_join_element_wise(
            "evt",
            pc.binary_join_element_wise("u", pc.cast(pa.array(part), pa.string()), ""),
            pa.array(words[rng.integers(0, len(words), FILE_ROWS)]),
            " ",
        )
        table = pa.table(
            {
                "user_id": pa.array(part),
                "msg": msg,
                "code": pa.array(np.arange(FILE_ROWS, dtype=np.int64) % 4),
            }
        )
        pq.write_table(table, directory / f"part-{number}.parquet", row_group_size=ROW_GROUP_ROWS)
    return {"ids": ids}


def write_query_log(path: Path, ids: np.ndarray) -> list[str]:
    """A query log with counts; returns the WHERE clauses in order."""
    picks = [int(ids[i]) for i in (11, 40_000, 77_777, 123_456, 199_999)]
    wheres = [f"user_id = {value}" for value in picks]
    wheres += [f"user_id IN ({picks[0]}, {picks[3]})"]
    wheres += [f"hasToken(msg, 'u{value}')" for value in picks[:4]]
    wheres += ["code = 1", "code IN (2, 3)"]
    counts = [50, 40, 30, 20, 10, 25, 30, 20, 10, 5, 60, 15]
    lines = ["# a query log: COUNT<TAB>WHERE", ""]
    lines += [f"{count}\t{where}" for count, where in zip(counts, wheres, strict=True)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return wheres


@pytest.fixture(scope="package")
def advise_data(tmp_path_factory) -> tuple[Path, Path, list[str]]:
    """``(dataset folder, query log, WHERE clauses)``."""
    root = tmp_path_factory.mktemp("advise")
    constants = write_advise_data(root / "logs")
    queries = root / "queries.txt"
    wheres = write_query_log(queries, constants["ids"])
    return root / "logs", queries, wheres


@pytest.fixture(scope="package")
def advice(advise_data):
    """The advice for the data and the log, computed once."""
    from bloomskip.advise import advise

    directory, queries, _ = advise_data
    return advise(directory, queries)
