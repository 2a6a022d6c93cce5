"""WHERE expression -> RPN of index atoms -> which granules of a skip index may match.

This is ClickHouse's ``MergeTreeIndexConditionBloomFilter`` (``bloom_filter``) and
``MergeTreeConditionBloomFilterText`` (``ngrambf_v1`` / ``tokenbf_v1``), rebuilt on a sqlglot
parse of the predicate:

1. The predicate is parsed with sqlglot's ClickHouse dialect and turned into reverse Polish
   notation: ``AND`` / ``OR`` / ``NOT`` operators over *atoms*. An atom is a comparison the index
   understands (``=``, ``IN``, ``has``, ``LIKE``, ``startsWith``, ...) with its constant already
   reduced to hashes or tokens; anything else is ``unknown``; a numeric constant is ``always
   true`` / ``always false``.
2. For an index, every atom is tested against every granule at once by the granules of
   :mod:`bloomskip.clickhouse.granule` (``hashes_present`` / ``token_sets_present``: the bit
   positions of all its query values, looked up with ``bits.test_bits``), giving a ``can be
   true`` mask. The condition reads granules only, never the index that holds them.
3. The RPN is evaluated over pairs of masks ``(can_be_true, can_be_false)`` exactly as
   ClickHouse's ``BoolMask`` stack does. A granule is skipped only where ``can_be_true`` is false.

An atom never claims more than the index can prove, so a granule holding a matching row is never
skipped; ``!=``, ``NOT IN`` and ``NOT LIKE`` never prune (their atom is ``(true, maybe)``).
Constant folding is limited to literals (``nan`` / ``inf`` included), ``-x``, arrays, tuples,
``CAST``, ``toType(...)``, ``toDateTime(x, tz)`` and ``toDateTime64(x, p[, tz])``; other constant
expressions (``'a' || 'b'``, ``concat(...)``) make the atom unknown, where ClickHouse would fold
them and possibly prune. Constants are converted per column type as ClickHouse converts them
(time zones, DateTime64 precision, IPv4/IPv6 text, 128/256-bit integers, Enum labels), and the
errors ClickHouse raises before using any index (a String compared with a number, more than 255
``multiSearch`` needles) are raised as :class:`ConditionError`; docs/clickhouse.md lists the rules.
AND / OR / NOT are walked without recursion, so predicate length is bounded by memory only.

Example:
    >>> from bloomskip.clickhouse.ddl import parse_index_definition
    >>> d = parse_index_definition("INDEX i msg TYPE tokenbf_v1(256, 2, 0)")
    >>> cond = compile_condition("hasToken(msg, 'error') OR msg LIKE '%x%'", d, {"msg": "String"})
    >>> cond.useful
    True
"""

from __future__ import annotations

import calendar
import gc
import math
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
from sqlglot import exp

from bloomskip._sql import LiteralList, literal_list
from bloomskip.clickhouse.granule import (
    BloomFilterGranules,
    Granules,
    IndexedGranules,
    TextGranules,
)
from bloomskip.clickhouse.kinds import read_date_text, read_datetime_text
from bloomskip.clickhouse.regexp import analyze_regexp
from bloomskip.clickhouse.tokenizers import (
    DEFAULT_TOKENIZER,
    TOKEN_SET_FUNCTIONS,
    TOKENIZER_NAMES,
    QueryTokenizer,
    like_affix,
    needle_tokens,
)
from bloomskip.errors import ConditionError

if TYPE_CHECKING:
    import pyarrow as pa

    from bloomskip.clickhouse.ddl import IndexDefinition
    from bloomskip.clickhouse.types import ClickHouseType

__all__ = [
    "ConditionError",
    "IndexCondition",
    "check_identifiers",
    "compile_condition",
    "index_never_used_reason",
]

_INT_RANGES = {
    "UInt8": (0, 2**8 - 1),
    "UInt16": (0, 2**16 - 1),
    "UInt32": (0, 2**32 - 1),
    "UInt64": (0, 2**64 - 1),
    "Int8": (-(2**7), 2**7 - 1),
    "Int16": (-(2**15), 2**15 - 1),
    "Int32": (-(2**31), 2**31 - 1),
    "Int64": (-(2**63), 2**63 - 1),
    "Bool": (0, 1),
}
# 128- and 256-bit integers: hashed from their little-endian bytes (types._wide_words).
_WIDE_RANGES = {
    "UInt128": (0, 2**128 - 1),
    "Int128": (-(2**127), 2**127 - 1),
    "UInt256": (0, 2**256 - 1),
    "Int256": (-(2**255), 2**255 - 1),
}
# A numeric literal is an integer only within 64 bits; a longer one is a Float64 in ClickHouse
# (verified with chdb: `i128 = -5000000000000000000000` leaves the Int128 index unused).
_WIDE_WIDTHS = {"UInt128": 16, "Int128": 16, "UInt256": 32, "Int256": 32}
_LITERAL_INTEGERS = (-(2**63), 2**64 - 1)
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|nan|inf|infinity)", re.I
)
# Unquoted names ClickHouse's parser reads as Float64 literals, not identifiers.
_FLOAT_KEYWORDS = {"nan": math.nan, "inf": math.inf, "infinity": math.inf}
_UNKNOWN = object()  # an atom slot ClickHouse fills with FUNCTION_UNKNOWN
# A function node as (ClickHouse function name, arguments).
_Function = tuple[str, list]


# ------------------------------------------------------------------------------------------
# Constants


@dataclass(frozen=True)
class _Constant:
    """A folded SQL constant.

    kind is int, float, string (bytes), null, bool, array, tuple, ``date`` (days since the epoch,
    from ``toDate``) or ``datetime`` (``(ticks, scale)``: an instant in 10**-scale s since the
    epoch, from ``toDateTime`` / ``toDateTime64`` / ``CAST``).
    """

    kind: str
    value: object

    def is_numeric(self) -> bool:
        return self.kind in ("int", "float", "bool")


class _ConstantReader:
    """Folds the literal sub-expressions ClickHouse would treat as constants."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        # Each node is asked about several times (as an operand, as an atom, for typing); the
        # tree outlives the reader, so node ids are stable keys.
        self._memo: dict[int, _Constant | None] = {}

    def read(self, node: exp.Expression) -> _Constant | None:
        key = id(node)
        if key not in self._memo:
            self._memo[key] = self._read(node)
        return self._memo[key]

    def _read(self, node: exp.Expression) -> _Constant | None:
        while isinstance(node, exp.Paren):
            node = node.this
        literals = literal_list(node)
        if literals is not None:
            # A long array literal read without sqlglot (an IN list is no constant of its own:
            # set_values reads it).
            return _Constant("array", tuple(_LiteralSet(literals))) if literals.array else None
        if isinstance(node, exp.Null):
            return _Constant("null", None)
        if isinstance(node, exp.Boolean):
            return _Constant("bool", bool(node.this))
        if isinstance(node, exp.Literal):
            if node.is_string:
                return _Constant("string", self._string_bytes(node))
            return _literal_number(str(node.this))
        if isinstance(node, exp.Column):
            if _is_float_keyword(node):
                return _Constant("float", _FLOAT_KEYWORDS[node.name.lower()])
            return None
        if isinstance(node, exp.HexString):
            text = str(node.this)
            return _Constant("int", int(text, 16)) if text else None
        if isinstance(node, exp.Neg):
            word = node.this
            nan_word = isinstance(word, exp.Column) and word.name.lower() == "nan"
            if nan_word and _is_float_keyword(word):
                # ClickHouse's parser reads `-nan` as the literal nan, sign bit clear (verified
                # with chdb: 0x7ff8..., where -(nan) negates it to 0xfff8...).
                return self.read(word)
            inner = self.read(node.this)
            if inner is not None and inner.kind in ("int", "float"):
                return _Constant(inner.kind, -inner.value)
            return None
        if isinstance(node, exp.Array):
            items = [self.read(item) for item in node.expressions]
            return None if any(i is None for i in items) else _Constant("array", tuple(items))
        if isinstance(node, (exp.Tuple, exp.Struct)):
            items = [self.read(item) for item in node.expressions]
            return None if any(i is None for i in items) else _Constant("tuple", tuple(items))
        if isinstance(node, exp.Cast):
            inner = self.read(node.this)
            if inner is None:
                return None
            return _cast_constant(inner, node.to.sql("clickhouse"))
        if isinstance(node, exp.Anonymous) and node.expressions:
            # toUInt8(5), toUUID('...'), toDate('...'), toDateTime('...', 'tz'),
            # toDateTime64('...', 3[, 'tz']): conversions ClickHouse folds.
            match = re.fullmatch(r"to([A-Z][A-Za-z0-9]*)", str(node.this))
            if match is None:
                return None
            arguments = [self.read(argument) for argument in node.expressions]
            if any(argument is None for argument in arguments):
                return None
            type_text = _conversion_type(match.group(1), arguments[1:])
            return None if type_text is None else _cast_constant(arguments[0], type_text)
        return None

    def _string_bytes(self, node: exp.Literal) -> bytes:
        # sqlglot decodes `\xHH` escapes into characters and then re-encodes ambiguously (a lone
        # `\xFF` and the text "ÿ" look the same), so literals with `\x` escapes are decoded from
        # the original SQL text instead.
        start, end = node.meta.get("start"), node.meta.get("end")
        if start is not None and end is not None:
            raw = self.sql[start : end + 1]
            if "\\x" in raw or "\\X" in raw:
                decoded = _decode_clickhouse_literal(raw)
                if decoded is not None:
                    return decoded
        return node.this.encode("utf-8")


_SIMPLE_ESCAPES = {
    "b": b"\b",
    "f": b"\f",
    "n": b"\n",
    "r": b"\r",
    "t": b"\t",
    "0": b"\0",
    "a": b"\a",
    "v": b"\v",
    "e": b"\x1b",
    "\\": b"\\",
    "'": b"'",
    '"': b'"',
    "N": b"",
}


def _decode_clickhouse_literal(raw: str) -> bytes | None:
    """Bytes of a single-quoted ClickHouse string literal (with quotes), as ClickHouse reads it."""
    if len(raw) < 2 or raw[0] != "'" or raw[-1] != "'":
        return None
    body = raw[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        char = body[i]
        if char == "'" and body[i + 1 : i + 2] == "'":
            out += b"'"
            i += 2
        elif char == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "xX" and re.fullmatch(r"[0-9A-Fa-f]{2}", body[i + 2 : i + 4]):
                out.append(int(body[i + 2 : i + 4], 16))
                i += 4
            elif nxt in _SIMPLE_ESCAPES:
                out += _SIMPLE_ESCAPES[nxt]
                i += 2
            else:
                # Unknown escapes keep their backslash (ClickHouse reads '\q' as two bytes).
                out += ("\\" + nxt).encode("utf-8")
                i += 2
        else:
            out += char.encode("utf-8")
            i += 1
    return bytes(out)


def _is_float_keyword(node: exp.Column) -> bool:
    """``nan`` / ``inf`` / ``infinity`` unquoted: a Float64 literal, which sqlglot reads as a
    column (verified with chdb: ``f32 = inf`` uses the index, ``f32 = nan`` is always false)."""
    identifier = node.this
    quoted = isinstance(identifier, exp.Identifier) and identifier.args.get("quoted")
    return not node.table and not quoted and node.name.lower() in _FLOAT_KEYWORDS


def _number(text: str) -> _Constant | None:
    """A number written in a string (``'42'``, ``'-0.5e3'``, ``'nan'``), or None."""
    text = text.strip()
    if _INTEGER_TEXT.fullmatch(text):
        return _Constant("int", int(text))
    if _FLOAT_TEXT.fullmatch(text):
        return _Constant("float", float(text))
    return None


def _literal_number(text: str) -> _Constant | None:
    """A numeric SQL literal typed as ClickHouse types it (wider than 64 bits: Float64)."""
    constant = _number(text)
    if constant is not None and constant.kind == "int":
        low, high = _LITERAL_INTEGERS
        if not low <= constant.value <= high:
            return _Constant("float", float(text))
    return constant


def _conversion_type(suffix: str, extra: list[_Constant]) -> str | None:
    """The target type of ``to<suffix>(x, *extra)``: ``toDateTime64(x, 3, 'UTC')`` and so on."""
    if not extra:
        return suffix
    texts = [constant.value for constant in extra]
    if suffix == "DateTime" and len(extra) == 1 and extra[0].kind == "string":
        return f"DateTime({_quote_type_text(texts[0])})"
    if suffix == "DateTime64" and extra[0].kind == "int" and 0 <= texts[0] <= 9:
        if len(extra) == 1:
            return f"DateTime64({texts[0]})"
        if len(extra) == 2 and extra[1].kind == "string":
            return f"DateTime64({texts[0]}, {_quote_type_text(texts[1])})"
    return None


def _quote_type_text(value: bytes) -> str:
    text = value.decode("utf-8", "replace")
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _cast_constant(constant: _Constant, type_text: str) -> _Constant | None:
    """``CAST(constant AS type)`` for the scalar types a comparison constant can carry."""
    from bloomskip.clickhouse.types import UnsupportedTypeError, parse_clickhouse_type

    try:
        target = parse_clickhouse_type(type_text).base()
    except UnsupportedTypeError:
        return None
    if target.name == "Float32" and constant.kind in ("int", "float", "string"):
        # A cast rounds to the nearest Float32 (`0.1::Float32`), where a comparison refuses a
        # lossy conversion (verified with chdb: `f32 = 0.1::Float32` uses the index).
        value = constant.value
        if constant.kind == "string":
            parsed = _number(value.decode("utf-8", "replace"))
            if parsed is None:
                return None
            value = parsed.value
        with np.errstate(over="ignore"):
            return _Constant("float", float(np.float32(float(value))))
    if target.name in ("Date", "Date32"):
        days = _convert_scalar(constant, target)
        return None if days is None else _Constant("date", days)
    if target.name == "DateTime":
        seconds = _convert_scalar(constant, target)
        return None if seconds is None else _Constant("datetime", (seconds, 0))
    if target.name == "DateTime64":
        if constant.kind == "float" and math.isfinite(constant.value):
            # toDateTime64(1704067201.001, 3): the number as written (its shortest repr), which
            # must be whole at the precision (verified with chdb); comparing a DateTime64 with a
            # float is a type error instead.
            scaled = Decimal(repr(constant.value)).scaleb(target.arguments[0])
            if scaled != scaled.to_integral_value():
                return None
            constant = _Constant("datetime", (int(scaled), target.arguments[0]))
        ticks = _convert_scalar(constant, target)
        return None if ticks is None else _Constant("datetime", (ticks, target.arguments[0]))
    converted = _convert_scalar(constant, target)
    if converted is None:
        return None
    if target.name in _INT_RANGES or target.name in _WIDE_RANGES:
        return _Constant("int", converted)
    if target.name in ("Float32", "Float64"):
        return _Constant("float", converted)
    if target.name in ("String", "FixedString"):
        return _Constant("string", converted)
    if target.name in ("UUID", "IPv4", "IPv6") and constant.kind == "string":
        return constant  # valid text of the type; the comparison converts it again
    return None


# ------------------------------------------------------------------------------------------
# convertFieldToType for the bloom_filter index


def _convert_scalar(constant: _Constant, target: ClickHouseType) -> object | None:
    """Convert a constant to ``target`` as ClickHouse's ``convertFieldToType`` does.

    Returns the value in the representation types.value_hashes reads (an int for integer-like
    types, date-times in the type's ticks, a float, bytes for strings and IPv6, UUID text), or
    None where ClickHouse gets NULL (the value does not fit the type) or where the conversion is
    not modelled -- the index then has no atom for it, which can only keep more granules.
    """
    name = target.name
    kind, value = constant.kind, constant.value
    if kind == "null":
        return None
    if kind == "bool":
        kind, value = "int", int(value)
    if name in _INT_RANGES or name in _WIDE_RANGES:
        if kind == "string":
            parsed = _number(value.decode("utf-8", "replace"))
            if parsed is None:
                return None
            kind, value = parsed.kind, parsed.value
        if kind == "float":
            if name in _WIDE_RANGES:
                return None  # verified with chdb: a Float64 leaves a (U)Int128/256 index unused
            if not math.isfinite(value) or value != math.floor(value):
                return None
            value = int(value)
        elif kind != "int":
            return None
        low, high = _INT_RANGES.get(name) or _WIDE_RANGES[name]
        return value if low <= value <= high else None
    if name in ("Float32", "Float64"):
        if kind == "string":
            parsed = _number(value.decode("utf-8", "replace"))
            if parsed is None:
                return None
            if name == "Float32":
                # The text is read as a Float32 (verified with chdb: `f32 = '0.1'` matches the
                # row holding toFloat32(0.1), where `f32 = 0.1` matches none).
                with np.errstate(over="ignore"):
                    return float(np.float32(float(parsed.value)))
            kind, value = parsed.kind, parsed.value
        if kind not in ("int", "float"):
            return None
        as_float = float(value)
        if math.isnan(as_float):
            # The quiet NaN of the constant's sign ('-nan' and -(nan) are 0xfff8..., verified
            # with chdb), which a Float32 narrows to and widens back from unchanged.
            return math.copysign(math.nan, as_float)
        if kind == "int" and int(as_float) != value:
            return None  # not exactly representable
        with np.errstate(over="ignore"):
            narrowed = float(np.float32(as_float))
        if name == "Float32" and narrowed != as_float:
            return None  # ClickHouse refuses a lossy Float64 -> Float32 conversion
        return as_float
    if name == "String":
        return value if kind == "string" else None
    if name == "FixedString":
        if kind != "string" or len(value) > target.arguments[0]:
            return None
        return value.ljust(target.arguments[0], b"\0")
    if name in ("Date", "Date32"):
        if kind == "date":
            days = value
        elif kind == "string":
            # The exact filter reads the text with the same reader (dataset/sql/translate.py).
            day = read_date_text(value)
            if day is None:
                return None
            days = (day - date(1970, 1, 1)).days
        else:
            return None
        low, high = (0, 2**16 - 1) if name == "Date" else (-25567, 120529)
        return days if low <= days <= high else None
    if name in ("DateTime", "DateTime64"):
        return _convert_datetime(kind, value, target)
    if name in ("Enum8", "Enum16"):
        # A label converts to its number and a number must be one of the values; anything else
        # is an error in ClickHouse (UNKNOWN_ELEMENT_OF_ENUM), so no atom here.
        if kind == "string":
            labels = {label.encode("utf-8"): number for label, number in target.arguments}
            return labels.get(value)
        if kind == "int":
            return value if value in {number for _, number in target.arguments} else None
        return None
    if name in ("IPv4", "IPv6"):
        return _convert_ip(kind, value, name)
    if name == "UUID":
        if kind != "string":
            return None
        text = value.decode("ascii", "replace")
        return (
            text
            if re.fullmatch(r"[0-9A-Fa-f]{8}(-?[0-9A-Fa-f]{4}){3}-?[0-9A-Fa-f]{12}", text)
            else None
        )
    return None


# Zones whose offset is zero at every instant: read without the time-zone database.
_UTC_ZONES = {"UTC", "Etc/UTC", "UCT", "Etc/UCT", "GMT", "Etc/GMT", "Universal", "Zulu"}
_DATETIME64_YEARS = (1900, 2299)  # the range of DateTime64 values ClickHouse keeps unclamped
_ZONE_YEARS = (1970, 2100)  # local times of other zones are converted within these years only


def _convert_datetime(kind: str, value: object, target: ClickHouseType) -> int | None:
    """A constant as a ``DateTime`` (seconds) or ``DateTime64(p)`` (10**-p s) value.

    Verified with chdb: a string is read in the column's time zone (the server's, UTC, when it
    has none), its fraction truncated to the column's precision; an integer is seconds (also for
    DateTime64); a ``DateTime``/``DateTime64`` constant is the same instant in any zone; a
    ``Date`` is midnight in the column's zone; a float, or a DateTime64 compared with a
    DateTime, is a type error in ClickHouse (no atom here).
    """
    scale = target.arguments[0] if target.name == "DateTime64" else 0
    zone = target.arguments[1] if target.name == "DateTime64" else target.arguments[0]
    if kind == "int":
        ticks = value * 10**scale
    elif kind == "string":
        ticks = _parse_datetime_text(value, zone, scale)
    elif kind == "date":
        midnight = _local_seconds(datetime(1970, 1, 1) + timedelta(days=value), zone)
        ticks = None if midnight is None else midnight * 10**scale
    elif kind == "datetime":
        source_ticks, source_scale = value
        if source_scale > scale or (target.name == "DateTime" and source_scale):
            return None
        ticks = source_ticks * 10 ** (scale - source_scale)
    else:
        return None
    if ticks is None:
        return None
    if target.name == "DateTime":
        return ticks if 0 <= ticks < 2**32 else None
    low = calendar.timegm((_DATETIME64_YEARS[0], 1, 1, 0, 0, 0)) * 10**scale
    high = calendar.timegm((_DATETIME64_YEARS[1] + 1, 1, 1, 0, 0, 0)) * 10**scale
    return ticks if low <= ticks < high else None


def _parse_datetime_text(text: bytes, zone: str | None, scale: int) -> int | None:
    """Ticks of 10**-scale s of a date-time text read in ``zone``, or None: a text ClickHouse
    refuses or reads in a way not modelled (:func:`~bloomskip.clickhouse.kinds.read_datetime_text`,
    which the exact filter reads constants with too) gets no atom."""
    reading = read_datetime_text(text)
    if reading is None:
        return None
    seconds = _local_seconds(reading.moment, zone)
    if seconds is None:
        return None
    fraction = reading.fraction[:scale].ljust(scale, "0")
    return seconds * 10**scale + (int(fraction) if scale else 0)


def _local_seconds(moment: datetime, zone: str | None) -> int | None:
    """Unix seconds of a wall-clock time in ``zone`` (None: the server's zone).

    A column without a zone is read in the server's zone, which is this machine's for chdb. It
    is taken as UTC when the local zone is UTC; with any other local zone such text gets no atom
    rather than a guess (a part from a server elsewhere: give the zone in the table's DDL).

    Returns None where the answer is not certain: an unknown zone, a time a clock change skips
    or repeats, or a year outside the range where zone offsets are converted.
    """
    if zone is None and not _local_zone_is_utc():
        return None
    if zone is None or zone in _UTC_ZONES:
        return calendar.timegm(moment.timetuple())
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if not _ZONE_YEARS[0] <= moment.year <= _ZONE_YEARS[1]:
        return None
    try:
        tzinfo = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return None
    candidates = {int(moment.replace(tzinfo=tzinfo, fold=fold).timestamp()) for fold in (0, 1)}
    if len(candidates) != 1:
        return None
    (seconds,) = candidates
    if datetime.fromtimestamp(seconds, tzinfo).replace(tzinfo=None) != moment:
        return None
    return seconds


def _local_zone_is_utc() -> bool:
    import time

    return time.timezone == 0 and time.altzone == 0 and not time.daylight


def _convert_ip(kind: str, value: object, name: str) -> int | bytes | None:
    """IPv4 as its number, IPv6 as its 16 network-order bytes (what chdb's Arrow holds).

    Verified with chdb: IPv4 text and numbers both compare; an IPv4 text against an IPv6 column
    is the IPv4-mapped address (``::ffff:a.b.c.d``).
    """
    import ipaddress

    if kind == "int":
        return value if name == "IPv4" and 0 <= value < 2**32 else None
    if kind != "string":
        return None
    try:
        address = ipaddress.ip_address(value.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        return None
    if name == "IPv4":
        return int(address) if address.version == 4 else None
    if address.version == 4:
        return ipaddress.IPv6Address("::ffff:" + str(address)).packed
    return None if address.scope_id else address.packed


def _arrow_type_for(target: ClickHouseType) -> pa.DataType:
    import pyarrow as pa

    name = target.name
    if name in _INT_RANGES or name in ("Date", "Date32", "DateTime", "DateTime64", "IPv4"):
        unsigned = name.startswith("UInt") or name in ("Bool", "Date", "DateTime", "IPv4")
        return pa.uint64() if unsigned else pa.int64()
    if name in ("Enum8", "Enum16"):
        return pa.int64()
    if name in _WIDE_RANGES:
        return pa.binary(_WIDE_WIDTHS[name])
    if name == "IPv6":
        return pa.binary(16)
    if name in ("Float32", "Float64"):
        return pa.float64()
    if name == "UUID":
        return pa.string()
    if name == "FixedString":
        return pa.binary(target.arguments[0])
    return pa.binary()


def _numpy_type(arrow_type: pa.DataType) -> type | None:
    """The numpy type of a numeric type :func:`_arrow_type_for` gives, else None."""
    import pyarrow as pa

    if pa.types.is_int64(arrow_type):
        return np.int64
    if pa.types.is_uint64(arrow_type):
        return np.uint64
    if pa.types.is_float64(arrow_type):
        return np.float64
    return None


@dataclass(frozen=True)
class _Values:
    """Converted constants of one ClickHouse type, hashed when an index first probes them.

    Hashing waits so that the values of many atoms (an OR of 100,000 comparisons) are hashed in
    one batch once they are merged. ``values`` is a tuple, or a numpy array for the integers of
    a long literal list (converted in one step, see :func:`_literal_set_elements`).
    """

    values: tuple | np.ndarray
    element_type: ClickHouseType
    all_required: bool = False

    @staticmethod
    def concat(parts: list[_Values]) -> _Values:
        element_type = parts[0].element_type
        if any(isinstance(part.values, np.ndarray) for part in parts):
            # Integers only: every part's values fit the element type's array type.
            dtype = _numpy_type(_arrow_type_for(element_type.base()))
            values = np.concatenate([np.asarray(part.values, dtype) for part in parts])
            return _Values(values, element_type, False)
        return _Values(tuple(v for part in parts for v in part.values), element_type, False)

    def arrow(self) -> pa.Array:
        """The values as an Arrow array of the element type's storage (what is hashed)."""
        base = self.element_type.base()
        values = self.values
        width = _WIDE_WIDTHS.get(base.name)
        if width is not None:
            values = [(value % 2 ** (8 * width)).to_bytes(width, "little") for value in values]
        return _arrow_values(values, _arrow_type_for(base))

    @property
    def hashes(self) -> np.ndarray:
        """bloom_filter value hashes of the values.

        Floats hash their bit pattern, so 0.0 and -0.0 hash apart although they compare equal.
        ClickHouse probes only the constant's own sign and loses the rows holding the other
        one (verified with chdb: ``f = -0.0`` counts 0 rows with the index, 1 without). Here a
        zero is probed with both signs when any value may match, and dropped when all must
        (hasAll). A NaN is probed with its own bits, as an ``IN`` set holds them (its sign
        is the constant's, see :func:`_convert_scalar`).
        """
        cached = self.__dict__.get("_hashes")
        if cached is None:
            cached = _hash_values(self.values, self.element_type, self.all_required)
            object.__setattr__(self, "_hashes", cached)
        return cached


def _hash_values(
    values: tuple | np.ndarray, element_type: ClickHouseType, all_required: bool
) -> np.ndarray:
    from bloomskip.clickhouse.types import value_hashes

    base = element_type.base()
    if base.name in ("Float32", "Float64"):
        zeros = [v for v in values if v == 0.0]
        values = [v for v in values if v != 0.0]
        if zeros and not all_required:
            values += [0.0, -0.0]
    if not len(values):
        return np.empty(0, np.uint64)
    width = _WIDE_WIDTHS.get(base.name)
    if width is not None:
        # Two's complement, little-endian: the bytes of ClickHouse's in-memory wide integer.
        values = [(value % 2 ** (8 * width)).to_bytes(width, "little") for value in values]
    hashes, _ = value_hashes(_arrow_values(values, _arrow_type_for(base)), str(base))
    return hashes


def _arrow_values(values: Sequence | np.ndarray, arrow_type: pa.DataType) -> pa.Array:
    """An Arrow array of converted constants, built from its buffers.

    ``pyarrow.array`` (and ``pyarrow.scalar``) ask pandas whether the input is one of its
    objects, and so import it: 0.2-0.4 s of a cold ``bloomskip query``. The buffers are
    written here instead: numbers through numpy, strings and bytes as offsets and data.
    """
    import pyarrow as pa

    count = len(values)
    dtype = _numpy_type(arrow_type)
    if dtype is not None:
        data = np.ascontiguousarray(np.asarray(values, dtype))
        return pa.Array.from_buffers(arrow_type, count, [None, pa.py_buffer(data)])
    items = [value.encode("utf-8") if isinstance(value, str) else value for value in values]
    data = pa.py_buffer(b"".join(items))
    if pa.types.is_fixed_size_binary(arrow_type):
        return pa.Array.from_buffers(arrow_type, count, [None, data])
    offsets = np.zeros(count + 1, np.int64)
    np.cumsum(np.fromiter(map(len, items), np.int64, count), out=offsets[1:])
    if offsets[-1] < 2**31:
        offsets = offsets.astype(np.int32)
    else:
        arrow_type = pa.large_string() if pa.types.is_string(arrow_type) else pa.large_binary()
    return pa.Array.from_buffers(arrow_type, count, [None, pa.py_buffer(offsets), data])


# ------------------------------------------------------------------------------------------
# Atoms


@dataclass(frozen=True)
class _BloomAtom:
    """A bloom_filter atom: AND over components, each any/all of its value hashes matching."""

    function: str  # equals, not_equals, in, not_in, has, has_any, has_all
    components: tuple[tuple[int, _Values], ...]

    @property
    def negated(self) -> bool:
        return self.function in ("not_equals", "not_in")

    @property
    def useful(self) -> bool:
        # ClickHouse 26.9 lists a bloom_filter index only for positive atoms (`x != 1` alone
        # leaves it out of EXPLAIN), verified with chdb.
        return not self.negated

    def evaluate(self, granules: BloomFilterGranules) -> np.ndarray:
        result = np.ones(len(granules), dtype=bool)
        # parquet_bloom_filter granules hash the constants themselves (XXH64 of the plain
        # encoding), so they take the constants, not bloom_filter's value hashes.
        literals_present = getattr(granules, "literals_present", None)
        for column, values in self.components:
            if literals_present is not None:
                present = literals_present(column, values.arrow(), str(values.element_type))
            else:
                present = granules.hashes_present(column, values.hashes)  # (granules, values)
            if self.function == "has_all":
                result &= present.all(axis=1)
            else:
                result &= present.any(axis=1)
        return result


@dataclass(frozen=True)
class _TextAtom:
    """A text-index atom: any/all over alternatives, each an AND of (column, tokens) probes."""

    # equals, not_equals, has, in, not_in, multi_search, has_any, has_all, match, token_any,
    # token_all (hasAnyTokens / hasAllTokens, which ClickHouse itself does not prune with)
    function: str
    alternatives: tuple[tuple[tuple[int, tuple[bytes, ...]], ...], ...]

    @property
    def negated(self) -> bool:
        return self.function in ("not_equals", "not_in")

    @property
    def useful(self) -> bool:
        # MergeTreeConditionBloomFilterText::alwaysUnknownOrTrue counts NOT_EQUALS / NOT_IN too.
        return True

    def evaluate(self, granules: TextGranules) -> np.ndarray:
        count = len(granules)
        # alternative_ok[g, a]: granule g holds every token alternative a needs, on every column.
        alternative_ok = np.ones((count, len(self.alternatives)), dtype=bool)
        columns = {column for probes in self.alternatives for column, _ in probes}
        for column in columns:
            token_lists = [
                [
                    token
                    for probe_column, tokens in probes
                    if probe_column == column
                    for token in tokens
                ]
                for probes in self.alternatives
            ]
            alternative_ok &= granules.token_sets_present(column, token_lists)
        if self.function in ("has_all", "token_all"):
            return alternative_ok.all(axis=1)
        return alternative_ok.any(axis=1)


_AtomResult = _BloomAtom | _TextAtom | object | None


@dataclass(frozen=True)
class _Element:
    """One RPN element: an operator, a constant, ``unknown`` or an atom."""

    op: str  # atom, unknown, true, false, not, and, or
    atom: _BloomAtom | _TextAtom | None = None


# ------------------------------------------------------------------------------------------
# The compiled condition


class IndexCondition:
    """A WHERE expression compiled against one skip index.

    Attributes:
        where: The predicate text.
        useful: False when no atom of the predicate can use this index (ClickHouse then leaves
            the index out of ``EXPLAIN indexes = 1`` and reads every granule).
        beyond_clickhouse: The condition holds atoms ClickHouse has none for (``hasAnyTokens``
            / ``hasAllTokens`` on a text index), so it may keep fewer granules than ClickHouse
            does; ``compile_condition(..., as_clickhouse=True)`` gives ClickHouse's own.

    Example:
        >>> from bloomskip.clickhouse.ddl import parse_index_definition
        >>> d = parse_index_definition("v TYPE bloom_filter")
        >>> compile_condition("v != 3", d, {"v": "UInt64"}).useful
        False
    """

    def __init__(self, where: str, definition: IndexDefinition, rpn: list[_Element]) -> None:
        self.where = where
        self.definition = definition
        self.rpn = rpn
        self.useful = _is_useful(rpn)
        self.beyond_clickhouse = any(
            element.op == "atom" and element.atom.function in _BEYOND_CLICKHOUSE for element in rpn
        )

    @property
    def atom_count(self) -> int:
        """How many atoms of the predicate the index can evaluate."""
        return sum(1 for element in self.rpn if element.op == "atom")

    def may_match(self, granules: Granules | IndexedGranules) -> np.ndarray:
        """Which index granules may hold a row satisfying the predicate.

        Args:
            granules: The granules of an index of this condition's definition: a
                :class:`~bloomskip.clickhouse.granule.Granules`, or what holds one (such as a
                :class:`~bloomskip.clickhouse.index.SkipIndex`).

        Returns:
            A bool array, one per index granule; False means the granule can be skipped.

        Raises:
            ValueError: Granules of the other index kind (text granules for a bloom_filter
                condition, or the reverse).
        """
        if not isinstance(granules, Granules):
            granules = granules.granules
        kind = _granules_kind(self.definition.type)
        if not isinstance(granules, kind):
            raise ValueError(
                f"a {self.definition.type} condition cannot probe {type(granules).__name__}"
            )
        count = len(granules)
        ones = np.ones(count, dtype=bool)
        zeros = np.zeros(count, dtype=bool)
        stack: list[tuple[np.ndarray, np.ndarray]] = []
        for element in self.rpn:
            if element.op == "unknown":
                stack.append((ones, ones))
            elif element.op == "true":
                stack.append((ones, zeros))
            elif element.op == "false":
                stack.append((zeros, ones))
            elif element.op == "atom":
                matches = element.atom.evaluate(granules)
                mask = (matches, ones)
                stack.append((mask[1], mask[0]) if element.atom.negated else mask)
            elif element.op == "not":
                can_be_true, can_be_false = stack.pop()
                stack.append((can_be_false, can_be_true))
            else:
                right_true, right_false = stack.pop()
                left_true, left_false = stack.pop()
                if element.op == "and":
                    stack.append((left_true & right_true, left_false | right_false))
                else:
                    stack.append((left_true | right_true, left_false & right_false))
        if len(stack) != 1:
            raise ConditionError(f"malformed condition for {self.where!r}")
        return stack[0][0].copy()

    def select(self, index: IndexedGranules) -> np.ndarray:
        """Data granules a query with this condition reads after the index.

        Args:
            index: The index granules and the data granules each covers (a
                :class:`~bloomskip.clickhouse.index.SkipIndex`).

        Returns:
            ``int64`` data granule numbers that may match, ascending (what ``EXPLAIN indexes = 1``
            counts as selected granules).

        Example:
            >>> from bloomskip.clickhouse.ddl import parse_index_definition
            >>> from bloomskip.clickhouse.index import SkipIndex
            >>> import pyarrow as pa
            >>> d = parse_index_definition("v TYPE bloom_filter GRANULARITY 2")
            >>> idx = SkipIndex.build(d, pa.table({"v": list(range(10))}), [4, 4, 2])
            >>> compile_condition("v = 9", d, {"v": "Int64"}).select(idx).tolist()
            [2]
        """
        mask = self.may_match(index.granules)
        selected = np.repeat(mask, np.diff(index.data_granule_bounds))
        return np.flatnonzero(selected).astype(np.int64)


def _granules_kind(index_type: str) -> type:
    if index_type == "parquet_bloom_filter":
        from bloomskip.parquet.granules import ParquetBloomGranules

        return ParquetBloomGranules
    return BloomFilterGranules if index_type == "bloom_filter" else TextGranules


def _is_useful(rpn: list[_Element]) -> bool:
    """ClickHouse's ``rpnEvaluatesAlwaysUnknownOrTrue``, negated: can the index prune at all?"""
    stack: list[str] = []
    for element in rpn:
        if element.op == "true":
            stack.append("always_true")
        elif element.op == "false":
            stack.append("always_false")
        elif element.op == "unknown":
            stack.append("unknown")
        elif element.op == "atom":
            stack.append("useful" if element.atom.useful else "unknown")
        elif element.op == "not":
            continue  # ClickHouse leaves the state unchanged under NOT
        else:
            right, left = stack.pop(), stack.pop()
            short, other = (
                ("always_false", "always_true")
                if element.op == "and"
                else ("always_true", "always_false")
            )
            if short in (left, right):
                stack.append(short)
            elif "useful" in (left, right):
                stack.append("useful")
            elif "unknown" in (left, right):
                stack.append("unknown")
            else:
                stack.append(other)
    return bool(stack) and stack[0] == "useful"


# ------------------------------------------------------------------------------------------
# Compilation


def _canonical(node: exp.Expression) -> str:
    """A comparable name for an expression (ClickHouse compares column names of DAG nodes)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column) and not node.table:
        return node.name
    return node.sql(dialect="clickhouse")


def _parse(sql: str) -> exp.Expression:
    """The parsed text, shared by every index a WHERE is compiled for and by the dataset's
    translation (never modified)."""
    from bloomskip._sql import SQLSyntaxError, parse_shared

    try:
        return parse_shared(sql)
    except SQLSyntaxError as exc:
        raise ConditionError(f"cannot parse WHERE expression {sql!r}: {exc}") from exc


@lru_cache(maxsize=4)
def _parsed_where(sql: str) -> tuple[exp.Expression, _ConstantReader]:
    """The tree of a WHERE and the reader of its constants, shared by every index the WHERE is
    compiled for (the reader's memo is keyed by the nodes of exactly this tree)."""
    tree = _parse(sql)
    # The literals' offsets are positions in the text sqlglot read, which differs from the
    # WHERE when long literal lists were read without it (see _sql.parse_shared).
    return tree, _ConstantReader(tree.meta.get("parsed_text", sql))


@lru_cache(maxsize=1024)
def _canonical_text(sql: str) -> str:
    return _canonical(_parse(sql))


def _index_column_types(
    definition: IndexDefinition, column_types: Mapping[str, str] | Sequence[str]
) -> list[ClickHouseType]:
    from bloomskip.clickhouse.types import parse_clickhouse_type

    expressions = list(definition.expressions)
    if column_types is None:
        raise ConditionError("column types are needed to compile a condition")
    if isinstance(column_types, Mapping):
        if all(expression in column_types for expression in expressions):
            texts = [column_types[expression] for expression in expressions]
        else:
            texts = list(definition.index_column_types(dict(column_types)))
    else:
        texts = list(column_types)
        if len(texts) != len(expressions):
            raise ConditionError(
                f"{len(texts)} column types given for an index of {len(expressions)} columns"
            )
    return [parse_clickhouse_type(str(text)) for text in texts]


def compile_condition(
    where: str,
    definition: IndexDefinition,
    column_types: Mapping[str, str] | Sequence[str],
    *,
    as_clickhouse: bool = False,
) -> IndexCondition:
    """Compile a WHERE expression against one skip index.

    Args:
        where: The predicate, ClickHouse SQL (what follows ``WHERE``).
        definition: The index (:class:`~bloomskip.clickhouse.ddl.IndexDefinition`).
        column_types: ClickHouse types: a mapping of source column (or index expression) to type,
            or a sequence with one type per index expression.
        as_clickhouse: Leave out the atoms ClickHouse has none for (``hasAnyTokens`` /
            ``hasAllTokens``, which bloomskip prunes with and ClickHouse 26.9 does not), to get
            the granules ClickHouse itself reads.

    Returns:
        The compiled condition; evaluate it with :meth:`IndexCondition.may_match`.

    Raises:
        ConditionError: If the predicate is not valid SQL.

    Example:
        >>> from bloomskip.clickhouse.ddl import parse_index_definition
        >>> d = parse_index_definition("INDEX i v TYPE bloom_filter(0.01)")
        >>> compile_condition("v IN (1, 2) AND w > 3", d, {"v": "UInt32"}).atom_count
        1
    """
    from bloomskip._sql import call_deep

    tree, constants = _parsed_where(where)
    types = _index_column_types(definition, column_types)
    keys = [_canonical_text(expression) for expression in definition.expressions]
    # parquet_bloom_filter prunes the atoms bloom_filter does (=, IN, has, ...): the same RPN.
    if definition.type in ("bloom_filter", "parquet_bloom_filter"):
        builder: _RpnBuilder = _BloomRpnBuilder(where, keys, types, constants, as_clickhouse)
    else:
        tokenizer = QueryTokenizer.for_index(definition)
        builder = _TextRpnBuilder(where, keys, types, tokenizer, constants, as_clickhouse)
    try:
        # AND / OR / NOT are walked without recursion; what remains (an operand's own nesting,
        # printed by sqlglot to compare it with the index expression) is as deep as the parser
        # allows and gets a large stack when it needs one.
        rpn = call_deep(builder.build, tree)
    except RecursionError:
        raise ConditionError(
            f"WHERE expression nests too deeply to compile: {where[:80]!r}"
        ) from None
    return IndexCondition(where, definition, rpn)


def check_identifiers(where: str, columns: Collection[str]) -> None:
    """Raise ClickHouse's error for a WHERE naming a column the table does not have.

    ClickHouse matches identifiers exactly (verified with chdb: ``S = '1'`` on a column ``s``
    fails with UNKNOWN_IDENTIFIER), so a name that differs only in case is not the column.
    Call this where every column of the table is known; :func:`compile_condition` sees only
    the index columns and cannot tell.

    Args:
        where: The predicate.
        columns: Every column of the table.

    Raises:
        ConditionError: The predicate does not parse, or names an unknown column.

    Example:
        >>> check_identifiers("s = 'a' AND arrayExists(x -> x = 1, arr)", ["s", "arr"])
        >>> try:
        ...     check_identifiers("S = 'a'", ["s"])
        ... except ConditionError as exc:
        ...     print(exc)
        Unknown expression or function identifier `S`. Maybe you meant: ['s']
    """
    tree = _parse(where)
    known = set(columns)
    lambda_names = {
        parameter.name for node in tree.find_all(exp.Lambda) for parameter in node.expressions
    }
    for node in tree.find_all(exp.Column):
        name = node.name
        if node.table or name in known or name in lambda_names or _is_float_keyword(node):
            continue
        if name.startswith("_"):
            continue  # virtual columns (_part, _part_offset, ...) exist in every table
        similar = sorted(c for c in known if c.lower() == name.lower())
        hint = f". Maybe you meant: {similar}" if similar else ""
        raise ConditionError(f"Unknown expression or function identifier `{name}`{hint}")


def index_never_used_reason(index_type: str, ch_type: str) -> str | None:
    """Why no predicate can ever use an index of ``index_type`` over a column of ``ch_type``.

    Args:
        index_type: ``"bloom_filter"``, ``"ngrambf_v1"``, ``"tokenbf_v1"`` or ``"sparse_grams"``.
        ch_type: The ClickHouse type of one index column (an expression's type for an
            expression index).

    Returns:
        A one-line reason, or None when some predicate can use the index. The reasons: the type
        is one ClickHouse refuses for the index, or a text index over IPv6 (see below).

    Raises:
        ValueError: An unknown index type.

    Example:
        >>> index_never_used_reason("bloom_filter", "DateTime64(3)") is None
        True
        >>> index_never_used_reason("tokenbf_v1", "IPv6")[:43]
        'a tokenbf_v1 index over IPv6 is never used:'
    """
    from bloomskip.clickhouse.ddl import INDEX_TYPES
    from bloomskip.clickhouse.types import (
        UnsupportedTypeError,
        check_bloom_filter_type,
        check_text_type,
    )

    if index_type == "parquet_bloom_filter":
        from bloomskip.parquet.granules import probe_arrow_type

        if probe_arrow_type(ch_type) is None:
            return f"a parquet_bloom_filter index probes no constant of {ch_type}"
        return None
    if index_type not in INDEX_TYPES:
        raise ValueError(f"unknown index type {index_type!r}")
    check = check_bloom_filter_type if index_type == "bloom_filter" else check_text_type
    try:
        parsed = check(ch_type)
    except UnsupportedTypeError as exc:
        return f"ClickHouse refuses a {index_type} index over {ch_type}: {exc}"
    if index_type != "bloom_filter" and _element_name(parsed) == "IPv6":
        return (
            f"a {index_type} index over {ch_type} is never used: the rows are tokenized as 16 "
            "raw bytes and a predicate's constant as text, so ClickHouse's own use of it loses "
            "rows; use bloom_filter"
        )
    return None


_IN_AS_COMPARISON = {"in": "equals", "globalIn": "equals", "notIn": "notEquals"}
_IN_AS_COMPARISON["globalNotIn"] = "notEquals"
_INVERSE = {"equals": "notEquals", "notEquals": "equals", "in": "notIn", "notIn": "in"}
_INVERSE.update({"like": "notLike", "notLike": "like", "globalIn": "globalNotIn"})
_INVERSE["globalNotIn"] = "globalIn"


@lru_cache(maxsize=1)
def _binary_functions() -> dict[type, str]:
    return {
        exp.EQ: "equals",
        exp.NEQ: "notEquals",
        exp.GT: "greater",
        exp.GTE: "greaterOrEquals",
        exp.LT: "less",
        exp.LTE: "lessOrEquals",
        exp.ArrayContains: "has",
        exp.StartsWith: "startsWith",
        exp.EndsWith: "endsWith",
        exp.RegexpLike: "match",
    }


def _function_of(node: exp.Expression) -> _Function | None:
    """The ClickHouse function name and arguments of a sqlglot node, or None for non-functions."""
    name = _binary_functions().get(type(node))
    if name is not None:
        return name, [node.this, node.expression]
    if isinstance(node, exp.Like):
        return ("notLike" if node.args.get("negate") else "like"), [node.this, node.expression]
    if isinstance(node, exp.In):
        name = "globalIn" if node.args.get("is_global") else "in"
        if node.args.get("query") is not None:
            return name, [node.this, None]
        values = node.expressions or ([node.args["field"]] if node.args.get("field") else [])
        return name, [node.this, ("set", values)]
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
        return "arrayElement", [node.this, node.expressions[0]]
    if isinstance(node, (exp.Tuple, exp.Struct)):
        return "tuple", list(node.expressions)
    if isinstance(node, exp.Anonymous):
        return str(node.this), list(node.expressions)
    return None


_COMPARISONS = ("equals", "notEquals", "less", "greater", "lessOrEquals", "greaterOrEquals")


def _literal_type(constant: _Constant) -> str | None:
    """The ClickHouse type of a numeric literal (the smallest integer type that holds it)."""
    if constant.kind == "float":
        return "Float64"
    if constant.kind != "int":
        return None
    value = constant.value
    for name in ("UInt8", "UInt16", "UInt32", "UInt64") if value >= 0 else ():
        if value <= _INT_RANGES[name][1]:
            return name
    for name in ("Int8", "Int16", "Int32", "Int64"):
        if _INT_RANGES[name][0] <= value:
            return name
    return None


def _strip_not(node: exp.Expression, negate: bool) -> tuple[exp.Expression, bool]:
    """Remove parentheses and NOTs around ``node``, counting the NOTs into ``negate``."""
    while isinstance(node, (exp.Paren, exp.Not)):
        if isinstance(node, exp.Not):
            negate = not negate
        node = node.this
    return node, negate


def _is_logical(node: exp.Expression) -> bool:
    return isinstance(node, (exp.And, exp.Or))


def _is_and(node: exp.Expression) -> bool:
    return isinstance(node, exp.And)


def _operands(node: exp.Expression) -> list[exp.Expression]:
    """The operands of an AND / OR chain, left to right, through nested ones of the same kind."""
    kind = type(node)
    operands = []
    pending = [node]
    while pending:
        current = pending.pop()
        while isinstance(current, exp.Paren):
            current = current.this
        if type(current) is kind:
            pending += [current.expression, current.this]
        else:
            operands.append(current)
    return operands


def _merge_any_atoms(parts: list) -> list:
    """Merge the operands of an OR that are single positive atoms of the 'any value' kind."""
    merged_bloom: dict[int, list[_Values]] = {}
    text_alternatives: list = []
    text_functions: set[str] = set()
    kept: list = []
    for part in parts:
        atom = part[0].atom if isinstance(part, list) and len(part) == 1 else None
        if (
            isinstance(atom, _BloomAtom)
            and atom.function in _ANY_BLOOM
            and len(atom.components) == 1
        ):
            column, values = atom.components[0]
            merged_bloom.setdefault(column, []).append(values)
        elif isinstance(atom, _TextAtom) and atom.function not in _NOT_ANY_TEXT:
            text_alternatives.extend(atom.alternatives)
            text_functions.add(atom.function)
        else:
            kept.append(part)
    merged = [
        [_Element("atom", _BloomAtom("in", ((column, _Values.concat(values)),)))]
        for column, values in merged_bloom.items()
    ]
    if text_functions:
        # An atom of no alternatives (hasAnyTokens(s, [])) is false and merges as such; the
        # merged atom stays marked as bloomskip's own when one of its parts is.
        function = "token_any" if text_functions & set(_BEYOND_CLICKHOUSE) else "in"
        merged.append([_Element("atom", _TextAtom(function, tuple(text_alternatives)))])
    return merged + kept


# Atoms whose granule mask is "any of its values is present" (one column), and text atoms that
# are not: these cannot be merged into an IN.
_ANY_BLOOM = ("equals", "in", "has", "has_any")
_NOT_ANY_TEXT = ("not_equals", "not_in", "has_all", "token_all")
# Text atoms of bloomskip's own (ClickHouse 26.9 prunes nothing for them).
_BEYOND_CLICKHOUSE = ("token_any", "token_all")


class _RpnBuilder:
    """WHERE tree -> RPN, with the atom extraction left to the index type."""

    def __init__(
        self,
        sql: str,
        keys: list[str],
        types: list[ClickHouseType],
        constants: _ConstantReader | None = None,
        as_clickhouse: bool = False,
    ) -> None:
        self.sql = sql
        self.constants = constants or _ConstantReader(sql)
        self.keys = keys
        self.types = types
        # Atoms ClickHouse has none for (see TOKEN_SET_FUNCTIONS) are left out when True.
        self.as_clickhouse = as_clickhouse

    def key_position(self, node: exp.Expression) -> int | None:
        name = _canonical(node)
        return self.keys.index(name) if name in self.keys else None

    def named_key(self, text: str) -> int | None:
        name = _canonical_text(text)
        return self.keys.index(name) if name in self.keys else None

    def build(self, tree: exp.Expression) -> list[_Element]:
        """The RPN of the predicate, built without recursion over AND / OR / NOT.

        sqlglot nests a chain ``a OR b OR c ...`` one level per term, so the tree is walked with
        an explicit stack: an AND / OR is flattened into its operands (ClickHouse's RPN of an
        n-ary AND is the same left-to-right pairing), NOT is pushed down to the atoms (De
        Morgan) as ClickHouse does, and under an OR the positive atoms of the operands are
        merged into one (an OR of ``x = 1``, ``x = 2`` ... probes like ``x IN (1, 2, ...)``,
        with the same masks), so pruning time grows with the number of values only.
        """
        collecting = gc.isenabled()
        # A long predicate is a tree of some million objects; the collector would walk it again
        # and again while the atoms are allocated (half the time for 100,000 terms).
        gc.disable()
        try:
            return self._build(tree)
        finally:
            if collecting:
                gc.enable()

    def _build(self, tree: exp.Expression) -> list[_Element]:
        rpn: list[_Element] = []
        # Work items: (node, negate) still to expand, or a list of elements ready to emit.
        work: list[tuple[exp.Expression, bool] | list[_Element]] = [(tree, False)]
        while work:
            item = work.pop()
            if isinstance(item, list):
                rpn.extend(item)
                continue
            node, negate = _strip_not(*item)
            if not _is_logical(node):
                self._leaf(node, rpn, negate)
                continue
            is_and = _is_and(node) != negate
            operator = _Element("and" if is_and else "or")
            parts: list[tuple[exp.Expression, bool] | list[_Element]] = []
            for operand in _operands(node):
                operand, operand_negate = _strip_not(operand, negate)
                if _is_logical(operand):
                    parts.append((operand, operand_negate))
                else:
                    elements: list[_Element] = []
                    self._leaf(operand, elements, operand_negate)
                    parts.append(elements)
            if not is_and:
                parts = _merge_any_atoms(parts)
            sequence: list[tuple[exp.Expression, bool] | list[_Element]] = [parts[0]]
            for part in parts[1:]:
                sequence += [part, [operator]]
            work.extend(reversed(sequence))
        return rpn

    def _leaf(self, node: exp.Expression, rpn: list[_Element], negate: bool) -> None:
        """Append the elements of one operand that is not AND / OR / NOT."""
        constant = self.constants.read(node)
        if negate and constant is not None and constant.is_numeric():
            # ClickHouse folds `NOT 0` into the constant 1 before the index sees it.
            rpn.append(_Element("false" if constant.value else "true"))
            return
        function = _function_of(node)
        if negate and function is not None and function[0] in _INVERSE:
            # not(equals) -> notEquals and so on: the inverse atom, as ClickHouse rewrites it.
            self._append_atom(node, (_INVERSE[function[0]], function[1]), rpn)
            return
        self._append_atom(node, function, rpn)
        if negate:
            rpn.append(_Element("not"))

    def _append_atom(
        self, node: exp.Expression, function: _Function | None, rpn: list[_Element]
    ) -> None:
        if function is not None:
            self.check_typing(function)
        constant = self.constants.read(node)
        if constant is None and function is not None and self._is_empty_string_test(function):
            rpn.append(_Element("unknown"))
            return
        if constant is not None:
            if constant.kind in ("int", "float", "bool"):
                rpn.append(_Element("true" if constant.value else "false"))
            else:
                rpn.append(_Element("unknown"))
            return
        atom = self.atom(node, function) if function is not None else None
        if atom is None or atom is _UNKNOWN:
            rpn.append(_Element("unknown"))
        else:
            rpn.append(_Element("atom", atom))

    def atom(self, node: exp.Expression, function: _Function) -> _AtomResult:
        """The atom for one non-logical node, ``_UNKNOWN``, or None (no atom)."""
        raise NotImplementedError

    def check_typing(self, function: _Function) -> None:
        """Raise the errors ClickHouse raises for a comparison or call, before any index use.

        Verified with chdb: comparing a String / FixedString column with a number has no
        supertype (NO_COMMON_TYPE; ``IN`` converts its elements instead, and works), and the
        multiSearch functions take at most 255 needles. Only index columns have known types here.
        """
        name, arguments = function
        if name in TOKEN_SET_FUNCTIONS:
            self._check_token_set(name, arguments)
        if name.startswith("multiSearch") and len(arguments) == 2:
            needles = self.constants.read(arguments[1])
            if needles is not None and needles.kind == "array" and len(needles.value) > 255:
                raise ConditionError(
                    f"Number of arguments for function {name} doesn't match: passed "
                    f"{len(needles.value)}, should be at most 255"
                )
        if name not in _COMPARISONS or len(arguments) != 2:
            return
        types = []
        for argument in arguments:
            constant = self.constants.read(argument)
            if constant is not None:
                types.append(_literal_type(constant))
                continue
            position = self.key_position(argument)
            types.append(None if position is None else self.types[position])
        # ClickHouse names the column's type without Nullable / LowCardinality (verified).
        names = [str(t.base()) if t is not None and not isinstance(t, str) else t for t in types]
        if None in names:
            return
        strings = [
            not isinstance(t, str) and _element_name(t) in ("String", "FixedString") for t in types
        ]
        numbers = [isinstance(t, str) and t.startswith(("UInt", "Int", "Float")) for t in types]
        if (strings[0] and numbers[1]) or (strings[1] and numbers[0]):
            if any(not isinstance(t, str) and t.name == "Array" for t in types):
                return
            raise ConditionError(
                f"There is no supertype for types {names[0]}, {names[1]} because some of them "
                f"are String/FixedString/Enum and some of them are not: function {name}"
            )

    def _check_token_set(self, name: str, arguments: list) -> None:
        """ClickHouse's argument checks of ``hasAnyTokens`` / ``hasAllTokens`` (verified with
        chdb 4.4), in its words: 2 or 3 arguments, an input of (an Array of) String or
        FixedString, constant String or Array(String) needles, a known tokenizer name. Only
        index columns have known types here, and a needle expression the constant reader does
        not fold (``concat(...)``, which ClickHouse folds) is let through."""
        if len(arguments) not in (2, 3):
            plural = "" if len(arguments) == 1 else "s"
            raise ConditionError(
                f"An incorrect number of arguments was specified for function '{name}'. "
                "Expected 2 mandatory arguments and 1 optional argument, got "
                f"{len(arguments)} argument{plural}"
            )
        position = self.key_position(arguments[0])
        if position is not None:
            column_type = self.types[position].base()
            element = column_type.arguments[0] if column_type.name == "Array" else column_type
            element_name = element.base().name if not isinstance(element, str) else element
            if element_name not in ("String", "FixedString"):
                raise ConditionError(
                    f"A value of illegal type was provided as 1st argument 'input' to function "
                    f"'{name}'. Expected: String, FixedString, Array(String) or "
                    f"Array(FixedString), got: {self.types[position]}"
                )
        needles = arguments[1]
        constant = self.constants.read(needles)
        expected = (
            f"A value of illegal type was provided as 2nd argument 'needles' to function "
            f"'{name}'. Expected: const String or const Array(String), got: "
        )
        if constant is None:
            column = self.key_position(needles)
            if isinstance(needles, exp.Column) or column is not None:
                got = str(self.types[column]) if column is not None else "a column"
                raise ConditionError(expected + got)
        elif constant.kind in ("int", "float", "bool", "tuple", "date", "datetime") or (
            constant.kind == "array" and any(e.kind != "string" for e in constant.value)
        ):
            raise ConditionError(expected + _constant_type_name(constant))
        if len(arguments) == 3:
            tokenizer = self.constants.read(arguments[2])
            if tokenizer is not None and tokenizer.kind == "string":
                text = tokenizer.value.decode("utf-8", "replace")
                if text not in TOKENIZER_NAMES:
                    raise ConditionError(f"Unknown tokenizer: '{text}'")

    def _is_empty_string_test(self, function: _Function) -> bool:
        """``s = ''`` / ``s != ''`` on a plain String or FixedString index column.

        ClickHouse rewrites these into ``empty(s)`` / ``notEmpty(s)``, which no Bloom-filter
        index understands (verified with chdb for bloom_filter and tokenbf_v1). The rewrite does
        not happen for Nullable or LowCardinality columns.
        """
        name, arguments = function
        if name not in ("equals", "notEquals") or len(arguments) != 2:
            return False
        for key, other in (arguments, arguments[::-1]):
            constant = self.constants.read(other)
            if constant is None or constant.kind != "string" or constant.value != b"":
                continue
            position = self.key_position(key)
            if position is not None and self.types[position].name in ("String", "FixedString"):
                return True
        return False

    def set_values(self, argument: object) -> list[_Constant] | None:
        """The explicit elements of an IN set, or None (subquery, table, non-constant)."""
        if argument is None:
            return None
        if isinstance(argument, tuple) and argument[0] == "set":
            items = argument[1]
            literals = literal_list(items[0]) if len(items) == 1 else None
            if literals is not None and not literals.array:
                return _LiteralSet(literals)
            if len(items) == 1:
                # `x IN (1, 2)` parses as a list, `x IN ((1, 2))` and `x IN [1, 2]` as one item.
                single = self.constants.read(items[0])
                if single is not None and single.kind in ("array",):
                    return list(single.value)
            values = [self.constants.read(item) for item in items]
            return None if any(v is None for v in values) else values
        if isinstance(argument, (exp.Tuple, exp.Array, exp.Paren, exp.Literal)):
            constant = self.constants.read(argument)
            if constant is None:
                return None
            return list(constant.value) if constant.kind in ("tuple", "array") else [constant]
        return None


# ------------------------------------------------------------------------------------------
# bloom_filter


class _BloomRpnBuilder(_RpnBuilder):
    """``MergeTreeIndexConditionBloomFilter::extractAtomFromTree``."""

    def atom(
        self, node: exp.Expression, function: _Function, parent: _Function | None = None
    ) -> _AtomResult:
        name, arguments = function
        if parent is None:
            # indexOf(...) is looked for one level down, inside a comparison.
            for argument in arguments:
                inner = _function_of(argument) if argument is not None else None
                if inner is not None and inner[0] == "indexOf":
                    found = self.atom(argument, inner, parent=function)
                    if found is not None:
                        return found
        if len(arguments) != 2:
            return None
        if (name == "indexOf") != (parent is not None):
            return None
        left, right = arguments
        if name in ("in", "globalIn", "notIn", "globalNotIn"):
            values = self.set_values(right)
            if values is None:
                return None
            if len(values) == 1 and values[0].kind != "tuple":
                # ClickHouse rewrites a one-element IN into a comparison (verified with chdb:
                # `x IN (300)` on UInt8 leaves the index unused, as `x = 300` does), but its
                # element is converted like a set's (`s IN (17)` probes '17').
                value = values[0]
                position = self.key_position(left)
                if position is not None and _element_name(self.types[position]) in _TEXTS:
                    value = _set_element_text(value)
                    if value is None:
                        return None
                return self._equals(_IN_AS_COMPARISON[name], left, value, None)
            return self._in(name, left, values)
        if name in ("equals", "notEquals", "has", "mapContains", "indexOf", "hasAny", "hasAll"):
            constant = self.constants.read(right)
            if constant is not None:
                return self._equals(name, left, constant, parent)
            constant = self.constants.read(left)
            if constant is not None and name in ("equals", "notEquals"):
                return self._equals(name, right, constant, parent)
        return None

    def _equals(
        self, name: str, key: exp.Expression, constant: _Constant, parent: _Function | None
    ) -> _AtomResult:
        position = self.key_position(key)
        if position is not None:
            index_type = self.types[position]
            is_array = index_type.name == "Array"
            if name in ("has", "indexOf"):
                if not is_array:
                    return None
                if name == "indexOf" and not _index_of_implies_has(parent, self.constants):
                    return _UNKNOWN
                element_type = index_type.nested.base()
                converted = _convert_scalar(constant, element_type)
                if converted is None:
                    return None
                return _BloomAtom("has", ((position, _Values((converted,), element_type)),))
            if name in ("hasAny", "hasAll"):
                if not is_array or constant.kind != "array":
                    return None
                element_type = index_type.nested.base()
                converted_values = []
                for element in constant.value:
                    if element.kind not in ("int", "float", "string", "bool"):
                        return None  # NULL, nested arrays, tuples
                    converted = _convert_scalar(element, element_type)
                    if converted is None:
                        return None
                    converted_values.append(converted)
                function = "has_any" if name == "hasAny" else "has_all"
                hashes = _Values(tuple(converted_values), element_type, function == "has_all")
                return _BloomAtom(function, ((position, hashes),))
            if is_array:
                return None  # ClickHouse rejects `array = constant` for this index
            element_type = index_type.base()
            converted = _convert_scalar(constant, element_type)
            if converted is None:
                return None
            function = "equals" if name == "equals" else "not_equals"
            return _BloomAtom(function, ((position, _Values((converted,), element_type)),))
        if name in ("mapContains", "has"):
            map_keys = self.named_key(f"mapKeys({_canonical(key)})")
            if map_keys is None or self.types[map_keys].name != "Array":
                return None
            element_type = self.types[map_keys].nested.base()
            converted = _convert_scalar(constant, element_type)
            if converted is None:
                return None
            return _BloomAtom("has", ((map_keys, _Values((converted,), element_type)),))
        key_function = _function_of(key)
        if key_function is None:
            return None
        key_name, key_arguments = key_function
        if key_name == "tuple" and constant.kind == "tuple":
            if len(constant.value) != len(key_arguments):
                return None
            components = []
            function = None
            for argument, value in zip(key_arguments, constant.value, strict=True):
                found = self._equals(name, argument, value, key_function)
                if isinstance(found, _BloomAtom):
                    components.extend(found.components)
                    function = found.function
            return _BloomAtom(function, tuple(components)) if components else None
        if key_name == "arrayElement" and name in ("equals", "notEquals"):
            return self._map_element(name, key_arguments, [constant])
        return None

    def _map_element(self, name: str, key_arguments: list, values: list[_Constant]) -> _AtomResult:
        """``m['k'] = v`` / ``m['k'] IN (...)`` with a mapKeys(m) or mapValues(m) index."""
        map_node, lookup = key_arguments
        # A missing key reads as the default value, so comparing with it proves nothing.
        if any(_is_default(value) for value in values):
            return None
        map_name = _canonical(map_node)
        map_keys = self.named_key(f"mapKeys({map_name})")
        map_values = self.named_key(f"mapValues({map_name})")
        negated = name in ("notEquals", "notIn", "globalNotIn")
        function = (
            ("not_equals" if negated else "equals")
            if "quals" in name
            else ("not_in" if negated else "in")
        )
        if map_keys is not None:
            lookup_constant = self.constants.read(lookup)
            if lookup_constant is None:
                return None
            element_type = self.types[map_keys].nested.base()
            converted = _convert_scalar(lookup_constant, element_type)
            if converted is None:
                return None
            return _BloomAtom(function, ((map_keys, _Values((converted,), element_type)),))
        if map_values is not None:
            element_type = self.types[map_values].nested.base()
            kept = _set_elements(_scalar_set(values), element_type)
            if kept is None:
                return None
            return _BloomAtom(function, ((map_values, _Values(kept, element_type)),))
        return None

    def _in(self, name: str, key: exp.Expression, values: list[_Constant]) -> _AtomResult:
        function = "not_in" if name in ("notIn", "globalNotIn") else "in"
        position = self.key_position(key)
        if position is not None:
            index_type = self.types[position]
            if index_type.name == "Array":
                return None
            element_type = index_type.base()
            kept = _set_elements(_scalar_set(values), element_type)
            if kept is None:
                return None
            return _BloomAtom(function, ((position, _Values(kept, element_type)),))
        key_function = _function_of(key)
        if key_function is None:
            return None
        key_name, key_arguments = key_function
        if key_name == "tuple":
            rows = [value.value for value in values if value.kind == "tuple"]
            if len(rows) != len(values) or any(len(r) != len(key_arguments) for r in rows):
                return None
            components = []
            for column, argument in enumerate(key_arguments):
                found = self._in(name, argument, [row[column] for row in rows])
                if isinstance(found, _BloomAtom):
                    components.extend(found.components)
            return _BloomAtom(function, tuple(components)) if components else None
        if key_name == "arrayElement":
            return self._map_element(name, key_arguments, values)
        return None


def _element_name(column_type: ClickHouseType) -> str:
    """The name of a column's scalar type, under Array, Nullable and LowCardinality."""
    while column_type.name in ("Array", "Nullable", "LowCardinality"):
        column_type = column_type.arguments[0]
    return column_type.name


_TEXTS = ("String", "FixedString")


def _like_tokens(tokens: QueryTokenizer, pattern: bytes) -> list[bytes] | None:
    """Tokens of ``LIKE pattern``: a perfect prefix / suffix pattern is ``startsWith`` /
    ``endsWith`` of its literal in ClickHouse (see tokenizers.like_affix)."""
    affix = like_affix(pattern)
    if affix is None:
        return tokens.like_tokens(pattern)
    is_prefix, literal = affix
    return tokens.substring_tokens(literal, is_prefix, not is_prefix)


def _set_element_text(constant: _Constant) -> _Constant | None:
    """An IN set element for a String column: numbers become their text, as ClickHouse builds
    the set in the column's type (verified with chdb: ``s IN (17, 1700)`` probes '17' and
    '1700', where ``s = 17`` has no supertype). Returns None for anything else: a float's text
    is not its shortest form (``s IN (18.0)`` does not probe '18'), booleans, non-scalars."""
    if constant.kind == "string":
        return constant
    if constant.kind == "int":
        return _Constant("string", str(constant.value).encode())
    return None


def _scalar_set(values: list[_Constant]) -> list[_Constant]:
    """The elements of a set compared with one column: ``x IN ((1, 2))`` means ``x IN (1, 2)``."""
    if len(values) == 1 and values[0].kind == "tuple":
        return list(values[0].value)
    return values


def _set_elements(
    values: Sequence[_Constant], element_type: ClickHouseType
) -> tuple | np.ndarray | None:
    """Set elements converted to the key's type, or None when the set cannot be used.

    ClickHouse builds the set in the key's type and leaves out NULLs and numbers the type cannot
    hold (``x IN (5, 300)`` on UInt8 is ``x IN (5)``); anything else that does not convert
    leaves the index unused here rather than risk dropping a value that matches.
    """
    if isinstance(values, _LiteralSet):
        converted = _literal_set_elements(values.literals, element_type)
        if converted is not _UNKNOWN:
            return converted
    kept = []
    for value in values:
        if value.kind == "null":
            continue
        if element_type.name in _TEXTS:
            value = _set_element_text(value)
            if value is None:
                return None
        if value.kind in ("array", "tuple"):
            return None
        converted = _convert_scalar(value, element_type)
        if converted is None:
            if value.kind in ("int", "float", "bool") and (
                element_type.name in _INT_RANGES
                or element_type.name in _WIDE_RANGES
                or element_type.name == "Float32"
            ):
                # Verified with chdb: `f32 IN (0.1, 0.5)` probes 0.5 only (no Float32 equals
                # the Float64 0.1), and `i128 IN (0, <a Float64>)` probes 0 only.
                continue
            return None
        kept.append(converted)
    # With every element left out ClickHouse does not use the index at all (verified with chdb:
    # `x IN (300, 400)` on UInt8 is not listed by EXPLAIN), rather than skipping every granule.
    return tuple(kept) or None


class _LiteralSet(Sequence):
    """The elements of a long literal ``IN`` list or array (:class:`~bloomskip._sql.LiteralList`).

    :func:`_set_elements` converts the list to an integer or String key's type in one step;
    any other reader gets the constants one by one, as for a list sqlglot parsed.
    """

    def __init__(self, literals: LiteralList) -> None:
        self.literals = literals
        self._constants: list[_Constant] | None = None

    def __len__(self) -> int:
        return len(self.literals)

    def __getitem__(self, index: int) -> _Constant:
        return self.constants()[index]

    def __iter__(self) -> Iterator[_Constant]:
        return iter(self.constants())

    def constants(self) -> list[_Constant]:
        if self._constants is None:
            if self.literals.kind == "int":
                self._constants = [_Constant("int", v) for v in self.literals.values.tolist()]
            else:
                self._constants = [
                    _Constant("string", v.encode("utf-8")) for v in self.literals.values
                ]
        return self._constants


def _literal_set_elements(
    literals: LiteralList, element_type: ClickHouseType
) -> tuple | np.ndarray | None | object:
    """:func:`_set_elements` of a literal list in one step: integers for an integer key (those
    the type cannot hold left out), strings for a String key; ``_UNKNOWN`` for any other pair,
    which the element-wise conversion decides."""
    name = element_type.name
    if literals.kind == "int" and name in _INT_RANGES:
        values = literals.values
        info = np.iinfo(values.dtype)
        low, high = _INT_RANGES[name]
        kept = values[(values >= max(low, info.min)) & (values <= min(high, info.max))]
        if not len(kept):
            return None  # as element-wise: with every element left out, no atom
        return kept.astype(_numpy_type(_arrow_type_for(element_type)))
    if literals.kind == "string" and name == "String":
        return tuple(value.encode("utf-8") for value in literals.values)
    return _UNKNOWN


def _is_default(constant: _Constant) -> bool:
    return constant.value in (0, 0.0, b"", False) or constant.kind == "null"


def _index_of_implies_has(parent: _Function | None, constants: _ConstantReader) -> bool:
    """Whether the comparison around ``indexOf(arr, x)`` implies that arr contains x."""
    if parent is None:
        return True
    name, arguments = parent
    if name == "and":
        return True
    if name not in ("equals", "greater", "greaterOrEquals", "less", "lessOrEquals"):
        return False
    if len(arguments) != 2:
        return False
    reversed_ = False
    constant = constants.read(arguments[0])
    if constant is not None:
        reversed_ = True
    else:
        constant = constants.read(arguments[1])
    if constant is None or constant.kind not in ("int", "float", "bool"):
        return False
    value = constant.value
    if name == "equals":
        return value != 0
    if name == ("less" if reversed_ else "greater"):
        return value >= 0
    if name == ("lessOrEquals" if reversed_ else "greaterOrEquals"):
        return value > 0
    return False


# ------------------------------------------------------------------------------------------
# ngrambf_v1 / tokenbf_v1 / sparse_grams


_TEXT_FUNCTIONS = {
    "equals",
    "notEquals",
    "has",
    "mapContains",
    "mapContainsKey",
    "mapContainsKeyLike",
    "mapContainsValue",
    "mapContainsValueLike",
    "match",
    "like",
    "notLike",
    "startsWith",
    "endsWith",
    "multiSearchAny",
    "hasAny",
    "hasAll",
}


def _constant_type_name(constant: _Constant) -> str:
    """ClickHouse's name of a needle constant's type, for its error message."""
    if constant.kind == "array":
        names = {_constant_type_name(element) for element in constant.value}
        if "Nullable(Nothing)" in names:
            names.discard("Nullable(Nothing)")
            inner = f"Nullable({names.pop()})" if len(names) == 1 else "Nullable(Nothing)"
        else:
            inner = names.pop() if len(names) == 1 else "Nothing"
        return f"Array({inner})"
    if constant.kind == "null":
        return "Nullable(Nothing)"
    if constant.kind == "string":
        return "String"
    if constant.kind == "tuple":
        return "Tuple(" + ", ".join(_constant_type_name(e) for e in constant.value) + ")"
    if constant.kind == "bool":
        return "Bool"
    if constant.kind in ("date", "datetime"):
        return {"date": "Date", "datetime": "DateTime"}[constant.kind]
    return _literal_type(constant) or "Float64"


class _TextRpnBuilder(_RpnBuilder):
    """``MergeTreeConditionBloomFilterText::extractAtomFromTree``."""

    def __init__(
        self,
        sql: str,
        keys: list[str],
        types: list[ClickHouseType],
        tokenizer: QueryTokenizer,
        constants: _ConstantReader | None = None,
        as_clickhouse: bool = False,
    ) -> None:
        super().__init__(sql, keys, types, constants, as_clickhouse)
        self.tokenizer = tokenizer

    def atom(self, node: exp.Expression, function: _Function) -> _AtomResult:
        found = self._atom(function)
        if isinstance(found, _TextAtom) and any(
            _element_name(self.types[column]) == "IPv6"
            for probes in found.alternatives
            for column, _ in probes
        ):
            # An IPv6 row is tokenized as its 16 bytes and a constant as its text, so ClickHouse
            # skips the granules holding `ip6 = '2001:db8::5'` (verified with chdb: 1 row without
            # the index, 0 with it). bloomskip never uses a text index over IPv6.
            return None
        return found

    def _atom(self, function: _Function) -> _AtomResult:
        name, arguments = function
        if name in TOKEN_SET_FUNCTIONS:
            return self._token_set(name, arguments)
        if len(arguments) != 2:
            return None
        left, right = arguments
        if name in ("in", "globalIn", "notIn", "globalNotIn", "nullIn", "globalNullIn"):
            if name in ("globalNotIn",):
                return None  # not mapped to an atom by ClickHouse
            return self._in(name, left, right)
        if name in _TEXT_FUNCTIONS or name.startswith("hasToken"):
            constant = self.constants.read(right)
            if constant is not None:
                return self._equals(name, left, constant)
            constant = self.constants.read(left)
            if constant is not None and name in ("equals", "has", "hasAny", "notEquals"):
                return self._equals(name, right, constant)
        return None

    def _equals(self, name: str, key: exp.Expression, constant: _Constant) -> _AtomResult:
        if constant.kind not in ("string", "array"):
            return None
        key_position = self.key_position(key)
        key_name = _canonical(key)
        map_keys = self.named_key(f"mapKeys({key_name})")
        map_values = self.named_key(f"mapValues({key_name})")
        key_function = _function_of(key)
        if key_function is not None and key_function[0] == "arrayElement":
            if _is_default(constant) or (constant.kind == "array" and not constant.value):
                return None
            map_node, lookup = key_function[1]
            map_name = _canonical(map_node)
            keys_index = self.named_key(f"mapKeys({map_name})")
            if keys_index is not None:
                lookup_constant = self.constants.read(lookup)
                if lookup_constant is None or lookup_constant.kind not in ("string", "array"):
                    return None
                constant = lookup_constant
                key_position = keys_index
            else:
                key_position = self.named_key(f"mapValues({map_name})")
                if key_position is None:
                    return None
        tokens = self.tokenizer
        if name.startswith("hasToken"):
            case_insensitive = name.startswith("hasTokenCaseInsensitive")
            position = self.named_key(f"lower({key_name})") if case_insensitive else key_position
            if position is None or constant.kind != "string":
                return None
            value = constant.value.lower() if case_insensitive else constant.value
            return self._single("equals", position, self.token_probe(value))
        if key_position is None and map_keys is None and map_values is None:
            return None
        if map_keys is not None:
            if constant.kind != "string":
                return None
            if name in ("has", "mapContainsKey", "mapContains"):
                return self._single("has", map_keys, tokens.string_tokens(constant.value))
            if name == "mapContainsKeyLike":
                return self._single("has", map_keys, tokens.like_tokens(constant.value))
            return None
        if map_values is not None:
            if constant.kind != "string":
                return None
            if name == "mapContainsValue":
                return self._single("has", map_values, tokens.string_tokens(constant.value))
            if name == "mapContainsValueLike":
                return self._single("has", map_values, tokens.like_tokens(constant.value))
            return None
        if (name == "has" and constant.kind == "array") or name in ("hasAny", "hasAll"):
            if constant.kind != "array" or any(e.kind != "string" for e in constant.value):
                return None
            alternatives = tuple(
                ((key_position, tuple(tokens.string_tokens(e.value))),) for e in constant.value
            )
            return _TextAtom("has_all" if name == "hasAll" else "has_any", alternatives)
        if name == "multiSearchAny":
            if constant.kind != "array" or any(e.kind != "string" for e in constant.value):
                return None
            alternatives = tuple(
                ((key_position, tuple(tokens.substring_tokens(e.value, False, False))),)
                for e in constant.value
            )
            return _TextAtom("multi_search", alternatives)
        if constant.kind != "string":
            return None
        value = constant.value
        simple = {
            "has": ("has", lambda: tokens.string_tokens(value)),
            "equals": ("equals", lambda: tokens.string_tokens(value)),
            "notEquals": ("not_equals", lambda: tokens.string_tokens(value)),
            "like": ("equals", lambda: _like_tokens(tokens, value)),
            "notLike": ("not_equals", lambda: _like_tokens(tokens, value)),
            "startsWith": ("equals", lambda: tokens.substring_tokens(value, True, False)),
            "endsWith": ("equals", lambda: tokens.substring_tokens(value, False, True)),
        }
        if name in simple:
            function, make_tokens = simple[name]
            return self._single(function, key_position, make_tokens())
        if name == "match":
            analysis = analyze_regexp(value)
            if analysis.alternatives:
                alternatives = tuple(
                    ((key_position, tuple(tokens.substring_tokens(a, False, False))),)
                    for a in analysis.alternatives
                )
                return _TextAtom("match", alternatives)
            if analysis.required_substring:
                needle = analysis.required_substring
                return self._single(
                    "match", key_position, tokens.substring_tokens(needle, False, False)
                )
            return None
        return None

    def token_probe(self, token: bytes) -> list[bytes]:
        """What the index must hold for a granule whose rows hold ``token`` as a whole token.

        The one probe of a token, for ``hasToken`` (as ClickHouse probes it: the token itself
        for ``tokenbf_v1``, every n-gram of it for ``ngrambf_v1``) and for each needle of
        ``hasAnyTokens`` / ``hasAllTokens``; another text index kind plugs in here.
        """
        return self.tokenizer.string_tokens(token)

    def _token_set(self, name: str, arguments: list) -> _AtomResult:
        """``hasAnyTokens`` / ``hasAllTokens`` with the default tokenizer: a union (any-of) or
        an intersection (all-of) of :meth:`token_probe` per needle token.

        ClickHouse 26.9 uses no text index for them (verified with chdb's ``EXPLAIN indexes =
        1``; ClickHouse#120583), so with ``as_clickhouse`` there is no atom. Without needles, or
        for an all-of given a needle that is no token, every row is false (verified with chdb):
        an any-of of no alternatives, which no granule passes. A NULL needle (every row NULL),
        another tokenizer or a needle the constant reader does not fold get no atom.
        """
        if self.as_clickhouse or len(arguments) not in (2, 3):
            return None
        if len(arguments) == 3:
            tokenizer = self.constants.read(arguments[2])
            if tokenizer is None or tokenizer.value != DEFAULT_TOKENIZER.encode():
                return None
        position = self.key_position(arguments[0])
        needles = self.constants.read(arguments[1])
        if position is None or needles is None or needles.kind not in ("string", "array"):
            return None
        if needles.kind == "string":
            read = needle_tokens(needles.value)
        else:
            read = needle_tokens([element.value for element in needles.value])
        every = TOKEN_SET_FUNCTIONS[name] == "all"
        if every and (not read.complete or not read.tokens):
            return _TextAtom("token_any", ())
        alternatives = tuple(((position, tuple(self.token_probe(t))),) for t in read.tokens)
        return _TextAtom("token_all" if every else "token_any", alternatives)

    @staticmethod
    def _single(function: str, position: int, token_list: list[bytes] | None) -> _AtomResult:
        if token_list is None:
            return None  # a LIKE pattern ClickHouse does not use the index for
        return _TextAtom(function, (((position, tuple(token_list)),),))

    def _in(self, name: str, left: exp.Expression, right: object) -> _AtomResult:
        values = self.set_values(right)
        if values is None:
            return None
        left_function = _function_of(left)
        is_tuple = left_function is not None and left_function[0] == "tuple"
        if is_tuple:
            mapping = [
                (i, self.key_position(argument))
                for i, argument in enumerate(left_function[1])
                if self.key_position(argument) is not None
            ]
        else:
            position = self.key_position(left)
            mapping = [(0, position)] if position is not None else []
        if not mapping:
            return None  # before reading the values: a long list may not concern this index
        if is_tuple:
            rows = []
            for value in values:
                if value.kind != "tuple" or len(value.value) != len(left_function[1]):
                    return None
                rows.append(value.value)
        else:
            rows = [(value,) for value in _scalar_set(values)]
        kept_rows = []
        for row in rows:
            if any(c.kind == "null" for c in row):
                # A NULL element never equals a row; ClickHouse drops it from the set.
                continue
            if not is_tuple:
                row = (_set_element_text(row[0]),)
            if any(c is None or c.kind != "string" for c in row):
                # Every component must be a string; a number becomes its text only in a
                # one-column set (verified with chdb: `(s, n) IN (('a', 5))` leaves the index
                # unused, `s IN (5, 6)` probes '5' and '6').
                return None
            kept_rows.append(row)
        alternatives = []
        for row in kept_rows:
            probes = []
            for tuple_index, position in mapping:
                value = row[tuple_index].value
                column_type = self.types[position].base()
                if column_type.name == "FixedString":
                    width = column_type.arguments[0]
                    if len(value) > width:
                        break
                    value = value.ljust(width, b"\0")  # set elements take the key's type
                probes.append((position, tuple(self.tokenizer.string_tokens(value))))
            else:
                alternatives.append(tuple(probes))
        function = "not_in" if name == "notIn" else "in"
        return _TextAtom(function, tuple(alternatives))
