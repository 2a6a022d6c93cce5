"""A table snapshot's files as a dataset's listing (docs/tables.md).

The files are the snapshot's data files, never whatever the table's storage holds; storage is
still listed once per query, so that a file rewritten behind the table's log (its size differs
from the log's) is told apart and scanned, never pruned. The table contributes per-file
adjustments only: its own file pruning (partition values, statistics) before any index is
read, its schema, each file's partition values and deleted rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bloomskip.dataset.listing.prefix import ListedFile, PrefixListing
from bloomskip.dataset.listing.tables.formats import file_pruning_predicate
from bloomskip.errors import BloomskipError

if TYPE_CHECKING:
    import pyarrow as pa

    from bloomskip._store import ObjectInfo, Store
    from bloomskip.dataset.listing.hive import Partitioning
    from bloomskip.dataset.listing.tables.snapshot import TableSnapshot


class TableListing(PrefixListing):
    """The files of one snapshot of a Delta or Iceberg table.

    Args:
        snapshot: The snapshot (``open_table``).
        store: The store of the table's location.
    """

    def __init__(self, snapshot: TableSnapshot, store: Store) -> None:
        super().__init__(snapshot.location, store)
        self.snapshot = snapshot
        self.table_file = {item.key: item for item in snapshot.files}
        self.changed_behind: list[str] = []

    @property
    def is_latest(self) -> bool:
        return self.snapshot.is_latest

    def data_files(self, objects: list[ObjectInfo]) -> list[ListedFile]:
        """The snapshot's data files with their identities from the listing.

        Raises:
            BloomskipError: A file the snapshot names is not in storage.
        """
        listed = {info.key: info for info in objects}
        files, changed_behind = [], []
        for item in self.snapshot.files:
            info = listed.get(item.key)
            if info is None:
                raise BloomskipError(
                    f"{self.uri_of(item.key)}: the table's snapshot {self.snapshot.snapshot} "
                    "names this data file, but storage does not hold it (deleted behind the "
                    "table's back, or vacuumed)"
                )
            changed = info.size != item.size
            if changed:
                changed_behind.append(item.key)
            files.append(ListedFile(item.key, info, distrusted=changed))
        #: The files whose size in storage is not the table's metadata's, in key order.
        self.changed_behind = changed_behind
        # One line however many: a copied or rewritten table would name each file otherwise.
        self.warnings = [self._changed_behind_line(listed)] if changed_behind else []
        return files

    def _changed_behind_line(self, listed: dict[str, ObjectInfo]) -> str:
        """The warning for :attr:`changed_behind`, its first file's sizes as the example."""
        key = self.changed_behind[0]
        sizes = (
            f"{self.uri_of(key)}: {listed[key].size:,} bytes in storage, "
            f"{self.table_file[key].size:,} per the table's metadata"
        )
        count = len(self.changed_behind)
        if count == 1:
            return f"{sizes}: changed behind the table's back; scanned, never pruned"
        return (
            f"{count} files changed behind the table's back (their size in storage is not the "
            f"table's metadata's; e.g. {sizes}); scanned, never pruned"
        )

    def unverifiable(self, files: list[ListedFile]) -> list[str]:
        differing = [item for item in files if item.info.size != self.table_file[item.key].size]
        lines = super().unverifiable([item for item in files if item not in differing])
        if len(differing) == 1:
            lines.append(
                f"{self.uri_of(differing[0].key)}: not indexed: it differs from the table's "
                "metadata"
            )
        elif differing:
            lines.append(
                f"{len(differing)} files not indexed: they differ from the table's metadata "
                f"(e.g. {self.uri_of(differing[0].key)})"
            )
        return lines

    def files_kept(self, where: str) -> tuple[set[str] | None, str | None]:
        """The files the table's own pruning (partition values, file statistics) keeps."""
        predicate = file_pruning_predicate(where, self.snapshot.schema)
        if predicate is None or self.snapshot.keep_files is None:
            return None, predicate
        return self.snapshot.keep_files(predicate), predicate

    def describe(self, predicate: str | None, files_kept: int) -> dict:
        return {
            "format": self.snapshot.format,
            "snapshot": self.snapshot.snapshot,
            "files": len(self.snapshot.files),
            "files_kept": files_kept,
            "predicate": predicate,
            "changed_behind": list(self.changed_behind),
        }

    def record(self) -> dict:
        return self.snapshot.record()

    def schema(self) -> pa.Schema:
        return self.snapshot.schema

    def check_build(self) -> None:
        """A build indexes the newest snapshot, which must hold files.

        Raises:
            BloomskipError: The table was opened at an older snapshot, or has no data file.
        """
        if not self.snapshot.is_latest:
            raise BloomskipError(
                f"{self.snapshot.name}: a build indexes the table's newest snapshot; open it "
                "without --version/--snapshot-id/--as-of (queries at older snapshots use it)"
            )
        if not self.snapshot.files:
            raise BloomskipError(f"{self.snapshot.name}: the table has no data file to index")

    def check_indexes(self, definitions) -> None:
        """Refuse an index over a partition column: the table's metadata prunes by those.

        Raises:
            BloomskipError: An index is over a partition column (named).
        """
        from bloomskip.clickhouse.ddl import parse_index_definition

        partition_columns = {name for item in self.snapshot.files for name in item.partition}
        for text in definitions or ():
            try:
                columns = parse_index_definition(text).source_columns
            except (BloomskipError, ValueError):
                continue  # the build reports it
            for name in columns:
                if name in partition_columns:
                    raise BloomskipError(
                        f"index {text}: {name!r} is a partition column of the table: its "
                        "values live in the table's metadata, which prunes by them already"
                    )

    def partitioning(self, paths: list[str], keys: list[str], schema) -> Partitioning:
        """None: a table's partition values are its log's, never its folder names."""
        from bloomskip.dataset.listing.hive import Partitioning

        return Partitioning((), {}, {})

    def table_files(self, paths: list[str], keys: list[str], schema_source) -> dict:
        """The snapshot's files: their partition values (from the log) and deletes."""
        return self.table_file
