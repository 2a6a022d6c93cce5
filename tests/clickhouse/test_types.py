"""Value hashing per ClickHouse type: bloom_filter granules byte-identical to chdb's files."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from bloomskip import hashing
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.clickhouse.types import (
    UnsupportedTypeError,
    check_bloom_filter_type,
    check_text_type,
    clickhouse_type_for,
    parse_clickhouse_type,
    text_values,
    value_hashes,
)

# column -> (ClickHouse type, SELECT expression over numbers(600)). NULLs, negatives, the
# all-ones patterns and values above 2**192 are there on purpose.
TYPED_COLUMNS: dict[str, tuple[str, str]] = {
    "u8": ("UInt8", "toUInt8(number * 7)"),
    "u16": ("UInt16", "toUInt16(number * 997)"),
    "u32": ("UInt32", "toUInt32(number * 2654435761)"),
    "u64": ("UInt64", "number * 11400714819323198485"),
    "i8": ("Int8", "toInt8(number) - 100"),
    "i16": ("Int16", "toInt16(number * 311) - 30000"),
    "i32": ("Int32", "toInt32(number * 7919) - 2000000"),
    "i64": ("Int64", "-toInt64(number * 1000000007)"),
    "f32": ("Float32", "toFloat32(number) / 7 - 3"),
    "f64": ("Float64", "if(number % 50 = 0, -0., number / 7 - 3)"),
    "b": ("Bool", "number % 3 = 0"),
    "d": ("Date", "toDate('1970-01-01') + number * 97"),
    "dt": ("DateTime", "toDateTime('2020-01-01 00:00:00', 'UTC') + number * 3333"),
    "dt_tz": ("DateTime('Asia/Tokyo')", "toDateTime('2020-01-01 00:00:00', 'UTC') + number"),
    "dt64_0": ("DateTime64(0)", "toDateTime64('2020-01-01 00:00:00', 0) + number"),
    "dt64_3": (
        "DateTime64(3, 'UTC')",
        "toDateTime64('1960-01-01 00:00:00', 3, 'UTC') + toIntervalMillisecond(number * 1234567)",
    ),
    "dt64_5": (
        "DateTime64(5)",
        "toDateTime64('1960-01-01 00:00:00', 5) + toIntervalMicrosecond(number * 12345670)",
    ),
    "dt64_9": (
        "DateTime64(9)",
        "toDateTime64('2020-01-01 00:00:00', 9) + toIntervalNanosecond(number * 123456789)",
    ),
    "e8": ("Enum8('a' = -128, 'b' = 0, 'c' = 127)", "['a', 'b', 'c'][number % 3 + 1]"),
    "e16": ("Enum16('x' = -1000, 'y' = 1, 'z' = 30000)", "['x', 'y', 'z'][number % 3 + 1]"),
    "uuid": ("UUID", "generateUUIDv4(number)"),
    "ip4": ("IPv4", "toIPv4(number * 16777259)"),
    "ip6": (
        "IPv6",
        "toIPv6(concat('2001:db8:', toString(number % 10), '::', lower(hex(toUInt16(number)))))",
    ),
    "i128": ("Int128", "toInt128(number) * toInt128('-1000000000000000000000')"),
    "u128": ("UInt128", "toUInt128(number) * toUInt128('1000000000000000000000') + number"),
    "i256": ("Int256", "toInt256(number) * toInt256('-1000000000000000000000000000000000000')"),
    "u256": (
        "UInt256",
        "toUInt256(number) * toUInt256('1' || repeat('0', 70)) + number",
    ),
    "s": ("String", "concat('row ', toString(number % 97), if(number % 5 = 0, '', ' ☃'))"),
    "fs": ("FixedString(4)", "toFixedString(toString(number % 13), 4)"),
    "ni32": ("Nullable(Int32)", "if(number % 4 = 0, NULL, -toInt32(number))"),
    "nu8": ("Nullable(UInt8)", "if(number % 3 = 0, NULL, toUInt8(number))"),
    "ns": ("Nullable(String)", "if(number % 3 = 0, NULL, toString(number % 30))"),
    "nfs": ("Nullable(FixedString(3))", "if(number % 3 = 0, NULL, toFixedString('ab', 3))"),
    "nf32": ("Nullable(Float32)", "if(number % 7 = 0, NULL, number / 3)"),
    # ClickHouse hashes the value stored under a NULL. For numbers chdb exports that value into
    # the Arrow buffer (if(c, NULL, x) keeps x there, and the tests above use it), but for UUID it
    # exports zeros, so this column stores the default under its NULLs (toUUIDOrNull).
    "nuuid": (
        "Nullable(UUID)",
        "toUUIDOrNull(if(number % 2 = 0, 'x', toString(generateUUIDv4(number))))",
    ),
    "lcs": ("LowCardinality(String)", "toString(number % 11)"),
    "lcns": ("LowCardinality(Nullable(String))", "if(number % 4 = 0, NULL, toString(number % 7))"),
    "lcfs": ("LowCardinality(FixedString(4))", "toFixedString(toString(number % 13), 4)"),
    "lcu32": ("LowCardinality(UInt32)", "toUInt32(number % 17)"),
    "arr_u32": ("Array(UInt32)", "if(number % 64 < 40, [], range(toUInt32(number % 5)))"),
    "arr_s": ("Array(String)", "arrayMap(x -> toString(x), range(number % 4))"),
    "arr_lcs": ("Array(LowCardinality(String))", "arrayMap(x -> toString(x), range(number % 3))"),
    "arr_i8": ("Array(Int8)", "[toInt8(-1), toInt8(number % 100)]"),
    "arr_fs": ("Array(FixedString(2))", "[toFixedString(toString(number % 9), 2)]"),
    "m": ("Map(String, UInt16)", "map(toString(number % 5), toUInt16(number), 'k', 1)"),
}
BLOOM_INDEXES = [
    f"INDEX bf_{column} {column} TYPE bloom_filter GRANULARITY 1"
    for column in TYPED_COLUMNS
    if column != "m"
] + [
    "INDEX bf_mk mapKeys(m) TYPE bloom_filter(0.01) GRANULARITY 1",
    "INDEX bf_mv mapValues(m) TYPE bloom_filter(0.01) GRANULARITY 2",
]
# Text indexes over every type they accept (IPv6 included, as in ClickHouse's validator).
TEXT_INDEXES = [
    "INDEX tx_s s TYPE tokenbf_v1(64, 2, 0) GRANULARITY 1",
    "INDEX tx_fs fs TYPE ngrambf_v1(2, 64, 2, 0) GRANULARITY 1",
    "INDEX tx_lcs lcs TYPE ngrambf_v1(1, 64, 3, 1) GRANULARITY 2",
    "INDEX tx_lcfs lcfs TYPE tokenbf_v1(33, 2, 5) GRANULARITY 1",
    "INDEX tx_arr_s arr_s TYPE ngrambf_v1(1, 64, 2, 0) GRANULARITY 1",
    "INDEX tx_arr_fs arr_fs TYPE tokenbf_v1(40, 1, 0) GRANULARITY 3",
    "INDEX tx_ip6 ip6 TYPE tokenbf_v1(64, 2, 0) GRANULARITY 1",
    "INDEX tx_mk mapKeys(m) TYPE tokenbf_v1(64, 2, 0) GRANULARITY 1",
    "INDEX tx_mv_fs (fs, mapKeys(m)) TYPE ngrambf_v1(2, 100, 2, 3) GRANULARITY 2",
]
ALL_INDEXES = BLOOM_INDEXES + TEXT_INDEXES
INDEX_NAMES = [clause.split()[1] for clause in ALL_INDEXES]


@pytest.fixture(scope="module")
def typed_part(clickhouse):
    return clickhouse.create_part(
        {column: type_name for column, (type_name, _) in TYPED_COLUMNS.items()},
        ALL_INDEXES,
        "SELECT "
        + ", ".join(expression for _, expression in TYPED_COLUMNS.values())
        + " FROM numbers(600)",
        settings={"index_granularity": 64},
        read_settings={"output_format_arrow_low_cardinality_as_dictionary": 1},
    )


@pytest.mark.parametrize("index_name", INDEX_NAMES)
def test_granules_match_chdb(typed_part, index_name: str) -> None:
    definition = typed_part.indexes[index_name]
    built = SkipIndex.build(
        definition, typed_part.data, typed_part.granule_rows, typed_part.columns
    )
    expected = typed_part.index_stream(index_name)
    assert built.index_granule_count == len(
        range(0, len(typed_part.granule_rows), definition.granularity)
    )
    for j in range(built.index_granule_count):
        start = sum(len(built.granule_bytes(i)) for i in range(j))
        got = built.granule_bytes(j)
        assert got == expected[start : start + len(got)], f"granule {j}"
    assert built.to_bytes() == expected


def test_low_cardinality_dictionaries_arrived_as_dictionaries(typed_part) -> None:
    # Guards the test above: the LowCardinality path under test is the dictionary one.
    assert pa.types.is_dictionary(typed_part.data.schema.field("lcs").type)
    assert pa.types.is_dictionary(typed_part.data.schema.field("arr_lcs").type.value_type)


def test_low_cardinality_equals_plain_column(typed_part) -> None:
    plain = typed_part.data.column("lcs").cast(pa.string())
    dictionary_hashes, _ = value_hashes(typed_part.data.column("lcs"), "LowCardinality(String)")
    plain_hashes, _ = value_hashes(plain, "String")
    np.testing.assert_array_equal(dictionary_hashes, plain_hashes)


DEFAULT_MAPPED = ["u8", "i16", "u32", "i64", "f32", "f64", "b", "d", "dt64_3", "dt64_9", "uuid",
                  "s", "fs", "lcs", "lcfs", "arr_s", "arr_lcs", "arr_fs", "ns", "nf32"]  # fmt: skip


@pytest.mark.parametrize("column", DEFAULT_MAPPED)
def test_default_type_mapping_hashes_like_chdb(typed_part, column: str) -> None:
    """Without column types, the Arrow type's default ClickHouse type must hash identically."""
    definition = typed_part.indexes[f"bf_{column}"]
    built = SkipIndex.build(definition, typed_part.data, typed_part.granule_rows)
    assert built.to_bytes() == typed_part.index_stream(f"bf_{column}")


@pytest.mark.parametrize(
    ("arrow_type", "expected"),
    [
        (pa.int8(), "Int8"),
        (pa.uint64(), "UInt64"),
        (pa.float16(), "Float32"),
        (pa.bool_(), "Bool"),
        (pa.string(), "String"),
        (pa.large_binary(), "String"),
        (pa.string_view(), "String"),
        (pa.binary(5), "FixedString(5)"),
        (pa.date32(), "Date"),
        # Every timestamp in UTC, as ClickHouse reads Parquet (tests/lake/test_zoned_timestamps.py).
        (pa.timestamp("s"), "DateTime('UTC')"),
        (pa.timestamp("s", "UTC"), "DateTime('UTC')"),
        (pa.timestamp("ms"), "DateTime64(3, 'UTC')"),
        (pa.timestamp("us", "Europe/Berlin"), "DateTime64(6, 'UTC')"),
        (pa.uuid(), "UUID"),
        (pa.dictionary(pa.int8(), pa.string()), "LowCardinality(String)"),
        (pa.list_(pa.int32()), "Array(Int32)"),
        (
            pa.large_list(pa.dictionary(pa.int8(), pa.binary(2))),
            "Array(LowCardinality(FixedString(2)))",
        ),
        (pa.map_(pa.string(), pa.float64()), "Map(String, Float64)"),
    ],
)  # fmt: skip
def test_clickhouse_type_for(arrow_type: pa.DataType, expected: str) -> None:
    assert clickhouse_type_for(arrow_type) == expected
    assert str(parse_clickhouse_type(expected)) == expected


def test_clickhouse_type_for_rejects() -> None:
    with pytest.raises(UnsupportedTypeError, match="decimal"):
        clickhouse_type_for(pa.decimal128(10, 2))
    assert clickhouse_type_for(pa.int32(), nullable=True) == "Nullable(Int32)"


def test_type_parsing() -> None:
    assert parse_clickhouse_type("Enum('a', 'b')").arguments == (("a", 1), ("b", 2))
    assert parse_clickhouse_type("Enum('a' = 1, 'b' = 300)").name == "Enum16"
    assert str(parse_clickhouse_type("Nullable(Date)")) == "Nullable(Date)"
    assert parse_clickhouse_type("LowCardinality(Nullable(String))").base().name == "String"
    assert parse_clickhouse_type("Decimal(10, 2)").modelled is False
    with pytest.raises(UnsupportedTypeError, match="cannot parse"):
        parse_clickhouse_type("Array(")


@pytest.mark.parametrize(
    "type_name",
    ["Date32", "Map(String, UInt8)", "Array(Nullable(UInt8))", "Array(Array(UInt8))",
     "Decimal(10, 2)", "Array(LowCardinality(Nullable(String)))", "Tuple(a UInt8)"],
)  # fmt: skip
def test_bloom_filter_rejects_what_clickhouse_rejects(type_name: str) -> None:
    with pytest.raises(UnsupportedTypeError, match="Unexpected type"):
        check_bloom_filter_type(type_name)


def test_text_type_check() -> None:
    for accepted in ["String", "FixedString(3)", "LowCardinality(String)", "Array(String)", "IPv6"]:
        check_text_type(accepted)
    for rejected in ["Nullable(String)", "UInt8", "Array(LowCardinality(String))"]:
        with pytest.raises(UnsupportedTypeError, match="can only be used"):
            check_text_type(rejected)


def test_zero_extension_and_float_widening() -> None:
    hashes, offsets = value_hashes(pa.array([-1, -100], pa.int32()), "Int32")
    np.testing.assert_array_equal(
        hashes, [hashing.int_hash64(0xFFFFFFFF), hashing.int_hash64(0xFFFFFF9C)]
    )
    assert offsets.tolist() == [0, 1, 2]
    # Int64 input for an Int8 column narrows first (what ClickHouse stored), then zero-extends.
    narrowed, _ = value_hashes(pa.array([-1], pa.int64()), "Int8")
    assert narrowed[0] == hashing.int_hash64(0xFF)
    float32, _ = value_hashes(pa.array([0.1], pa.float64()), "Float32")
    widened = np.array([np.float32(0.1)], np.float64).view(np.uint64)
    assert float32[0] == hashing.int_hash64(widened)[0]


def test_value_conversions() -> None:
    # Enum labels, IPv4 text and UUID text are converted to the stored numbers.
    enum_type = "Enum8('a' = -128, 'b' = 5)"
    from_labels, _ = value_hashes(pa.array(["a", "b"]), enum_type)
    from_codes, _ = value_hashes(pa.array([-128, 5], pa.int8()), enum_type)
    np.testing.assert_array_equal(from_labels, from_codes)
    with pytest.raises(UnsupportedTypeError, match="'zz' is not a label"):
        value_hashes(pa.array(["zz"]), enum_type)
    ip_text, _ = value_hashes(pa.array(["1.2.3.4"]), "IPv4")
    ip_number, _ = value_hashes(pa.array([0x01020304], pa.uint32()), "IPv4")
    assert ip_text[0] == ip_number[0]
    with pytest.raises(UnsupportedTypeError, match="not an IPv4"):
        value_hashes(pa.array(["1.2.3"]), "IPv4")
    text = "aabbccdd-eeff-0011-2233-445566778899"
    from_text, _ = value_hashes(pa.array([text]), "UUID")
    raw = pa.array([bytes.fromhex(text.replace("-", ""))], pa.binary(16))
    from_bytes, _ = value_hashes(raw, "UUID")
    assert (
        from_text[0] == from_bytes[0] == hashing.int_hash64(0xAABBCCDDEEFF0011 ^ 0x2233445566778899)
    )
    seconds, _ = value_hashes(pa.array([86400 * 3], pa.timestamp("s")), "Date")
    assert seconds[0] == hashing.int_hash64(3)
    padded, _ = value_hashes(pa.array(["ab"]), "FixedString(4)")
    assert padded[0] == hashing.cityhash64(b"ab\0\0")
    with pytest.raises(UnsupportedTypeError, match="does not fit FixedString"):
        value_hashes(pa.array(["abcde"]), "FixedString(4)")


def test_chunked_and_sliced_arrays() -> None:
    values = pa.array([[1, 2], [], None, [3]], pa.list_(pa.uint32()))
    whole, whole_offsets = value_hashes(values, "Array(UInt32)")
    chunked, chunked_offsets = value_hashes(
        pa.chunked_array([values.slice(0, 2), values.slice(2)]), "Array(UInt32)"
    )
    np.testing.assert_array_equal(whole, chunked)
    assert whole_offsets.tolist() == chunked_offsets.tolist() == [0, 2, 2, 2, 3]
    tail, tail_offsets = value_hashes(values.slice(3), "Array(UInt32)")
    assert tail.tolist() == whole[2:].tolist() and tail_offsets.tolist() == [0, 1]
    strings, offsets = text_values(pa.chunked_array([["a b"], [None, "c"]]), "String")
    assert strings.to_pylist() == [b"a b", b"", b"c"] or strings.to_pylist() == ["a b", "", "c"]
    assert offsets.tolist() == [0, 1, 2, 3]


def test_date_and_time_units_convert() -> None:
    day = pa.array([18263], pa.int32()).cast(pa.date32())  # 2020-01-02
    day64 = pa.array([18263 * 86_400_000], pa.int64()).cast(pa.date64())
    for array in (day, day64):
        assert value_hashes(array, "Date")[0][0] == hashing.int_hash64(18263)
        assert value_hashes(array, "DateTime")[0][0] == hashing.int_hash64(18263 * 86_400)
        assert value_hashes(array, "DateTime64(2)")[0][0] == hashing.int_hash64(18263 * 8_640_000)


def test_timestamp_scale_reduction_matches_chdb_casts(clickhouse) -> None:
    """Millisecond timestamps stored in coarser DateTime64 / DateTime columns: the value is the
    one ClickHouse's CAST gives (truncation toward zero, also before 1970)."""
    millis = [-1_700, -1, 0, 1_234_567, 1_700]
    expected = clickhouse.arrow(
        "SELECT toUnixTimestamp64Milli(CAST(toDateTime64(x / 1000, 3, 'UTC') AS "
        "DateTime64(1, 'UTC'))) DIV 100 AS tenths, "
        "toUnixTimestamp64Second(CAST(toDateTime64(x / 1000, 3, 'UTC') AS "
        "DateTime64(0, 'UTC'))) AS seconds "
        f"FROM (SELECT arrayJoin({millis}) AS x ORDER BY x)"
    )
    array = pa.array(sorted(millis), pa.timestamp("ms"))
    for column, ch_type in [("tenths", "DateTime64(1)"), ("seconds", "DateTime64(0)")]:
        stored = np.array(expected[column].to_pylist(), np.int64).view(np.uint64)
        np.testing.assert_array_equal(value_hashes(array, ch_type)[0], hashing.int_hash64(stored))
