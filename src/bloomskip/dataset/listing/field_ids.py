"""Reading a data file's columns by field id, as Iceberg does (docs/tables.md).

An Iceberg table names a column by its field id; a data file records the id of each of its
columns in the Parquet schema (``PARQUET:field_id``), under the name the column had when the
file was written. After a column is renamed, older files hold it under its old name; after a
column is dropped and another added under its name, older files hold the dropped one under
the name. A file written without field ids (one added as it is) is read through the table's
name mapping: each name it may use, the current one and earlier ones, to a field id.

:class:`FieldIds` tells, file by file, under which name each column lies, or that a read by
name already finds exactly the table's columns (the common case, which keeps the fast paths).
A promoted column (``int`` to ``long``, ``float`` to ``double``) is cast to the table's type.

Example:
    >>> import pyarrow as pa
    >>> ids = FieldIds({"message": 4})
    >>> old = pa.schema([pa.field("msg", pa.string(), metadata={FIELD_ID: b"4"})])
    >>> ids.in_file(old)
    {'message': 'msg'}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from bloomskip.dataset.listing.files import OpenedParquet

if TYPE_CHECKING:
    import pyarrow as pa

#: The Parquet field metadata key that holds a column's field id (as pyarrow reads it).
FIELD_ID = b"PARQUET:field_id"


@dataclass(frozen=True)
class FieldIds:
    """A table's columns by field id.

    Attributes:
        columns: Each column as the table reads it: its name -> its field id (top-level
            columns; a build adds the names its indexes were defined on, docs/tables.md).
        mapped: The table's name mapping, for files written without field ids: each name
            such a file may use -> the field id (empty: such files are read by name).
    """

    columns: Mapping[str, int]
    mapped: Mapping[str, int] = field(default_factory=dict)

    def in_file(self, physical: pa.Schema) -> dict[str, str | None] | None:
        """Under which name a file holds each column, by field id.

        Args:
            physical: The file's Arrow schema, as its footer gives it (with field ids).

        Returns:
            Each column's name in the file (None: the file does not hold it, and the column
            reads as NULLs), or None when a read by name finds exactly those columns.

        Example:
            >>> import pyarrow as pa
            >>> FieldIds({"id": 1}).in_file(pa.schema([("id", pa.int64())])) is None
            True
        """
        found: dict[int, str] = {}
        for item in physical:
            number = _field_id(item)
            if number is not None:
                found.setdefault(number, item.name)
        if not found:
            # Written without field ids: read through the name mapping, or by name without one.
            if not self.mapped:
                return None
            for item in physical:
                if item.name in self.mapped:
                    found.setdefault(self.mapped[item.name], item.name)
        names = set(physical.names)
        where = {name: found.get(number) for name, number in self.columns.items()}
        if all(held == (name if name in names else None) for name, held in where.items()):
            return None
        return where


def _field_id(item: pa.Field) -> int | None:
    text = (item.metadata or {}).get(FIELD_ID)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def read_as(
    table: pa.Table, held: Mapping[str, str | None], schema: pa.Schema, names: Sequence[str]
) -> pa.Table:
    """Columns ``names`` of ``schema`` from a file's columns read under their own names.

    Args:
        table: The file's columns (at least those ``held`` names), as read.
        held: Where each column lies in the file (:meth:`FieldIds.in_file`).
        schema: The types the columns are read as.
        names: The columns wanted, in order.

    Returns:
        A table of ``names`` typed as ``schema``; a column the file lacks is NULLs.

    Example:
        >>> import pyarrow as pa
        >>> read_as(pa.table({"msg": ["a"]}), {"message": "msg"},
        ...         pa.schema([("message", pa.string())]), ["message"]).column_names
        ['message']
    """
    import pyarrow as pa

    columns = []
    for name in names:
        wanted = schema.field(name)
        physical = held.get(name, name)
        if physical is None or physical not in table.column_names:
            columns.append(pa.nulls(table.num_rows, wanted.type))
        else:
            columns.append(table.column(physical).cast(wanted.type))
    return pa.Table.from_arrays(columns, schema=pa.schema([schema.field(n) for n in names]))


def physical_names(held: Mapping[str, str | None], names: Sequence[str]) -> list[str]:
    """The file's own names of the columns ``names`` it holds, each once, in order."""
    return list(dict.fromkeys(held.get(name, name) for name in names if held.get(name, name)))


class FieldIdParquet(OpenedParquet):
    """A Parquet file opened for indexing, whose columns read by field id as a table reads
    them: under the table's names, in the table's types (a promoted column cast).

    Args:
        opened: The file as :func:`~bloomskip.dataset.listing.files.open_parquet` opened it.
        ids: The columns' field ids.
        schema: The names and types they are read as.
    """

    def __init__(self, opened: OpenedParquet, ids: FieldIds, schema: pa.Schema) -> None:
        import pyarrow as pa

        super().__init__(**{item.name: getattr(opened, item.name) for item in fields(opened)})
        physical = opened.schema
        held = ids.in_file(physical)
        self._held = held if held is not None else {name: name for name in physical.names}
        names = set(physical.names)
        self._read_as = schema
        self._schema = pa.schema([item for item in schema if self._held.get(item.name) in names])

    @property
    def schema(self):  # noqa: ANN201 - a pyarrow schema
        """The table's columns the file holds, named and typed as the table reads them."""
        return self._schema

    def reader(self):  # noqa: ANN201 - reads row groups as pyarrow.parquet.ParquetFile does
        return _FieldIdReader(super().reader(), self._held, self._read_as)


class _FieldIdReader:
    """A Parquet reader whose ``read_row_group`` takes and gives the table's column names."""

    def __init__(self, reader, held: Mapping[str, str | None], schema: pa.Schema) -> None:
        self._reader = reader
        self._held = held
        self._schema = schema

    def read_row_group(self, group: int, columns: Sequence[str], use_threads: bool = True):
        table = self._reader.read_row_group(
            group, columns=physical_names(self._held, columns), use_threads=use_threads
        )
        return read_as(table, self._held, self._schema, columns)
