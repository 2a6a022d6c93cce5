"""ClickHouse ``bloom_filter(fpr)`` sizing: false-positive rate -> (bits per row, hash count).

ClickHouse does not compute the size from a formula; it searches a table of measured
false-positive rates (``BloomFilterHash::calculationBestPractices``). The table is declared
``long double`` and the argument is converted to ``long double`` before every comparison, so on
x86-64 the comparisons happen with 64-bit significands. A port that compares in plain ``double``
disagrees at table entries that are not exactly representable, e.g. ``0.092`` gives (6, 2) in
ClickHouse but (5, 3) in double arithmetic. This module emulates the x87 comparison exactly with
:class:`fractions.Fraction`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

__all__ = [
    "DEFAULT_FALSE_POSITIVE_RATE",
    "MAX_HASH_FUNCTIONS",
    "bloom_filter_parameters",
    "long_double",
]

#: ``bloom_filter`` without an argument uses this rate.
DEFAULT_FALSE_POSITIVE_RATE = 0.025

#: Largest hash count the table can return (the ``bf_hash_seed`` table has 15 seeds).
MAX_HASH_FUNCTIONS = 15

# Rates at or above this return the smallest parameters without searching the table.
_SMALLEST_PARAMETERS_FROM = 0.283
_SMALLEST_PARAMETERS = (2, 2)

# Index of the smallest rate in each table row (ClickHouse's min_probability_index_each_bits).
_BEST_HASH_INDEX = (0, 0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 8, 9, 10, 10, 11, 12, 12, 13, 14)

# The measured table, row = bits per row, column = hash count - 1, as decimal literals exactly as
# written in the C++ source (they are rounded to long double below, not to double).
_RATE_TABLE: tuple[tuple[str, ...], ...] = (
    ("1.0",),
    ("1.0", "1.0"),
    ("1.0", "0.393", "0.400"),
    ("1.0", "0.283", "0.237", "0.253"),
    ("1.0", "0.221", "0.155", "0.147", "0.160"),
    ("1.0", "0.181", "0.109", "0.092", "0.092", "0.101"),
    ("1.0", "0.154", "0.0804", "0.0609", "0.0561", "0.0578", "0.0638"),
    ("1.0", "0.133", "0.0618", "0.0423", "0.0359", "0.0347", "0.0364"),
    ("1.0", "0.118", "0.0489", "0.0306", "0.024", "0.0217", "0.0216", "0.0229"),
    ("1.0", "0.105", "0.0397", "0.0228", "0.0166", "0.0141", "0.0133", "0.0135", "0.0145"),
    ("1.0", "0.0952", "0.0329", "0.0174", "0.0118", "0.00943", "0.00844", "0.00819", "0.00846"),
    ("1.0", "0.0869", "0.0276", "0.0136", "0.00864", "0.0065", "0.00552", "0.00513", "0.00509"),
    ("1.0", "0.08", "0.0236", "0.0108", "0.00646", "0.00459", "0.00371", "0.00329", "0.00314"),
    (
        "1.0", "0.074", "0.0203", "0.00875", "0.00492", "0.00332", "0.00255", "0.00217",
        "0.00199", "0.00194",
    ),
    (
        "1.0", "0.0689", "0.0177", "0.00718", "0.00381", "0.00244", "0.00179", "0.00146",
        "0.00129", "0.00121", "0.0012",
    ),
    (
        "1.0", "0.0645", "0.0156", "0.00596", "0.003", "0.00183", "0.00128", "0.001",
        "0.000852", "0.000775", "0.000744",
    ),
    (
        "1.0", "0.0606", "0.0138", "0.005", "0.00239", "0.00139", "0.000935", "0.000702",
        "0.000574", "0.000505", "0.00047", "0.000459",
    ),
    (
        "1.0", "0.0571", "0.0123", "0.00423", "0.00193", "0.00107", "0.000692", "0.000499",
        "0.000394", "0.000335", "0.000302", "0.000287", "0.000284",
    ),
    (
        "1.0", "0.054", "0.0111", "0.00362", "0.00158", "0.000839", "0.000519", "0.00036",
        "0.000275", "0.000226", "0.000198", "0.000183", "0.000176",
    ),
    (
        "1.0", "0.0513", "0.00998", "0.00312", "0.0013", "0.000663", "0.000394", "0.000264",
        "0.000194", "0.000155", "0.000132", "0.000118", "0.000111", "0.000109",
    ),
    (
        "1.0", "0.0488", "0.00906", "0.0027", "0.00108", "0.00053", "0.000303", "0.000196",
        "0.00014", "0.000108", "8.89e-05", "7.77e-05", "7.12e-05", "6.79e-05", "6.71e-05",
    ),
)  # fmt: skip

_MAX_BITS_PER_ROW = 20
_LONG_DOUBLE_SIGNIFICAND_BITS = 64


def long_double(literal: str | float | Fraction) -> Fraction:
    """Round a value to the nearest x87 80-bit long double, as the C++ compiler does for ``1.5L``.

    Args:
        literal: A decimal literal (as text), a float or an exact fraction; must be finite.

    Returns:
        The exact value of the nearest long double (64-bit significand, ties to even).

    Raises:
        ValueError: If the value is not finite.

    Example:
        >>> long_double("0.092") == Fraction(0.092)
        False
    """
    if isinstance(literal, float) and not math.isfinite(literal):
        raise ValueError(f"a long double here must be finite, got {literal}")
    value = Fraction(literal)
    if value == 0:
        return value
    sign = -1 if value < 0 else 1
    magnitude = abs(value)
    # Scale so that the significand has exactly 64 integer bits, then round half to even.
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** exponent > magnitude:
        exponent -= 1
    shift = _LONG_DOUBLE_SIGNIFICAND_BITS - 1 - exponent
    scaled = magnitude * Fraction(2) ** shift
    significand = round(scaled)  # Fraction.__round__ rounds half to even
    return sign * Fraction(significand) / Fraction(2) ** shift


@cache
def _rate_row(bits_per_row: int) -> tuple[Fraction, ...]:
    # Converted as the search reaches a row: the whole table costs a first definition ~2 ms.
    return tuple(long_double(cell) for cell in _RATE_TABLE[bits_per_row])


def bloom_filter_parameters(
    false_positive_rate: float = DEFAULT_FALSE_POSITIVE_RATE,
) -> tuple[int, int]:
    """Return ClickHouse's ``(bits_per_row, hash_functions)`` for a ``bloom_filter(fpr)`` index.

    The rate is first clamped to ``[0, 1]`` as ClickHouse's index creator does (the DDL validator
    rejects values outside that range before they get here; see :mod:`bloomskip.clickhouse.ddl`).

    Args:
        false_positive_rate: The ``fpr`` argument of ``bloom_filter``; default 0.025.

    Returns:
        ``(bits_per_row, hash_functions)``, e.g. ``(8, 4)`` for 0.025.

    Example:
        >>> bloom_filter_parameters(0.092)
        (6, 2)
    """
    rate = float(false_positive_rate)
    # std::min(1.0, std::max(rate, 0.0)) as ClickHouse writes it: a NaN survives std::max and
    # std::min then returns 1.0, so bloom_filter(nan) gets the smallest parameters.
    rate = 1.0 if math.isnan(rate) else min(1.0, max(rate, 0.0))
    if rate >= _SMALLEST_PARAMETERS_FROM:
        return _SMALLEST_PARAMETERS
    exact_rate = Fraction(rate)  # a double converts to long double exactly
    # Like ClickHouse, the search never reaches the last row (bits_per_row < 20).
    for bits_per_row in range(1, _MAX_BITS_PER_ROW):
        row = _rate_row(bits_per_row)
        best = _BEST_HASH_INDEX[bits_per_row]
        if row[best] <= exact_rate:
            for hashes in range(best, 0, -1):
                if row[hashes] > exact_rate:
                    return bits_per_row, hashes + 1
    # Nothing fits: the most restrictive row the loop visits.
    return _MAX_BITS_PER_ROW - 1, _BEST_HASH_INDEX[_MAX_BITS_PER_ROW - 1]
