"""ClickHouse data types and the ``bloom_filter`` value hash of each, computed over Arrow arrays.

A ClickHouse ``bloom_filter`` index reduces every value to one 64-bit hash
(``BloomFilterHash::getAnyTypeHash``):

* integers of every width, ``Bool``, ``Date``, ``DateTime``, ``DateTime64``, ``Enum8/16`` and
  ``IPv4`` (``Date32`` is rejected by the index validator): ``intHash64`` of the value's bytes
  copied into a zeroed ``UInt64``, so negative numbers are zero-extended, not sign-extended;
* ``Float32`` / ``Float64``: ``intHash64`` of the bit pattern of the value as a ``Float64``;
* ``UUID``, ``(U)Int128``, ``IPv6``: ``intHash64(low64 ^ high64)``; ``(U)Int256``: the XOR of its
  four 64-bit words, then ``intHash64``;
* ``String`` / ``FixedString(N)``: ``CityHash64`` v1.0.2 of the bytes (all N bytes of a
  FixedString, padding included);
* ``Nullable(T)``: a NULL row hashes the value stored under it, read from the Arrow buffer as is
  (T's default when NULL was inserted; see :func:`_raw_numbers`);
* ``LowCardinality(T)``: hashed like T; a dictionary array is hashed once per dictionary entry;
* ``Array(T)``: one hash per element.

Types are parsed with sqlglot's ClickHouse dialect into :class:`ClickHouseType` and printed back in
ClickHouse's own spelling (``Date``, not sqlglot's ``DATE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa

from bloomskip._batch import arrow_bits
from bloomskip.clickhouse.kinds import TIME_UNIT_DIGITS, column_kind
from bloomskip.errors import BloomskipError, UnsupportedTypeError

# pyarrow.compute is imported by the functions that use it: hashing a plain column needs none
# of it, and importing it adds about 0.1 s to a command.

__all__ = [
    "ClickHouseType",
    "check_bloom_filter_type",
    "check_text_type",
    "type_from_sqlglot",
    "UnsupportedTypeError",
    "clickhouse_type_for",
    "index_type_key",
    "parse_clickhouse_type",
    "text_values",
    "value_hashes",
]


# Integer-like types: name -> (numpy dtype of the stored value). The value is zero-extended to
# 64 bits before intHash64 (ClickHouse memcpy's it into a zeroed UInt64).
_INTEGER_STORAGE: dict[str, str] = {
    "UInt8": "u1",
    "UInt16": "u2",
    "UInt32": "u4",
    "UInt64": "u8",
    "Int8": "i1",
    "Int16": "i2",
    "Int32": "i4",
    "Int64": "i8",
    "Bool": "u1",
    "Date": "u2",
    "Date32": "i4",
    "DateTime": "u4",
    "DateTime64": "i8",
    "Enum8": "i1",
    "Enum16": "i2",
    "IPv4": "u4",
}
# Types stored as little-endian multi-word integers: name -> byte width.
_WIDE_WIDTH: dict[str, int] = {
    "UInt128": 16,
    "Int128": 16,
    "UUID": 16,
    "IPv6": 16,
    "UInt256": 32,
    "Int256": 32,
}
_FLOATS = {"Float32": "f4", "Float64": "f8"}
_STRINGS = {"String", "FixedString"}
_WRAPPERS = {"Nullable", "LowCardinality", "Array", "Map"}

# sqlglot DataType kinds -> ClickHouse spelling.
_SQLGLOT_NAMES: dict[str, str] = {
    "UTINYINT": "UInt8",
    "USMALLINT": "UInt16",
    "UINT": "UInt32",
    "UBIGINT": "UInt64",
    "UINT128": "UInt128",
    "UINT256": "UInt256",
    "TINYINT": "Int8",
    "SMALLINT": "Int16",
    "INT": "Int32",
    "BIGINT": "Int64",
    "INT128": "Int128",
    "INT256": "Int256",
    "FLOAT": "Float32",
    "DOUBLE": "Float64",
    "BOOLEAN": "Bool",
    "DATE": "Date",
    "DATE32": "Date32",
    "DATETIME": "DateTime",
    "DATETIME64": "DateTime64",
    "TEXT": "String",
    "FIXEDSTRING": "FixedString",
    "UUID": "UUID",
    "IPV4": "IPv4",
    "IPV6": "IPv6",
    "ENUM8": "Enum8",
    "ENUM16": "Enum16",
    "ENUM": "Enum",
    "LOWCARDINALITY": "LowCardinality",
    "ARRAY": "Array",
    "MAP": "Map",
}


@dataclass(frozen=True)
class ClickHouseType:
    """A parsed ClickHouse data type.

    Attributes:
        name: The type's name in ClickHouse spelling, e.g. ``"UInt64"``, ``"Nullable"``,
            ``"FixedString"``; for a type this module does not model, the whole type text.
        arguments: Nested types for ``Nullable``/``LowCardinality``/``Array``/``Map``; ``(N,)``
            for ``FixedString``; ``(precision, timezone or None)`` for ``DateTime64``;
            ``(timezone or None,)`` for ``DateTime``; ``((label, value), ...)`` for enums.
        modelled: False for types outside this module's knowledge (Decimal, Tuple, JSON, ...).

    Example:
        >>> str(parse_clickhouse_type("LowCardinality(Nullable(String))"))
        'LowCardinality(Nullable(String))'
    """

    name: str
    arguments: tuple = ()
    modelled: bool = True

    @property
    def nested(self) -> ClickHouseType:
        """The wrapped type of ``Nullable``, ``LowCardinality`` or ``Array``."""
        if self.name not in ("Nullable", "LowCardinality", "Array"):
            raise ValueError(f"{self} does not wrap another type")
        return self.arguments[0]

    def base(self) -> ClickHouseType:
        """The type with ``Nullable`` and ``LowCardinality`` wrappers removed (not ``Array``)."""
        current = self
        while current.name in ("Nullable", "LowCardinality"):
            current = current.arguments[0]
        return current

    def __str__(self) -> str:
        if not self.modelled:
            return self.name
        if self.name in _WRAPPERS:
            return f"{self.name}({', '.join(str(a) for a in self.arguments)})"
        if self.name == "FixedString":
            return f"FixedString({self.arguments[0]})"
        if self.name == "DateTime":
            timezone = self.arguments[0] if self.arguments else None
            return "DateTime" if timezone is None else f"DateTime({_quote(timezone)})"
        if self.name == "DateTime64":
            precision, timezone = self.arguments
            if timezone is None:
                return f"DateTime64({precision})"
            return f"DateTime64({precision}, {_quote(timezone)})"
        if self.name in ("Enum8", "Enum16"):
            labels = ", ".join(f"{_quote(label)} = {value}" for label, value in self.arguments)
            return f"{self.name}({labels})"
        return self.name


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@lru_cache(maxsize=1024)
def parse_clickhouse_type(type_text: str) -> ClickHouseType:
    """Parse a ClickHouse type name with sqlglot's ClickHouse dialect.

    Args:
        type_text: e.g. ``"Array(LowCardinality(String))"`` or ``"DateTime64(3, 'UTC')"``.

    Returns:
        The parsed type. Types outside the modelled set come back with ``modelled=False``.

    Raises:
        UnsupportedTypeError: If the text is not a type at all.

    Example:
        >>> parse_clickhouse_type("Enum('a', 'b')")
        ClickHouseType(name='Enum8', arguments=(('a', 1), ('b', 2)), modelled=True)
    """
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        data_type = exp.DataType.build(type_text, dialect="clickhouse")
    except (SqlglotError, ValueError) as exc:
        raise UnsupportedTypeError(f"cannot parse ClickHouse type {type_text!r}: {exc}") from exc
    return type_from_sqlglot(data_type)


def type_from_sqlglot(data_type) -> ClickHouseType:  # noqa: ANN001 - a sqlglot DataType
    """Convert a parsed sqlglot ``DataType`` (ClickHouse dialect) into a :class:`ClickHouseType`.

    Args:
        data_type: ``sqlglot.exp.DataType``, e.g. a ``ColumnDef``'s ``kind``.

    Returns:
        The type; ``modelled=False`` for types this module does not know.
    """
    from sqlglot import exp

    kind = data_type.this.name if hasattr(data_type.this, "name") else str(data_type.this)
    name = _SQLGLOT_NAMES.get(kind)
    nullable = bool(data_type.args.get("nullable"))
    children = data_type.expressions
    if name is None:
        parsed = ClickHouseType(data_type.sql("clickhouse"), (), modelled=False)
    elif name in ("LowCardinality", "Array", "Map"):
        parsed = ClickHouseType(name, tuple(type_from_sqlglot(child) for child in children))
    elif name == "FixedString":
        parsed = ClickHouseType(name, (int(children[0].this.this),))
    elif name == "DateTime":
        timezone = children[0].this.this if children else None
        parsed = ClickHouseType(name, (timezone,))
    elif name == "DateTime64":
        precision = int(children[0].this.this) if children else 3
        timezone = children[1].this.this if len(children) > 1 else None
        parsed = ClickHouseType(name, (precision, timezone))
    elif name in ("Enum", "Enum8", "Enum16"):
        labels: list[tuple[str, int]] = []
        next_value = 1  # ClickHouse numbers unvalued enum labels from 1
        for child in children:
            if isinstance(child, exp.EQ):
                label = child.this.this
                value = int(child.expression.sql("clickhouse"))
            else:
                label, value = child.this, next_value
            labels.append((label, value))
            next_value = value + 1
        if name == "Enum":
            fits_int8 = all(-128 <= value <= 127 for _, value in labels)
            name = "Enum8" if fits_int8 else "Enum16"
        parsed = ClickHouseType(name, tuple(labels))
    else:
        parsed = ClickHouseType(name)
    return ClickHouseType("Nullable", (parsed,)) if nullable else parsed


def _as_type(ch_type: str | ClickHouseType) -> ClickHouseType:
    return ch_type if isinstance(ch_type, ClickHouseType) else parse_clickhouse_type(ch_type)


def clickhouse_type_for(arrow_type: pa.DataType, nullable: bool = False) -> str:
    """Return the ClickHouse type a column of this Arrow type is assumed to have.

    Args:
        arrow_type: An Arrow data type.
        nullable: Wrap the result in ``Nullable(...)`` (Arrow fields carry no such flag that
            matters here: NULL rows are hashed as the default value either way).

    Returns:
        A ClickHouse type name, e.g. ``"UInt32"``, ``"DateTime64(3, 'UTC')"``, ``"Array(String)"``.
        A timestamp is in UTC whatever its Arrow zone, as ClickHouse reads Parquet.

    Raises:
        UnsupportedTypeError: For Arrow types with no bloom-filter-indexable ClickHouse match.

    Example:
        >>> clickhouse_type_for(pa.dictionary(pa.int32(), pa.string()))
        'LowCardinality(String)'
    """
    result = _clickhouse_type_for(arrow_type)
    return f"Nullable({result})" if nullable else result


def _clickhouse_type_for(arrow_type: pa.DataType) -> str:
    if pa.types.is_dictionary(arrow_type):
        return f"LowCardinality({_clickhouse_type_for(arrow_type.value_type)})"
    kind = column_kind(arrow_type)
    if kind in ("int", "uint"):
        return f"{'UInt' if kind == 'uint' else 'Int'}{arrow_type.bit_width}"
    if kind in _KIND_NAMES:
        return _KIND_NAMES[kind]
    if kind in ("string", "binary"):
        if pa.types.is_fixed_size_binary(arrow_type):
            return f"FixedString({arrow_type.byte_width})"
        return "String"
    if kind in ("timestamp", "timestamptz"):
        # ClickHouse reads every Parquet timestamp, zoned or not, as DateTime64(p, 'UTC') and a
        # string constant compared with it as a UTC time (verified with chdb, in any session
        # zone); the exact filter reads it so too (dataset/sql/translate.py). The Arrow zone only
        # labels the stored UTC instant, which is what is hashed: typing the column in that
        # zone would read the constant there and probe another instant.
        precision = TIME_UNIT_DIGITS[arrow_type.unit]
        if precision == 0:
            return "DateTime('UTC')"
        return f"DateTime64({precision}, 'UTC')"
    if kind == "list":
        return f"Array({_clickhouse_type_for(arrow_type.value_type)})"
    if kind == "map":
        key = _clickhouse_type_for(arrow_type.key_type)
        return f"Map({key}, {_clickhouse_type_for(arrow_type.item_type)})"
    raise UnsupportedTypeError(
        f"Arrow type {arrow_type} has no ClickHouse type a bloom-filter index can hash; "
        "pass an explicit ClickHouse type"
    )


# Column kinds (bloomskip.clickhouse.kinds) of one ClickHouse type each.
_KIND_NAMES = {
    "bool": "Bool",
    "float32": "Float32",
    "float64": "Float64",
    "uuid": "UUID",
    # ClickHouse's bloom_filter rejects Date32, so Arrow dates map to Date (UInt16 days; chdb
    # exports Date as date32). Days outside 1970..2149 wrap modulo 2**16, which can only add
    # false positives.
    "date": "Date",
}


def index_type_key(arrow_type: pa.DataType) -> str:
    """How an index sees a column of this Arrow type: its ClickHouse type without
    ``LowCardinality``, or the Arrow type's name when it has no ClickHouse type.

    Columns of two files (or of a file and an index's record) with the same key are hashed
    alike, so one index covers both.

    Args:
        arrow_type: An Arrow data type.

    Returns:
        The key, e.g. ``"String"`` for ``string``, ``large_string`` and a dictionary of strings.

    Example:
        >>> index_type_key(pa.dictionary(pa.int8(), pa.large_string()))
        'String'
        >>> index_type_key(pa.decimal128(10, 2))
        'decimal128(10, 2)'
    """
    try:
        return str(parse_clickhouse_type(clickhouse_type_for(arrow_type)).base())
    except BloomskipError:
        return str(arrow_type)


# --------------------------------------------------------------------------------------------
# bloom_filter value hashes


def value_hashes(
    array: pa.Array | pa.ChunkedArray, ch_type: str | ClickHouseType
) -> tuple[np.ndarray, np.ndarray]:
    """Hash an Arrow array the way ClickHouse's ``bloom_filter`` index hashes a column.

    Args:
        array: The column values (any chunking, slices honoured). A NULL row hashes the value
            stored under it in the Arrow buffer, as ClickHouse hashes its nested column.
        ch_type: The column's ClickHouse type, e.g. ``"Nullable(Int32)"`` or ``"Array(String)"``.

    Returns:
        ``(hashes, row_offsets)``: ``uint64`` value hashes and ``int64[n + 1]`` offsets; row i's
        hashes are ``hashes[row_offsets[i]:row_offsets[i + 1]]`` (one per row, one per element
        for ``Array``, none for an empty array).

    Raises:
        UnsupportedTypeError: If ClickHouse's ``bloom_filter`` rejects the type (Map,
            Array(Nullable(T)), Decimal, ...) or the Arrow data cannot hold it.

    Example:
        >>> hashes, offsets = value_hashes(pa.array([1, -1], pa.int8()), "Int8")
        >>> offsets.tolist()
        [0, 1, 2]
    """
    parsed = check_bloom_filter_type(ch_type)
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    if not chunks:
        return np.empty(0, np.uint64), np.zeros(1, np.int64)
    if parsed.name != "Array":
        # One value per row: every chunk hashes straight into its slice of one output, and the
        # row offsets are 0..n (no per-chunk offsets to shift and join).
        total = sum(len(chunk) for chunk in chunks)
        hashes = np.empty(total, np.uint64)
        start = 0
        for chunk in chunks:
            _scalar_hashes(chunk, parsed.base(), hashes[start : start + len(chunk)])
            start += len(chunk)
        return hashes, np.arange(total + 1, dtype=np.int64)
    parts = [_chunk_hashes(chunk, parsed) for chunk in chunks]
    if len(parts) == 1:
        return parts[0]
    hashes = np.concatenate([h for h, _ in parts])
    return hashes, _join_row_offsets([(len(h), row_offsets) for h, row_offsets in parts])


def _join_row_offsets(parts: list[tuple[int, np.ndarray]]) -> np.ndarray:
    """Row offsets of chunks laid end to end; ``parts`` holds (values in chunk, its offsets)."""
    offsets = [np.zeros(1, np.int64)]
    base = 0
    for value_count, row_offsets in parts:
        offsets.append(row_offsets[1:] + base)
        base += value_count
    return np.concatenate(offsets)


def check_bloom_filter_type(ch_type: str | ClickHouseType) -> ClickHouseType:
    """Validate a column type for the ``bloom_filter`` index as ClickHouse does.

    Mirrors ``assertIndexColumnsType``: one ``Array`` level, then ``Nullable`` /
    ``LowCardinality``, then a primitive; ``Array(Nullable(T))`` is rejected by the hash function.

    Args:
        ch_type: The index column's ClickHouse type.

    Returns:
        The parsed type.

    Raises:
        UnsupportedTypeError: For Map, Decimal, Tuple, Array(Array(T)), Array(Nullable(T)), ...

    Example:
        >>> str(check_bloom_filter_type("Array(LowCardinality(String))"))
        'Array(LowCardinality(String))'
    """
    parsed = _as_type(ch_type)
    element = parsed
    if element.name == "Array":
        element = element.nested
        if element.name == "Nullable" or (
            element.name == "LowCardinality" and element.nested.name == "Nullable"
        ):
            raise UnsupportedTypeError(
                f"Unexpected type {parsed} of bloom filter index (ClickHouse rejects "
                "Array(Nullable(T)))"
            )
    base = element.base()
    if base.name == "Date32":
        # The source's value hashing has a Date32 case, but the index validator
        # (assertIndexColumnsType) accepts isDate() only, so ClickHouse 26.9 rejects the column.
        raise UnsupportedTypeError(f"Unexpected type {parsed} of bloom filter index")
    if not base.modelled or not (
        base.name in _INTEGER_STORAGE
        or base.name in _WIDE_WIDTH
        or base.name in _FLOATS
        or base.name in _STRINGS
    ):
        raise UnsupportedTypeError(f"Unexpected type {parsed} of bloom filter index")
    return parsed


def _chunk_hashes(chunk: pa.Array, parsed: ClickHouseType) -> tuple[np.ndarray, np.ndarray]:
    if parsed.name == "Array":
        values, row_offsets = _list_values(chunk, parsed)
        element_hashes, _ = _chunk_hashes(values, parsed.nested)
        return element_hashes, row_offsets
    return _scalar_hashes(chunk, parsed.base()), np.arange(len(chunk) + 1, dtype=np.int64)


def _list_values(chunk: pa.Array, parsed: ClickHouseType) -> tuple[pa.Array, np.ndarray]:
    import pyarrow.compute as pc

    t = pa.types
    if not (
        t.is_list(chunk.type) or t.is_large_list(chunk.type) or t.is_fixed_size_list(chunk.type)
    ):
        raise UnsupportedTypeError(f"type {parsed} needs an Arrow list array, got {chunk.type}")
    # flatten() skips the values hidden under NULL list slots and honours slicing, so the
    # lengths (NULL = empty array, the ClickHouse default) line up with the flattened values.
    lengths = pc.fill_null(pc.list_value_length(chunk), 0).to_numpy(zero_copy_only=False)
    row_offsets = np.zeros(len(chunk) + 1, np.int64)
    np.cumsum(lengths, out=row_offsets[1:])
    return chunk.flatten(), row_offsets


def _scalar_hashes(
    chunk: pa.Array, base: ClickHouseType, out: np.ndarray | None = None
) -> np.ndarray:
    """One value hash per row of ``chunk``, stored in ``out`` (a uint64 array of its length)."""
    from bloomskip import hashing

    if out is None:
        out = np.empty(len(chunk), np.uint64)
    if pa.types.is_dictionary(chunk.type):
        # LowCardinality: hash every dictionary entry once, then gather per row.
        dictionary_hashes = _scalar_hashes(chunk.dictionary, base)
        indices = chunk.indices
        if indices.null_count:
            default = _scalar_hashes(pa.nulls(1, chunk.dictionary.type), base)
            # A NULL row points past the dictionary, at the NULL hash (the index stored under
            # it may be anything, and the dictionary may be empty).
            with_default = np.append(dictionary_hashes, default)
            rows = np.where(arrow_bits(indices), _raw_numbers(indices), len(dictionary_hashes))
            np.take(with_default, rows, out=out)
            return out
        np.take(dictionary_hashes, indices.to_numpy(zero_copy_only=False), out=out)
        return out
    if base.name in _STRINGS:
        return hashing.cityhash64(_string_bytes(chunk, base), out=out)
    if base.name in _FLOATS:
        values = _float_values(chunk, base)
        return hashing.int_hash64(values.astype(np.float64, copy=False).view(np.uint64), out=out)
    if base.name in _WIDE_WIDTH:
        words = _wide_words(chunk, base)
        if words.shape[1] == 4:
            # DefaultHash64 of a 256-bit integer XORs key, key >> 64, key >> 128 and key >> 256;
            # the last shift is by the full width and yields 0 in ClickHouse's wide integers, so
            # the top word never enters the hash (verified with chdb for Int256 and UInt256).
            words = words[:, :3]
        return hashing.int_hash64(np.bitwise_xor.reduce(words, axis=1), out=out)
    values = _integer_values(chunk, base)
    # Reinterpret as unsigned of the same width, then widen: zero extension, as ClickHouse's
    # memcpy into a zeroed UInt64 does (no copy for 64-bit values).
    unsigned = values.view(values.dtype.str.replace("i", "u"))
    return hashing.int_hash64(unsigned.astype(np.uint64, copy=False), out=out)


# --------------------------------------------------------------------------------------------
# Converting Arrow data to ClickHouse's in-memory representation


_DAY_SECONDS = 86_400


def _raw_numbers(chunk: pa.Array) -> np.ndarray:
    """The values buffer of a fixed-width primitive array, including the values under NULLs.

    ClickHouse hashes the value its nested column stores under a NULL (the default when NULL was
    inserted, but e.g. ``if(c, NULL, x)`` leaves x there), and chdb exports that value into the
    Arrow buffer; so the buffer is read as it is rather than filled with zeros.
    """
    arrow_type = chunk.type
    if pa.types.is_boolean(arrow_type):
        data = chunk.buffers()[1]
        if data is None:
            return np.zeros(len(chunk), np.uint8)
        return arrow_bits(chunk, 1).astype(np.uint8)
    dtype = np.dtype(arrow_type.to_pandas_dtype()) if pa.types.is_integer(arrow_type) else None
    if dtype is None:
        dtype = _PHYSICAL_DTYPES.get(arrow_type.id)
        if dtype is None:
            if pa.types.is_timestamp(arrow_type):
                dtype = np.dtype("i8")
            else:
                raise UnsupportedTypeError(f"Arrow {arrow_type} is not a fixed-width number type")
    data = chunk.buffers()[1]
    if data is None or len(chunk) == 0:
        return np.zeros(len(chunk), dtype)
    return np.frombuffer(data, dtype, count=len(chunk), offset=chunk.offset * dtype.itemsize)


_PHYSICAL_DTYPES = {
    pa.float16().id: np.dtype("f2"),
    pa.float32().id: np.dtype("f4"),
    pa.float64().id: np.dtype("f8"),
    pa.date32().id: np.dtype("i4"),
    pa.date64().id: np.dtype("i8"),
}


def _integer_values(chunk: pa.Array, base: ClickHouseType) -> np.ndarray:
    """Values of an integer-like type as numpy integers of ClickHouse's storage width."""
    storage = np.dtype(_INTEGER_STORAGE[base.name])
    t = pa.types
    arrow_type = chunk.type
    if base.name in ("Enum8", "Enum16") and _is_text(arrow_type):
        return _enum_codes(chunk, base).astype(storage)
    if base.name == "IPv4" and _is_text(arrow_type):
        return _parse_ipv4(chunk)
    if not (
        t.is_integer(arrow_type)
        or t.is_boolean(arrow_type)
        or t.is_date(arrow_type)
        or t.is_timestamp(arrow_type)
    ):
        raise UnsupportedTypeError(f"cannot read {base} values from an Arrow {arrow_type} array")
    numbers = _raw_numbers(chunk)
    if t.is_date32(arrow_type):
        if base.name in ("DateTime", "DateTime64"):  # days are the unit of Date and integers
            numbers = _rescale_timestamp(numbers.astype(np.int64) * _DAY_SECONDS, 0, base)
    elif t.is_date64(arrow_type):
        numbers = _rescale_timestamp(numbers, 3, base)
    elif t.is_timestamp(arrow_type):
        numbers = _rescale_timestamp(numbers, TIME_UNIT_DIGITS[arrow_type.unit], base)
    if numbers.dtype.kind in "iu" and numbers.dtype.itemsize == storage.itemsize:
        return numbers.view(storage)  # the same bits: no copy
    # astype between integer dtypes wraps modulo 2**bits, like ClickHouse's narrowing casts.
    return numbers.astype(storage)


def _rescale_timestamp(counts: np.ndarray, digits: int, base: ClickHouseType) -> np.ndarray:
    """Timestamps (counts of 10**-digits s) in the unit of ``base``: s, 10**-p s, or days."""
    if base.name == "DateTime64":
        target = base.arguments[0]
    elif base.name in ("DateTime", "Date", "Date32"):
        target = 0
    else:  # a plain integer type: keep the Arrow number
        return counts
    counts = counts.astype(np.int64)
    if target >= digits:
        counts = counts * (10 ** (target - digits))
    elif base.name in ("Date", "Date32"):
        counts = np.floor_divide(counts, 10 ** (digits - target))
    else:
        # Reducing a DateTime64 scale truncates toward zero in ClickHouse (-0.001 s -> 0 s).
        quotient = np.abs(counts) // (10 ** (digits - target))
        counts = np.where(counts < 0, -quotient, quotient)
    if base.name in ("Date", "Date32"):
        # Days before 1970 round down (toDate32 of a DateTime64 before the epoch).
        counts = np.floor_divide(counts, _DAY_SECONDS)
    return counts


def _is_text(arrow_type: pa.DataType) -> bool:
    return column_kind(arrow_type) == "string"


def _enum_codes(chunk: pa.Array, base: ClickHouseType) -> np.ndarray:
    import pyarrow.compute as pc

    labels = pa.array([label for label, _ in base.arguments], pa.string())
    codes = np.array([value for _, value in base.arguments], np.int64)
    text = chunk.cast(pa.string()) if pa.types.is_dictionary(chunk.type) else chunk
    positions = pc.index_in(text, value_set=labels)
    unknown = pc.and_(positions.is_null(), text.is_valid())
    if pc.any(unknown).as_py():
        bad = pc.filter(text, unknown)[0].as_py()
        raise UnsupportedTypeError(f"value {bad!r} is not a label of {base}")
    # A NULL row of Nullable(Enum) stores 0 under the NULL (the column default), not a label.
    filled = pc.fill_null(positions, -1).to_numpy(zero_copy_only=False)
    return np.where(filled >= 0, codes[np.maximum(filled, 0)], 0)


def _parse_ipv4(chunk: pa.Array) -> np.ndarray:
    import pyarrow.compute as pc

    text = pc.fill_null(chunk.cast(pa.string()), "0.0.0.0")
    parts = pc.split_pattern(text, ".")
    lengths = pc.list_value_length(parts).to_numpy(zero_copy_only=False)
    if len(lengths) and (lengths != 4).any():
        bad = text[int(np.flatnonzero(lengths != 4)[0])].as_py()
        raise UnsupportedTypeError(f"{bad!r} is not an IPv4 address")
    try:
        octets = parts.flatten().cast(pa.uint8()).to_numpy().astype(np.uint32).reshape(-1, 4)
    except pa.ArrowInvalid as exc:
        raise UnsupportedTypeError(f"not an IPv4 address: {exc}") from exc
    return (octets[:, 0] << 24) | (octets[:, 1] << 16) | (octets[:, 2] << 8) | octets[:, 3]


def _float_values(chunk: pa.Array, base: ClickHouseType) -> np.ndarray:
    if not (pa.types.is_floating(chunk.type) or pa.types.is_integer(chunk.type)):
        raise UnsupportedTypeError(f"cannot read {base} values from an Arrow {chunk.type} array")
    values = _raw_numbers(chunk)
    # A Float32 column stores float32 values; ClickHouse widens them to Float64 before hashing.
    return values.astype(_FLOATS[base.name])


def _wide_words(chunk: pa.Array, base: ClickHouseType) -> np.ndarray:
    """The value as (n, width/8) little-endian uint64 words of ClickHouse's in-memory integer."""
    width = _WIDE_WIDTH[base.name]
    arrow_type = chunk.type
    if isinstance(arrow_type, pa.BaseExtensionType):
        chunk = chunk.storage
        arrow_type = chunk.type
    if base.name == "UUID" and _is_text(arrow_type):
        raw = _uuid_text_bytes(chunk)
    elif pa.types.is_fixed_size_binary(arrow_type) and arrow_type.byte_width == width:
        raw = _fixed_bytes(chunk, width)
    elif pa.types.is_decimal(arrow_type) and arrow_type.byte_width == width:
        raw = _fixed_bytes(chunk.view(pa.binary(width)), width)
    else:
        raise UnsupportedTypeError(
            f"cannot read {base} values from an Arrow {arrow_type} array; expected "
            f"fixed_size_binary({width})"
        )
    if base.name == "UUID":
        # Arrow (and the UUID text) hold the 16 bytes in RFC order; ClickHouse keeps a UUID as two
        # UInt64 halves whose big-endian bytes are that order. XOR of the halves is symmetric.
        return raw.view(">u8").astype(np.uint64).reshape(-1, 2)
    return raw.view("<u8").reshape(-1, width // 8)


def _fixed_bytes(chunk: pa.Array, width: int) -> np.ndarray:
    """The (n, width) raw bytes of a fixed_size_binary array, including those under NULLs."""
    data = chunk.buffers()[1]
    if data is None or len(chunk) == 0:
        return np.zeros((len(chunk), width), np.uint8)
    start = chunk.offset * width
    raw = np.frombuffer(data, np.uint8, count=len(chunk) * width, offset=start)
    return raw.reshape(-1, width)


def _uuid_text_bytes(chunk: pa.Array) -> np.ndarray:
    import pyarrow.compute as pc

    text = pc.fill_null(chunk.cast(pa.string()), "00000000-0000-0000-0000-000000000000")
    digits = pc.replace_substring(text, "-", "")
    lengths = pc.binary_length(digits).to_numpy(zero_copy_only=False)
    if len(lengths) and (lengths != 32).any():
        bad = text[int(np.flatnonzero(lengths != 32)[0])].as_py()
        raise UnsupportedTypeError(f"{bad!r} is not a UUID")
    fixed = digits.cast(pa.binary()).cast(pa.binary(32))
    hex_bytes = _fixed_bytes(fixed, 32)
    nibbles = _hex_values(hex_bytes)
    return ((nibbles[:, 0::2] << 4) | nibbles[:, 1::2]).astype(np.uint8)


_HEX = np.full(256, 255, np.uint8)
_HEX[np.frombuffer(b"0123456789", np.uint8)] = np.arange(10)
_HEX[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16)
_HEX[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16)


def _hex_values(hex_bytes: np.ndarray) -> np.ndarray:
    nibbles = _HEX[hex_bytes]
    if (nibbles == 255).any():
        raise UnsupportedTypeError("UUID text contains a non-hexadecimal digit")
    return nibbles


# --------------------------------------------------------------------------------------------
# Bytes of string-like values (also what ngrambf_v1 / tokenbf_v1 tokenize)


def _string_bytes(chunk: pa.Array, base: ClickHouseType) -> pa.Array:
    """A null-free Arrow binary-like array with the exact bytes ClickHouse stores per row."""
    arrow_type = chunk.type
    t = pa.types
    if base.name == "IPv6":
        raw = _wide_words(chunk, base).view(np.uint8).reshape(-1, 16)
        return pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(16), len(raw), [None, pa.py_buffer(raw.tobytes())]
        )
    if base.name == "FixedString":
        width = base.arguments[0]
        if t.is_fixed_size_binary(arrow_type):
            if arrow_type.byte_width != width:
                raise UnsupportedTypeError(
                    f"{base} column given as Arrow {arrow_type}: byte widths differ"
                )
            return _without_validity(chunk)
        return _pad_to_fixed(chunk, width)
    if not (
        t.is_string(arrow_type)
        or t.is_large_string(arrow_type)
        or t.is_binary(arrow_type)
        or t.is_large_binary(arrow_type)
        or t.is_fixed_size_binary(arrow_type)
        or t.is_string_view(arrow_type)
        or t.is_binary_view(arrow_type)
    ):
        raise UnsupportedTypeError(f"cannot read {base} values from an Arrow {arrow_type} array")
    if t.is_string_view(arrow_type) or t.is_binary_view(arrow_type):
        chunk = chunk.cast(pa.large_binary())
    return _without_validity(chunk)


def _without_validity(chunk: pa.Array) -> pa.Array:
    """The same bytes with the NULL flags dropped: a NULL row hashes what is stored under it."""
    if not chunk.null_count:
        return chunk
    buffers = chunk.buffers()
    if buffers[-1] is None:  # an all-NULL array without data: every value is the default
        import pyarrow.compute as pc  # here only: 40-60 ms to import

        return pc.fill_null(
            chunk, pa.scalar(b"\0" * getattr(chunk.type, "byte_width", 0), chunk.type)
        )
    return pa.Array.from_buffers(chunk.type, len(chunk), [None, *buffers[1:]], 0, chunk.offset)


def _binary_of(arrow_type: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(arrow_type) or pa.types.is_large_binary(arrow_type):
        return pa.large_binary()
    if pa.types.is_fixed_size_binary(arrow_type):
        return arrow_type
    return pa.binary()


def _pad_to_fixed(chunk: pa.Array, width: int) -> pa.Array:
    """Strings right-padded with zero bytes to a FixedString(width) column."""
    import pyarrow.compute as pc

    as_binary = pc.fill_null(chunk.cast(_binary_of(chunk.type)), b"").cast(pa.large_binary())
    lengths = pc.binary_length(as_binary).to_numpy(zero_copy_only=False).astype(np.int64)
    if len(lengths) and lengths.max() > width:
        row = int(np.argmax(lengths))
        raise UnsupportedTypeError(
            f"value of {lengths[row]} bytes at row {row} does not fit FixedString({width})"
        )
    offsets = np.frombuffer(
        as_binary.buffers()[1], np.int64, count=len(chunk) + 1, offset=as_binary.offset * 8
    )
    data = np.frombuffer(as_binary.buffers()[2], np.uint8) if len(chunk) else np.empty(0, np.uint8)
    out = np.zeros((len(chunk), width), np.uint8)
    # Destination index of every source byte: row * width + position within the row.
    rows = np.repeat(np.arange(len(chunk)), lengths)
    within = np.arange(int(lengths.sum())) - np.repeat(offsets[:-1] - offsets[0], lengths)
    out.reshape(-1)[rows * width + within] = data[offsets[0] : offsets[-1]]
    return pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(width), len(chunk), [None, pa.py_buffer(out.tobytes())]
    )


_TEXT_TYPE_MESSAGE = (
    "Ngram and token bloom filter indexes can only be used with column types `String`, "
    "`FixedString`, `LowCardinality(String)`, `LowCardinality(FixedString)`, `Array(String)` or "
    "`Array(FixedString)`"
)


def check_text_type(ch_type: str | ClickHouseType) -> ClickHouseType:
    """Validate a column type for ``ngrambf_v1`` / ``tokenbf_v1`` as ClickHouse does.

    Args:
        ch_type: The index column's ClickHouse type.

    Returns:
        The parsed type.

    Raises:
        UnsupportedTypeError: Unless the type is String, FixedString or IPv6, possibly inside one
            ``Array(...)`` or ``LowCardinality(...)`` (``Nullable`` is rejected, as in ClickHouse).

    Example:
        >>> str(check_text_type("Array(String)"))
        'Array(String)'
    """
    parsed = _as_type(ch_type)
    element = parsed
    if element.name in ("Array", "LowCardinality"):
        element = element.nested
    if element.name not in ("String", "FixedString", "IPv6"):
        raise UnsupportedTypeError(f"{_TEXT_TYPE_MESSAGE}; got {parsed}")
    return parsed


def text_values(
    array: pa.Array | pa.ChunkedArray, ch_type: str | ClickHouseType
) -> tuple[pa.Array | pa.ChunkedArray, np.ndarray]:
    """The byte strings an ``ngrambf_v1`` / ``tokenbf_v1`` index tokenizes, with row offsets.

    Args:
        array: The index column (a string, binary, fixed-size binary, dictionary or list array).
        ch_type: Its ClickHouse type (see :func:`check_text_type`).

    Returns:
        ``(strings, row_offsets)``: a null-free Arrow binary-like array (a chunked array, one
        chunk per input chunk, when the input has several) and ``int64[n + 1]`` offsets; row i
        contributes ``strings[row_offsets[i]:row_offsets[i + 1]]``. A NULL row
        contributes the bytes stored under it (normally none); a NULL array is empty.

    Raises:
        UnsupportedTypeError: For a type the text indexes reject or data that does not fit it.

    Example:
        >>> strings, offsets = text_values(pa.array([["a b"], []]), "Array(String)")
        >>> offsets.tolist()
        [0, 1, 1]
    """
    parsed = check_text_type(ch_type)
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    parts = []
    for chunk in chunks:
        if parsed.name == "Array":
            values, row_offsets = _list_values(chunk, parsed)
            parts.append((_decoded_strings(values, parsed.nested.base()), row_offsets))
        else:
            offsets = np.arange(len(chunk) + 1, dtype=np.int64)
            parts.append((_decoded_strings(chunk, parsed.base()), offsets))
    if not parts:
        return pa.array([], pa.binary()), np.zeros(1, np.int64)
    if len(parts) == 1:
        return parts[0]
    arrays = [strings for strings, _ in parts]
    if len({strings.type for strings in arrays}) != 1:
        arrays = [strings.cast(pa.large_binary()) for strings in arrays]
    # The chunks stay where they are: the text builder reads them one after the other.
    joined = pa.chunked_array(arrays, arrays[0].type)
    if parsed.name != "Array":
        return joined, np.arange(len(joined) + 1, dtype=np.int64)
    return joined, _join_row_offsets([(len(s), row_offsets) for s, row_offsets in parts])


def _decoded_strings(chunk: pa.Array, base: ClickHouseType) -> pa.Array:
    if pa.types.is_dictionary(chunk.type):
        chunk = chunk.dictionary_decode()
    return _string_bytes(chunk, base)
