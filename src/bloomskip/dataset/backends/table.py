"""A Delta Lake or Iceberg table with a segmented skip index, queried at any snapshot.

A :class:`TableDataset` is a :class:`~bloomskip.dataset.backends.lake.LakeDataset` whose files are a
table snapshot's data files (:mod:`bloomskip.dataset.listing.tables.formats`), not whatever its
storage holds:

* a build indexes the newest snapshot's files that no live segment covers, drops the files
  later snapshots removed, and records the snapshot in the manifest;
* a query at any snapshot first lets the table prune files by its own partition values and
  statistics, then prunes the rest with the index (an old snapshot's files that the live
  manifest dropped are found in older manifest versions until they are vacuumed), and reads
  the survivors with their partition values filled in and their deleted rows dropped.

Storage is still listed once per query: that listing tells a file rewritten behind the
table's log (its size or ETag differs), which is then scanned with a warning, never pruned.
The table contributes its listing only (``listing/tables/listing.py``): its files, its own file
pruning, its schema, and each file's partition values and deletes.

Example:
    >>> table = TableDataset("events/")  # doctest: +SKIP
    >>> table.build_index(["user_id TYPE bloom_filter(0.01)"])  # doctest: +SKIP
    >>> TableDataset("events/", version=3).query("user_id = 42").num_rows  # doctest: +SKIP
    2
"""

from __future__ import annotations

import os

from bloomskip.dataset.backends.lake import LakeDataset
from bloomskip.dataset.listing.tables.formats import open_table


class TableDataset(LakeDataset):
    """A Delta or Iceberg table at one snapshot, with a segmented skip index: a
    :class:`LakeDataset` whose listing is the snapshot's
    (:class:`~bloomskip.dataset.listing.tables.listing.TableListing`); nothing else differs.

    Args:
        table: A folder or object-store prefix holding ``_delta_log/`` (Delta), or
            ``iceberg://CATALOG/NAMESPACE.TABLE``.
        version: A Delta version (default: the newest).
        snapshot_id: An Iceberg snapshot id (default: the current one).
        as_of: An ISO-8601 timestamp: the newest snapshot committed at or before it.
        index_location: Where the index lives (default: ``<table location>/_bloomskip``).

    Raises:
        BloomskipError: Not a table, a snapshot that does not exist, a table feature bloomskip
            cannot honour exactly (named).
        StorageError: The table or its catalog cannot be reached.
    """

    def __init__(
        self,
        table: str | os.PathLike,
        *,
        version: int | None = None,
        snapshot_id: int | None = None,
        as_of: str | None = None,
        index_location: str | os.PathLike | None = None,
    ) -> None:
        snapshot = open_table(table, version=version, snapshot_id=snapshot_id, as_of=as_of)
        super().__init__(snapshot.location, index_location=index_location, snapshot=snapshot)
        #: The snapshot queried.
        self.snapshot = snapshot
        #: Its files (``TableFile``: partition values, deletes) by key.
        self.table_files = self.listing.table_file
        #: The table as given (a folder, a prefix or ``iceberg://CATALOG/NAMESPACE.TABLE``).
        self.table = os.fspath(table)

    def build_command(self) -> str:
        """The command that indexes the table's new and changed files (its newest snapshot).

        Example:
            >>> TableDataset("iceberg://local/ns.events").build_command()  # doctest: +SKIP
            'bloomskip index build iceberg://local/ns.events'
        """
        return self._build_command(self.table)
