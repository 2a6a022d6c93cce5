"""Finding which of many .tsfile files hold a series.

Each file costs one read of its tail (TsFileMetadata, which holds the filter). Only when the filter
cannot rule the path out is the metadata index walked -- a few more small reads.

Example:
    >>> for hit in find_series("root.sg.d1.s1", ["data/"]):  # doctest: +SKIP
    ...     if hit.present:
    ...         print(hit.file)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bloomskip.errors import FormatError
from bloomskip.tsfile.filter import PathProbe
from bloomskip.tsfile.hash import HashVariant
from bloomskip.tsfile.paths import DEFAULT_CHARSET
from bloomskip.tsfile.reader import TsFileReader

TSFILE_SUFFIX = ".tsfile"


@dataclass(frozen=True)
class FindResult:
    """One file's answer: the filter's verdict, the index's answer, or why it failed."""

    file: str
    bloom: str | None
    present: bool
    error: str | None = None
    bytes_read: int = 0


def iter_tsfiles(locations: Iterable[str | os.PathLike[str]]) -> Iterator[Path]:
    """Yield the files named, and every ``*.tsfile`` under the directories named, sorted.

    Args:
        locations: Files and directories.

    Returns:
        An iterator of file paths.

    Raises:
        FileNotFoundError: A location does not exist.

    Example:
        >>> list(iter_tsfiles([]))
        []
    """
    for location in locations:
        path = Path(location)
        if path.is_dir():
            found = (
                Path(root) / name
                for root, _, names in os.walk(path)
                for name in names
                if name.endswith(TSFILE_SUFFIX)
            )
            yield from sorted(found)
        elif path.exists():
            yield path
        else:
            raise FileNotFoundError(f"no such file or directory: {location}")


def find_series(
    path: str,
    files: Iterable[str | os.PathLike[str]],
    *,
    variant: HashVariant = "both",
    charset: str = DEFAULT_CHARSET,
) -> Iterator[FindResult]:
    """Look one series path up in every file; corrupt files are reported, not raised.

    Args:
        path: The series path text.
        files: The files to search (see :func:`iter_tsfiles` for directories).
        variant: The hash variant(s) to trust the filter under (``both`` is always safe).
        charset: The writers' path charset.

    Returns:
        One :class:`FindResult` per file, in order.

    Example:
        >>> list(find_series("root.sg.d1.s1", []))
        []
    """
    probe = PathProbe(path, variant=variant, charset=charset)
    for file in files:
        try:
            with TsFileReader(file, variant=variant, charset=charset) as reader:
                result = reader.lookup(probe)
                yield FindResult(
                    os.fspath(file), result.bloom, result.present, None, reader.bytes_read
                )
        except (FormatError, OSError) as exc:
            yield FindResult(os.fspath(file), None, False, str(exc))
