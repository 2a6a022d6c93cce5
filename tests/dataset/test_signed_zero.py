"""``-0.0`` and ``0.0``, and NaNs of either sign, in a Float32 / Float64 column: chdb's rows.

ClickHouse compares floats two ways. ``=``, ``!=``, ``<``... are IEEE: ``-0.0 = 0`` holds and a
NaN equals nothing. ``IN`` / ``NOT IN`` look the value up in a set of the constants converted to
the column's type, by bit pattern: ``f IN (0)`` holds for ``0.0`` only, ``f IN (-0.0)`` for
``-0.0`` only, and a NaN is in a set holding a NaN of the same bits (``nan``, ``-nan`` and
``'nan'`` are ``0x7ff8…``; ``-(nan)`` and ``'-nan'`` are ``0xfff8…``). DuckDB's ``IN`` compares
as its ``=`` does (``-0.0 = 0.0``, any NaN equal to any NaN), so the exact filter compares bits.
The ``bloom_filter`` index hashes the bits: it must never skip a granule holding a row the exact
filter keeps (``f = 0`` keeps the granules holding only ``-0.0``).

The reference is chdb over the same file with ``input_format_parquet_filter_push_down = 0``:
with it, ClickHouse also skips a row group by its Parquet min/max, which leave NaN out, so that
``f IN (nan)`` loses the NaN rows of a row group whose other values are not in the set (a
layout-dependent answer; ``test_push_down_only_drops_nan_rows`` shows the difference is only
that).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip.dataset import Dataset

if TYPE_CHECKING:
    from chdb.session import Session

# Bit patterns of the values, Float64 and Float32: +0, -0, 1, 2, +NaN, -NaN, a NaN with a payload,
# +inf, and a NULL (the last).
BITS64 = [0, 1 << 63, 0x3FF0 << 48, 0x4000 << 48, 0x7FF8 << 48, 0xFFF8 << 48, (0x7FF8 << 48) | 5]
BITS64 += [0x7FF0 << 48, None]
BITS32 = [0, 1 << 31, 0x3F800000, 0x40000000, 0x7FC00000, 0xFFC00000, 0x7FC00005, 0x7F800000]
BITS32 += [None]
COPIES = 3  # rows per value: the file is ordered by value, a row group per value
# Row groups whose values other than NaN and NULL are all one number (DuckDB decides a pushed
# filter from such a row group's min/max, which leave NaN out, at that number).
P, N, Z, M = 0x7FF8 << 48, 0xFFF8 << 48, 0, 1 << 63  # +NaN, -NaN, 0.0, -0.0
ONE, TWO, INF = 0x3FF0 << 48, 0x4000 << 48, 0x7FF0 << 48
CONSTANT_GROUPS = [Z, P, N, M, P, N, ONE, P, N, TWO, N, P, INF, N, P, Z, Z, P, M, M, N, TWO, TWO]
CONSTANT_GROUPS += [None, None, P, ONE]
NO_PUSH_DOWN = "SETTINGS input_format_parquet_filter_push_down = 0"


def _column(bits: list[int | None], unsigned: str, float_type: str) -> np.ndarray:
    raw = np.array([0 if b is None else b for b in bits], unsigned).repeat(COPIES)
    return raw.view(float_type)


def _table() -> pa.Table:
    nulls = np.array([b is None for b in BITS64]).repeat(COPIES)
    ids = np.arange(len(nulls))
    shuffled = ids * 5 % len(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "f": pa.array(_column(BITS64, "u8", "f8"), mask=nulls),
            "g": pa.array(_column(BITS32, "u4", "f4"), mask=nulls),
            # The same values in another order: row groups holding several of them.
            "h": pa.array(_column(BITS64, "u8", "f8")[shuffled], mask=nulls[shuffled]),
            "k": pa.array(
                np.array([b or 0 for b in CONSTANT_GROUPS], "u8").view("f8"),
                mask=np.array([b is None for b in CONSTANT_GROUPS]),
            ),
        }
    )


def _clauses(column: str) -> list[str]:
    zeros = ["0", "-0", "0.0", "-0.0", "'0'", "'-0'", "1e-400", "-1e-400", "toFloat32(-0.0)"]
    zeros += ["toFloat64(-0.0)", "-(0.0)", "toFloat32('-0')"]
    nans = ["nan", "-nan", "- nan", "-(nan)", "'nan'", "'-nan'", "toFloat64('-nan')"]
    nans += ["toFloat32(-(nan))", "-(-(nan))"]
    clauses = []
    for value in zeros:
        clauses += [
            f"{column} = {value}",
            f"{column} != {value}",
            f"{column} IN ({value})",
            f"{column} NOT IN ({value})",
            f"{column} IN ({value}, 2)",
            f"{column} NOT IN ({value}, 2)",
        ]
    for value in nans:
        clauses += [
            f"{column} = {value}",
            f"{column} IN ({value})",
            f"{column} IN ({value}, 1)",
            f"{column} NOT IN ({value}, 1)",
        ]
    clauses += [
        f"{column} IN (-0.0, 0.0)",
        f"{column} IN (0, 0.0, 1)",
        f"{column} IN (-0.0, NULL)",
        f"{column} NOT IN (-0.0, NULL)",
        f"{column} IN (1, 2)",
        f"{column} IN (1.0, 2.0, inf)",
        f"{column} NOT IN (1, 2)",
        f"{column} IN (nan, -(nan), 0, -0.0)",
        f"{column} IN (inf, nan)",
        f"NOT ({column} IN (0))",
        f"{column} IN (0) OR {column} IN (-0.0)",
        f"{column} IN (-0.0) AND id >= 0",
        f"{column} = 0 OR {column} = 2",
        f"{column} = -0.0 OR {column} IN (2)",
        f"{column} != 0 AND {column} != 2",
        f"equals({column}, -0.0)",
        f"notEquals({column}, 0)",
        f"{column} <= 0 AND {column} >= -0.0",
        f"{column} IN ('0', '-0', '2')",
        f"isNaN({column})",
        f"NOT isNaN({column})",
        f"isNaN({column}) OR {column} = 1",
        f"{column} IN (" + ", ".join(str(v) for v in range(0, 200, 2)) + ")",
        f"{column} NOT IN (" + ", ".join(str(v) for v in range(0, 200, 2)) + ")",
        f"{column} IN (" + ", ".join(f"'{v}'" for v in range(-1, 99)) + ", '-0')",
    ]
    return clauses


COLUMNS = ("f", "g", "h", "k")
CLAUSES = [clause for column in COLUMNS for clause in _clauses(column)]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("signed-zero") / "data"
    folder.mkdir()
    pq.write_table(_table(), folder / "floats.parquet", row_group_size=COPIES)
    return folder


@pytest.fixture(scope="module")
def datasets(folder: Path) -> dict[str, Dataset]:
    plain = Dataset(folder, sidecar=folder / "_none.index")
    by_group = Dataset(folder, sidecar=folder / "_groups.index")
    by_group.build_index(
        [f"INDEX {c}_bf {c} TYPE bloom_filter(0.001)" for c in COLUMNS],
        granule="row-group",
        progress=False,
    )
    by_rows = Dataset(folder, sidecar=folder / "_rows.index")
    by_rows.build_index(
        [f"INDEX {c}_bf {c} TYPE bloom_filter(0.001)" for c in COLUMNS],
        granule=2,
        progress=False,
    )
    return {"no index": plain, "row groups": by_group, "2 rows": by_rows}


def _clickhouse(session: Session, folder: Path, where: str, settings: str = NO_PUSH_DOWN):
    text = session.query(
        f"SELECT id FROM file('{folder}/*.parquet', Parquet) WHERE {where} ORDER BY id {settings}",
        "CSV",
    ).bytes()
    return [int(value) for value in text.split()]


@pytest.mark.parametrize("where", CLAUSES)
def test_floats_match_chdb(where: str, folder: Path, datasets, chdb_session: Session) -> None:
    expected = _clickhouse(chdb_session, folder, where)
    for name, dataset in datasets.items():
        got = sorted(dataset.query(where, ["id"]).column("id").to_pylist())
        assert got == expected, (name, where)


def test_the_index_is_used(datasets) -> None:
    """The index skips what it can, never a row group holding a row the filter keeps: ``f = 0``
    keeps the row groups holding either zero (and the NULLs', which hash the 0.0 stored under
    them), ``f IN (0)`` and ``g IN (-0.0)`` the same (a zero is probed with both signs); a NaN
    is probed with its own bits."""
    indexed = datasets["row groups"]
    groups = len(BITS64)
    for where in ("f IN (1)", "f = 0", "f IN (0)", "g IN (-0.0)", "f IN (-(nan))", "f IN (-nan)"):
        outcome = next(o for o in indexed.explain(where).indexes if o.useful)
        assert outcome.granules == groups
        kept = 3 if "0" in where else 1
        assert outcome.granules - outcome.granules_skipped == kept, where


def test_push_down_only_drops_nan_and_zero_rows(folder: Path, chdb_session: Session) -> None:
    """ClickHouse's default reading differs from the reference only by rows it skips with their
    row group from its min/max, which leave NaN out and do not tell -0.0 from 0.0 (a row group
    of -0.0 only is "all equal to 0" for ``f NOT IN (0)``)."""
    table = _table()
    for column in COLUMNS:
        values = table.column(column).to_pylist()
        for where in _clauses(column):
            default = set(_clickhouse(chdb_session, folder, where, ""))
            reference = set(_clickhouse(chdb_session, folder, where))
            assert default <= reference, where
            for row in reference - default:
                assert values[row] == 0 or np.isnan(values[row]), (where, row)
