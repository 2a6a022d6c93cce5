"""What a Parquet Bloom filter hashes: a value's plain encoding under its column's physical type.

parquet-format's BloomFilter.md, and every writer (parquet-mr, arrow C++, arrow-rs, DuckDB), hash
the PLAIN encoding of the physical value with XXH64, seed 0:

==========================  ===============================================================
physical type               bytes hashed
==========================  ===============================================================
INT32 / INT64               4 / 8 bytes little-endian (dates, times, timestamps, small
                            decimals and unsigned integers as their stored integer)
FLOAT / DOUBLE              4 / 8 bytes IEEE 754 little-endian: the raw bits, so ``-0.0``
                            and ``0.0`` (and NaNs of different payloads) hash differently
INT96                       12 bytes: nanoseconds of the day (int64), then the Julian day
                            (int32)
BYTE_ARRAY                  the bytes themselves, without the plain encoding's length prefix
FIXED_LEN_BYTE_ARRAY        the ``type_length`` bytes (decimals big-endian two's complement)
BOOLEAN                     never: Parquet defines no Bloom filter for it
==========================  ===============================================================

A value is first read as Arrow reads the column (:attr:`ParquetValueType.arrow_type`: the unit of
a timestamp, the precision and scale of a decimal), so a probe for ``2024-01-01`` in a
``timestamp[ms]`` column hashes the milliseconds the writer stored.

Example:
    >>> import pyarrow as pa
    >>> t = ParquetValueType.for_arrow(pa.int32())
    >>> t.physical_type, hex(int(t.hash([7])[0]))
    ('INT32', '0xb7ca480e9b960d0e')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from bloomskip import _native
from bloomskip._batch import BatchView, arrow_bits, batch_view
from bloomskip.errors import UnsupportedTypeError

__all__ = ["PHYSICAL_TYPES", "ParquetValueType", "decimal_byte_width"]

#: The physical types of parquet-format (Type in parquet.thrift), in their Thrift order.
PHYSICAL_TYPES = (
    "BOOLEAN",
    "INT32",
    "INT64",
    "INT96",
    "FLOAT",
    "DOUBLE",
    "BYTE_ARRAY",
    "FIXED_LEN_BYTE_ARRAY",
)

_JULIAN_UNIX_EPOCH = 2_440_588  # the Julian day number of 1970-01-01
_NANOS_PER_DAY = 86_400 * 10**9


def decimal_byte_width(precision: int) -> int:
    """The fewest bytes whose two's complement holds every unscaled value of ``precision``
    digits: the FIXED_LEN_BYTE_ARRAY length arrow C++ (pyarrow) and parquet-mr write.

    Example:
        >>> decimal_byte_width(9), decimal_byte_width(38)
        (4, 16)
    """
    width = 1
    while 1 << (8 * width - 1) < 10**precision:
        width += 1
    return width


@dataclass(frozen=True)
class ParquetValueType:
    """How the values of one Parquet column are stored, hence hashed.

    Args:
        physical_type: One of :data:`PHYSICAL_TYPES` (BOOLEAN cannot be hashed).
        arrow_type: The Arrow type the column is read as; values are cast to it before they
            are encoded.
        type_length: The length of a FIXED_LEN_BYTE_ARRAY, else None.

    Example:
        >>> import pyarrow as pa
        >>> ParquetValueType.for_arrow(pa.decimal128(20, 2)).type_length
        9
    """

    physical_type: str
    arrow_type: pa.DataType
    type_length: int | None = None

    @classmethod
    def for_arrow(cls, arrow_type: pa.DataType) -> ParquetValueType:
        """The physical type pyarrow's writer gives a column of ``arrow_type`` (with its
        defaults: decimals as FIXED_LEN_BYTE_ARRAY, seconds stored as milliseconds, date64
        as a date).

        Raises:
            UnsupportedTypeError: Booleans, nested and other types without a Bloom filter.

        Example:
            >>> import pyarrow as pa
            >>> ParquetValueType.for_arrow(pa.timestamp("s")).arrow_type
            TimestampType(timestamp[ms])
        """
        t = arrow_type
        if pa.types.is_dictionary(t):
            return cls.for_arrow(t.value_type)
        if pa.types.is_timestamp(t) and t.unit == "s":
            return cls("INT64", pa.timestamp("ms", t.tz))
        if pa.types.is_date64(t):
            return cls("INT32", pa.date32())
        if pa.types.is_integer(t) and t.bit_width <= 32 or pa.types.is_date32(t):
            return cls("INT32", t)
        if pa.types.is_time32(t):
            return cls("INT32", t)
        if pa.types.is_integer(t) or pa.types.is_timestamp(t) or pa.types.is_time64(t):
            return cls("INT64", t)
        if pa.types.is_duration(t):
            return cls("INT64", t)
        if pa.types.is_float32(t):
            return cls("FLOAT", t)
        if pa.types.is_float64(t):
            return cls("DOUBLE", t)
        if pa.types.is_float16(t):
            return cls("FIXED_LEN_BYTE_ARRAY", t, 2)
        if pa.types.is_decimal(t):
            return cls("FIXED_LEN_BYTE_ARRAY", t, decimal_byte_width(t.precision))
        if pa.types.is_fixed_size_binary(t):
            return cls("FIXED_LEN_BYTE_ARRAY", t, t.byte_width)
        if _is_bytes(t):
            return cls("BYTE_ARRAY", t)
        raise UnsupportedTypeError(f"Parquet has no Bloom filter for a column of type {t}")

    def encode(self, values: Any) -> tuple[BatchView, np.ndarray | None]:
        """The plain encodings of the non-null ``values``, as a batch view for the C kernels.

        Args:
            values: An Arrow array or chunked array, or a sequence of Python values.

        Returns:
            ``(view, valid)``: the view over the non-null values, and the validity of each input
            value (None when none is null).

        Raises:
            UnsupportedTypeError: The type cannot be hashed, or the values do not convert to it.
        """
        array = self._as_arrow(values)
        valid = None
        if array.null_count:
            valid = arrow_bits(array)
            array = array.filter(pa.array(valid))
        return self._plain(array), valid

    def hash(self, values: Any) -> np.ndarray:
        """XXH64 (seed 0) of the plain encoding of each non-null value.

        Args:
            values: An Arrow array or chunked array, or a sequence of Python values.

        Returns:
            A uint64 array, one hash per non-null value, in order.

        Raises:
            UnsupportedTypeError: As :meth:`encode`.
        """
        view, _valid = self.encode(values)
        out = np.empty(view[3], np.uint64)
        _native.hash_batch(_native.HASH_XXH64, view, 0, False, out, None)
        return out

    # ------------------------------------------------------------------ conversion
    def _as_arrow(self, values: Any) -> pa.Array:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
        try:
            if not isinstance(values, pa.Array):
                values = pa.array(values, type=self.arrow_type)
            if pa.types.is_dictionary(values.type):
                values = values.dictionary_decode()
            if values.type != self.arrow_type:
                values = values.cast(self.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UnsupportedTypeError(
                f"values do not convert to the column's type {self.arrow_type}: {first}"
            ) from None
        return values

    def _plain(self, array: pa.Array) -> BatchView:
        physical, t = self.physical_type, self.arrow_type
        if physical in ("INT32", "INT64"):
            width = 4 if physical == "INT32" else 8
            numbers = _unscaled_low64(array) if pa.types.is_decimal(t) else _fixed_numpy(array)
            # astype wraps (uint32 stored as INT32) and sign- or zero-extends (int8, uint16).
            return _numpy_view(numbers.astype(f"<i{width}", copy=False))
        if physical in ("FLOAT", "DOUBLE"):
            return _numpy_view(_fixed_numpy(array).astype("<f4" if physical == "FLOAT" else "<f8"))
        if physical == "INT96":
            return _numpy_view(_int96(array))
        if physical == "BYTE_ARRAY" and _is_bytes(t):
            return batch_view(array)
        if physical == "FIXED_LEN_BYTE_ARRAY":
            if pa.types.is_decimal(t) and self.type_length:
                return _numpy_view(_decimal_big_endian(array, self.type_length))
            if pa.types.is_float16(t):
                return _numpy_view(_fixed_numpy(array))
            storage = array.storage if isinstance(array, pa.ExtensionArray) else array
            if pa.types.is_fixed_size_binary(storage.type):
                return batch_view(storage)
        raise UnsupportedTypeError(
            f"cannot hash {t} values stored as Parquet {physical} for a Bloom filter"
        )


def _is_bytes(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_string_view(t)
        or pa.types.is_binary_view(t)
    )


def _numpy_view(values: np.ndarray) -> BatchView:
    flat = np.ascontiguousarray(values)
    width = flat.dtype.itemsize if flat.ndim == 1 else flat.shape[1] * flat.dtype.itemsize
    return (flat.reshape(-1).view(np.uint8), None, 0, len(flat), width)


def _fixed_numpy(array: pa.Array) -> np.ndarray:
    """The values buffer of a fixed-width array (no nulls) as numpy, without conversion."""
    width = array.type.bit_width // 8
    data = array.buffers()[1]
    raw = np.frombuffer(
        data, np.dtype(f"<{'f' if pa.types.is_floating(array.type) else 'i'}{width}")
    )
    if pa.types.is_unsigned_integer(array.type):
        raw = raw.view(f"<u{width}")
    return raw[array.offset : array.offset + len(array)]


def _decimal_words(array: pa.Array) -> np.ndarray:
    """A decimal array's values as little-endian bytes, one row per value (16 or 32 bytes)."""
    width = array.type.bit_width // 8
    data = np.frombuffer(array.buffers()[1], np.uint8)
    return data[array.offset * width : (array.offset + len(array)) * width].reshape(-1, width)


def _unscaled_low64(array: pa.Array) -> np.ndarray:
    """The unscaled integers of a decimal array (the writers store precision <= 18 as INT32 or
    INT64: their low 64 bits are the whole value)."""
    if pa.types.is_decimal32(array.type) or pa.types.is_decimal64(array.type):
        return _decimal_words(array).copy().view(f"<i{array.type.bit_width // 8}").reshape(-1)
    return np.ascontiguousarray(_decimal_words(array)[:, :8]).view("<i8").reshape(-1)


def _decimal_big_endian(array: pa.Array, length: int) -> np.ndarray:
    """Each unscaled decimal as ``length`` bytes of big-endian two's complement."""
    words = _decimal_words(array)
    if length > words.shape[1]:
        # Sign-extend: the writer's FIXED_LEN_BYTE_ARRAY is wider than Arrow's word.
        sign = np.where(words[:, -1:] >= 0x80, 0xFF, 0x00).astype(np.uint8)
        pad = np.repeat(sign, length - words.shape[1], axis=1)
        words = np.concatenate([words, pad], axis=1)
    return np.ascontiguousarray(words[:, ::-1][:, words.shape[1] - length :])


def _int96(array: pa.Array) -> np.ndarray:
    """Timestamps as Impala's INT96: int64 nanoseconds of the day, then int32 Julian day."""
    nanos = array.cast(pa.timestamp("ns", array.type.tz)).cast(pa.int64()).to_numpy()
    days, of_day = np.divmod(nanos, _NANOS_PER_DAY)
    out = np.empty(len(nanos), np.dtype([("nanos", "<i8"), ("day", "<i4")]))
    out["nanos"] = of_day
    out["day"] = days + _JULIAN_UNIX_EPOCH
    return out.view(np.uint8).reshape(len(nanos), 12)
