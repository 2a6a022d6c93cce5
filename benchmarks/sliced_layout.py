"""The bit-sliced part (docs/sliced-layout.md) against reading the plain per-granule filters.

For G granules of 1,000 rows (``user_id`` random Int64 under ``bloom_filter(0.01)``, ``msg`` of 8
random words under ``tokenbf_v1(8192, 3, 0)``) this prints the part's size against the plain
granule bytes, the encode and decode times, and for a point lookup / a token search: the bytes
and ranges a probe requests (exact, and coalesced when closer than 1 MiB, as ``Store.get_ranges``
does), the probe time (plan + fetch from memory + evaluate) against ``may_match`` on the plain
granules, and the ratio of bytes against reading every granule's filter. A last table shows how
many buckets a bloom_filter gets when the per-granule distinct counts vary (low-cardinality
data), and what that costs. Times are medians of ``--runs`` runs.

Run: ``python benchmarks/sliced_layout.py [--granules 300 3000] [--runs 5]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bloomskip._store import coalesce
from bloomskip.clickhouse.condition import compile_condition
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.dataset.index.sliced import (
    decode_part,
    encode_part,
    read_part_header,
    sliced_granules,
)

ROWS = 1000
GAP = 1 << 20
TYPES = {"user_id": "Int64", "msg": "String"}


def _median(runs: int, function: Callable[[], object]) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def _table(rng: np.random.Generator, granules: int) -> pa.Table:
    rows = granules * ROWS
    words = pa.array([f"w{i}" for i in range(50_000)])
    picks = words.take(pa.array(rng.integers(0, len(words), rows * 8)))
    lists = pa.ListArray.from_arrays(np.arange(0, rows * 8 + 1, 8, dtype=np.int32), picks)
    return pa.table(
        {
            "user_id": rng.integers(-(2**63), 2**63 - 1, rows, dtype=np.int64),
            "msg": pc.binary_join(lists, " "),
        }
    )


def _probe(part: bytes, where: str, granules, runs: int) -> dict[str, float]:  # noqa: ANN001
    definition = granules.definition
    condition = compile_condition(where, definition, TYPES)
    header = read_part_header(part)
    calls: list[list[tuple[int, int]]] = []

    def read_ranges(ranges: list[tuple[int, int]]) -> list[bytes]:
        calls.append(ranges)
        return [part[start : start + length] for start, length in ranges]

    def sliced_probe():  # noqa: ANN202
        calls.clear()
        sliced = sliced_granules(read_part_header(part[: header.header_length]))
        sliced.fetch(sliced.plan(condition), read_ranges)
        return condition.may_match(sliced)

    sliced_time, mask = _median(runs, sliced_probe)
    plain_time, expected = _median(runs, lambda: condition.may_match(granules))
    assert mask.tolist() == expected.tolist(), where
    ranges = calls[0] if calls else []
    requested = sum(length for _, length in ranges)
    plain_bytes = int(granules.filter_sizes().sum()) * granules.column_count
    return {
        "header": header.header_length,
        "bytes": requested,
        "with_header": requested + header.header_length,
        "ranges": len(ranges),
        "coalesced": len(coalesce(ranges, GAP)),
        "sliced_ms": 1000 * sliced_time,
        "plain_ms": 1000 * plain_time,
        "ratio": (requested + header.header_length) / plain_bytes,
        "kept": int(mask.sum()),
    }


def _report_index(
    name: str,
    granules,
    wheres: list[tuple[str, str]],
    runs: int,  # noqa: ANN001
) -> None:
    plain = len(granules.to_bytes())
    encode_time, part = _median(runs, lambda: encode_part(granules))
    decode_time, decoded = _median(runs, lambda: decode_part(part))
    assert decoded.to_bytes() == granules.to_bytes()
    header = read_part_header(part)
    print(
        f"  {name}: plain {plain:,} B, part {len(part):,} B ({len(part) / plain:.4f}x), "
        f"header {header.header_length:,} B, buckets {len(header.buckets)}, "
        f"encode {1000 * encode_time:.0f} ms, decode {1000 * decode_time:.0f} ms"
    )
    for label, where in wheres:
        r = _probe(part, where, granules, runs)
        print(
            f"    {label:<13} {r['bytes']:>7,} B in {r['ranges']} ranges "
            f"({r['coalesced']} coalesced <1 MiB) + header {r['header']:,} B = "
            f"{r['ratio']:.5f} of the plain filters ({1 / r['ratio']:,.0f}x less); "
            f"probe {r['sliced_ms']:.2f} ms (plain in memory {r['plain_ms']:.2f} ms); "
            f"kept {r['kept']} granules"
        )


def _low_cardinality(rng: np.random.Generator, granules: int, runs: int) -> None:
    """Per-granule distinct counts vary: one bucket per distinct filter width."""
    definition = parse_index_definition("INDEX u user_id TYPE bloom_filter(0.01)")
    for label, pools in [
        ("distinct 1..1000 (uniform)", rng.integers(1, ROWS + 1, granules)),
        ("distinct 1..20", rng.integers(1, 21, granules)),
        ("distinct 900..1000", rng.integers(900, ROWS + 1, granules)),
    ]:
        values = np.concatenate(
            [rng.integers(0, int(pool), ROWS) * 7919 + j * 10**6 for j, pool in enumerate(pools)]
        )
        index = SkipIndex.build(definition, pa.table({"user_id": values}), [ROWS] * granules)
        g = index.granules
        part = encode_part(g)
        header = read_part_header(part)
        plain = len(g.to_bytes())
        r = _probe(part, f"user_id = {int(values[ROWS * 3 + 5])}", g, runs)
        print(
            f"  {label:<27} buckets {len(header.buckets):>4}, plain {plain:>10,} B, "
            f"part {len(part):>10,} B ({len(part) / plain:.3f}x), header {header.header_length:,}"
            f" B; point lookup {r['bytes']:,} B in {r['ranges']} ranges "
            f"({r['coalesced']} coalesced), {r['ratio']:.4f} of plain, probe "
            f"{r['sliced_ms']:.2f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--granules", type=int, nargs="+", default=[300, 3000])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(42)
    bloom = parse_index_definition("INDEX u user_id TYPE bloom_filter(0.01)")
    text = parse_index_definition("INDEX m msg TYPE tokenbf_v1(8192, 3, 0)")
    for count in args.granules:
        table = _table(rng, count)
        print(f"G = {count} granules x {ROWS} rows")
        present = int(table["user_id"][count * ROWS // 2].as_py())
        g = SkipIndex.build(bloom, table, [ROWS] * count, TYPES).granules
        _report_index(
            "bloom_filter(0.01) on user_id",
            g,
            [
                ("point (hit)", f"user_id = {present}"),
                ("point (miss)", "user_id = 42"),
                ("IN 100 values", f"user_id IN ({', '.join(str(v) for v in range(100))})"),
            ],
            args.runs,
        )
        g = SkipIndex.build(text, table, [ROWS] * count, TYPES).granules
        _report_index(
            "tokenbf_v1(8192, 3, 0) on msg",
            g,
            [
                ("token (common)", "hasToken(msg, 'w777')"),
                ("token (absent)", "hasToken(msg, 'nowhere')"),
                ("LIKE '% w1234 %'", "msg LIKE '% w1234 %'"),
            ],
            args.runs,
        )
    print(f"bloom_filter(0.01) with varying distinct counts, G = {max(args.granules)}")
    _low_cardinality(rng, max(args.granules), args.runs)


if __name__ == "__main__":
    main()
