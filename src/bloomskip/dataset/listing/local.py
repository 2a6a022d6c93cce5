"""Local files as a segmented index lists them: a folder, a glob or one file, of Parquet or
Arrow IPC.

The files are exactly those the sidecar's :class:`~bloomskip.dataset.listing.folder.FolderListing`
lists for the same path (``listing/files.py``'s ``discover``: ``_``- and ``.``-prefixed names
ignored, the format sniffed once per new or rewritten file, one format per dataset), each
``stat``-ed once per listing. Each is named relative to the dataset's root, as a sidecar names
it: the folder, a glob's fixed root, or a file's folder. Its identity is its size, modification
time and status-change time, as a local store's listing gives them; the per-file adjustments
(``key=value`` folders' partition values) are a prefix's.

Example:
    >>> import pathlib, tempfile
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> pq.write_table(pa.table({"a": [1]}), folder / "x.parquet")
    >>> listing = LocalListing(folder / "*", LocalStore(folder))
    >>> [(listed.key, listed.source.format) for listed in listing.files()]
    [('x.parquet', 'parquet')]
"""

from __future__ import annotations

import os
from pathlib import Path

from bloomskip._store import LocalStore, ObjectInfo
from bloomskip.dataset.listing.files import dataset_root
from bloomskip.dataset.listing.folder import FolderListing
from bloomskip.dataset.listing.prefix import ListedFile, PrefixListing
from bloomskip.dataset.vocabulary import relative_to


class LocalListing(PrefixListing):
    """The files of a local folder, glob or file, for a segmented index.

    Args:
        path: A Parquet or Arrow IPC file, a directory or a glob of them.
        store: The store rooted at the directory the files are named relative to
            (:func:`~bloomskip.dataset.listing.files.dataset_root` of ``path``): a query's
            check after its read takes each file's identity through it.
        skip: A folder whose files are not the dataset's: the index, when kept inside the
            dataset's folder under a name that is not hidden.

    Attributes:
        root: The directory the files are named relative to.
    """

    def __init__(
        self, path: str | os.PathLike, store: LocalStore, skip: Path | None = None
    ) -> None:
        super().__init__(os.fspath(path), store)
        self.root = store.root
        self._folder = FolderListing(path, skip)

    def covers(self, key: str) -> bool:
        """Whether this listing would list the file named ``key`` (relative to :attr:`root`;
        it may no longer exist): what a glob served by its folder's index counts as its own."""
        return self._folder.covers(Path(self.root, key), dataset_root(self._folder.path))

    def objects(self) -> list[ObjectInfo]:
        """The dataset's files as objects of :attr:`store` (see :meth:`files`)."""
        return [listed.info for listed in self.files()]

    def files(self) -> list[ListedFile]:
        """The dataset's files as they are now, in name order, each with its readable
        ``source`` (path and format).

        Raises:
            BloomskipError: Nothing matches, a file is neither Parquet nor an Arrow IPC file,
                or the files are not all of one of the two formats.
        """
        listed = self._folder.list()
        files = []
        for source, (_, _, size, mtime_ns, ctime_ns) in zip(listed.files, listed.keys, strict=True):
            key = relative_to(source.path, self.root)
            info = ObjectInfo(key, size, mtime_ns, ctime_ns=ctime_ns)
            files.append(ListedFile(key, info, source=source))
        return files


__all__ = ["LocalListing"]
