"""The bloom_filter builder's set of distinct hashes, byte for byte against chdb's index files.

The C builder keeps each granule's distinct value hashes in one open-addressing array where 0
marks an empty slot, keeps the hash 0 aside as a flag, and empties the array after a granule
either by clearing only the slots it used (few distinct values) or all of them. These tests
make granules that reach each of those paths, one after the other in one build, and compare the
result with the part chdb wrote from the same rows: a value left behind by a granule, a lost
hash 0, or a miscounted granule changes the bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pytest

from bloomskip import bits
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.clickhouse.types import value_hashes

sys.path.insert(0, str(Path(__file__).parent))
from clickhouse_harness import ClickHouseHarness  # noqa: E402

GRANULE_ROWS = 1024

# Per 1024-row granule g: only 0; ten values with 0; all distinct (1024 of them: with 8 bits per
# row a filter of 2^13 bits, the power-of-two remainder); the same ten values again (found in
# the set if the previous granules' values were left in it); three values without 0; all
# distinct hashes; 700 values repeated.
VALUES = (
    "multiIf(intDiv(number, 1024) = 0, 0, "
    "intDiv(number, 1024) IN (1, 3), number % 10, "
    "intDiv(number, 1024) = 2, number, "
    "intDiv(number, 1024) = 4, number % 3 + 1, "
    "intDiv(number, 1024) = 5, cityHash64(number), "
    "number % 700)"
)


@pytest.fixture(scope="module")
def part(chdb_session, chdb_data_path: Path):
    """One part of 7,500 rows in 1024-row granules (the last one shorter)."""
    clickhouse = ClickHouseHarness(chdb_session, chdb_data_path, "clickhouse_bloom_distinct_set")
    return clickhouse.create_part(
        {"u": "UInt64", "w": "UInt64", "s": "String"},
        [
            "INDEX bu u TYPE bloom_filter(0.025) GRANULARITY 1",
            "INDEX bu3 u TYPE bloom_filter(0.01) GRANULARITY 3",
            "INDEX buw (u, w) TYPE bloom_filter GRANULARITY 1",
            "INDEX bws (w, s) TYPE bloom_filter(0.05) GRANULARITY 2",
        ],
        f"SELECT {VALUES}, number % 5 * 7, toString({VALUES} % 4) FROM numbers(7500)",
        settings={"index_granularity": GRANULE_ROWS},
    )


def test_the_hash_zero_occurs() -> None:
    """UInt64 0 hashes to 0 (intHash64), the value the set keeps aside: the part has it."""
    hashes, _ = value_hashes(pa.array([0, 1], pa.uint64()), "UInt64")
    assert hashes.tolist()[0] == 0 and hashes.tolist()[1] != 0


@pytest.mark.parametrize("threads", [1, 2, 7])
def test_granules_through_every_path_of_the_set_equal_clickhouse(part, threads: int) -> None:
    for name, definition in part.indexes.items():
        with bits.build_threads(threads):
            built = SkipIndex.build(definition, part.data, part.granule_rows, part.columns)
        assert built.to_bytes() == part.index_stream(name), f"{name}, {threads} thread(s)"


def test_distinct_counts_per_granule(part) -> None:
    """The counts are each granule's distinct hashes (hash 0 counted once), also when the
    granules before it left many or few values in the set."""
    hashes, _ = value_hashes(part.data.column("u"), "UInt64")
    bounds = [0, 1024, 2048, 3072, 4096, 5120, 5121, 5122, 7500]
    _, _, counts = bits.bloom_filter_granules([(hashes, bounds)], 8, 4)
    # The last range: 1022 distinct cityHash64 values, then every value of number % 700.
    assert counts.tolist() == [1, 10, 1024, 10, 3, 1, 1, 1022 + 700]
