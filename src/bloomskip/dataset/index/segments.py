"""The index as immutable segments plus numbered manifest versions (docs/segments.md).

An index location holds::

    versions/00000000000000000001.json   manifest version 1
    versions/00000000000000000002.json   manifest version 2, ...
    segments/<random hex>.bsk            segments: sidecars (format version 2) for a batch of files

A segment is written once and never changed. A manifest version names the live segments, and for
each the files it covers with the identity each had when it was indexed; it is created with a
create-only put (``If-None-Match: *`` on object stores, a hard link locally), so of two writers of
version *n* exactly one succeeds. The loser reads the new latest version and applies its change
to it (a :class:`Change` is "these files now live in this segment", optionally "only where they
still live in that one"), then tries *n* + 1: concurrent builders on disjoint files both commit,
as Delta's log does. A change whose segments lack an index the latest version now defines (another
build added or replaced one meanwhile) is not applied: committing it would lose that index, so the
build runs again on top of that version (``LakeDataset.build_index``). A reader lists
``versions/`` once and reads the newest version: it always sees one complete version, and a
builder killed at any point leaves the last one intact.

Example:
    >>> import tempfile
    >>> from bloomskip._store import open_store
    >>> log = IndexLog(open_store(tempfile.mkdtemp()))
    >>> log.latest() is None
    True
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import json
import random
import re
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain

from bloomskip._store import COALESCE_GAP, ObjectInfo, Store, coalesce
from bloomskip.dataset.index.sidecar import (
    FileEntry,
    IndexSpec,
    Sidecar,
    decode_sidecar_from,
)
from bloomskip.errors import BloomskipError, CommitConflictError, FormatError, StorageError

MANIFEST_FORMAT = "bloomskip-manifest"
#: Version 2 objects are commit records (what a version adds to and drops from its base);
#: version 1 objects, each a whole manifest, are still read.
MANIFEST_VERSION = 2
READABLE_MANIFEST_VERSIONS = (1, 2)
CHECKPOINT_FORMAT = "bloomskip-checkpoint"
CHECKPOINT_VERSION = 1
#: A commit writes a checkpoint once this many records follow the newest one, so a reader
#: reads a checkpoint and at most this many small records in parallel.
CHECKPOINT_INTERVAL = 10
#: A record this large (a first build, a rebuild) is followed by a checkpoint at once: a
#: checkpoint holds the same files in a fraction of the bytes.
CHECKPOINT_RECORD_BYTES = 64 << 10
#: Automatic compaction: small segments whose sizes lie within a factor of 4 form a tier, and
#: a tier this full is merged by the build that filled it, so a lookup touches a few segments
#: per tier, and a byte is rewritten once per tier it climbs.
COMPACTION_TIER_SEGMENTS = 4
#: The fields a file identity may hold (``ObjectInfo.identity``), with their types.
IDENTITY_FIELDS = (("size", int), ("etag", str), ("version", str), ("mtime_ns", int),
                   ("ctime_ns", int))  # fmt: skip
VERSIONS = "versions/"
SEGMENTS = "segments/"
SEGMENT_SUFFIX = ".bsk"
_VERSION_DIGITS = 20
#: A manifest larger than this is refused before it is parsed (10⁶ files fit in far less).
MAX_MANIFEST_BYTES = 1 << 30
#: Slices of a sliced part fewer than this many bytes apart are read in one request: reading
#: a small gap costs less than another request, a large one more than the slices themselves.
SLICE_GAP = 16 << 10
#: How often a commit re-reads the latest version and retries after losing a race.
COMMIT_ATTEMPTS = 50

Identity = Mapping[str, int | str]


@dataclass(frozen=True)
class SegmentEntry:
    """One live segment of a manifest version.

    Attributes:
        key: The segment's key under the index location (``segments/….bsk``).
        size: Its length in bytes.
        index_spans: ``(offset, length)`` of each index's part of the segment: a complete
            sidecar (format version 2) holding that index alone, so that a query reads each
            index it uses with one range request and nothing else.
        files: The files it covers in this version, each with the identity it was indexed at.
        schema: The Arrow schema its files unify to, serialized (Arrow IPC) and base64-encoded:
            a query learns the dataset's columns without reading every file's footer.
        directory: ``(offset, length)`` of the segment's file directory: a segment of format
            2, whose index parts are bit-sliced (docs/sliced-layout.md) and whose
            ``index_spans`` are ``(header offset, part length, header length, slices
            offset)``: every part's header follows the directory, its slices lie further on.
            None: format 1, each part a sidecar of that index.
    """

    key: str
    size: int
    index_spans: tuple[tuple[int, ...], ...]
    files: Mapping[str, Identity]
    schema: str = ""
    directory: tuple[int, int] | None = None


@dataclass(frozen=True)
class Manifest:
    """One version of the index: its definitions and live segments.

    Attributes:
        version: Its number (1, 2, …).
        granule: ``"row-group"`` or a row count, as in a sidecar.
        indexes: The index definitions every segment holds, in order.
        segments: The live segments, in commit order.
        table: For a Delta or Iceberg table, the newest snapshot a build covered
            (``TableListing.record()``: format, snapshot, sequence, and for Iceberg the field
            id each index column is bound to, ``columns``); None for plain files.
        damaged: One line per segment entry left out when the version was read (it failed
            its checksum, or its schema cannot be the files'): its files are scanned, and the
            next build indexes them again. Never written.
        objects: The keys of the objects this version was read from (its checkpoint and the
            records after it): what a vacuum must keep for it to stay readable. Never written.
        replay: How many commit records were applied on top of a checkpoint (or of a whole
            version-1 manifest) to read it; -1 when that base was a version-1 manifest, which
            the next commit replaces with a checkpoint. Never written.
    """

    version: int
    granule: str | int
    indexes: tuple[IndexSpec, ...]
    segments: tuple[SegmentEntry, ...]
    table: Mapping[str, int | str] | None = None
    damaged: tuple[str, ...] = ()
    objects: frozenset[str] = field(default=frozenset(), compare=False)
    replay: int = field(default=0, compare=False)

    def files(self, among: Iterable[str] | None = None) -> dict[str, tuple[SegmentEntry, Identity]]:
        """Every covered file: its segment and the identity it was indexed at.

        Args:
            among: Only these files (the ones a query lists): the work and memory then follow
                their number, not the manifest's.
        """
        if among is None:
            return {
                path: (segment, identity)
                for segment in self.segments
                for path, identity in segment.files.items()
            }
        wanted = set(among)
        return {
            path: (segment, segment.files[path])
            for segment in self.segments
            for path in segment.files.keys() & wanted  # iterates the smaller of the two
        }


@dataclass
class Change:
    """What one commit does, re-applicable on top of any newer version.

    Attributes:
        granule: The granule mode of the new segments.
        indexes: Their index definitions (every new segment holds exactly these); a version
            with other ones takes the change only when ``replace_all`` is set and that version
            still has ``base_definitions``.
        added: New segments; every file they cover now lives there.
        only_if_in: For a compaction: a file moves to a new segment only if, in the version the
            change is applied to, it still lives in one of these segment keys.
        replace_all: A rebuild with new definitions: the new segments replace every old one.
        base_definitions: For ``replace_all``: ``(granule, indexes)`` of the version the
            rebuild started from (None: there was no index). Only those definitions are
            replaced: definitions another build committed meanwhile are not silently dropped.
        removed: Files to drop from the index (they no longer exist).
        table: The table snapshot the build covered (see ``Manifest.table``).
        drop: The name of an index to remove: the segments stay as they are, the new version
            just no longer lists that index or its parts.
    """

    granule: str | int
    indexes: tuple[IndexSpec, ...]
    added: list[SegmentEntry] = field(default_factory=list)
    only_if_in: frozenset[str] | None = None
    replace_all: bool = False
    base_definitions: tuple[str | int, tuple[IndexSpec, ...]] | None = None
    removed: frozenset[str] = frozenset()
    table: Mapping[str, int | str] | None = None
    drop: str | None = None

    def apply(self, base: Manifest | None) -> Manifest:
        """The manifest this change makes of ``base`` (``None``: there is no index yet).

        Raises:
            _DefinitionsChanged: ``base`` defines other indexes (or another granule) than
                the change's segments hold, and than the version the change started from:
                another build changed the definitions meanwhile.
        """
        number = 1 if base is None else base.version + 1
        if self.drop is not None:
            return _without_index(base, self.drop, number)
        table = self._newer_table(base.table if base is not None else None)
        if base is None:
            return Manifest(number, self.granule, self.indexes, tuple(self.added), table)
        definitions = (base.granule, base.indexes)
        if self.replace_all and definitions == self.base_definitions:
            # Builds of the old definitions may have committed meanwhile: their segments hold
            # none of the new indexes, so they go with the rest.
            return Manifest(number, self.granule, self.indexes, tuple(self.added), table)
        if definitions != (self.granule, self.indexes):
            # The segments lack an index the newest version defines (or hold one it dropped):
            # committing them would lose that index, or list bits no segment holds.
            raise _DefinitionsChanged(base)
        # The same definitions (also when another rebuild committed exactly this change
        # first): this change's files move to its segments, and every other file stays.
        moved: set[str] = set()
        for segment in self.added:
            for path in segment.files:
                if self.only_if_in is None:
                    moved.add(path)
        if self.only_if_in is not None:
            current = base.files()
            moved = {
                path
                for segment in self.added
                for path in segment.files
                if path in current and current[path][0].key in self.only_if_in
            }
        gone = moved | self.removed
        kept = []
        for segment in base.segments:
            files = {path: ident for path, ident in segment.files.items() if path not in gone}
            if files:
                kept.append(_with_files(segment, files))
        for segment in self.added:
            files = {path: ident for path, ident in segment.files.items() if path in moved}
            if files:
                kept.append(_with_files(segment, files))
        return Manifest(number, self.granule, self.indexes, tuple(kept), table)

    def _newer_table(self, recorded: Mapping[str, int | str] | None):
        # Two builders of one table may commit in either order: the record is the newer
        # snapshot of the two (each file's coverage is its own, by key and identity).
        if recorded is None or self.table is None:
            return self.table if self.table is not None else recorded
        return self.table if self.table["sequence"] >= recorded["sequence"] else recorded


@dataclass(frozen=True)
class Record:
    """One version as its object states it: what it adds to and drops from its base version.

    A version's manifest is its base's with the record applied (:meth:`apply`), so a commit
    writes what it changes, not the whole index. A record with base 0 (and every version-1
    object) states a whole manifest.

    Attributes:
        version: Its number.
        base: The version it changes (0: none). Usually ``version - 1``; a commit made while
            newer versions did not read builds on the newest one that did.
        granule: The granule of the version.
        indexes: Its index definitions.
        added: Segments it adds (or restates: one of the base's keys with new parts). Every
            file they cover leaves the base's segments.
        dropped_segments: Base segments it drops whole.
        dropped_files: Files it drops from the base's segments it keeps.
        table: As :attr:`Manifest.table`.
        damaged: As :attr:`Manifest.damaged`, for its own entries. Never written.
        format_version: The object's format version. Never written.

    Example:
        >>> first = Record(1, 0, "row-group", (), (SegmentEntry("segments/a-0", 9, (), {"f": {}}),))
        >>> [segment.key for segment in first.apply(None).segments]
        ['segments/a-0']
    """

    version: int
    base: int
    granule: str | int
    indexes: tuple[IndexSpec, ...]
    added: tuple[SegmentEntry, ...]
    dropped_segments: frozenset[str] = frozenset()
    dropped_files: frozenset[str] = frozenset()
    table: Mapping[str, int | str] | None = None
    damaged: tuple[str, ...] = ()
    format_version: int = MANIFEST_VERSION

    def apply(self, base: Manifest | None) -> Manifest:
        """The manifest of this version, given its base's (None for base 0)."""
        gone_keys = self.dropped_segments | {segment.key for segment in self.added}
        gone_files = set(self.dropped_files)
        for segment in self.added:
            gone_files.update(segment.files)
        kept = []
        for segment in base.segments if base is not None else ():
            if segment.key in gone_keys:
                continue
            smaller, larger = sorted((gone_files, segment.files), key=len)
            if not any(path in larger for path in smaller):
                kept.append(segment)
                continue
            files = {path: ident for path, ident in segment.files.items() if path not in gone_files}
            if files:
                kept.append(_with_files(segment, files))
        kept.extend(self.added)
        return Manifest(
            self.version, self.granule, self.indexes, tuple(kept), self.table, self.damaged
        )


def record_of(manifest: Manifest, base: Manifest | None) -> Record:
    """The record that makes ``manifest`` of ``base``: what a commit writes.

    A segment of ``base`` that ``manifest`` keeps as it was, or with fewer files, is not
    restated: the files it lost are listed by name. Any other segment is added whole.

    Example:
        >>> one = SegmentEntry("segments/a-0", 9, (), {"f": {"size": 1}, "g": {"size": 2}})
        >>> base = Manifest(1, "row-group", (), (one,))
        >>> later = Manifest(2, "row-group", (), (_with_files(one, {"f": {"size": 1}}),))
        >>> record = record_of(later, base)
        >>> record.added, sorted(record.dropped_files), record.apply(base) == later
        ((), ['g'], True)
    """
    if base is None:
        added, dropped_segments, dropped_files = tuple(manifest.segments), frozenset(), set()
    else:
        before = {segment.key: segment for segment in base.segments}
        kept: list[tuple[SegmentEntry, SegmentEntry]] = []
        added = []
        for segment in manifest.segments:
            old = before.get(segment.key)
            if old is not None and _narrows(old, segment):
                kept.append((old, segment))
            else:
                added.append(segment)
        added = tuple(added)
        moved = {path for segment in added for path in segment.files}
        dropped_files = {
            path
            for old, segment in kept
            if len(old.files) != len(segment.files)
            for path in old.files
            if path not in segment.files and path not in moved
        }
        stated = {old.key for old, _ in kept} | {segment.key for segment in added}
        dropped_segments = frozenset(
            key for key, old in before.items() if key not in stated and not set(old.files) <= moved
        )
    return Record(
        manifest.version,
        0 if base is None else base.version,
        manifest.granule,
        manifest.indexes,
        added,
        dropped_segments,
        frozenset(dropped_files),
        manifest.table,
    )


def _narrows(old: SegmentEntry, new: SegmentEntry) -> bool:
    """Whether ``new`` is ``old`` with some of its files left out."""
    return (
        (old.size, old.index_spans, old.schema, old.directory)
        == (new.size, new.index_spans, new.schema, new.directory)
        and len(new.files) <= len(old.files)
        and all(old.files.get(path) == identity for path, identity in new.files.items())
    )


def segments_to_merge(manifest: Manifest, small_bytes: int) -> list[SegmentEntry]:
    """The segments an automatic compaction merges now: those of every full tier of small
    segments, and every segment of format 1 (its parts are rewritten bit-sliced, from the bits
    it holds: the migration reads no data file).

    Args:
        manifest: The newest version.
        small_bytes: Segments of format 2 this large or larger are never merged.

    Returns:
        The segments to merge (empty: no tier holds :data:`COMPACTION_TIER_SEGMENTS` and
        every segment is of format 2).

    Example:
        >>> entry = SegmentEntry("segments/a-0", 1000, (), {"f": {}}, directory=(0, 10))
        >>> len(segments_to_merge(Manifest(1, "row-group", (), (entry,) * 4), 1 << 20))
        4
    """
    tiers: dict[int, list[SegmentEntry]] = {}
    legacy = [segment for segment in manifest.segments if segment.directory is None]
    for segment in manifest.segments:
        if segment.size < small_bytes and segment.directory is not None:
            tiers.setdefault(segment.size.bit_length() // 2, []).append(segment)
    full = [
        segment
        for tier in tiers.values()
        if len(tier) >= COMPACTION_TIER_SEGMENTS
        for segment in tier
    ]
    return legacy + full


def concurrent_edit(
    started: Manifest | None,
    latest: Manifest,
    built: Sequence[IndexSpec],
    granule: str | int,
    requested: Sequence[str] | None,
    granule_requested: bool,
) -> str | None:
    """What another build changed meanwhile that this build sets too, or None.

    A build that runs again on top of ``latest`` (its first commit found other definitions)
    keeps what other builds committed since ``started`` and adds its own request, as if it had
    started after them. It may set only what it saw: an index it asks for must still be as in
    ``started`` (or already be as it asks), and so must a granule it was given. Otherwise its
    request would silently undo another build's (a ``--replace`` of what that build replaced,
    say), or fail for a reason its user never saw.

    Args:
        started: The version the build first started from (None: there was no index).
        latest: The newest version.
        built: The definitions of the build's first round (``started``'s with the request).
        granule: The granule of the build's first round.
        requested: The definitions given to the build (their texts; all of them parse).
        granule_requested: Whether the build was given a granule.

    Returns:
        One line naming the index (or the granule) and what it became; None when the
        request applies to ``latest`` as it did to ``started``.

    Example:
        >>> types = (("k", "Int64"),)
        >>> theirs = IndexSpec("INDEX k k TYPE bloom_filter GRANULARITY 1", types)
        >>> ours = IndexSpec("INDEX k k TYPE bloom_filter(0.2) GRANULARITY 1", types)
        >>> latest = Manifest(2, "row-group", (theirs,), ())
        >>> concurrent_edit(None, latest, (ours,), "row-group", ["k TYPE bloom_filter(0.2)"], False)
        "another build changed index 'k' meanwhile (to INDEX k k TYPE bloom_filter GRANULARITY 1)"
    """
    from bloomskip.clickhouse.ddl import parse_index_definition
    from bloomskip.dataset.build.indexing import index_name

    def by_name(specs: Iterable[IndexSpec]) -> dict[str, IndexSpec]:
        return {index_name(spec.definition): spec for spec in specs}

    before = by_name(started.indexes) if started is not None else {}
    now, wanted = by_name(latest.indexes), by_name(built)
    for text in requested or ():
        name = parse_index_definition(text).name
        if now.get(name) not in (before.get(name), wanted.get(name)):
            became = f"to {now[name].definition}" if name in now else "by dropping it"
            return f"another build changed index {name!r} meanwhile ({became})"
    started_granule = started.granule if started is not None else None
    if granule_requested and latest.granule not in (started_granule, granule):
        return f"another build changed the granule meanwhile (to {latest.granule})"
    return None


def _without_index(base: Manifest | None, name: str, number: int) -> Manifest:
    from bloomskip.dataset.build.indexing import index_number

    if base is None:
        raise BloomskipError("there is no index to drop an index from")
    gone = index_number(base.indexes, name)
    segments = tuple(
        dataclasses.replace(
            segment,
            index_spans=tuple(span for n, span in enumerate(segment.index_spans) if n != gone),
        )
        for segment in base.segments
    )
    indexes = tuple(spec for n, spec in enumerate(base.indexes) if n != gone)
    return Manifest(number, base.granule, indexes, segments, base.table)


def _with_files(segment: SegmentEntry, files: Mapping[str, Identity]) -> SegmentEntry:
    return dataclasses.replace(segment, files=files)


class _DefinitionsChanged(CommitConflictError):
    """A commit whose segments were built for other index definitions than the newest version's.

    A build catches it and runs again on top of :attr:`latest`; for any other change (a
    compaction) it is the command's one-line error.

    Args:
        latest: The newest version, whose definitions the change's segments lack.
    """

    def __init__(self, latest: Manifest) -> None:
        self.latest = latest
        super().__init__(
            f"another build changed the index definitions meanwhile (version {latest.version}); "
            "run it again"
        )


class IndexLog:
    """The versions and segments of one index location.

    Args:
        store: The index location (a :class:`~bloomskip._store.Store` rooted there).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        # The last version read, by the listing's description of its object: a dataset's
        # explain and query, or successive queries, decode a large manifest once, and the
        # next version is read as its record on top of it.
        self._last_read: tuple[tuple, Manifest] | None = None
        # The checkpoints and records the last listing found.
        self._checkpoints: dict[int, list[ObjectInfo]] = {}
        self._records: set[int] | None = None

    # -- reading ---------------------------------------------------------------------------

    def version_numbers(self) -> list[int]:
        """Every manifest version present, oldest first (one listing)."""
        return sorted(self.version_sizes())

    def version_sizes(self) -> dict[int, int]:
        """Every manifest version present with its size in bytes (one listing)."""
        return {number: info.size for number, info in self.version_objects().items()}

    def version_objects(self) -> dict[int, ObjectInfo]:
        """Every manifest version present, as the listing describes its object (one listing,
        which also finds the checkpoints)."""
        objects = {}
        checkpoints = []
        for info in self.store.list(VERSIONS):
            number = version_number(info.key)
            if number is not None:
                objects[number] = info
            elif checkpoint_number(info.key) is not None:
                checkpoints.append(info)
        self.seen(objects, checkpoints)
        return objects

    def seen(self, versions: Mapping[int, ObjectInfo], checkpoints: Iterable[ObjectInfo]) -> None:
        """Record what a listing of ``versions/`` found (the data's own listing, when the
        index lies in the data's prefix): reading a version then needs no listing."""
        self._records = set(versions)
        self._checkpoints = {}
        for info in checkpoints:
            self._checkpoints.setdefault(checkpoint_number(info.key), []).append(info)

    def latest(self) -> Manifest | None:
        """The newest manifest version, or ``None`` when there is none.

        Raises:
            FormatError: The newest version is corrupt (the message names its URI and field).
            StorageError: The location cannot be listed or read.
        """
        listed = self.version_objects()
        if not listed:
            return None
        newest = max(listed)
        return self.read_version(newest, listed[newest])

    def latest_readable(
        self, numbers: Sequence[int] | None = None
    ) -> tuple[Manifest | None, int, list[str]]:
        """The newest version that reads, past any newer ones that do not.

        A corrupt newest version (damaged bytes, a truncated object) must not block the next
        commit: that commit builds on the newest readable version and takes the next free
        number, so the unreadable ones are simply superseded.

        Args:
            numbers: The versions present (from a listing already made); default: listed now.

        Returns:
            ``(manifest, newest, unreadable)``: the newest readable version (None when none
            reads), the newest version number present (0: none), and one line per newer
            version that does not read, newest first, naming its URI and what is wrong.

        Raises:
            StorageError: The location cannot be listed or read.
        """
        listed = self.version_objects() if numbers is None else dict.fromkeys(numbers)
        newest = max(listed, default=0)
        unreadable = []
        for number in sorted(listed, reverse=True):
            try:
                return self.read_version(number, listed[number]), newest, unreadable
            except FormatError as exc:
                unreadable.append(f"manifest version {number} is unreadable: {exc}")
        return None, newest, unreadable

    def read_version(self, number: int, listed: ObjectInfo | None = None) -> Manifest:
        """Read and validate version ``number``: the newest checkpoint at or below it, and the
        records after it that lead to it, fetched in parallel.

        Args:
            number: The version.
            listed: Its object as a listing described it, if listed: an oversized one is
                refused unread, and one identical to the last version read (same size,
                modification time, ETag or version id, status-change time) is not read again.

        Raises:
            FormatError: The version, or one it builds on, is oversized, corrupt or missing.
            StorageError: It cannot be read.
        """
        key = version_key(number)
        if listed is not None and listed.size > MAX_MANIFEST_BYTES:
            raise FormatError(
                f"{listed.size} bytes is too large for a manifest", source=self.store.uri_of(key)
            )
        identity = None
        if listed is not None:
            identity = (number, listed.size, listed.mtime_ns, listed.etag, listed.version)
            identity += (listed.ctime_ns,)
            if self._last_read is not None and self._last_read[0] == identity:
                return self._last_read[1]
        previous = self._last_read[1] if self._last_read is not None else None
        # Dropped first: the version decoded next would otherwise live beside it.
        self._last_read = None
        manifest = self._reconstruct(number, previous)
        if identity is not None:
            self._last_read = (identity, manifest)
        return manifest

    def _reconstruct(self, number: int, previous: Manifest | None) -> Manifest:
        """Version ``number`` from its records, down to a checkpoint, a record on no base, or
        ``previous`` (the version read last, when the chain reaches it)."""
        floor = max((n for n in self._checkpoints if n <= number), default=0)
        if floor == number:
            checkpoint = self._read_checkpoint(number)
            if checkpoint is not None:
                return checkpoint
            floor = max((n for n in self._checkpoints if n < number), default=0)
        listed = self._records
        wanted = [
            n
            for n in range(floor + 1, number + 1)
            if n == number or (listed is not None and n in listed)
        ]
        if previous is not None and previous.version in wanted:
            wanted = [n for n in wanted if n > previous.version]
        if floor and (previous is None or previous.version < floor):
            # The chain of records nearly always ends on the newest checkpoint below them:
            # read it beside the records rather than after them (one round trip fewer).
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=1) as pool:
                floor_checkpoint = pool.submit(self._read_checkpoint, floor)
                records = self._fetch_records(wanted)
                checkpoints = {floor: floor_checkpoint.result()}
        else:
            records, checkpoints = self._fetch_records(wanted), {}
        chain: list[Record] = []
        objects: set[str] = set()
        current = number
        base: Manifest | None = None
        while True:
            record = records.get(current)
            if record is None:
                record = self._fetch_records([current])[current]
            if isinstance(record, BaseException):
                if current == number:
                    raise record
                raise FormatError(
                    f"version {number} builds on version {current}, which does not read: {record}",
                    field="base",
                    source=self.store.uri_of(version_key(number)),
                )
            chain.append(record)
            objects.add(version_key(current))
            if record.base == 0:
                break
            if previous is not None and previous.version == record.base:
                base = previous
                objects |= previous.objects
                break
            if record.base in checkpoints:
                base = checkpoints.pop(record.base)
            else:
                base = self._read_checkpoint(record.base)
            if base is not None:
                objects |= base.objects
                break
            current = record.base
        manifest = base
        for record in reversed(chain):
            manifest = record.apply(manifest)
        damaged = (base.damaged if base is not None else ()) + tuple(
            line for record in reversed(chain) for line in record.damaged
        )
        legacy = chain[-1].base == 0 and chain[-1].format_version == 1
        replay = (base.replay if base is not None else 0) + len(chain)
        return dataclasses.replace(
            manifest,
            damaged=damaged,
            objects=frozenset(objects),
            replay=-1 if legacy or (base is not None and base.replay < 0) else replay,
        )

    def _fetch_records(self, numbers: Sequence[int]) -> dict[int, Record | BaseException]:
        """The records of ``numbers``, read in parallel; an unreadable one is its error."""
        from concurrent.futures import ThreadPoolExecutor

        def read(number: int) -> Record | BaseException:
            key = version_key(number)
            try:
                return decode_record(self.store.get(key), self.store.uri_of(key), number)
            except FormatError as exc:
                return exc
            except StorageError as exc:
                if self._records is not None and number not in self._records:
                    return FormatError("is missing", source=self.store.uri_of(key))
                return exc

        if len(numbers) <= 1:
            return {number: read(number) for number in numbers}
        with ThreadPoolExecutor(min(16, len(numbers))) as pool:
            return dict(zip(numbers, pool.map(read, numbers), strict=True))

    def _read_checkpoint(self, number: int) -> Manifest | None:
        """The checkpoint of version ``number`` that reads, or None (none listed or none reads:
        the records below it are read instead)."""
        for info in self._checkpoints.get(number, []):
            if info.size > MAX_MANIFEST_BYTES:
                continue
            try:
                data = self.store.get(info.key)
                manifest = decode_checkpoint(data, self.store.uri_of(info.key), info.key)
            except (FormatError, StorageError):
                continue
            return dataclasses.replace(manifest, objects=frozenset((info.key,)))
        return None

    def read_segment(
        self, segment: SegmentEntry, index_numbers: Iterable[int], indexes: Sequence[IndexSpec]
    ) -> Sidecar:
        """Open ``segment``, fetching the parts of ``index_numbers`` with one coalesced read.

        The part of any other index is fetched only if one of its payloads is read later.

        Args:
            segment: Its manifest entry.
            index_numbers: The indexes to fetch now.
            indexes: The manifest's index definitions; every part must hold its own.

        Returns:
            A sidecar of the segment's files and all its indexes; each payload is verified
            against its checksum when it is read.

        Raises:
            FormatError: A part is truncated or its header fails its checksum.
            StorageError: The segment cannot be read.
        """
        return self.segment_view(segment, indexes).open(list(index_numbers) or [0])

    def segment_view(self, segment: SegmentEntry, indexes: Sequence[IndexSpec]) -> SegmentView:
        """A view of ``segment`` that reads nothing yet: :meth:`SegmentView.open` fetches the
        parts it is asked for (coalesced), and keeps them, verified, for later opens."""
        reader = _RangeReader(self.store, segment.key, segment.size, [])
        return SegmentView(reader, segment, tuple(indexes), self.store.uri_of(segment.key))

    # -- writing ---------------------------------------------------------------------------

    def write_segment(
        self, sidecar: Sidecar, identities: Mapping[str, Identity], schema: str = ""
    ) -> SegmentEntry:
        """Write ``sidecar`` as a new segment object (never overwriting one).

        Args:
            sidecar: The files' indexes, as a sidecar.
            identities: Each file's identity, as the manifest records it.
            schema: The files' unified Arrow schema (see :attr:`SegmentEntry.schema`).

        Returns:
            Its manifest entry, to be committed with :meth:`commit`.
        """
        from bloomskip.dataset.index.plain_part import encode_part, part_header_length

        directory = encode_directory(sidecar, identities)
        parts = [encode_part(_granules_of(sidecar, n)) for n in range(len(sidecar.indexes))]
        heads = [part_header_length(part) for part in parts]
        # Every part's header right after the directory, so that a query reads the directory
        # and the headers of the indexes it uses in one range; then the parts' slices.
        header_at = len(directory)
        slices_at = header_at + sum(heads)
        spans = []
        for part, head in zip(parts, heads, strict=True):
            spans.append((header_at, len(part), head, slices_at))
            header_at += head
            slices_at += len(part) - head
        data = b"".join(
            [directory]
            + [part[:head] for part, head in zip(parts, heads, strict=True)]
            + [part[head:] for part, head in zip(parts, heads, strict=True)]
        )
        del parts
        for _ in range(8):  # 64 random bits: a second attempt is already one in 2**64
            key = f"{SEGMENTS}{time.time_ns():x}-{secrets.token_hex(8)}{SEGMENT_SUFFIX}"
            if self.store.put_if_absent(key, data):
                break
        else:
            raise StorageError(
                f"{self.store.uri}: every new segment name was taken; the store does not honour "
                "create-only writes"
            )
        files = {path: dict(identities[path]) for path in sidecar.files}
        return SegmentEntry(key, len(data), tuple(spans), files, schema, (0, len(directory)))

    def commit(self, change: Change) -> Manifest:
        """Apply ``change`` to the latest version and create the next one; retry on a race.

        Returns:
            The version this call created.

        Raises:
            _DefinitionsChanged: Another build changed the index definitions meanwhile (see
                :meth:`Change.apply`).
            CommitConflictError: The location stayed contended for :data:`COMMIT_ATTEMPTS`
                attempts.
            StorageError: The location cannot be written.
        """
        for attempt in range(COMMIT_ATTEMPTS):
            base, newest, _ = self.latest_readable()
            manifest = change.apply(base)
            if manifest.version <= newest:
                # Newer versions than ``base`` do not read: the new one supersedes them.
                manifest = dataclasses.replace(manifest, version=newest + 1)
            record = encode_record(record_of(manifest, base))
            if self.store.put_if_absent(version_key(manifest.version), record):
                self._check_committed(change)
                return self._after_commit(manifest, base, len(record))
            time.sleep(random.uniform(0, min(1.0, 0.01 * 2**attempt)))
        raise CommitConflictError(
            f"{self.store.uri}: gave up committing after {COMMIT_ATTEMPTS} concurrent commits"
        )

    def _after_commit(self, manifest: Manifest, base: Manifest | None, size: int) -> Manifest:
        """Write a checkpoint of the version just committed when readers would otherwise
        replay many records, a large one, a version-1 manifest or damaged entries; returns
        the version as a reader will see it."""
        replay = 1 if base is None else base.replay + 1
        due = (
            replay >= CHECKPOINT_INTERVAL
            or size >= CHECKPOINT_RECORD_BYTES
            or (base is not None and (base.replay < 0 or base.damaged))
        )
        if due:
            try:
                data = encode_checkpoint(manifest)
            except ValueError:
                pass  # an identity a checkpoint cannot hold: the records stay readable
            else:
                # Two writers of one checkpoint write the same bytes under the same name.
                self.store.put_if_absent(checkpoint_key(manifest.version, data), data)
                replay = 0
        return dataclasses.replace(manifest, replay=replay)

    def _check_committed(self, change: Change) -> None:
        """Fail loudly if a vacuum deleted a segment of ``change`` before it was committed.

        Such a version is still safe to read (the files of a missing segment are scanned, and
        the next build indexes them again), but the build's work is lost, so it must not report
        success.
        """
        if not change.added:
            return
        present = {info.key for info in self.store.list(SEGMENTS)}
        lost = [segment.key for segment in change.added if segment.key not in present]
        if lost:
            raise StorageError(
                f"{self.store.uri}: segment {lost[0]} was deleted (by a vacuum with a minimum age "
                "shorter than this build) before the build committed; its files are scanned "
                "until the next build indexes them again"
            )

    def vacuum(self, keep_versions: int = 10, min_age_seconds: float = 3600.0) -> list[str]:
        """Delete old versions and the segments no kept version references.

        The newest ``keep_versions`` versions stay readable: each keeps the objects it is
        read from (its checkpoint and the records after it) and every segment it names. So
        does every object younger than ``min_age_seconds``: a segment an unfinished build has
        written but not yet committed is young, and a reader that listed the versions a
        moment ago still finds the ones it chose. A kept version that does not read
        references nothing that can be known; the newest readable version is then kept too
        (however old), with every segment it names, since the next build starts from it.

        Returns:
            The keys deleted.
        """
        now_ns = time.time_ns()
        listed = self.store.list("")
        age_ok = {info.key for info in listed if now_ns - info.mtime_ns >= min_age_seconds * 1e9}
        numbers = self.version_numbers()
        kept_numbers = set(numbers[-keep_versions:] if keep_versions > 0 else numbers[-1:])
        readable = self._readable(numbers, kept_numbers)
        if readable and len(readable[-1].objects) > 1:
            # The oldest kept version becomes a checkpoint, so the records before it can go.
            oldest = readable[-1]
            try:
                data = encode_checkpoint(oldest)
            except ValueError:
                pass
            else:
                self.store.put_if_absent(checkpoint_key(oldest.version, data), data)
                self.version_objects()
                readable = self._readable(numbers, kept_numbers)
        needed = {version_key(number) for number in kept_numbers}
        referenced: set[str] = set()
        for manifest in readable:
            needed |= manifest.objects
            referenced.update(segment.key for segment in manifest.segments)
        doomed = [
            info.key
            for info in listed
            if (version_number(info.key) is not None or checkpoint_number(info.key) is not None)
            and info.key not in needed
            and info.key in age_ok
        ]
        doomed += [
            info.key
            for info in listed
            if is_segment_key(info.key) and info.key not in referenced and info.key in age_ok
        ]
        for key in doomed:
            self.store.delete(key)
        return doomed

    def _readable(self, numbers: list[int], kept: set[int]) -> list[Manifest]:
        """The kept versions that read, newest first, and the newest readable one if none of
        them reads (adding it to ``kept``)."""
        found = []
        for number in reversed(numbers):
            if number not in kept and found:
                break
            try:
                found.append(self.read_version(number))
            except FormatError:
                continue
            kept.add(number)
        return found

    def drop(self) -> int:
        """Delete every version, checkpoint and segment of the index; returns how many
        objects went."""
        # Only what bloomskip writes: other objects under the location are not ours to delete.
        keys = [
            info.key
            for info in self.store.list("")
            if version_number(info.key) is not None
            or checkpoint_number(info.key) is not None
            or is_segment_key(info.key)
        ]
        self._last_read = None
        # Versions first: once none is left, no reader can see a half-deleted index.
        for key in sorted(keys, key=lambda key: not key.startswith(VERSIONS)):
            self.store.delete(key)
        return len(keys)


def version_key(number: int) -> str:
    """The key of manifest version ``number``.

    Example:
        >>> version_key(12)
        'versions/00000000000000000012.json'
    """
    return f"{VERSIONS}{number:0{_VERSION_DIGITS}d}.json"


_SEGMENT_KEY = re.compile(r"segments/[0-9a-f]+-[0-9a-f]{16}\.bsk")


def is_segment_key(key: str) -> bool:
    """Whether ``key`` is a segment bloomskip wrote (``segments/<hex>-<16 hex>.bsk``).

    Example:
        >>> is_segment_key("segments/18d3c0a5-9f1e2d3c4b5a6978.bsk"), is_segment_key("segments/x")
        (True, False)
    """
    return _SEGMENT_KEY.fullmatch(key) is not None


def version_number(key: str) -> int | None:
    """The version a key names (``versions/<20 digits>.json``), or None for any other key.

    Example:
        >>> version_number("versions/00000000000000000012.json"), version_number("versions/x")
        (12, None)
    """
    if not key.startswith(VERSIONS):
        return None
    stem, dot, suffix = key[len(VERSIONS) :].partition(".")
    if dot and suffix == "json" and len(stem) == _VERSION_DIGITS and stem.isdigit():
        return int(stem)
    return None


def _granules_of(sidecar: Sidecar, number: int):
    """Index ``number``'s granules over the sidecar's files, in its file order."""
    import numpy as np

    from bloomskip.clickhouse.ddl import parse_index_definition
    from bloomskip.clickhouse.index import SkipIndex

    spec = sidecar.indexes[number]
    entries = list(sidecar.files.values())
    payload = b"".join(bytes(entry.payloads[number]) for entry in entries)
    rows = np.concatenate(
        [np.zeros(0, np.int64)] + [np.asarray(entry.granule_rows, np.int64) for entry in entries]
    )
    definition = parse_index_definition(spec.definition)
    index = SkipIndex.from_bytes(definition, payload, rows[rows > 0], dict(spec.column_types))
    return index.granules


DIRECTORY_MAGIC = b"BSKDIR01"
#: A directory that inflates past this is refused (10⁶ files take far less).
MAX_DIRECTORY_BYTES = 1 << 30


def encode_directory(sidecar: Sidecar, identities: Mapping[str, Identity]) -> bytes:
    """A format-2 segment's file directory: each file, in the parts' granule order, with its
    format, the identity it was indexed at and its granules' rows (docs/sliced-layout.md).

    The footer hash is kept only where the manifest's identity is that hash (a listing without
    ETags): elsewhere the size and modification time tell the segment's files apart.
    """
    import zlib

    rows = []
    for path, entry in sidecar.files.items():
        etag = identities[path].get("etag")
        footer = (
            entry.identity.footer_sha256
            if isinstance(etag, str) and etag.startswith("footer-")
            else ""
        )
        rows.append(
            [path, entry.format, entry.identity.size, entry.identity.mtime_ns, footer,
             [int(count) for count in entry.granule_rows]]
        )  # fmt: skip
    document = {"granule": sidecar.granule, "files": rows}
    body = zlib.compress(json.dumps(document, separators=(",", ":")).encode("utf-8"), 6)
    return DIRECTORY_MAGIC + hashlib.sha256(body).digest() + body


def decode_directory(data: bytes, source: str) -> tuple[str | int, dict[str, FileEntry]]:
    """Parse and validate a segment's file directory (see :func:`encode_directory`).

    Returns:
        ``(granule, entries)``: the entries, in the parts' order, without payloads.

    Raises:
        FormatError: A wrong magic, a SHA-256 mismatch, a directory that inflates too far, or
            a field of the wrong kind (the message names it).
    """
    import zlib

    from bloomskip.dataset.index.sidecar import FILE_FORMATS
    from bloomskip.dataset.listing.files import FileIdentity

    check = _Checker(source)
    check.that(data[:8] == DIRECTORY_MAGIC, "directory", "does not start with its magic")
    check.that(
        len(data) >= 40 and hashlib.sha256(data[40:]).digest() == data[8:40],
        "directory",
        "fails its SHA-256: it is damaged",
    )
    inflater = zlib.decompressobj()
    try:
        text = inflater.decompress(data[40:], MAX_DIRECTORY_BYTES)
        document = json.loads(text)
    except (zlib.error, ValueError, RecursionError) as exc:
        raise FormatError(f"directory is not readable: {exc}", field="directory",
                          source=source) from exc  # fmt: skip
    check.that(not inflater.unconsumed_tail, "directory", "inflates past 1 GiB")
    check.that(isinstance(document, dict), "directory", "is not a JSON object")
    granule = document.get("granule")
    check.that(
        granule == "row-group" or (_is_count(granule) and granule > 0), "directory.granule",
        "is invalid",
    )  # fmt: skip
    files = check.list(document.get("files"), "directory.files")
    entries: dict[str, FileEntry] = {}
    for n, item in enumerate(files):
        where = f"directory.files[{n}]"
        check.that(isinstance(item, list) and len(item) == 6, where, "is not a file entry")
        path, kind, size, mtime_ns, footer, granule_rows = item
        check.that(isinstance(path, str) and path not in entries, where, "has a bad path")
        check.that(kind in FILE_FORMATS, where, "has an unknown format")
        check.that(_is_count(size) and _is_count(mtime_ns), where, "has a bad identity")
        check.that(
            isinstance(footer, str) and (footer == "" or (len(footer) == 64 and _is_hex(footer))),
            where,
            "has a bad footer hash",
        )
        check.that(
            isinstance(granule_rows, list) and all(map(_is_count, granule_rows)),
            where,
            "has bad granule rows",
        )
        identity = FileIdentity(size, mtime_ns, footer)
        entries[path] = FileEntry(path, kind, identity, granule_rows, ())
    return granule, entries


def _is_hex(text: str) -> bool:
    return all(character in "0123456789abcdef" for character in text)


class SegmentView:
    """A segment's per-index parts, decoded when first needed and then kept."""

    def __init__(
        self, reader: _RangeReader, segment: SegmentEntry, indexes: tuple, source: str
    ) -> None:
        self._reader = reader
        self._segment = segment
        self._indexes = indexes
        self._source = source
        self._parts: dict[int, Sidecar] = {}
        # A format-2 segment: its directory, each sliced part probed, each part read whole.
        self._directory: tuple[str | int, dict[str, FileEntry], dict] | None = None
        self._sliced: dict[int, SlicedPart] = {}
        self._whole: dict[int, object] = {}

    def part(self, number: int) -> Sidecar:
        if number not in self._parts:
            start, length = self._segment.index_spans[number]
            self._reader.fetch([(start, length)])  # the whole part, in one request
            if not self._reader.holds(start, length):
                raise FormatError(
                    f"the segment ends inside index part {number} (bytes {start}-"
                    f"{start + length} expected): it is truncated",
                    field=f"index_spans[{number}]",
                    offset=start,
                    source=self._source,
                )
            part = decode_sidecar_from(_Slice(self._reader, start, length), self._source)
            if part.indexes != [self._indexes[number]] or not set(self._segment.files) <= set(
                part.files
            ):
                raise FormatError(
                    f"part {number} does not hold index {number} of the manifest over the "
                    "segment's files",
                    field=f"index_spans[{number}]",
                    offset=start,
                    source=self._source,
                )
            for path, recorded in self._segment.files.items():
                if not _indexed_as(part.files[path].identity, recorded):
                    # Another index's segment over files of the same names: its bits
                    # describe other bytes, and pruning with them would hide rows.
                    raise FormatError(
                        f"it indexed {path} at another identity ({part.files[path].identity}) "
                        f"than the manifest records ({dict(recorded)}): it is not this index's",
                        field=f"index_spans[{number}]",
                        offset=start,
                        source=self._source,
                    )
            self._parts[number] = part
        return self._parts[number]

    @property
    def held_bytes(self) -> int:
        """Bytes of the segment read so far (what keeping this view costs)."""
        return self._reader.held_bytes

    def open(self, numbers: list[int]) -> Sidecar:
        """The segment's files, with the parts of indexes ``numbers`` read (one coalesced
        read of those not held yet) and verified.

        Raises:
            FormatError: A part is truncated, fails its checksum, or is not this index's.
            StorageError: The segment cannot be read.
        """
        if self._segment.directory is not None:
            return self._open_sliced(numbers)
        spans = self._segment.index_spans
        self._reader.fetch(
            [
                spans[number]
                for number in numbers
                if number < len(spans) and number not in self._parts
            ]
        )
        if not self._segment.index_spans or len(self._indexes) != len(self._segment.index_spans):
            raise FormatError(
                f"{len(self._segment.index_spans)} index parts for {len(self._indexes)} indexes",
                field="index_spans",
                source=self._source,
            )
        first = self.part(numbers[0])
        for number in numbers[1:]:
            self.part(number)
        return self._opened(first.granule, first.files, _PartPayloads)

    def _opened(self, granule: str | int, entries: Mapping[str, FileEntry], kind) -> Sidecar:
        """The segment's files as a sidecar whose payloads ``kind`` reads through this view."""
        count = len(self._segment.index_spans)
        files = {
            path: FileEntry(
                entry.path,
                entry.format,
                entry.identity,
                entry.granule_rows,
                kind(self, path, count),
            )  # fmt: skip
            for path, entry in entries.items()
        }
        return Sidecar(granule, list(self._indexes), files)

    def _open_sliced(self, numbers: list[int]) -> Sidecar:
        """:meth:`open` of a format-2 segment: its directory and the headers of the parts of
        ``numbers``, in one coalesced read; no slice is read yet."""
        spans = self._segment.index_spans
        if len(self._indexes) != len(spans):
            raise FormatError(
                f"{len(spans)} index parts for {len(self._indexes)} indexes",
                field="index_spans",
                source=self._source,
            )
        wanted = [(spans[n][0], spans[n][2]) for n in numbers if n < len(spans)]
        # Apart, not coalesced: the bytes between are other indexes' slices.
        self._reader.fetch([self._segment.directory, *wanted], gap=SLICE_GAP)
        granule, entries, _ = self._directory_entries()
        for number in numbers:
            if number < len(spans):
                self.sliced_part(number)
        return self._opened(granule, entries, _SlicedPayloads)

    def _held(self, offset: int, length: int, what: str, field_name: str) -> bytes:
        self._reader.fetch([(offset, length)], gap=SLICE_GAP)
        if not self._reader.holds(offset, length):
            raise FormatError(
                f"the segment ends inside {what} (bytes {offset}-{offset + length} expected): "
                "it is truncated",
                field=field_name,
                offset=offset,
                source=self._source,
            )
        return bytes(self._reader.read(offset, length))

    def _directory_entries(self) -> tuple[str | int, dict[str, FileEntry], dict]:
        """The directory's granule, entries and each file's first granule and granule count
        in the parts (only non-empty granules are in a part)."""
        if self._directory is None:
            offset, length = self._segment.directory
            data = self._held(offset, length, "its directory", "directory")
            granule, entries = decode_directory(data, self._source)
            for path, recorded in self._segment.files.items():
                entry = entries.get(path)
                if entry is None or not _indexed_as(entry.identity, recorded):
                    # Another index's segment over files of the same names: its bits
                    # describe other bytes, and pruning with them would hide rows.
                    found = entry.identity if entry is not None else "nothing"
                    raise FormatError(
                        f"it indexed {path} at another identity ({found}) than the manifest "
                        f"records ({dict(recorded)}): it is not this index's",
                        field="directory",
                        source=self._source,
                    )
            spans, first = {}, 0
            for path, entry in entries.items():
                count = sum(1 for rows in entry.granule_rows if rows > 0)
                spans[path] = (first, count)
                first += count
            self._directory = (granule, entries, spans)
        return self._directory

    def sliced_part(self, number: int) -> SlicedPart:
        """Index ``number``'s sliced part: its header read and checked, no slice yet.

        Raises:
            FormatError: The header is damaged, or not of this index or these files.
        """
        from bloomskip.clickhouse.ddl import parse_index_definition
        from bloomskip.dataset.index.plain_part import part_granules, read_part_header

        if number not in self._sliced:
            offset, length, head, slices_at = self._segment.index_spans[number]
            data = self._held(offset, head, f"index part {number}", f"index_spans[{number}]")
            header = read_part_header(data, self._source, part_size=length)
            _, _, spans = self._directory_entries()
            expected = parse_index_definition(self._indexes[number].definition)
            granules = sum(count for _, count in spans.values())
            if header.definition != expected or header.granule_count != granules:
                raise FormatError(
                    f"part {number} does not hold index {number} of the manifest over the "
                    "segment's granules",
                    field=f"index_spans[{number}]",
                    offset=offset,
                    source=self._source,
                )

            def read_ranges(
                ranges: list[tuple[int, int]], start: int = slices_at - head
            ) -> list[bytes]:
                # The part's slices lie apart from its header: a part offset past the header
                # is that far into the slices.
                moved = [(start + first, size) for first, size in ranges]
                self._reader.fetch(moved, gap=SLICE_GAP)
                return [self._reader.read(first, size) for first, size in moved]

            self._sliced[number] = SlicedPart(
                part_granules(header, self._source), spans, read_ranges,
                functools.partial(self.whole_part, number),
            )  # fmt: skip
        return self._sliced[number]

    def whole_part(self, number: int):
        """Index ``number``'s granules, the whole part read (compaction, fill statistics)."""
        from bloomskip.clickhouse.ddl import parse_index_definition
        from bloomskip.dataset.index.plain_part import decode_part

        if number not in self._whole:
            offset, length, head, slices_at = self._segment.index_spans[number]
            self.sliced_part(number)  # checks the header against the manifest and directory
            name = f"index part {number}"
            data = self._held(offset, head, name, f"index_spans[{number}]") + self._held(
                slices_at, length - head, name, f"index_spans[{number}]"
            )
            definition = parse_index_definition(self._indexes[number].definition)
            self._whole[number] = decode_part(data, definition, self._source)
        return self._whole[number]

    def payload(self, number: int, path: str) -> bytes:
        """One file's granules of index ``number`` as a plain payload (of format 2: the part
        read whole)."""
        if self._segment.directory is None:
            return self.part(number).files[path].payloads[0]
        granules = self.whole_part(number)
        first, count = self._directory_entries()[2][path]
        return b"".join(granules.granule_bytes(j) for j in range(first, first + count))


@dataclass
class SlicedPart:
    """One sliced index part of a segment, ready to probe.

    Attributes:
        granules: Its granules (``plan``, ``fetch``, then probes).
        files: Each file's first granule in the part and its count.
        read_ranges: Reads ranges of the part (offsets relative to it), few and coalesced.
        whole: The part's plain granules, read whole.
    """

    granules: object
    files: dict[str, tuple[int, int]]
    read_ranges: object
    whole: object


class _PartPayloads(Sequence):
    """A file's payload of each index, read (and verified) from that index's part."""

    def __init__(self, view: SegmentView, path: str, count: int) -> None:
        self._view = view
        self._path = path
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, number: int):
        if not 0 <= number < self._count:
            raise IndexError(number)
        return self._view.payload(number, self._path)


class _SlicedPayloads(_PartPayloads):
    """A file's payloads in a format-2 segment: probed in place through :meth:`sliced_part`,
    or read whole on access."""

    def sliced_part(self, number: int) -> tuple[SlicedPart, int, int]:
        """``(part, first granule, granule count)`` of this file in index ``number``."""
        part = self._view.sliced_part(number)
        first, count = part.files[self._path]
        return part, first, count


class _Slice:
    """``size()``/``read()`` over ``length`` bytes at ``start`` of another reader."""

    def __init__(self, reader, start: int, length: int) -> None:
        self._reader, self._start, self._length = reader, start, length

    def size(self) -> int:
        return self._length

    def read(self, offset: int, length: int) -> bytes:
        length = max(0, min(length, self._length - offset))
        return self._reader.read(self._start + offset, length)


class _RangeReader:
    """``size()``/``read()`` over a segment, served from ranges fetched in one call."""

    def __init__(self, store: Store, key: str, size: int, ranges: list[tuple[int, int]]) -> None:
        self._store = store
        self._key = key
        self._size = size
        self._chunks: list = []
        self.fetch(ranges)

    def fetch(self, ranges: list[tuple[int, int]], gap: int = COALESCE_GAP) -> None:
        """Read the ``ranges`` not held yet, coalesced across gaps up to ``gap`` bytes, with
        as few requests as they allow."""
        wanted = [
            (start, min(length, self._size - start))
            for start, length in ranges
            if start < self._size and not self.holds(start, min(length, self._size - start))
        ]
        merged = coalesce(wanted, gap)
        if merged:
            chunks = self._store.get_ranges(self._key, merged, gap)
            # Recorded at the length that came back: a truncated object holds less.
            self._chunks += [
                ((start, len(chunk)), chunk)
                for (start, _), chunk in zip(merged, chunks, strict=True)
            ]

    @property
    def held_bytes(self) -> int:
        """Bytes read so far."""
        return sum(span for (_, span), _ in self._chunks)

    def holds(self, offset: int, length: int) -> bool:
        """Whether ``length`` bytes at ``offset`` have been read."""
        return any(
            start <= offset and offset + length <= start + span for (start, span), _ in self._chunks
        )

    def size(self) -> int:
        return self._size

    def read(self, offset: int, length: int) -> bytes:
        for (start, span), chunk in self._chunks:
            if start <= offset and offset + length <= start + span:
                return chunk[offset - start : offset - start + length]
        (chunk,) = self._store.get_ranges(self._key, [(offset, length)])
        self._chunks.append(((offset, len(chunk)), chunk))
        return chunk


# -- the manifest's JSON -------------------------------------------------------------------


def encode_manifest(manifest: Manifest) -> bytes:
    """The JSON bytes of ``manifest`` as one record on no base (a whole manifest).

    Example:
        >>> encode_manifest(Manifest(1, "row-group", (), ()))[:40]
        b'{"format":"bloomskip-manifest","format_v'
    """
    return encode_record(record_of(manifest, None))


def encode_record(record: Record) -> bytes:
    """The JSON bytes of ``record`` (format version 2, docs/segments.md)."""
    segments = []
    for segment in record.added:
        entry = {
            "key": segment.key,
            "size": segment.size,
            "index_spans": [list(span) for span in segment.index_spans],
            "files": {path: dict(identity) for path, identity in segment.files.items()},
            "schema": segment.schema,
        }
        if segment.directory is not None:
            entry["directory"] = list(segment.directory)
        entry["checksum"] = _checksum(entry, "segments[]", "")
        segments.append(entry)
    header = {
        "format": MANIFEST_FORMAT,
        "format_version": MANIFEST_VERSION,
        "version": record.version,
        "base": record.base,
        "granule": record.granule,
        "indexes": [
            {"definition": spec.definition, "column_types": dict(spec.column_types)}
            for spec in record.indexes
        ],
        "drop_segments": sorted(record.dropped_segments),
        "drop_files": sorted(record.dropped_files),
    }
    if record.table is not None:
        header["table"] = dict(record.table)
    document = {**header, "segments": segments, "checksum": _checksum(header, "manifest", "")}
    return json.dumps(document, separators=(",", ":"), sort_keys=False).encode("utf-8")


def _checksum(item: dict, where: str, source: str) -> str:
    """The SHA-256 (hex) of ``item``'s canonical JSON, leaving out its own ``checksum``.

    The canonical JSON is ``json.dumps(body, separators=(",", ":"), sort_keys=True)``, hashed
    in pieces (see :func:`_canonical_pieces`) so that a segment of 10⁵ files never exists as
    one string: a manifest costs a small constant times its own size in memory.
    """
    body = {name: value for name, value in item.items() if name != "checksum"}
    digest = hashlib.sha256()
    try:
        for piece in _canonical_pieces(body):
            digest.update(piece.encode("utf-8"))
    except (ValueError, TypeError, RecursionError) as exc:
        raise FormatError(
            f"{where} cannot be checksummed: {exc}", field=where, source=source
        ) from exc
    return digest.hexdigest()


#: Entries of one object serialized at a time when hashing a large one.
_CANONICAL_BATCH = 4096


def _canonical_pieces(value: object) -> Iterable[str]:
    """``json.dumps(value, separators=(",", ":"), sort_keys=True)``, as consecutive pieces.

    A large object is serialized a batch of sorted keys at a time, a small one key by key:
    the pieces join into exactly the one-shot text.

    Example:
        >>> document = {"b": [1, {"é": None}], "a": {str(n): {"n": n} for n in range(5000)}}
        >>> "".join(_canonical_pieces(document)) == json.dumps(
        ...     document, separators=(",", ":"), sort_keys=True
        ... )
        True
    """
    if not isinstance(value, dict):
        yield json.dumps(value, separators=(",", ":"), sort_keys=True)
        return
    names = sorted(value)
    yield "{"
    if len(names) > _CANONICAL_BATCH:
        for start in range(0, len(names), _CANONICAL_BATCH):
            batch = {name: value[name] for name in names[start : start + _CANONICAL_BATCH]}
            yield ("," if start else "") + json.dumps(batch, separators=(",", ":"), sort_keys=True)[
                1:-1
            ]
    else:
        for position, name in enumerate(names):
            yield ("," if position else "") + json.dumps(name) + ":"
            yield from _canonical_pieces(value[name])
    yield "}"


def decode_manifest(data: bytes, source: str, number: int | None = None) -> Manifest:
    """Parse and validate a whole manifest: a version-1 object, or a record on no base.

    Args:
        data: The bytes of a ``versions/….json`` object.
        source: Its URI, for messages.
        number: The version its key says it is; it must match the one inside.

    Raises:
        FormatError: Not a bloomskip manifest, an unknown format version, a record that
            changes another version, or a field that is missing or of the wrong kind (the
            message names it).
    """
    record = decode_record(data, source, number)
    if record.base:
        raise FormatError(
            f"is a commit record on version {record.base}, not a whole manifest",
            field="base",
            source=source,
        )
    return record.apply(None)


def decode_record(data: bytes, source: str, number: int | None = None) -> Record:
    """Parse and validate one ``versions/….json`` object: a record (format version 2) or a
    whole manifest (format version 1, read as a record on no base).

    Args:
        data: Its bytes.
        source: Its URI, for messages.
        number: The version its key says it is; it must match the one inside.

    Raises:
        FormatError: Oversized, not JSON, not a bloomskip manifest, an unknown format version,
            a record without its checksum or failing it, or a field that is missing or of the
            wrong kind (the message names it).
    """
    if len(data) > MAX_MANIFEST_BYTES:
        raise FormatError(f"{len(data)} bytes is too large for a manifest", source=source)
    try:
        text = data.decode("utf-8")
        # The bytes are no longer needed: a caller that passes them unnamed gets them freed
        # before the parse, which is the peak.
        del data
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:  # bad UTF-8 or JSON, an int of 4,300+ digits
        raise FormatError(f"not JSON: {exc}", field="manifest", offset=0, source=source) from exc
    del text
    check = _Checker(source)
    check.that(isinstance(document, dict), "manifest", "is not a JSON object")
    check.that(document.get("format") == MANIFEST_FORMAT, "format", "is not a bloomskip manifest")
    format_version = document.get("format_version")
    check.that(
        format_version in READABLE_MANIFEST_VERSIONS and not isinstance(format_version, bool),
        "format_version",
        f"is {format_version!r}; this bloomskip reads {READABLE_MANIFEST_VERSIONS}",
    )
    # A version written with checksums has one over its header (every field but the
    # segments) and one in each segment entry; an older version-1 object has none, and is
    # read as is.
    sealed = "checksum" in document
    check.that(sealed or format_version == 1, "checksum", "is missing")
    if sealed:
        header = {name: value for name, value in document.items() if name != "segments"}
        check.that(
            document["checksum"] == _checksum(header, "manifest", source),
            "checksum",
            "does not match the manifest's header: it is damaged",
        )
    version = check.count(document.get("version"), "version")
    check.that(number is None or version == number, "version", f"differs from its key ({number})")
    base = 0
    dropped_segments: frozenset[str] = frozenset()
    dropped_files: frozenset[str] = frozenset()
    if format_version == 2:
        base = check.count(document.get("base"), "base")
        check.that(base < version, "base", f"is not below the version ({version})")
        dropped_segments = _names(document.get("drop_segments"), "drop_segments", check)
        dropped_files = _names(document.get("drop_files"), "drop_files", check)
        check.that(
            base or not (dropped_segments or dropped_files),
            "drop_files",
            "drops from no base",
        )
    granule = document.get("granule")
    check.that(
        granule == "row-group" or (_is_count(granule) and granule > 0), "granule", "is invalid"
    )
    indexes = check.list(document.get("indexes"), "indexes")
    specs = tuple(_index_spec(item, f"indexes[{n}]", check) for n, item in enumerate(indexes))
    segments = check.list(document.get("segments"), "segments")
    entries, damaged = [], []
    for n, item in enumerate(segments):
        where = f"segments[{n}]"
        entry = _segment(item, where, len(specs), check)
        if sealed and item.get("checksum") != _checksum(item, where, source):
            problem = "it fails its checksum"
        else:
            problem = _schema_problem(entry.schema, specs)
        if problem is None:
            entries.append(entry)
            continue
        # Not trusted, and its files are told apart by nothing else: they are scanned, and
        # the next build (which no longer finds them covered) indexes them again.
        damaged.append(
            f"{source}: {where} is damaged ({problem}); its files are scanned until the next "
            "build indexes them again"
        )
    seen: set[str] = set()
    for entry in entries:
        overlap = seen.intersection(entry.files)
        check.that(not overlap, "segments", f"cover {sorted(overlap)[:1]} twice")
        seen.update(entry.files)
    check.that(
        len({entry.key for entry in entries}) == len(entries), "segments", "name a key twice"
    )
    table = _table_record(document.get("table"), check)
    return Record(
        version,
        base,
        granule,
        specs,
        tuple(entries),
        dropped_segments,
        dropped_files,
        table,
        tuple(damaged),
        format_version,
    )


def _names(item: object, field_name: str, check: _Checker) -> frozenset[str]:
    check.that(
        isinstance(item, list) and all(isinstance(name, str) for name in item),
        field_name,
        "is not a list of names",
    )
    return frozenset(item)  # type: ignore[arg-type]


# -- checkpoints -----------------------------------------------------------------------------

_CHECKPOINT_KEY = re.compile(r"versions/(\d{20})\.checkpoint\.([0-9a-f]{64})\.parquet")


def checkpoint_key(number: int, data: bytes) -> str:
    """The key of a checkpoint of version ``number`` holding ``data``: its SHA-256 is in
    the name, so a reader verifies the bytes it gets against the key it listed.

    Example:
        >>> checkpoint_key(20, b"")[:50]
        'versions/00000000000000000020.checkpoint.e3b0c4429'
    """
    digest = hashlib.sha256(data).hexdigest()
    return f"{VERSIONS}{number:0{_VERSION_DIGITS}d}.checkpoint.{digest}.parquet"


def checkpoint_number(key: str) -> int | None:
    """The version a checkpoint key holds, or None for any other key.

    Example:
        >>> checkpoint_number(checkpoint_key(7, b"x")), checkpoint_number(version_key(7))
        (7, None)
    """
    match = _CHECKPOINT_KEY.fullmatch(key)
    return int(match.group(1)) if match else None


def encode_checkpoint(manifest: Manifest) -> bytes:
    """``manifest`` as a checkpoint: a Parquet file of one row per file (its segment's number,
    its path and its identity's fields), whose key-value metadata ``bloomskip`` holds the
    definitions and the segments (docs/segments.md, "Checkpoints").

    Raises:
        ValueError: An identity holds a field or a value type a checkpoint cannot hold.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    numbers: list[int] = []
    paths: list[str] = []
    columns: dict[str, list] = {name: [] for name, _ in IDENTITY_FIELDS}
    known = {name for name, _ in IDENTITY_FIELDS}
    for number, segment in enumerate(manifest.segments):
        for path, identity in segment.files.items():
            if not identity.keys() <= known:
                raise ValueError(f"identity fields {sorted(identity.keys() - known)} of {path}")
            numbers.append(number)
            paths.append(path)
            for name, values in columns.items():
                values.append(identity.get(name))
    header = {
        "format": CHECKPOINT_FORMAT,
        "format_version": CHECKPOINT_VERSION,
        "version": manifest.version,
        "granule": manifest.granule,
        "indexes": [
            {"definition": spec.definition, "column_types": dict(spec.column_types)}
            for spec in manifest.indexes
        ],
        "segments": [
            {
                "key": segment.key,
                "size": segment.size,
                "index_spans": [list(span) for span in segment.index_spans],
                "schema": segment.schema,
                "files": len(segment.files),
                **({"directory": list(segment.directory)} if segment.directory else {}),
            }
            for segment in manifest.segments
        ],
    }
    if manifest.table is not None:
        header["table"] = dict(manifest.table)
    arrays = {"segment": pa.array(numbers, pa.int32()), "path": pa.array(paths, pa.string())}
    try:
        for name, kind in IDENTITY_FIELDS:
            arrays[name] = pa.array(columns[name], pa.int64() if kind is int else pa.string())
    except (pa.ArrowException, TypeError) as exc:
        raise ValueError(f"identity field {name}: {exc}") from exc
    table = pa.table(arrays).replace_schema_metadata(
        {"bloomskip": json.dumps(header, separators=(",", ":"))}
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().to_pybytes()


def decode_checkpoint(data: bytes, source: str, key: str) -> Manifest:
    """Parse and validate a checkpoint (see :func:`encode_checkpoint`).

    Args:
        data: Its bytes.
        source: Its URI, for messages.
        key: Its key: the bytes must have the SHA-256 the key names.

    Raises:
        FormatError: Oversized, damaged (the digest differs), not Parquet, or a field that is
            missing, of the wrong kind or inconsistent (the message names it).
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    check = _Checker(source)
    check.that(len(data) <= MAX_MANIFEST_BYTES, "checkpoint", "is too large")
    match = _CHECKPOINT_KEY.fullmatch(key)
    check.that(match is not None, "key", "is not a checkpoint key")
    check.that(
        hashlib.sha256(data).hexdigest() == match.group(2),
        "checkpoint",
        "does not have the SHA-256 its name states: it is damaged",
    )
    try:
        # ParquetFile rather than read_table: no pyarrow.dataset (and pandas) to import.
        table = pq.ParquetFile(pa.BufferReader(data)).read()
        header = json.loads((table.schema.metadata or {})[b"bloomskip"])
    except (pa.ArrowException, OSError, KeyError, ValueError, RecursionError) as exc:
        raise FormatError(f"not a checkpoint: {exc}", field="checkpoint", source=source) from exc
    check.that(isinstance(header, dict), "bloomskip", "is not a JSON object")
    check.that(header.get("format") == CHECKPOINT_FORMAT, "format", "is not a checkpoint")
    check.that(
        header.get("format_version") == CHECKPOINT_VERSION,
        "format_version",
        f"is {header.get('format_version')!r}; this bloomskip reads {CHECKPOINT_VERSION}",
    )
    version = check.count(header.get("version"), "version")
    check.that(version == int(match.group(1)), "version", "differs from its key")
    granule = header.get("granule")
    check.that(
        granule == "row-group" or (_is_count(granule) and granule > 0), "granule", "is invalid"
    )
    indexes = check.list(header.get("indexes"), "indexes")
    specs = tuple(_index_spec(item, f"indexes[{n}]", check) for n, item in enumerate(indexes))
    expected = {"segment": pa.int32(), "path": pa.string()}
    expected.update(
        (name, pa.int64() if kind is int else pa.string()) for name, kind in IDENTITY_FIELDS
    )
    for name, kind in expected.items():
        check.that(
            name in table.column_names and table.schema.field(name).type == kind,
            name,
            f"is not a column of {kind}",
        )
    rows = table.num_rows
    numbers = table.column("segment")
    items = check.list(header.get("segments"), "segments")
    counts = [0] * len(items)
    if rows:
        check.that(
            numbers.null_count == 0
            and pc.min(numbers).as_py() >= 0
            and pc.max(numbers).as_py() < len(items),
            "segment",
            "names no segment",
        )
        check.that(table.column("path").null_count == 0, "path", "is missing")
        check.that(table.column("size").null_count == 0, "size", "is missing")
        check.that(pc.min(table.column("size")).as_py() >= 0, "size", "is negative")
        told = pc.or_(pc.is_valid(table.column("etag")), pc.is_valid(table.column("ctime_ns")))
        check.that(pc.all(told).as_py(), "etag", "nor ctime_ns tells a file apart")
        for name in ("mtime_ns", "ctime_ns"):
            least = pc.min(table.column(name)).as_py()
            check.that(least is None or least >= 0, name, "is negative")
        for item in pc.value_counts(numbers).to_pylist():
            counts[item["values"]] = item["counts"]
    paths = table.column("path").to_pylist()
    check.that(len(set(paths)) == rows, "path", "names a file twice")
    values = {name: table.column(name).to_pylist() for name, _ in IDENTITY_FIELDS}
    files: list[dict[str, dict]] = [{} for _ in items]
    for row, (number, path) in enumerate(zip(numbers.to_pylist(), paths, strict=True)):
        files[number][path] = {
            name: column[row] for name, column in values.items() if column[row] is not None
        }
    segments, damaged = [], []
    for n, item in enumerate(items):
        where = f"segments[{n}]"
        check.that(isinstance(item, dict), where, "is not an object")
        check.that(item.get("files") == counts[n] and counts[n] > 0, f"{where}.files",
                   "does not count its rows")  # fmt: skip
        entry = _segment({**item, "files": files[n]}, where, len(specs), check)
        problem = _schema_problem(entry.schema, specs)
        if problem is not None:
            damaged.append(
                f"{source}: {where} is damaged ({problem}); its files are scanned until the "
                "next build indexes them again"
            )
            continue
        segments.append(entry)
    check.that(len({entry.key for entry in segments}) == len(segments), "segments",
               "name a key twice")  # fmt: skip
    table_record = _table_record(header.get("table"), check)
    return Manifest(version, granule, specs, tuple(segments), table_record, tuple(damaged))


def decode_schema(text: str):
    """A segment's schema (see :attr:`SegmentEntry.schema`), or None when it is absent or
    unreadable: the footers of its files are read instead.

    Example:
        >>> decode_schema("") is None, decode_schema("bm90IGEgc2NoZW1h") is None
        (True, True)
    """
    import pyarrow as pa

    if not text:
        return None
    try:
        schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text, validate=True)))
        # Names are decoded from UTF-8 when read: a bad byte in any of them fails here.
        for item in schema:
            str(item.type), item.name  # noqa: B018
    except (ValueError, OSError, pa.ArrowException):  # OSError: a corrupt IPC message
        return None
    return schema


def _schema_problem(text: str, specs: Sequence[IndexSpec]) -> str | None:
    """Why a segment's schema cannot be its files' (None: it can, or there is none).

    The schema decides which columns a query reads: a damaged column name would make DuckDB
    read an indexed column as missing (all NULLs) and find no row.
    """
    from bloomskip.clickhouse.types import index_type_key, parse_clickhouse_type

    if not text:
        return None
    schema = decode_schema(text)
    if schema is None:
        return "its schema is not an Arrow IPC schema"
    for name in schema.names:
        if "\x00" in name:
            return f"its schema has a column name with a NUL byte ({name!r})"
    for spec in specs:
        for name, clickhouse_type in spec.column_types:
            try:
                expected = str(parse_clickhouse_type(clickhouse_type).base())
            except (BloomskipError, ValueError):
                continue  # the definition itself is refused when the index is used
            for position in schema.get_all_field_indices(name):
                found = schema.field(position).type
                if index_type_key(found) != expected:
                    return f"its schema has column {name!r} as {found}, the index {clickhouse_type}"
    return None


def _table_record(item: object, check: _Checker) -> dict[str, int | str] | None:
    if item is None:
        return None
    check.that(isinstance(item, dict), "table", "is not an object")
    check.that(item.get("format") in ("delta", "iceberg"), "table.format", "is unknown")
    check.that(
        isinstance(item.get("snapshot"), int) and not isinstance(item.get("snapshot"), bool),
        "table.snapshot",
        "is not an integer",
    )
    sequence = check.count(item.get("sequence"), "table.sequence")
    record = {"format": item["format"], "snapshot": item["snapshot"], "sequence": sequence}
    columns = item.get("columns")
    if columns is not None:
        check.that(
            isinstance(columns, dict)
            and all(
                isinstance(value, int) and not isinstance(value, bool) for value in columns.values()
            ),
            "table.columns",
            "is not an object of field ids",
        )
        record["columns"] = dict(columns)
    return record


def _index_spec(item: object, where: str, check: _Checker) -> IndexSpec:
    check.that(isinstance(item, dict), where, "is not an object")
    definition = item.get("definition")
    types = item.get("column_types")
    check.that(isinstance(definition, str), f"{where}.definition", "is not a string")
    check.that(
        isinstance(types, dict) and all(isinstance(v, str) for v in types.values()),
        f"{where}.column_types",
        "is not an object of type names",
    )
    return IndexSpec(definition, tuple(types.items()))


def _segment(item: object, where: str, indexes: int, check: _Checker) -> SegmentEntry:
    check.that(isinstance(item, dict), where, "is not an object")
    key = item.get("key")
    check.that(
        isinstance(key, str) and is_segment_key(key),
        f"{where}.key",
        "is not a segment key",
    )
    size = check.count(item.get("size"), f"{where}.size")
    directory = item.get("directory")
    if directory is not None:
        name = f"{where}.directory"
        check.that(isinstance(directory, list) and len(directory) == 2, name, "is not a span")
        directory = (check.count(directory[0], name), check.count(directory[1], name))
        check.that(sum(directory) <= size, name, "lies past the segment's end")
    spans = check.list(item.get("index_spans"), f"{where}.index_spans")
    check.that(len(spans) == indexes, f"{where}.index_spans", f"has not {indexes} entries")
    index_spans = []
    numbers = 2 if directory is None else 4
    for number, span in enumerate(spans):
        name = f"{where}.index_spans[{number}]"
        check.that(
            isinstance(span, list) and len(span) == numbers,
            name,
            "is not [offset, length]"
            if directory is None
            else "is not [header offset, length, header length, slices offset]",
        )
        counts = tuple(check.count(value, name) for value in span)
        if directory is None:
            check.that(counts[0] + counts[1] <= size, name, "lies past the segment's end")
        else:
            offset, length, head, slices_at = counts
            check.that(
                head <= length and offset + head <= size and slices_at + length - head <= size,
                name,
                "lies past the segment's end",
            )
        index_spans.append(counts)
    files = item.get("files")
    check.that(isinstance(files, dict) and files, f"{where}.files", "is not a non-empty object")
    if not _all_identities(files.values()):
        for path, identity in files.items():
            check.that(
                _all_identities((identity,)),
                f"{where}.files[{path!r}]",
                "is not an identity (size with an etag or a ctime_ns)",
            )
    schema = item.get("schema", "")
    check.that(isinstance(schema, str), f"{where}.schema", "is not a string")
    return SegmentEntry(key, size, tuple(index_spans), files, schema, directory)


def _all_identities(identities: Iterable[object]) -> bool:
    """Whether each of ``identities`` is a file identity: an object with a size and an etag or
    a ctime_ns, whose values are strings or counts.

    Checked in bulk (distinct key sets, value types, the integers' range), since a manifest
    holds up to 10⁶ of them.

    Example:
        >>> _all_identities([{"size": 1, "etag": "a"}, {"size": 2, "mtime_ns": 3, "ctime_ns": 4}])
        True
        >>> _all_identities([{"size": 1, "etag": "a"}, {"size": -1, "etag": "b"}])
        False
    """
    identities = list(identities)
    if set(map(type, identities)) - {dict}:
        return False
    for names in set(map(frozenset, identities)):
        if "size" not in names or not {"etag", "ctime_ns"} & names:
            return False
    values = list(chain.from_iterable(map(dict.values, identities)))
    if set(map(type, values)) - {str, int}:  # a bool's type is bool, a float's float
        return False
    counts = [value for value in values if type(value) is int]
    return not counts or (min(counts) >= 0 and max(counts) < 2**63)


def _indexed_as(indexed, recorded: Identity) -> bool:
    """Whether a segment's own record of a file (``FileIdentity``) is the file the manifest
    records: the same size, and the same modification time or footer hash where the manifest
    has one (a listing without ETags records ``footer-<SHA-256>``, see ``LakeDataset``)."""
    etag = recorded.get("etag")
    return (
        indexed.size == recorded.get("size")
        and ("mtime_ns" not in recorded or indexed.mtime_ns == recorded["mtime_ns"])
        and not (
            isinstance(etag, str)
            and etag.startswith("footer-")
            and etag != f"footer-{indexed.footer_sha256}"
        )
    )


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


class _Checker:
    def __init__(self, source: str) -> None:
        self.source = source

    def that(self, condition: bool, field_name: str, problem: str) -> None:
        if not condition:
            raise FormatError(f"{field_name} {problem}", field=field_name, source=self.source)

    def count(self, value: object, field_name: str) -> int:
        self.that(_is_count(value), field_name, "is not a count")
        return value  # type: ignore[return-value]

    def list(self, value: object, field_name: str) -> list:
        self.that(isinstance(value, list), field_name, "is not a list")
        return value  # type: ignore[return-value]


def identity_matches(recorded: Identity, current: Identity | None) -> bool:
    """Whether a file's ``current`` identity is the one it was indexed at.

    Every field the index recorded must be present and equal now; an object store's ETag (or
    version) and size decide there, a local file's size, modification and status-change times.
    An empty record, or a file whose identity the listing cannot give, never matches.

    Example:
        >>> identity_matches({"size": 3, "etag": '"a"'}, {"size": 3, "etag": '"a"', "mtime_ns": 9})
        True
        >>> identity_matches({}, {"size": 3})
        False
    """
    if not recorded or current is None:
        return False
    return all(current.get(name) == value for name, value in recorded.items())


__all__ = [
    "Change",
    "CommitConflictError",
    "IndexLog",
    "Manifest",
    "SegmentEntry",
    "concurrent_edit",
    "decode_manifest",
    "decode_schema",
    "encode_manifest",
    "identity_matches",
    "version_key",
    "version_number",
]
