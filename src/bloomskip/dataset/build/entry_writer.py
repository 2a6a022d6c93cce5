"""EntryWriter: builds the entries of local files for a sidecar, as a build task's writer.

A build runs as tasks (``build/tasks.py``) whatever its index layout: a task's writer reads its
files and builds their entries; a :class:`~bloomskip.dataset.build.segment_writer.SegmentWriter`
then writes them as a segment where the task runs, an :class:`EntryWriter` hands them back to
the build, which writes the one sidecar file. It is picklable (a root folder and the files'
formats), so a sidecar's tasks run on Dask workers that see the same folder as well.

Example:
    >>> writer = EntryWriter("/data/logs", {"a.parquet": "parquet"})
    >>> str(writer.source(local_file("a.parquet", 10, 1)).path)
    '/data/logs/a.parquet'
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bloomskip._store import ObjectInfo, one_line
from bloomskip.dataset.listing.prefix import ListedFile
from bloomskip.errors import BloomskipError

if TYPE_CHECKING:
    from bloomskip.dataset.index.sidecar import FileEntry
    from bloomskip.dataset.listing.files import SourceFile


def local_file(key: str, size: int, mtime_ns: int) -> ListedFile:
    """A local file as a build task takes it: its name relative to the root, and its size
    (what the plan sizes tasks by)."""
    return ListedFile(key, ObjectInfo(key, size, mtime_ns))


class EntryWriter:
    """Builds sidecar entries of files under one folder.

    Args:
        root: The folder the files are named relative to.
        formats: Each file's format (``"parquet"`` or ``"arrow-ipc"``), by name.
    """

    def __init__(self, root: str | Path, formats: dict[str, str]) -> None:
        self.root = str(root)
        self.formats = formats

    def source(self, listed: ListedFile) -> SourceFile:
        """The readable file of a listed one."""
        from bloomskip.dataset.listing.files import SourceFile

        return SourceFile(Path(self.root) / listed.key, self.formats[listed.key])

    def uri_of(self, key: str) -> str:
        """The path of a file, as messages name it."""
        return str(Path(self.root) / key)

    def row_group_bytes(self, listed: ListedFile) -> list[int]:
        """The compressed bytes of each row group of a Parquet file (one footer read).

        Raises:
            BloomskipError: The footer cannot be read.
        """
        import pyarrow as pa

        from bloomskip.dataset.build.indexing import row_group_bytes
        from bloomskip.dataset.listing.files import open_parquet

        try:
            metadata = open_parquet(self.source(listed)).metadata
        except (pa.ArrowException, OSError) as exc:
            raise BloomskipError(f"{self.uri_of(listed.key)}: cannot read it: {exc}") from exc
        return row_group_bytes(metadata)

    def write_files(self, files, prepared, granule, executor, max_in_flight, progress=None):
        """Build the entries of ``files`` (the body of a build task).

        Returns:
            ``({name: FileEntry}, rows indexed)``.

        Raises:
            BloomskipError: A file cannot be read or holds data the engine cannot hash (the
                message names the file).
        """
        entries = {}
        for listed in files:
            entries[listed.key], _ = self.build_part(
                listed, prepared, granule, None, executor, max_in_flight, progress
            )
        return entries, sum(sum(entry.granule_rows) for entry in entries.values())

    def build_part(self, listed, prepared, granule, groups, executor, max_in_flight, progress=None):
        """Build one file's entry, or only that of row groups ``groups`` (see
        ``build.build_file``); ``progress`` as ``build.index_file`` takes it.

        Returns:
            ``(its entry, None)``: a sidecar records no schema.

        Raises:
            BloomskipError: The file cannot be read (``cannot read it``) or indexed (``cannot
                index it``); the message names it.
        """
        from bloomskip.dataset.build.indexing import index_file
        from bloomskip.dataset.listing.files import open_parquet, read_layout

        source = self.source(listed)
        try:
            # A Parquet file is opened once: its footer serves the identity and the reads.
            opened = open_parquet(source) if source.format == "parquet" else None
            if opened is None:
                read_layout(source)
        except OSError as exc:
            raise BloomskipError(f"{source.path}: cannot read it: {one_line(exc)}") from exc
        entry = index_file(
            source,
            listed.key,
            prepared,
            granule,
            executor,
            max_in_flight,
            opened,
            groups,
            str(source.path),
            progress,
        )
        return entry, None

    def write_entries(self, entries, prepared, granule, files, schemas) -> dict[str, FileEntry]:
        """The entries, as they are: the build writes them into the sidecar."""
        return entries

    def discard(self, entries: dict[str, FileEntry]) -> None:
        """Nothing to delete: the entries of a build that failed were never written."""
