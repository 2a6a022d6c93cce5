"""Datasets on object storage (or any location) with a segmented index (docs/segments.md).

A :class:`LakeDataset` is a prefix of Parquet objects, ``s3://bucket/table/`` (also ``gs://``,
``abfs://``), or local files (a folder, a glob or one file, of Parquet or Arrow IPC), with its
index at ``<prefix>/_bloomskip/`` or at ``index_location``. ``bloomskip.Dataset`` opens one for
any object-store URI, or when an index location is given.

Every query costs few requests whatever the number of files:

* one listing of the prefix gives every file's identity (size and ETag) and, when the index
  lives beside the data, the manifest versions too;
* one read of the newest manifest;
* per segment holding a file the query can prune, one coalesced read of its header and of the
  sections of the indexes the WHERE can use.

A file whose identity differs from the one it was indexed at, a file no segment covers, and the
files of a segment that cannot be read are scanned. The surviving row groups are read through
pyarrow's filesystem (with pre-buffering), and DuckDB applies the exact predicate to them.

Example:
    >>> lake = LakeDataset("s3://bucket/logs")  # doctest: +SKIP
    >>> lake.build_index(["user_id TYPE bloom_filter(0.01)"])  # doctest: +SKIP
    >>> lake.query("user_id = 42").num_rows  # doctest: +SKIP
    3
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bloomskip._store import IOStats, ObjectInfo, ObjectStore, Store, open_store
from bloomskip.dataset.backends.cache import UNKNOWN, DatasetCache
from bloomskip.dataset.build.report import SEGMENTED, BuildReport
from bloomskip.dataset.build.segment_writer import SegmentWriter
from bloomskip.dataset.index.segments import (
    Change,
    IndexLog,
    Manifest,
    SegmentEntry,
    _DefinitionsChanged,
    checkpoint_number,
    concurrent_edit,
    decode_schema,
    identity_matches,
    is_segment_key,
    segments_to_merge,
    version_number,
)
from bloomskip.dataset.index.sidecar import FileEntry, Sidecar
from bloomskip.dataset.index.store import SegmentStore
from bloomskip.dataset.listing.files import Layout, check_ipc_schemas, dataset_root
from bloomskip.dataset.listing.prefix import PARQUET_SUFFIXES, ListedFile, PrefixListing
from bloomskip.dataset.locate import INDEX_FOLDER, default_index_folder, is_remote, local_path
from bloomskip.dataset.vocabulary import ROW_GROUP
from bloomskip.errors import (
    BloomskipError,
    CommitConflictError,
    FormatError,
    StaleSourceError,
    StorageError,
    warn_caller,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from bloomskip.dataset.prune import Explanation

#: A build starts a new segment once the current one holds this many payload bytes.
SEGMENT_TARGET_BYTES = 64 << 20
#: At most this many decisions are kept per dataset state (then they are dropped together).
DECISIONS_KEPT = 64
#: How many rounds a build runs, each on top of the definitions other builds committed while
#: the previous round ran, before it gives up (a round's segments hold only its definitions).
BUILD_ROUNDS = 5
#: ``index status`` reads the footers of this many files to show their row-group sizes.
STATUS_FOOTERS = 8


class LakeDataset:
    """Parquet objects under a prefix, with a segmented skip index.

    Args:
        location: ``s3://bucket/prefix``, ``gs://…``, ``abfs://…``, or local files: a folder,
            a glob or one file (also as ``file://…``), of Parquet or Arrow IPC files, listed
            as a sidecar lists them (``listing/local.py``).
        index_location: Where the index lives (default: ``<location>/_bloomskip``; for a glob
            or a file, in the folder the files are named relative to), e.g. a writable bucket
            beside a read-only data bucket.
        filesystem: A pyarrow (or fsspec) filesystem to read the data through, instead of the
            one pyarrow derives from ``location``; ``location`` is then the path in it.
        snapshot: A Delta or Iceberg table's snapshot at ``location``: its files, not the
            prefix's, are the dataset's (``listing/tables/listing.py``).
        borrowed_from: For a local glob without an index of its own: the folder above it
            whose index serves its queries (files are then named relative to that folder).
            Such a dataset does not build, drop or maintain that index: building a glob
            writes its own (``Dataset`` switches to it).
        migrate_sidecar: For local files: a sidecar (the single-file layout) whose files'
            entries the first build takes over without reading their data, when its
            definitions and granule are the build's; that build then deletes it. None:
            the folder's sidecar is read for entries to take over, and kept.

    Raises:
        BloomskipError: A glob or one object on object storage (or through ``filesystem``).
        StorageError: The location's scheme is unknown, or a store cannot be configured.
    """

    def __init__(
        self,
        location: str | os.PathLike,
        *,
        index_location: str | os.PathLike | None = None,
        filesystem=None,
        snapshot=None,
        borrowed_from: Path | None = None,
        migrate_sidecar: Path | None = None,
    ) -> None:
        self.location = os.fspath(location).rstrip("/")
        #: The folder whose index serves this glob's queries, or None for an index of its own.
        self.borrowed_from = borrowed_from
        self._migrate_sidecar = migrate_sidecar
        # Local files (a folder, a glob, one file; Parquet or Arrow IPC) are listed as the
        # sidecar lists them; an object store's prefix, a caller's filesystem and a table
        # snapshot by their store.
        local = filesystem is None and snapshot is None and not is_remote(self.location)
        if not local and (
            any(character in self.location for character in "*?[")
            or self.location.lower().endswith(PARQUET_SUFFIXES)
        ):
            raise BloomskipError(
                f"{self.location}: on object storage or through a filesystem, a dataset is a "
                "prefix (folder) of Parquet objects, not one object or a glob; give the prefix "
                "that holds them"
            )
        self._given_filesystem = None
        if filesystem is not None:
            import pyarrow.fs as pafs

            if not isinstance(filesystem, pafs.FileSystem):
                filesystem = pafs.PyFileSystem(pafs.FSSpecHandler(filesystem))
            self._given_filesystem = filesystem
            if index_location is None:
                raise BloomskipError(
                    "with a filesystem, give index_location (a folder or an object-store URI): "
                    "committing an index needs a create-only write that pyarrow and fsspec "
                    "filesystems do not offer"
                )
        if local:
            root = str(borrowed_from or dataset_root(local_path(self.location)))
            self.store: Store | None = open_store(root)
        else:
            self.store = open_store(self.location) if filesystem is None else None
            root = self.store.uri if self.store is not None else self.location
        if local:
            self._default_index_location = str(default_index_folder(local_path(self.location)))
        else:
            self._default_index_location = f"{root}/{INDEX_FOLDER}"
        if index_location is None:
            self.index_location = self._default_index_location
        else:
            self.index_location = os.fspath(index_location).rstrip("/")
        self.log = IndexLog(open_store(self.index_location))
        #: The index's store: its definitions, segments, commits and maintenance.
        self.index = SegmentStore(self.log, self.index_location)
        self._index_prefix = self._nested_index_prefix(root, self.log.store.uri)
        #: Where the files come from: local files, the prefix, or a table snapshot's files.
        self.listing: PrefixListing
        if local:
            from bloomskip.dataset.listing.local import LocalListing

            # The local listing leaves an index kept inside the folder out of the files: the
            # index's own store lists its versions.
            nested = self._index_prefix
            self._index_prefix = None
            skip = Path(root, nested) if nested is not None else None
            self.listing = LocalListing(local_path(self.location), self.store, skip)
            # Listed now, as well as by every call: a location that holds no dataset (nothing
            # there, a file that is neither Parquet nor Arrow IPC) is an error at once.
            self.listing.files()
        elif snapshot is None:
            self.listing = PrefixListing(self.location, self.store, self._given_filesystem)
        else:
            from bloomskip.dataset.listing.tables.listing import TableListing

            self.listing = TableListing(snapshot, self.store)
        self.writer = SegmentWriter(
            root if local else self.location,
            self.index_location,
            filesystem,
            store=self.store,
            log=self.log,
        )
        # Derived from the listed files and the manifest version, and dropped whole when any
        # of them changes (the rule every dataset follows, backends/cache.py).
        self._cache = DatasetCache()
        self._held = threading.local()

    @staticmethod
    def _nested_index_prefix(data_root: str, index_root: str) -> str | None:
        """The index's key prefix inside the data's listing, or None when it lies elsewhere.

        Raises:
            BloomskipError: The index location is the dataset's location or above it: its
                objects would be read as data, and a drop could reach the data.
        """
        data, index = data_root.rstrip("/") + "/", index_root.rstrip("/") + "/"
        if data.startswith(index):
            raise BloomskipError(
                f"index location {index_root} holds the dataset {data_root}; put the index in a "
                "folder of its own (the default is the dataset's _bloomskip folder)"
            )
        return index[len(data) :] if index.startswith(data) else None

    # -- what is there ---------------------------------------------------------------------

    @property
    def index_stats(self) -> IOStats:
        """Requests and bytes of the index (when beside the data, the shared listing too)."""
        return self.log.store.stats

    @contextlib.contextmanager
    def one_listing(self) -> Iterator[None]:
        """Within the block, this thread's reads of the dataset (its schema, decisions) share
        the first listing taken in it, as one query's steps should; a decision that finds a
        file replaced since lists again. Other threads list as before.

        Example:
            >>> with dataset.one_listing():  # doctest: +SKIP
            ...     schema, explanation = dataset.schema, dataset.explain("k = 1")
        """
        outer = getattr(self._held, "listing", None)
        if outer is None:
            self._held.listing = []
        try:
            yield
        finally:
            if outer is None:
                self._held.listing = None

    def list_files(self) -> tuple[list[ListedFile], list[int] | None]:
        """One listing: the Parquet files, and the manifest versions when the index is beside
        (within :meth:`one_listing`, the block's first).

        Returns:
            ``(files, versions)``; ``versions`` is None when the index lives elsewhere (it is
            then listed by its own store).

        Raises:
            BloomskipError: An object under the prefix is not a Parquet file by its name.
            StorageError: The prefix cannot be listed.
        """
        held = getattr(self._held, "listing", None)
        return held[0] if held else self._kept_listing(self._list_files())

    def _kept_listing(self, listing):
        """``listing``, held as the block's first inside :meth:`one_listing`."""
        held = getattr(self._held, "listing", None)
        if held is not None and not held:
            held.append(listing)
        return listing

    def _release_listing(self) -> None:
        """Drop the listing :meth:`one_listing` holds: the next one is taken anew."""
        held = getattr(self._held, "listing", None)
        if held:
            held.clear()

    def _list_files(self) -> tuple[list[ListedFile], list[int] | None]:
        """:meth:`list_files`, from the store."""
        nested = self._index_prefix
        if nested is None:
            return self.listing.files(), None
        versions: list[int] = []
        objects: dict[int, ObjectInfo] = {}
        checkpoints: list[ObjectInfo] = []
        segments: set[str] = set()
        data = []
        for info in self.listing.objects():
            key = info.key
            if key.startswith(nested):
                inner = key[len(nested) :]
                number = version_number(inner)
                if number is not None:
                    versions.append(number)
                    objects[number] = dataclasses.replace(info, key=inner)
                elif checkpoint_number(inner) is not None:
                    checkpoints.append(dataclasses.replace(info, key=inner))
                elif is_segment_key(inner):
                    segments.add(inner)
                continue
            data.append(info)
        self.index.seen_in_listing(objects, segments, checkpoints)
        return self.listing.data_files(data), sorted(versions)

    @property
    def files(self) -> list:
        """The dataset's files as they are now, in key order, each as a readable source
        (:class:`~bloomskip.dataset.listing.files.SourceFile`: path and format).

        Raises:
            BloomskipError: A file is not Parquet (or, locally, not all of one format).
            StorageError: The location cannot be listed.
        """
        files, _ = self.list_files()
        return [self.writer.source(listed) for listed in files]

    def latest_manifest(self, versions: list[int] | None = None) -> Manifest | None:
        """The newest manifest version (see :meth:`SegmentStore.latest`; ``versions`` from
        :meth:`list_files` saves a listing)."""
        return self.index.latest(versions)

    # -- building --------------------------------------------------------------------------

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
        """Index the files that are new or changed since the newest version; commit a version.

        The files are planned into tasks (batches of about 1 GiB, in key order); each task
        writes one new segment, and no existing segment is rewritten. Files gone from the
        prefix leave the index. When the definitions change (an index added or replaced, a
        new granule), every file is indexed again. The plan does not depend on ``jobs`` or
        ``client``: the segments are the same bytes however the build runs.

        Two builds at once take turns: when another build commits other definitions first
        (adds, replaces or drops an index), this one runs again on top of that version, so
        neither loses the other's index. When both change the same index (or the granule)
        differently, the later one fails with :class:`CommitConflictError`.

        A newest version that does not read is passed over: the build starts from the newest
        one that does (or from no index), commits the next free number, and warns.

        Args:
            indexes: ClickHouse index definitions, added to the index's own (see
                :func:`~bloomskip.dataset.build.indexing.merge_indexes`); None or empty: refresh.
            granule: ``"row-group"`` or rows per granule; default: the index's own.
            replace: Let a definition replace the index's definition of the same name, and a
                new granule replace its granule.
            progress: Show a progress bar (default: only on a terminal).
            jobs: Threads building each task's granules in this process (default: one per
                CPU); the C granule builders run without the GIL.
            client: A ``distributed.Client``: its workers run the tasks, reading the data
                from its storage and writing their segments; only the manifest entries come
                back. ``jobs`` is then unused.

        Returns:
            A :class:`BuildReport`.

        Raises:
            BloomskipError: Bad definitions, no definitions and no (readable) index, a
                definition or granule that differs from the index's without ``replace``, a
                column whose type differs between files, data the engine cannot hash.
            CommitConflictError: Another build changed an index (or the granule) this build
                defines too, meanwhile; or other builds kept changing the definitions.
            StorageError: The index location cannot be written.
        """
        from bloomskip.dataset.build.indexing import worker_count

        self._check_own("build")
        self.listing.check_build()
        jobs = worker_count() if jobs is None else jobs
        files, versions = self.list_files()
        manifest, _, unreadable = self.log.latest_readable(versions)
        started = manifest
        first: tuple | None = None  # the definitions and granule the first round built
        notes: list[str] = []
        for _ in range(BUILD_ROUNDS):
            if first is not None:
                # Another build changed the definitions while this one ran: run again on top
                # of its version, as if this build had started after it.
                files, versions = self.list_files()
                manifest, _, unreadable = self.log.latest_readable(versions)
                problem = concurrent_edit(started, manifest, *first, indexes, granule is not None)
                if problem is not None:
                    raise CommitConflictError(
                        f"{self.index_location}: {problem}; run the build again"
                    )
            if manifest is None and unreadable and not indexes:
                raise BloomskipError(
                    f"{unreadable[0]}; no older version reads either: build with --index to "
                    "index every file again"
                )
            prepared, chosen = self._prepare(indexes, granule, replace, manifest, files)
            if first is None:
                first = tuple(item.spec for item in prepared), chosen
            try:
                report = self._build_on(
                    manifest, files, prepared, chosen, progress, jobs, client, unreadable
                )
            except _DefinitionsChanged as exc:
                notes.append(
                    f"another build changed the index definitions meanwhile (version "
                    f"{exc.latest.version}); this build ran again on top of it"
                )
                continue
            report.warnings[:0] = self.listing.warnings + notes
            self._merge_full_tiers(report)
            self._retire_sidecar(report)
            return report
        raise CommitConflictError(
            f"{self.index_location}: other builds changed the index definitions {BUILD_ROUNDS} "
            "times while this one ran; run the build again"
        )

    def _build_on(
        self, manifest, files, prepared, granule, progress, jobs, client, unreadable=()
    ) -> BuildReport:
        """One round of :meth:`build_index`: index what ``manifest`` lacks and commit.

        Args:
            manifest: The newest readable version (None: no index yet, or none reads).
            files: The dataset's files, from the listing ``manifest`` was found with.
            prepared: The round's definitions (``manifest``'s with the build's own).
            granule: The round's granule.
            progress, jobs, client: As :meth:`build_index` takes them.
            unreadable: One line per newer version that does not read
                (:meth:`~bloomskip.dataset.index.segments.IndexLog.latest_readable`): a version is
                committed over them even when nothing else changed, and each is a warning.

        Returns:
            The round's :class:`BuildReport`.

        Raises:
            _DefinitionsChanged: Another build changed the definitions meanwhile; the
                round's segments are deleted (no version names them).
        """
        from bloomskip.dataset.build.indexing import never_used_warnings

        specs = tuple(item.spec for item in prepared)
        same = manifest is not None and (manifest.indexes, manifest.granule) == (specs, granule)
        covered = manifest.files() if same else {}
        if covered:
            # A segment a vacuum deleted (or that went missing) no longer describes its files.
            existing = self.index.present_segments()
            covered = {key: item for key, item in covered.items() if item[0].key in existing}
        warnings = [warning for item in prepared for warning in never_used_warnings(item)]
        warnings += self.listing.unverifiable([item for item in files if item.identity is None])
        todo = [
            listed
            for listed in files
            if listed.identity is not None
            and (
                listed.key not in covered
                or not identity_matches(covered[listed.key][1], listed.identity)
            )
        ]
        present = {listed.key for listed in files}
        removed = sorted(key for key in covered if key not in present)
        reusable = self._sidecar_entries(prepared, granule) if manifest is None else {}
        migrated: list[str] = []
        segments = self._build_segments(
            todo, prepared, granule, progress, reusable, migrated, jobs, client
        )
        table = self.listing.record(specs, manifest)
        unchanged = (
            same
            and len(covered) == len(manifest.files())
            and manifest.table == table
            and not manifest.damaged  # a new version leaves the damaged entries out
            and not unreadable  # a new version supersedes them
        )
        committed_before = self.log.store.stats.bytes_written
        committed = None
        if not segments and not removed and unchanged:
            version = manifest.version
        else:
            change = Change(
                granule,
                specs,
                segments,
                replace_all=not same,
                base_definitions=(manifest.granule, manifest.indexes) if manifest else None,
                removed=frozenset(removed),
                table=table,
            )
            try:
                committed = self.index.commit(change)
                version = committed.version
            except _DefinitionsChanged:
                _delete_uncommitted(self.log.store, segments)
                raise
        commit_bytes = self.log.store.stats.bytes_written - committed_before
        live = manifest.segments if committed is None else committed.segments
        base = f"version {manifest.version}, the newest readable one" if manifest else "no index"
        warnings += [
            f"{line}; this build started from {base}, and committed version {version}"
            for line in unreadable
        ]
        return BuildReport(
            self.index_location,
            SEGMENTED,
            len(files),
            [listed.key for listed in todo],
            sum(segment.size for segment in live),
            # Segments are counted by their size: a task on Dask writes through its own store.
            sum(segment.size for segment in segments) + commit_bytes,
            removed,
            version,
            len(segments),
            warnings,
            migrated,
        )

    def _prepare(self, indexes, granule, replace, manifest, files):
        """The merged definitions and the granule of a build (see ``build.merge_indexes``)."""
        from bloomskip.dataset.build.indexing import merge_indexes, prepare_index, resolve_granule

        self.listing.check_indexes(indexes)
        migrated = self._sidecar_to_migrate() if manifest is None else None
        if not indexes and manifest is None and migrated is None:
            raise BloomskipError("no --index given and no existing index to refresh")
        # Every file's columns, as the sidecar layout sees them: an index may be over a column
        # that only some files hold (the others' rows are NULLs to it, as to the scan).
        schema, kept, field_ids = self.listing.build_indexes(
            manifest, self._schema(files, manifest)
        )
        if migrated is not None:
            # The sidecar's definitions are the index's until its first segmented version.
            kept = list(migrated.indexes)
        # An Iceberg table's files are read by field id, as the table and its indexes name them.
        self.writer.field_ids = None if field_ids is None else (field_ids, schema)
        existing = [
            prepare_index(spec.definition, schema, dict(spec.column_types)) for spec in kept
        ]
        requested = [prepare_index(text, schema) for text in indexes or ()]
        prepared = merge_indexes(existing, requested, replace)
        partitions = self._partitioning(files, schema)
        for item in prepared:
            partitions.check_index(item.spec.definition, item.columns)
        current = manifest.granule if manifest is not None else None
        if migrated is not None:
            current = migrated.granule
        return prepared, resolve_granule(granule, current, replace)

    def _sidecar_to_migrate(self) -> Sidecar | None:
        """The sidecar this dataset's first build migrates from, read; None without one (or
        when it does not read: the build then indexes the files from their data)."""
        from bloomskip.dataset.index.sidecar import read_sidecar

        if self._migrate_sidecar is None:
            return None
        try:
            return read_sidecar(self._migrate_sidecar)
        except (OSError, FormatError):
            return None

    def _sidecar_entries(self, prepared, granule) -> dict[str, FileEntry]:
        """A local folder's single-file sidecar, where its definitions match: the entries of
        files unchanged since (size, modification time and footer hash), so that the first
        segmented build migrates them instead of reading the data again."""
        from bloomskip._store import LocalStore
        from bloomskip.dataset.index.sidecar import read_sidecar
        from bloomskip.dataset.locate import default_sidecar_path

        if not isinstance(self.store, LocalStore) or self._given_filesystem is not None:
            return {}
        path = self._migrate_sidecar or default_sidecar_path(self.store.root)
        try:
            sidecar = read_sidecar(path)
        except (OSError, FormatError):
            return {}  # none, or not readable: the files are indexed from their data
        specs = [item.spec for item in prepared]
        if sidecar.indexes != specs or sidecar.granule != granule:
            return {}
        return dict(sidecar.files)

    def _retire_sidecar(self, report: BuildReport) -> None:
        """Delete the sidecar this dataset's first build migrated from, once the build has
        committed: queries read the segmented index from then on (a sidecar that cannot be
        deleted stays, unread, and the report says so)."""
        if self._migrate_sidecar is None:
            return
        from bloomskip.dataset.index.store import SidecarStore

        sidecar = SidecarStore(self._migrate_sidecar)
        self._migrate_sidecar = None
        try:
            sidecar.drop()
        except BloomskipError as exc:
            if sidecar.path.exists():  # gone already: another build migrated it
                report.warnings.append(f"{exc}; it is no longer read, delete it by hand")
            return
        report.warnings.append(
            f"the sidecar {sidecar.path} was migrated to the segmented index "
            f"{self.index_location} and deleted"
        )

    def _check_own(self, command: str) -> None:
        """Refuse to change an index this glob only borrows from a folder above it.

        Args:
            command: The ``bloomskip index`` command that would change it (``"drop"``).
        """
        if self.borrowed_from is not None:
            import shlex

            raise BloomskipError(
                f"{self.location}: its queries use the folder's index {self.index_location}, "
                f"which a glob does not change; run `bloomskip index {command}` on the folder "
                f"({shlex.quote(str(self.borrowed_from))}), or build an index of this glob first"
            )

    def _build_segments(
        self, todo, prepared, granule, progress, reusable, migrated, jobs, client
    ) -> list[SegmentEntry]:
        """Plan the files into tasks, run them (in this process on threads, or on Dask), and
        return their segments in plan order (files migrated from a sidecar first)."""
        from bloomskip.dataset.build import tasks as lake_build
        from bloomskip.dataset.build.indexing import progress_bar, reuse_entry

        segments: list[SegmentEntry] = []
        kept = {}
        for listed in todo:
            entry = reuse_entry(reusable.get(listed.key), self.writer.source(listed))
            if entry is not None:
                kept[listed.key] = (listed, entry)
        if kept:
            # No table data is read for these: their sections come from the sidecar.
            migrated.extend(kept)
            schemas = [self.writer.read_schema(listed) for listed, _ in kept.values()]
            entries = {key: entry for key, (_, entry) in kept.items()}
            sidecar = Sidecar(granule, [item.spec for item in prepared], entries)
            identities = {key: listed.identity for key, (listed, _) in kept.items()}
            schema = self.writer.segment_schema(schemas, list(kept))
            segments.append(self.log.write_segment(sidecar, identities, schema))
        remaining = [listed for listed in todo if listed.key not in kept]
        # Locally, the tasks run one after another on ``jobs`` threads each: the granule
        # builders run in C without the GIL, and measured faster than one process per task
        # (benchmarks/distributed_build.py: processes paid their start-up and one thread each).
        # On Dask, each task runs on one worker thread.
        base = lake_build.BuildTask(
            self.writer,
            (),
            tuple(prepared),
            granule,
            1 if client is not None else max(1, jobs),
        )
        target = lake_build.TASK_TARGET_BYTES
        group_bytes = {
            listed.key: self.writer.row_group_bytes(listed)
            for listed in remaining
            if listed.info.size > target and self.writer.source(listed).format == "parquet"
        }
        planned = lake_build.plan_tasks(remaining, target, lake_build.TASK_MAX_FILES, group_bytes)
        total = sum(listed.info.size for listed in remaining)
        with (
            _discarded_on_failure(self.log.store, segments),
            progress_bar(total, "indexing", progress) as bar,
        ):
            results = lake_build.run_tasks(
                lake_build.make_jobs(planned, base, group_bytes), client=client, progress=bar
            )
        written = [result.written for result in results]
        return segments + written

    # -- pruning and querying --------------------------------------------------------------

    def explain(self, where: str, *, describe_data: bool = False) -> Explanation:
        """Decide which row groups may hold rows matching ``where`` (no data is read).

        Args:
            where: A ClickHouse WHERE expression.
            describe_data: Also read the footers of the files with surviving row groups, so
                that the explanation knows the bytes a query would read (``--explain``); a
                query itself needs no such read before it runs.

        Returns:
            An :class:`~bloomskip.dataset.prune.Explanation`; its ``warnings`` say why a file was
            scanned when its index could not be used (a corrupt or missing segment, a changed
            file), and its ``io`` the requests and bytes the index cost.

        Raises:
            UnsupportedPredicateError: The WHERE is not valid ClickHouse SQL.
            StorageError: The dataset's prefix cannot be listed.
            StaleSourceError: A file was replaced between its listing and the read of its
                footer in each of ``READ_ATTEMPTS`` decisions.
        """
        from bloomskip.dataset.prune import READ_ATTEMPTS

        for _ in range(READ_ATTEMPTS - 1):
            try:
                return self._explain_listed(where, describe_data)
            except StaleSourceError:
                self._release_listing()
                continue  # a footer is read as the listed version only: list again
        return self._explain_listed(where, describe_data)

    def _explain_listed(self, where: str, describe_data: bool) -> Explanation:
        """:meth:`explain` over one listing."""
        from bloomskip.dataset.prune import note_scanned_files, prune

        kept, predicate = self.listing.files_kept(where)
        before = self._io_snapshot()
        if getattr(self._held, "listing", None) or not isinstance(self.store, ObjectStore):
            files, versions = self.list_files()
        else:
            from concurrent.futures import ThreadPoolExecutor

            # The listing waits on the store, not on the interpreter: what deciding needs is
            # imported meanwhile (about a tenth of a second of a cold command), then the index
            # is read ahead (its newest version, and each segment's directory and headers:
            # three round trips that a listing of many pages no longer adds to). Only one
            # thread imports at a time: two importing pyarrow at once can each find the other's
            # half-initialized module.
            with ThreadPoolExecutor(max_workers=2) as pool:
                listing = pool.submit(self._list_files)
                _import_deciders()
                ahead = None
                if isinstance(self.listing, PrefixListing):
                    ahead = pool.submit(self._read_index_ahead, where)
                files, versions = self._kept_listing(listing.result())
                if ahead is not None:
                    ahead.result()
        warnings: list[str] = []
        try:
            manifest = self.latest_manifest(versions)
        except (FormatError, StorageError) as exc:
            manifest = None
            warnings.append(f"index {self.index_location} unreadable, scanning every file: {exc}")
        if manifest is not None:
            warnings += manifest.damaged
        elif not warnings:
            warnings.append(f"no index at {self.index_location}: scanning every file")
        self._refresh(files, manifest if not warnings else UNKNOWN)
        if self.borrowed_from is not None:
            warnings.append(
                f"{self.location} has no index of its own: using the folder's index "
                f"{self.index_location}"
            )
        cache = self._cache
        state = cache.state
        if not describe_data and where in cache.decisions:
            again = _again(cache.decisions[where], read=False)
            if again.warnings:
                warn_caller("\n".join(again.warnings))  # each decision says it, as when made
            return again
        states = self._states(files, manifest, where, warnings, kept)
        served, unusable = self.listing.served_indexes(manifest) if manifest else ([], {})
        sidecar = Sidecar(manifest.granule, served, {}) if manifest is not None else None
        explanation = prune(where, states, sidecar, cache.engines, cache.conditions, unusable)
        explanation.warnings[:0] = self.listing.warnings + warnings
        explanation.table = self.listing.describe(predicate, len(explanation.files))
        index_io = self._io_snapshot()
        footers = self._describe(explanation) if describe_data else 0
        # Read once while the files and the index are unchanged: the partition values (below)
        # and the query both need them, and the next decision over the same state too.
        named = functools.cache(
            lambda: self._kept(state, "named_schemas", lambda: self._named_schemas(files, manifest))
        )

        def file_schemas() -> list[pa.Schema]:
            return [schema for _, schema, _ in named()]

        explanation.schema_source = functools.cache(
            lambda: self._kept(state, "schema", lambda: self._schema(files, manifest, file_schemas))
        )
        explanation.files_agree = lambda over=None: _readable_by_path(
            explanation if over is None else over, named()
        )
        explanation.table_files = self._table_files(explanation)
        explanation.io = {
            "index_requests": index_io[0] - before[0],
            "index_bytes": index_io[1] - before[1],
        }
        if describe_data:
            explanation.io["data_footers_read"] = footers
        explanation.text_source = self._explanation_text
        unverifiable = [listed.key for listed in files if listed.identity is None]
        note_scanned_files(explanation, self.build_command, self._changed_how(), unverifiable)
        if not describe_data and cache.state == state and state is not None:
            if len(cache.decisions) >= DECISIONS_KEPT:
                cache.decisions.clear()
            explanation.plan  # noqa: B018 - computed once, shared by every query of the WHERE
            cache.decisions[where] = explanation
            return _again(explanation, read=True)
        return explanation

    def _read_index_ahead(self, where: str) -> None:
        """Read the newest version and the parts ``where`` uses of its segments into the
        index store's caches, where the decision finds them (a version changed meanwhile is
        read again then). What cannot be read is left for the decision to report."""
        try:
            manifest = self.index.latest()
            if manifest is not None:
                self.index.read_ahead(manifest, self._useful_indexes(manifest, where))
        except BloomskipError:
            pass

    def _explanation_text(self, explanation: Explanation) -> str:
        """``str(explanation)``: the ``--explain`` text, for which the surviving files'
        footers are read (once) as ``--explain`` reads them, to tell the bytes read."""
        from bloomskip.dataset.report import explanation_text

        if "data_footers_read" not in explanation.io:
            explanation.io["data_footers_read"] = self._describe(explanation)
        return explanation_text(explanation)

    def build_command(self) -> str:
        """The command that indexes this dataset's new and changed files.

        Example:
            >>> LakeDataset("s3://bucket/logs").build_command()  # doctest: +SKIP
            'bloomskip index build s3://bucket/logs'
        """
        if self.borrowed_from is not None:  # the folder's index serves this glob
            import shlex

            return f"bloomskip index build {shlex.quote(str(self.borrowed_from))}"
        return self._build_command(self.location)

    def _build_command(self, dataset: str) -> str:
        """``bloomskip index build DATASET``, with the index location when not the default."""
        import shlex

        command = f"bloomskip index build {shlex.quote(dataset)}"
        if self.index_location != self._default_index_location:
            command += f" --index-location {shlex.quote(self.index_location)}"
        return command

    def _changed_how(self) -> str:
        """What tells a changed file here, as a warning words it."""
        from bloomskip._store import LocalStore

        if self.store is None:
            return "new size or footer"  # a caller's filesystem: the footer's hash
        if isinstance(self.store, LocalStore):
            return "new size or modification time"
        return "new size or ETag"

    def _describe(self, explanation: Explanation) -> int:
        """Give the files with surviving row groups their full layout (footer), and locally
        every file, so that ``--explain`` also tells the bytes skipped (a local footer costs
        no request); returns how many footers were read."""
        from bloomskip._store import LocalStore
        from bloomskip.dataset.listing.files import read_layout

        every = isinstance(self.store, LocalStore) and self._given_filesystem is None
        read = 0
        for state, keep in zip(explanation.files, explanation.keep, strict=True):
            if (every or keep.any()) and not state.layout.column_bytes:
                state.layout = read_layout(state.source)
                read += 1
        return read

    def _io_snapshot(self) -> tuple[int, int]:
        stores = [self.log.store] + ([self.store] if self.store is not None else [])
        return _snapshot(*(store.stats for store in stores))

    def index_states(self) -> tuple[list, Sidecar | None]:
        """Every file's state with the sections of all its indexes read, and the index's
        definitions (a sidecar without files): what ``index status --plot`` draws.

        Returns:
            ``(states, sidecar)`` as :func:`~bloomskip.dataset.prune.index_fill` takes them;
            ``([], None)`` when there is no index.

        Raises:
            FormatError: The newest manifest is corrupt.
            StorageError: The dataset or the index cannot be read.
        """
        files, versions = self.list_files()
        manifest = self.latest_manifest(versions)
        if manifest is None:
            return [], None
        states = self._states(files, manifest, None, [])
        return states, Sidecar(manifest.granule, list(manifest.indexes), {})

    def _useful_indexes(self, manifest: Manifest, where: str | None) -> list[int]:
        """The indexes whose sections a query of ``where`` reads (all of them for None)."""
        from bloomskip.dataset.prune import _condition

        if where is None:
            return list(range(len(manifest.indexes)))
        useful = []
        served, unusable = self.listing.served_indexes(manifest)
        for number, spec in enumerate(served):
            if number in unusable:
                continue
            try:
                if _condition(spec, where, self._cache.conditions).useful:
                    useful.append(number)
            except ValueError:
                continue  # prune() reports it; no section of this index is fetched
        return useful

    def _states(self, files, manifest, where, warnings, kept=None):
        """Each file's :class:`~bloomskip.dataset.prune.FileState`: its entry in the index when
        that is still the file's, and its layout.

        Args:
            files: The listed files.
            manifest: The version read (None: no index).
            where: The WHERE whose indexes' sections are read (None: every index's).
            warnings: Where the reasons a segment cannot be used go.
            kept: The files the location's own metadata keeps (a table's pruning); None: all.
        """
        import numpy as np

        from bloomskip.dataset.listing.files import read_layout
        from bloomskip.dataset.prune import CHANGED, INDEXED, NOT_INDEXED, FileState

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
        covered = self._coverage(files, manifest)
        useful = self._useful_indexes(manifest, where) if manifest is not None else []
        by_key = {item.key: item for item in files}
        opened = self._open_segments(files, covered, useful, manifest, warnings, by_key)
        states = []
        for listed in files:
            source = self.writer.source(listed)
            segment, recorded = covered.get(listed.key, (None, None))
            entry, status = None, NOT_INDEXED
            if segment is not None and not identity_matches(recorded, listed.identity):
                status = CHANGED
            elif segment is not None and useful:
                sidecar = opened[segment.key]
                entry = sidecar.files.get(listed.key) if sidecar is not None else None
                # In a segment that cannot be read, a file is still indexed: the segment's
                # warning says why it is scanned, and a build would not index it again.
                status = INDEXED if entry is not None or sidecar is None else NOT_INDEXED
            elif segment is not None:
                status = INDEXED  # no index can help this WHERE: nothing of it is read
            if entry is not None and manifest.granule == ROW_GROUP:
                # The granules are the row groups the file had when indexed, and its identity
                # is unchanged: its footer need not be read to know them.
                layout = Layout(np.asarray(entry.granule_rows, np.int64), {})
            else:
                try:
                    layout = read_layout(source)
                except FormatError as exc:
                    # A footer read while the object is replaced mixes two versions' bytes.
                    if self.store is None or _same_object(
                        listed.info, self.store.heads([listed.key])[listed.key]
                    ):
                        raise
                    raise StaleSourceError(
                        f"{self.writer.uri_of(listed.key)}: changed while the query read it; run "
                        "the query again"
                    ) from exc
            states.append(FileState(source, listed.key, layout, entry, status, listed.info))
        return states

    def _coverage(self, files, manifest: Manifest | None) -> dict:
        """Per file key, the segment that covers it and the identity it was indexed at.

        At an older snapshot of a table, a file the live manifest no longer holds (removed by
        a later snapshot) is found in the newest older version that covered it with the same
        definitions, until a vacuum deletes that version.
        """
        if manifest is None:
            return {}
        covered = manifest.files(listed.key for listed in files)
        wanted = {listed.key for listed in files} - covered.keys()
        # At the newest state a file the live manifest lacks is new since the last build: no
        # older version holds it, and reading them all would cost a request each per query.
        if not wanted or self.listing.is_latest:
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

    def _open_segments(self, files, covered, useful, manifest, warnings, listed) -> dict:
        """The segments holding an unchanged file, each one's files and indexes
        (:meth:`SegmentStore.open_segments`), or None (a warning) when it cannot be used."""
        if not useful:
            return {}
        needed = {}
        for item in files:
            segment, recorded = covered.get(item.key, (None, None))
            if segment is not None and identity_matches(recorded, item.identity):
                needed.setdefault(segment.key, segment)
        opened = self.index.open_segments(list(needed.values()), useful, manifest, listed)
        for key, result in opened.items():
            if isinstance(result, Exception):
                warnings.append(
                    f"segment {self.log.store.uri_of(key)} unreadable, scanning its "
                    f"{len(needed[key].files)} files: {result}"
                )
                opened[key] = None
        return opened

    @property
    def schema(self) -> pa.Schema:
        """The dataset's unified schema: the indexed files' (from the manifest) together with
        every file no segment describes (their footers are read)."""
        files, versions = self.list_files()
        manifest = self.latest_manifest(versions)
        # As a decision keys what it derives: nothing is kept without a whole, clean index.
        clean = manifest is not None and not manifest.damaged
        self._refresh(files, manifest if clean else UNKNOWN)
        return self._kept(self._cache.state, "schema", lambda: self._schema(files, manifest))

    def scan_schema(self) -> pa.Schema:
        """The schema of the rows a query returns (before ``columns`` selects): the files'
        schemas unified as the scan reads them, then the ``key=value`` folders' columns.

        Raises:
            BloomskipError: Two files hold a column in types no scan reads as one.
        """
        return self.schema

    def schema_conflicts(self) -> dict[str, str]:
        """Columns whose type differs between files, as an index hashes them (see
        :func:`~bloomskip.dataset.listing.files.type_conflicts`); a segment's files are named
        by its first.

        Returns:
            ``{column: "a.parquet: int64, b.parquet: string"}``; empty when the files agree.

        Raises:
            FormatError: A file's footer cannot be read.
        """
        from bloomskip.dataset.listing.files import type_conflicts

        files, versions = self.list_files()
        named = self._named_schemas(files, self.latest_manifest(versions))
        return type_conflicts((name, schema) for name, schema, _ in named)

    def _schema(self, files, manifest, file_schemas=None) -> pa.Schema:
        """The dataset's schema: its files' schemas unified, then the ``key=value`` folders'
        columns (``file_schemas``: gives :meth:`_file_schemas`, when already at hand)."""
        import pyarrow as pa

        stated = self.listing.schema()
        if stated is not None:
            return stated
        if any(self.writer.source(item).format != "parquet" for item in files):
            named = self._named_schemas(files, manifest)
            check_ipc_schemas((name, schema) for name, schema, _ in named)
        schemas = file_schemas() if file_schemas else self._file_schemas(files, manifest)
        held = self.writer.unify(schemas, [item.key for item in files])
        # The columns of key=value folders follow the files' own (dataset/listing/hive.py).
        return pa.schema(list(held) + list(self._partitioning(files, held).fields))

    def _file_schemas(self, files, manifest) -> list[pa.Schema]:
        """The schemas of ``files``: one per segment describing some of them as they are now
        (from the manifest), one per other file (from its footer)."""
        return [schema for _, schema, _ in self._named_schemas(files, manifest)]

    def _named_schemas(self, files, manifest) -> list[tuple[str, pa.Schema, bool | None]]:
        """:meth:`_file_schemas`, each named by a file it describes (a segment's first), and
        whether every file it describes holds exactly it (None: a segment written before
        segments said so; a file's own schema is its own)."""
        from bloomskip.dataset.build.segment_writer import ONE_SCHEMA, files_schema_kind

        schemas = []
        described: set[str] = set()
        listed = {item.key: item for item in files}
        for segment in manifest.segments if manifest is not None else ():
            current = [
                key
                for key in segment.files.keys() & listed.keys()
                if identity_matches(segment.files[key], listed[key].identity)
            ]
            schema = decode_schema(segment.schema) if current else None
            if schema is not None:
                kind = files_schema_kind(schema)
                exact = None if kind is None else kind == ONE_SCHEMA
                schemas.append((min(current), schema.remove_metadata(), exact))
                described.update(current)
        # Files no segment describes as they are now (new, rewritten): their footers are read.
        schemas += [
            (item.key, self.writer.read_schema(item), True)
            for item in files
            if item.key not in described
        ]
        return schemas

    def _partitioning(self, files, schema):
        """The partition columns of the files' ``key=value`` folders and each file's values
        (none for a table: its partition values are its log's).

        Args:
            files: The listed files (``ListedFile``), in key order.
            schema: The columns the files hold, or the whole schema.
        """
        return self.listing.partitioning(
            [str(self.writer.source(item).path) for item in files],
            [item.key for item in files],
            schema,
        )

    def query(
        self,
        where: str,
        columns: list[str] | str | None = None,
        limit: int | None = None,
        *,
        progress: bool | None = None,
    ) -> pa.Table:
        """Return the rows matching ``where``, reading only the row groups the index keeps.

        Args:
            where: A ClickHouse WHERE expression.
            columns: Columns (or a select list) to return; all when None.
            limit: At most this many rows.
            progress: A bar on stderr counting the rows read by a long read; None: when
                stderr is a terminal.

        Returns:
            A ``pyarrow.Table``: exactly the rows a scan of every file returns.

        Raises:
            UnsupportedPredicateError: The WHERE has no exact translation.
            BloomskipError: DuckDB rejects the query (e.g. an unknown column).
        """
        return self.run(self.explain(where), where, columns, limit, progress=progress)

    def duckdb_connection(self):
        """The DuckDB connection :meth:`query` runs on (created on first use, then reused:
        connecting costs 10-30 ms)."""
        from bloomskip.dataset.scan.query import connect

        cache = self._cache
        if cache.connection is None:
            cache.connection = connect()
        return cache.connection

    def _refresh(self, files, manifest) -> None:
        """Drop what was derived when a file or the index changed (``manifest``: the version
        read, None without one, ``UNKNOWN`` when it could not be read whole)."""
        keys = [listed.info for listed in files]
        index = manifest
        if manifest is not UNKNOWN and manifest is not None:
            # Not the version number alone: an index dropped and built again starts at 1. Its
            # segments' keys are random, and name what the version holds.
            segments = tuple(segment.key for segment in manifest.segments)
            index = (manifest.version, manifest.granule, manifest.indexes, segments)
        self._cache.refresh(keys, index)

    def _kept(self, state, name: str, derive):
        """``derive()``, kept in the cache under ``name`` while its state is ``state`` (the
        decision's): a decision made before a change never reads the newer state's value."""
        cache = self._cache
        if cache.state == state and getattr(cache, name) is not None:
            return getattr(cache, name)
        value = derive()
        if cache.state == state:
            setattr(cache, name, value)
        return value

    def run(
        self, explanation: Explanation, where: str, columns=None, limit=None, *, progress=None
    ) -> pa.Table:
        """Read the row groups ``explanation`` keeps and apply ``where`` exactly (DuckDB);
        ``progress`` as :meth:`query` takes it.

        A file replaced since it was listed is never answered from: the query is decided and
        read again instead (docs/queries.md). Objects fetched by reads pinned to their listed
        ETags (:mod:`~bloomskip.dataset.scan.fetch`) need no check after; any other file read
        is checked once the read is done (one HEAD each, in parallel, or one new listing of the
        prefix where that takes fewer requests).

        Raises:
            StaleSourceError: A file it read changed during each of three attempts.
            StorageError: A file's metadata cannot be read.
        """
        from bloomskip.dataset.prune import read_consistently

        pinned = False

        def read(decision: Explanation) -> pa.Table:
            nonlocal pinned
            pinned = False
            table, pinned = self._run_on(
                decision, where, columns, limit, decision.table_files, progress
            )
            return table

        def changed(states: list) -> list:
            return [] if pinned else self._changed(states)

        return read_consistently(explanation, where, read, changed, self.explain)

    def _changed(self, states: list) -> list:
        """Of ``states``, the files no longer as they were listed (one listing, or one HEAD
        each in parallel, whichever costs fewer requests: ``Store.identities_now``)."""
        if self.store is None:
            # Through a caller's filesystem the footer's hash names the bytes (_list_data).
            return [state for state in states if not _footer_unchanged(state)]
        now = self.store.identities_now([state.relative_path for state in states])
        return [
            state for state in states if not _same_object(state.listed, now[state.relative_path])
        ]

    def plan_reader(self, explanation: Explanation):
        """How other engines read ``explanation``'s access plan
        (:class:`~bloomskip.dataset.scan.handoff.ExplanationReader`)."""
        from bloomskip.dataset.scan.handoff import ExplanationReader

        def agree() -> bool:
            return explanation.files_agree is not None and explanation.files_agree()

        def by_path() -> bool:
            return not explanation.table_files and _local_parquet(explanation)

        return ExplanationReader(explanation, by_path=by_path, uniform=agree, changed=self._changed)

    def _table_files(self, explanation: Explanation) -> dict | None:
        """What the scan adds to each file (``TableFile`` by key): the partition values of
        ``key=value`` folders, or a table's partition values and deletes; None: nothing."""
        states = explanation.files
        return self.listing.table_files(
            [str(state.source.path) for state in states],
            [state.relative_path for state in states],
            explanation.schema_source,
        )

    def _run_on(
        self, explanation, where, columns, limit, table_files, progress
    ) -> tuple[pa.Table, bool]:
        """The rows, and whether every byte was read pinned to its listed version."""
        from bloomskip.dataset.scan.query import run_query

        def scan(decision: Explanation, by_path: bool, uniform: bool) -> pa.Table:
            return run_query(
                decision,
                explanation.schema_source(),
                where,
                columns,
                limit,
                self.duckdb_connection(),
                uniform=uniform,
                table_files=table_files,
                by_path=by_path,
                progress=progress,
            )

        # A table's files carry its partition values and deletes: pyarrow reads them. Local
        # Parquet files DuckDB reads itself: by path when they agree on one schema, else by
        # name as one table (union_by_name), the rule the scan's schema was made by. Objects
        # of one schema are fetched into local copies that DuckDB reads so.
        agree = explanation.files_agree
        if not table_files and _local_parquet(explanation):
            return scan(explanation, True, agree is not None and agree()), False
        if not table_files and agree is not None and isinstance(self.store, ObjectStore):
            from bloomskip.dataset.scan.fetch import fetched_locally

            with fetched_locally(explanation, self.store, self.duckdb_connection) as local:
                if local is not None and agree(local):
                    return scan(local, True, True), True
        return scan(explanation, False, False), False

    # -- maintenance -----------------------------------------------------------------------

    def status(self) -> dict:
        """The index's state: version, segments, files covered, stale and missing files, bytes.

        Returns:
            A JSON-ready dict (the fields ``bloomskip index status --json`` prints); its
            ``version`` is the newest readable version, and ``unreadable_versions`` says why
            any newer one was passed over (the next build supersedes them). ``row_groups``
            gives the sizes of the row groups of up to :data:`STATUS_FOOTERS` files spread
            over the listing (their footers are read) to set beside the granule.
        """
        files, versions = self.list_files()
        manifest, _, unreadable = self.log.latest_readable(versions)
        listed = {item.key: item for item in files}
        covered = manifest.files() if manifest is not None else {}
        if self.borrowed_from is not None:
            # The folder's index names its other files too: this glob's are those it matches.
            covered = {key: item for key, item in covered.items() if self.listing.covers(key)}
        stale = sorted(
            key
            for key, (_, identity) in covered.items()
            if key in listed and not identity_matches(identity, listed[key].identity)
        )
        missing = sorted(key for key in covered if key not in listed)
        unindexed = sorted(key for key in listed if key not in covered)
        segments = list(manifest.segments) if manifest is not None else []
        existing = self.index.present_segments() if segments else set()
        lost = sorted(segment.key for segment in segments if segment.key not in existing)
        per_index = [
            {
                "definition": spec.definition,
                "bytes": sum(segment.index_spans[n][1] for segment in segments),
            }
            for n, spec in enumerate(manifest.indexes if manifest is not None else ())
        ]
        return {
            "index": self.index_location,
            "version": manifest.version if manifest is not None else None,
            "granule": manifest.granule if manifest is not None else None,
            "files": len(files),
            "files_indexed": len(covered) - len(stale) - len(missing),
            "stale": stale,
            "missing": missing,
            "not_indexed": unindexed,
            "segments": [
                {"key": segment.key, "bytes": segment.size, "files": len(segment.files)}
                for segment in segments
            ],
            "segment_bytes": sum(segment.size for segment in segments),
            "segments_missing": lost,
            "indexes": per_index,
            "unreadable_versions": unreadable,
            "row_groups": self._row_group_sizes(files),
        }

    def _row_group_sizes(self, files: list) -> dict | None:
        """The row-group sizes of up to :data:`STATUS_FOOTERS` of ``files``, spread evenly; a
        footer that cannot be read (or of a file replaced since the listing) leaves its file
        out of the sample."""
        from concurrent.futures import ThreadPoolExecutor

        from bloomskip.dataset.listing.files import read_layout, row_group_sizes

        step = max(1, -(-len(files) // STATUS_FOOTERS))
        sources = [self.writer.source(listed) for listed in files[::step]]

        def layout(source):
            try:
                return read_layout(source)
            except (FormatError, OSError, StorageError, StaleSourceError):
                return None

        with ThreadPoolExecutor(max_workers=STATUS_FOOTERS) as pool:
            layouts = [found for found in pool.map(layout, sources) if found is not None]
        return row_group_sizes(layouts, len(files))

    def compact(
        self, small_bytes: int = SEGMENT_TARGET_BYTES // 4, *, automatic: bool = False
    ) -> BuildReport | None:
        """Merge the segments smaller than ``small_bytes`` into fewer segments; commit.

        The merged segments are bounded as a build's are (:data:`SEGMENT_TARGET_BYTES`), so
        compaction holds at most about one target's worth of sections in memory at a time. A
        segment that cannot be read is left as it is (its files stay scanned until rebuilt).
        Files re-indexed by a build that commits meanwhile keep their newer entries.

        Args:
            small_bytes: Larger segments are left as they are.
            automatic: Merge only the full tiers of small segments
                (:func:`~bloomskip.dataset.index.segments.segments_to_merge`), as a build does
                after its commit; default: every small segment.

        Returns:
            The report of the commit, or None when fewer than two segments are small (or,
            ``automatic``, no tier is full).

        Raises:
            StorageError: The index cannot be read or written.
        """
        self._check_own("compact")
        manifest = self.latest_manifest()
        if manifest is None:
            return None
        if automatic:
            small = segments_to_merge(manifest, small_bytes)
        else:
            small = [
                segment
                for segment in manifest.segments
                if segment.size < small_bytes or segment.directory is None
            ]
        if len(small) < 2 and not any(segment.directory is None for segment in small):
            return None
        written_before = self.log.store.stats.bytes_written
        numbers = list(range(len(manifest.indexes)))
        merged_from: set[str] = set()
        written: list[SegmentEntry] = []
        batch: dict[str, FileEntry] = {}
        identities: dict[str, dict] = {}
        schemas: list = []

        def flush() -> None:
            if batch:
                sidecar = Sidecar(manifest.granule, list(manifest.indexes), dict(batch))
                # A segment merged without a schema leaves the merged one without: its files'
                # footers are read instead.
                schema = (
                    self.writer.segment_schema(schemas, list(batch), merged=True)
                    if schemas and None not in schemas
                    else ""
                )
                written.append(self.log.write_segment(sidecar, identities, schema))
                batch.clear()
                identities.clear()
                schemas.clear()

        # A compaction interrupted before its commit deletes what it merged so far.
        with _discarded_on_failure(self.log.store, written):
            for segment in small:
                try:
                    sidecar = self.log.read_segment(segment, numbers, manifest.indexes)
                    entries = {
                        path: sidecar.files[path] for path in segment.files if path in sidecar.files
                    }
                    payloads = {path: list(entry.payloads) for path, entry in entries.items()}
                except (FormatError, StorageError):
                    continue
                merged_from.add(segment.key)
                for path, entry in entries.items():
                    batch[path] = FileEntry(
                        entry.path, entry.format, entry.identity, entry.granule_rows, payloads[path]
                    )
                    identities[path] = dict(segment.files[path])
                schemas.append(decode_schema(segment.schema))
                if sum(len(p) for item in batch.values() for p in item.payloads) >= (
                    SEGMENT_TARGET_BYTES
                ):
                    flush()
            flush()
        if not written:
            return None
        change = Change(
            manifest.granule, manifest.indexes, written, only_if_in=frozenset(merged_from)
        )
        committed = self.index.commit(change)
        return BuildReport(
            self.index_location,
            SEGMENTED,
            sum(len(segment.files) for segment in written),
            [],
            sum(segment.size for segment in committed.segments),
            self.log.store.stats.bytes_written - written_before,
            version=committed.version,
            segments_written=len(written),
            segments_merged=len(merged_from),
        )

    def _merge_full_tiers(self, report: BuildReport) -> None:
        """The automatic compaction after a build: merge the full tiers of small segments,
        and count it in ``report``. A compaction that loses a race to another commit is left
        to the next build (this build's own commit stands)."""
        try:
            merged = self.compact(automatic=True)
        except CommitConflictError:
            return
        if merged is not None:
            report.version = merged.version
            report.segments_merged = merged.files and merged.segments_merged
            report.segments_written += merged.segments_written
            report.bytes_written += merged.bytes_written
            report.index_bytes = merged.index_bytes

    def vacuum(self, keep_versions: int = 10, min_age_seconds: float = 3600.0) -> list[str]:
        """Delete old versions and unreferenced segments (see ``IndexLog.vacuum``)."""
        self._check_own("vacuum")
        return self.index.vacuum(keep_versions, min_age_seconds)

    def drop_index(self, name: str) -> int:
        """Remove one index: a new version lists the others over the same segments (nothing
        is rewritten; a vacuum later reclaims nothing, since the parts stay in their segments).

        Args:
            name: The index's name.

        Returns:
            The version committed.

        Raises:
            BloomskipError: No index, or none of that name (the names are listed).
        """
        self._check_own("drop")
        return self.index.drop_index(name)

    def drop(self) -> int:
        """Delete the whole index; returns the number of objects deleted."""
        self._check_own("drop")
        return self.index.drop()


def _again(decided: Explanation, read: bool) -> Explanation:
    """A kept decision as a new one, its plan shared and its lists its own; ``read``: with the
    index I/O of its making, else with none (a decision kept reads nothing)."""
    io = dict(decided.io) if read else dict.fromkeys(decided.io, 0)
    again = dataclasses.replace(decided, warnings=list(decided.warnings), io=io)
    if "plan" in decided.__dict__:
        again.__dict__["plan"] = decided.__dict__["plan"]
    return again


def _import_deciders() -> None:
    """Import the modules reading a manifest and deciding a WHERE use (pyarrow, its Parquet
    reader for checkpoints and its compute functions, sqlglot, the condition compiler)."""
    import pyarrow.compute  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import sqlglot  # noqa: F401

    import bloomskip.clickhouse.condition  # noqa: F401


def _local_parquet(explanation: Explanation) -> bool:
    """Whether every file of ``explanation`` is a local Parquet file (DuckDB reads it by
    path)."""
    # By the filesystem's type name: importing pyarrow.fs loads every cloud filesystem's
    # module, which a cold local query has no use for.
    return all(
        getattr(state.source.filesystem, "type_name", "local") == "local"
        and state.source.format == "parquet"
        for state in explanation.files
    )


def _readable_by_path(explanation: Explanation, named: list) -> bool:
    """Whether DuckDB may read the kept files by path, as the one scan does for a folder.

    They must be local Parquet files, each holding exactly the dataset's columns in its types
    (``named``: the schemas as :meth:`LakeDataset._named_schemas` gives them, one per segment,
    each saying whether its files hold exactly it; for a segment written before segments said
    so, the kept files' own footers tell). A nanosecond timestamp is left to pyarrow: INT96 and
    INT64 columns are both ``timestamp[ns]`` to Arrow, but two types to DuckDB, and a manifest
    records the Arrow schema only.
    """
    import pyarrow as pa

    schemas = [schema for _, schema, _ in named]
    if not _local_parquet(explanation) or not schemas:
        return False
    if not all(schema.equals(schemas[0]) for schema in schemas[1:]):
        return False
    if any(pa.types.is_timestamp(field.type) and field.type.unit == "ns" for field in schemas[0]):
        return False
    exact = {flag for _, _, flag in named}
    if False in exact:
        return False
    if None not in exact:
        return True
    import pyarrow.parquet as pq

    from bloomskip._sources import plain_types

    kept = [
        state for state, keep in zip(explanation.files, explanation.keep, strict=True) if keep.any()
    ]
    try:
        return all(
            plain_types(pq.read_schema(state.source.path)).equals(schemas[0]) for state in kept
        )
    except (OSError, pa.ArrowException):
        return False  # read by the pyarrow path, which names what it cannot read


def _same_object(listed: ObjectInfo, now: ObjectInfo | None) -> bool:
    """Whether an object is still the one a listing described: its size, ETag, version where
    the listing gave one (an S3 listing gives none, a HEAD in a versioned bucket does), a
    local file's change time equal, and its modification time within a second of the listed
    one (a HEAD tells it to the second, a listing maybe finer): an old object written back a
    second or more later has its old ETag, not its old time."""
    return (
        now is not None
        and (now.size, now.etag, now.ctime_ns) == (listed.size, listed.etag, listed.ctime_ns)
        and (listed.version is None or now.version == listed.version)
        and abs(now.mtime_ns - listed.mtime_ns) < 10**9
    )


def _footer_unchanged(state) -> bool:
    """Whether a file read through a caller's filesystem still has its listed size and footer."""
    try:
        identity = state.source.identity()
    except (OSError, FormatError):
        return False
    listed = state.listed
    return (identity.size, f"footer-{identity.footer_sha256}") == (listed.size, listed.etag)


@contextlib.contextmanager
def _discarded_on_failure(store: Store, segments: list[SegmentEntry]) -> Iterator[None]:
    """Delete ``segments`` (written, not committed) when the block raises, Ctrl-C included:
    no version names them and no other build knows their keys, so they go now rather than at
    a vacuum an hour later. One that cannot be deleted is left to the vacuum."""
    try:
        yield
    except BaseException:
        _delete_uncommitted(store, segments)
        raise


def _delete_uncommitted(store: Store, segments: list[SegmentEntry]) -> None:
    for segment in segments:
        with contextlib.suppress(StorageError):
            store.delete(segment.key)


def _snapshot(*stats: IOStats) -> tuple[int, int]:
    seen = {id(item): item for item in stats}.values()
    return sum(item.requests for item in seen), sum(item.bytes_read for item in seen)


__all__ = ["LakeDataset"]
