"""The fast paths of an index build, byte for byte against the index files chdb writes.

The build hashes every chunk of a column straight into one output (no per-chunk offsets for a
column with one value per row), builds granules on several threads without the GIL, and does
not hash a token again within a granule (a direct-mapped cache of tokens up to 16 bytes). Each
test builds from data cut into chunks whose boundaries fall inside granules and compares with
the part chdb wrote from the same rows.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip import bits, hashing
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.clickhouse.simulate import simulate_file
from bloomskip.clickhouse.types import text_values, value_hashes
from bloomskip.errors import SimulateError

sys.path.insert(0, str(Path(__file__).parent / "clickhouse"))
from clickhouse_harness import ClickHouseHarness  # noqa: E402


@pytest.fixture(scope="module")
def clickhouse(chdb_session, chdb_data_path: Path) -> ClickHouseHarness:
    """A harness on the run's one chdb session, in a database of this module's own."""
    return ClickHouseHarness(chdb_session, chdb_data_path, "clickhouse_build_speed_paths")


# Chunk sizes that cut granules of 100 rows at odd places (and a 1-row chunk).
CHUNK_PATTERN = [37, 1, 250, 12, 100, 3, 197]


def rechunk(table: pa.Table, pattern: list[int] = CHUNK_PATTERN) -> pa.Table:
    """The same rows as many chunks: slices of ``table`` of the sizes in ``pattern``, cycled."""
    pieces, start, number = [], 0, 0
    while start < table.num_rows:
        size = pattern[number % len(pattern)]
        pieces.append(table.slice(start, size))
        start += size
        number += 1
    return pa.concat_tables(pieces)


def assert_same_as_clickhouse(part, table: pa.Table, threads: int) -> None:
    for name, definition in part.indexes.items():
        with bits.build_threads(threads):
            built = SkipIndex.build(definition, table, part.granule_rows, part.columns)
        assert built.to_bytes() == part.index_stream(name), f"{name}, {threads} thread(s)"


# Tokens of every length from 1 to 20 bytes over a small alphabet, so that many tokens share
# the token cache's slots and prefixes: lengths 3 (the middle byte), 4..8 (two overlapping
# 4-byte loads), 9..16 (two overlapping 8-byte loads) and over 16 (not cached).
TOKENS = (
    "concat(substring('abcabcabcabcabcabcabca', 1 + number % 3, 1 + number % 20), ' ', "
    "substring('xyxyxyxyxyxyxyxyxyxyxy', 1 + intDiv(number, 7) % 2, 1 + number % 17), '-', "
    "toString(number % 13), '_', repeat('q', number % 19), ' Ünï ', toString(intDiv(number, 50)))"
)


@pytest.fixture(scope="module")
def part(clickhouse):
    """One part: plain, Nullable (an all-NULL granule), LowCardinality, Array (an all-empty
    granule) and text columns, 100-row granules."""
    return clickhouse.create_part(
        {
            "u": "UInt64",
            "i": "Int32",
            "n": "Nullable(Int64)",
            "f": "Float32",
            "s": "String",
            "lc": "LowCardinality(String)",
            "arr": "Array(String)",
        },
        [
            "INDEX bu u TYPE bloom_filter(0.01) GRANULARITY 1",
            "INDEX bi i TYPE bloom_filter GRANULARITY 2",
            "INDEX bn n TYPE bloom_filter(0.05) GRANULARITY 1",
            "INDEX bf f TYPE bloom_filter GRANULARITY 1",
            "INDEX bs s TYPE bloom_filter(0.02) GRANULARITY 3",
            "INDEX blc lc TYPE bloom_filter GRANULARITY 1",
            "INDEX barr arr TYPE bloom_filter(0.1) GRANULARITY 1",
            "INDEX bmulti (u, s) TYPE bloom_filter GRANULARITY 1",
            "INDEX tk s TYPE tokenbf_v1(256, 3, 0) GRANULARITY 1",
            "INDEX tk2 s TYPE tokenbf_v1(97, 2, 4294967297) GRANULARITY 4",
            "INDEX ng s TYPE ngrambf_v1(3, 512, 3, 0) GRANULARITY 1",
            "INDEX ng1 s TYPE ngrambf_v1(1, 64, 2, 5) GRANULARITY 2",
            "INDEX ng5 s TYPE ngrambf_v1(5, 300, 2, 0) GRANULARITY 1",
            "INDEX tlc lc TYPE tokenbf_v1(128, 2, 0) GRANULARITY 1",
            "INDEX tarr arr TYPE ngrambf_v1(2, 128, 2, 0) GRANULARITY 1",
        ],
        "SELECT cityHash64(number % 450), -toInt32(number % 333), "
        "if(number < 100 OR number % 7 = 0, NULL, number * 1000003), "
        "toFloat32(number % 41) / 4, " + TOKENS + ", "
        "['red', 'green', 'blue', ''][number % 4 + 1], "
        "if(intDiv(number, 100) = 2, [], [toString(number % 9), " + TOKENS + "]) "
        "FROM numbers(1234)",
        settings={"index_granularity": 100},
        read_settings={"output_format_arrow_low_cardinality_as_dictionary": 1},
    )


@pytest.mark.parametrize("threads", [1, 3, 64])
def test_one_chunk_equals_clickhouse(part, threads: int) -> None:
    assert_same_as_clickhouse(part, part.data, threads)


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_chunks_cut_inside_granules_equal_clickhouse(part, threads: int) -> None:
    table = rechunk(part.data)
    assert table.column("u").num_chunks > 10
    assert_same_as_clickhouse(part, table, threads)


def test_dictionary_chunks_with_different_dictionaries(part) -> None:
    """LowCardinality chunks that each carry their own dictionary (as Parquet row groups do)."""
    plain = part.data.column("lc").cast(pa.string())
    pieces, start = [], 0
    for size in [5, 300, 1, 428, 500]:
        pieces.append(plain.slice(start, size).combine_chunks().dictionary_encode())
        start += size
    table = part.data.set_column(
        part.data.schema.get_field_index("lc"), "lc", pa.chunked_array(pieces)
    )
    for name in ("blc", "tlc"):
        definition = part.indexes[name]
        built = SkipIndex.build(definition, table, part.granule_rows, part.columns)
        assert built.to_bytes() == part.index_stream(name), name


def test_parquet_row_groups_through_simulate_equal_clickhouse(part, tmp_path: Path) -> None:
    """``simulate`` reads the Parquet file itself (row groups become chunks) and emits the files.

    ClickHouse folds the part's last 34 rows into its last granule (134 rows); simulate cuts
    granules of exactly ``index_granularity`` rows, so the file holds the first 11 granules.
    """
    from bloomskip.clickhouse.compression import read_compressed_stream

    assert part.granule_rows[:11].tolist() == [100] * 11
    path = tmp_path / "rows.parquet"
    columns = ["u", "s"]
    pq.write_table(part.data.select(columns).slice(0, 1100), path, row_group_size=77)
    names = ["bu", "tk", "ng", "bmulti"]  # GRANULARITY 1: index granule j is data granule j
    types = {c: part.columns[c] for c in columns}
    for jobs in (None, 1):  # None: one thread per CPU
        emit = tmp_path / f"emit{jobs}"
        report = simulate_file(
            path,
            [part.indexes[name].to_sql() for name in names],
            [],
            index_granularity=100,
            column_types=types,
            emit=emit,
            codec="NONE",
            **({} if jobs is None else {"jobs": jobs}),
        )
        assert report.rows == 1100
        for name in names:
            theirs = SkipIndex.from_bytes(
                part.indexes[name], part.index_stream(name), part.granule_rows
            )
            written = read_compressed_stream((emit / f"skp_idx_{name}.idx").read_bytes())
            assert written == b"".join(theirs.granule_bytes(j) for j in range(11)), (name, jobs)


def test_fill_ratios_count_the_set_bits(part) -> None:
    for name in ("bmulti", "tk", "ng"):
        definition = part.indexes[name]
        index = SkipIndex.build(definition, part.data, part.granule_rows, part.columns)
        for c in range(index.column_count):
            flat, offsets = index.column_filters(c)
            unpacked = np.unpackbits(flat)
            expected = [
                unpacked[8 * a : 8 * b].mean() if b > a else 1.0
                for a, b in zip(offsets[:-1], offsets[1:], strict=True)
            ]
            np.testing.assert_allclose(index.granules.fill_ratios(c), expected)
            assert index.granules.bits_set(c).sum() == unpacked.sum()


def test_empty_bloom_filter_granule_is_full() -> None:
    """A granule without values has a 0-byte filter: it excludes nothing (ratio 1)."""
    definition = parse_index_definition("a TYPE bloom_filter GRANULARITY 1")
    table = pa.table({"a": pa.array([[], [], [1]], pa.list_(pa.uint8()))})
    index = SkipIndex.build(definition, table, [2, 1])
    assert index.granules.fill_ratios(0)[0] > 0
    assert index.granules.bits_set(0).shape == (2,)


def test_value_hashes_of_chunks_match_the_reference_hashes() -> None:
    """Chunks hashed into one output: the values of every chunk, in order, and 0..n offsets."""
    from clickhouse_cityhash.cityhash import CityHash64

    strings = ["", "a", "Привет", "x" * 40, None, "tail"]
    array = pa.chunked_array(
        [pa.array(strings[:2]), pa.array([], pa.string()), pa.array(strings[2:])]
    )
    hashes, offsets = value_hashes(array, "Nullable(String)")
    # A NULL row hashes the bytes under it: none, so the empty string.
    assert hashes.tolist() == [CityHash64((s or "").encode()) for s in strings]
    assert offsets.tolist() == list(range(len(strings) + 1))
    numbers = pa.chunked_array([pa.array([-1, 2], pa.int64()), pa.array([3], pa.int64())])
    hashes, _ = value_hashes(numbers, "Int64")
    assert hashes.tolist() == [hashing.int_hash64(v) for v in (-1, 2, 3)]


def test_text_values_keep_the_chunks() -> None:
    array = pa.chunked_array([pa.array(["a b", "c"]), pa.array(["d"])])
    strings, offsets = text_values(array, "String")
    assert strings.num_chunks == 2 and strings.type == pa.string()
    assert strings.to_pylist() == ["a b", "c", "d"]
    assert offsets.tolist() == [0, 1, 2, 3]
    mixed = pa.chunked_array([pa.array([b"a"], pa.binary()), pa.array([b"b"], pa.binary())])
    assert text_values(mixed, "String")[0].to_pylist() == [b"a", b"b"]


def test_hash_outputs_are_checked() -> None:
    out = np.empty(2, np.uint64)
    assert hashing.cityhash64(["a", "b"], out=out) is out
    assert out.tolist() == [hashing.cityhash64("a"), hashing.cityhash64("b")]
    for bad in (np.empty(3, np.uint64), np.empty(2, np.int64), np.empty(4, np.uint64)[::2]):
        with pytest.raises(ValueError, match="out must be"):
            hashing.cityhash64(["a", "b"], out=bad)
        with pytest.raises(ValueError, match="out must be"):
            hashing.int_hash64(np.arange(2), out=bad)


def test_thread_counts_are_checked() -> None:
    for bad in (0, 65, -1):
        with pytest.raises(ValueError, match="threads"):
            bits.bloom_filter_granules([([1], [0, 1])], 8, 4, threads=bad)
        with pytest.raises(ValueError, match="threads"), bits.build_threads(bad):
            pass
    with pytest.raises(TypeError):
        bits.text_granules(["a"], [0, 1], "token", 1, 8, 2, 0, threads=True)
    # More threads than granules (and no granules at all) build the same bytes.
    one = bits.bloom_filter_granules([([1, 2, 3], [0, 2, 3])], 8, 4)
    many = bits.bloom_filter_granules([([1, 2, 3], [0, 2, 3])], 8, 4, threads=64)
    assert one[0] == many[0] and one[1].tolist() == many[1].tolist()
    empty = bits.bloom_filter_granules([(np.empty(0, np.uint64), [0])], 8, 4, threads=3)
    assert empty[0] == b"" and empty[1].tolist() == [0]
    assert bits.text_granules([], [0], "ngram", 3, 16, 2, 0, threads=4).shape == (0, 16)


def test_simulate_jobs_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"v": [1, 2, 3]}), path)
    with pytest.raises(SimulateError, match="jobs"):
        simulate_file(path, ["v TYPE bloom_filter"], [], jobs=0)
    with pytest.raises(SimulateError, match="no column 'w'"):
        simulate_file(path, ["w TYPE bloom_filter"], [])


def _token_reference(strings: list[bytes], tokenizer: str, n: int, size: int, k: int, seed: int):
    """One filter over every token of every string, added one by one with ``bits.pair_add``
    (which has no token cache)."""
    from bloomskip import _native

    kind = {"ngram": _native.TOKENIZER_NGRAM, "token": _native.TOKENIZER_TOKEN}[tokenizer]
    tokens = [s[a:b] for s in strings for a, b in _native.tokenize(s, kind, n)]
    filter_bytes = bytearray(size)
    if tokens:
        bits.pair_add(filter_bytes, tokens, seed, size * 8, k)
    return bytes(filter_bytes)


@pytest.mark.parametrize("tokenizer, n", [("token", 1), ("ngram", 1), ("ngram", 3), ("ngram", 6)])
def test_token_cache_keeps_every_token(tokenizer: str, n: int) -> None:
    """Granules of many repeated tokens of 1..24 bytes that differ in one byte only (the cache's
    keys must tell them apart) equal a filter built token by token, on any thread count."""
    rng = np.random.default_rng(7)
    alphabet = np.frombuffer(b"ab", np.uint8)
    strings = []
    for _ in range(3000):
        length = int(rng.integers(1, 25))
        word = alphabet[rng.integers(0, 2, length)].tobytes()
        strings.append(word + b" " + word[::-1] + b"\xc3\xa9" + word[: length // 2])
    bounds = np.array([0, 1, 500, 501, 1700, 1700, 3000], np.int64)
    size, k, seed = 97, 3, 11
    expected = [
        _token_reference(strings[a:b], tokenizer, n, size, k, seed)
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    # As one array, and as chunks cut inside granules (an empty one too).
    one = pa.array(strings, pa.binary())
    cuts = [0, 1, 250, 250, 501, 502, 2999, 3000]
    chunked = pa.chunked_array([one[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)])
    for batch in (one, chunked):
        for threads in (1, 2, 6, 64):
            got = bits.text_granules(batch, bounds, tokenizer, n, size, k, seed, threads=threads)
            assert [row.tobytes() for row in got] == expected, threads


def test_bloom_filter_threads_build_the_same_bytes() -> None:
    """Split points fall anywhere, granules may be empty, values repeat and include 0."""
    rng = np.random.default_rng(3)
    hashes = rng.integers(0, 50, 20_000).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    second = hashes[::-1].copy()
    bounds = np.unique(np.concatenate(([0, 20_000], rng.integers(0, 20_000, 40))))
    bounds = np.insert(bounds, 5, bounds[5])  # an empty granule
    one = bits.bloom_filter_granules([(hashes, bounds), (second, bounds)], 8, 5, threads=1)
    assert one[2].max() <= 50
    for threads in (2, 3, 7, 64):
        many = bits.bloom_filter_granules(
            [(hashes, bounds), (second, bounds)], 8, 5, threads=threads
        )
        assert many[0] == one[0] and (many[1] == one[1]).all() and (many[2] == one[2]).all()
    # Each granule holds exactly its distinct values' bits, as seeded_add sets them.
    g = 1
    lo, hi = bounds[g], bounds[g + 1]
    distinct = np.unique(hashes[lo:hi])
    expected = bytearray((8 * len(distinct) + 7) // 8)
    bits.seeded_add(expected, distinct, 8 * len(expected), 5)
    start = one[1][g] + 1  # a VarUInt count below 128
    assert one[0][start : start + len(expected)] == bytes(expected)
