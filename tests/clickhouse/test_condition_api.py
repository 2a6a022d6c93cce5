"""compile_condition's interface: inputs it accepts, errors it raises, masks it returns.

The decisions themselves are checked against ClickHouse in test_condition_explain.py; here the
rows are small enough to know the answer: a granule whose rows hold the value must be kept, and
with a large filter a granule without it is skipped.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from bloomskip.clickhouse.condition import ConditionError, compile_condition
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex

TYPES = {"v": "UInt32", "s": "String"}


@pytest.fixture(scope="module")
def table() -> pa.Table:
    values = np.arange(1000, dtype=np.uint32)
    return pa.table({"v": values, "s": [f"word{i} common" for i in range(1000)]})


def _index(table: pa.Table, clause: str) -> SkipIndex:
    return SkipIndex.build(parse_index_definition(clause), table, [100] * 10, TYPES)


def test_unparsable_predicate_raises_condition_error() -> None:
    definition = parse_index_definition("v TYPE bloom_filter")
    with pytest.raises(ConditionError, match="cannot parse"):
        compile_condition("v = = 1", definition, TYPES)
    assert issubclass(ConditionError, ValueError)


def test_column_types_per_index_expression(table: pa.Table) -> None:
    definition = parse_index_definition("v TYPE bloom_filter(0.001)")
    index = _index(table, "v TYPE bloom_filter(0.001)")
    by_column = compile_condition("v = 250", definition, TYPES).may_match(index)
    by_position = compile_condition("v = 250", definition, ["UInt32"]).may_match(index)
    assert by_column.tolist() == by_position.tolist()
    assert by_column[2] and by_column.sum() <= 2
    with pytest.raises(ConditionError, match="2 column types"):
        compile_condition("v = 1", definition, ["UInt32", "String"])


def test_masks_have_one_decision_per_index_granule(table: pa.Table) -> None:
    index = _index(table, "v TYPE bloom_filter(0.001) GRANULARITY 3")
    definition = index.definition
    assert index.index_granule_count == 4
    mask = compile_condition("v IN (5, 950)", definition, TYPES).may_match(index)
    assert mask.dtype == bool and mask.shape == (4,)
    assert mask[0] and mask[3]
    # Data granules are what select() counts: index granule 3 covers only data granule 9.
    assert set(index.select("v IN (5, 950)").tolist()) >= {0, 9}


def test_constants_and_unknown_predicates(table: pa.Table) -> None:
    index = _index(table, "v TYPE bloom_filter")
    definition = index.definition
    assert not compile_condition("0", definition, TYPES).may_match(index).any()
    assert compile_condition("1", definition, TYPES).may_match(index).all()
    assert not compile_condition("NOT 1", definition, TYPES).may_match(index).any()
    other = compile_condition("s = 'word5 common' AND v + 1 = 3", definition, TYPES)
    assert not other.useful and other.atom_count == 0
    assert other.may_match(index).all()


def test_negations_never_prune(table: pa.Table) -> None:
    index = _index(table, "s TYPE tokenbf_v1(4096, 3, 0)")
    definition = index.definition
    for where in ("s != 'word5 common'", "s NOT IN ('word5 common')", "s NOT LIKE '%word5 %'"):
        assert compile_condition(where, definition, TYPES).may_match(index).all(), where
    # Negating a negation is a positive atom again: it prunes.
    kept = compile_condition("NOT (s NOT LIKE 'word5 %')", definition, TYPES).may_match(index)
    assert kept[0] and kept.sum() < 10


def test_large_in_list(table: pa.Table) -> None:
    index = _index(table, "v TYPE bloom_filter(0.001)")
    values = ", ".join(str(v) for v in range(100_000, 110_000))
    mask = compile_condition(f"v IN (5, {values})", index.definition, TYPES).may_match(index)
    assert mask[0]


def test_text_index_needs_known_column_types(table: pa.Table) -> None:
    definition = parse_index_definition("s TYPE tokenbf_v1(256, 2, 0)")
    with pytest.raises(ValueError, match="s"):
        compile_condition("s = 'a'", definition, {"v": "UInt32"})
