"""What ClickHouse reads: the kind of value an Arrow column holds, and date-time text.

One classifier answers "what kind of value does a column of this Arrow type hold" for every
module that asks (:func:`column_kind`): the WHERE translation types its columns with it
(:func:`bloomskip.dataset.sql.translate.column_kinds`), a table's own file pruning keeps the
columns it can compare (:func:`bloomskip.dataset.listing.tables.formats.file_pruning_predicate`),
and the ClickHouse type a column is indexed as is built on it
(:func:`bloomskip.clickhouse.types.clickhouse_type_for`).

One reading of a string constant compared with a date-time (:func:`read_datetime_text`), and
one compared with a date (:func:`read_date_text`), serve the condition evaluator
(:mod:`bloomskip.clickhouse.condition`) and the translation alike: the index probes the value
the exact filter compares with, and both accept the same texts. A timestamp column's precision
(:func:`timestamp_scale`) says where ClickHouse cuts a constant's fraction.

pyarrow is imported by the function that needs it: the translation imports this module on
every start.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import NamedTuple

__all__ = [
    "TIME_UNIT_DIGITS",
    "DateTimeText",
    "column_kind",
    "read_date_text",
    "read_datetime_text",
    "timestamp_scale",
]

#: Fraction digits of each Arrow timestamp unit: ClickHouse reads a column of that unit as
#: ``DateTime64`` of that scale (verified with chdb: Parquet ms / us / ns, Arrow IPC s).
TIME_UNIT_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def column_kind(arrow_type) -> str:
    """The kind of value a column of this Arrow type holds, as ClickHouse reads Parquet / Arrow.

    Args:
        arrow_type: A ``pyarrow.DataType``.

    Returns:
        ``bool``; ``int`` or ``uint`` (any width); ``float32`` (``float16`` too, which
        ClickHouse reads as Float32) or ``float64``; ``string`` (``string``, ``large_string``,
        ``string_view``); ``binary`` (``binary``, ``large_binary``, ``binary_view``,
        ``fixed_size_binary``); ``uuid`` (the ``arrow.uuid`` extension); ``date`` (``date32``,
        ``date64``); ``timestamp`` or ``timestamptz`` (without / with a zone); ``list``
        (``list``, ``large_list``, ``fixed_size_list``); ``map``; ``other`` for anything else.
        A dictionary is the kind of its values (ClickHouse's ``LowCardinality``).

    Example:
        >>> import pyarrow as pa
        >>> column_kind(pa.dictionary(pa.int32(), pa.large_string()))
        'string'
        >>> column_kind(pa.timestamp("ms", "Europe/Paris"))
        'timestamptz'
    """
    import pyarrow as pa

    t = pa.types
    while t.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if isinstance(arrow_type, pa.BaseExtensionType):
        return "uuid" if arrow_type.extension_name == "arrow.uuid" else "other"
    if t.is_boolean(arrow_type):
        return "bool"
    if t.is_signed_integer(arrow_type):
        return "int"
    if t.is_unsigned_integer(arrow_type):
        return "uint"
    if t.is_float32(arrow_type) or t.is_float16(arrow_type):
        return "float32"
    if t.is_float64(arrow_type):
        return "float64"
    if t.is_string(arrow_type) or t.is_large_string(arrow_type) or t.is_string_view(arrow_type):
        return "string"
    if (
        t.is_binary(arrow_type)
        or t.is_large_binary(arrow_type)
        or t.is_binary_view(arrow_type)
        or t.is_fixed_size_binary(arrow_type)
    ):
        return "binary"
    if t.is_list(arrow_type) or t.is_large_list(arrow_type) or t.is_fixed_size_list(arrow_type):
        return "list"
    if t.is_map(arrow_type):
        return "map"
    if t.is_timestamp(arrow_type):
        return "timestamptz" if arrow_type.tz is not None else "timestamp"
    if t.is_date(arrow_type):
        return "date"
    return "other"


def timestamp_scale(arrow_type) -> int | None:
    """The ``DateTime64`` scale ClickHouse reads a timestamp column of this Arrow type at.

    A string constant compared with the column is read at this precision: its fraction is cut
    to this many digits (``'09:00:00.123456'`` equals a millisecond column's ``.123``).

    Args:
        arrow_type: A ``pyarrow.DataType``.

    Returns:
        0, 3, 6 or 9 for a timestamp of unit s, ms, us or ns (a dictionary of timestamps too),
        None for any other type.

    Example:
        >>> import pyarrow as pa
        >>> timestamp_scale(pa.timestamp("ms", "UTC")), timestamp_scale(pa.date32())
        (3, None)
    """
    import pyarrow as pa

    while pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if not pa.types.is_timestamp(arrow_type):
        return None
    return TIME_UNIT_DIGITS[arrow_type.unit]


class DateTimeText(NamedTuple):
    """A date-time constant as ClickHouse reads it.

    Attributes:
        moment: The wall-clock date and time to the second, without a zone (the column's
            zone, or the server's, says which instant it is).
        fraction: The digits of the fraction of a second as written (at most 9; ``""`` for
            none); ClickHouse truncates them to the column's precision.
    """

    moment: datetime
    fraction: str

    def text(self) -> str:
        """The constant written ``YYYY-MM-DD hh:mm:ss[.fraction]``.

        Example:
            >>> read_datetime_text("2024-01-15T09:30:00.").text()
            '2024-01-15 09:30:00'
        """
        whole = self.moment.isoformat(sep=" ")
        return f"{whole}.{self.fraction}" if self.fraction else whole


# The forms ClickHouse's basic date_time_input_format reads as written (verified with chdb):
# 'YYYY-MM-DD', or 'YYYY-MM-DD hh:mm:ss' ('T' for the space) with an optional '.' and up to 9
# fraction digits, ASCII digits only.
_DATETIME_TEXT = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[ T]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{0,9}))?)?"
)


def read_datetime_text(text: str | bytes) -> DateTimeText | None:
    """Read a string constant compared with a ``DateTime`` / ``DateTime64`` as ClickHouse does.

    Args:
        text: The constant (bytes: as a condition holds it; read as ASCII).

    Returns:
        Its :class:`DateTimeText`; None for any other text, which ClickHouse refuses
        (``2024-02-30``, ``9:00:00``, a zone suffix, other digits than ASCII) or reads in a way
        not modelled here (``2024-01-15 25:00:00`` is the next day's 01:00; 10 to 19 fraction
        digits are cut to 9). The caller refuses such a constant or makes no use of it.

    Example:
        >>> read_datetime_text("2024-01-15 09:30:00.123")
        DateTimeText(moment=datetime.datetime(2024, 1, 15, 9, 30), fraction='123')
        >>> read_datetime_text(b"2024-02-30") is None
        True
    """
    match = _DATETIME_TEXT.fullmatch(text) if (text := _ascii(text)) is not None else None
    if match is None:
        return None
    fields = [int(group) if group else 0 for group in match.groups()[:6]]
    try:
        moment = datetime(*fields)
    except ValueError:
        return None  # a day or an hour that does not exist
    return DateTimeText(moment, match.group(7) or "")


# The date forms ClickHouse reads from text compared with a Date / Date32 (verified with chdb):
# a year of 4 digits, then a month and a day of 1 or 2 digits each behind one ASCII separator
# that is not a digit ('2024-01-15', '2024/1/5', '2024 01 15'), or 'YYYYMMDD'; ASCII digits only.
_DATE_TEXT = re.compile(
    r"([0-9]{4})(?:([0-9]{2})([0-9]{2})"
    r"|[\x00-\x2f\x3a-\x7f]([0-9]{1,2})[\x00-\x2f\x3a-\x7f]([0-9]{1,2}))"
)


def read_date_text(text: str | bytes) -> date | None:
    """Read a string constant compared with a ``Date`` / ``Date32`` as ClickHouse does.

    Args:
        text: The constant (bytes: as a condition holds it; read as ASCII).

    Returns:
        The date; None for any other text, which ClickHouse refuses (``2024-01-15 00:00:00``,
        ``2024é01é15``, other digits than ASCII) or reads in a way not modelled here (a day that
        does not exist, ``2024-02-30`` or ``12345678``, is moved to another). The caller
        refuses such a constant or makes no use of it.

    Example:
        >>> read_date_text("2024/1/5"), read_date_text(b"20240115")
        (datetime.date(2024, 1, 5), datetime.date(2024, 1, 15))
        >>> read_date_text("2024-02-30") is None
        True
    """
    match = _DATE_TEXT.fullmatch(text) if (text := _ascii(text)) is not None else None
    if match is None:
        return None
    year, *rest = (int(group) for group in match.groups() if group is not None)
    try:
        return date(year, *rest)
    except ValueError:
        return None  # year 0, month 13, 30 February


def _ascii(text: str | bytes) -> str | None:
    """A constant as text: bytes (as a condition holds them) read as ASCII; None when they are
    not ASCII, which ClickHouse never reads as a date or time."""
    if isinstance(text, str):
        return text
    try:
        return text.decode("ascii")
    except UnicodeDecodeError:
        return None
