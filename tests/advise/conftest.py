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


def write_text_search_data(directory: Path) -> dict:
    """Write log data whose ``msg`` is a text column a rare LIKE searches (issue 33).

    Columns: ``user_id`` (200,000 distinct integers in random order), ``trace_id``
    (``"tr<12 hex digits>"``, one distinct token per row) and ``msg``
    (``"<verb> /srv/<8 hex>/<8 hex> <status> took=<micros>us"``, the path one of 2,000, the
    ``took=`` number one of 100,000). ZSTD without dictionary pages compresses ``msg`` to about
    60 bits per row, while each 8,192 rows hold some 50,000 distinct 5-grams: the n-gram index a
    ``LIKE '%took=NNNNNus%'`` needs to read few granules is larger than the column.

    Returns:
        ``{"user_id", "trace_id", "msg"}``: each column's values of the first file, as lists.
    """
    rng = np.random.default_rng(33)
    ids = rng.permutation(FILES * FILE_ROWS).astype(np.int64) * 7 + 3
    paths = np.array(
        [f"/srv/{a:08x}/{b:08x}" for a, b in rng.integers(0, 1 << 32, (2000, 2)).tolist()]
    )
    verbs, statuses = np.array(["GET", "POST", "PUT"]), np.array(["200", "404", "500"])
    directory.mkdir(parents=True, exist_ok=True)
    first = {}
    for number in range(FILES):
        took = rng.integers(0, 100_000, FILE_ROWS)
        msg = [
            f"{verb} {path} {status} took={micros}us"
            for verb, path, status, micros in zip(
                verbs[rng.integers(0, 3, FILE_ROWS)],
                paths[rng.integers(0, len(paths), FILE_ROWS)],
                statuses[rng.integers(0, 3, FILE_ROWS)],
                took.tolist(),
                strict=True,
            )
        ]
        trace = [f"tr{value:012x}" for value in rng.integers(0, 1 << 48, FILE_ROWS).tolist()]
        table = pa.table(
            {
                "user_id": pa.array(ids[number * FILE_ROWS : (number + 1) * FILE_ROWS]),
                "trace_id": pa.array(trace),
                "msg": pa.array(msg),
            }
        )
        if number == 0:
            first = {name: table.column(name).to_pylist() for name in table.column_names}
        pq.write_table(
            table,
            directory / f"part-{number}.parquet",
            row_group_size=ROW_GROUP_ROWS,
            compression="zstd",
            compression_level=19,
            use_dictionary=False,
        )
    return first


@pytest.fixture(scope="package")
def text_search_data(tmp_path_factory) -> tuple[Path, dict]:
    """``(dataset folder, the first file's values)`` of :func:`write_text_search_data`."""
    root = tmp_path_factory.mktemp("advise-text")
    values = write_text_search_data(root / "logs")
    return root / "logs", values


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
