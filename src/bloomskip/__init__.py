"""bloomskip: Bloom-filter data skipping, bit-compatible with Apache TsFile and ClickHouse.

The hash and bit kernels are in :mod:`bloomskip.hashing` and :mod:`bloomskip.bits`, the formats
in :mod:`bloomskip.tsfile` and :mod:`bloomskip.clickhouse`, and the Parquet/Arrow dataset index in
:class:`bloomskip.Dataset`.

Example:
    >>> import bloomskip
    >>> ds = bloomskip.Dataset("logs/")                       # doctest: +SKIP
    >>> ds.build_index(["user_id TYPE bloom_filter(0.01)"])   # doctest: +SKIP
    >>> ds.query("user_id = 42")                              # doctest: +SKIP
"""

from typing import TYPE_CHECKING

from bloomskip.errors import (
    BloomskipError,
    BloomskipWarning,
    CommitConflictError,
    ConditionError,
    FormatError,
    IndexDefinitionError,
    PartCommandError,
    PartError,
    SimulateError,
    SQLSyntaxError,
    StaleSourceError,
    StorageError,
    TruncatedError,
    UnsupportedPredicateError,
    UnsupportedTypeError,
)

if TYPE_CHECKING:
    from bloomskip.advise import advise
    from bloomskip.dataset import Dataset
    from bloomskip.dataset.engines.duckdb_sql import sql

__version__ = "0.1.0"

__all__ = [
    "BloomskipError",
    "BloomskipWarning",
    "CommitConflictError",
    "ConditionError",
    "Dataset",
    "FormatError",
    "IndexDefinitionError",
    "PartCommandError",
    "PartError",
    "SQLSyntaxError",
    "SimulateError",
    "StaleSourceError",
    "StorageError",
    "TruncatedError",
    "UnsupportedPredicateError",
    "UnsupportedTypeError",
    "__version__",
    "advise",
    "sql",
]


def __getattr__(name: str):
    # Dataset pulls in pyarrow.dataset and the ClickHouse engine; load them on first use so that
    # `import bloomskip` (and every CLI start) stays fast.
    if name == "Dataset":
        from bloomskip.dataset import Dataset

        return Dataset
    if name == "advise":
        from bloomskip.advise import advise

        return advise
    if name == "sql":
        from bloomskip.dataset.engines.duckdb_sql import sql

        return sql
    raise AttributeError(f"module 'bloomskip' has no attribute {name!r}")
