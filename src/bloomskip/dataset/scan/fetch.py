"""What an object-store plan reads, fetched into private local copies for the one scan.

DuckDB reads local Parquet files by path, with the plan's row ranges pushed into its reader
(``scan/query.py``); objects it cannot reach itself here. Handing it a ``pyarrow.dataset`` of
them instead costs that module's import (about 0.3 s of a cold command, pandas with it), reads
each file's footer before its data (two round trips one after the other), and needs a request
per file after the read to know the bytes read were the listed ones (``read_consistently``).

So the bytes a plan reads are fetched first, every file at once, each by ranged GETs pinned to
its listed ETag (``If-Match``, :meth:`~bloomskip._store.ObjectStore.read_listed`): a file
replaced since the listing fails its read rather than mixing two versions, and nothing needs
checking after it. They are written at their own offsets into a sparse local copy of the same
size, and the scan reads the copies as it reads a folder. Of a file is fetched:

* all of it, in one request, when it is at most :data:`WHOLE_FILE_BYTES` long, every one of its
  row groups is read, or its row groups read make up most of it;
* otherwise its tail (:data:`TAIL_BYTES`, the footer), then the byte spans of the row groups
  read and everything after the last row group's data (page indexes, Bloom filters, footer).

A copy's other bytes are holes that no read reaches: the scan reads the plan's row groups only,
by row number (``docs/queries.md``, "The requests on a query's path"). Where no copy can be
written (the temporary folder full, missing or read-only), the plan is streamed as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from bloomskip._store import COALESCE_GAP, ObjectInfo, ObjectStore, coalesce
from bloomskip.dataset.listing.files import SourceFile
from bloomskip.errors import BloomskipError, FormatError

if TYPE_CHECKING:
    from bloomskip.dataset.prune import Explanation

_log = logging.getLogger(__name__)

#: A file up to this long is fetched whole: one request costs less than two in a row.
WHOLE_FILE_BYTES = 4 << 20
#: The tail fetched first from a longer file: its footer, in one request nearly always.
TAIL_BYTES = 64 << 10
#: Plans estimated to read more than this are left to the streaming read (no local copy).
FETCH_BYTES = 512 << 20
#: Requests in flight at once.
FETCH_THREADS = 32
_MAGIC = b"PAR1"


@contextlib.contextmanager
def fetched_locally(
    explanation: Explanation, store: ObjectStore, meanwhile: Callable[[], object] | None = None
) -> Iterator[Explanation | None]:
    """The decision ``explanation`` over local copies of what its plan reads.

    Args:
        explanation: A decision over Parquet objects of ``store``, each listed with its ETag.
        store: The store the files were listed from.
        meanwhile: Called on this thread while the requests are in flight (the scan's
            set-up, which then costs no time of its own).

    Yields:
        An :class:`~bloomskip.dataset.prune.Explanation` holding the files read (or, when
        none is, the first file, whose footer gives the result's types), each a local copy
        with its row groups and row ranges as decided; None when the plan cannot be fetched so
        (a file listed without an ETag, not Parquet, or more than :data:`FETCH_BYTES` to read).
        The copies are deleted when the block ends.

    Raises:
        StaleSourceError: A file was replaced or deleted since it was listed.
        FormatError: A file's footer is malformed or disagrees with the decision's row groups.
        StorageError: A read failed.

    Example:
        >>> with fetched_locally(dataset.explain("user_id = 42"), store) as local:  # doctest: +SKIP
        ...     local.files[0].source.path
        PosixPath('/tmp/bloomskip-read-…/000003-part-3.parquet')
    """
    wanted = _wanted(explanation)
    if wanted is None:
        yield None
        return
    try:
        folder = tempfile.mkdtemp(prefix="bloomskip-read-")
    except OSError as exc:
        _log.debug("no local copies (%s): the plan is streamed", exc)
        yield None
        return
    try:
        paths = {
            number: os.path.join(folder, f"{number:06d}-{Path(info.key).name}")
            for number, info, _ in wanted
        }
        try:
            _fetch(store, wanted, paths, meanwhile)
        except BloomskipError:
            raise
        except OSError as exc:
            # The local scratch space (a full or read-only temporary folder), not the store:
            # the plan is read as it was before copies, streamed and checked after.
            _log.debug("local copies failed (%s): the plan is streamed", exc)
            yield None
            return
        numbers = [number for number, _, _ in wanted]
        files = [
            dataclasses.replace(
                explanation.files[number], source=SourceFile(Path(paths[number]), "parquet")
            )
            for number in numbers
        ]
        granule_keep = explanation.granule_keep
        yield dataclasses.replace(
            explanation,
            files=files,
            keep=[explanation.keep[number] for number in numbers],
            granule_keep=None
            if granule_keep is None
            else [granule_keep[number] for number in numbers],
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _wanted(explanation: Explanation) -> list[tuple[int, ObjectInfo, tuple | None]] | None:
    """``(file number, listed object, what to fetch)`` per file to fetch, what to fetch being
    None for all of it, else ``(row groups read, rows of each row group as decided)``; None
    when the plan cannot be fetched (see :func:`fetched_locally`)."""
    states = explanation.files
    if not states:
        return None
    accesses = explanation.plan.files
    # A plan reading nothing still needs one footer: the result's column types.
    chosen = [(access.number, access) for access in accesses] or [(0, None)]
    wanted = []
    estimate = 0
    for number, access in chosen:
        state = states[number]
        info = state.listed
        if not isinstance(info, ObjectInfo) or info.etag is None:
            return None
        if state.source.format != "parquet":
            return None
        if access is None:
            wanted.append((number, info, ([], state.layout.rows.tolist())))
            estimate += min(info.size, TAIL_BYTES)
        elif access.whole or info.size <= WHOLE_FILE_BYTES:
            wanted.append((number, info, None))
            estimate += info.size
        else:
            wanted.append((number, info, (access.row_groups.tolist(), access.group_rows.tolist())))
            held = int(access.group_rows[access.row_groups].sum())
            estimate += TAIL_BYTES + info.size * held // max(int(access.group_rows.sum()), 1)
    return wanted if estimate <= FETCH_BYTES else None


def _fetch(store: ObjectStore, wanted: list, paths: dict[int, str], meanwhile=None) -> None:
    """Fetch every wanted file into its copy: whole files and tails at once, then the row
    groups of the files whose tails told where they lie; ``meanwhile()`` runs on this thread
    once the first requests are sent. The requests and bytes count in ``store.stats``."""
    import pyarrow.parquet  # noqa: F401 - here, not first on a worker while DuckDB loads

    handles: dict[int, int] = {}
    pool = ThreadPoolExecutor(max_workers=min(FETCH_THREADS, len(wanted)))
    try:
        for number, info, _ in wanted:
            handles[number] = _create(paths[number], info.size)
        reads = pool.map(lambda item: _first_read(store, handles[item[0]], *item[1:]), wanted)
        if meanwhile is not None:
            meanwhile()
        first = list(reads)
        later = [
            (handles[number], info, start, end)
            for (number, info, _), (_, ranges) in zip(wanted, first, strict=True)
            for start, end in ranges
            if end > start
        ]
        sizes = [length for lengths, _ in first for length in lengths]
        sizes += pool.map(lambda item: _write(item[0], store, *item[1:]), later)
    finally:
        # Every worker is done before a descriptor is closed: a number closed under a late
        # write could be another file's by then. After a failure the reads not begun are not.
        pool.shutdown(wait=True, cancel_futures=True)
        for handle in handles.values():
            os.close(handle)
    store.stats.count("get", len(sizes), read=sum(sizes))


def _create(path: str, size: int) -> int:
    """A new private file of ``size`` bytes, all holes (a descriptor open for writing)."""
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(handle, size)
    except OSError:
        os.close(handle)
        raise
    return handle


def _write(handle: int, store: ObjectStore, info: ObjectInfo, start: int, end: int) -> int:
    """Fetch bytes ``[start, end)`` of ``info`` (one request) into its copy at their own
    offset; returns their length."""
    _write_at(handle, store.read_listed(info, start, end), start)
    return end - start


def _write_at(handle: int, data, offset: int) -> None:
    view = memoryview(data)
    while len(view):
        written = os.pwrite(handle, view, offset)
        view, offset = view[written:], offset + written


def _first_read(
    store: ObjectStore, handle: int, info: ObjectInfo, groups: tuple | None
) -> tuple[list[int], list[tuple[int, int]]]:
    """The first requests of a file: all of it (``groups`` None), or its tail.

    Returns:
        The length of each read sent, and the ``[start, end)`` spans still to fetch for
        ``groups`` (see :func:`_wanted`).
    """
    size = info.size
    if groups is None:
        return [_write(handle, store, info, 0, size)], []
    tail_start = max(0, size - TAIL_BYTES)
    tail = bytes(store.read_listed(info, tail_start, size))
    sent = [len(tail)]
    name = store.uri_of(info.key)
    footer_start = size - 8 - _footer_length(tail, size, name)
    if footer_start < tail_start:
        tail = bytes(store.read_listed(info, footer_start, tail_start)) + tail
        sent.append(tail_start - footer_start)
        tail_start = footer_start
    _write_at(handle, tail, tail_start)
    spans = _row_group_spans(tail, size, *groups, name)
    if sum(end - start for start, end in spans) * 2 >= size:
        return sent, [(0, tail_start)]  # most of the file: one request rather than several
    wanted = [(start, min(end, tail_start) - start) for start, end in spans if start < tail_start]
    wanted = [(start, length) for start, length in wanted if length]
    return sent, [(start, start + length) for start, length in coalesce(wanted, COALESCE_GAP)]


def _footer_length(tail: bytes, size: int, name: str) -> int:
    """The footer length a Parquet file's last 8 bytes give, checked against its size."""
    if size < 12 or len(tail) < 8 or tail[-4:] != _MAGIC:
        raise FormatError(f"{name}: not a Parquet file (no PAR1 magic at offset {size - 4})")
    length = int.from_bytes(tail[-8:-4], "little")
    if length + 12 > size:
        raise FormatError(
            f"{name}: footer length {length} at offset {size - 8} exceeds the file ({size} bytes)"
        )
    return length


def _row_group_spans(
    tail: bytes, size: int, row_groups: list[int], group_rows: list[int], name: str
) -> list[tuple[int, int]]:
    """``[start, end)`` of each row group in ``row_groups``, and of everything after the last
    row group's data, by the footer at the end of ``tail``, whose row groups must hold
    ``group_rows`` rows (the decision's)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        metadata = pq.read_metadata(pa.BufferReader(tail))
    except (OSError, pa.ArrowException) as exc:
        raise FormatError(f"{name}: footer unreadable: {exc}") from exc
    found = [metadata.row_group(group).num_rows for group in range(metadata.num_row_groups)]
    if found != group_rows:
        raise FormatError(
            f"{name}: its footer's row groups hold {_rows_text(found)} rows, the decision's "
            f"{_rows_text(group_rows)}"
        )
    spans = []
    data_end = 0
    wanted = set(row_groups)
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        low, high = size, 0
        for column in range(row_group.num_columns):
            chunk = row_group.column(column)
            start = chunk.data_page_offset
            if chunk.has_dictionary_page and chunk.dictionary_page_offset:
                start = min(start, chunk.dictionary_page_offset)
            end = start + chunk.total_compressed_size
            if not 0 <= start <= end <= size:
                raise FormatError(
                    f"{name}: row group {group}, column {column}: bytes {start}-{end} lie "
                    f"outside the file ({size} bytes)"
                )
            low, high = min(low, start), max(high, end)
        data_end = max(data_end, high)
        if group in wanted and high > low:
            spans.append((low, high))
    spans.append((data_end, size))
    return spans


def _rows_text(rows: list[int]) -> str:
    shown = ", ".join(map(str, rows[:4]))
    groups = "row group" if len(rows) == 1 else "row groups"
    return f"[{shown}{', …' if len(rows) > 4 else ''}] ({len(rows)} {groups})"
