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

Example:
    >>> table = TableDataset("events/")  # doctest: +SKIP
    >>> table.build_index(["user_id TYPE bloom_filter(0.01)"])  # doctest: +SKIP
    >>> TableDataset("events/", version=3).query("user_id = 42").num_rows  # doctest: +SKIP
    2
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from bloomskip._store import ObjectInfo
from bloomskip.dataset.backends.lake import LakeDataset, ListedFile
from bloomskip.dataset.index.segments import identity_matches
from bloomskip.dataset.listing.tables.formats import file_pruning_predicate, open_table
from bloomskip.errors import BloomskipError, FormatError, StorageError

if TYPE_CHECKING:
    import pyarrow as pa

    from bloomskip.dataset.index.segments import Manifest
    from bloomskip.dataset.prune import Explanation


class TableDataset(LakeDataset):
    """A Delta or Iceberg table at one snapshot, with a segmented skip index.

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
        self.snapshot = open_table(table, version=version, snapshot_id=snapshot_id, as_of=as_of)
        super().__init__(self.snapshot.location, index_location=index_location)
        self.table_files = {item.key: item for item in self.snapshot.files}
        self._listing_warnings: list[str] = []

    # -- which files ----------------------------------------------------------------------

    def _data_files(self, listing: list[ObjectInfo]) -> list[ListedFile]:
        """The snapshot's data files with their identities from the listing.

        Raises:
            BloomskipError: A file the snapshot names is not in storage.
        """
        listed = {info.key: info for info in listing}
        files, warnings = [], []
        for item in self.snapshot.files:
            info = listed.get(item.key)
            if info is None:
                raise BloomskipError(
                    f"{self.writer.uri_of(item.key)}: the table's snapshot "
                    f"{self.snapshot.snapshot} "
                    "names this data file, but storage does not hold it (deleted behind the "
                    "table's back, or vacuumed)"
                )
            if info.size != item.size:
                warnings.append(
                    f"{self.writer.uri_of(item.key)}: {info.size:,} bytes in storage, "
                    f"{item.size:,} per the table's metadata: changed behind the table's "
                    "back; scanned, never pruned"
                )
                info = ObjectInfo(info.key, info.size, info.mtime_ns)  # no identity: scanned
            files.append(ListedFile(item.key, info))
        self._listing_warnings = warnings
        return files

    def _unverifiable(self, listed: ListedFile) -> str:
        item = self.table_files[listed.key]
        if listed.info.size != item.size:
            return (
                f"{self.writer.uri_of(listed.key)}: not indexed: it differs from the table's "
                "metadata"
            )
        return super()._unverifiable(listed)

    def _table_record(self) -> dict:
        return self.snapshot.record()

    # -- building -------------------------------------------------------------------------

    def build_index(self, indexes=None, **options):
        """Index the newest snapshot's new files; see :meth:`LakeDataset.build_index`.

        Raises:
            BloomskipError: The table was opened at an older snapshot, or an index is over a
                partition column (the table's own pruning skips by those).
        """
        if not self.snapshot.is_latest:
            raise BloomskipError(
                f"{self.snapshot.name}: a build indexes the table's newest snapshot; open it "
                "without --version/--snapshot-id/--as-of (queries at older snapshots use it)"
            )
        if not self.snapshot.files:
            raise BloomskipError(f"{self.snapshot.name}: the table has no data file to index")
        report = super().build_index(indexes, **options)
        report.warnings[:0] = self._listing_warnings
        return report

    def _prepare(self, indexes, granule, replace, manifest, files):
        from bloomskip.clickhouse.ddl import parse_index_definition

        partition_columns = {name for item in self.snapshot.files for name in item.partition}
        for text in indexes or ():
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
        return super()._prepare(indexes, granule, replace, manifest, files)

    # -- querying -------------------------------------------------------------------------

    def explain(self, where: str, *, describe_data: bool = False) -> Explanation:
        """Prune by the table's own metadata, then by the index; see :meth:`LakeDataset.explain`.

        Returns:
            An :class:`~bloomskip.dataset.prune.Explanation` over the files the table's own
            pruning kept; its ``table`` says how many that was.
        """
        predicate = file_pruning_predicate(where, self.snapshot.schema)
        kept = None
        if predicate is not None and self.snapshot.keep_files is not None:
            kept = self.snapshot.keep_files(predicate)
        self._kept_by_table = kept
        explanation = super().explain(where, describe_data=describe_data)
        explanation.warnings[:0] = self._listing_warnings
        explanation.table = {
            "format": self.snapshot.format,
            "snapshot": self.snapshot.snapshot,
            "files": len(self.snapshot.files),
            "files_kept": len(explanation.files),
            "predicate": predicate,
        }
        return explanation

    def _states(self, files, manifest, where, warnings):
        kept = getattr(self, "_kept_by_table", None)
        if kept is not None:
            # A file changed behind the table's back is not described by the table's
            # statistics either: it is kept whatever they say.
            covered = manifest.files(item.key for item in files) if manifest is not None else {}
            files = [
                listed
                for listed in files
                if listed.key in kept
                or listed.identity is None
                or (
                    listed.key in covered
                    and not identity_matches(covered[listed.key][1], listed.identity)
                )
            ]
        return super()._states(files, manifest, where, warnings)

    def _coverage(self, files, manifest: Manifest | None) -> dict:
        """The live manifest's coverage, and for files it no longer holds (an older
        snapshot's, removed since) the newest older version that covered them with the same
        definitions, until a vacuum deletes that version."""
        covered = super()._coverage(files, manifest)
        wanted = {listed.key for listed in files} - covered.keys()
        # At the newest snapshot a file the live manifest lacks is new since the last build:
        # no older version holds it, and reading them all would cost a request each per query.
        if manifest is None or not wanted or self.snapshot.is_latest:
            return covered
        for number in reversed(self.log.version_numbers()):
            if number >= manifest.version:
                continue
            try:
                older = self.log.read_version(number)
            except (FormatError, StorageError):
                continue  # vacuumed meanwhile, or unreadable: its files are scanned
            if (older.granule, older.indexes) != (manifest.granule, manifest.indexes):
                break  # built with other definitions: the query's pruning cannot use it
            found = older.files(wanted)
            covered.update(found)
            wanted -= found.keys()
            if not wanted:
                break
        return covered

    def _schema(self, files, manifest, file_schemas=None) -> pa.Schema:
        return self.snapshot.schema

    def _partitioning(self, files, schema):
        """None: a table's partition values are its log's, never its folder names."""
        from bloomskip.dataset.listing.hive import Partitioning

        return Partitioning((), {}, {})

    def _table_files(self, explanation: Explanation) -> dict:
        """The snapshot's files: their partition values (from the log) and deletes."""
        return self.table_files

    def run(self, explanation: Explanation, where: str, columns=None, limit=None) -> pa.Table:
        """Read what ``explanation`` keeps, with partition values and deletes applied, and
        filter it exactly; see :meth:`LakeDataset.run`."""
        return self._run_on(explanation, where, columns, limit, explanation.table_files)
