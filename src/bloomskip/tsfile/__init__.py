"""Apache TsFile's Bloom filter, bit for bit, and the .tsfile metadata around it.

Public names are imported lazily so that ``bloomskip tsfile --help`` stays cheap.

Example:
    >>> from bloomskip.tsfile import BloomFilter, hash32, tree_series_path
    >>> hash32(tree_series_path("root.sg.d", "s1").encode(), 5)
    -1267668613
    >>> f = BloomFilter.sized(10)
    >>> f.add("root.sg.d.s1")
    >>> "root.sg.d.s1" in f
    True
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "hash32": "hash",
    "hash32_batch": "hash",
    "variants_differ": "hash",
    "signed_tail_flags": "hash",
    "SEEDS": "hash",
    "HASH_VARIANTS": "hash",
    "HashVariant": "hash",
    "split_tree_device": "paths",
    "split_tree_nodes": "paths",
    "group_tree_nodes": "paths",
    "cpp_tree_query_series": "paths",
    "table_device": "paths",
    "null_tag_forms": "paths",
    "device_path": "paths",
    "series_path": "paths",
    "tree_series_path": "paths",
    "table_series_path": "paths",
    "encode_path": "paths",
    "encode_paths": "paths",
    "BloomFilter": "filter",
    "PathProbe": "filter",
    "decode_filter": "filter",
    "writer_sizing": "filter",
    "DEFAULT_ERROR_RATE": "filter",
    "TsFileReader": "reader",
    "TsFileMetadata": "reader",
    "TableSchema": "reader",
    "ColumnSchema": "reader",
    "IndexNode": "reader",
    "NodeType": "reader",
    "Series": "reader",
    "LookupResult": "reader",
    "FilterAnalysis": "analysis",
    "analyze_filter": "analysis",
    "query_misses": "analysis",
    "READER_KINDS": "analysis",
    "READERS": "analysis",
    "find_series": "find",
    "iter_tsfiles": "find",
    "FindResult": "find",
    "repair_filter": "repair",
    "RepairResult": "repair",
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
