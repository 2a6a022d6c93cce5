"""Finding which of many .tsfile files hold a series.

Each file costs one read of its tail (TsFileMetadata, which holds the filter), checked and tested
in C without building Python objects for the tables and schemas before the filter. Only when the
filter cannot rule the path out is the file opened with :class:`TsFileReader` and the metadata
index walked -- a few more small reads. A file the scan finds anything wrong with also goes to the
reader, whose careful parser names the field and offset of the problem, and so does a table-model
file, whose filter may hold the series under the other writers' null-tag form (the reader tests
both forms, see :meth:`TsFileReader.lookup`).

Example:
    >>> for hit in find_series("root.sg.d1.s1", ["data/"]):  # doctest: +SKIP
    ...     if hit.present:
    ...         print(hit.file)
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from bloomskip import _native
from bloomskip.errors import FormatError
from bloomskip.tsfile.filter import PathProbe
from bloomskip.tsfile.hash import HashVariant
from bloomskip.tsfile.paths import DEFAULT_CHARSET
from bloomskip.tsfile.reader import HEAD_SIZE, MAGIC, OPEN_FLAGS, TAIL_SIZE, TsFileReader

TSFILE_SUFFIX = ".tsfile"
#: Tail bytes read to test the filter: TsFileMetadata of a file with a few hundred series fits.
FILTER_TAIL_READ = 4096
#: At most this many files per task of a ``jobs > 1`` search.
PARALLEL_CHUNK = 512


class FindResult(NamedTuple):
    """One file's answer: the filter's verdict, the index's answer, or why it failed.

    A named tuple (immutable, and cheap to make: ``find`` makes one per file).
    """

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
        OSError: A directory cannot be listed.

    Example:
        >>> list(iter_tsfiles([]))
        []
    """
    for location in locations:
        path = Path(location)
        if path.is_dir():
            found = (
                Path(root) / name
                # A directory that cannot be listed must not silently hide its files.
                for root, _, names in os.walk(path, onerror=_raise)
                for name in names
                if name.endswith(TSFILE_SUFFIX)
            )
            yield from sorted(found)
        elif path.exists():
            yield path
        else:
            raise FileNotFoundError(f"no such file or directory: {location}")


def _raise(error: OSError) -> None:
    raise error


def find_series(
    path: str,
    files: Iterable[str | os.PathLike[str]],
    *,
    variant: HashVariant = "both",
    charset: str = DEFAULT_CHARSET,
    jobs: int = 1,
) -> Iterator[FindResult]:
    """Look one series path up in every file; corrupt files are reported, not raised.

    Args:
        path: The series path text.
        files: The files to search (see :func:`iter_tsfiles` for directories).
        variant: The hash variant(s) to trust the filter under (``both`` is always safe).
        charset: The writers' path charset.
        jobs: Worker processes; above 1, the files are searched in chunks by a process pool
            (the answers are the same, in the same order).

    Returns:
        One :class:`FindResult` per file, in order.

    Example:
        >>> list(find_series("root.sg.d1.s1", []))
        []
    """
    if jobs > 1:
        yield from _find_in_processes(path, files, variant, charset, jobs)
        return
    probe = PathProbe(path, variant=variant, charset=charset)
    for file in files:
        name = os.fspath(file)
        try:
            yield _find_in_file(name, probe, variant, charset)
        except (FormatError, OSError) as exc:
            yield FindResult(name, None, False, str(exc))


def _find_in_processes(
    path: str,
    files: Iterable[str | os.PathLike[str]],
    variant: HashVariant,
    charset: str,
    jobs: int,
) -> Iterator[FindResult]:
    """:func:`find_series` over chunks of the files in ``jobs`` worker processes, in order."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    names = [os.fspath(file) for file in files]
    # Chunks big enough that a task outweighs its pickling, small enough to share the work out.
    size = min(PARALLEL_CHUNK, max(1, len(names) // (4 * jobs)))
    chunks = [names[start : start + size] for start in range(0, len(names), size)]
    if not chunks:
        return
    # Not fork: a fork of a process whose other threads (pyarrow's pools, a sanitizer's runtime)
    # hold a lock leaves the child waiting on it forever; the forkserver forks from a clean
    # single-threaded process.
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(min(jobs, len(chunks)), mp_context=context) as pool:
        searches = pool.map(
            _find_chunk, chunks, *(itertools.repeat(x) for x in (path, variant, charset))
        )
        for results in searches:
            yield from results


def _find_chunk(
    names: list[str], path: str, variant: HashVariant, charset: str
) -> list[FindResult]:
    """One worker's task: :func:`find_series` over a chunk of files."""
    return list(find_series(path, names, variant=variant, charset=charset))


def _has_table_schemas(tail: bytes, head: bytes, size: int) -> bool:
    """Whether TsFileMetadata, in ``tail``, has table schemas (a table-model file).

    Only for a tail whose envelope the tail verdict has checked (magics, version, a metadata size
    that fits in the tail), so the fields are read without checking them again.
    """
    metadata_end = size - TAIL_SIZE
    metadata_size = int.from_bytes(tail[-TAIL_SIZE : -len(MAGIC)], "big", signed=True)
    tail_start = size - len(tail)
    scan = _native.tsfile_scan_metadata(
        tail, metadata_end - metadata_size - tail_start, metadata_end - tail_start,
        head[len(MAGIC)], tail_start,
    )  # fmt: skip
    return scan[2] > 0


def _find_in_file(name: str, probe: PathProbe, variant: HashVariant, charset: str) -> FindResult:
    """Test the filter from the tail (in C); walk the index only if the filter cannot rule out.

    When the C scan is unsure (no filter, a metadata larger than the tail, anything malformed),
    the reader takes over and reaches the same answer, or names the problem.

    Raises:
        FormatError: The file is malformed.
        OSError: The file cannot be opened or read.
    """
    fd = os.open(name, OPEN_FLAGS)
    reader = None
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        length = size if size < FILTER_TAIL_READ else FILTER_TAIL_READ
        tail = os.pread(fd, length, size - length)
        head = tail if length == size else os.pread(fd, HEAD_SIZE, 0)
        bytes_read = length if head is tail else length + HEAD_SIZE
        # Short reads: the file changed while being read, so the reader starts afresh.
        if len(tail) == length and (head is tail or len(head) == HEAD_SIZE):
            verdicts = {
                _native.tsfile_tail_verdict(tail, head, size, encoded, probe.signed_tails)
                for encoded in probe.encodings
            }
            # The C scan checked the envelope and every rule of TsFileMetadata up to the
            # filter, as the reader would, before testing the bits. A table-model file may hold
            # the series under the other writers' null-tag form: the reader tries that too.
            if verdicts == {0} and not _has_table_schemas(tail, head, size):
                return FindResult(name, "absent", False, None, bytes_read)
            # The reader takes the descriptor over, and closes it even if it fails.
            fd, owned = -1, fd
            reader = TsFileReader.adopt(
                name, owned, size, tail, head, variant=variant, charset=charset
            )
    finally:
        if fd >= 0:
            os.close(fd)
    with reader or TsFileReader(name, variant=variant, charset=charset) as opened:
        result = opened.lookup(probe)
        return FindResult(name, result.bloom, result.present, None, bytes_read + opened.bytes_read)
