"""Index granules as objects: ``len(index)``, ``index[j]``, ``value in granule``.

The granules are read from the index files chdb wrote, and ``value in granule`` is checked
against ClickHouse's own pruning: over the granules, it is true exactly as often as
``EXPLAIN indexes = 1`` keeps granules for ``column = value``.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from bloomskip.clickhouse.condition import compile_condition
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.granule import BloomFilterGranules, Granule, TextGranules
from bloomskip.clickhouse.index import SkipIndex

_INDEXES = {
    "bv": "INDEX bv v TYPE bloom_filter(0.05) GRANULARITY 1",
    "bs": "INDEX bs s TYPE bloom_filter(0.05) GRANULARITY 1",
    "bsa": "INDEX bsa sa TYPE bloom_filter(0.05) GRANULARITY 1",
    "tk": "INDEX tk s TYPE tokenbf_v1(256, 2, 0) GRANULARITY 1",
    "ng": "INDEX ng s TYPE ngrambf_v1(3, 256, 2, 0) GRANULARITY 1",
    "tsa": "INDEX tsa sa TYPE tokenbf_v1(256, 2, 0) GRANULARITY 1",
}


@pytest.fixture(scope="module")
def part(clickhouse):
    return clickhouse.create_part(
        {"v": "UInt32", "s": "String", "sa": "Array(String)"},
        list(_INDEXES.values()),
        "SELECT number % 300, concat('w', toString(number % 53), ' x', toString(number % 71)), "
        "[concat('a', toString(number % 37)), 'b'] FROM numbers(2000)",
    )


def _theirs(part, name: str) -> SkipIndex:
    """The index as ClickHouse wrote it."""
    return SkipIndex.from_bytes(
        part.indexes[name], part.index_stream(name), part.granule_rows, part.columns
    )


def _granule_values(part, column: str) -> list[list]:
    values = part.data.column(column).to_pylist()
    bounds = np.concatenate(([0], np.cumsum(part.granule_rows)))
    return [values[bounds[j] : bounds[j + 1]] for j in range(len(bounds) - 1)]


@pytest.mark.parametrize(
    ("name", "column", "probes"),
    [
        ("bv", "v", [0, 17, 299, 300, 4000]),
        ("bs", "s", ["w1 x1", "w52 x70", "w3 x5", "nothing"]),
        ("tk", "s", ["w1 x1", "w52 x70", "w3 x5", "nothing"]),
        ("ng", "s", ["w1 x1", "w52 x70", "w3 x5", "nothing"]),
    ],
)
def test_value_in_granule_keeps_what_clickhouse_keeps(part, name, column, probes) -> None:
    index = _theirs(part, name)
    assert len(index) == len(part.granule_rows) == index.index_granule_count
    for j, rows in enumerate(_granule_values(part, column)):
        granule = index[j]
        assert isinstance(granule, Granule)
        assert all(value in granule for value in set(rows)), j  # no false negative
    for value in probes:
        literal = value if isinstance(value, int) else f"'{value}'"
        kept, _ = part.explain_granules(f"{column} = {literal}", name)
        assert sum(value in granule for granule in index) == kept, (name, value)


@pytest.mark.parametrize(("name", "function"), [("bsa", "has"), ("tsa", "has")])
def test_array_element_in_granule(part, name, function) -> None:
    index = _theirs(part, name)
    for j, rows in enumerate(_granule_values(part, "sa")):
        assert all(element in index[j] for row in rows for element in row), j
    for element in ["a0", "a36", "b", "zz"]:
        kept, _ = part.explain_granules(f"{function}(sa, '{element}')", name)
        assert sum(element in granule for granule in index) == kept, (name, element)


def test_granules_are_a_sequence(part) -> None:
    index = _theirs(part, "bv")
    assert isinstance(index.granules, BloomFilterGranules)
    assert isinstance(_theirs(part, "tk").granules, TextGranules)
    assert index[-1].number == len(index) - 1
    assert [granule.number for granule in index] == list(range(len(index)))
    assert index[3].to_bytes() == index.granule_bytes(3)
    assert b"".join(granule.to_bytes() for granule in index) == index.to_bytes()
    with pytest.raises(IndexError):
        index[len(index)]
    with pytest.raises(TypeError):
        index[0:2]
    with pytest.raises(TypeError, match="one granule"):
        5 in index  # noqa: B015 - the error is the point
    with pytest.raises(TypeError, match="one granule"):
        5 in index.granules  # noqa: B015


def test_several_columns_and_unknown_types() -> None:
    definition = parse_index_definition("INDEX i (v, s) TYPE bloom_filter(0.01) GRANULARITY 1")
    table = pa.table({"v": pa.array([1, 2, 3, 4], pa.uint32()), "s": ["a", "b", "c", "d"]})
    index = SkipIndex.build(definition, table, [2, 2])
    with pytest.raises(ValueError, match="granule.contains"):
        1 in index[0]  # noqa: B015
    assert index[0].contains(2, column=0) and index[1].contains("d", column=1)
    assert not index[0].contains(4, column=0)
    with pytest.raises(IndexError):
        index[0].contains(1, column=2)
    unknown = SkipIndex.from_bytes(definition, index.to_bytes(), [2, 2])
    with pytest.raises(ValueError, match="column types are unknown"):
        unknown[0].contains(1)


def test_select_lives_on_the_condition(part) -> None:
    index = _theirs(part, "bv")
    condition = compile_condition("v IN (5, 250)", index.definition, part.columns)
    selected = condition.select(index)
    assert selected.tolist() == index.select("v IN (5, 250)").tolist()
    assert selected.tolist() == np.flatnonzero(condition.may_match(index.granules)).tolist()
    wider = parse_index_definition("INDEX g v TYPE bloom_filter(0.05) GRANULARITY 3")
    grouped = SkipIndex.build(wider, part.data, part.granule_rows, part.columns)
    mask = compile_condition("v = 5", wider, part.columns).may_match(grouped)
    # Index granule j covers data granules [3j, 3j + 3): selection repeats its decision.
    expected = np.flatnonzero(np.repeat(mask, 3)[: len(part.granule_rows)])
    assert compile_condition("v = 5", wider, part.columns).select(grouped).tolist() == (
        expected.tolist()
    )


def test_condition_rejects_granules_of_the_other_kind(part) -> None:
    condition = compile_condition("s = 'w1 x1'", part.indexes["bs"], part.columns)
    with pytest.raises(ValueError, match="bloom_filter condition cannot probe TextGranules"):
        condition.may_match(_theirs(part, "tk"))


def test_condition_does_not_import_the_index() -> None:
    code = (
        "import sys, bloomskip.clickhouse.condition; "
        "print('bloomskip.clickhouse.index' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
