"""BloomFilter: sizing, serialization and validation, membership, set algebra and statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bloomskip import FormatError
from bloomskip.tsfile import BloomFilter, writer_sizing

# research/tsfile.md §3: the filter of tree_1.tsfile (one series, root.sg.d1.s1), as written.
TREE_1_FILTER = bytes.fromhex("1a0000020000000000000000400000000000000000000000400006800205")


@pytest.mark.parametrize(
    ("paths", "rate", "expected"),
    [
        (0, 0.05, (256, 5)),
        (41, 0.05, (256, 5)),
        (42, 0.05, (262, 5)),
        (100, 0.05, (624, 5)),
        (1000, 0.05, (6236, 5)),
        (300, 0.05, (1871, 5)),  # tree_multichunk: 100 series x 3 flushes counted as 300
        (1099, 0.05, (6853, 5)),  # table_1000 as counted by the C++ writer
        (10, 0.1, (256, 4)),
        (10, 0.01, (256, 7)),
        (10, 0.5, (256, 4)),  # clamped to 0.1
        (10, 0.0001, (256, 7)),  # clamped to 0.01
    ],
)
def test_writer_sizing_matches_the_writers(paths: int, rate: float, expected: tuple) -> None:
    assert writer_sizing(paths, rate) == expected


def test_writer_sizing_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        writer_sizing(-1)
    with pytest.raises(ValueError):
        writer_sizing(10, math.nan)
    with pytest.raises(ValueError):
        writer_sizing(2**31)


def test_research_example_bytes() -> None:
    parsed = BloomFilter.from_bytes(TREE_1_FILTER)
    assert (parsed.bit_count, parsed.hash_function_count) == (256, 5)
    assert parsed.set_positions().tolist() == [17, 94, 190, 201, 202]
    assert "root.sg.d1.s1" in parsed
    rebuilt = BloomFilter.for_paths(["root.sg.d1.s1"])
    assert rebuilt.to_bytes() == TREE_1_FILTER
    assert rebuilt == parsed


def test_serialization_layout() -> None:
    empty = BloomFilter(256, 5)
    assert empty.to_bytes() == b"\x00"
    one = BloomFilter(300, 3)
    one._bits[0] = 0b1000_0001  # bits 0 and 7 (LSB-first)
    assert one.to_bytes() == b"\x01\x81" + b"\xac\x02" + b"\x03"
    assert BloomFilter.from_bytes(one.to_bytes()).set_positions().tolist() == [0, 7]


@pytest.mark.parametrize(
    ("data", "field", "offset"),
    [
        (b"", "bloom_filter.byte_length", 0),  # truncated varint
        (b"\x80", "bloom_filter.byte_length", 0),  # truncated varint
        (b"\x80\x80\x80\x80\x80\x01", "bloom_filter.byte_length", 0),  # more than 5 bytes
        (b"\x81\x00", "bloom_filter.byte_length", 0),  # non-minimal
        (b"\xff\xff\xff\xff\x0f", "bloom_filter.byte_length", 0),  # > 2**31 - 1
        (b"\x05\x01\x02", "bloom_filter.bits", 1),  # bits run past the end
        (b"\x01\x01", "bloom_filter.bit_count", 2),  # bit_count missing
        (b"\x01\x01\x00\x05", "bloom_filter.bit_count", 2),  # bit_count 0
        (b"\x01\x01\x08\x00", "bloom_filter.hash_function_count", 3),  # k = 0
        (b"\x01\x01\x08\x09", "bloom_filter.hash_function_count", 3),  # k = 9
        (b"\x02\x01\x01\x08\x05", "bloom_filter.byte_length", 0),  # 2 bytes > ceil(8/8)
        (b"\x01\x01\x08\x05\x00", "end", 4),  # trailing byte
        (b"\x00", "byte_length", 0),  # no filter
    ],
)
def test_from_bytes_validation(data: bytes, field: str, offset: int) -> None:
    with pytest.raises(FormatError) as raised:
        BloomFilter.from_bytes(data, source="buf")
    assert raised.value.field == field
    assert raised.value.offset == offset
    assert raised.value.source == "buf"
    assert isinstance(raised.value, ValueError)


def test_huge_bit_count_does_not_allocate() -> None:
    parsed = BloomFilter.from_bytes(b"\x01\x01" + b"\xff\xff\xff\xff\x07" + b"\x05")
    assert parsed.bit_count == 2**31 - 1
    assert len(parsed._bits) == 1
    assert parsed.bits_set == 1
    assert ("anything" in parsed) in (True, False)


def test_constructor_validation() -> None:
    for bit_count, k in [(0, 5), (2**31, 5), (256, 0), (256, 9)]:
        with pytest.raises(ValueError):
            BloomFilter(bit_count, k)
    with pytest.raises(ValueError):
        BloomFilter(256, 5, variant="sideways")  # type: ignore[arg-type]


paths_strategy = st.lists(
    st.text(alphabet="abcxyz.设备温度é😀0123456789", min_size=1, max_size=40),
    min_size=1,
    max_size=60,
    unique=True,
)


@settings(max_examples=60, deadline=None)
@given(paths=paths_strategy, variant=st.sampled_from(["signed-tail", "unsigned-tail", "both"]))
def test_no_false_negatives(paths: list[str], variant: str) -> None:
    built = BloomFilter.for_paths(paths, variant=variant)  # type: ignore[arg-type]
    assert built.contains_batch(paths).all()
    assert all(path in built for path in paths[:5])
    parsed = BloomFilter.from_bytes(built.to_bytes(), variant=variant)  # type: ignore[arg-type]
    assert parsed == built
    assert parsed.contains_batch(paths).all()
    one_by_one = BloomFilter(built.bit_count, built.hash_function_count, variant=variant)  # type: ignore[arg-type]
    for path in paths:
        one_by_one.add(path)
    assert one_by_one == built


def test_both_variant_serves_both_readers() -> None:
    paths = ["root.sg.设备.温度", "t1.bj.设备.s1", "root.sg.d1.s1"]
    for variant, readers in [
        ("signed-tail", {True}),
        ("unsigned-tail", {False}),
        ("both", {True, False}),
    ]:
        built = BloomFilter(256, 5, variant=variant)  # type: ignore[arg-type]
        built.update(paths)
        for signed_tail in (True, False):
            found = built.contains_with(paths, signed_tail)
            if signed_tail in readers:
                assert found.all()
            else:
                # The non-ASCII paths set other bits under the other variant.
                assert not found[:2].all()


def test_both_sizing_counts_differing_paths_twice() -> None:
    ascii_paths = [f"root.sg.d{i}.s1" for i in range(100)]
    cjk_paths = [f"root.sg.设备{i}.温度" for i in range(100)]
    assert BloomFilter.for_paths(ascii_paths, variant="both").bit_count == writer_sizing(100)[0]
    differing = int(np.count_nonzero([hash32_pair_differs(p) for p in cjk_paths]))
    assert differing > 50
    expected = writer_sizing(100 + differing)[0]
    assert BloomFilter.for_paths(cjk_paths, variant="both").bit_count == expected


def hash32_pair_differs(path: str) -> bool:
    from bloomskip.tsfile import hash32

    return hash32(path.encode(), 5) != hash32(path.encode(), 5, signed_tail=False)


def test_set_algebra() -> None:
    left = BloomFilter(512, 4)
    left.update(["a.b", "c.d"])
    right = BloomFilter(512, 4, variant="unsigned-tail")
    right.update(["e.f"])
    union = left | right
    assert union.variant == "both"
    assert left.issubset(union) and right.issubset(union)
    assert union.issuperset(left)
    assert not union.issubset(left)
    assert union.bits_set <= left.bits_set + right.bits_set
    left |= right
    assert left == union
    with pytest.raises(ValueError):
        _ = left | BloomFilter(256, 4)
    small = BloomFilter.from_bytes(left.to_bytes())  # stored without trailing zero bytes
    assert small.issubset(left) and left.issubset(small)


def test_statistics_estimate_the_content() -> None:
    paths = [f"root.sg.d{i}.s{j}" for i in range(100) for j in range(10)]
    built = BloomFilter.for_paths(paths)
    assert built.bits_set == len(np.unique(built.positions_batch(paths)))
    assert built.fill_ratio == built.bits_set / built.bit_count
    assert built.estimated_fpr == pytest.approx(built.fill_ratio**5)
    assert built.estimated_items == pytest.approx(1000, rel=0.05)
    # Absent paths pass at about the fill-implied rate (binomial, 5 sigma).
    absent = [f"root.other.d{i}.x" for i in range(20000)]
    rate = built.contains_batch(absent).mean()
    sigma = math.sqrt(built.estimated_fpr * (1 - built.estimated_fpr) / len(absent))
    assert abs(rate - built.estimated_fpr) < 5 * sigma + 1e-3
    full = BloomFilter(8, 1)
    full._bits[0] = 0xFF
    assert full.estimated_items == math.inf


def test_bits_past_bit_count_are_not_counted() -> None:
    parsed = BloomFilter.from_bytes(b"\x01\xff\x03\x01")  # 3 logical bits, 8 stored
    assert parsed.bits_set == 3
    assert parsed.fill_ratio == 1.0
    assert parsed.set_positions().tolist() == [0, 1, 2]


@settings(max_examples=60, deadline=None)
@given(
    common=paths_strategy,
    only_left=paths_strategy,
    only_right=paths_strategy,
    variant=st.sampled_from(["signed-tail", "unsigned-tail", "both"]),
)
def test_intersection_keeps_every_common_path(
    common: list[str], only_left: list[str], only_right: list[str], variant: str
) -> None:
    left = BloomFilter(512, 4, variant=variant)  # type: ignore[arg-type]
    left.update(common, only_left)
    right = BloomFilter(512, 4, variant=variant)  # type: ignore[arg-type]
    right.update(only_right, common)
    both = left & right
    assert both.contains_batch(common).all()
    assert both <= left and both <= right
    # Over-approximates the common paths' own filter, never under-approximates it.
    exact = BloomFilter(512, 4, variant=variant)  # type: ignore[arg-type]
    exact.update(common)
    assert exact <= both
    # The serialized bits are the bitwise AND of the operands' bits.
    anded = bytes(x & y for x, y in zip(left._bits.tobytes(), right._bits.tobytes(), strict=True))
    assert both.to_bytes() == BloomFilter.from_stored_bits(anded, 512, 4).to_bytes()
    left &= right
    assert left == both and left.variant == variant


def test_intersection_bytes_are_the_bitwise_and() -> None:
    left = BloomFilter.from_bytes(b"\x02\x0f\xf0\x10\x03", variant="signed-tail")
    right = BloomFilter.from_bytes(b"\x01\x3c\x10\x03", variant="signed-tail")  # shorter bits
    assert (left & right).to_bytes() == b"\x01\x0c\x10\x03"
    assert (right & left).to_bytes() == b"\x01\x0c\x10\x03"
    disjoint = BloomFilter.from_bytes(b"\x02\x00\x01\x10\x03", variant="signed-tail")
    assert (right & disjoint).to_bytes() == b"\x00"
    assert not right & disjoint


def test_intersection_rejects_incompatible_filters() -> None:
    base = BloomFilter(512, 4)
    for other in [
        BloomFilter(256, 4),
        BloomFilter(512, 3),
        BloomFilter(512, 4, variant="unsigned-tail"),
        BloomFilter(512, 4, variant="both"),
        BloomFilter(512, 4, charset="latin-1"),
    ]:
        with pytest.raises(ValueError):
            _ = base & other
        with pytest.raises(ValueError):
            base &= other
    with pytest.raises(TypeError):
        _ = base & {"a.b"}  # type: ignore[operator]
    assert base == BloomFilter(512, 4)


def test_comparison_operators() -> None:
    small = BloomFilter(512, 4)
    small.add("root.sg.d1.s1")
    big = small.copy()
    big.add("root.sg.d1.s2")
    assert small <= big and big >= small and small <= small and small >= small
    assert not big <= small and not small >= big
    assert (small <= big) == small.issubset(big) and (big >= small) == big.issuperset(small)
    with pytest.raises(ValueError):
        _ = small <= BloomFilter(256, 4)
    with pytest.raises(ValueError):
        _ = small >= BloomFilter(512, 5)
    with pytest.raises(TypeError):
        _ = small <= {"root.sg.d1.s1"}  # type: ignore[operator]


def test_bool_and_clear() -> None:
    assert not BloomFilter(256, 5)
    built = BloomFilter.for_paths(["root.sg.d1.s1"], variant="both")
    assert built
    built.clear()
    assert not built and built.bits_set == 0 and built.to_bytes() == b"\x00"
    assert "root.sg.d1.s1" not in built
    assert (built.bit_count, built.hash_function_count, built.variant) == (256, 5, "both")
    built.add("root.sg.d1.s2")
    assert "root.sg.d1.s2" in built
    # Bits past bit_count (a foreign writer's) hold no path.
    assert not BloomFilter.from_bytes(b"\x01\xf8\x03\x01")
    parsed = BloomFilter.from_bytes(b"\x01\x01\xff\xff\xff\xff\x07\x05")
    parsed.clear()  # a huge filter read from a file keeps its stored length
    assert not parsed and len(parsed._bits) == 1


def test_update_takes_filters_and_iterables() -> None:
    other = BloomFilter(512, 4, variant="unsigned-tail")
    other.add("root.sg.设备.s1")
    target = BloomFilter(512, 4)
    target.update(["root.sg.d1.s1"], (p for p in ["root.sg.d1.s2"]), other)
    assert target.variant == "both"  # as with |=
    assert target.contains_batch(["root.sg.d1.s1", "root.sg.d1.s2", "root.sg.设备.s1"]).all()
    assert target >= other
    target.update()
    with pytest.raises(ValueError):
        target.update(BloomFilter(256, 4))
