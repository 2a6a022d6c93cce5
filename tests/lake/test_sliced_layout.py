"""The bit-sliced part (bloomskip.dataset.index.sliced, docs/sliced-layout.md).

* Round trip: ``decode_part(encode_part(g))`` gives byte-identical granules for bloom_filter
  (several widths, an empty filter, a multi-column index, mixed distinct counts under
  ``bits_per_row < 8``) and tokenbf_v1 / ngrambf_v1 indexes built from random data.
* Decisions: for many random WHERE clauses, ``condition.may_match`` on the sliced part equals it
  on the original granules (which other tests prove bit-equal to ClickHouse's).
* Reads: a point lookup and a token search on 3,000 granules request < 1% of the part, in a
  handful of ranges, with one ``read_ranges`` call.
* Hostile bytes: truncations, wrong magic/version, a checksum mismatch, out-of-range counts and
  offsets (re-signed so that the field checks, not the checksum, must catch them), a flipped bit
  in a fetched slice, and random mutations raise FormatError only.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import re
import struct
import tracemalloc
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bloomskip._store import coalesce
from bloomskip.clickhouse.condition import compile_condition
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.granule import BloomFilterGranules, TextGranules
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.dataset.index import sliced
from bloomskip.dataset.index.sliced import (
    FORMAT_VERSION,
    MAGIC,
    decode_part,
    encode_part,
    may_match,
    read_part_header,
    sliced_granules,
)
from bloomskip.errors import FormatError, TruncatedError

TYPES = {
    "a": "Int64",
    "b": "String",
    "arr": "Array(Int64)",
    "s": "String",
    "t": "String",
}
MiB = 1 << 20


class Reader:
    """``read_ranges`` over an in-memory part, counting calls, ranges and bytes."""

    def __init__(self, part: bytes) -> None:
        self.part = part
        self.calls: list[list[tuple[int, int]]] = []

    def __call__(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        self.calls.append(list(ranges))
        return [self.part[start : start + length] for start, length in ranges]

    @property
    def requested(self) -> int:
        return sum(length for call in self.calls for _, length in call)


# ------------------------------------------------------------------------------------------
# Data


def _bloom_table(rng: np.random.Generator, granules: int) -> tuple[pa.Table, list[int]]:
    """Rows whose per-granule distinct counts vary (several filter widths), one granule of
    empty arrays (an empty ``arr`` filter)."""
    rows = rng.integers(5, 60, granules).tolist()
    a, b, arr = [], [], []
    for j, count in enumerate(rows):
        pool = int(rng.integers(1, count + 1))  # distinct values in this granule
        values = rng.integers(0, 400, pool)[rng.integers(0, pool, count)]
        a.extend(values.tolist())
        b.extend(f"s{v % 97}" for v in values.tolist())
        if j == 1:
            arr.extend([] for _ in range(count))
        else:
            arr.extend(values[i : i + 3].tolist() for i in range(count))
    table = pa.table({"a": a, "b": b, "arr": pa.array(arr, pa.list_(pa.int64()))})
    return table, rows


def _text_table(rng: np.random.Generator, granules: int, rows: int) -> pa.Table:
    words = np.array([f"w{i}" for i in range(300)] + ["Hello", "wörld", "a-b", "x_y"])
    per_row = 4
    picks = words[rng.integers(0, len(words), granules * rows * per_row)]
    lists = pa.ListArray.from_arrays(
        np.arange(0, granules * rows * per_row + 1, per_row, dtype=np.int32), pa.array(picks)
    )
    s = pc.binary_join(lists, " ")
    t = pc.binary_join(
        pa.ListArray.from_arrays(
            np.arange(0, granules * rows * per_row + 1, per_row, dtype=np.int32),
            pa.array(picks[::-1].copy()),
        ),
        "-",
    )
    return pa.table({"s": s, "t": t})


BLOOM_DEFINITIONS = [
    "INDEX i (a, b) TYPE bloom_filter(0.01)",
    "INDEX j a TYPE bloom_filter(0.1)",  # bits_per_row 5: granules of one width differ in rows
    "INDEX k arr TYPE bloom_filter",
    "INDEX m (b, arr, a) TYPE bloom_filter(0.3)",
]
TEXT_DEFINITIONS = [
    "INDEX t s TYPE tokenbf_v1(256, 3, 0)",
    "INDEX u (s, t) TYPE tokenbf_v1(64, 2, 5)",
    "INDEX n s TYPE ngrambf_v1(3, 512, 2, 7)",
    "INDEX o (lower(s), t) TYPE ngrambf_v1(4, 100, 3, 1) GRANULARITY 2",
]


@pytest.fixture(scope="module")
def bloom_indexes() -> list[tuple[BloomFilterGranules, pa.Table]]:
    rng = np.random.default_rng(7)
    out = []
    for granules, text in zip((37, 200, 3, 61), BLOOM_DEFINITIONS, strict=True):
        table, rows = _bloom_table(rng, granules)
        index = SkipIndex.build(parse_index_definition(text), table, rows, TYPES)
        out.append((index.granules, table))
    # An empty granule (total_rows 0: no filter bytes, keeps every value) in the middle of the
    # multi-column index (SkipIndex.build gives an empty array's granule a width of 1 or more).
    granules, table = out[0]
    pieces = [granules.granule_bytes(j) for j in range(len(granules))]
    pieces.insert(5, b"\x00")
    out[0] = (
        BloomFilterGranules.from_bytes(granules.definition, b"".join(pieces), len(pieces)),
        table,
    )
    return out


@pytest.fixture(scope="module")
def text_indexes() -> list[tuple[TextGranules, pa.Table]]:
    rng = np.random.default_rng(11)
    out = []
    for granules, text in zip((41, 9, 130, 17), TEXT_DEFINITIONS, strict=True):
        table = _text_table(rng, granules, 12)
        index = SkipIndex.build(parse_index_definition(text), table, [12] * granules, TYPES)
        out.append((index.granules, table))
    return out


# ------------------------------------------------------------------------------------------
# Round trip


def test_bloom_filter_parts_round_trip_byte_for_byte(bloom_indexes) -> None:
    for granules, _ in bloom_indexes:
        part = encode_part(granules)
        header = read_part_header(part, "p", part_size=len(part))
        decoded = decode_part(part, granules.definition, index_column_types=["Int64"])
        assert isinstance(decoded, BloomFilterGranules)
        assert decoded.to_bytes() == granules.to_bytes()
        assert decoded.distinct_counts.tolist() == granules.distinct_counts.tolist()
        assert header.distinct_counts.tolist() == granules.distinct_counts.tolist()
        # Buckets partition the granules by width, ascending.
        widths = granules.filter_sizes()
        assert [b.width for b in header.buckets] == sorted(set(widths.tolist()))
        for bucket in header.buckets:
            assert (widths[bucket.members] == bucket.width).all()
        assert sum(b.member_count for b in header.buckets) == len(granules)
    headers = [read_part_header(encode_part(g)) for g, _ in bloom_indexes]
    assert all(len(h.buckets) > 3 for h in headers[:2] + headers[3:]), "several widths"
    assert any(h.buckets[0].width == 0 for h in headers), "an empty filter"
    mixed = headers[1]
    assert any(b.total_rows is None for b in mixed.buckets), "one width, several row counts"


def test_text_parts_round_trip_byte_for_byte(text_indexes) -> None:
    for granules, _ in text_indexes:
        part = encode_part(granules)
        decoded = decode_part(part)
        assert isinstance(decoded, TextGranules)
        assert decoded.to_bytes() == granules.to_bytes()
        header = read_part_header(part)
        assert len(header.buckets) == 1
        assert header.buckets[0].width == granules.definition.size_bytes


@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 64, 65])
def test_edge_granule_counts_round_trip(count: int) -> None:
    rng = np.random.default_rng(count)
    d = parse_index_definition("s TYPE tokenbf_v1(24, 2, 0)")
    text = TextGranules(d, rng.integers(0, 256, (count, 24), dtype=np.uint8))
    assert decode_part(encode_part(text)).to_bytes() == text.to_bytes()
    b = parse_index_definition("v TYPE bloom_filter(0.05)")
    counts = rng.integers(0, 4, count)
    payload = b"".join(
        bytes([n]) + rng.integers(0, 256, (b.bits_per_row * n + 7) // 8, dtype=np.uint8).tobytes()
        for n in counts.tolist()
    )
    bloom = BloomFilterGranules.from_bytes(b, payload, count)
    assert decode_part(encode_part(bloom)).to_bytes() == payload


def test_an_index_of_only_empty_filters_always_may_match() -> None:
    d = parse_index_definition("v TYPE bloom_filter")
    granules = BloomFilterGranules.from_bytes(d, b"\x00" * 5, 5)
    part = encode_part(granules)
    header = read_part_header(part)
    assert [(b.width, b.member_count, b.byte_length) for b in header.buckets] == [(0, 5, 0)]
    reader = Reader(part)
    condition = compile_condition("v = 3", d, {"v": "UInt8"})
    assert may_match(condition, header, reader).all()
    assert reader.calls == []  # nothing to read


def test_non_canonical_varuint_is_refused() -> None:
    d = parse_index_definition("v TYPE bloom_filter")
    granules = BloomFilterGranules.from_bytes(d, b"\x80\x00", 1)  # 0 in two bytes
    with pytest.raises(ValueError, match="VarUInt"):
        encode_part(granules)


def test_encode_memory_stays_bounded() -> None:
    d = parse_index_definition("s TYPE tokenbf_v1(8192, 3, 0)")
    rng = np.random.default_rng(3)
    granules = TextGranules(d, rng.integers(0, 256, (3000, 8192), dtype=np.uint8))
    tracemalloc.start()
    try:
        part = encode_part(granules)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The part is built once and copied once into bytes; beyond that, a bounded working set.
    assert peak - 2 * len(part) < 64 * MiB
    tracemalloc.start()
    try:
        decode_part(part)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - len(granules.to_bytes()) < 64 * MiB


# ------------------------------------------------------------------------------------------
# Decisions


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _bloom_clauses(rng: random.Random, table: pa.Table, columns: list[str]) -> list[str]:
    present_a = table["a"].to_pylist()
    present_b = table["b"].to_pylist()

    def atom() -> str:
        column = rng.choice(columns)
        if column in ("a", "arr"):
            value = rng.choice(present_a) if rng.random() < 0.6 else rng.randrange(400, 10**6)
            values = [
                rng.choice(present_a) if rng.random() < 0.5 else rng.randrange(400, 10**6)
                for _ in range(rng.randrange(1, 6))
            ]
            if column == "arr":
                return rng.choice(
                    [
                        f"has(arr, {value})",
                        f"hasAny(arr, [{', '.join(map(str, values))}])",
                        f"hasAll(arr, [{', '.join(map(str, values))}])",
                    ]
                )
            return rng.choice(
                [
                    f"a = {value}",
                    f"a IN ({', '.join(map(str, values))})",
                    f"a != {value}",
                    f"a NOT IN ({', '.join(map(str, values))})",
                ]
            )
        value = rng.choice(present_b) if rng.random() < 0.6 else f"zz{rng.randrange(10**6)}"
        values = [rng.choice(present_b) for _ in range(rng.randrange(1, 4))] + ["nope"]
        return rng.choice([f"b = {_quote(value)}", f"b IN ({', '.join(map(_quote, values))})"])

    return [_combine(rng, atom) for _ in range(60)]


def _combine(rng: random.Random, atom) -> str:  # noqa: ANN001
    shape = rng.randrange(6)
    if shape == 0:
        return atom()
    if shape == 1:
        return f"NOT ({atom()})"
    if shape == 2:
        return f"{atom()} AND {atom()}"
    if shape == 3:
        return f"{atom()} OR {atom()}"
    if shape == 4:
        return f"({atom()} OR {atom()}) AND NOT ({atom()})"
    return f"({atom()} AND {atom()}) OR ({atom()} AND 1 = 1)"


def _text_clauses(rng: random.Random, table: pa.Table, columns: list[str]) -> list[str]:
    rows = {c: table[c].to_pylist() for c in ("s", "t")}
    extra = ["zzq", "nothere", "w9999", "Hello", "wörld", "a-b"]

    def atom() -> str:
        column = rng.choice(columns)
        text = rng.choice(rows[column])
        words = text.replace("-", " ").split()
        word = rng.choice(words) if rng.random() < 0.7 else rng.choice(extra)
        piece = text[rng.randrange(len(text)) :][: rng.randrange(3, 9)]
        return rng.choice(
            [
                f"hasToken({column}, {_quote(word)})",
                f"{column} LIKE {_quote('%' + word + '%')}",
                f"{column} LIKE {_quote('%' + piece + '%')}",
                f"{column} = {_quote(text)}",
                f"{column} IN ({_quote(text)}, {_quote(word)})",
                f"{column} != {_quote(text)}",
                f"multiSearchAny({column}, [{_quote(word)}, {_quote(piece)}])",
                f"startsWith({column}, {_quote(text[:5])})",
                f"NOT hasToken({column}, {_quote(word)})",
            ]
        )

    return [_combine(rng, atom) for _ in range(60)]


def _column_names(definition) -> list[str]:  # noqa: ANN001
    names = []
    for expression in definition.expressions:
        for name in ("arr", "a", "b", "s", "t"):
            if expression == name or f"({name})" in expression:
                names.append(name)
                break
    return names


@pytest.mark.parametrize("kind", ["bloom", "text"])
def test_decisions_equal_the_original_granules(kind: str, bloom_indexes, text_indexes) -> None:
    indexes = bloom_indexes if kind == "bloom" else text_indexes
    make = _bloom_clauses if kind == "bloom" else _text_clauses
    rng = random.Random(5)
    pruned = compared = 0
    for granules, table in indexes:
        part = encode_part(granules)
        header = read_part_header(part)
        names = _column_names(granules.definition)
        for where in make(rng, table, names):
            condition = compile_condition(where, granules.definition, TYPES)
            expected = condition.may_match(granules)
            reader = Reader(part)
            got = may_match(condition, header, reader, "p")
            assert got.tolist() == expected.tolist(), where
            assert len(reader.calls) <= 1, where
            if reader.calls:
                assert reader.calls[0] == sorted(set(reader.calls[0]))
            pruned += int((~expected).sum())
            compared += len(expected)
    assert pruned > compared // 10, "the clauses must prune for the comparison to mean much"


def test_probes_with_granule_subsets_equal_the_original(bloom_indexes, text_indexes) -> None:
    rng = np.random.default_rng(2)
    granules, _ = bloom_indexes[0]
    part = encode_part(granules)
    sliced_g = sliced_granules(read_part_header(part))
    hashes = rng.integers(0, 2**63, 20).astype(np.uint64)
    subset = np.sort(rng.choice(len(granules), 9, replace=False))
    # Record, fetch, then probe (the same way plan() does it, for a raw probe).
    ranges = sliced_g.plan_probes(lambda: sliced_g.hashes_present(1, hashes, subset))
    sliced_g.fetch(ranges, Reader(part))
    assert (
        sliced_g.hashes_present(1, hashes, subset) == granules.hashes_present(1, hashes, subset)
    ).all()
    with pytest.raises(LookupError, match="not fetched"):
        sliced_g.hashes_present(0, hashes)


def test_a_condition_for_another_definition_is_refused(text_indexes) -> None:
    granules, _ = text_indexes[0]
    header = read_part_header(encode_part(granules))
    other = parse_index_definition("INDEX t s TYPE tokenbf_v1(512, 3, 0)")
    condition = compile_condition("hasToken(s, 'w1')", other, TYPES)
    with pytest.raises(ValueError, match="the condition is for"):
        sliced_granules(header).plan(condition)


def test_sliced_granules_answer_probes_only(text_indexes) -> None:
    plain, _ = text_indexes[0]
    granules = sliced_granules(read_part_header(encode_part(plain)))
    assert len(granules) == len(plain)
    with pytest.raises(NotImplementedError, match="decode_part"):
        granules.to_bytes()
    with pytest.raises(TypeError):
        encode_part(granules)


# ------------------------------------------------------------------------------------------
# Reads


@pytest.fixture(scope="module")
def large_parts() -> dict[str, tuple[SkipIndex, bytes, pa.Table]]:
    rng = np.random.default_rng(13)
    granules, rows = 3000, 1000
    user_id = pa.array(rng.integers(-(2**63), 2**63 - 1, granules * rows, dtype=np.int64))
    bloom = SkipIndex.build(
        parse_index_definition("INDEX u user_id TYPE bloom_filter(0.01)"),
        pa.table({"user_id": user_id}),
        [rows] * granules,
    )
    text_rows = 40
    table = _text_table(rng, granules, text_rows)
    text = SkipIndex.build(
        parse_index_definition("INDEX m s TYPE tokenbf_v1(8192, 3, 0)"),
        table,
        [text_rows] * granules,
        TYPES,
    )
    return {
        "bloom": (bloom, encode_part(bloom.granules), pa.table({"user_id": user_id})),
        "text": (text, encode_part(text.granules), table),
    }


@pytest.mark.parametrize(
    ("kind", "where"),
    [
        ("bloom", "user_id = {present}"),
        ("bloom", "user_id = 12345"),
        ("text", "hasToken(s, 'w17')"),
        ("text", "hasToken(s, 'absentword')"),
    ],
)
def test_a_lookup_reads_under_one_percent_in_few_ranges(kind: str, where: str, large_parts) -> None:
    index, part, table = large_parts[kind]
    granules = index.granules
    definition = granules.definition
    if "{present}" in where:
        where = where.format(present=table["user_id"][123_456].as_py())
    condition = compile_condition(where, definition, {"user_id": "Int64", **TYPES})
    header = read_part_header(part)
    reader = Reader(part)
    got = may_match(condition, header, reader)
    assert got.tolist() == condition.may_match(granules).tolist()
    assert len(reader.calls) == 1
    assert reader.requested < len(part) / 100
    probed = len([b for b in header.buckets if b.width])
    k = definition.hash_functions
    assert len(coalesce(reader.calls[0], MiB)) <= k * probed
    if "{present}" not in where and kind == "bloom":
        assert got.sum() < 100  # ~1% false positives of 3,000
    if kind == "bloom" and "12345" not in where:
        assert got[123]  # the granule holding row 123,456


def test_a_large_in_list_matches(large_parts) -> None:
    index, part, table = large_parts["bloom"]
    values = table["user_id"].to_numpy()[::7919][:300].tolist() + list(range(700))
    where = f"user_id IN ({', '.join(map(str, values))})"
    condition = compile_condition(where, index.granules.definition, {"user_id": "Int64"})
    reader = Reader(part)
    got = may_match(condition, read_part_header(part), reader)
    assert got.tolist() == condition.may_match(index.granules).tolist()
    assert len(reader.calls) == 1


# ------------------------------------------------------------------------------------------
# Hostile bytes


@pytest.fixture(scope="module")
def small_part(bloom_indexes) -> bytes:
    return encode_part(bloom_indexes[0][0])


def _resign(header: bytearray) -> bytes:
    header[-32:] = hashlib.sha256(bytes(header[:-32])).digest()
    return bytes(header)


def _with_header(part: bytes, change) -> bytes:  # noqa: ANN001
    length = read_part_header(part).header_length
    header = bytearray(part[:length])
    change(header)
    return _resign(header) + part[length:]


def _layout(part: bytes) -> dict[str, int]:
    length = struct.unpack_from("<I", part, 12)[0]
    definition_length = struct.unpack_from("<I", part, 42)[0]
    buckets = struct.unpack_from("<I", part, 38)[0]
    columns = struct.unpack_from("<H", part, 36)[0]
    records = 46 + definition_length
    offsets = records + 24 * buckets
    return {
        "length": length,
        "records": records,
        "offsets": offsets,
        "map": offsets + 8 * buckets * columns,
        "buckets": buckets,
    }


def test_every_truncation_of_the_header_is_a_format_error(small_part: bytes) -> None:
    length = read_part_header(small_part).header_length
    for cut in range(length):
        with pytest.raises(TruncatedError):
            read_part_header(small_part[:cut])
    with pytest.raises(FormatError, match="part_length"):
        read_part_header(small_part[:-1], part_size=len(small_part) - 1)
    with pytest.raises(FormatError, match="part_length"):
        decode_part(small_part[:-1])


@pytest.mark.parametrize(
    ("offset", "value", "field"),
    [
        (0, b"BSKSLICX", "magic"),
        (8, struct.pack("<H", FORMAT_VERSION + 1), "format_version"),
        (10, struct.pack("<H", 1), "flags"),
        (12, struct.pack("<I", 10), "header_length"),
        (12, struct.pack("<I", 1 << 30), "header_length"),
    ],
)
def test_a_bad_prefix_is_named(small_part: bytes, offset: int, value: bytes, field: str) -> None:
    bad = small_part[:offset] + value + small_part[offset + len(value) :]
    with pytest.raises(FormatError, match=f"field {field}"):
        read_part_header(bad)


def test_a_header_checksum_mismatch_is_named(small_part: bytes) -> None:
    bad = bytearray(small_part)
    bad[50] ^= 1
    with pytest.raises(FormatError, match="field header_sha256"):
        read_part_header(bytes(bad))


def _put(offset: int, fmt: str, value: int):  # noqa: ANN202
    def change(header: bytearray) -> None:
        struct.pack_into(fmt, header, offset, value)

    return change


def test_out_of_range_fields_are_named(small_part: bytes) -> None:
    lay = _layout(small_part)
    records, offsets = lay["records"], lay["offsets"]
    first = small_part[lay["map"]]  # granule 0's bucket; moved to another one below
    moved = 1 if first == 0 else 0
    cases = [
        (_put(16, "<Q", 1 << 63), "part_length"),
        (_put(16, "<Q", len(small_part) + 1), "part_length"),
        (_put(24, "<Q", 1 << 40), "granule_count"),
        (_put(24, "<Q", 36), "header_length"),  # the bucket map no longer fits
        (_put(32, "<B", 9), "kind"),
        (_put(32, "<B", 2), "bucket_count"),  # text kind: one bucket expected
        (_put(33, "<B", 3), "bucket_map_width"),
        (_put(33, "<B", 2), "bucket_map_width"),
        (_put(34, "<B", 2), "distinct_counts_flag"),
        (_put(35, "<B", 1), "reserved"),
        (_put(36, "<H", 0), "column_count"),
        (_put(36, "<H", 5000), "column_count"),
        (_put(38, "<I", 1 << 31), "bucket_count"),
        (_put(42, "<I", 1 << 30), "definition_length"),
        (_put(46, "<B", ord("X")), "definition"),
        (_put(records, "<I", 10**6), "bucket[0].total_rows"),  # no longer gives the width
        (_put(records + 24, "<I", 0), "bucket[1].width"),  # widths must ascend
        (_put(records + 4, "<I", 10**6), "bucket[0].member_count"),
        (_put(records + 8, "<I", 0), "bucket[0].slices_per_block"),
        (_put(records + 8, "<I", 1 << 31), "bucket[0].slices_per_block"),
        (_put(records + 12, "<I", 7), "bucket[0].block_stride"),
        (_put(records + 16, "<Q", 10**6), "bucket[0].total_rows"),
        (_put(records + 16, "<Q", 1 << 64 - 1), "bucket[0].total_rows"),
        (_put(offsets, "<Q", 1 << 62), "offsets[0][0]"),
        (_put(offsets + 8, "<Q", 0), "offsets[0][1]"),
        (_put(lay["map"], "<B", 255), "bucket_map"),
        (_put(lay["map"], "<B", moved), f"bucket[{min(moved, first)}].member_count"),
    ]
    for change, field in cases:
        bad = _with_header(small_part, change)
        with pytest.raises(FormatError, match=re.escape(f"field {field},")):
            read_part_header(bad, part_size=len(small_part))


def test_a_flipped_bit_in_a_fetched_slice_is_named(large_parts) -> None:
    index, part, table = large_parts["bloom"]
    condition = compile_condition(
        f"user_id = {table['user_id'][5].as_py()}",
        index.granules.definition,
        {"user_id": "Int64"},
    )
    header = read_part_header(part)
    granules = sliced_granules(header, "segment.bsk")
    ranges = granules.plan(condition)
    start, length = ranges[1]
    bad = bytearray(part)
    bad[start + 17] ^= 0x10
    with pytest.raises(FormatError, match=r"CRC32 mismatch in column 0 bucket 0 .*slice \d+"):
        granules.fetch(ranges, Reader(bytes(bad)))
    with pytest.raises(FormatError, match="segment.bsk"):
        granules.fetch(ranges, Reader(bytes(bad)))
    with pytest.raises(FormatError, match="CRC32 mismatch"):
        decode_part(bytes(bad))
    short = Reader(part[: start + 10])
    with pytest.raises(TruncatedError, match="bytes read"):
        granules.fetch(ranges, short)
    with pytest.raises(ValueError, match="not one block"):
        granules.fetch([(start + 1, length)], Reader(part))


def test_non_zero_padding_is_refused(text_indexes) -> None:
    kinds = set()
    for granules, _ in text_indexes:  # small buckets: several slices a block, bit to bit
        part = encode_part(granules)
        header = read_part_header(part)
        bucket = header.buckets[0]
        per_block, members = bucket.slices_per_block, bucket.member_count
        spare_bits = 8 * bucket.payload_bytes - per_block * members
        padding_slices = bucket.block_count * per_block - 8 * bucket.width
        cases = []
        if spare_bits:  # a bit after the block's slices
            cases.append((0, 8 * bucket.payload_bytes - 1, "spare"))
        if padding_slices:  # a bit of a padding slice in the last block
            first_padding_bit = (per_block - padding_slices) * members
            cases.append((bucket.block_count - 1, first_padding_bit, "slice"))
        for block, bit, kind in cases:
            kinds.add(kind)
            bad = bytearray(part)
            start = header.offsets[0][0] + block * bucket.block_stride
            bad[start + bit // 8] |= 1 << (bit % 8)
            payload = bytes(bad[start : start + bucket.payload_bytes])
            struct.pack_into("<I", bad, start + bucket.payload_bytes, zlib.crc32(payload))
            with pytest.raises(FormatError, match=f"non-zero padding .* block {block} "):
                decode_part(bytes(bad))
    assert kinds == {"spare", "slice"}


def test_random_header_mutations_raise_format_error_only(small_part: bytes) -> None:
    rng = random.Random(1)
    length = read_part_header(small_part).header_length
    for round_ in range(400):
        header = bytearray(small_part[:length])
        for _ in range(rng.randrange(1, 4)):
            position = rng.randrange(length - 32 if round_ % 2 else length)
            header[position] = rng.randrange(256)
        if round_ % 5 == 0:
            header = header[: rng.randrange(length)]
        data = _resign(header) if round_ % 2 and len(header) >= 32 else bytes(header)
        with contextlib.suppress(FormatError):
            read_part_header(data + small_part[length:], part_size=len(small_part))
    # A mutation anywhere in a whole part: decoding raises FormatError or gives the original.
    original = decode_part(small_part).to_bytes()
    for _ in range(150):
        bad = bytearray(small_part)
        position = rng.randrange(len(bad))
        bad[position] ^= 1 << rng.randrange(8)
        if position < length and rng.random() < 0.8:
            bad[:length] = _resign(bytearray(bad[:length]))
        with contextlib.suppress(FormatError):
            assert decode_part(bytes(bad)).to_bytes() == original


def test_the_module_constants_describe_format_1() -> None:
    assert MAGIC == b"BSKSLICE"
    assert FORMAT_VERSION == 1
    assert sliced.PREFIX_SIZE == 16
