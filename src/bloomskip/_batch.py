"""Turn what users hand us (bytes, str, sequences, numpy, Arrow) into views the C kernels read.

A batch view is the tuple ``(data, offsets, first, count, width)`` that ``_native`` expects: either
Arrow-style offsets (``width`` = 4 or 8, the offset size) or fixed-width items laid end to end
(``offsets`` is None and ``width`` is the item size). Nothing is copied for Arrow arrays or
contiguous numpy arrays; a Python sequence is joined once, with 64-bit offsets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

BatchView = tuple[Any, Any, int, int, int]

_SCALAR_TYPES = (bytes, bytearray, memoryview, str)


def is_scalar(data: object) -> bool:
    """True for one value (bytes-like or str), False for a batch."""
    return isinstance(data, _SCALAR_TYPES)


def scalar_bytes(
    data: bytes | bytearray | memoryview | str, name: str = "data"
) -> bytes | memoryview:
    """The bytes of one value; ``str`` is encoded as UTF-8.

    Raises:
        TypeError: ``data`` is not bytes-like or str.
    """
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, bytes | bytearray | memoryview):
        return data
    raise TypeError(
        f"{name} must be bytes, bytearray, memoryview or str, not {type(data).__name__}"
    )


_OFFSET_TYPES = {
    pa.string(): 4,
    pa.binary(): 4,
    pa.large_string(): 8,
    pa.large_binary(): 8,
}


def _arrow_view(array: pa.Array, name: str) -> BatchView:
    if array.null_count:
        raise ValueError(
            f"{name} holds {array.null_count} null value(s); fill or drop them before hashing"
        )
    if array.type in _OFFSET_TYPES:
        _validity, offsets, data = array.buffers()
        if data is None:  # an all-empty array may have no data buffer
            data = pa.py_buffer(b"")
        return (data, offsets, array.offset, len(array), _OFFSET_TYPES[array.type])
    if pa.types.is_fixed_size_binary(array.type):
        _validity, data = array.buffers()
        width = array.type.byte_width
        return (data, None, array.offset, len(array), width)
    if pa.types.is_string_view(array.type) or pa.types.is_binary_view(array.type):
        return _arrow_view(array.cast(pa.large_binary()), name)
    raise TypeError(
        f"{name}: Arrow arrays of type {array.type} cannot be hashed as bytes; "
        "use string, binary, large_string, large_binary or fixed_size_binary"
    )


def batch_view(data: object, name: str = "data") -> BatchView:
    """A C batch view of ``data``.

    Args:
        data: A pyarrow string/binary array or chunked array, a numpy array (each element's raw
            bytes), or a sequence of bytes / str.
        name: The argument name used in error messages.

    Returns:
        ``(data, offsets, first, count, width)`` for the C kernels.

    Raises:
        TypeError: Unsupported container or element type.
        ValueError: Arrow nulls.
    """
    if isinstance(data, pa.ChunkedArray):
        data = data.combine_chunks() if data.num_chunks != 1 else data.chunk(0)
    if isinstance(data, pa.Array):
        return _arrow_view(data, name)
    if isinstance(data, np.ndarray):
        if data.dtype.kind == "O":
            return batch_view(list(data), name)
        if data.dtype.kind == "U":
            return _arrow_view(pa.array(data.astype(object), type=pa.string()), name)
        flat = np.ascontiguousarray(data).reshape(-1)
        if flat.dtype.byteorder == ">":
            flat = flat.astype(flat.dtype.newbyteorder("<"))
        width = flat.dtype.itemsize
        return (flat.view(np.uint8), None, 0, flat.size, width)
    if isinstance(data, Sequence) and not is_scalar(data):
        if len(data) == 0:
            return (b"", None, 0, 0, 0)
        return _sequence_view(data, name)
    raise TypeError(
        f"{name} must be bytes, str, a sequence of them, a numpy array or a pyarrow array, "
        f"not {type(data).__name__}"
    )


def _sequence_view(data: Sequence, name: str) -> BatchView:
    """A list of bytes or of str laid end to end with 64-bit offsets (``pa.array`` would do it
    in C too, but its first call imports pandas: a fifth of a second of a cold command)."""
    if isinstance(data[0], str):
        if not all(isinstance(item, str) for item in data):
            raise TypeError(f"{name} must hold only bytes or only str")
        parts = [item.encode("utf-8") for item in data]
    else:
        if not all(isinstance(item, bytes | bytearray | memoryview) for item in data):
            raise TypeError(f"{name} must hold only bytes or only str")
        parts = [bytes(item) for item in data]
    offsets = np.zeros(len(parts) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, parts), np.int64, len(parts)), out=offsets[1:])
    return (b"".join(parts), offsets, 0, len(parts), 8)


def uint64_array(values: object, name: str) -> np.ndarray:
    """``values`` as a contiguous uint64 array; signed integers keep their two's complement bits.

    Raises:
        TypeError: Not integers.
        ValueError: Python ints outside -2**63 .. 2**64-1.
    """
    if isinstance(values, pa.ChunkedArray | pa.Array):
        if values.null_count:
            raise ValueError(f"{name} holds null values")
        values = values.to_numpy(zero_copy_only=False)
    array = np.asarray(values)
    if array.dtype.kind == "O" or array.dtype.kind == "i" and array.dtype.itemsize > 8:
        try:
            array = np.array([int(v) & 0xFFFFFFFFFFFFFFFF for v in array.ravel()], dtype=np.uint64)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must hold integers") from None
    if array.dtype.kind not in "iub":
        raise TypeError(f"{name} must hold integers, not {array.dtype}")
    if array.dtype.kind == "i":
        array = array.astype(np.int64, copy=False).view(np.uint64)
    return np.ascontiguousarray(array, dtype=np.uint64)


def check_uint(value: object, bits: int, name: str) -> int:
    """An unsigned integer argument of the given width.

    Raises:
        TypeError: Not an int.
        ValueError: Outside 0 .. 2**bits - 1.
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    value = int(value)
    if not 0 <= value < 1 << bits:
        raise ValueError(f"{name} must be in 0..2**{bits}-1, got {value}")
    return value


def arrow_bits(array: pa.Array, buffer_index: int = 0) -> np.ndarray:
    """One of ``array``'s bitmaps as a bool array of its length: the validity bitmap (index 0,
    all True when absent) or a boolean array's values (index 1). Slices are honoured.

    Read from the buffer itself: ``Array.is_valid()``, ``fill_null`` and a boolean array's
    ``to_numpy`` go through ``pyarrow.compute`` (and pandas), 50-400 ms on a cold start.

    Example:
        >>> arrow_bits(pa.array([1, None, 3])).tolist()
        [True, False, True]
    """
    bitmap = array.buffers()[buffer_index]
    if bitmap is None:
        return np.ones(len(array), bool)
    first = array.offset
    # Only the bytes holding the slice are unpacked.
    packed = np.frombuffer(bitmap, np.uint8)[first // 8 : (first + len(array) + 7) // 8]
    bits = np.unpackbits(packed, bitorder="little")
    return bits[first % 8 : first % 8 + len(array)].astype(bool)
