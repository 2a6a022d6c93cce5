"""Reading a lake's data files and writing their segments: what a build task needs, alone.

A :class:`SegmentWriter` knows where the data lives (a store URI or a caller's pyarrow
filesystem) and where the index lives, and nothing of the user-facing dataset: a build worker
(``lake_build``) receives one inside its task, pickled, and opens its stores where it runs. The
driver's dataset holds one too, for the same reads (footers, schemas) on its side.

Example:
    >>> import pickle
    >>> writer = SegmentWriter("file:///tmp/data", "file:///tmp/data/_bloomskip")
    >>> pickle.loads(pickle.dumps(writer)).uri_of("a.parquet")
    '/tmp/data/a.parquet'
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import TYPE_CHECKING

from bloomskip._sources import ARROW_IPC
from bloomskip._store import Store, one_line, open_store
from bloomskip.errors import BloomskipError, FormatError

if TYPE_CHECKING:
    import pyarrow as pa

    from bloomskip.dataset.index.segments import IndexLog, SegmentEntry
    from bloomskip.dataset.index.sidecar import FileEntry
    from bloomskip.dataset.listing.files import SourceFile


class SegmentWriter:
    """The data files of a lake and the index location its segments go to (picklable).

    Args:
        location: The dataset's location (URI or path), or the path in ``filesystem``.
        index_location: Where the segments go.
        filesystem: The caller's pyarrow filesystem, if any (pyarrow filesystems pickle).
        store: The data's store, when the caller has it open already (not pickled).
        log: The index's log, when the caller has it open already (not pickled).

    Files are passed as the listing describes them (``ListedFile``: ``key``, ``info``,
    ``identity``).
    """

    def __init__(
        self,
        location: str,
        index_location: str,
        filesystem=None,
        *,
        store: Store | None = None,
        log: IndexLog | None = None,
    ) -> None:
        self.location = location
        self.index_location = index_location
        self._given_filesystem = filesystem
        self._store = store
        self._log = log
        self._arrow = (filesystem, location) if filesystem is not None else None
        #: ``(FieldIds, schema)``: the files' columns are found by field id and read as the
        #: schema names and types them (an Iceberg table's build); None: by name.
        self.field_ids = None

    def __getstate__(self) -> dict:
        # Stores, logs and a derived filesystem hold connections: a worker opens its own.
        state = dict(self.__dict__)
        state["_store"] = state["_log"] = None
        if self._given_filesystem is None:
            state["_arrow"] = None
        return state

    @property
    def store(self) -> Store | None:
        """The data's store (None when the data is read through a caller's filesystem)."""
        if self._store is None and self._given_filesystem is None:
            self._store = open_store(self.location)
        return self._store

    @property
    def log(self) -> IndexLog:
        """The index's log, where segments are written."""
        if self._log is None:
            from bloomskip.dataset.index.segments import IndexLog

            self._log = IndexLog(open_store(self.index_location))
        return self._log

    def filesystem(self):
        """``(pyarrow filesystem, base path)`` the data files are read through."""
        if self._arrow is None:
            self._arrow = self.store.arrow_filesystem()
        return self._arrow

    def source(self, listed) -> SourceFile:
        """The readable file of a listed one: a local file as its listing found it (path and
        format); an object read as listed (no request asks for its size, and every read is of
        the listed version)."""
        from bloomskip.dataset.listing.files import SourceFile

        if listed.source is not None:
            return listed.source
        filesystem, base = self.filesystem()
        opener = self.store.opener(listed.info) if self.store is not None else None
        return SourceFile(f"{base.rstrip('/')}/{listed.key}", "parquet", filesystem, opener)

    def uri_of(self, key: str) -> str:
        """The URI of a data file, as messages name it."""
        store = self.store
        return store.uri_of(key) if store is not None else f"{self.location}/{key}"

    def read_schema(self, listed) -> pa.Schema:
        """A file's Arrow schema (its footer: Parquet's, or an Arrow IPC file's).

        Raises:
            FormatError: The footer cannot be read (named with the file's URI).
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        source = self.source(listed)
        try:
            if source.format == ARROW_IPC:
                with pa.memory_map(str(source.path)) as handle:
                    return pa.ipc.open_file(handle).schema
            return pq.read_schema(source.open())
        except (pa.ArrowException, OSError) as exc:
            raise FormatError(
                f"cannot read the schema: {one_line(exc)}",
                field="footer",
                source=self.uri_of(listed.key),
            ) from exc

    def row_group_bytes(self, listed) -> list[int]:
        """The compressed bytes of each row group of a file (one footer read), to split it.

        Raises:
            BloomskipError: The footer cannot be read.
        """
        import pyarrow as pa

        from bloomskip.dataset.build.indexing import row_group_bytes
        from bloomskip.dataset.listing.files import open_parquet

        try:
            metadata = open_parquet(
                self.source(listed), listed.info.size, listed.info.mtime_ns
            ).metadata
        except (pa.ArrowException, OSError) as exc:
            raise BloomskipError(
                f"{self.uri_of(listed.key)}: cannot read its footer: {one_line(exc)}"
            ) from exc
        return row_group_bytes(metadata)

    def unify(self, schemas: list, keys: list[str]) -> pa.Schema:
        """The files' schemas read as one, as a scan of them all reads them.

        Types Arrow cannot unify (a column that is an integer in one file and a string in
        another) are, for local Parquet files, DuckDB's: its scan of them all by name widens
        them as every query's scan reads them (the sidecar layout's rule too).

        Args:
            schemas: The schemas to read as one.
            keys: The files they describe (a segment's describes all of its own).

        Raises:
            BloomskipError: Two files hold a column in types no scan reads as one.
        """
        import pyarrow as pa

        from bloomskip._sources import plain_types

        try:
            return pa.unify_schemas(
                [plain_types(schema) for schema in schemas], promote_options="permissive"
            )
        except (pa.ArrowTypeError, pa.ArrowInvalid) as exc:
            widened = self._scanned_as_one(keys)
            if widened is not None:
                return widened
            raise BloomskipError(
                f"{self.location}: the schemas of its files cannot be read as one "
                f"({one_line(exc)}; files such as {', '.join(keys[:3])})"
            ) from exc

    def _scanned_as_one(self, keys: list[str]) -> pa.Schema | None:
        """DuckDB's schema of local Parquet files ``keys`` scanned as one table by name; None
        for files elsewhere or of another format (Arrow is then the only reader)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from bloomskip._store import LocalStore
        from bloomskip.dataset.listing.files import SourceFile
        from bloomskip.dataset.scan.query import connect, duckdb_scan_schema

        if not isinstance(self._store, LocalStore) or self._arrow is not None or not keys:
            return None
        if not all(key.lower().endswith((".parquet", ".parq", ".pq")) for key in keys):
            return None
        sources = [SourceFile(Path(self._store.root, key), "parquet") for key in keys]
        try:
            schemas = [pq.read_schema(source.path) for source in sources]
        except (OSError, pa.ArrowException):
            return None  # the build or the query names the file it cannot read
        names = list(dict.fromkeys(name for schema in schemas for name in schema.names))
        connection = connect()
        try:
            return duckdb_scan_schema(connection, sources, lambda: schemas, names)
        finally:
            connection.close()

    def write_files(self, files, prepared, granule, executor, max_in_flight, progress=None):
        """Index ``files`` and write them as one segment (the body of a build task).

        ``progress`` is the task's (see ``build.index_file``): what it raises stops the task
        before the segment is written.

        Returns:
            ``(segment entry, rows indexed)``.

        Raises:
            BloomskipError: A file cannot be read, has a column of another type, or holds data
                the engine cannot hash (the message names the file).
        """
        entries: dict[str, FileEntry] = {}
        schemas = []
        for listed in files:
            entry, schema = self.build_part(
                listed, prepared, granule, None, executor, max_in_flight, progress
            )
            entries[listed.key] = entry
            schemas.append(schema)
        segment = self.write_entries(entries, prepared, granule, files, schemas)
        rows = sum(sum(entry.granule_rows) for entry in entries.values())
        return segment, rows

    def build_part(self, listed, prepared, granule, groups, executor, max_in_flight, progress=None):
        """Index one file, or only row groups ``groups`` of it (see ``build.build_file``).

        Returns:
            ``(its sidecar entry, its Arrow schema)``.

        Raises:
            BloomskipError: The file cannot be read, has a column of another type, or holds
                data the engine cannot hash (the message names the file).
        """
        import pyarrow as pa

        from bloomskip.dataset.build.indexing import index_file
        from bloomskip.dataset.listing.files import open_parquet

        source = self.source(listed)
        uri = self.uri_of(listed.key)
        if source.format == ARROW_IPC:
            # Its record batches are its granules, read by the build from the mapped file.
            opened, schema = None, self.read_schema(listed)
        else:
            try:
                # One open and one footer read serve the schema, the identity and the reads.
                opened = open_parquet(source, listed.info.size, listed.info.mtime_ns)
            except BloomskipError:
                raise
            except (pa.ArrowException, KeyError, ValueError, OSError) as exc:
                raise BloomskipError(f"{uri}: cannot index it: {one_line(exc)}") from exc
            if self.field_ids is not None:
                from bloomskip.dataset.listing.field_ids import FieldIdParquet

                opened = FieldIdParquet(opened, *self.field_ids)
            schema = opened.schema
        self._check_types(listed, schema, prepared)
        entry = index_file(
            source,
            listed.key,
            prepared,
            granule,
            executor,
            max_in_flight,
            opened,
            groups,
            uri,
            progress,
        )
        return entry, schema

    def write_entries(self, entries, prepared, granule, files, schemas) -> SegmentEntry:
        """Write the entries of ``files`` (listed files, in key order) as one new segment."""
        from bloomskip.dataset.index.sidecar import Sidecar

        sidecar = Sidecar(granule, [item.spec for item in prepared], entries)
        identities = {listed.key: listed.identity for listed in files}
        schema = self.segment_schema(schemas, list(entries))
        return self.log.write_segment(sidecar, identities, schema)

    def segment_schema(self, schemas: list, keys: list[str], merged: bool = False) -> str:
        """The schema a segment records for its files (:meth:`unify`), saying whether every
        one of them holds exactly it (:data:`FILES_KEY`).

        Args:
            schemas: The files' own schemas (their footers'), or with ``merged`` the schemas
                of the segments merged into this one (each saying, or not, whether its files
                hold exactly it).
            keys: The files.
            merged: ``schemas`` are segments' (compaction), not files'.
        """
        from bloomskip._sources import plain_types

        unified = self.unify(schemas, keys)
        kinds = {files_schema_kind(schema) for schema in schemas} if merged else {ONE_SCHEMA}
        if SEVERAL_SCHEMAS in kinds or not all(
            plain_types(schema).equals(unified) for schema in schemas
        ):
            kind = SEVERAL_SCHEMAS
        elif kinds == {ONE_SCHEMA}:
            kind = ONE_SCHEMA
        else:
            kind = None  # merged from a segment written before the key: the footers tell
        metadata = {} if kind is None else {FILES_KEY: kind}
        return encode_schema(unified.with_metadata(metadata))

    def discard(self, segment: SegmentEntry) -> None:
        """Delete a segment :meth:`write_entries` wrote that will not be committed (its build
        failed or was interrupted): no version references it, and no other build knows it.

        Raises:
            StorageError: It cannot be deleted.
        """
        self.log.store.delete(segment.key)

    def _check_types(self, listed, schema, prepared) -> None:
        from bloomskip.clickhouse.types import index_type_key

        for item in prepared:
            for name, arrow_type in zip(item.columns, item.arrow_types, strict=False):
                if name in schema.names:
                    found = schema.field(name).type
                    if index_type_key(found) != index_type_key(arrow_type):
                        raise BloomskipError(
                            f"index {item.spec.definition}: column {name!r} is {arrow_type} in "
                            f"the first file and {found} in {self.uri_of(listed.key)}; "
                            "an index needs one type"
                        )


#: The key of a segment schema's metadata that says whether its files hold exactly that schema
#: (:data:`ONE_SCHEMA`: DuckDB may read them by path) or not (:data:`SEVERAL_SCHEMAS`: one lacks
#: a column, or types differ). A segment written before it says neither: its files' footers
#: tell.
FILES_KEY = b"bloomskip.files"
ONE_SCHEMA = b"one"
SEVERAL_SCHEMAS = b"several"


def encode_schema(schema: pa.Schema) -> str:
    """A schema as a segment records it (its Arrow IPC serialization, base64)."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def files_schema_kind(schema: pa.Schema) -> bytes | None:
    """:data:`ONE_SCHEMA` or :data:`SEVERAL_SCHEMAS` as a segment's decoded schema records
    it; None for a segment written before (or a file's own schema)."""
    return (schema.metadata or {}).get(FILES_KEY)


__all__ = [
    "FILES_KEY",
    "ONE_SCHEMA",
    "SEVERAL_SCHEMAS",
    "SegmentWriter",
    "encode_schema",
    "files_schema_kind",
]
