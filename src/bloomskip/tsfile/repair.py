"""Rewriting only the Bloom filter of a .tsfile, atomically.

The filter sits inside TsFileMetadata, after the table map, the table schemas and metaOffset and
before the properties; the file ends with the i32 size of TsFileMetadata and the magic. Repair
keeps every byte before the filter, swaps the filter, keeps the properties, and writes the new
size. Everything before TsFileMetadata -- chunks and the metadata index nodes, which the table
roots point into -- is copied unchanged, so every offset stays valid.

The new file is written next to the old one, checked by reading it back, and moved over the old
one with ``os.replace``: a crash at any point leaves the original intact. A symbolic link is
written through: the file it points to is repaired and the link stays a link.

A ``signed-tail`` or ``unsigned-tail`` filter can hide series from the other kind of reader
(:data:`~bloomskip.tsfile.analysis.READERS`): before anything is written, the series each
reader's filter-consulting query path would miss in the new filter (and would return with a
filter holding every path) are computed and handed to ``on_hidden`` (``bloomskip tsfile
repair`` prints them as a warning).

Example:
    >>> result = repair_filter("cjk.tsfile")  # doctest: +SKIP
    >>> result.variant, result.bit_count  # doctest: +SKIP
    ('both', 256)
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bloomskip._atomic import atomic_writer, final_target
from bloomskip.errors import BloomskipError, FormatError, StaleSourceError
from bloomskip.tsfile.analysis import READER_KINDS, analyze_filter, query_misses, reader_batch
from bloomskip.tsfile.codec import INT32_MAX, encode_i32, encode_uvarint
from bloomskip.tsfile.filter import DEFAULT_ERROR_RATE, BloomFilter
from bloomskip.tsfile.hash import HashVariant, signed_tail_flags, variants_differ
from bloomskip.tsfile.paths import DEFAULT_CHARSET, is_utf8
from bloomskip.tsfile.reader import MAGIC, Series, TsFileReader

_COPY_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class RepairResult:
    """What a repair wrote (``target``: the file rewritten, ``file`` itself or what its symbolic
    links point to; ``hidden_series``: per reader of
    :data:`~bloomskip.tsfile.analysis.READERS` that misses some, how many series the new filter
    hides from its filter-consulting query path)."""

    file: str
    target: str
    variant: HashVariant
    series_count: int
    bit_count: int
    hash_function_count: int
    byte_length: int
    old_filter_bytes: int
    new_filter_bytes: int
    size_before: int
    size_after: int
    hidden_series: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dictionary."""
        return dict(self.__dict__)


def repair_filter(
    file: str | os.PathLike[str],
    *,
    variant: HashVariant = "both",
    error_rate: float = DEFAULT_ERROR_RATE,
    charset: str = DEFAULT_CHARSET,
    on_hidden: Callable[[dict[str, list[str]]], None] | None = None,
) -> RepairResult:
    """Replace a file's Bloom filter by one rebuilt from its series, sized by the writer formula.

    Args:
        file: The .tsfile to repair in place (through a symbolic link: the file it points to).
        variant: ``both`` (every path sets the bits of both tails, so Java and C++ readers both
            find every series), ``signed-tail`` (the spec, Java) or ``unsigned-tail`` (C++).
        error_rate: Target false-positive rate for the sizing (clamped to 0.01 .. 0.1).
        charset: Charset of the path bytes.
        on_hidden: Called before anything is written when the new filter hides series from
            some reader (a ``signed-tail`` filter over non-ASCII paths hides them from PyPI
            ``tsfile``'s ``query_timeseries``), with :func:`hidden_by_filter`'s answer.

    Returns:
        A summary of the new filter.

    Raises:
        FormatError: The file is corrupt (it is left untouched).
        StaleSourceError: The file changed while it was being repaired (left untouched).
        BloomskipError: The rewritten metadata would not fit the format.
        OSError: The file or its directory cannot be read or written.

    Example:
        >>> repair_filter("cjk.tsfile", variant="signed-tail").hidden_series  # doctest: +SKIP
        {'cpp': 3}
    """
    signed_tail_flags(variant)
    path = os.fspath(file)
    with TsFileReader(path, charset=charset) as reader:
        metadata = reader.metadata
        before = os.fstat(reader.fileno())
        paths = reader.series_paths()
        new_filter = _rebuilt_filter(paths, variant, error_rate, charset)
        hidden = hidden_by_filter(new_filter, reader.series(), charset)
        if hidden and on_hidden is not None:
            on_hidden(hidden)
        serialized = new_filter.to_bytes()
        if reader.version == 3 and not new_filter.serialized_bits():
            # v3 stores bit_count and k even after an empty bit vector.
            serialized += encode_uvarint(new_filter.bit_count)
            serialized += encode_uvarint(new_filter.hash_function_count)
        head = reader.read_bytes(
            metadata.start, metadata.filter_start - metadata.start, "TsFileMetadata"
        )
        properties = reader.read_bytes(
            metadata.filter_end, metadata.end - metadata.filter_end, "properties"
        )
        new_metadata = head + serialized + properties
        if len(new_metadata) > INT32_MAX:
            raise BloomskipError("the rewritten TsFileMetadata would exceed 2**31 - 1 bytes")
        tail = new_metadata + encode_i32(len(new_metadata)) + MAGIC

        def check_before_replace(temporary: Path) -> None:
            _check_rewritten(str(temporary), paths, variant, charset)
            after = os.stat(path)
            unchanged = (before.st_size, before.st_mtime_ns, before.st_ino)
            if (after.st_size, after.st_mtime_ns, after.st_ino) != unchanged:
                raise StaleSourceError(f"{path} changed while its filter was being rewritten")

        with atomic_writer(path, before_replace=check_before_replace) as output:
            _copy_range(reader.fileno(), output.fileno(), metadata.start)
            output.seek(metadata.start)
            output.write(tail)
    return RepairResult(
        file=path,
        target=os.fspath(final_target(path)),
        variant=variant,
        series_count=len(paths),
        bit_count=new_filter.bit_count,
        hash_function_count=new_filter.hash_function_count,
        byte_length=new_filter.byte_length,
        old_filter_bytes=metadata.filter_end - metadata.filter_start,
        new_filter_bytes=len(serialized),
        size_before=before.st_size,
        size_after=metadata.start + len(tail),
        hidden_series={reader: len(missed) for reader, missed in hidden.items()},
    )


def hidden_by_filter(
    bloom_filter: BloomFilter, series: list[Series], charset: str = DEFAULT_CHARSET
) -> dict[str, list[str]]:
    """The series a filter hides from each reader: those whose check fails under the reader's
    hash, on a query path that consults the filter and could otherwise return them (time
    columns and the reader's own misses left out), by the one rule
    :func:`~bloomskip.tsfile.analysis.query_misses` that ``verify`` applies too.

    Args:
        bloom_filter: The filter, e.g. a repair's new one before it is written.
        series: The file's series (:meth:`TsFileReader.series`).
        charset: The Java readers' charset (C++ readers hash UTF-8).

    Returns:
        ``{reader: paths}`` for each key of :data:`~bloomskip.tsfile.analysis.READERS` that
        misses at least one series; empty when every reader finds every series.

    Example:
        >>> with TsFileReader("cjk.tsfile") as reader:  # doctest: +SKIP
        ...     new = BloomFilter.for_paths(reader.series_paths(), variant="signed-tail")
        ...     hidden_by_filter(new, reader.series())
        {'cpp': ['root.sg.设备.温度', 'root.sg.设备.湿度', 'root.sg.设备.状态']}
    """
    paths = [item.path for item in series]
    accepted = {
        kind: bloom_filter.contains_with(reader_batch(paths, signed_tail, charset), signed_tail)
        for kind, signed_tail in READER_KINDS.items()
    }
    hidden, _ = query_misses(series, accepted)
    return {
        key: list(dict.fromkeys(path for listed in per_path.values() for path in listed))
        for key, per_path in hidden.items()
        if any(per_path.values())
    }


def _rebuilt_filter(
    paths: list[str], variant: HashVariant, error_rate: float, charset: str
) -> BloomFilter:
    """The writer-sized filter in which each intended kind of reader finds every path.

    Java readers hash ``charset``, C++ readers UTF-8 (:func:`reader_batch`); in UTF-8 the
    filter is the writers' own. Otherwise each reader kind's bytes go in with its tail, and
    sizing counts a path twice where the two differ.
    """
    if is_utf8(charset) or variant == "signed-tail":
        return BloomFilter.for_paths(paths, error_rate, variant=variant, charset=charset)
    if variant == "unsigned-tail":
        return BloomFilter.for_paths(
            reader_batch(paths, False, charset), error_rate, variant=variant
        )
    java, native = reader_batch(paths, True, charset), reader_batch(paths, False, charset)
    native_differs = variants_differ(native)
    count = len(paths) + sum(
        java_bytes != native_bytes or bool(differ)
        for java_bytes, native_bytes, differ in zip(java, native, native_differs, strict=True)
    )
    result = BloomFilter.sized(count, error_rate, variant="signed-tail", charset=charset)
    result.update(java)
    native_part = BloomFilter(result.bit_count, result.hash_function_count, variant="unsigned-tail")
    native_part.update(native)
    return result | native_part


def _copy_range(source_fd: int, target_fd: int, length: int) -> None:
    """Copy the first ``length`` bytes of ``source_fd`` to the start of ``target_fd``."""
    offset = 0
    try:
        while offset < length:
            copied = os.copy_file_range(
                source_fd, target_fd, min(_COPY_CHUNK, length - offset), offset, offset
            )
            if copied == 0:
                raise FormatError(
                    "file ended before TsFileMetadata while copying", field="data", offset=offset
                )
            offset += copied
        return
    except OSError as exc:
        # Some file systems and kernels do not offer copy_file_range; copy through memory.
        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise
    except AttributeError:
        pass
    while offset < length:
        chunk = os.pread(source_fd, min(_COPY_CHUNK, length - offset), offset)
        if not chunk:
            raise FormatError(
                "file ended before TsFileMetadata while copying", field="data", offset=offset
            )
        os.pwrite(target_fd, chunk, offset)
        offset += len(chunk)


def _check_rewritten(temporary: str, paths: list[str], variant: HashVariant, charset: str) -> None:
    """Read the new file back: same series, and every intended reader finds all of them."""
    with TsFileReader(temporary, charset=charset) as reader:
        if reader.series_paths() != paths:
            raise BloomskipError("the rewritten file lists different series; not replacing")
        analysis = analyze_filter(reader)
    for kind, signed_tail in READER_KINDS.items():
        if signed_tail in signed_tail_flags(variant) and analysis.rejected[kind]:
            raise BloomskipError(f"the rewritten filter still rejects series for {kind} readers")
