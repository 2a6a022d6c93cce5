"""``bloomskip.Dataset``: one type for every kind of location, with the same verbs everywhere.

A dataset is files from somewhere (a local folder, glob or file; an object-store prefix; a
Delta or Iceberg table's snapshot) with a skip index kept somewhere (one sidecar file beside
local files, or segments and a manifest log at ``index_location``). :func:`open_backend` chooses,
from the location alone (``dataset/locate.py``), the object that lists those files and keeps
that index; the :class:`Dataset` holds it and every verb goes through it.

Example:
    >>> ds = Dataset("logs/")  # doctest: +SKIP
    >>> ds.build_index(["user_id TYPE bloom_filter(0.01)"])  # doctest: +SKIP
    >>> ds.query("user_id = 42").num_rows  # doctest: +SKIP
    3
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bloomskip.dataset.backends.folder import FolderDataset
from bloomskip.dataset.build.report import SEGMENTED, SIDECAR, BuildReport
from bloomskip.dataset.frames import FrameConversions
from bloomskip.dataset.listing.files import glob_root, is_glob
from bloomskip.dataset.locate import (
    INDEX_FOLDER,
    default_index_folder,
    default_sidecar_path,
    holds_segmented_index,
    is_remote,
    local_path,
    nearest_folder_index,
    table_format,
)
from bloomskip.errors import BloomskipError

if TYPE_CHECKING:
    import pyarrow as pa

    from bloomskip.dataset.backends.lake import LakeDataset
    from bloomskip.dataset.index.sidecar import Sidecar
    from bloomskip.dataset.index.store import IndexStore
    from bloomskip.dataset.listing.folder import FolderListing
    from bloomskip.dataset.listing.prefix import PrefixListing
    from bloomskip.dataset.prune import Explanation

    Backend = FolderDataset | LakeDataset


def open_backend(
    path: str | os.PathLike,
    sidecar: str | os.PathLike | None = None,
    *,
    index_location: str | os.PathLike | None = None,
    filesystem=None,
    version: int | None = None,
    snapshot_id: int | None = None,
    as_of: str | None = None,
) -> Backend:
    """The object that lists a location's files and keeps its index (see :class:`Dataset`).

    A Delta or Iceberg table gets a :class:`~bloomskip.dataset.backends.table.TableDataset`;
    local files with a ``sidecar`` given, or with only a sidecar made before segments (read
    until their next build), a :class:`~bloomskip.dataset.backends.folder.FolderDataset`;
    anything else (local files, an object-store prefix, ``index_location``, a caller's
    filesystem) a :class:`~bloomskip.dataset.backends.lake.LakeDataset` (segments). Local
    files load no table-format code.

    Raises:
        BloomskipError: Arguments that do not fit the location (a sidecar for a table or an
            object store, a snapshot for plain files), or a location that holds no dataset.
    """
    at_snapshot = version is not None or snapshot_id is not None or as_of is not None
    if filesystem is None and table_format(path) is not None:
        if sidecar is not None:
            raise BloomskipError(
                f"{os.fspath(path)}: a table's index is segmented; give index_location "
                "(--index-location) rather than a sidecar file"
            )
        from bloomskip.dataset.backends.table import TableDataset

        return TableDataset(
            path,
            version=version,
            snapshot_id=snapshot_id,
            as_of=as_of,
            index_location=index_location,
        )
    if at_snapshot:
        raise BloomskipError(
            f"{os.fspath(path)}: --version, --snapshot-id and --as-of select a snapshot of "
            "a Delta or Iceberg table; this is not one"
        )
    if is_remote(path) or index_location is not None or filesystem is not None:
        from bloomskip.dataset.backends.lake import LakeDataset

        if sidecar is not None:
            raise BloomskipError(
                "a sidecar file is for a local dataset; an object-store dataset's index is "
                "given with index_location (--index-location)"
            )
        return LakeDataset(path, index_location=index_location, filesystem=filesystem)
    if sidecar is not None:
        return FolderDataset(path, sidecar)
    return _local_backend(local_path(path))


def _local_backend(path: str | os.PathLike) -> Backend:
    """Local files without an index location given: their segmented index
    (:func:`~bloomskip.dataset.locate.default_index_folder`).

    Until that index exists, an index made before segments is read where it serves them: the
    files' own sidecar, or for a glob the nearest folder's index above it (segmented or a
    sidecar). The first build then writes the segmented index, migrating the files' own
    sidecar (:meth:`Dataset.build_index`).
    """
    from bloomskip.dataset.backends.lake import LakeDataset

    own = default_index_folder(path)
    if not holds_segmented_index(own):
        if default_sidecar_path(path).is_file():
            return FolderDataset(path)
        text = os.fspath(path)
        if is_glob(text) and not Path(text).exists():
            found = nearest_folder_index(glob_root(text))
            if found is not None and found[0] == SIDECAR:
                return FolderDataset(path)
            if found is not None:
                folder = found[1]
                return LakeDataset(path, index_location=folder / INDEX_FOLDER, borrowed_from=folder)
    return LakeDataset(path, index_location=own)


class Dataset(FrameConversions):
    """Parquet (or Arrow IPC) files with a ClickHouse skip index: build it, prune, query.

    Args:
        path: A Parquet or Arrow IPC file, a directory or a glob of them, a ``file://`` URI,
            an object-store prefix (``s3://``, ``gs://``, ``abfs://``), a folder or prefix
            holding a Delta table (``_delta_log/``) or an Iceberg table (``metadata/``), or
            ``iceberg://CATALOG/NAMESPACE.TABLE``. A table's files are its snapshot's, never
            whatever its folder holds (docs/tables.md).
        sidecar: For local files: keep the index as this one sidecar file instead
            (docs/sidecar.md). Without it, local files have a segmented index beside them
            (:func:`~bloomskip.dataset.locate.default_index_folder`); a glob without an index
            of its own, inside a folder that has one, is served by that folder's index; and a
            sidecar made before segments is read until the next build migrates it.
        index_location: Keep a segmented index there (docs/segments.md), e.g. a writable
            bucket beside a read-only data bucket. The default for an object store or a table
            is ``<path>/_bloomskip``.
        filesystem: A pyarrow or fsspec filesystem to read the data through (needs
            ``index_location``).
        version: A Delta table's version to query (default: the newest).
        snapshot_id: An Iceberg table's snapshot to query (default: the current one).
        as_of: An ISO-8601 timestamp: query the table's newest snapshot at or before it.

    Raises:
        BloomskipError: The location holds no dataset, a file is not Parquet / Arrow IPC, or
            the arguments do not fit the location.
        StorageError: An object store cannot be reached or configured.

    The same calls work on every location and return the same types; what differs is held in
    :attr:`backend`, the object that lists the files and keeps the index. A ``Dataset`` keeps
    the decoded index between calls (use one per thread), and every call lists the files
    again, so it sees the dataset as it is then.

    Example:
        >>> ds = Dataset("logs/")  # doctest: +SKIP
        >>> ds.build_index(["user_id TYPE bloom_filter(0.01)", "msg TYPE tokenbf_v1(8192, 3, 0)"])
        ... # doctest: +SKIP
        >>> ds.query("hasToken(msg, 'timeout') AND user_id = 42").num_rows  # doctest: +SKIP
        3
    """

    def __init__(
        self,
        path: str | os.PathLike,
        sidecar: str | os.PathLike | None = None,
        *,
        index_location: str | os.PathLike | None = None,
        filesystem=None,
        version: int | None = None,
        snapshot_id: int | None = None,
        as_of: str | None = None,
    ) -> None:
        #: The location as given (a ``file://`` URI as the path it names).
        self.path = os.fspath(local_path(path))
        #: What lists the files and keeps the index: a ``FolderDataset`` (local files, a
        #: sidecar), ``LakeDataset`` (segments) or ``TableDataset`` (a table's snapshot).
        self.backend: Backend = open_backend(
            path,
            sidecar,
            index_location=index_location,
            filesystem=filesystem,
            version=version,
            snapshot_id=snapshot_id,
            as_of=as_of,
        )

    def __getattr__(self, name: str):  # noqa: ANN204
        # What only one kind of location has (a sidecar's ``files`` and ``load_sidecar``, a
        # segmented index's ``log`` and ``latest_manifest``) is its backend's, reachable here
        # as it was before every location was one type.
        if name.startswith("__") or name == "backend":
            raise AttributeError(name)
        return getattr(self.backend, name)

    def __repr__(self) -> str:
        """The location, where its index lives and what it holds, e.g. ``Dataset('logs/',
        index: sidecar logs/_bloomskip.index, 2 indexes: user_id bloom_filter(0.01), msg
        tokenbf_v1(8192, 3, 0))``.

        Only the index's definitions are read (a sidecar's header, a segmented index's newest
        manifest): no file is listed and no data read. A missing index shows as ``no index``,
        one that cannot be read as ``unreadable`` with the reason.
        """
        backend = self.backend
        store = backend.index_in_use if isinstance(backend, FolderDataset) else backend.index
        located = f"Dataset({self.path!r}, index: {store.layout} {store.location}"
        try:
            definitions = store.definitions()
        except (BloomskipError, OSError, ValueError) as exc:
            return f"{located} unreadable: {_shortened(str(exc))})"
        if definitions is None:
            return f"{located} (no index))"
        indexes = ", ".join(_short_definition(spec.definition) for spec in definitions.indexes)
        count = len(definitions.indexes)
        return f"{located}, {count} index{'es' if count != 1 else ''}" + (
            f": {indexes})" if indexes else ")"
        )

    @property
    def listing(self) -> FolderListing | PrefixListing:
        """Where the files come from: a local folder, glob or file with a sidecar
        (:class:`~bloomskip.dataset.listing.folder.FolderListing`) or with a segmented index
        (:class:`~bloomskip.dataset.listing.local.LocalListing`, the same files), an object-store
        prefix (:class:`~bloomskip.dataset.listing.prefix.PrefixListing`), or a table snapshot
        (:class:`~bloomskip.dataset.listing.tables.listing.TableListing`).
        """
        return self.backend.listing

    @property
    def index(self) -> IndexStore:
        """The index's store (:class:`~bloomskip.dataset.index.store.IndexStore`): its layout,
        location, definitions and size, whichever layout it has.

        Example:
            >>> Dataset("logs/").index.layout  # doctest: +SKIP
            'sidecar'
        """
        return self.backend.index

    @property
    def segmented(self) -> bool:
        """Whether the index is segmented (a manifest log and segments, docs/segments.md)
        rather than one sidecar file."""
        return self.backend.index.layout == SEGMENTED

    @property
    def index_location(self) -> str:
        """Where the index queries read lives: the sidecar file, or the segmented index's
        folder or prefix."""
        backend = self.backend
        if isinstance(backend, FolderDataset):
            return str(backend.index_path)
        return backend.index_location

    @property
    def schema(self) -> pa.Schema:
        """The dataset's Arrow schema: every file's columns (and partition columns)."""
        return self.backend.schema

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
        """Build or refresh the index, indexing only new or changed files.

        Args:
            indexes: ClickHouse index definitions, e.g. ``"user_id TYPE bloom_filter(0.01)"``,
                added to the index's own (see
                :func:`~bloomskip.dataset.build.indexing.merge_indexes`);
                None or empty: refresh the existing definitions.
            granule: ``"row-group"`` (a record batch for Arrow IPC) or rows per granule;
                default: the index's, else ``"row-group"``. Another granule than the index's
                rebuilds every index, so it needs ``replace``.
            replace: Let a definition replace the index's definition of the same name, and a
                new granule replace its granule.
            progress: Show a progress bar (default: only on a terminal).
            jobs: Threads building granules (default: one per CPU); the index is the same
                bytes for any count.
            client: A ``distributed.Client`` whose workers build a segmented index.

        Returns:
            A :class:`~bloomskip.dataset.build.report.BuildReport`, the same type for either
            layout (a segmented index's also names the version committed).

        Raises:
            BloomskipError: Bad definitions, no definitions and no index, a definition or
                granule that differs from the index's without ``replace``, data the engine
                cannot hash, a Dask client for a sidecar, or an index that cannot be written.
            CommitConflictError: Another build of a segmented index changed the same index.

        Two builds at once take turns; neither loses the other's indexes.

        Example:
            >>> Dataset("logs/").build_index(["msg TYPE tokenbf_v1(8192, 3, 0)"]).rebuilt
            ... # doctest: +SKIP
            ['part-0.parquet', 'part-1.parquet']
        """
        borrowed = getattr(self.backend, "borrowed_from", None)
        report = self._own_index(indexes).build_index(
            indexes,
            granule=granule,
            replace=replace,
            progress=progress,
            jobs=jobs,
            client=client,
        )
        if borrowed is not None:
            report.warnings.append(
                f"{self.path} was served by the folder's index {borrowed}; it now has its own "
                f"index {self.backend.index_location}, which serves it instead (its "
                "definitions only)"
            )
        return report

    def _own_index(self, indexes: Sequence[str] | None) -> Backend:
        """The backend a build writes: this one, unless it reads an index that is not the
        files' own segmented one (a sidecar chosen by default, which the build migrates and
        then deletes; a folder's index a glob borrows), when it becomes the files' own.

        Raises:
            BloomskipError: A refresh (no ``indexes``) of a glob whose files only its folder's
                index describes.
        """
        backend = self.backend
        legacy = isinstance(backend, FolderDataset) and not backend.explicit_sidecar
        borrowed = getattr(backend, "borrowed_from", None)
        if borrowed is not None and not indexes:
            raise BloomskipError(
                f"{self.path}: its files are indexed by the folder's index "
                f"{backend.index_location}; refresh that (bloomskip index build {borrowed}), "
                "or give --index definitions for an index of this glob alone"
            )
        if legacy or borrowed is not None:
            from bloomskip.dataset.backends.lake import LakeDataset

            own = default_sidecar_path(self.path)
            self.backend = LakeDataset(
                self.path,
                index_location=default_index_folder(self.path),
                migrate_sidecar=own if own.is_file() else None,
            )
        return self.backend

    def explain(self, where: str, *, describe_data: bool = False) -> Explanation:
        """Decide which row groups may hold rows matching ``where``, and why (no data read).

        A missing or damaged index, or a changed file, is not an error: the files concerned
        are scanned, :attr:`~bloomskip.dataset.prune.Explanation.warnings` says why (one line
        per cause, however many files), and one :class:`~bloomskip.errors.BloomskipWarning`
        is issued.

        Args:
            where: A ClickHouse WHERE expression.
            describe_data: Also read the footers of the files that keep row groups, so that
                the decision knows the bytes a query would read (``--explain``).

        Returns:
            An :class:`~bloomskip.dataset.prune.Explanation`: per file and index what was
            kept, the warnings, the files scanned for being out of date, and the access plan
            (:meth:`~bloomskip.dataset.prune.Explanation.access_plan`: the hand-off to
            pyarrow, DuckDB, Polars or DataFusion); ``print(explanation)`` shows the text
            ``bloomskip query --explain`` prints.

        Raises:
            UnsupportedPredicateError: The WHERE cannot be parsed.
            BloomskipError: A file of the dataset cannot be read.
            StorageError: An object store cannot be listed.

        Example:
            >>> Dataset("logs/").explain("user_id = 42").row_groups()  # doctest: +SKIP
            [(PosixPath('/data/logs/part-3.parquet'), 17)]
        """
        explanation = self.backend.explain(where, describe_data=describe_data)
        explanation.reader = self.backend.plan_reader(explanation)
        return explanation

    def query(
        self,
        where: str,
        columns: Sequence[str] | str | None = None,
        limit: int | None = None,
        *,
        progress: bool | None = None,
    ) -> pa.Table:
        """Return the rows matching ``where``, reading only the row groups the index keeps.

        Args:
            where: ClickHouse WHERE expression (hasToken, startsWith, LIKE, IN, has, ...).
            columns: Columns to return, or a select list as one string; all when None.
            limit: At most this many rows.
            progress: Show a bar on stderr counting the rows read, when the read is long (many
                row groups of several files); default: only when stderr is a terminal.

        Returns:
            A ``pyarrow.Table`` holding exactly the rows ClickHouse returns for ``where`` over
            the same files (docs/queries.md); for a table, its deleted rows dropped and its
            partition values filled.

        Raises:
            UnsupportedPredicateError: The WHERE has no exact DuckDB translation.
            StaleSourceError: Files kept changing while the query read them.

        Example:
            >>> Dataset("logs/").query("user_id = 42", ["message"]).num_rows  # doctest: +SKIP
            12
        """
        return self.backend.query(where, columns, limit, progress=progress)

    def run(
        self,
        explanation: Explanation,
        where: str,
        columns: Sequence[str] | str | None = None,
        limit: int | None = None,
        *,
        progress: bool | None = None,
    ) -> pa.Table:
        """Evaluate ``where`` exactly over what a decision (:meth:`explain`) keeps.

        A file rewritten since the decision is never answered from with the row groups chosen
        for its old version: the files read are checked after the read, and the query is
        decided and read again (docs/queries.md).

        Args:
            explanation: From :meth:`explain` with the same ``where``.
            where: ClickHouse WHERE expression.
            columns: Columns, or a select list as one string; all when None.
            limit: At most this many rows.
            progress: As :meth:`query` takes it.

        Returns:
            A ``pyarrow.Table``, as :meth:`query` returns it.

        Raises:
            UnsupportedPredicateError: The WHERE has no exact DuckDB translation.
            StaleSourceError: A file it read changed during each of three attempts.
        """
        return self.backend.run(explanation, where, columns, limit, progress=progress)

    def status(self) -> dict:
        """The index's state: definitions, granule, files indexed, stale, missing, bytes.

        Returns:
            A JSON-ready dict (``bloomskip index status --json``): ``index``, ``version``
            (None for a sidecar), ``granule``, ``files``, ``files_indexed``, ``stale``,
            ``missing``, ``not_indexed``, ``indexes`` (each with ``definition`` and
            ``bytes``); a segmented index adds its segments and unreadable versions, a sidecar
            its ``index_bytes``.

        Raises:
            FormatError: A sidecar is corrupt (named, with the field).
        """
        return self.backend.status()

    def index_states(self) -> tuple[list, Sidecar | None]:
        """Every file's state with all its index sections read, and the index's definitions:
        what ``index status --plot`` draws; ``([], None)`` when there is no index.

        Raises:
            FormatError: The index is corrupt.
        """
        return self.backend.index_states()

    def drop_index(self, name: str) -> None:
        """Remove one index; the others are kept as they are (no data file is read).

        Args:
            name: The index's name (``INDEX name …``; a definition without one is named by its
                expression).

        Raises:
            BloomskipError: No index, or none of that name (the names are listed).
        """
        self.backend.drop_index(name)

    def drop(self) -> int:
        """Delete the whole index; returns the number of files or objects deleted.

        Raises:
            BloomskipError: There is no index of this dataset's own to delete.
        """
        return self.backend.drop()

    def compact(self) -> BuildReport | None:
        """Merge a segmented index's small segments (see ``LakeDataset.compact``).

        Returns:
            The commit's report, or None when fewer than two segments are small.

        Raises:
            BloomskipError: The index is a sidecar (one file: nothing to compact).
        """
        return self._segmented_backend("compact").compact()

    def vacuum(self, keep_versions: int = 10, min_age_seconds: float = 3600.0) -> list[str]:
        """Delete a segmented index's old versions and unreferenced segments.

        Args:
            keep_versions: The newest versions kept.
            min_age_seconds: Objects younger than this are kept (a build may be writing them).

        Returns:
            The keys deleted.

        Raises:
            BloomskipError: The index is a sidecar (one file: nothing to vacuum).
        """
        return self._segmented_backend("vacuum").vacuum(keep_versions, min_age_seconds)

    def _segmented_backend(self, verb: str) -> LakeDataset:
        if not self.segmented:
            raise BloomskipError(
                f"{self.path}: {verb} works on a segmented index: give --index-location "
                "(index_location in Python) for a local dataset; its sidecar index is one file"
            )
        return self.backend

    def duckdb_connection(self):
        """The DuckDB connection queries run on (created on first use, then reused)."""
        return self.backend.duckdb_connection()


def _short_definition(definition: str) -> str:
    """An index as a repr names it: ``user_id bloom_filter(0.01)`` for ``INDEX user_id
    user_id TYPE bloom_filter(0.01) GRANULARITY 1``."""
    from bloomskip.dataset.build.indexing import index_name

    kind = definition.rpartition(" TYPE ")[2].removesuffix(" GRANULARITY 1")
    return f"{index_name(definition)} {kind}"


def _shortened(text: str, limit: int = 80) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


__all__ = ["BuildReport", "Dataset", "open_backend"]
