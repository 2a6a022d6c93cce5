"""Hive-style ``key=value`` folders: the partition columns ClickHouse reads from file paths.

ClickHouse (``use_hive_partitioning = 1``, its default) reads every ``key=value`` folder of a
file's path as a column: ``/data/region=eu/day=2024-01-01/part.parquet`` has ``region`` and
``day``. The rule, established against chdb (ClickHouse 26.9), field by field:

- The path's folders count (the file name does not), from the root of the path down, also those
  above the dataset's folder. A folder counts when it holds ``=`` after a non-empty key; the
  value is the text after the first ``=``, as it is (not percent-decoded; it may be empty).
- The partition columns are the keys of one sample file. Each other file must have them too
  (extra keys are ignored); a key twice with two values is an error.
- A file that holds a column of the key's name still gets the path's value, read as the type
  of its own column. Otherwise the type is inferred from the sample's value: ``Int64`` (or
  ``UInt64`` past it), ``Float64`` (a decimal point, ``nan``, ``inf``), ``Bool`` (``true`` /
  ``false``), ``Date`` (``YYYY-MM-DD``), ``DateTime`` (``YYYY-MM-DD hh:mm:ss``), NULL (``NULL``,
  ``\\N``: every value is then NULL), else ``String``. Every file's value is read as that
  type; a value it cannot be read as is an error (ClickHouse's too).
- The partition columns follow the files' columns, sorted by key; one the files hold keeps
  their position.

ClickHouse takes its sample from the first file its listing returns, in the file system's
order; bloomskip takes the first file in path order, so that its answer does not depend on the
order of a directory. Where ClickHouse's reading would be an error or would need its best-effort
date-time parser (a value with a double quote, surrounding spaces, a time zone offset, fractional
seconds, a date out of ``Date``'s range, ``[...]`` literals), bloomskip refuses the value in one
line, naming the file, rather than guess.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bloomskip.errors import BloomskipError

if TYPE_CHECKING:
    import pyarrow as pa

_INTEGER = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(\d+\.\d*|\.\d+)")
_FLOAT_WORD = re.compile(r"[+-]?(nan|inf|infinity)", re.IGNORECASE)
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_DATE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")
_DATE_PREFIX = re.compile(r"\d{4}-\d{1,2}-\d{1,2}\D")
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})")
_NULL_WORDS = frozenset({"NULL", "null", "Null", "\\N"})
_TRUE = frozenset({"true", "t", "y", "yes", "on", "1", "enable", "enabled"})
_FALSE = frozenset({"false", "f", "n", "no", "off", "0", "disable", "disabled"})
# ClickHouse's Date and DateTime ranges; outside them it infers DateTime64, read here as refused.
_FIRST_DAY, _LAST_DAY = datetime.date(1970, 1, 1), datetime.date(2149, 6, 6)
_LAST_SECOND = datetime.datetime(2106, 2, 7, 6, 28, 15)


def path_partitions(path: str) -> tuple[tuple[str, str], ...]:
    """The ``(key, value)`` pairs of the ``key=value`` folders of ``path``, root first.

    Args:
        path: A file's path (absolute, or ``bucket/key`` on an object store).

    Returns:
        The pairs, each key once.

    Raises:
        BloomskipError: A key appears twice with two values, or a folder holds a double quote
            (ClickHouse reads quotes as quoting there).

    Example:
        >>> path_partitions("/data/region=eu/day=2024-01-01/part.parquet")
        (('region', 'eu'), ('day', '2024-01-01'))
    """
    folders = path.replace("\\", "/").split("/")[:-1]
    found: dict[str, str] = {}
    for folder in folders:
        key, equals, value = folder.partition("=")
        if not equals or not key:
            continue
        if '"' in folder:
            raise BloomskipError(
                f"{path}: the folder {folder!r} holds a double quote, which ClickHouse reads as "
                "quoting in a key=value folder; rename it"
            )
        if found.get(key, value) != value:
            raise BloomskipError(
                f"{path}: the partition key {key!r} appears twice, as {found[key]!r} and "
                f"{value!r} (ClickHouse refuses it too)"
            )
        found[key] = value
    return tuple(found.items())


def infer_type(value: str, where: str) -> pa.DataType:
    """The Arrow type ClickHouse infers for a partition value (module docstring).

    Args:
        value: The value's text.
        where: The file it comes from, for errors.

    Returns:
        The type (``pa.null()`` for a NULL word).

    Raises:
        BloomskipError: A value whose ClickHouse reading needs its best-effort parsers.

    Example:
        >>> infer_type("2024-01-01", "f"), infer_type("1.5", "f"), infer_type("eu", "f")
        (DataType(date32[day]), DataType(double), DataType(string))
    """
    import pyarrow as pa

    if value != value.strip() or value[:1] in ("[", "(", "{"):
        _refuse(value, where, "a value with surrounding spaces or a literal")
    if value in _NULL_WORDS:
        return pa.null()
    if value.lower() in ("true", "false"):
        return pa.bool_()
    if _DATETIME.fullmatch(value):
        _datetime(value, where)
        return pa.timestamp("s")
    if _DATE.fullmatch(value):
        _date(value, where)
        return pa.date32()
    if _DATE_PREFIX.match(value):
        # A date with more after it (an offset, a fraction, "Z"): ClickHouse's best effort.
        _refuse(value, where, "a date-time form ClickHouse reads by best effort")
    if _INTEGER.fullmatch(value):
        number = int(value)
        if -(2**63) <= number < 2**63:
            return pa.int64()
        return pa.uint64() if 0 <= number < 2**64 else pa.string()
    if _DECIMAL.fullmatch(value) or _FLOAT_WORD.fullmatch(value):
        return pa.float64()
    return pa.string()


def read_value(value: str, arrow_type: pa.DataType, where: str):
    """A partition value read as ``arrow_type``, as ClickHouse converts it.

    Args:
        value: The value's text.
        arrow_type: The column's type (inferred, or the column the files hold).
        where: The file it comes from, for errors.

    Returns:
        A Python value of that type (None for the null type).

    Raises:
        BloomskipError: The text is no value of that type.

    Example:
        >>> read_value("007", pa.int64(), "f")  # doctest: +SKIP
        7
    """
    import pyarrow as pa

    t = pa.types
    if t.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if t.is_null(arrow_type):
        return None
    if t.is_string(arrow_type) or t.is_large_string(arrow_type) or t.is_string_view(arrow_type):
        return value
    if t.is_integer(arrow_type):
        if _INTEGER.fullmatch(value):
            number = int(value)
            info = arrow_type.bit_width
            low, high = (
                (0, 2**info)
                if t.is_unsigned_integer(arrow_type)
                else (
                    -(2 ** (info - 1)),
                    2 ** (info - 1),
                )
            )
            if low <= number < high:
                return number
        _refuse(value, where, f"no {arrow_type} value")
    if t.is_floating(arrow_type):
        if _FLOAT.fullmatch(value) or _FLOAT_WORD.fullmatch(value):
            return float(value)
        _refuse(value, where, f"no {arrow_type} value")
    if t.is_boolean(arrow_type):
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        _refuse(value, where, "no Bool value")
    if t.is_date(arrow_type) and _DATE.fullmatch(value):
        return _date(value, where)
    if t.is_timestamp(arrow_type) and arrow_type.tz is None:
        if _DATETIME.fullmatch(value):
            return _datetime(value, where)
        if _DATE.fullmatch(value):
            return datetime.datetime.combine(_date(value, where), datetime.time())
    _refuse(value, where, f"not read here as {arrow_type}")


@dataclass(frozen=True)
class Partitioning:
    """The partition columns of a dataset and each file's values.

    Attributes:
        fields: The partition columns not held by the files, in ClickHouse's order (by key),
            with their inferred types.
        types: Every partition column's type (held ones: the files' type).
        values: For each file (by the key the caller gave), ``{column: value}`` of every
            partition column.
    """

    fields: tuple
    types: dict
    values: dict

    def __bool__(self) -> bool:
        return bool(self.types)

    def table_files(self) -> dict | None:
        """The values as the scan takes a table's partition values (``TableFile`` by key), or
        None when there is no partition column."""
        if not self.types:
            return None
        from bloomskip.dataset.listing.tables.snapshot import TableFile

        return {key: TableFile(key, 0, None, values) for key, values in self.values.items()}

    def check_index(self, definition: str, columns) -> None:
        """Refuse an index over a partition column.

        Raises:
            BloomskipError: ``columns`` names a partition column.
        """
        for name in columns:
            if name in self.types:
                raise BloomskipError(
                    f"index {definition!r}: {name!r} is a partition column: its values come "
                    f"from the folder names ({name}=…), not from the files, so an index over "
                    "the files cannot hold them"
                )


def partitioning(
    paths: Sequence[str], held: dict, keys: Sequence[str] | None = None
) -> Partitioning:
    """The partition columns of files and their values (the module's rule).

    Args:
        paths: The files' paths, in dataset order (the first is the sample).
        held: ``{column: Arrow type}`` of the columns the files hold (their unified schema).
        keys: What :attr:`Partitioning.values` names each file by (its relative path, as the
            index does); the paths when None.

    Returns:
        A :class:`Partitioning` (false when the paths have no ``key=value`` folder).

    Raises:
        BloomskipError: A file lacks a sample key, or a value cannot be read as its column's
            type (named with the file).

    Example:
        >>> partitioning(["/d/k=1/a.parquet", "/d/k=2/b.parquet"], {}).types  # doctest: +SKIP
        {'k': DataType(int64)}
    """
    import pyarrow as pa

    if not paths:
        return Partitioning((), {}, {})
    sample = dict(path_partitions(paths[0]))
    types = {
        key: held[key] if key in held else infer_type(value, paths[0])
        for key, value in sample.items()
    }
    values = {}
    for path, key_of_file in zip(paths, keys if keys is not None else paths, strict=True):
        found = dict(path_partitions(path)) if path != paths[0] else sample
        missing = [key for key in sample if key not in found]
        if missing:
            raise BloomskipError(
                f"{path}: no partition folder {missing[0]}=… while {paths[0]} has one; "
                "ClickHouse refuses such a dataset too"
            )
        values[key_of_file] = {key: read_value(found[key], types[key], path) for key in sample}
    fields = tuple(pa.field(key, types[key]) for key in sorted(sample) if key not in held)
    return Partitioning(fields, types, values)


def _date(value: str, where: str) -> datetime.date:
    year, month, day = map(int, _DATE.fullmatch(value).groups())
    try:
        date = datetime.date(year, month, day)
    except ValueError:
        _refuse(value, where, "no calendar date")
    if not _FIRST_DAY <= date <= _LAST_DAY:
        _refuse(value, where, "a date outside ClickHouse's Date range")
    return date


def _datetime(value: str, where: str) -> datetime.datetime:
    parts = map(int, _DATETIME.fullmatch(value).groups())
    try:
        moment = datetime.datetime(*parts)
    except ValueError:
        _refuse(value, where, "no date-time")
    if not datetime.datetime(1970, 1, 1) <= moment <= _LAST_SECOND:
        _refuse(value, where, "a date-time outside ClickHouse's DateTime range")
    return moment


def _refuse(value: str, where: str, why: str):
    raise BloomskipError(f"{where}: the partition value {value!r} is {why}; not supported")
