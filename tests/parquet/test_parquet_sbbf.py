"""Parquet split-block Bloom filters against the writers and readers that define them: pyarrow 26
(arrow C++) writes them, DuckDB writes them and probes them (``parquet_bloom_probe``).

Bit equality: a filter bloomskip builds from a column's values, at the size the writer chose,
equals the writer's bitset byte for byte. Probes: for present and absent values of every
physical type, bloomskip's verdict is DuckDB's.
"""

from __future__ import annotations

import datetime
import decimal
import doctest
import importlib
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip.errors import FormatError, TruncatedError, UnsupportedTypeError
from bloomskip.hashing import xxhash64
from bloomskip.parquet import (
    ParquetValueType,
    SplitBlockBloomFilter,
    chunk_filters,
    optimal_num_bytes,
    read_bloom_filters,
)
from bloomskip.parquet.thrift import encode_bloom_filter_header, parse_bloom_filter_header

ROWS = 3000


def _table() -> pa.Table:
    i = np.arange(ROWS)
    base = datetime.datetime(2024, 1, 1)
    return pa.table(
        {
            "i8": pa.array((i % 200 - 100).astype(np.int8)),
            "u32": pa.array((i * 2_654_435_761 % 2**32).astype(np.uint32)),
            "i32": pa.array((i * 7 - 5000).astype(np.int32)),
            "i64": pa.array(i.astype(np.int64) * 10**12 + 3),
            "f32": pa.array((i / 3).astype(np.float32)),
            "f64": pa.array(i / 7.0 - 100.0),
            "s": pa.array([f"key-{n}" for n in range(ROWS)]),
            "bin": pa.array([n.to_bytes(3, "little") for n in range(ROWS)], pa.binary()),
            "dt": pa.array(
                [datetime.date(2000, 1, 1) + datetime.timedelta(days=int(n)) for n in i]
            ),
            "ts_us": pa.array(
                [base + datetime.timedelta(seconds=int(n) * 97) for n in i], pa.timestamp("us")
            ),
            "ts_ms": pa.array(
                [base + datetime.timedelta(seconds=int(n) * 61) for n in i], pa.timestamp("ms")
            ),
            "dec": pa.array(
                [decimal.Decimal(int(n) * 37 - 9000) / 100 for n in i], pa.decimal128(12, 2)
            ),
            "dec38": pa.array(
                [decimal.Decimal(int(n) * 10**20 - 7) / 1000 for n in i], pa.decimal128(38, 3)
            ),
            "flba": pa.array([n.to_bytes(6, "big") for n in range(ROWS)], pa.binary(6)),
        }
    )


@pytest.fixture(scope="module")
def pyarrow_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sbbf") / "pyarrow.parquet"
    table = _table()
    options = {name: {"ndv": ROWS, "fpp": 0.02} for name in table.column_names}
    pq.write_table(table, path, bloom_filter_options=options, row_group_size=1000)
    return path


@pytest.fixture(scope="module")
def duckdb_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sbbf") / "duckdb.parquet"
    duckdb.sql(
        "COPY (SELECT 'k' || (i % 700) AS s, (i % 500)::INT AS i32,"
        " (i % 300)::BIGINT * 1000 AS i64,"
        " DATE '2020-01-01' + (i % 400)::INT AS dt, ((i % 250) / 4)::DECIMAL(9, 2) AS dec9,"
        " ((i % 250) / 8)::DECIMAL(18, 3) AS dec18, ((i % 90) / 3)::DOUBLE AS f64,"
        " ((i % 90) / 3)::FLOAT AS f32, TIMESTAMP '2021-06-01' + to_seconds((i % 333) * 17) AS ts"
        f" FROM range(20000) t(i)) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 8000)"
    )
    return path


def _duckdb_excludes(path: Path, column: str, literal: str) -> dict[int, bool]:
    rows = duckdb.sql(
        f"SELECT row_group_id, bloom_filter_excludes FROM parquet_bloom_probe('{path}', "
        f"'{column}', {literal})"
    ).fetchall()
    return {int(rg): bool(excludes) for rg, excludes in rows}


def _literal(value: object, duck_type: str) -> str:
    if isinstance(value, bytes):
        return f"from_hex('{value.hex()}')"
    return f"'{value}'::{duck_type}" if duck_type else repr(value)


def test_xxhash64_vectors() -> None:
    """xxHash's published values, and the batch path equal to the one-value path."""
    assert xxhash64(b"") == 0xEF46DB3751D8E999
    assert xxhash64(b"a") == 0xD24EC4F1A98C6E5B
    assert xxhash64(b"abc") == 0x44BC2CF5AD770999
    assert xxhash64(b"Nobody inspects the spammish repetition") == 0xFBCEA83C8A378BF1
    values = [bytes(range(n)) for n in range(100)]
    assert xxhash64(values).tolist() == [xxhash64(v) for v in values]


def test_sizing_matches_pyarrow(pyarrow_file: Path) -> None:
    """pyarrow's writer sizes each filter for the chunk's distinct values (at most the ndv it
    was given): optimal_num_bytes(min(ndv, distinct), fpp)."""
    parquet = pq.ParquetFile(pyarrow_file)
    for chunk in chunk_filters(parquet.metadata):
        values = parquet.read_row_group(chunk.row_group, columns=[chunk.column_path]).column(0)
        num_bytes = optimal_num_bytes(min(ROWS, len(values.unique())), 0.02)
        assert chunk.length == num_bytes + len(encode_bloom_filter_header(num_bytes))


def test_bits_equal_pyarrow_writer(pyarrow_file: Path) -> None:
    """Built from the column's values at the file's size, bloomskip's filter is the writer's,
    byte for byte, for every type (the strongest check of the hashing per type)."""
    filters = read_bloom_filters(pyarrow_file)
    parquet = pq.ParquetFile(pyarrow_file)
    assert len(filters) == parquet.num_row_groups * len(parquet.schema_arrow)
    for (rg, column), stored in filters.items():
        values = parquet.read_row_group(rg, columns=[column]).column(0)
        built = SplitBlockBloomFilter(stored.num_bytes, value_type=stored.value_type)
        built.update(values)
        assert built.bitset == stored.bitset, column
        assert built.to_bytes() == _stored_bytes(pyarrow_file, rg, column)


def _stored_bytes(path: Path, rg: int, column: str) -> bytes:
    meta = pq.ParquetFile(path).metadata.row_group(rg)
    for c in range(meta.num_columns):
        chunk = meta.column(c)
        if chunk.path_in_schema == column:
            with open(path, "rb") as f:
                f.seek(chunk.bloom_filter_offset)
                return f.read(chunk.bloom_filter_length)
    raise KeyError(column)


# (column, DuckDB type of the literal, present values, absent values)
PYARROW_PROBES = [
    ("i32", "INTEGER", [-5000, 2000, 15993], [-4999, 1, 10**6]),
    ("i64", "BIGINT", [3, 10**12 + 3, 2999 * 10**12 + 3], [4, 10**12, -3]),
    ("u32", "UINTEGER", [0, 2_654_435_761 % 2**32, 999 * 2_654_435_761 % 2**32], [1, 2, 3]),
    ("i8", "TINYINT", [-100, 0, 99], []),
    ("f64", "DOUBLE", [-100.0, 1 / 7.0 - 100.0], [0.5, 1e300]),
    ("f32", "FLOAT", [0.0, 1.0], [0.1, -7.25]),
    ("s", "VARCHAR", ["key-0", "key-2999"], ["key-3000", "", "KEY-1"]),
    (
        "dt",
        "DATE",
        [datetime.date(2000, 1, 1), datetime.date(2001, 5, 6)],
        [datetime.date(1999, 1, 1)],
    ),
    (
        "ts_us",
        "TIMESTAMP",
        [datetime.datetime(2024, 1, 1, 0, 1, 37)],
        [datetime.datetime(2024, 1, 1, 0, 1, 38)],
    ),
    (
        "dec",
        "DECIMAL(12,2)",
        [decimal.Decimal("-90.00"), decimal.Decimal("-89.63")],
        [decimal.Decimal("0.01")],
    ),
    ("dec38", "DECIMAL(38,3)", [decimal.Decimal(10**20 - 7) / 1000], [decimal.Decimal("1.000")]),
]


#: Columns whose filters DuckDB's parquet_bloom_probe never uses.
DUCKDB_DOES_NOT_PROBE = {"dec", "dec38"}


@pytest.mark.parametrize(("column", "duck_type", "present", "absent"), PYARROW_PROBES)
def test_probes_equal_duckdb_on_pyarrow_file(
    pyarrow_file: Path, column: str, duck_type: str, present: list, absent: list
) -> None:
    filters = read_bloom_filters(pyarrow_file, columns=[column])
    assert len(filters) == 3
    for value in [*present, *absent]:
        expected = _duckdb_excludes(pyarrow_file, column, _literal(value, duck_type))
        ours = {rg: value not in f for (rg, _c), f in filters.items()}
        if column in DUCKDB_DOES_NOT_PROBE:
            # DuckDB 2.0 keeps every row group of a FIXED_LEN_BYTE_ARRAY decimal (it does not
            # hash the literal for them); the bits themselves equal pyarrow's writer's
            # (test_bits_equal_pyarrow_writer), so bloomskip prunes where DuckDB cannot.
            assert not any(expected.values())
            assert ours[next(iter(ours))] is not None
        else:
            assert ours == expected, (column, value)
    # Every present value passes its own row group's filter; absent ones are excluded somewhere.
    assert all(any(value in f for f in filters.values()) for value in present)


@pytest.mark.parametrize(
    ("column", "duck_type", "values"),
    [
        ("s", "VARCHAR", ["k0", "k699", "k700", "zz", ""]),
        ("i32", "INTEGER", [0, 499, 500, -1]),
        ("i64", "BIGINT", [0, 299000, 300000, 1]),
        (
            "dt",
            "DATE",
            [datetime.date(2020, 1, 1), datetime.date(2021, 2, 3), datetime.date(2019, 1, 1)],
        ),
        (
            "dec9",
            "DECIMAL(9,2)",
            [decimal.Decimal("0.25"), decimal.Decimal("62.25"), decimal.Decimal("62.50")],
        ),
        (
            "dec18",
            "DECIMAL(18,3)",
            [decimal.Decimal("0.125"), decimal.Decimal("31.125"), decimal.Decimal("40")],
        ),
        ("f64", "DOUBLE", [0.0, 1 / 3, 29.666666666666668, 31.0]),
        ("f32", "FLOAT", [0.0, 1.0, 100.0]),
        (
            "ts",
            "TIMESTAMP",
            [datetime.datetime(2021, 6, 1, 0, 0, 17), datetime.datetime(2021, 6, 1, 0, 0, 18)],
        ),
    ],
)
def test_probes_equal_duckdb_on_duckdb_file(
    duckdb_file: Path, column: str, duck_type: str, values: list
) -> None:
    filters = read_bloom_filters(duckdb_file, columns=[column])
    expected_groups = _duckdb_excludes(duckdb_file, column, _literal(values[0], duck_type))
    if not filters:
        # DuckDB writes filters for dictionary-encoded chunks only; then it excludes nothing.
        assert not any(expected_groups.values())
        return
    for value in values:
        expected = _duckdb_excludes(duckdb_file, column, _literal(value, duck_type))
        ours = {rg: value not in f for (rg, _c), f in filters.items()}
        assert ours == {rg: expected[rg] for rg in ours}, (column, value)


def test_duckdb_file_has_filters(duckdb_file: Path) -> None:
    filters = read_bloom_filters(duckdb_file)
    assert {c for _rg, c in filters} >= {"s", "i32", "dt", "dec9", "dec18"}
    assert filters[0, "dec9"].value_type.physical_type == "INT32"
    assert filters[0, "dec18"].value_type.physical_type == "INT64"


def test_set_api() -> None:
    f = SplitBlockBloomFilter.sized(100, 0.01, value_type=pa.int32())
    g = SplitBlockBloomFilter(f.num_bytes, value_type=pa.int32())
    assert not f and f.estimated_fpr == 0.0
    f.update(range(50))
    g.add(1000)
    union = f | g
    assert 1000 in union and 7 in union and 1000 not in f
    assert union.bits_set >= f.bits_set and 0 < union.fill_ratio < 1
    assert 0 < f.estimated_fpr < 0.05
    assert 20 < f.estimated_items < 100
    again = SplitBlockBloomFilter.from_bytes(union.to_bytes(), value_type=pa.int32())
    assert again == union and again.to_bytes() == union.to_bytes()
    assert None not in f and "not a number" not in f
    assert f.contains_batch(pa.array([1, None, 1000], pa.int32())).tolist() == [True, False, False]
    with pytest.raises(ValueError, match="cannot be combined"):
        f | SplitBlockBloomFilter(f.num_bytes * 2)
    with pytest.raises(ValueError, match="multiple of 32"):
        SplitBlockBloomFilter(48)
    with pytest.raises(UnsupportedTypeError, match="no Bloom filter"):
        SplitBlockBloomFilter(32, value_type=pa.bool_())


def test_float_zero_signs_hash_apart() -> None:
    """Writers hash the raw bits: -0.0 and 0.0 are different values to a filter."""
    t = ParquetValueType.for_arrow(pa.float64())
    assert t.hash([0.0])[0] != t.hash([-0.0])[0]
    assert t.hash([1.5])[0] == xxhash64(np.array([1.5], "<f8"))[0]


HEADER = encode_bloom_filter_header(64)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x15\x80\x01\x1c\x1c\x00\x1c\x00\x00", "more than one member"),
        (b"\x15\x80\x01\x00", "lacks its required field"),
        (b"\x15\x41" + HEADER[3:], "not a positive multiple of 32"),
        (HEADER.replace(b"\x1c\x1c\x00\x00", b"\x1c\x2c\x00\x00", 1), "algorithm is not BLOCK"),
        (b"\x15\x80\x01\x1c" + b"\x1c" * 40, "nested deeper"),
        (b"\x15\x80\x01\x1d", "unknown Thrift compact type 13"),
        (b"\x18\xff\xff\xff\xff\x0f", "length of"),
    ],
)
def test_hostile_headers(data: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message) as caught:
        SplitBlockBloomFilter.from_bytes(data + bytes(64), offset=1000, source="x.parquet")
    assert "x.parquet" in str(caught.value) and "offset" in str(caught.value)


def test_header_skips_unknown_fields_and_checks_length() -> None:
    # An unknown field 5 (a binary) before the stop byte is skipped, as Thrift readers must.
    extended = HEADER[:-1] + b"\x18\x03abc\x00"
    assert parse_bloom_filter_header(extended) == (64, len(extended))
    with pytest.raises(FormatError, match="bytes of bitset"):
        SplitBlockBloomFilter.from_bytes(HEADER + bytes(32))
    with pytest.raises(FormatError, match="more than"):
        SplitBlockBloomFilter.from_bytes(encode_bloom_filter_header(1 << 30))
    with pytest.raises(TruncatedError):
        parse_bloom_filter_header(HEADER[:-1])


def test_corrupt_offsets_name_the_field(pyarrow_file: Path, tmp_path: Path) -> None:
    data = bytearray(pyarrow_file.read_bytes())
    first = min(c.offset for c in chunk_filters(pq.ParquetFile(pyarrow_file).metadata) if c.offset)
    data[first] = 0x16  # the numBytes field header now says "i64"
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="broken.parquet") as caught:
        read_bloom_filters(broken)
    assert caught.value.offset is not None and caught.value.offset >= first
    with pytest.raises(FormatError, match="not a readable Parquet"):
        read_bloom_filters(_garbage(tmp_path))


def _garbage(tmp_path: Path) -> Path:
    path = tmp_path / "garbage.parquet"
    path.write_bytes(b"PAR1" + bytes(100) + b"PAR1")
    return path


@pytest.mark.parametrize(
    "name", ["filter", "thrift", "values", "reader", "verify", "harvest", "granules", "cli"]
)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"bloomskip.parquet.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_chunks_without_a_length_are_read_header_first(pyarrow_file: Path) -> None:
    """Older parquet-mr files give bloom_filter_offset only: the header then sizes the read."""
    from dataclasses import replace

    from bloomskip.parquet.reader import read_chunk_filters

    chunks = [c for c in chunk_filters(pq.ParquetFile(pyarrow_file).metadata) if c.offset]
    with pa.OSFile(str(pyarrow_file)) as file:
        size = file.size()
        with_length = read_chunk_filters(file, size, chunks, "f")
        without = read_chunk_filters(file, size, [replace(c, length=None) for c in chunks], "f")
    assert without == with_length and len(without) == len(chunks)


def test_bits_equal_pyarrow_writer_for_more_types(tmp_path: Path) -> None:
    """INT96 timestamps, times, unsigned 64-bit, time zones, large strings, dictionaries,
    date64 (written as a date), timestamp[s] (written as ms) and nulls: the writer's bits."""
    n = 2000
    i = np.arange(n)
    base = datetime.datetime(2023, 3, 4, 5, 6, 7)
    table = pa.table(
        {
            "ts96": pa.array([base + datetime.timedelta(microseconds=int(v) * 977) for v in i]),
            "t32": pa.array((i * 1000).astype(np.int32), pa.time32("ms")),
            "t64": pa.array(i.astype(np.int64) * 10**6 + 7, pa.time64("us")),
            "u64": pa.array((i.astype(np.uint64) * np.uint64(2**61)) + np.uint64(5)),
            "tz": pa.array(i.astype(np.int64) * 10**9, pa.timestamp("ns", "Europe/Paris")),
            "ts_s": pa.array(i.astype(np.int64) * 3601, pa.timestamp("s")),
            "d64": pa.array(i.astype(np.int64) * 86_400_000, pa.date64()),
            "big": pa.array([f"x{v}" if v % 9 else None for v in range(n)], pa.large_string()),
            "dict": pa.array([f"d{v % 37}" for v in range(n)]).dictionary_encode(),
            "dur": pa.array(i.astype(np.int64) * 13, pa.duration("ms")),
        }
    )
    options = {name: {"ndv": n, "fpp": 0.05} for name in table.column_names}
    for int96 in (False, True):
        path = tmp_path / f"more-{int96}.parquet"
        pq.write_table(
            table, path, bloom_filter_options=options, use_deprecated_int96_timestamps=int96
        )
        filters = read_bloom_filters(path)
        assert (filters[0, "ts96"].value_type.physical_type == "INT96") is int96
        assert len(filters) == len(table.column_names)
        for (_rg, column), stored in filters.items():
            built = SplitBlockBloomFilter(stored.num_bytes, value_type=stored.value_type)
            built.update(table[column])
            assert built.bitset == stored.bitset, (column, int96)
            if stored.value_type.physical_type != "INT96":
                # From the Arrow type alone, as pyarrow's writer maps it by default.
                own = SplitBlockBloomFilter(stored.num_bytes, value_type=table[column].type)
                own.update(table[column])
                assert own.bitset == stored.bitset, column
