"""The ``.idx`` granules of bloom_filter / ngrambf_v1 / tokenbf_v1 indexes (decompressed stream).

The first byte chooses an index of a real part (definition, column types, granule rows, from
make_seeds.py); the rest is its decompressed stream. When it decodes, it serializes back to the
same bytes, and a predicate selects a subset of its granules with every step of the condition
path (compile, evaluate) succeeding or raising a bloomskip error.
"""

from __future__ import annotations

import json

import numpy as np
from common import main, require_work, selector

from bloomskip.clickhouse.condition import compile_condition
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex

CATALOGUE = json.loads((require_work("granules") / "catalogue.json").read_text())
INDEXES = [
    (parse_index_definition(entry["definition"]), entry["column_types"],
     np.array(entry["granule_rows"], np.int64), entry["predicate"])
    for entry in CATALOGUE
]  # fmt: skip


def test_one_input(data: bytes) -> None:
    choice, payload = selector(data, len(INDEXES))
    definition, column_types, granule_rows, predicate = INDEXES[choice]
    index = SkipIndex.from_bytes(definition, payload, granule_rows, column_types, "fuzz.idx")
    assert index.to_bytes() == payload
    index.granule_statistics()
    condition = compile_condition(predicate, definition, column_types)
    selected = condition.may_match(index)
    assert selected.dtype == bool and len(selected) == index.index_granule_count


if __name__ == "__main__":
    main(test_one_input)
