"""bloom_filter(fpr) -> (bits per row, hashes), against chdb's index files."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.clickhouse.sizing import _RATE_TABLE, bloom_filter_parameters, long_double

# The values the research measured in chdb 26.9.2.1 (§5), including the long-double edge 0.092.
MEASURED = {
    0.1: (5, 3),
    0.05: (7, 3),
    0.025: (8, 4),
    0.01: (10, 5),
    0.001: (15, 7),
    0.0001: (19, 13),
    0.283: (2, 2),
    0.5: (2, 2),
    0.092: (6, 2),
    0.0216: (8, 6),
    0.0229: (8, 5),
}


@pytest.mark.parametrize(("rate", "expected"), sorted(MEASURED.items()))
def test_measured_values(rate: float, expected: tuple[int, int]) -> None:
    assert bloom_filter_parameters(rate) == expected


def test_default_and_clamping() -> None:
    assert bloom_filter_parameters() == (8, 4)
    assert bloom_filter_parameters(-1.0) == bloom_filter_parameters(0.0) == (19, 13)
    assert bloom_filter_parameters(2.0) == (2, 2)


def test_long_double_rounding() -> None:
    # The double 0.092 lies below the long double 0.092L, so row 5's best entry (0.092L) does
    # not compare <= the argument and the search moves on to row 6: (6, 2), not (5, 3).
    assert Fraction(0.092) < long_double("0.092")
    assert long_double("0.5") == Fraction(1, 2)
    assert long_double("-0.25") == Fraction(-1, 4)
    # A 64-bit significand: 1 + 2**-63 is representable, 1 + 2**-64 rounds (to even) to 1.
    assert long_double(1 + Fraction(1, 2**63)) == 1 + Fraction(1, 2**63)
    assert long_double(1 + Fraction(1, 2**64)) == 1


def _candidate_rates() -> list[float]:
    """Every table entry, its neighbouring doubles, common rates and a seeded random sample."""
    rates = {0.0, 1.0, 0.025, 0.01, 0.001, 0.3, 0.2999, 0.283}
    for row in _RATE_TABLE:
        for cell in row:
            value = float(cell)
            if value < 1.0:
                rates.update({value, math.nextafter(value, 0.0), math.nextafter(value, 1.0)})
    generator = np.random.default_rng(20261130)
    rates.update(float(x) for x in 10.0 ** generator.uniform(-5, -0.5, 60))
    return sorted(rates)


def test_every_boundary_against_chdb(clickhouse) -> None:
    """One index per rate over 8 distinct values: the filter is bits_per_row bytes long, and the
    bytes (which depend on the hash count) must equal bloomskip's."""
    rates = _candidate_rates()
    checked = 0
    for start in range(0, len(rates), 120):
        batch = rates[start : start + 120]
        clauses = [
            f"INDEX r{number} v TYPE bloom_filter({rate!r}) GRANULARITY 1"
            for number, rate in enumerate(batch)
        ]
        part = clickhouse.create_part(
            {"v": "UInt64"}, clauses, "SELECT number * 7919 FROM numbers(8)"
        )
        for number, rate in enumerate(batch):
            stream = part.index_stream(f"r{number}")
            assert stream[0] == 8, "8 distinct values"
            bits_per_row, hashes = bloom_filter_parameters(rate)
            assert len(stream) - 1 == bits_per_row, f"fpr {rate!r}"
            definition = part.indexes[f"r{number}"]
            assert (definition.bits_per_row, definition.hash_functions) == (bits_per_row, hashes)
            built = SkipIndex.build(definition, part.data, part.granule_rows, part.columns)
            assert built.to_bytes() == stream, f"fpr {rate!r}: hash count {hashes}"
            checked += 1
    assert checked == len(rates) > 450


def test_nan_rate_matches_chdb(clickhouse) -> None:
    # ClickHouse's validator lets nan through; its clamp std::min(1.0, std::max(nan, 0.0)) is 1.0.
    part = clickhouse.create_part(
        {"v": "UInt64"},
        ["INDEX n v TYPE bloom_filter(nan) GRANULARITY 1"],
        "SELECT number FROM numbers(8)",
    )
    definition = parse_index_definition("INDEX n v TYPE bloom_filter(nan)")
    assert (definition.bits_per_row, definition.hash_functions) == (2, 2)
    built = SkipIndex.build(definition, part.data, part.granule_rows, part.columns)
    assert built.to_bytes() == part.index_stream("n")
