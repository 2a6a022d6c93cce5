"""A table's snapshot as every table format gives it (docs/tables.md).

:mod:`bloomskip.dataset.listing.tables.delta` and :mod:`bloomskip.dataset.listing.tables.iceberg`
each map their own metadata, field by field, onto the :class:`TableSnapshot` below;
:mod:`bloomskip.dataset.listing.tables.formats` chooses
the format of a location and opens it. The format modules import this module, not the
dispatcher that imports them.

Example:
    >>> TableSnapshot("delta", "logs/", "logs/", 3, 3, None, None, ()).record()
    {'format': 'delta', 'snapshot': 3, 'sequence': 3}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bloomskip.errors import BloomskipError

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from bloomskip.dataset.listing.field_ids import FieldIds


@dataclass(frozen=True)
class TableFile:
    """One data file of a snapshot.

    Attributes:
        key: Its path relative to the table's location, ``/``-separated (the name the index
            records it under).
        size: Its length in bytes, as the table's metadata records it.
        records: Its row count per the metadata (None when not recorded).
        partition: Values of columns the file itself does not store (Delta partition columns),
            as Python values of the column's type; a query adds them as constant columns.
        deleted: Positions (0-based row numbers in the file) of rows deleted by the snapshot
            (Delta deletion vectors, Iceberg position deletes), sorted, int64; None: none.
        field_ids: How the file's columns are found (Iceberg): by field id, under whatever
            name the file holds each one; None: by name (Delta).
    """

    key: str
    size: int
    records: int | None = None
    partition: Mapping[str, object] = field(default_factory=dict)
    deleted: np.ndarray | None = field(default=None, compare=False)
    field_ids: FieldIds | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class FieldHistory:
    """Which field id each column name meant through a table's history (Iceberg): what binds
    an index's columns to the table's fields (docs/tables.md).

    Attributes:
        at: Each snapshot the table's metadata lists: its top-level columns, name -> field id.
        ever: Each name a top-level column had in any of the table's schemas: the field ids it
            named.
    """

    at: Mapping[int, Mapping[str, int]]
    ever: Mapping[str, frozenset[int]]

    def field_of(self, name: str, recorded: Mapping | None) -> int | None:
        """The field an index column of an existing index was defined on.

        Args:
            name: The column as the index definition names it.
            recorded: The manifest's table record (``Manifest.table``): its ``columns`` (the
                bindings a build recorded) or, for an index built before they were recorded,
                its snapshot, at which every definition named a column of that snapshot.

        Returns:
            The field id; None when it cannot be told (no binding, the snapshot is no longer
            in the table's metadata, and the name was given to more than one field).

        Example:
            >>> FieldHistory({}, {"msg": frozenset({4})}).field_of("msg", {"snapshot": 1})
            4
        """
        bound = (recorded or {}).get("columns") or {}
        if name in bound:
            return bound[name]
        at = self.at.get((recorded or {}).get("snapshot"))
        if at is not None:
            return at.get(name)
        named = self.ever.get(name, frozenset())
        return next(iter(named)) if len(named) == 1 else None


@dataclass(frozen=True)
class TableSnapshot:
    """A table at one snapshot.

    Attributes:
        format: ``"delta"`` or ``"iceberg"``.
        location: The table's root location (a local folder or an object-store URI); every
            ``TableFile.key`` is relative to it.
        name: What the user gave (a path, ``s3://…``, ``iceberg://CATALOG/NS.TABLE``).
        snapshot: The Delta version, or the Iceberg snapshot id.
        sequence: A number that grows with every snapshot (the Delta version; the Iceberg
            sequence number), to tell which of two snapshots is newer.
        timestamp_ms: When the snapshot was committed (milliseconds since the epoch); None
            where the format tells it only at a cost (a Delta commit is one more read).
        schema: The snapshot's logical schema, partition columns included.
        files: Its live data files.
        is_latest: Whether this is the table's newest snapshot.
        keep_files: The table's own file pruning (partition values, file statistics): given a
            predicate in the small SQL subset
            :func:`~bloomskip.dataset.listing.tables.formats.file_pruning_predicate` writes, the
            keys of the files that may hold matching rows (a superset; never fewer).
        field_ids: The snapshot's columns by field id (Iceberg; each file's ``field_ids``);
            None: the files are read by name (Delta).
        history: What each column name meant through the table's history (Iceberg).
    """

    format: str
    location: str
    name: str
    snapshot: int
    sequence: int
    timestamp_ms: int | None
    schema: pa.Schema
    files: tuple[TableFile, ...]
    is_latest: bool = True
    keep_files: Callable[[str], frozenset[str]] | None = field(
        default=None, compare=False, repr=False
    )
    field_ids: FieldIds | None = field(default=None, compare=False, repr=False)
    history: FieldHistory | None = field(default=None, compare=False, repr=False)

    def record(self) -> dict[str, int | str]:
        """What an index manifest records of the snapshot it covers."""
        return {"format": self.format, "snapshot": self.snapshot, "sequence": self.sequence}


def parse_timestamp(text: str) -> datetime:
    """An ``--as-of`` time: ISO 8601, a date or a date and time; UTC when no offset is given.

    Raises:
        BloomskipError: Not an ISO-8601 time.

    Example:
        >>> parse_timestamp("2026-11-30T12:00:00Z").isoformat()
        '2026-11-30T12:00:00+00:00'
    """
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise BloomskipError(f"--as-of {text!r}: not an ISO-8601 timestamp") from exc
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
