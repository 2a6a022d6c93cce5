"""Where an index lives: one interface over its on-disk layouts.

A dataset holds one :class:`IndexStore`. What a store knows is the index: its definitions and
granule, the entries it holds for the files it covers, how to commit a new state of it, drop one
index or the whole of it, and what it weighs. What it does not know is where the data's files
come from (the listing) or how they are pruned and read (``prune``, ``scan``): a new layout is a
new store, not a change across the package.

Two layouts are behind it today:

* :class:`SidecarStore`: one file (``_bloomskip.index``, ``dataset/index/sidecar.py``),
  rewritten whole by a build under a folder lock, read and verified once per change of its
  ``stat``;
* :class:`SegmentStore`: immutable segments plus numbered manifest versions, committed
  create-only (``dataset/index/segments.py``), on a folder or an object store.

Example:
    >>> import tempfile
    >>> store = SidecarStore(tempfile.mkdtemp() + "/_bloomskip.index")
    >>> store.layout, store.definitions(), store.size()
    ('sidecar', None, 0)
"""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

from bloomskip.dataset.build.report import SEGMENTED, SIDECAR
from bloomskip.errors import BloomskipError, FormatError, StorageError

#: Bytes of verified segment parts a segmented index keeps between queries.
SEGMENT_CACHE_BYTES = 256 << 20
#: Segments of one query read at once from an object store.
SEGMENT_THREADS = 16

if TYPE_CHECKING:
    from collections.abc import Iterable

    from bloomskip._store import ObjectInfo
    from bloomskip.dataset.index.segments import (
        Change,
        IndexLog,
        Manifest,
        SegmentEntry,
        SegmentView,
    )
    from bloomskip.dataset.index.sidecar import Sidecar


class IndexStore(ABC):
    """An index's location and layout: what every dataset asks of its index.

    Attributes:
        layout: ``"sidecar"`` or ``"segmented"``.
    """

    layout: str

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the index lives: a file's path, or a folder or object-store URI."""

    @abstractmethod
    def definitions(self) -> Sidecar | None:
        """The newest index's granule and definitions (a ``Sidecar`` whose ``files`` may be
        empty), or None when there is no index.

        Raises:
            FormatError: The index is corrupt.
            StorageError: It cannot be read.
        """

    @abstractmethod
    def drop_index(self, name: str) -> int | None:
        """Remove one index (by name), keeping the others as they are; no data is read.

        Returns:
            The version committed, for a layout with versions; else None.

        Raises:
            BloomskipError: No index, or none of that name (the names are listed).
        """

    @abstractmethod
    def drop(self) -> int:
        """Delete the whole index; returns how many files or objects went.

        Raises:
            BloomskipError: There is no index (a sidecar), or it cannot be deleted.
        """

    @abstractmethod
    def size(self) -> int:
        """Bytes of the whole index as it is now (0 without one)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"


class SidecarStore(IndexStore):
    """The single-file sidecar.

    The verified sidecar is kept, and read (and verified) again only when the file's ``stat``
    changes: a repeated query decodes nothing.

    Args:
        path: The sidecar file.
    """

    layout = SIDECAR

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._verified: tuple[tuple, Sidecar] | None = None

    @property
    def location(self) -> str:
        return str(self.path)

    def load(self) -> Sidecar | None:
        """The sidecar, or None when there is none.

        Raises:
            FormatError: It exists but is corrupt or cannot be read.
        """
        from bloomskip.dataset.index.sidecar import read_sidecar
        from bloomskip.dataset.listing.files import stat_key

        try:
            key = stat_key(self.path)
        except (FileNotFoundError, NotADirectoryError):
            self._verified = None
            return None
        except OSError as exc:
            raise FormatError(f"cannot read the index: {exc}", source=str(self.path)) from exc
        if self._verified is not None and self._verified[0] == key:
            return self._verified[1]
        try:
            sidecar = read_sidecar(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise FormatError(f"cannot read the index: {exc}", source=str(self.path)) from exc
        self._verified = (key, sidecar)
        return sidecar

    def definitions(self) -> Sidecar | None:
        return self.load()

    def write(self, sidecar: Sidecar) -> None:
        """Replace the sidecar atomically (hold :meth:`lock` around the read that led to it).

        Raises:
            BloomskipError: The location cannot be written.
        """
        from bloomskip.dataset.index.sidecar import write_sidecar

        try:
            write_sidecar(sidecar, self.path)
        except OSError as exc:
            raise BloomskipError(f"cannot write the index {self.path}: {exc}") from exc

    def lock(self):
        """A context holding the sidecar's folder lock: builds and drops take turns."""
        from bloomskip.dataset.build.indexing import build_lock

        return build_lock(self.path)

    def drop_index(self, name: str) -> None:
        from bloomskip.dataset.build.indexing import index_number, select_indexes
        from bloomskip.dataset.index.sidecar import Sidecar

        with self.lock():
            sidecar = self.load()
            if sidecar is None:
                raise BloomskipError(f"no index at {self.path}")
            number = index_number(sidecar.indexes, name)
            kept = [n for n in range(len(sidecar.indexes)) if n != number]
            files = {path: select_indexes(entry, kept) for path, entry in sidecar.files.items()}
            indexes = [spec for n, spec in enumerate(sidecar.indexes) if n != number]
            self.write(Sidecar(sidecar.granule, indexes, files))

    def drop(self) -> int:
        with self.lock():
            try:
                self.path.unlink()
            except (FileNotFoundError, NotADirectoryError):
                raise BloomskipError(f"no index at {self.path}") from None
            except OSError as exc:
                raise BloomskipError(f"cannot delete the index {self.path}: {exc}") from exc
        self._verified = None
        return 1

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0


class SegmentStore(IndexStore):
    """The segmented index: segments and manifest versions under one location.

    Args:
        log: The index's :class:`~bloomskip.dataset.index.segments.IndexLog`.
        location: The location as the user gave it (messages and reports name it).
    """

    layout = SEGMENTED

    def __init__(self, log: IndexLog, location: str) -> None:
        self.log = log
        self._location = location
        # Each manifest version's object as the data's listing saw it (an index beside the
        # data is listed with it), and the segments that listing found.
        self._version_objects: dict[int, ObjectInfo] = {}
        self._listed_segments: set[str] | None = None
        # Segments are written once and never changed: what a query read and verified of one
        # is kept for the next (most recently used last, within SEGMENT_CACHE_BYTES).
        self._views: OrderedDict[tuple, SegmentView] = OrderedDict()

    @property
    def location(self) -> str:
        return self._location

    def seen_in_listing(
        self,
        versions: dict[int, ObjectInfo],
        segments: set[str],
        checkpoints: list[ObjectInfo] = (),
    ) -> None:
        """Record the versions, checkpoints and segments a listing of the data found (an
        index nested in the data's prefix): the next reads need no listing of their own."""
        self._version_objects.update(versions)
        self._listed_segments = segments
        self.log.seen(versions, checkpoints)

    def latest(self, versions: Iterable[int] | None = None) -> Manifest | None:
        """The newest manifest version (``versions``: the numbers a listing already found).

        Its listed size is checked before it is read: an oversized version is refused without
        being fetched (``MAX_MANIFEST_BYTES``).

        Raises:
            FormatError: The newest version is corrupt.
            StorageError: The location cannot be listed or read.
        """
        if versions is None:
            listed = self.log.version_objects()
        else:
            listed = {number: self._version_objects.get(number) for number in versions}
        if not listed:
            return None
        newest = max(listed)
        return self.log.read_version(newest, listed[newest])

    def definitions(self) -> Sidecar | None:
        from bloomskip.dataset.index.sidecar import Sidecar

        manifest = self.latest()
        return None if manifest is None else Sidecar(manifest.granule, list(manifest.indexes), {})

    def present_segments(self) -> set[str]:
        """The segment objects that exist (from the data's listing when the index is in it)."""
        if self._listed_segments is not None:
            return self._listed_segments
        return {info.key for info in self.log.store.list("segments/")}

    def open_segment(
        self, segment: SegmentEntry, useful: list[int], manifest: Manifest, listed: dict
    ) -> Sidecar:
        """The entries a segment holds for its files, with the sections of ``useful`` indexes.

        Args:
            segment: Its manifest entry.
            useful: The indexes whose sections are read.
            manifest: The version naming it.
            listed: The data's listed files by key (``ListedFile``): a file the segment names
                as unchanged must carry the modification time the segment recorded.

        Raises:
            FormatError: The segment is corrupt, or it is another index's (its recorded
                modification time of an unchanged object differs).
            StorageError: It cannot be read.
        """
        opened = self.open_segments([segment], useful, manifest, listed)[segment.key]
        if isinstance(opened, Exception):
            raise opened
        return opened

    def open_segments(
        self, segments: list[SegmentEntry], useful: list[int], manifest: Manifest, listed: dict
    ) -> dict[str, Sidecar | FormatError | StorageError]:
        """:meth:`open_segment` for several segments at once, by key: each one's entries, or
        the error that makes it unusable.

        On an object store each segment costs a round trip or two; they are read in parallel,
        so a query touching a few segments waits about as long as for one.
        """
        views = [(segment, self._view(segment, manifest)) for segment in segments]

        def read(item) -> Sidecar | FormatError | StorageError:
            segment, view = item
            try:
                return self._checked(segment, view.open(list(useful) or [0]), listed)
            except (FormatError, StorageError) as exc:
                return exc

        if len(views) < 2 or not self.log.store.remote:
            opened = [read(item) for item in views]
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=min(len(views), SEGMENT_THREADS)) as pool:
                opened = list(pool.map(read, views))
        self._trim()
        return {segment.key: result for (segment, _), result in zip(views, opened, strict=True)}

    def read_ahead(self, manifest: Manifest, useful: list[int]) -> None:
        """Fetch every segment's directory and the headers of the ``useful`` indexes now, in
        parallel, so that :meth:`open_segments` finds them read (a query does this while the
        data's listing is in flight). A segment that cannot be read is left for
        :meth:`open_segments` to report."""
        views = [self._view(segment, manifest) for segment in manifest.segments]

        def read(view: SegmentView) -> None:
            with contextlib.suppress(FormatError, StorageError):
                view.open(list(useful) or [0])

        if len(views) < 2:
            for view in views:
                read(view)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=min(len(views), SEGMENT_THREADS)) as pool:
                list(pool.map(read, views))
        self._trim()

    def _checked(self, segment: SegmentEntry, sidecar: Sidecar, listed: dict) -> Sidecar:
        from bloomskip.dataset.index.segments import identity_matches

        for path, recorded in segment.files.items():
            current = listed.get(path)
            # An object store's identity (ETag) is not in the segment: an unchanged object's
            # listed modification time is, as the build listed it.
            if (
                current is not None
                and current.info.mtime_ns
                and "mtime_ns" not in recorded
                and identity_matches(recorded, current.identity)
                and sidecar.files[path].identity.mtime_ns != current.info.mtime_ns
            ):
                raise FormatError(
                    f"it indexed {path} as modified at {sidecar.files[path].identity.mtime_ns}"
                    f" ns, and the unchanged object was modified at {current.info.mtime_ns} "
                    "ns: it is not this index's",
                    source=self.log.store.uri_of(segment.key),
                )
        return sidecar

    def _view(self, segment: SegmentEntry, manifest: Manifest) -> SegmentView:
        key = (segment.key, segment.size, segment.index_spans, manifest.indexes)
        view = self._views.pop(key, None)
        if view is None:
            view = self.log.segment_view(segment, manifest.indexes)
        self._views[key] = view
        return view

    def _trim(self) -> None:
        held = sum(view.held_bytes for view in self._views.values())
        while held > SEGMENT_CACHE_BYTES and len(self._views) > 1:
            _, oldest = self._views.popitem(last=False)
            held -= oldest.held_bytes

    def commit(self, change: Change) -> Manifest:
        """Commit ``change`` as the next version (create-only; retried on a lost race)."""
        return self.log.commit(change)

    def vacuum(self, keep_versions: int = 10, min_age_seconds: float = 3600.0) -> list[str]:
        """Delete old versions and the segments no kept version names (``IndexLog.vacuum``)."""
        return self.log.vacuum(keep_versions, min_age_seconds)

    def drop_index(self, name: str) -> int:
        """A new version lists the other indexes over the same segments (nothing is
        rewritten; their parts stay in the segments)."""
        from bloomskip.dataset.index.segments import Change

        manifest = self.latest()
        if manifest is None:
            raise BloomskipError(f"no index at {self.location}")
        return self.commit(Change(manifest.granule, manifest.indexes, drop=name)).version

    def drop(self) -> int:
        self._views.clear()
        return self.log.drop()

    def size(self) -> int:
        try:
            manifest = self.latest()
        except (FormatError, StorageError):
            return 0
        return sum(segment.size for segment in manifest.segments) if manifest else 0
