"""A table snapshot's files as a dataset's listing (docs/tables.md).

The files are the snapshot's data files, never whatever the table's storage holds; storage is
still listed once per query, so that a file rewritten behind the table's log (its size differs
from the log's) is told apart and scanned, never pruned. The table contributes per-file
adjustments only: its own file pruning (partition values, statistics) before any index is
read, its schema, each file's partition values and deleted rows, and (Iceberg) the field ids
its columns are found by.

An Iceberg index is bound to field ids: each column an index definition names is recorded
with its field id (``Manifest.table["columns"]``), so the definitions stay as they were
written, the segments stay valid, and a renamed column keeps its index. A query sees each
definition under the names of the snapshot it reads (:meth:`TableListing.served_indexes`); a
build reads the files under the definitions' names too (:meth:`TableListing.build_indexes`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bloomskip.dataset.listing.prefix import ListedFile, PrefixListing
from bloomskip.dataset.listing.tables.formats import file_pruning_predicate
from bloomskip.errors import BloomskipError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import pyarrow as pa

    from bloomskip._store import ObjectInfo, Store
    from bloomskip.dataset.index.segments import Manifest
    from bloomskip.dataset.index.sidecar import IndexSpec
    from bloomskip.dataset.listing.field_ids import FieldIds
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
        self._served: tuple[tuple, tuple[list[IndexSpec], dict[int, str]]] | None = None

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

    def record(self, indexes: Sequence[IndexSpec] = (), base: Manifest | None = None) -> dict:
        """The snapshot a build covers and, for Iceberg, the field each column of ``indexes``
        is bound to (``columns``): an existing index's as ``base`` bound it, a new one's the
        snapshot's column of that name."""
        record = self.snapshot.record()
        if self.snapshot.field_ids is not None and indexes:
            existing = {
                name for spec in (base.indexes if base else ()) for name, _ in spec.column_types
            }
            columns = self.snapshot.field_ids.columns
            bound = {}
            for spec in indexes:
                for name, _ in spec.column_types:
                    if name in existing:
                        bound[name] = self.snapshot.history.field_of(name, base.table)
                    else:
                        bound[name] = columns.get(name)
            record["columns"] = {
                name: number for name, number in bound.items() if number is not None
            }
        return record

    def served_indexes(self, manifest: Manifest) -> tuple[list[IndexSpec], dict[int, str]]:
        """The index definitions as this snapshot names their columns, and the indexes it
        cannot use (by number, with why: their column is not in the snapshot, or which column
        they were built on cannot be told).

        An Iceberg index is bound to field ids: a column renamed since it was defined appears
        under its name in the snapshot, so a query over the new name uses it (and one at an
        older snapshot, over the old name).
        """
        ids = self.snapshot.field_ids
        if ids is None:
            return list(manifest.indexes), {}
        key = (manifest.indexes, repr(manifest.table))
        if self._served is None or self._served[0] != key:
            now = {number: name for name, number in ids.columns.items()}
            served, unusable = [], {}
            for number, spec in enumerate(manifest.indexes):
                renamed = {}
                for name, _ in spec.column_types:
                    field_id = self.snapshot.history.field_of(name, manifest.table)
                    if field_id is None or field_id not in now:
                        unusable[number] = _unbound(name, field_id, self.snapshot.snapshot)
                    elif now[field_id] != name:
                        renamed[name] = now[field_id]
                served.append(renamed_index(spec, renamed) if renamed else spec)
            self._served = key, (served, unusable)
        served, unusable = self._served[1]
        return list(served), dict(unusable)

    def build_indexes(
        self, manifest: Manifest | None, schema: pa.Schema
    ) -> tuple[pa.Schema, list[IndexSpec], FieldIds | None]:
        """What a build of ``manifest``'s indexes reads: the schema their definitions are
        prepared against and the files read as, the definitions as the build keeps them, and
        the field ids the files' columns are found by (None: by name, Delta).

        A column renamed since an index was defined is read under the index's name too (by
        its field id), so that the definition and its segments stay as they are. Should that
        name now be another column's, the definition is written with the column's new name
        and every file is indexed again. An index column the table promoted (int to long,
        float to double) is hashed as its new type from now on: every file is indexed again.
        Each such change is a line of :attr:`warnings`.

        Raises:
            BloomskipError: An index's column was dropped from the table, or which column it
                was built on cannot be told.
        """
        ids = self.snapshot.field_ids
        existing = list(manifest.indexes) if manifest is not None else []
        if ids is None:
            return schema, existing, None
        import pyarrow as pa

        from bloomskip.clickhouse.ddl import parse_index_definition
        from bloomskip.dataset.listing.field_ids import FieldIds

        now = {number: name for name, number in ids.columns.items()}
        columns = dict(ids.columns)
        fields = {item.name: item for item in schema}
        kept = []
        for spec in existing:
            renamed = {}
            for name, _ in spec.column_types:
                field_id = self.snapshot.history.field_of(name, manifest.table)
                if field_id is None or field_id not in now:
                    index = parse_index_definition(spec.definition).name
                    raise BloomskipError(
                        f"index {spec.definition}: {_unbound(name, field_id)}; drop it (bloomskip "
                        f"index drop {self.snapshot.name} {index}) and define it again"
                    )
                if now[field_id] == name:
                    continue
                if columns.setdefault(name, field_id) != field_id:
                    renamed[name] = now[field_id]
                    self.warnings.append(
                        f"index {spec.definition}: its column {name!r} is now named "
                        f"{now[field_id]!r}, and {name!r} names another column: the index "
                        f"reads {now[field_id]!r} from now on; every file is indexed again"
                    )
                else:  # read under the index's name too, by the field id
                    fields.setdefault(name, schema.field(now[field_id]).with_name(name))
            kept.append(renamed_index(spec, renamed) if renamed else spec)
        read_as = pa.schema(list(fields.values()))
        return (
            read_as,
            [self._retyped(spec, read_as) for spec in kept],
            FieldIds(columns, ids.mapped),
        )

    def _retyped(self, spec: IndexSpec, schema: pa.Schema) -> IndexSpec:
        """``spec`` hashing each column as its type in ``schema`` where the type it was
        indexed as can no longer be the column's (a promotion); a line of :attr:`warnings`."""
        from bloomskip.clickhouse.types import (
            clickhouse_type_for,
            index_type_key,
            parse_clickhouse_type,
        )
        from bloomskip.dataset.index.sidecar import IndexSpec

        types = []
        for name, recorded in spec.column_types:
            arrow_type = schema.field(name).type
            if index_type_key(arrow_type) != str(parse_clickhouse_type(recorded).base()):
                now = clickhouse_type_for(arrow_type)
                self.warnings.append(
                    f"index {spec.definition}: column {name!r} is {now} now, {recorded} when "
                    "indexed (the table promoted it): every file is indexed again"
                )
                recorded = now
            types.append((name, recorded))
        return IndexSpec(spec.definition, tuple(types))

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


def _unbound(name: str, field_id: int | None, snapshot: int | None = None) -> str:
    """Why an index column is not a column of the snapshot read (``snapshot``) or built."""
    if field_id is None:
        return (
            f"which column {name!r} was when it was indexed cannot be told (the name was given "
            "to several Iceberg fields, and the snapshot it was indexed at has expired)"
        )
    if snapshot is None:
        return f"its column {name!r} (Iceberg field {field_id}) was dropped from the table"
    return f"its column {name!r} (Iceberg field {field_id}) is not in snapshot {snapshot}"


def renamed_index(spec: IndexSpec, names: Mapping[str, str]) -> IndexSpec:
    """``spec`` with its columns renamed (``names``: old -> new); its name and type as they
    were.

    Example:
        >>> renamed_index(IndexSpec("INDEX msg msg TYPE bloom_filter GRANULARITY 1",
        ...                         (("msg", "String"),)), {"msg": "message"}).definition
        'INDEX msg message TYPE bloom_filter GRANULARITY 1'
    """
    from bloomskip.clickhouse.ddl import IndexDefinition, parse_index_definition, quote_identifier
    from bloomskip.dataset.index.sidecar import IndexSpec

    definition = parse_index_definition(spec.definition)
    expressions = []
    for expression in definition.index_columns:
        column = quote_identifier(names.get(expression.column, expression.column))
        expressions.append(
            column if expression.function is None else f"{expression.function}({column})"
        )
    renamed = IndexDefinition.create(
        definition.type,
        expressions,
        definition.arguments,
        name=definition.name,
        granularity=definition.granularity,
    )
    types = tuple((names.get(name, name), kind) for name, kind in spec.column_types)
    return IndexSpec(renamed.to_sql(), types)
