"""The granules of a ``parquet_bloom_filter`` dataset index: one Parquet filter per row group.

A granule is one row group's split-block Bloom filter, as the file stores it (or as bloomskip
computed it for a chunk without one), prefixed with how that file stores the column, since the
bytes hashed depend on the physical type (a decimal is INT32 in a DuckDB file and
FIXED_LEN_BYTE_ARRAY in a pyarrow one):

==========  ==================================================================================
bytes       field
==========  ==================================================================================
1           physical type: its position in :data:`~bloomskip.parquet.values.PHYSICAL_TYPES`
            (1 INT32 .. 7 FIXED_LEN_BYTE_ARRAY); 0: no filter (the row group is always kept,
            nothing follows)
4           ``type_length`` of a FIXED_LEN_BYTE_ARRAY, little-endian (0 otherwise)
n           the filter as Parquet stores it: ``BloomFilterHeader`` (Thrift compact), bitset
==========  ==================================================================================

The filters differ in size from row group to row group (and the block a value lands in depends
on the size), so these granules are stored plainly, never bit-sliced. A probe hashes the
literals once per physical type present and tests every granule at once in numpy.

Example:
    >>> import pyarrow as pa
    >>> from bloomskip.clickhouse.ddl import parse_index_definition
    >>> from bloomskip.parquet.filter import SplitBlockBloomFilter
    >>> d = parse_index_definition("k TYPE parquet_bloom_filter")
    >>> f = SplitBlockBloomFilter(64, value_type=pa.int64())
    >>> f.update([1, 2])
    >>> g = ParquetBloomGranules.from_bytes(d, encode_granule(f) + encode_granule(None), 2)
    >>> g.literals_present(0, pa.array([2, 3]), "Int64").tolist()
    [[True, False], [True, True]]
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from bloomskip.clickhouse.granule import Granules
from bloomskip.errors import FormatError
from bloomskip.parquet.filter import SplitBlockBloomFilter, check_num_bytes
from bloomskip.parquet.thrift import parse_bloom_filter_header
from bloomskip.parquet.values import PHYSICAL_TYPES, ParquetValueType

if TYPE_CHECKING:
    import pyarrow as pa

    from bloomskip.clickhouse.ddl import IndexDefinition

__all__ = ["ParquetBloomGranules", "encode_granule", "probe_arrow_type"]

_PREFIX = struct.Struct("<BI")  # physical type, type_length
_PROBE_BATCH = 1 << 22  # bit positions tested per bits.test_bits call
# DateTime64 precision -> the Arrow unit its ticks are in.
_TICK_UNITS = {0: "s", 3: "ms", 6: "us", 9: "ns"}
# The split-block filter's salts (parquet-format BloomFilter.md).
_SALTS = np.array(
    [
        0x47B6137B,
        0x44974D91,
        0x8824AD5B,
        0xA2B7289D,
        0x705495C7,
        0x2DF1424B,
        0x9EFC4947,
        0x5C6BFB31,
    ],
    np.uint64,
)
# ClickHouse base types whose converted constants are the column's values exactly (the Arrow
# type they are probed as); other types' atoms keep every row group.
_PROBE_TYPES = {
    "Int8": "int8",
    "Int16": "int16",
    "Int32": "int32",
    "Int64": "int64",
    "UInt8": "uint8",
    "UInt16": "uint16",
    "UInt32": "uint32",
    "UInt64": "uint64",
    "Float32": "float32",
    "Float64": "float64",
    "String": "binary",
}


def encode_granule(bloom: SplitBlockBloomFilter | None) -> bytes:
    """One granule's bytes: the filter's physical type, then the filter as Parquet stores it.

    Args:
        bloom: The row group's filter; None when it has none (it is then always kept).

    Returns:
        The granule.

    Example:
        >>> len(encode_granule(None)), len(encode_granule(SplitBlockBloomFilter(32)))
        (1, 52)
    """
    if bloom is None:
        return b"\x00"
    value_type = bloom.value_type
    code = PHYSICAL_TYPES.index(value_type.physical_type)
    return _PREFIX.pack(code, value_type.type_length or 0) + bloom.to_bytes()


def probe_arrow_type(clickhouse_type: str):  # noqa: ANN201 - a pyarrow type or None
    """The Arrow type a constant converted for ``clickhouse_type`` is probed as, or None when
    the index cannot probe that type (its atoms then keep every row group).

    Dates are days (``date32``); ``DateTime`` seconds and ``DateTime64(p)`` ticks of 10^-p s
    (``timestamp`` of that unit; p other than 0, 3, 6, 9 is not probed): the Arrow type of the
    dataset's column the ClickHouse type was taken from (``clickhouse_type_for``).

    Example:
        >>> str(probe_arrow_type("LowCardinality(Nullable(String))")), probe_arrow_type("UUID")
        ('binary', None)
        >>> str(probe_arrow_type("DateTime64(3, 'UTC')"))
        'timestamp[ms]'
    """
    import pyarrow as pa

    from bloomskip.clickhouse.types import parse_clickhouse_type

    parsed = parse_clickhouse_type(clickhouse_type)
    if parsed.name == "Array":
        parsed = parsed.nested
    base = parsed.base()
    if base.name == "FixedString":
        return pa.binary(base.arguments[0])
    if base.name in ("Date", "Date32"):
        return pa.date32()
    if base.name == "DateTime":
        return pa.timestamp("s")
    if base.name == "DateTime64":
        unit = _TICK_UNITS.get(int(base.arguments[0]))
        return None if unit is None else pa.timestamp(unit)
    name = _PROBE_TYPES.get(base.name)
    return None if name is None else getattr(pa, name)()


def _as_probe_type(literals: pa.Array, arrow_type: pa.DataType) -> pa.Array:
    """The converted constants as values of ``arrow_type``: integers and floats cast (a value
    out of the type's range raises ArrowInvalid), dates and times from their ticks."""
    import pyarrow as pa

    if pa.types.is_date32(arrow_type):
        return literals.cast(pa.int32()).cast(arrow_type)
    if pa.types.is_timestamp(arrow_type):
        return literals.cast(pa.int64()).cast(arrow_type)
    return literals.cast(arrow_type)


class ParquetBloomGranules(Granules):
    """The granules of a ``parquet_bloom_filter`` index (see the module's layout).

    Args:
        definition: The index definition.
        payload: The granules back to back.
        granule_offsets: Granule j is ``payload[offsets[j]:offsets[j + 1]]`` (``int64[G + 1]``).
        bitset_starts: Where each granule's bitset starts in ``payload`` (``int64[G]``).
        bitset_sizes: Its bytes; 0 for a granule without a filter (``int64[G]``).
        physical: Each granule's physical-type code (``uint8[G]``).
        type_lengths: Each granule's ``type_length`` (``int64[G]``).
        index_column_types: The ClickHouse type of the index column, or None.
    """

    def __init__(
        self,
        definition: IndexDefinition,
        payload: bytes,
        granule_offsets: np.ndarray,
        bitset_starts: np.ndarray,
        bitset_sizes: np.ndarray,
        physical: np.ndarray,
        type_lengths: np.ndarray,
        index_column_types: Sequence[str] | None = None,
    ) -> None:
        super().__init__(definition, index_column_types)
        self._payload = payload
        self._granule_offsets = granule_offsets
        self._starts = bitset_starts
        self._sizes = bitset_sizes
        self._physical = physical
        self._type_lengths = type_lengths

    @classmethod
    def from_bytes(
        cls,
        definition: IndexDefinition,
        data: bytes,
        count: int,
        index_column_types: Sequence[str] | None = None,
        source: str | None = None,
    ) -> ParquetBloomGranules:
        """Read ``count`` granules.

        Raises:
            FormatError: A truncated granule, an unknown physical type, a bad filter header,
                or trailing bytes (the error names the granule, field and offset).
        """
        offsets = np.empty(count + 1, np.int64)
        starts = np.zeros(count, np.int64)
        sizes = np.zeros(count, np.int64)
        physical = np.zeros(count, np.uint8)
        lengths = np.zeros(count, np.int64)
        view = memoryview(data)
        position, end = 0, len(data)
        # One step per granule (not per value): each granule's size is in its own header.
        for j in range(count):
            offsets[j] = position
            if position >= end:
                raise FormatError(
                    f"granule {j} of {count}: the stream ends before it",
                    field="physical_type", offset=position, source=source,
                )  # fmt: skip
            code = data[position]
            if code == 0:
                position += 1
                continue
            if not 1 <= code < len(PHYSICAL_TYPES) or end - position < _PREFIX.size:
                raise FormatError(
                    f"granule {j} of {count}: physical type {code} unknown or truncated",
                    field="physical_type", offset=position, source=source,
                )  # fmt: skip
            _, lengths[j] = _PREFIX.unpack_from(data, position)
            position += _PREFIX.size
            num_bytes, header = parse_bloom_filter_header(
                view[position:], offset=position, source=source
            )
            check_num_bytes(num_bytes, position, source)
            if num_bytes < 32 or num_bytes % 32:
                raise FormatError(
                    f"granule {j} of {count}: a bitset of {num_bytes} bytes, not a positive "
                    "multiple of 32",
                    field="BloomFilterHeader.numBytes", offset=position, source=source,
                )  # fmt: skip
            if num_bytes > end - position - header:
                raise FormatError(
                    f"granule {j} of {count}: a bitset of {num_bytes} bytes, "
                    f"{end - position - header} remain",
                    field="bitset", offset=position + header, source=source,
                )  # fmt: skip
            physical[j], starts[j], sizes[j] = code, position + header, num_bytes
            position += header + num_bytes
        offsets[count] = position
        if position != end:
            raise FormatError(
                f"{end - position} bytes follow the last of {count} granules",
                field="granules", offset=position, source=source,
            )  # fmt: skip
        return cls(definition, data, offsets, starts, sizes, physical, lengths, index_column_types)

    def __len__(self) -> int:
        return len(self._sizes)

    def filter_sizes(self) -> np.ndarray:
        return self._sizes

    def to_bytes(self) -> bytes:
        return bytes(self._payload)

    def _granule_payload(self, j: int) -> bytes:
        return bytes(self._payload[self._granule_offsets[j] : self._granule_offsets[j + 1]])

    def column_filter_spans(self, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._check_column(c)
        return np.frombuffer(self._payload, np.uint8), self._starts, self._sizes

    def _gather_column_filters(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        raw = memoryview(self._payload)
        flat = b"".join(
            raw[start : start + size]
            for start, size in zip(self._starts.tolist(), self._sizes.tolist(), strict=True)
        )
        offsets = np.concatenate(([0], np.cumsum(self._sizes))).astype(np.int64)
        return np.frombuffer(flat, np.uint8), offsets

    def literals_present(
        self,
        column: int,
        literals: pa.Array,
        clickhouse_type: str,
        granules: np.ndarray | None = None,
    ) -> np.ndarray:
        """``out[g, i]``: literal i may be in granule g (DuckDB's ``parquet_bloom_probe``).

        A granule without a filter, a literal that is no value of the column's type, and a
        type the index cannot probe keep everything; a null literal matches nothing. Floats
        probe both zeros (SQL's ``0.0 = -0.0``; the filters hash raw bits).

        Args:
            column: Index column number (0).
            literals: The constants, as converted for the column's ClickHouse type.
            clickhouse_type: That type (see :func:`probe_arrow_type`).
            granules: Granule numbers to probe (all when None).

        Returns:
            A ``(granules, literals)`` bool array.
        """
        import pyarrow as pa

        from bloomskip.errors import UnsupportedTypeError

        self._check_column(column)
        chosen = np.arange(len(self)) if granules is None else np.asarray(granules, np.int64)
        result = np.ones((len(chosen), len(literals)), bool)
        arrow_type = probe_arrow_type(clickhouse_type)
        if arrow_type is None or not len(literals) or not len(chosen):
            return result
        valid = np.asarray(literals.is_valid())
        result[:, ~valid] = False
        try:
            values = _as_probe_type(literals, arrow_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return result  # no value of the column: the engine's comparison decides
        # How writers store the type (seconds as milliseconds, as Parquet has no seconds):
        # the probe converts to it before encoding, as the writer converted the column.
        stored_as = ParquetValueType.for_arrow(arrow_type).arrow_type
        sizes = self._sizes[chosen]
        keys = np.stack([self._physical[chosen], self._type_lengths[chosen]], axis=1)
        for code, length in np.unique(keys[sizes > 0], axis=0).tolist():
            rows = np.flatnonzero((keys[:, 0] == code) & (keys[:, 1] == length) & (sizes > 0))
            value_type = ParquetValueType(PHYSICAL_TYPES[code], stored_as, length or None)
            try:
                hashes = value_type.hash(values.filter(pa.array(valid)))
            except UnsupportedTypeError:
                continue  # not hashable as this file stores the column: kept
            present = self._test(chosen[rows], hashes)
            if value_type.physical_type in ("FLOAT", "DOUBLE"):
                zeros = np.asarray(values.filter(pa.array(valid)).to_numpy(False) == 0)
                if zeros.any():
                    both = value_type.hash(pa.array([0.0, -0.0], arrow_type))
                    present[:, zeros] = self._test(chosen[rows], both).any(axis=1)[:, None]
            result[np.ix_(rows, np.flatnonzero(valid))] = present
        return result

    def _test(self, granules: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """``out[g, i]``: all eight bits of hash i are set in granule ``granules[g]``'s block."""
        hashes = np.asarray(hashes, np.uint64)
        # Chunks of granules bound the temporaries (8 positions per granule and hash).
        step = max(1, _PROBE_BATCH // max(1, 8 * len(hashes)))
        parts = [
            self._test_chunk(granules[i : i + step], hashes) for i in range(0, len(granules), step)
        ]
        return np.concatenate(parts) if parts else np.ones((0, len(hashes)), bool)

    def _test_chunk(self, granules: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        from bloomskip import bits

        blocks = (self._sizes[granules] // 32).astype(np.uint64)
        # Block: ((h >> 32) * blocks) >> 32; bit of word i: ((low32 * salt[i]) mod 2^32) >> 27.
        block = ((hashes[None, :] >> np.uint64(32)) * blocks[:, None]) >> np.uint64(32)
        low = hashes & np.uint64(0xFFFFFFFF)
        bit = ((low[:, None] * _SALTS[None, :]) & np.uint64(0xFFFFFFFF)) >> np.uint64(27)
        word_bits = np.arange(8, dtype=np.uint64) * np.uint64(32)
        first = self._starts[granules].astype(np.uint64) * np.uint64(8)
        base = first[:, None] + block * np.uint64(256)  # (granules, hashes)
        positions = base[:, :, None] + word_bits[None, None, :] + bit[None, :, :]
        flat = np.frombuffer(self._payload, np.uint8)
        present = bits.test_bits(flat, positions.reshape(-1)).reshape(positions.shape)
        return present.all(axis=2)

    def _contains(self, j: int, value: object, column: int) -> bool:
        import pyarrow as pa

        if self.index_column_types is None:
            raise ValueError("the index column type is unknown; pass column_types")
        literal = value if isinstance(value, pa.Array) else pa.array([value])
        found = self.literals_present(column, literal, self.index_column_types[column], [j])
        return bool(found.all())
