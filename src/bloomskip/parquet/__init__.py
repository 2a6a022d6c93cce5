"""Parquet's own split-block Bloom filters (SBBF), bit for bit with parquet-format's
BloomFilter.md and the writers (arrow C++ / pyarrow, parquet-mr, arrow-rs, DuckDB): read them
from a file's footer and byte ranges, build them, probe them, verify them (docs/parquet-bloom.md).

Public names are imported lazily so that ``bloomskip parquet --help`` stays cheap.

Example:
    >>> from bloomskip.parquet import SplitBlockBloomFilter
    >>> f = SplitBlockBloomFilter.sized(100)
    >>> f.update(["a", "b"])
    >>> "a" in f, "zz" in f
    (True, False)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SplitBlockBloomFilter": "filter",
    "optimal_num_bytes": "filter",
    "ParquetValueType": "values",
    "read_bloom_filters": "reader",
    "chunk_filters": "reader",
    "ChunkFilter": "reader",
    "verify_file": "verify",
    "inspect_file": "verify",
    "harvest_filters": "harvest",
    "row_groups_passing": "harvest",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module_name}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
