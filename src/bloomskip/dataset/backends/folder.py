"""A local folder, glob or file of Parquet / Arrow IPC files with a single-file sidecar index.

:class:`FolderDataset` is what a :class:`~bloomskip.Dataset` over local files without
``index_location`` holds: it lists the files (each stat-ed once per call) and keeps the index
in one sidecar file (``dataset/index/sidecar.py``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bloomskip.dataset.backends.cache import DatasetCache, sidecar_key
from bloomskip.dataset.build.report import SIDECAR, BuildReport
from bloomskip.dataset.index.store import SidecarStore
from bloomskip.dataset.listing.folder import FolderListing
from bloomskip.dataset.locate import (
    DIRECTORY_SIDECAR,
    default_sidecar_path,
    indexed_folder,
    local_path,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from bloomskip.dataset.index.sidecar import Sidecar
    from bloomskip.dataset.prune import Explanation


def _new_connection():
    """A DuckDB connection caching Parquet footers (``parquet_metadata_cache``)."""

    from bloomskip.dataset.scan.query import connect

    connection = connect()
    connection.execute("SET GLOBAL parquet_metadata_cache = true")
    return connection


class FolderDataset:
    """A folder, glob or file of Parquet or Arrow IPC files with a sidecar skip index.

    Args:
        path: A Parquet or Arrow IPC file, a directory or a glob of them, all of one format
            (an IPC file's record batches are its row groups), also as a ``file://`` URI.
        sidecar: Where the index lives (default: :func:`default_sidecar_path`). A glob
            without an index of its own, inside a folder that has one (``index build DIR``),
            is served by that folder's index (:attr:`index_path`).

    Raises:
        BloomskipError: The dataset holds no file, a file is not Parquet / an Arrow IPC file,
            or it mixes the two.

    It caches the decoded index between queries; use one per thread. Every call
    (``explain``, ``query``, ``build_index``, ``status``, ``schema`` ...) lists the files again,
    so it sees the dataset as it is then: a file added, removed or rewritten since the last call
    is read, dropped or scanned afresh, and a build indexes it. Only new or changed files are
    opened to tell their format.

    Example:
        >>> ds = FolderDataset("logs/")  # doctest: +SKIP
        >>> ds.query("user_id = 42").num_rows  # doctest: +SKIP
        3
    """

    def __init__(self, path: str | os.PathLike, sidecar: str | os.PathLike | None = None) -> None:
        path = local_path(path)
        self.path = os.fspath(path)
        self._own_sidecar = sidecar is not None
        self.sidecar_path = Path(sidecar) if sidecar is not None else default_sidecar_path(path)
        #: The index's store: the sidecar this dataset builds (and reads, unless a glob
        #: borrows its folder's index, see :attr:`index_path`).
        self.index = SidecarStore(self.sidecar_path)
        self._folder_index: SidecarStore | None = None
        #: Where the files come from.
        self.listing = FolderListing(path)
        # Derived from the files and the sidecar, and dropped whole when the stat of any of
        # them changes: a reused Dataset answers from memory but never from a stale state.
        self._cache = DatasetCache()
        self._relist()

    @property
    def explicit_sidecar(self) -> bool:
        """Whether the sidecar was asked for (``sidecar=``), rather than found beside files
        indexed before the segmented layout became the default (read until a build
        migrates it)."""
        return self._own_sidecar

    def _relist(self) -> None:
        """List the dataset's files as they are now (every public call starts with this).

        Sets :attr:`root`, :attr:`files` and :attr:`index_folder`; the cache then sees the new
        listing through the files' ``stat`` and drops what no longer holds.

        Raises:
            BloomskipError: The dataset holds no file, or files of two formats.
        """
        listed = self.listing.list()
        self.root, self.files, self._keys = listed.root, listed.files, listed.keys
        #: The indexed folder whose index serves this glob while it has none of its own.
        self.index_folder = None
        if not self._own_sidecar and self.listing.is_glob:
            self.index_folder = indexed_folder(self.root)

    def _current(self) -> None:
        """List the files again and drop what the cache derived from any that changed."""
        self._relist()
        self._cache.refresh(self._keys, sidecar_key(self._index_in_use()[0]))

    @property
    def index_path(self) -> Path:
        """The sidecar queries read: :attr:`sidecar_path`, or, for a glob with no index of its
        own inside an indexed folder, that folder's ``_bloomskip.index``.

        The folder's index names files relative to the folder; files the glob matches that it
        does not name, or that changed since it was built, are scanned, as for any index.
        Building (:meth:`build_index`) always writes :attr:`sidecar_path`, which from then on
        is the glob's index. The indexed folder (:attr:`index_folder`) is looked for when the
        ``Dataset`` is made, as its files are listed then; its index is re-read whenever it
        changes.

        Example:
            >>> FolderDataset("logs/part-1*.parquet").index_path  # doctest: +SKIP
            PosixPath('logs/_bloomskip.index')
        """
        return self._index_in_use()[0]

    @property
    def index_in_use(self) -> SidecarStore:
        """The store of :attr:`index_path`: this dataset's sidecar, or its folder's."""
        return self._store_at(self.index_path)

    def _index_in_use(self) -> tuple[Path, Path]:
        """``(sidecar read, the directory it names files relative to)``."""
        if self.index_folder is not None and not self.sidecar_path.exists():
            folder_index = self.index_folder / DIRECTORY_SIDECAR
            if folder_index.exists():
                return folder_index, self.index_folder
        return self.sidecar_path, self.root

    def _borrowed(self) -> bool:
        """Whether the index read is an indexed folder's, not this dataset's own."""
        return self._index_in_use()[0] != self.sidecar_path

    def duckdb_connection(self):
        """The DuckDB connection :meth:`query` runs on (created on first use, then reused).

        It caches Parquet footers (``parquet_metadata_cache``), so a repeated query does not
        parse them again. DuckDB re-validates that cache only by modification time in seconds,
        so the connection is replaced whenever a file of the dataset (or its sidecar) changes
        (its ``stat``): the files are listed again first.
        """
        self._current()
        return self._connection()

    def _connection(self, keys=None):
        """The connection, replaced when a file's ``stat`` key differs from those it served:
        the last listing's, or ``keys`` (a decision's, which its read is checked against)."""
        cache = self._cache
        cache.refresh(self._keys if keys is None else keys, sidecar_key(self.index_path))
        if cache.connection is None:
            pending, cache.pending = cache.pending, None
            # A connection opened ahead (see query) is new: it has cached no footer yet.
            cache.connection = pending.result() if pending is not None else _new_connection()
        return cache.connection

    @property
    def schema(self) -> pa.Schema:
        """The dataset's Arrow schema: every file's columns by name, in order of first
        appearance, each with its type in the first file that has it (read once).

        Files may differ (a later file adds a column, another stores it with another type):
        queries then see the one schema DuckDB's ``union_by_name`` scan gives the whole
        dataset (:meth:`scan_schema`), and an index over a column whose type differs between
        files is refused (:meth:`schema_conflicts`).

        Raises:
            FormatError: A file's footer cannot be read.
        """
        self._current()
        return self._schema()

    def _schema(self) -> pa.Schema:
        import pyarrow as pa

        from bloomskip.dataset.listing.hive import partitioning
        from bloomskip.dataset.vocabulary import relative_to

        if self._cache.schema is None:
            fields: dict[str, pa.Field] = {}
            for schema in self._file_schemas():
                for field in schema:
                    fields.setdefault(field.name, field)
            # The columns of key=value folders follow the files' own (dataset/listing/hive.py).
            self._cache.partitioning = partitioning(
                [str(source.path) for source in self.files],
                {name: field.type for name, field in fields.items()},
                [relative_to(source.path, self.root) for source in self.files],
            )
            self._cache.schema = pa.schema(
                list(fields.values()) + list(self._cache.partitioning.fields)
            )
        return self._cache.schema

    def _partitioning(self):
        """The partition columns of the files' ``key=value`` folders and their values."""
        from bloomskip.dataset.listing.hive import Partitioning, path_partitions

        if self._cache.partitioning is None and not path_partitions(str(self.files[0].path)):
            return Partitioning((), {}, {})  # no partition folder: no footer is read for it
        self._schema()
        return self._cache.partitioning

    def file_schemas(self) -> list[pa.Schema]:
        """The Arrow schema of each file, in dataset order (footers read once).

        Returns:
            One ``pyarrow.Schema`` per file of :attr:`files`.

        Raises:
            FormatError: A file's footer cannot be read.

        Example:
            >>> [s.names for s in Dataset("logs/").file_schemas()]  # doctest: +SKIP
            [['user_id', 'message'], ['user_id', 'message', 'extra']]
        """
        self._current()
        return self._file_schemas()

    def _file_schemas(self) -> list[pa.Schema]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from bloomskip.errors import FormatError

        cache = self._cache
        if cache.file_schemas is None:
            schemas = []
            stored = []  # the Parquet schemas: physical and logical types
            for source in self.files:
                try:
                    if source.format == "parquet":
                        with pq.ParquetFile(source.path) as parquet:
                            schemas.append(parquet.schema_arrow)
                            stored.append(parquet.schema)
                    else:
                        with pa.memory_map(str(source.path)) as handle:
                            schemas.append(pa.ipc.open_file(handle).schema)
                except (pa.ArrowException, OSError) as exc:
                    raise FormatError(
                        f"cannot read the schema: {exc}", field="footer", source=str(source.path)
                    ) from exc
            # Equal Arrow schemas can hide types DuckDB reads differently (an INT96 and an
            # INT64 nanosecond timestamp are both timestamp[ns] to Arrow, TIMESTAMP and
            # TIMESTAMP_NS to DuckDB): the files agree only if their Parquet schemas do too.
            cache.uniform = all(schema.equals(schemas[0]) for schema in schemas[1:]) and all(
                schema.equals(stored[0]) for schema in stored[1:]
            )
            cache.file_schemas = schemas
        return cache.file_schemas

    def uniform(self) -> bool:
        """Whether every file has the same schema: Arrow's (names, order and types) and the
        Parquet one it is read from (physical and logical types).

        Returns:
            True when the files agree; queries then read them without a ``union_by_name``
            reader over all of them.

        Raises:
            FormatError: A file's footer cannot be read.

        Example:
            >>> FolderDataset("logs/").uniform()  # doctest: +SKIP
            True
        """
        self._current()
        return self._uniform()

    def _uniform(self) -> bool:
        self._file_schemas()
        return self._cache.uniform

    def schema_conflicts(self) -> dict[str, str]:
        """Columns whose type differs between files, each with a description naming them.

        Types are compared as an index hashes them (their ClickHouse types, LowCardinality
        aside): a dictionary-encoded and a plain string column agree.

        Returns:
            ``{column: "a.parquet: int64, b.parquet: string"}``; empty when the files agree.

        Raises:
            FormatError: A file's footer cannot be read.

        Example:
            >>> FolderDataset("drift/").schema_conflicts()  # doctest: +SKIP
            {'id': 'part-0.parquet: int64, part-2.parquet: string'}
        """
        self._current()
        return self._schema_conflicts()

    def _schema_conflicts(self) -> dict[str, str]:
        from bloomskip.dataset.listing.files import type_conflicts
        from bloomskip.dataset.vocabulary import relative_to

        named = [relative_to(source.path, self.root) for source in self.files]
        return type_conflicts(zip(named, self._file_schemas(), strict=True))

    def scan_schema(self) -> pa.Schema:
        """The schema of the rows a query returns: DuckDB's scan of the whole dataset
        (``union_by_name``: columns by name, types widened where files differ), whichever
        row groups the index keeps.

        Returns:
            The ``pyarrow.Schema`` of every query's result (before ``columns`` selects).

        Raises:
            BloomskipError: DuckDB cannot read the files together.

        Example:
            >>> FolderDataset("drift/").scan_schema().field("id").type  # doctest: +SKIP
            DataType(string)
        """
        self._current()
        return self._scan_schema(self._connection())

    def _scan_schema(self, connection) -> pa.Schema:
        import pyarrow as pa

        from bloomskip.dataset.listing.files import check_ipc_schemas
        from bloomskip.dataset.scan.query import duckdb_scan_schema
        from bloomskip.dataset.vocabulary import relative_to

        cache = self._cache
        if cache.scan_schema is None:
            if all(source.format == "parquet" for source in self.files):
                scanned = duckdb_scan_schema(
                    connection, self.files, self._file_schemas, self._schema().names
                )
                cache.scan_schema = pa.schema(list(scanned) + list(self._partitioning().fields))
            else:
                named = [relative_to(source.path, self.root) for source in self.files]
                check_ipc_schemas(zip(named, self._file_schemas(), strict=True))
                cache.scan_schema = self._schema()
        return cache.scan_schema

    def load_sidecar(self) -> Sidecar | None:
        """Return the sidecar, or None when there is none.

        The verified sidecar is kept, and read again only when its ``stat`` (or that of a file
        of the dataset) changes.

        Returns:
            The sidecar, or None.

        Raises:
            FormatError: The sidecar exists but is corrupt or cannot be read (callers then
                scan or rebuild, as for any unusable index).

        Example:
            >>> FolderDataset("logs/").load_sidecar().granule  # doctest: +SKIP
            'row-group'
        """
        return self._load_index(self._index_in_use()[0])

    def _load_index(self, path: Path) -> Sidecar | None:
        self._cache.refresh(self._keys, sidecar_key(path))
        return self._store_at(path).load()

    def _store_at(self, path: Path) -> SidecarStore:
        """The store of the sidecar at ``path``: this dataset's own, or its folder's."""
        if path == self.sidecar_path:
            return self.index
        if self._folder_index is None or self._folder_index.path != path:
            self._folder_index = SidecarStore(path)
        return self._folder_index

    def build_index(
        self,
        indexes: Sequence[str] | None = None,
        *,
        granule: str | int | None = None,
        replace: bool = False,
        progress: bool | None = None,
        jobs: int | None = None,
        client=None,
    ) -> BuildReport:
        """Build or refresh the sidecar index, re-indexing only new or changed files.

        Args:
            indexes: ClickHouse index definitions, e.g. ``"user_id TYPE bloom_filter(0.01)"``,
                added to the sidecar's own (see
                :func:`~bloomskip.dataset.build.indexing.merge_indexes`;
                only the new ones are computed for files already indexed). None or empty:
                refresh the existing definitions.
            granule: ``"row-group"`` (a record batch for Arrow IPC) or rows per granule;
                default: the sidecar's, else ``"row-group"``. Another granule than the
                sidecar's rebuilds every index, so it needs ``replace``.
            replace: Let a definition replace the sidecar's definition of the same name, and a
                new granule replace its granule.
            progress: Show a progress bar (default: only on a terminal).
            jobs: Threads building granules (default: one per CPU); the sidecar is the same
                bytes for any count.
            client: A ``distributed.Client`` whose workers build the files (they must see
                the folder at the same path); the sidecar is the same bytes.

        Returns:
            A :class:`BuildReport`.

        Raises:
            BloomskipError: Bad definitions, no definitions and no sidecar, a definition or
                granule that differs from the sidecar's without ``replace``, data the engine
                cannot hash, or a sidecar location that cannot be written.

        Two builds of one sidecar at once take turns (a lock on its folder): the second
        starts from what the first wrote, so neither loses the other's indexes.

        Example:
            >>> FolderDataset("logs/").build_index(["msg TYPE tokenbf_v1(8192, 3, 0)"]).rebuilt
            ... # doctest: +SKIP
            ['part-0.parquet', 'part-1.parquet']
        """
        with self.index.lock():
            return self._build_locked(indexes, granule, replace, progress, jobs, client)

    def _build_locked(self, indexes, granule, replace, progress, jobs, client) -> BuildReport:
        from bloomskip.dataset.build.indexing import (
            merge_indexes,
            never_used_warnings,
            prepare_index,
            resolve_granule,
        )
        from bloomskip.dataset.build.sidecar_build import build_sidecar
        from bloomskip.dataset.index.sidecar import FORMAT_VERSION
        from bloomskip.errors import BloomskipError, FormatError

        self._current()
        borrowed = self._index_in_use()[0] if self._borrowed() else None
        try:
            # A glob served by its folder's index gets an index of its own: the folder's names
            # other files too, which this build does not see.
            previous = self._load_index(self.sidecar_path)
        except FormatError as exc:
            if not indexes:
                raise BloomskipError(
                    f"the index {self.sidecar_path} is corrupt ({exc}); give its --index "
                    "definitions to build it again"
                ) from exc
            previous = None  # a corrupt sidecar is rebuilt from the definitions given
        schema = self._schema()
        conflicts = self._schema_conflicts()
        if indexes is None or len(indexes) == 0:
            if previous is None and borrowed is not None:
                raise BloomskipError(
                    f"{self.path}: its files are indexed by the folder's index {borrowed}; "
                    f"refresh that (bloomskip index build {self.index_folder}), or give --index "
                    "definitions for an index of this glob alone"
                )
            if previous is None:
                raise BloomskipError("no --index given and no existing index to refresh")
            indexes = ()
        existing = [
            prepare_index(spec.definition, schema, dict(spec.column_types), conflicts)
            for spec in (previous.indexes if previous is not None else ())
        ]
        requested = [prepare_index(text, schema, None, conflicts) for text in indexes]
        prepared = merge_indexes(existing, requested, replace)
        for item in prepared:
            self._partitioning().check_index(item.spec.definition, item.columns)
        granule = resolve_granule(granule, previous.granule if previous else None, replace)
        sidecar, rebuilt = build_sidecar(
            self.files, self.root, prepared, granule, previous, progress, jobs, client
        )
        written = (
            rebuilt
            or previous is None
            or list(previous.indexes) != [item.spec for item in prepared]
            or previous.format_version != FORMAT_VERSION  # upgraded to the current format
            or len(previous.files) != len(sidecar.files)
        )
        if written:
            self.index.write(sidecar)
        warnings = [warning for item in prepared for warning in never_used_warnings(item)]
        if borrowed is not None:
            warnings.append(
                f"{self.path} was served by the folder's index {borrowed}; it now has its own "
                f"index {self.sidecar_path}, which serves it instead (its definitions only)"
            )
        size = self.index.size()
        return BuildReport(
            str(self.sidecar_path),
            SIDECAR,
            len(self.files),
            rebuilt,
            size,
            size if written else 0,
            removed=sorted(previous.files.keys() - sidecar.files.keys()) if previous else [],
            warnings=warnings,
        )

    def status(self) -> dict:
        """The sidecar's state: definitions, files indexed, stale and missing files, bytes.

        Returns:
            A JSON-ready dict with the fields of ``LakeDataset.status`` that a sidecar has
            (``bloomskip index status --json``): ``index``, ``granule``, ``files``,
            ``files_indexed``, ``stale``, ``missing``, ``not_indexed``, ``indexes`` (each with
            its ``definition`` and ``bytes``), ``index_bytes``, and ``row_groups``, the sizes
            of the files' row groups to set beside the granule
            (:func:`~bloomskip.dataset.listing.files.row_group_sizes`).

        Raises:
            FormatError: The sidecar is corrupt (named, with the field).
        """
        from bloomskip.dataset.index.sidecar import SectionPayloads
        from bloomskip.dataset.listing.files import row_group_sizes
        from bloomskip.dataset.prune import CHANGED, file_states

        self._current()
        path, root = self._index_in_use()
        sidecar = self._load_index(path)
        states = file_states(self.files, root, sidecar, keys=self._keys)
        present = {state.relative_path for state in states}
        entries = sidecar.files if sidecar is not None else {}
        if path != self.sidecar_path:
            # A folder's index names the folder's other files too: missing are those the glob
            # would match.
            entries = {
                name: entry
                for name, entry in entries.items()
                if self.listing.covers(root / name, self.root)
            }

        def section_bytes(entry, number: int) -> int:
            if isinstance(entry.payloads, SectionPayloads):
                return entry.payloads.span(number)[2]
            return len(entry.payloads[number])

        return {
            "index": str(path),
            "version": None,
            "granule": sidecar.granule if sidecar is not None else None,
            "files": len(states),
            "files_indexed": sum(state.entry is not None for state in states),
            "stale": sorted(s.relative_path for s in states if s.status == CHANGED),
            "missing": sorted(name for name in entries if name not in present),
            "not_indexed": sorted(
                s.relative_path for s in states if s.entry is None and s.status != CHANGED
            ),
            "indexes": [
                {
                    "definition": spec.definition,
                    "bytes": sum(section_bytes(entry, number) for entry in entries.values()),
                }
                for number, spec in enumerate(sidecar.indexes if sidecar is not None else ())
            ],
            "index_bytes": self._store_at(path).size() if sidecar is not None else 0,
            "row_groups": row_group_sizes([state.layout for state in states], len(states)),
        }

    def drop_index(self, name: str) -> None:
        """Remove one index from the sidecar; the others are kept as they are (no file is read).

        Args:
            name: The index's name (``INDEX name …``; a definition without one is named by its
                expression).

        Raises:
            BloomskipError: No sidecar, or no index of that name (the names are listed).
        """
        from bloomskip.errors import BloomskipError

        if self._borrowed():
            raise BloomskipError(
                f"{self.path} has no index of its own (it reads the folder's index "
                f"{self.index_path}): drop from that with bloomskip index drop "
                f"{self.index_folder} {name}"
            )
        self.index.drop_index(name)

    def index_states(self) -> tuple[list, Sidecar | None]:
        """Every file's state with all its index sections, and the sidecar (what
        ``index status --plot`` draws); ``([], None)`` when there is no index.

        Raises:
            FormatError: The sidecar is corrupt.
        """
        from bloomskip.dataset.prune import file_states

        self._current()
        path, root = self._index_in_use()
        sidecar = self._load_index(path)
        if sidecar is None:
            return [], None
        # A glob borrowing its folder's index names files relative to that folder.
        return file_states(self.files, root, sidecar, keys=self._keys), sidecar

    def drop(self) -> int:
        """Delete the sidecar; returns the number of files deleted (1).

        Raises:
            BloomskipError: There is no sidecar, or it cannot be deleted.
        """
        from bloomskip.errors import BloomskipError

        if self._borrowed():
            raise BloomskipError(f"no index at {self.sidecar_path}")
        return self.index.drop()

    def explain(self, where: str, *, describe_data: bool = False) -> Explanation:
        """Prune: which row groups may hold rows matching ``where``, and why.

        A missing or corrupt sidecar, or a changed file, is not an error: the affected files
        are scanned, and :attr:`Explanation.warnings` says why.

        Args:
            where: ClickHouse WHERE expression.
            describe_data: Accepted as every dataset accepts it: a local decision reads each
                file's footer (cached by ``stat``), so it always knows the bytes a query reads.

        Returns:
            An :class:`~bloomskip.dataset.prune.Explanation`: per file, per index, and any
            warnings; :meth:`~bloomskip.dataset.prune.Explanation.row_groups` lists the
            surviving ``(file, row_group)`` pairs and
            :meth:`~bloomskip.dataset.prune.Explanation.to_dataset` exposes them as a
            ``pyarrow.dataset.Dataset`` (for DuckDB or Polars).

        Raises:
            UnsupportedPredicateError: The WHERE cannot be parsed.
            BloomskipError: A file of the dataset cannot be read.

        Example:
            >>> FolderDataset("logs/").explain("user_id = 42").row_groups()  # doctest: +SKIP
            [(PosixPath('/data/logs/part-3.parquet'), 17)]
        """
        from bloomskip.dataset.prune import file_states, note_scanned_files, prune
        from bloomskip.dataset.report import explanation_text
        from bloomskip.dataset.sql.translate import check_where
        from bloomskip.errors import BloomskipError, FormatError

        check_where(where)  # a malformed WHERE is the user's error, reported before any work
        self._current()
        cache = self._cache
        warnings = []
        path, root = self._index_in_use()
        try:
            sidecar = self._load_index(path)
        except FormatError as exc:
            sidecar = None
            warnings.append(f"index ignored, scanning every file: {exc}")
        if sidecar is None and not warnings:
            warnings.append(f"no index at {path}: scanning every file")
        elif sidecar is not None and path != self.sidecar_path:
            warnings.append(f"{self.path} has no index of its own: using the folder's index {path}")
        try:
            states = file_states(
                self.files, root, sidecar, cache.layouts, cache.identities, self._keys
            )
        except OSError as exc:
            raise BloomskipError(f"cannot read a file of the dataset: {exc}") from exc
        result = prune(where, states, sidecar, cache.engines, cache.conditions)
        result.warnings = warnings + result.warnings
        result.schema_source = self._handoff_schema
        result.table_files = self._partitioning().table_files()
        result.text_source = explanation_text
        note_scanned_files(result, self.build_command, "new size or modification time")
        return result

    def plan_reader(self, explanation: Explanation):
        """How other engines read ``explanation``'s access plan
        (:class:`~bloomskip.dataset.scan.handoff.ExplanationReader`)."""
        from bloomskip.dataset.prune import changed_on_disk
        from bloomskip.dataset.scan.handoff import ExplanationReader

        def by_path() -> bool:
            return all(state.source.format == "parquet" for state in explanation.files)

        return ExplanationReader(
            explanation, by_path=by_path, uniform=self._uniform, changed=changed_on_disk
        )

    def build_command(self) -> str:
        """The command that brings the index queries read up to date with the files.

        For a glob served by its folder's index, that folder's build.

        Example:
            >>> FolderDataset("logs/").build_command()  # doctest: +SKIP
            'bloomskip index build logs/'
        """
        import shlex

        if self._borrowed():
            return f"bloomskip index build {shlex.quote(str(self.index_folder))}"
        command = f"bloomskip index build {shlex.quote(self.path)}"
        if self._own_sidecar:
            command += f" --sidecar {shlex.quote(str(self.sidecar_path))}"
        return command

    def _handoff_schema(self) -> pa.Schema:
        """The schema of :meth:`Explanation.to_dataset`."""
        # The files' own schema when they agree: nothing to cast, dictionaries stay. Otherwise
        # that of the whole dataset's scan, as in every query: a column's type in the first
        # file may not hold another file's values (int32 and int64, int64 and string).
        if self._uniform() and not self._partitioning():
            return self._schema()
        return self._scan_schema(self._connection())

    def query(
        self,
        where: str,
        columns: Sequence[str] | str | None = None,
        limit: int | None = None,
        *,
        progress: bool | None = None,
    ) -> pa.Table:
        """Return the rows matching ``where``, reading only the surviving row groups.

        Args:
            where: ClickHouse WHERE expression (hasToken, startsWith, LIKE, IN, has, ...).
            columns: Columns to return; all when None.
            limit: At most this many rows.
            progress: A bar on stderr counting the rows read by a long read; None: when
                stderr is a terminal.

        Returns:
            A ``pyarrow.Table`` holding exactly the rows ClickHouse returns for ``where`` over
            the same files (docs/queries.md), with the columns of :meth:`scan_schema`.

        Raises:
            UnsupportedPredicateError: The WHERE has no exact DuckDB translation.

        Example:
            >>> FolderDataset("logs/").query("user_id = 42", ["message"]).num_rows  # doctest: +SKIP
            12
        """
        names = list(columns) if columns is not None and not isinstance(columns, str) else columns
        cache = self._cache
        if cache.connection is None and cache.pending is None:
            from concurrent.futures import ThreadPoolExecutor

            # Opening DuckDB takes ~10-15 ms and releases the GIL: do it while pruning.
            opener = ThreadPoolExecutor(max_workers=1)
            cache.pending = opener.submit(_new_connection)
            opener.shutdown(wait=False)
        result = self.explain(where)
        return self.run(result, where, names, limit, progress=progress)

    def run(
        self,
        result: Explanation,
        where: str,
        columns: Sequence[str] | str | None = None,
        limit: int | None = None,
        *,
        progress: bool | None = None,
    ) -> pa.Table:
        """Evaluate ``where`` exactly over the row groups a pruning result keeps.

        A file rewritten since ``result`` was made (or while it is read) is never answered
        from with the row groups ``result`` chose for its old version: every file read is
        stat-ed after the read, and when one changed the answer is dropped and the query
        decided and read again, from the files as they are (docs/queries.md).

        Args:
            result: From :meth:`explain` with the same ``where``.
            where: ClickHouse WHERE expression.
            columns: Column names, or ClickHouse expressions as one comma-separated string.
            limit: At most this many rows.
            progress: As :meth:`query` takes it.

        Returns:
            A ``pyarrow.Table`` with the columns and types of :meth:`scan_schema`.

        Raises:
            UnsupportedPredicateError: The WHERE has no exact DuckDB translation.
            StaleSourceError: A file it read changed during each of three attempts.

        Example:
            >>> ds.run(ds.explain("user_id = 42"), "user_id = 42").num_rows  # doctest: +SKIP
            12
        """
        from bloomskip.dataset.prune import changed_on_disk, read_consistently
        from bloomskip.dataset.scan.query import run_query

        def read(decision: Explanation) -> pa.Table:
            # Checked against the decision's keys: a file whose key the decision took after
            # the listing gets a connection that has cached no footer of an older version.
            connection = self._connection([state.listed for state in decision.files])
            return run_query(
                decision,
                self._schema(),
                where,
                columns,
                limit,
                connection,
                self._cache.empty_results,
                scan_schema=self._scan_schema(connection),
                uniform=self._uniform(),
                table_files=self._partitioning().table_files(),
                progress=progress,
            )

        return read_consistently(result, where, read, changed_on_disk, self.explain)
