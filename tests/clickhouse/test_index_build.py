"""SkipIndex build / serialization / statistics, byte for byte against chdb's part files."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bloomskip.clickhouse.ddl import IndexDefinitionError, parse_index_definition
from bloomskip.clickhouse.index import SkipIndex, index_granule_bounds
from bloomskip.errors import FormatError

# Text with 1-, 2-, 3- and 4-byte UTF-8 sequences, separators (space, '_', '-', '%') and bytes
# that are not valid UTF-8 (a lone continuation byte, a lead byte cut off at the end).
TEXT_EXPRESSION = (
    "concat(['alpha', 'Привет', '雪☃', '😀x', 'snake_case', 'a-b%c', 'ÄÖü'][number % 7 + 1], "
    "' ', toString(number % 113), if(number % 11 = 0, unhex('80'), ''), "
    "if(number % 13 = 0, unhex('E298'), ''), repeat('z', number % 5))"
)

LAYOUTS = {
    "fixed": {"index_granularity": 100, "index_granularity_bytes": 0},
    "adaptive": {"index_granularity": 1000, "index_granularity_bytes": 2000},
    "wide-adaptive": {
        "index_granularity": 1000,
        "index_granularity_bytes": 3000,
        "min_bytes_for_wide_part": 0,
    },
}


def _granularity_indexes(granularity: int) -> list[str]:
    return [
        f"INDEX bf v TYPE bloom_filter(0.01) GRANULARITY {granularity}",
        f"INDEX bf2 (v, s) TYPE bloom_filter GRANULARITY {granularity}",
        f"INDEX bfa arr TYPE bloom_filter(0.1) GRANULARITY {granularity}",
        f"INDEX tk s TYPE tokenbf_v1(100, 3, 0) GRANULARITY {granularity}",
        f"INDEX ng s TYPE ngrambf_v1(3, 256, 2, 4294967297) GRANULARITY {granularity}",
    ]


GRANULARITY_COLUMNS = {"v": "Int64", "s": "String", "arr": "Array(UInt16)"}
GRANULARITY_SELECT = (
    "SELECT -toInt64(number % 577), concat("
    + TEXT_EXPRESSION
    + ", repeat('y', intDiv(number, 500) * 30)), "
    "if(intDiv(number, 150) % 3 = 0, [], [toUInt16(number % 40), 7]) FROM numbers({start}, {count})"
)


def _assert_identical(part, index_name: str) -> SkipIndex:
    definition = part.indexes[index_name]
    built = SkipIndex.build(definition, part.data, part.granule_rows, part.columns)
    expected = part.index_stream(index_name)
    got = built.to_bytes()
    if got != expected:
        offset = 0
        for j in range(built.index_granule_count):
            granule = built.granule_bytes(j)
            assert granule == expected[offset : offset + len(granule)], (
                f"{index_name}: first differing index granule {j}"
            )
            offset += len(granule)
    assert got == expected, index_name
    return built


def _assert_identical_up_to_continuations(part, index_name: str) -> None:
    """Array bloom_filter in a merged Wide part: ClickHouse applies the empty-array rule once per
    update() call, and the Wide writer continues a data granule across merge blocks (two calls).
    Block boundaries are not recorded in the part, so a granule may differ from bloomskip's in
    exactly one way: ClickHouse's also holds the hash 0. Check that this is the only difference.
    """
    from bloomskip import bits
    from bloomskip.clickhouse.types import value_hashes

    definition = part.indexes[index_name]
    built = SkipIndex.build(definition, part.data, part.granule_rows, part.columns)
    theirs = SkipIndex.from_bytes(definition, part.index_stream(index_name), part.granule_rows)
    hashes, row_offsets = value_hashes(part.evaluate_column(definition), part.columns["arr"])
    row_bounds = np.concatenate(([0], np.cumsum(built.index_granule_rows())))
    continued = 0
    for j in range(built.index_granule_count):
        if built.granule_bytes(j) == theirs.granule_bytes(j):
            continue
        granule_hashes = hashes[row_offsets[row_bounds[j]] : row_offsets[row_bounds[j + 1]]]
        with_zero = np.append(granule_hashes, np.uint64(0))
        payload, _, _ = bits.bloom_filter_granules(
            [(with_zero, [0, len(with_zero)])], definition.bits_per_row, definition.hash_functions
        )
        assert payload == theirs.granule_bytes(j), f"granule {j}"
        continued += 1
    assert continued < built.index_granule_count


@pytest.mark.parametrize("granularity", [1, 2, 3, 4])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_layouts_and_granularity(clickhouse, layout: str, granularity: int) -> None:
    # Three inserts of different row widths merged into one part: with adaptive granularity the
    # merged part's granules hold different row counts.
    part = clickhouse.create_part(
        GRANULARITY_COLUMNS,
        _granularity_indexes(granularity),
        [GRANULARITY_SELECT.format(start=start, count=500) for start in (0, 500, 1000)],
        optimize=True,
        settings=LAYOUTS[layout],
    )
    if layout != "fixed":
        assert len(set(part.granule_rows.tolist())) > 3, "adaptive granules should vary"
    for name in part.indexes:
        if layout == "wide-adaptive" and name == "bfa":
            _assert_identical_up_to_continuations(part, name)
            continue
        built = _assert_identical(part, name)
        assert built.index_granule_count == -(-len(part.granule_rows) // granularity)
        assert int(built.index_granule_rows().sum()) == part.data.num_rows


@pytest.mark.parametrize("granularity", [1, 3])
def test_merged_part_with_uneven_granules(clickhouse, granularity: int) -> None:
    part = clickhouse.create_part(
        GRANULARITY_COLUMNS,
        _granularity_indexes(granularity),
        [
            GRANULARITY_SELECT.format(start=0, count=500),
            GRANULARITY_SELECT.format(start=500, count=450),
        ],
        optimize=True,
        settings={"index_granularity": 128},
    )
    # The merge leaves a short granule in the middle of the part.
    assert len(set(part.granule_rows[:-1].tolist())) > 1
    for name in part.indexes:
        _assert_identical(part, name)


TEXT_PARAMETERS = [
    *[f"ngrambf_v1({n}, {size}, {k}, {seed})" for n, size, k, seed in [
        (1, 33, 1, 0), (2, 100, 2, 4294967297), (3, 1021, 3, 0), (4, 100, 4, 18446744073709551615),
        (4, 33, 2, 4294967297), (1, 1021, 5, 123),
    ]],
    *[f"tokenbf_v1({size}, {k}, {seed})" for size, k, seed in [
        (33, 1, 0), (100, 3, 4294967297), (1021, 2, 0), (100, 7, 18446744073709551615),
    ]],
]  # fmt: skip


def test_text_index_parameters(clickhouse) -> None:
    indexes = [
        f"INDEX t{number} s TYPE {parameters} GRANULARITY {number % 4 + 1}"
        for number, parameters in enumerate(TEXT_PARAMETERS)
    ] + [
        "INDEX tfs fs TYPE ngrambf_v1(2, 64, 2, 0) GRANULARITY 1",
        "INDEX tfst fs TYPE tokenbf_v1(64, 2, 0) GRANULARITY 2",
        "INDEX tarr arr TYPE ngrambf_v1(3, 100, 2, 1) GRANULARITY 2",
        "INDEX tlc lc TYPE tokenbf_v1(100, 2, 9) GRANULARITY 1",
        "INDEX tmulti (s, fs, lower(s)) TYPE ngrambf_v1(2, 100, 2, 0) GRANULARITY 3",
    ]
    part = clickhouse.create_part(
        {
            "s": "String",
            "fs": "FixedString(5)",
            "arr": "Array(String)",
            "lc": "LowCardinality(String)",
        },
        indexes,
        "SELECT "
        + TEXT_EXPRESSION
        + ", toFixedString(substring("
        + TEXT_EXPRESSION
        + ", 1, 5), 5), "
        "if(number % 4 = 0, [], [" + TEXT_EXPRESSION + ", 'Ёлка_x']), "
        "['MiXeD Case', 'снег', 'x_y'][number % 3 + 1] FROM numbers(700)",
        settings={"index_granularity": 64},
        read_settings={"output_format_arrow_low_cardinality_as_dictionary": 1},
    )
    for name in part.indexes:
        _assert_identical(part, name)


def test_empty_array_rule_is_per_data_granule(clickhouse) -> None:
    """An all-empty DATA granule contributes the hash 0 even when its index granule (GRANULARITY
    > 1) also holds non-empty arrays; NULL rows of a Nullable column count as values."""
    part = clickhouse.create_part(
        {"a": "Array(UInt32)", "n": "Nullable(Int64)"},
        [f"INDEX g{g} a TYPE bloom_filter(0.1) GRANULARITY {g}" for g in (1, 2, 3)]
        + ["INDEX nn n TYPE bloom_filter GRANULARITY 2"],
        "SELECT if(intDiv(number, 10) % 3 = 0, [], [toUInt32(number)]), "
        "if(number % 5 = 0, NULL, -number) FROM numbers(95)",
        settings={"index_granularity": 10},
    )
    for name in part.indexes:
        _assert_identical(part, name)
    counts = [part.index_stream(f"g{g}")[0] for g in (1, 2, 3)]
    # Data granule 0 is all empty: alone it holds just hash 0; with granule 1 (10 values) 11;
    # with granules 1 and 2, 21.
    assert counts == [1, 11, 21]


def _sample_index() -> tuple[SkipIndex, pa.Table]:
    table = pa.table(
        {
            "v": pa.array(np.arange(1000) % 97, pa.uint32()),
            "s": pa.array([f"w{i % 31} x{i}" for i in range(1000)]),
        }
    )
    definition = parse_index_definition("INDEX i (v, s) TYPE bloom_filter(0.05) GRANULARITY 2")
    return SkipIndex.build(definition, table, [128] * 7 + [104, 0]), table


def test_from_bytes_round_trip_and_shape() -> None:
    index, _ = _sample_index()
    assert index.index_granule_count == 4
    assert index.data_granule_rows.tolist() == [128] * 7 + [104]  # the final 0-row mark dropped
    assert list(index.data_granules_of(3)) == [6, 7]
    again = SkipIndex.from_bytes(
        index.definition, index.to_bytes(), index.data_granule_rows, index.column_types
    )
    assert again.to_bytes() == index.to_bytes()
    for c in range(2):
        for (flat_a, off_a), (flat_b, off_b) in [
            (index.column_filters(c), again.column_filters(c))
        ]:
            np.testing.assert_array_equal(flat_a, flat_b)
            np.testing.assert_array_equal(off_a, off_b)
    assert index_granule_bounds(8, 3).tolist() == [0, 3, 6, 8]


def test_column_filters_are_the_serialized_filters() -> None:
    index, _ = _sample_index()
    for j in range(index.index_granule_count):
        granule = index.granule_bytes(j)
        count = int(index.distinct_counts[j])
        header = 1 if count < 128 else 2
        size = (index.definition.bits_per_row * count + 7) // 8
        for c in range(2):
            flat, offsets = index.column_filters(c)
            start = header + c * size
            assert flat[offsets[j] : offsets[j + 1]].tobytes() == granule[start : start + size]


def test_statistics() -> None:
    index, table = _sample_index()
    stats = index.granule_statistics()
    assert stats.column_names == [
        "granule", "column", "rows", "bit_count", "bits_set", "fill_ratio", "estimated_fpr",
    ]  # fmt: skip
    assert stats.num_rows == index.index_granule_count * 2
    k = index.definition.hash_functions
    for row in stats.to_pylist():
        c = index.definition.expressions.index(row["column"])
        flat, offsets = index.column_filters(c)
        filter_bytes = flat[offsets[row["granule"]] : offsets[row["granule"] + 1]]
        assert row["bit_count"] == 8 * len(filter_bytes)
        assert row["bits_set"] == int(np.unpackbits(filter_bytes).sum())
        assert row["fill_ratio"] == pytest.approx(row["bits_set"] / row["bit_count"])
        assert row["estimated_fpr"] == pytest.approx(row["fill_ratio"] ** k)
    per_granule = stats.filter(pa.compute.equal(stats["column"], "v"))["rows"].to_pylist()
    assert sum(per_granule) == table.num_rows


def test_bad_bloom_filter_bytes_raise_format_error() -> None:
    index, _ = _sample_index()
    payload = index.to_bytes()
    args = (index.definition,)
    rows = index.data_granule_rows
    for cut in sorted({0, 1, 2, 10, len(payload) // 2, len(payload) - 1}):
        with pytest.raises(FormatError) as caught:
            SkipIndex.from_bytes(*args, payload[:cut], rows, source="skp_idx_i.idx")
        assert caught.value.source == "skp_idx_i.idx" and caught.value.offset is not None
    with pytest.raises(FormatError, match="follow the last"):
        SkipIndex.from_bytes(*args, payload + b"\0", rows)
    with pytest.raises(FormatError, match="longer than 9 bytes"):
        SkipIndex.from_bytes(*args, b"\xff" * 12, rows)
    # A huge distinct count must be refused from the sizes alone, without allocating.
    with pytest.raises(FormatError, match="only 2 bytes remain"):
        SkipIndex.from_bytes(*args, b"\xff\xff\xff\xff\xff\xff\xff\xff\x7f\0\0", rows)


def test_bad_text_bytes_raise_format_error() -> None:
    definition = parse_index_definition("s TYPE tokenbf_v1(33, 2, 0) GRANULARITY 2")
    with pytest.raises(FormatError, match=r"expected 2 granules x 1 column\(s\) x 33 bytes"):
        SkipIndex.from_bytes(definition, b"\0" * 65, [10, 10, 10])
    index = SkipIndex.from_bytes(definition, bytes(range(66)), [10, 10, 10])
    assert index.granule_bytes(1) == bytes(range(33, 66))


def _bloom_filter_layout_holds(payload: bytes, granules: int, bits_per_row: int) -> bool:
    """ClickHouse's bloom_filter granule layout, read independently: per granule a VarUInt
    (at most 9 bytes of 7 bits) distinct count n, then one filter of (bits_per_row * n + 7) // 8
    bytes per index column (two here), and nothing after the last granule."""
    position = 0
    for _ in range(granules):
        count = 0
        for byte_number in range(9):
            if position >= len(payload):
                return False
            byte = payload[position]
            position += 1
            count |= (byte & 0x7F) << (7 * byte_number)
            if byte < 0x80:
                break
        else:
            return False
        position += 2 * ((bits_per_row * count + 7) // 8)
        if position > len(payload):
            return False
    return position == len(payload)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.binary(max_size=200),
        # Well-formed for bloom_filter(0.2) (4 bits per row) when the granule count fits.
        st.lists(st.integers(0, 3), min_size=1, max_size=4).map(
            lambda counts: b"".join(bytes([c]) + b"\xa5" * (2 * ((4 * c + 7) // 8)) for c in counts)
        ),
    ),
    st.lists(st.integers(1, 300), min_size=1, max_size=6),
)
def test_random_bytes_never_crash(payload: bytes, rows: list[int]) -> None:
    """Any bytes are either read back exactly or refused with a FormatError naming where, and
    which of the two happens follows the layout ClickHouse writes."""
    definition = parse_index_definition("INDEX i (a, b) TYPE bloom_filter(0.2) GRANULARITY 2")
    granules = (len(rows) + 1) // 2
    assert definition.bits_per_row == 4
    expected = _bloom_filter_layout_holds(payload, granules, definition.bits_per_row)
    try:
        index = SkipIndex.from_bytes(definition, payload, rows)
    except FormatError as exc:
        assert not expected, f"refused a well-formed index: {exc}"
        assert exc.offset is not None and 0 <= exc.offset <= len(payload)
        assert "\n" not in str(exc)
        return
    assert expected, "accepted bytes that do not follow the layout"
    assert index.to_bytes() == payload
    assert index.granule_statistics().num_rows == 2 * index.index_granule_count


def test_build_argument_errors() -> None:
    definition = parse_index_definition("v TYPE bloom_filter")
    table = pa.table({"v": [1, 2, 3]})
    with pytest.raises(ValueError, match="add up to 2 rows but the table has 3"):
        SkipIndex.build(definition, table, [1, 1])
    with pytest.raises(ValueError, match="data granule 0 has 0 rows"):
        SkipIndex.build(definition, table, [0, 3])
    with pytest.raises(IndexDefinitionError, match="'w', which the table does not have"):
        SkipIndex.build(parse_index_definition("w TYPE bloom_filter"), table, [3])
    with pytest.raises(IndexDefinitionError, match="Map"):
        SkipIndex.build(definition, table, [3], {"v": "Map(String, UInt8)"})
    with pytest.raises(IndexError):
        SkipIndex.build(definition, table, [3]).granule_bytes(1)


def test_select_agrees_with_explain(clickhouse) -> None:
    part = clickhouse.create_part(
        {"v": "UInt32", "s": "String"},
        ["INDEX bf v TYPE bloom_filter GRANULARITY 2", "INDEX tk s TYPE tokenbf_v1(256, 2, 0)"],
        "SELECT number % 1000, concat('w', toString(number % 40), ' e', toString(number)) "
        "FROM numbers(4000)",
        settings={"index_granularity": 128},
    )
    for index_name, where in [
        ("bf", "v = 5"),
        ("bf", "v IN (3, 999)"),
        ("bf", "v = 5000"),
        ("tk", "hasToken(s, 'e77')"),
        ("tk", "s = 'w3 e3'"),
    ]:
        built = SkipIndex.build(
            part.indexes[index_name], part.data, part.granule_rows, part.columns
        )
        selected = built.select(where)
        kept, total = part.explain_granules(where, index_name)
        assert total == len(part.granule_rows)
        assert len(selected) == kept, where
        assert np.all(np.diff(selected) > 0)


def test_dictionary_text_path_equals_plain_strings() -> None:
    """LowCardinality text columns tokenize each distinct value once per granule; the filters
    must equal those of the decoded strings (chunked, with NULLs and differing dictionaries)."""
    values = ["a b", None, "c", "a b", "zz", None, "Ёж c", "c"]
    definition = parse_index_definition("s TYPE ngrambf_v1(2, 64, 2, 7) GRANULARITY 2")
    plain = SkipIndex.build(definition, pa.table({"s": pa.array(values)}), [2, 2, 2, 2])
    chunks = [pa.array(values[:3]).dictionary_encode(), pa.array(values[3:]).dictionary_encode()]
    encoded = SkipIndex.build(definition, pa.table({"s": pa.chunked_array(chunks)}), [2, 2, 2, 2])
    assert encoded.to_bytes() == plain.to_bytes()
    assert encoded.column_types == {"s": "LowCardinality(String)"}
