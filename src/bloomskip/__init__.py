"""bloomskip: Bloom-filter data skipping, bit-compatible with Apache TsFile and ClickHouse.

The hash and bit kernels are in :mod:`bloomskip.hashing` and :mod:`bloomskip.bits`, the formats
in :mod:`bloomskip.tsfile` and :mod:`bloomskip.clickhouse`, and the Parquet/Arrow dataset index in
:class:`bloomskip.Dataset`.
"""

from bloomskip.errors import BloomskipError, FormatError, StaleSourceError

__version__ = "0.1.0"

__all__ = ["BloomskipError", "FormatError", "StaleSourceError", "__version__"]
