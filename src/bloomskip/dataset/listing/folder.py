"""Local files: a folder (recursively), a glob, or one file, of Parquet or Arrow IPC.

A listing says which files a dataset holds and how each is told apart from a rewrite; it knows
nothing of indexes or scans. Each file is stat-ed once per listing: the stat is its key (see
:func:`~bloomskip.dataset.listing.files.stat_key`), which the dataset's caches, the identity
check and a query's after-read check all use.

Example:
    >>> import pathlib, tempfile
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> pq.write_table(pa.table({"a": [1]}), folder / "x.parquet")
    >>> listed = FolderListing(folder).list()
    >>> [source.path.name for source in listed.files], len(listed.keys)
    (['x.parquet'], 1)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bloomskip.dataset.listing.files import discover, glob_root, is_glob

if TYPE_CHECKING:
    from bloomskip.dataset.listing.files import SourceFile


@dataclass(frozen=True)
class FolderFiles:
    """One listing of local files.

    Attributes:
        root: The directory files are named relative to.
        files: The files, in name order.
        keys: Each file's ``stat_key``, as the listing took it.
    """

    root: Path
    files: list[SourceFile]
    keys: list[tuple[int, ...]]


class FolderListing:
    """The files of a local folder, glob or file.

    Args:
        path: A Parquet or Arrow IPC file, a directory or a glob of them.
        skip: A folder whose files are not the dataset's (an index kept inside it).
    """

    def __init__(self, path: str | os.PathLike, skip: Path | None = None) -> None:
        self.path = os.fspath(path)
        self.skip = skip
        # The sniffed format of each listed file, by (path, size, mtime_ns): a new listing
        # opens only the files that are new or changed.
        self._formats: dict = {}

    def list(self) -> FolderFiles:
        """The files as they are now.

        Raises:
            BloomskipError: The dataset holds no file, or files of two formats.
        """
        return FolderFiles(*discover(self.path, self._formats, self.skip))

    @property
    def is_glob(self) -> bool:
        """Whether the path is a glob pattern (not a file or folder of that name)."""
        return is_glob(self.path) and not Path(self.path).exists()

    def covers(self, path: Path, root: Path) -> bool:
        """Whether this listing would list ``path`` (a file that may no longer exist).

        Example:
            >>> FolderListing("logs/2026-*/*.parquet").covers(
            ...     Path("logs/2026-01/a.parquet"), Path("logs"))
            True
        """
        if not is_glob(self.path):
            relative = Path(os.path.relpath(path, root)).parts
            return ".." not in relative
        fixed = glob_root(self.path)
        pattern = Path(os.path.relpath(Path(self.path).absolute(), fixed.absolute())).parts
        relative = Path(os.path.relpath(path, root)).parts
        return ".." not in relative and _glob_matches(pattern, relative)


def _glob_matches(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Whether a relative path (its parts) matches a relative glob pattern (its parts), as
    ``glob.glob(..., recursive=True)`` matches: ``**`` is any number of directories."""
    import fnmatch

    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_glob_matches(pattern[1:], parts[skip:]) for skip in range(len(parts) + 1))
    return (
        bool(parts)
        and fnmatch.fnmatchcase(parts[0], pattern[0])
        and _glob_matches(pattern[1:], parts[1:])
    )
