"""The hash functions TsFile, ClickHouse and Parquet build their Bloom filters with.

Every function takes one value or a batch. One value is ``bytes``/``bytearray``/``memoryview`` or
``str`` (hashed as UTF-8) and gives Python ints. A batch is a pyarrow string/binary array (read
straight from its buffers), a numpy array (each element's raw little-endian bytes), or a sequence
of ``bytes``/``str``; it gives numpy arrays (``uint64`` for 64-bit hashes, ``int32`` for hash32).

Example:
    >>> from bloomskip.hashing import cityhash64, tsfile_hash32
    >>> tsfile_hash32("root.sg.d.s1", 5)
    -1267668613
    >>> cityhash64(["a", "b"]).dtype
    dtype('uint64')
"""

from __future__ import annotations

import numpy as np

from bloomskip import _native
from bloomskip._batch import batch_view, check_uint, is_scalar, scalar_bytes, uint64_array

__all__ = [
    "cityhash128",
    "cityhash64",
    "cityhash64_with_seed",
    "hash128_to_64",
    "int_hash64",
    "murmur3_x64_128",
    "tsfile_hash32",
    "xxhash64",
]

_U64 = 0xFFFFFFFFFFFFFFFF

# The hash kinds of _native.hash_batch whose values are 128-bit (two uint64 outputs).
_TWO_HALVES = (_native.HASH_MURMUR3_128, _native.HASH_CITY128)


def _output(out: np.ndarray | None, count: int, dtype) -> np.ndarray:
    """``out`` checked to take ``count`` hashes in place, or a new array when None."""
    if out is None:
        return np.empty(count, dtype=dtype)
    if not (
        isinstance(out, np.ndarray)
        and out.dtype == dtype
        and out.shape == (count,)
        and out.flags.c_contiguous
        and out.flags.writeable
    ):
        raise ValueError(f"out must be a writable contiguous {np.dtype(dtype)} array of {count}")
    return out


def _hash_batch(kind: int, data, seed: int = 0, signed_tail: bool = False, out=None):
    """One hash over a batch: a numpy array, or two for the 128-bit hashes."""
    view = batch_view(data)
    first = _output(out, view[3], np.int32 if kind == _native.HASH_TSFILE32 else np.uint64)
    second = np.empty(view[3], dtype=np.uint64) if kind in _TWO_HALVES else None
    _native.hash_batch(kind, view, seed & _U64, signed_tail, first, second)
    return first if second is None else (first, second)


def _int32_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an int, not {type(seed).__name__}")
    if not -(2**31) <= int(seed) < 2**31:
        raise ValueError(f"seed must be a 32-bit signed int (Java int), got {seed}")
    return int(seed)


def murmur3_x64_128(data, seed: int = 0):
    """Standard MurmurHash3 x64 128-bit (as ``mmh3.hash128``), split into its two 64-bit halves.

    Args:
        data: One value or a batch (see the module docstring).
        seed: Unsigned 32-bit seed.

    Returns:
        ``(h1, h2)``: two ints, or two uint64 arrays for a batch. ``h1 | h2 << 64`` is the value
        ``mmh3.hash128(data, seed)`` returns.

    Raises:
        TypeError: Unsupported input type.
        ValueError: Seed outside 0..2**32-1; Arrow nulls.
    """
    seed = check_uint(seed, 32, "seed")
    if is_scalar(data):
        return _native.murmur3_128(scalar_bytes(data), seed)
    return _hash_batch(_native.HASH_MURMUR3_128, data, seed)


def tsfile_hash32(data, seed: int, signed_tail: bool = True):
    """TsFile's ``Murmur128Hash`` hash32: low 32 bits of h1 + h2, as a signed int.

    Args:
        data: One value or a batch.
        seed: Java int seed (sign-extended to 64 bits, as Java does).
        signed_tail: True for the specification and the Java library (tail bytes sign-extended);
            False for the C++ library (PyPI ``tsfile``), which uses the standard tail.

    Returns:
        An int in -2**31..2**31-1, or an int32 array for a batch.

    Raises:
        TypeError: Unsupported input type.
        ValueError: Seed outside the Java int range; Arrow nulls.
    """
    seed = _int32_seed(seed)
    if is_scalar(data):
        return _native.tsfile_hash32(scalar_bytes(data), seed, bool(signed_tail))
    return _hash_batch(_native.HASH_TSFILE32, data, seed, bool(signed_tail))


def cityhash64(data, *, out: np.ndarray | None = None):
    """CityHash64 v1.0.2, the version ClickHouse uses for String values.

    Args:
        data: One value or a batch.
        out: For a batch, a writable contiguous uint64 array of its length to store the hashes
            in (and return), instead of a new one.

    Returns:
        An int, or a uint64 array for a batch.

    Raises:
        TypeError: Unsupported input type.
        ValueError: Arrow nulls; an ``out`` of the wrong type or length.

    Example:
        >>> cityhash64(["a", "b"], out=np.empty(2, np.uint64)).dtype
        dtype('uint64')
    """
    if is_scalar(data):
        return _native.cityhash64(scalar_bytes(data))
    return _hash_batch(_native.HASH_CITY64, data, out=out)


def cityhash64_with_seed(data, seed: int):
    """CityHash64WithSeed v1.0.2 (ClickHouse's ngrambf_v1 / tokenbf_v1 / sparse_grams token hash).

    Args:
        data: One value or a batch.
        seed: Unsigned 64-bit seed.

    Returns:
        An int, or a uint64 array for a batch.

    Raises:
        TypeError: Unsupported input type.
        ValueError: Seed outside 0..2**64-1; Arrow nulls.
    """
    seed = check_uint(seed, 64, "seed")
    if is_scalar(data):
        return _native.cityhash64_with_seed(scalar_bytes(data), seed)
    return _hash_batch(_native.HASH_CITY64_SEEDED, data, seed)


def xxhash64(data, seed: int = 0, *, out: np.ndarray | None = None):
    """XXH64 (xxHash's 64-bit hash), the hash of Parquet's split-block Bloom filters (seed 0).

    Args:
        data: One value or a batch (fixed-width numpy items hash their raw little-endian bytes:
            the Parquet plain encoding of INT32/INT64/FLOAT/DOUBLE).
        seed: Unsigned 64-bit seed.
        out: For a batch, a writable contiguous uint64 array of its length to store the hashes
            in (and return), instead of a new one.

    Returns:
        An int, or a uint64 array for a batch.

    Raises:
        TypeError: Unsupported input type.
        ValueError: Seed outside 0..2**64-1; Arrow nulls; an ``out`` of the wrong type or length.

    Example:
        >>> hex(xxhash64(b""))
        '0xef46db3751d8e999'
    """
    seed = check_uint(seed, 64, "seed")
    if is_scalar(data):
        return _native.xxhash64(scalar_bytes(data), seed)
    return _hash_batch(_native.HASH_XXH64, data, seed, out=out)


def cityhash128(data):
    """CityHash128 v1.0.2 (the checksum of ClickHouse's compressed blocks).

    Args:
        data: One value or a batch.

    Returns:
        ``(low64, high64)``: two ints, or two uint64 arrays for a batch.

    Raises:
        TypeError: Unsupported input type.
        ValueError: Arrow nulls.
    """
    if is_scalar(data):
        return _native.cityhash128(scalar_bytes(data))
    return _hash_batch(_native.HASH_CITY128, data)


def hash128_to_64(low, high):
    """CityHash's ``Hash128to64`` of a 128-bit value given as two 64-bit halves.

    Args:
        low: Low half: an int in 0..2**64-1, or an integer array.
        high: High half, the same shape as ``low``.

    Returns:
        An int, or a uint64 array.

    Raises:
        TypeError: Non-integers.
        ValueError: Ints out of range; arrays of different lengths.
    """
    if isinstance(low, int | np.integer) and isinstance(high, int | np.integer):
        return _native.hash128_to_64(check_uint(low, 64, "low"), check_uint(high, 64, "high"))
    low_array = uint64_array(low, "low")
    high_array = uint64_array(high, "high")
    out = np.empty(low_array.shape, dtype=np.uint64)
    _native.hash128_to_64_array(low_array, high_array, out)
    return out


def int_hash64(x, *, out: np.ndarray | None = None):
    """ClickHouse ``intHash64`` (MurmurHash3's fmix64 finalizer).

    Args:
        x: An int in -2**63..2**64-1 (negatives as their 64-bit two's complement, as ClickHouse
            converts them to UInt64), or an integer array (signed ones reinterpreted likewise).
        out: For an array, a writable contiguous uint64 array of its size to store the hashes
            in (and return), instead of a new one.

    Returns:
        An int, or a uint64 array.

    Raises:
        TypeError: Non-integers.
        ValueError: Ints out of range; an ``out`` of the wrong type or size.

    Example:
        >>> int_hash64(np.arange(3, dtype=np.uint64), out=np.empty(3, np.uint64))[0]
        np.uint64(0)
    """
    if isinstance(x, int | np.integer) and not isinstance(x, bool):
        value = int(x)
        if not -(2**63) <= value <= _U64:
            raise ValueError(f"x must be in -2**63..2**64-1, got {value}")
        return _native.int_hash64(value & _U64)
    values = uint64_array(x, "x")
    if out is None:
        result = np.empty(values.shape, dtype=np.uint64)
    else:
        result = _output(out, values.size, np.uint64).reshape(values.shape)
    _native.int_hash64_array(values, result)
    return result
