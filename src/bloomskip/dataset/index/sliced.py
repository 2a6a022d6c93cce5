"""A bit-sliced ("transposed") part: one skip index's granules, laid out so a probe reads only
the bit positions it tests, across every granule, in a few small byte ranges.

A plain index stores granule by granule, so a point lookup reads every granule's whole filter.
Here the granules of one index column that share a filter width W form a *bucket*, and the
bucket stores ``8 * W`` *slices*: slice p holds bit p of every member's filter, one bit per
member. A value whose k hash positions are p1..pk in width W then needs k slices of that bucket,
and the bits of each member in those slices decide exactly what its own filter would decide:
the decisions stay ClickHouse's (the same positions, the same bits; only their order on disk
changes). ``docs/sliced-layout.md`` writes format 1 down field by field.

A lookup runs in two passes so that all its reads are one batch:

1. :meth:`SlicedGranules.plan` runs the condition against the part with every probe answering
   "may match" while it notes the slices each probe would test; it returns their byte ranges.
2. :meth:`SlicedGranules.fetch` reads exactly those ranges with ONE call of the caller's
   ``read_ranges`` and checks each block's CRC32; then ``condition.may_match(granules)`` runs
   for real on the fetched slices (:func:`may_match` does the three steps).

Example:
    >>> import pyarrow as pa
    >>> from bloomskip.clickhouse.condition import compile_condition
    >>> from bloomskip.clickhouse.ddl import parse_index_definition
    >>> from bloomskip.clickhouse.index import SkipIndex
    >>> d = parse_index_definition("v TYPE bloom_filter(0.01)")
    >>> index = SkipIndex.build(d, pa.table({"v": list(range(40))}), [10, 10, 10, 10])
    >>> part = encode_part(index.granules)
    >>> header = read_part_header(part)
    >>> def read_ranges(ranges):
    ...     return [part[start : start + length] for start, length in ranges]
    >>> condition = compile_condition("v = 25", d, {"v": "Int64"})
    >>> may_match(condition, header, read_ranges).tolist()
    [False, False, True, False]
    >>> decode_part(part).to_bytes() == index.granules.to_bytes()
    True
"""

from __future__ import annotations

import hashlib
import itertools
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from bloomskip.clickhouse.granule import BloomFilterGranules, Granules, TextGranules
from bloomskip.errors import FormatError, TruncatedError

if TYPE_CHECKING:
    from bloomskip.clickhouse.condition import IndexCondition
    from bloomskip.clickhouse.ddl import IndexDefinition

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "PREFIX_SIZE",
    "Bucket",
    "PartHeader",
    "ReadRanges",
    "SlicedBloomFilterGranules",
    "SlicedGranules",
    "SlicedTextGranules",
    "decode_part",
    "encode_part",
    "may_match",
    "part_header_length",
    "read_part_header",
    "sliced_granules",
]

#: The first 8 bytes of every sliced part.
MAGIC = b"BSKSLICE"
#: The format this module writes and the only one it reads.
FORMAT_VERSION = 1
#: Bytes of the fixed prefix (magic, version, flags, header length): enough to learn how long
#: the whole header is (:func:`part_header_length`).
PREFIX_SIZE = 16

#: ``read_ranges(ranges) -> chunks``: the bytes of each ``(offset, length)`` range of the part,
#: in the order given (offsets relative to the part's first byte).
ReadRanges = Callable[[list[tuple[int, int]]], list[bytes]]

_DIGEST_SIZE = 32  # SHA-256 of the header, its last field
_CRC_SIZE = 4
_FIXED_SIZE = 46  # the fields before the definition text
_BUCKET_RECORD = struct.Struct("<IIIIQ")  # width, members, slices per block, stride, total_rows
_KIND_BLOOM_FILTER = 1
_KIND_TEXT = 2
_NO_COUNT = 0

# Bounds checked before anything is allocated (a hostile header cannot ask for more).
MAX_HEADER_LENGTH = 1 << 28
MAX_GRANULES = (1 << 32) - 1
#: A part whose granules all have empty filters (no slices to bound their count) holds at most
#: this many.
MAX_EMPTY_GRANULES = 1 << 20
MAX_COLUMNS = 1024
MAX_DEFINITION_LENGTH = 1 << 16
MAX_WIDTH = (1 << 32) - 1
MAX_PART_LENGTH = 1 << 62
_MAX_TOTAL_ROWS = (1 << 63) - 1  # ClickHouse's VarUInt range

#: A block (slices sharing one CRC32) is made at least this long when the bucket is small, so
#: that the checksum stays a small share of the bytes (a 3-granule bucket's slice is 1 byte).
BLOCK_TARGET = 128
# Transposition works on this many filter bytes (granules x bytes) at once: the temporaries are
# about 17 times this (index gather, unpacked bits, packed slices), 34 MiB at most.
_CHUNK_CELLS = 1 << 21
# Probes AND at most this many slice bytes at once (IN lists of thousands of values).
_PROBE_CELLS = 1 << 23


# ------------------------------------------------------------------------------------------
# The header


@dataclass(frozen=True)
class Bucket:
    """The granules of one filter width, stored as ``8 * width`` slices.

    Attributes:
        width: Filter bytes of each member (0: empty filters, no slices, always "may match").
        members: Granule numbers of the members, ascending (``int64``); member m's bit in a
            slice is bit m of it (byte m // 8, bit m % 8).
        total_rows: bloom_filter: every member's ``total_rows`` (its distinct count), or None
            when they differ (``bits_per_row < 8``; :attr:`PartHeader.distinct_counts` has
            them); text indexes: None.
        slices_per_block: Slices that share one CRC32 (S); 1 unless the slices are tiny.
    """

    width: int
    members: np.ndarray
    total_rows: int | None
    slices_per_block: int

    @property
    def member_count(self) -> int:
        """Granules in the bucket."""
        return len(self.members)

    @property
    def slice_bytes(self) -> int:
        """Bytes of one slice: one bit per member, ``ceil(members / 8)``."""
        return (self.member_count + 7) // 8

    @property
    def payload_bytes(self) -> int:
        """Bytes of a block's slices: ``S * members`` bits back to back, ``ceil(S * Gb / 8)``
        (with S = 1, one slice of ``slice_bytes``)."""
        return (self.slices_per_block * self.member_count + 7) // 8

    @property
    def block_stride(self) -> int:
        """Bytes of one block: its slices and their CRC32."""
        return self.payload_bytes + _CRC_SIZE

    @property
    def block_count(self) -> int:
        """Blocks of the bucket, ``ceil(8 * width / S)`` (the last padded with zero slices)."""
        return -(-8 * self.width // self.slices_per_block)

    @property
    def byte_length(self) -> int:
        """Bytes the bucket takes in each column's region."""
        return self.block_count * self.block_stride


@dataclass(frozen=True)
class PartHeader:
    """What a sliced part's header says; every number was checked against the others.

    Attributes:
        definition: The index definition the part was written for.
        granule_count: Granules (G), numbered in segment order.
        header_length: Bytes of the header (the slices start here).
        part_length: Bytes of the whole part.
        buckets: The granules by filter width, ascending (shared by every index column).
        offsets: ``offsets[c][b]``: where bucket b's first block of index column c starts.
        bucket_of: ``int64[G]``: the bucket of each granule.
        distinct_counts: bloom_filter: each granule's ``total_rows`` (``int64[G]``); None for
            text indexes.
    """

    definition: IndexDefinition
    granule_count: int
    header_length: int
    part_length: int
    buckets: tuple[Bucket, ...]
    offsets: tuple[tuple[int, ...], ...]
    bucket_of: np.ndarray
    distinct_counts: np.ndarray | None

    @property
    def column_count(self) -> int:
        """Index columns."""
        return len(self.offsets)

    def block_range(self, column: int, bucket: int, block: int) -> tuple[int, int]:
        """``(offset, length)`` of a block (its slices and their CRC32) inside the part.

        Raises:
            IndexError: A column, bucket or block out of range.
        """
        entry = self.buckets[bucket]
        if not 0 <= block < entry.block_count:
            raise IndexError(f"block {block} out of range 0..{entry.block_count - 1}")
        return self.offsets[column][bucket] + block * entry.block_stride, entry.block_stride


class _Reader:
    """Little-endian fields of the header, each checked to lie inside it."""

    def __init__(self, data: bytes, end: int, source: str) -> None:
        self.data = data
        self.end = end
        self.position = 0
        self.source = source

    def take(self, size: int, name: str) -> bytes:
        if size > self.end - self.position:
            raise TruncatedError(
                f"sliced part header ends inside {name}: {size} bytes needed, "
                f"{self.end - self.position} left before the checksum",
                field=name, offset=self.position, source=self.source,
            )  # fmt: skip
        chunk = self.data[self.position : self.position + size]
        self.position += size
        return bytes(chunk)

    def number(self, size: int, name: str) -> int:
        return int.from_bytes(self.take(size, name), "little")


def _error(message: str, name: str, offset: int | None, source: str) -> FormatError:
    return FormatError(f"sliced part: {message}", field=name, offset=offset, source=source)


def part_header_length(prefix: bytes, source: str | None = None) -> int:
    """The header length a part's first :data:`PREFIX_SIZE` bytes announce.

    A reader that does not know the header's length reads the prefix (or a generous first
    range), then the rest of the header.

    Args:
        prefix: At least the part's first ``PREFIX_SIZE`` bytes.
        source: Name of the part, for error messages.

    Returns:
        The header's length in bytes (its SHA-256 included).

    Raises:
        FormatError: Fewer than ``PREFIX_SIZE`` bytes, a wrong magic, an unknown format version
            or flags, or a header length out of bounds (TruncatedError when too short).

    Example:
        >>> part_header_length(MAGIC + bytes([1, 0, 0, 0]) + (200).to_bytes(4, "little"))
        200
    """
    source = source or "sliced part"
    if len(prefix) < PREFIX_SIZE:
        raise TruncatedError(
            f"sliced part: {len(prefix)} bytes, the fixed prefix needs {PREFIX_SIZE}",
            field="magic", offset=0, source=source,
        )  # fmt: skip
    if bytes(prefix[:8]) != MAGIC:
        raise _error(f"magic {bytes(prefix[:8])!r}, expected {MAGIC!r}", "magic", 0, source)
    version, flags, length = struct.unpack_from("<HHI", prefix, 8)
    if version != FORMAT_VERSION:
        raise _error(
            f"format version {version}; this reader knows {FORMAT_VERSION}",
            "format_version", 8, source,
        )  # fmt: skip
    if flags:
        raise _error(f"flags {flags:#x}: format 1 defines none", "flags", 10, source)
    if not _FIXED_SIZE + _DIGEST_SIZE <= length <= MAX_HEADER_LENGTH:
        raise _error(
            f"header length {length} outside {_FIXED_SIZE + _DIGEST_SIZE}..{MAX_HEADER_LENGTH}",
            "header_length", 12, source,
        )  # fmt: skip
    return length


def read_part_header(
    data: bytes, source: str | None = None, part_size: int | None = None
) -> PartHeader:
    """Read and check a sliced part's header.

    The SHA-256 is checked first, then every count, width, offset and stride, before any array
    the header sizes is allocated (all from the header bytes, which bound them).

    Args:
        data: The part, or at least its first ``header_length`` bytes.
        source: Name of the part, for error messages.
        part_size: The part's size when known (the object's length): checked against the
            header's ``part_length``.

    Returns:
        The header.

    Raises:
        FormatError: Bytes that are not a valid format-1 header (TruncatedError when they end
            early); the message names the field and its offset.

    Example:
        >>> from bloomskip.clickhouse.ddl import parse_index_definition
        >>> d = parse_index_definition("s TYPE tokenbf_v1(64, 2, 0)")
        >>> header = read_part_header(encode_part(TextGranules(d, np.zeros((3, 64), np.uint8))))
        >>> header.granule_count, [b.width for b in header.buckets], header.header_length
        (3, [64], 159)
    """

    source = source or "sliced part"
    data = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    header_length = part_header_length(data, source)
    if len(data) < header_length:
        raise TruncatedError(
            f"sliced part: {len(data)} bytes, the header needs {header_length}",
            field="header", offset=len(data), source=source,
        )  # fmt: skip
    body_end = header_length - _DIGEST_SIZE
    digest = hashlib.sha256(data[:body_end]).digest()
    if digest != bytes(data[body_end:header_length]):
        raise _error("header SHA-256 mismatch", "header_sha256", body_end, source)
    reader = _Reader(data, body_end, source)
    reader.position = PREFIX_SIZE
    part_length = reader.number(8, "part_length")
    granule_count = reader.number(8, "granule_count")
    kind = reader.number(1, "kind")
    map_width = reader.number(1, "bucket_map_width")
    counts_flag = reader.number(1, "distinct_counts_flag")
    reserved = reader.number(1, "reserved")
    column_count = reader.number(2, "column_count")
    bucket_count = reader.number(4, "bucket_count")
    definition_length = reader.number(4, "definition_length")
    fixed = _Fixed(
        part_length, granule_count, kind, map_width, counts_flag, reserved, column_count,
        bucket_count, definition_length,
    )  # fmt: skip
    _check_fixed(fixed, header_length, part_size, source)
    definition = _read_definition(reader, fixed, source)
    records = []
    for b in range(bucket_count):
        offset = reader.position
        fields = _BUCKET_RECORD.unpack(reader.take(_BUCKET_RECORD.size, f"bucket[{b}]"))
        records.append((offset, *fields))
    if bucket_count == 1:
        # No bucket map to bound the granule count: the slices must hold G bits each (at least
        # W * G bytes) before G-sized arrays are made; a part of empty filters only, at most
        # MAX_EMPTY_GRANULES of them.
        record_offset, width, members = records[0][:3]
        room = part_length - header_length
        if members != granule_count or (
            width * granule_count > room if width else granule_count > MAX_EMPTY_GRANULES
        ):
            raise _error(
                f"{members} members of width {width} for {granule_count} granules in "
                f"{room} bytes of slices",
                "bucket[0].member_count", record_offset + 4, source,
            )  # fmt: skip
    offsets_position = reader.position
    column_offsets = np.frombuffer(
        reader.take(8 * bucket_count * column_count, "offsets"), "<u8"
    ).reshape(column_count, bucket_count)
    bucket_of, member_counts = _read_bucket_map(reader, fixed, source)
    counts_position = reader.position
    counts = _read_counts(reader, fixed, source)
    if reader.position != body_end:
        raise _error(
            f"{body_end - reader.position} unread header bytes", "header", reader.position, source
        )

    buckets = _make_buckets(records, member_counts, bucket_of, fixed, definition, source)
    counts = _checked_counts(buckets, bucket_of, counts, counts_position, fixed, definition, source)
    offsets = _slice_offsets(
        buckets, column_offsets, fixed, header_length, offsets_position, source
    )
    return PartHeader(
        definition=definition,
        granule_count=granule_count,
        header_length=header_length,
        part_length=part_length,
        buckets=tuple(buckets),
        offsets=tuple(offsets),
        bucket_of=bucket_of,
        distinct_counts=counts,
    )


class _Fixed(NamedTuple):
    """The fixed fields of a part's header."""

    part_length: int
    granule_count: int
    kind: int
    map_width: int
    counts_flag: int
    reserved: int
    column_count: int
    bucket_count: int
    definition_length: int


def _check_fixed(fixed: _Fixed, header_length: int, part_size: int | None, source: str) -> None:
    """Check the fixed fields against each other and the header's length."""
    part_length = fixed.part_length
    granule_count = fixed.granule_count
    kind = fixed.kind
    map_width = fixed.map_width
    counts_flag = fixed.counts_flag
    reserved = fixed.reserved
    column_count = fixed.column_count
    bucket_count = fixed.bucket_count
    definition_length = fixed.definition_length
    if not header_length <= part_length <= MAX_PART_LENGTH:
        raise _error(
            f"part length {part_length} outside {header_length}..{MAX_PART_LENGTH}",
            "part_length", 16, source,
        )  # fmt: skip
    if part_size is not None and part_size != part_length:
        raise _error(
            f"part length {part_length}, but the part has {part_size} bytes",
            "part_length", 16, source,
        )  # fmt: skip
    if granule_count > MAX_GRANULES:
        raise _error(f"granule count {granule_count} > {MAX_GRANULES}", "granule_count", 24, source)
    if kind not in (_KIND_BLOOM_FILTER, _KIND_TEXT):
        raise _error(f"unknown index kind {kind}", "kind", 32, source)
    if map_width not in (0, 1, 2, 4):
        raise _error(
            f"bucket map width {map_width} not 0, 1, 2 or 4", "bucket_map_width", 33, source
        )
    if counts_flag not in (0, 1) or (counts_flag and kind != _KIND_BLOOM_FILTER):
        raise _error(f"distinct counts flag {counts_flag}", "distinct_counts_flag", 34, source)
    if reserved:
        raise _error(f"reserved byte {reserved}, expected 0", "reserved", 35, source)
    if not 1 <= column_count <= MAX_COLUMNS:
        raise _error(
            f"column count {column_count} outside 1..{MAX_COLUMNS}", "column_count", 36, source
        )
    expected_buckets = "1" if kind == _KIND_TEXT else f"1..{granule_count}"
    if (
        (bucket_count == 0) != (granule_count == 0)
        or bucket_count > granule_count
        or (kind == _KIND_TEXT and granule_count and bucket_count != 1)
    ):
        raise _error(
            f"{bucket_count} buckets for {granule_count} granules (expected {expected_buckets})",
            "bucket_count", 38, source,
        )  # fmt: skip
    expected_map = (
        0 if bucket_count <= 1 else 1 if bucket_count <= 256 else 2 if bucket_count <= 65536 else 4
    )
    if map_width != expected_map:
        raise _error(
            f"bucket map width {map_width} for {bucket_count} buckets (expected {expected_map})",
            "bucket_map_width", 33, source,
        )  # fmt: skip
    if definition_length > MAX_DEFINITION_LENGTH:
        raise _error(
            f"definition length {definition_length} > {MAX_DEFINITION_LENGTH}",
            "definition_length", 42, source,
        )  # fmt: skip
    # Every table the counts size must fit in the header before it is read.
    needed = (
        _FIXED_SIZE
        + definition_length
        + bucket_count * (_BUCKET_RECORD.size + 8 * column_count)
        + granule_count * (map_width + 8 * counts_flag)
        + _DIGEST_SIZE
    )
    if needed != header_length:
        raise _error(
            f"the counts need a header of {needed} bytes, the header has {header_length}",
            "header_length", 12, source,
        )  # fmt: skip


def _read_definition(reader: _Reader, fixed: _Fixed, source: str) -> IndexDefinition:
    """The header's index definition, checked against its kind and column count."""
    from bloomskip.clickhouse.ddl import parse_index_definition

    kind = fixed.kind
    column_count = fixed.column_count
    definition_length = fixed.definition_length
    definition_offset = reader.position
    try:
        text = reader.take(definition_length, "definition").decode("utf-8")
        definition = parse_index_definition(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise _error(
            f"definition unreadable: {exc}", "definition", definition_offset, source
        ) from exc
    if definition.to_sql() != text:
        raise _error(
            f"definition {text!r} is not in canonical form {definition.to_sql()!r}",
            "definition", definition_offset, source,
        )  # fmt: skip
    is_bloom = definition.type == "bloom_filter"
    if is_bloom != (kind == _KIND_BLOOM_FILTER):
        raise _error(f"kind {kind} for a {definition.type} definition", "kind", 32, source)
    if column_count != len(definition.expressions):
        raise _error(
            f"{column_count} columns, the definition has {len(definition.expressions)}",
            "column_count", 36, source,
        )  # fmt: skip
    return definition


def _read_bucket_map(reader: _Reader, fixed: _Fixed, source: str) -> tuple[np.ndarray, np.ndarray]:
    """Each granule's bucket, and each bucket's member count."""
    granule_count = fixed.granule_count
    map_width = fixed.map_width
    bucket_count = fixed.bucket_count
    map_position = reader.position
    if bucket_count > 1:
        raw_map = reader.take(map_width * granule_count, "bucket_map")
        bucket_of = np.frombuffer(raw_map, f"<u{map_width}").astype(np.int64)
        if bucket_of.size and int(bucket_of.max()) >= bucket_count:
            bad = int(np.flatnonzero(bucket_of >= bucket_count)[0])
            raise _error(
                f"granule {bad} in bucket {int(bucket_of[bad])} of {bucket_count}",
                "bucket_map", map_position + bad * map_width, source,
            )  # fmt: skip
        member_counts = np.bincount(bucket_of, minlength=bucket_count)
    else:
        bucket_of = np.zeros(granule_count, np.int64)
        member_counts = np.array([granule_count] * bucket_count, np.int64)
    return bucket_of, member_counts


def _read_counts(reader: _Reader, fixed: _Fixed, source: str) -> np.ndarray | None:
    """Each granule's distinct count, where the header keeps them."""
    granule_count = fixed.granule_count
    counts_flag = fixed.counts_flag
    counts_position = reader.position
    counts = None
    if counts_flag:
        counts = np.frombuffer(reader.take(8 * granule_count, "distinct_counts"), "<u8")
        if counts.size and int(counts.max()) > _MAX_TOTAL_ROWS:
            bad = int(np.flatnonzero(counts > _MAX_TOTAL_ROWS)[0])
            raise _error(
                f"granule {bad}: total_rows {int(counts[bad])} > {_MAX_TOTAL_ROWS}",
                "distinct_counts", counts_position + 8 * bad, source,
            )  # fmt: skip
        counts = counts.astype(np.int64)
    return counts


def _make_buckets(
    records: list,
    member_counts: np.ndarray,
    bucket_of: np.ndarray,
    fixed: _Fixed,
    definition: IndexDefinition,
    source: str,
) -> list[Bucket]:
    """The buckets the records describe, each checked."""
    kind = fixed.kind
    counts_flag = fixed.counts_flag
    buckets = []
    previous_width = -1
    order = np.argsort(bucket_of, kind="stable")
    first_member = 0
    for b, (record_offset, width, members, per_block, stride, total_rows) in enumerate(records):
        name = f"bucket[{b}]"
        if width <= previous_width:
            raise _error(
                f"width {width} after {previous_width}: widths must ascend",
                f"{name}.width", record_offset, source,
            )  # fmt: skip
        previous_width = width
        if kind == _KIND_TEXT and width != definition.size_bytes:
            raise _error(
                f"width {width}, the definition's size_bytes is {definition.size_bytes}",
                f"{name}.width", record_offset, source,
            )  # fmt: skip
        if members != int(member_counts[b]) or members == 0:
            raise _error(
                f"{members} members, the bucket map gives {int(member_counts[b])}",
                f"{name}.member_count", record_offset + 4, source,
            )  # fmt: skip
        if not 1 <= per_block <= max(1, 8 * width):
            raise _error(
                f"{per_block} slices per block outside 1..{max(1, 8 * width)}",
                f"{name}.slices_per_block", record_offset + 8, source,
            )  # fmt: skip
        if stride != (per_block * members + 7) // 8 + _CRC_SIZE:
            raise _error(
                f"block stride {stride} != ceil({per_block} x {members} / 8) + {_CRC_SIZE}",
                f"{name}.block_stride", record_offset + 12, source,
            )  # fmt: skip
        if kind == _KIND_TEXT or counts_flag:
            if total_rows != _NO_COUNT:
                raise _error(
                    f"total_rows {total_rows}, expected {_NO_COUNT} (counts kept elsewhere)",
                    f"{name}.total_rows", record_offset + 16, source,
                )  # fmt: skip
            bucket_rows = None
        else:
            if total_rows > _MAX_TOTAL_ROWS or _bloom_width(definition, total_rows) != width:
                raise _error(
                    f"total_rows {total_rows} does not give width {width}",
                    f"{name}.total_rows", record_offset + 16, source,
                )  # fmt: skip
            bucket_rows = total_rows
        chosen = order[first_member : first_member + members]
        first_member += members
        buckets.append(Bucket(width, chosen, bucket_rows, per_block))
    return buckets


def _checked_counts(
    buckets: list[Bucket],
    bucket_of: np.ndarray,
    counts: np.ndarray | None,
    counts_position: int,
    fixed: _Fixed,
    definition: IndexDefinition,
    source: str,
) -> np.ndarray | None:
    """bloom_filter: each granule's distinct count, checked against its bucket's width."""
    granule_count = fixed.granule_count
    is_bloom = definition.type == "bloom_filter"
    if counts is not None:
        widths = np.array([bucket.width for bucket in buckets], np.int64)
        expected = widths[bucket_of] if granule_count else np.zeros(0, np.int64)
        got = _bloom_widths(definition, counts)
        if not np.array_equal(got, expected):
            bad = int(np.flatnonzero(got != expected)[0])
            raise _error(
                f"granule {bad}: total_rows {int(counts[bad])} gives width {int(got[bad])}, "
                f"its bucket has {int(expected[bad])}",
                "distinct_counts", counts_position + 8 * bad, source,
            )  # fmt: skip
    elif is_bloom:
        rows = np.array([bucket.total_rows for bucket in buckets], np.int64)
        counts = rows[bucket_of] if granule_count else np.zeros(0, np.int64)
    return counts


def _slice_offsets(
    buckets: list[Bucket],
    column_offsets: np.ndarray,
    fixed: _Fixed,
    header_length: int,
    offsets_position: int,
    source: str,
) -> list:
    """Where each column's bucket starts, checked: back to back after the header."""
    part_length = fixed.part_length
    column_count = fixed.column_count
    bucket_count = fixed.bucket_count
    position = header_length
    # The slices: column by column, bucket by bucket, back to back after the header.
    offsets = []
    for c in range(column_count):
        row = []
        for b, bucket in enumerate(buckets):
            stored = int(column_offsets[c, b])
            if stored != position:
                raise _error(
                    f"column {c} bucket {b} at {stored}, expected {position}",
                    f"offsets[{c}][{b}]", offsets_position + 8 * (c * bucket_count + b), source,
                )  # fmt: skip
            row.append(position)
            position += bucket.byte_length
        offsets.append(tuple(row))
    if position != part_length:
        raise _error(
            f"the buckets end at {position}, the part at {part_length}", "part_length", 16, source
        )
    return offsets


def _bloom_width(definition: IndexDefinition, total_rows: int) -> int:
    return (definition.bits_per_row * total_rows + 7) // 8


def _bloom_widths(definition: IndexDefinition, counts: np.ndarray) -> np.ndarray:
    # Python ints for huge counts (no int64 overflow), numpy otherwise.
    if counts.size and int(counts.max()) > (1 << 58):
        return np.array([_bloom_width(definition, int(n)) for n in counts.tolist()], object)
    return (definition.bits_per_row * counts + 7) // 8


# ------------------------------------------------------------------------------------------
# Encoding


def _varuint_lengths(values: np.ndarray) -> np.ndarray:
    """Bytes of each value's VarUInt (1..9)."""
    lengths = np.ones(values.shape, np.int64)
    for i in range(1, 9):
        lengths += values >= (1 << (7 * i))
    return lengths


def _slices_per_block(members: int, width: int) -> int:
    return max(1, min(8 * BLOCK_TARGET // members, 8 * width))


def _pack_blocks(slices: np.ndarray, bucket: Bucket) -> np.ndarray:
    """``(blocks, payload_bytes)`` from ``(blocks * S, slice_bytes)`` slices: each block's S
    slices as ``S * members`` bits back to back (no padding between slices)."""
    bits = np.unpackbits(slices, axis=1, count=bucket.member_count, bitorder="little")
    bits = bits.reshape(-1, bucket.slices_per_block * bucket.member_count)
    return np.packbits(bits, axis=1, bitorder="little")


def _unpack_blocks(payload: np.ndarray, bucket: Bucket) -> np.ndarray:
    """The inverse of :func:`_pack_blocks`: ``(blocks, S, slice_bytes)``."""
    per_block, members = bucket.slices_per_block, bucket.member_count
    if per_block == 1:
        return payload.reshape(len(payload), 1, bucket.slice_bytes)
    bits = np.unpackbits(payload, axis=1, count=per_block * members, bitorder="little")
    slices = np.packbits(bits.reshape(-1, members), axis=1, bitorder="little")
    return slices.reshape(len(payload), per_block, bucket.slice_bytes)


def _rows(buffer: np.ndarray, starts: np.ndarray, first: int, last: int) -> np.ndarray | None:
    """A strided view of bytes first..last of the filters at ``starts`` when they are evenly
    spaced (text indexes, and bloom_filter parts of one width); None otherwise."""
    if len(starts) < 2:
        return None
    step = int(starts[1] - starts[0])
    if step < last - first or (np.diff(starts) != step).any():
        return None
    base = int(starts[0]) + first
    if base < 0 or base + step * (len(starts) - 1) + (last - first) > len(buffer):
        return None
    return np.lib.stride_tricks.as_strided(
        buffer[base:], shape=(len(starts), last - first), strides=(step, 1),
        writeable=buffer.flags.writeable,
    )  # fmt: skip


def _gather(buffer: np.ndarray, starts: np.ndarray, first: int, last: int) -> np.ndarray:
    """``(len(starts), last - first)`` uint8: bytes first..last of the filters at ``starts``
    (a read-only view or a copy)."""
    view = _rows(buffer, starts, first, last)
    if view is not None:
        return view
    return buffer[starts[:, None] + np.arange(first, last, dtype=np.int64)[None, :]]


def _scatter(
    payload: np.ndarray, starts: np.ndarray, first: int, last: int, values: np.ndarray
) -> None:
    """The inverse of :func:`_gather`: write ``values`` to bytes first..last at ``starts``."""
    view = _rows(payload, starts, first, last)
    if view is not None:
        view[...] = values
    else:
        payload[starts[:, None] + np.arange(first, last, dtype=np.int64)[None, :]] = values


def _transpose8(words: np.ndarray) -> np.ndarray:
    """Transpose the 8x8 bit matrix in each uint64 (bit ``8 * r + c`` <-> bit ``8 * c + r``).

    Byte r of a word holds row r; afterwards byte c holds column c (Hacker's Delight,
    ``transpose8``). Its own inverse.
    """
    x = words
    for shift, mask in (
        (7, 0x00AA00AA00AA00AA),
        (14, 0x0000CCCC0000CCCC),
        (28, 0x00000000F0F0F0F0),
    ):
        t = (x ^ (x >> np.uint64(shift))) & np.uint64(mask)
        x = x ^ t ^ (t << np.uint64(shift))
    return x


def _transpose_bucket(buffer: np.ndarray, starts: np.ndarray, width: int, out: np.ndarray) -> None:
    """Write the slices of the filters at ``starts`` (``width`` bytes each) into ``out``.

    ``out`` is ``(8 * width, ceil(len(starts) / 8))`` uint8: row p is slice p. Eight members'
    byte w form an 8x8 bit matrix (one uint64) whose transpose is byte w8 + 0..7 of slices
    8w..8w+7 for those members.
    """
    members = len(starts)
    groups = (members + 7) // 8
    step = max(1, _CHUNK_CELLS // max(1, groups * 8))
    for first in range(0, width, step):
        last = min(width, first + step)
        filters = np.zeros((groups * 8, last - first), np.uint8)  # spare rows stay zero
        filters[:members] = _gather(buffer, starts, first, last)
        # (bytes, groups, 8): byte i of word (w, g) is member 8g + i's byte w.
        words = np.ascontiguousarray(filters.reshape(groups, 8, last - first).transpose(2, 0, 1))
        words = _transpose8(words.view(np.uint64).reshape(last - first, groups))
        # Byte p of word (w, g) is slice 8w + p's byte g.
        slices = words.view(np.uint8).reshape(last - first, groups, 8).transpose(0, 2, 1)
        out[8 * first : 8 * last] = slices.reshape(8 * (last - first), groups)


def encode_part(granules: BloomFilterGranules | TextGranules) -> bytes:
    """Encode one index's granules as a sliced part (header, then slices).

    Args:
        granules: Every granule of the index over one segment, in segment order.

    Returns:
        The part's bytes.

    Raises:
        TypeError: Granules of another kind (a sliced part cannot be re-encoded; decode it).
        ValueError: Granules that cannot be reproduced byte for byte (a bloom_filter granule
            whose ``total_rows`` VarUInt is not in its shortest form) or are out of bounds.

    Example:
        >>> from bloomskip.clickhouse.ddl import parse_index_definition
        >>> d = parse_index_definition("s TYPE tokenbf_v1(64, 2, 0)")
        >>> len(encode_part(TextGranules(d, np.zeros((3, 64), np.uint8))))
        423
    """
    if isinstance(granules, SlicedGranules) or not isinstance(
        granules, BloomFilterGranules | TextGranules
    ):
        raise TypeError(f"cannot encode {type(granules).__name__}; pass plain granules")
    definition = granules.definition
    count = len(granules)
    columns = granules.column_count
    if count > MAX_GRANULES or columns > MAX_COLUMNS:
        raise ValueError(f"{count} granules x {columns} columns exceed the format's bounds")
    is_bloom = isinstance(granules, BloomFilterGranules)
    widths = granules.filter_sizes().astype(np.int64)
    counts_flag = 0
    if is_bloom:
        counts = np.asarray(granules.distinct_counts, np.int64)
        if count and int(widths.max()) > MAX_WIDTH:
            raise ValueError(f"a filter of {int(widths.max())} bytes exceeds {MAX_WIDTH}")
        buffer = granules.column_filter_spans(0)[0]
        canonical = int(_varuint_lengths(counts).sum() + columns * widths.sum())
        if len(buffer) != canonical:
            raise ValueError(
                f"the granules take {len(buffer)} bytes, {canonical} with shortest VarUInt "
                "total_rows: they would not decode byte for byte"
            )
    bucket_widths, bucket_of = np.unique(widths, return_inverse=True)
    bucket_of = bucket_of.reshape(-1).astype(np.int64)
    order = np.argsort(bucket_of, kind="stable")
    sizes = np.bincount(bucket_of, minlength=len(bucket_widths))
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    buckets = []
    for b, width in enumerate(bucket_widths.tolist()):
        members = order[bounds[b] : bounds[b + 1]]
        total_rows = None
        if is_bloom:
            member_counts = counts[members]
            if (member_counts == member_counts[0]).all():
                total_rows = int(member_counts[0])
            else:
                counts_flag = 1
        buckets.append(Bucket(width, members, total_rows, _slices_per_block(len(members), width)))
    bucket_count = len(buckets)
    map_width = (
        0 if bucket_count <= 1 else 1 if bucket_count <= 256 else 2 if bucket_count <= 65536 else 4
    )
    text = definition.to_sql().encode("utf-8")
    header_length = (
        _FIXED_SIZE
        + len(text)
        + bucket_count * (_BUCKET_RECORD.size + 8 * columns)
        + count * (map_width + 8 * counts_flag)
        + _DIGEST_SIZE
    )
    if header_length > MAX_HEADER_LENGTH:
        raise ValueError(f"a header of {header_length} bytes exceeds {MAX_HEADER_LENGTH}")
    offsets = []
    position = header_length
    for _ in range(columns):
        row = []
        for bucket in buckets:
            row.append(position)
            position += bucket.byte_length
        offsets.append(row)
    part_length = position

    header = bytearray()
    header += MAGIC
    header += struct.pack("<HHI", FORMAT_VERSION, 0, header_length)
    header += struct.pack("<QQ", part_length, count)
    kind = _KIND_BLOOM_FILTER if is_bloom else _KIND_TEXT
    header += struct.pack(
        "<BBBBHII", kind, map_width, counts_flag, 0, columns, bucket_count, len(text)
    )
    header += text
    for bucket in buckets:
        rows = _NO_COUNT if bucket.total_rows is None or counts_flag else bucket.total_rows
        header += _BUCKET_RECORD.pack(
            bucket.width, bucket.member_count, bucket.slices_per_block, bucket.block_stride, rows
        )
    header += np.asarray(offsets, "<u8").reshape(-1).tobytes()
    if map_width:
        header += bucket_of.astype(f"<u{map_width}").tobytes()
    if counts_flag:
        header += counts.astype("<u8").tobytes()
    header += hashlib.sha256(header).digest()
    assert len(header) == header_length

    out = np.zeros(part_length, np.uint8)
    out[:header_length] = np.frombuffer(bytes(header), np.uint8)
    for c in range(columns):
        buffer, starts, _ = granules.column_filter_spans(c)
        buffer = np.asarray(buffer, np.uint8)
        for b, bucket in enumerate(buckets):
            if not bucket.width:
                continue
            _write_bucket(out, offsets[c][b], bucket, buffer, starts[bucket.members])
    return out.tobytes()


def _write_bucket(
    out: np.ndarray, offset: int, bucket: Bucket, buffer: np.ndarray, starts: np.ndarray
) -> None:
    """Transpose one bucket of one column into its blocks at ``out[offset:]``, with CRCs."""
    per_block, slice_bytes = bucket.slices_per_block, bucket.slice_bytes
    blocks = out[offset : offset + bucket.byte_length].reshape(
        bucket.block_count, bucket.block_stride
    )
    payload = blocks[:, : bucket.payload_bytes]
    if per_block == 1:  # the usual case: transpose straight into place
        _transpose_bucket(buffer, starts, bucket.width, payload)
    else:  # small buckets: slices packed bit to bit, the last block padded with zero slices
        padded = np.zeros((bucket.block_count * per_block, slice_bytes), np.uint8)
        _transpose_bucket(buffer, starts, bucket.width, padded[: 8 * bucket.width])
        payload[:] = _pack_blocks(padded, bucket)
    crc = np.fromiter((zlib.crc32(row) for row in payload), np.uint32, count=bucket.block_count)
    blocks[:, bucket.payload_bytes :] = crc.astype("<u4").view(np.uint8).reshape(-1, 4)


# ------------------------------------------------------------------------------------------
# Decoding


def _verify_blocks(
    blocks: np.ndarray,
    bucket: Bucket,
    column: int,
    index: int,
    first_block: int,
    offset: int,
    source: str,
) -> None:
    """Check the CRC32 of each row of ``blocks`` (block ``first_block + i`` of the bucket)."""
    payload_bytes = bucket.payload_bytes
    stored = blocks[:, payload_bytes:].copy().view("<u4").reshape(-1)
    for i, row in enumerate(blocks[:, :payload_bytes]):
        if zlib.crc32(row) != int(stored[i]):
            block = first_block + i
            raise _slice_error(
                bucket, column, index, block, offset + i * bucket.block_stride, source
            )


def _slice_error(
    bucket: Bucket, column: int, index: int, block: int, offset: int, source: str
) -> FormatError:
    first = block * bucket.slices_per_block
    last = min(first + bucket.slices_per_block, 8 * bucket.width) - 1
    slices = f"slice {first}" if first == last else f"slices {first}..{last}"
    return FormatError(
        f"sliced part: CRC32 mismatch in column {column} bucket {index} (width {bucket.width}) "
        f"{slices} (block {block})",
        field=f"column[{column}].bucket[{index}].slice[{first}]",
        offset=offset,
        source=source,
    )


def decode_part(
    data: bytes,
    definition: IndexDefinition | None = None,
    source: str | None = None,
    index_column_types: Sequence[str] | None = None,
) -> BloomFilterGranules | TextGranules:
    """Rebuild the per-granule filters of a sliced part (for inspection, compaction, migration).

    Args:
        data: The whole part.
        definition: The index definition the part must have been written for (its header's
            definition is used when None).
        source: Name of the part, for error messages.
        index_column_types: ClickHouse type of each index column, if known.

    Returns:
        Granules whose ``to_bytes()`` equals the encoded granules' byte for byte.

    Raises:
        FormatError: A bad header, a part of another length, another definition, a CRC32
            mismatch or non-zero padding bits (the message names the field or slice).

    Example:
        >>> from bloomskip.clickhouse.ddl import parse_index_definition
        >>> d = parse_index_definition("s TYPE tokenbf_v1(64, 2, 0)")
        >>> g = TextGranules(d, np.arange(192, dtype=np.uint8).reshape(3, 64))
        >>> decode_part(encode_part(g), d).to_bytes() == g.to_bytes()
        True
    """
    source = source or "sliced part"
    header = read_part_header(data, source, part_size=len(data))
    if definition is not None and definition.to_sql() != header.definition.to_sql():
        raise _error(
            f"written for {header.definition.to_sql()!r}, expected {definition.to_sql()!r}",
            "definition", _FIXED_SIZE, source,
        )  # fmt: skip
    definition = header.definition
    raw = np.frombuffer(data, np.uint8)
    count, columns = header.granule_count, header.column_count
    widths = np.zeros(count, np.int64)
    for bucket in header.buckets:
        widths[bucket.members] = bucket.width
    if definition.type == "bloom_filter":
        counts = header.distinct_counts
        varint = _varuint_lengths(counts)
        granule_offsets = np.zeros(count + 1, np.int64)
        np.cumsum(varint + columns * widths, out=granule_offsets[1:])
        payload = np.zeros(int(granule_offsets[-1]), np.uint8)
        starts = granule_offsets[:-1]
        values = counts.astype(np.uint64)
        for i in range(9):
            here = varint > i
            byte = (values[here] >> np.uint64(7 * i)) & np.uint64(0x7F)
            more = (varint[here] > i + 1).astype(np.uint64) << np.uint64(7)
            payload[starts[here] + i] = (byte | more).astype(np.uint8)
        filter_starts = starts + varint  # column c at + c * width
        row_bytes = None
    else:
        row_bytes = columns * (definition.size_bytes or 0)
        payload = np.zeros(count * row_bytes, np.uint8)
        filter_starts = np.arange(count, dtype=np.int64) * row_bytes
    for c in range(columns):
        for b, bucket in enumerate(header.buckets):
            if not bucket.width:
                continue
            offset = header.offsets[c][b]
            blocks = raw[offset : offset + bucket.byte_length].reshape(
                bucket.block_count, bucket.block_stride
            )
            _verify_blocks(blocks, bucket, c, b, 0, offset, source)
            payload_part = blocks[:, : bucket.payload_bytes]
            _check_padding(payload_part, bucket, c, b, offset, source)
            slices = _unpack_blocks(payload_part, bucket).reshape(-1, bucket.slice_bytes)
            targets = filter_starts[bucket.members] + c * bucket.width
            _untranspose_bucket(slices, bucket, payload, targets)
    if row_bytes is None:
        return BloomFilterGranules(
            definition, payload.tobytes(), granule_offsets, counts.copy(), index_column_types
        )
    return TextGranules(definition, payload.reshape(count, row_bytes), index_column_types)


def _check_padding(
    payload: np.ndarray, bucket: Bucket, column: int, index: int, offset: int, source: str
) -> None:
    """A block's spare bits (after its S * members bits) and the last block's padding slices
    (after slice 8W - 1) are zero: ``payload`` is ``(blocks, payload_bytes)``."""
    per_block, members = bucket.slices_per_block, bucket.member_count
    spare = 8 * bucket.payload_bytes - per_block * members
    bad = []
    if spare:
        mask = np.uint8((0xFF << (8 - spare)) & 0xFF)
        bad = np.flatnonzero(payload[:, -1] & mask).tolist()
    slice_count = 8 * bucket.width
    padding = bucket.block_count * per_block - slice_count
    if not bad and padding:
        bits = np.unpackbits(payload[-1], count=per_block * members, bitorder="little")
        if bits[(per_block - padding) * members :].any():
            bad = [bucket.block_count - 1]
    if bad:
        block = int(bad[0])
        p = block * per_block
        raise FormatError(
            f"sliced part: non-zero padding in column {column} bucket {index} block {block} "
            f"(slice {p})",
            field=f"column[{column}].bucket[{index}].slice[{p}]",
            offset=offset + block * bucket.block_stride, source=source,
        )  # fmt: skip


def _untranspose_bucket(
    slices: np.ndarray, bucket: Bucket, payload: np.ndarray, targets: np.ndarray
) -> None:
    """Write each member's filter (``bucket.width`` bytes) to ``payload[targets[m]:]``.

    The inverse of :func:`_transpose_bucket` (the 8x8 bit transpose is its own inverse).
    """
    members, width, groups = bucket.member_count, bucket.width, bucket.slice_bytes
    step = max(1, _CHUNK_CELLS // max(1, groups * 8))
    for first in range(0, width, step):
        last = min(width, first + step)
        # (bytes, groups, 8): byte p of word (w, g) is slice 8w + p's byte g.
        words = slices[8 * first : 8 * last].reshape(last - first, 8, groups).transpose(0, 2, 1)
        words = _transpose8(np.ascontiguousarray(words).view(np.uint64).reshape(-1, groups))
        # Byte i of word (w, g) is member 8g + i's byte w.
        filters = words.view(np.uint8).reshape(last - first, groups * 8).T[:members]
        _scatter(payload, targets, first, last, filters)


# ------------------------------------------------------------------------------------------
# Probing


class SlicedGranules(Granules):
    """The granules of a sliced part, answering probes from fetched slices.

    Use :func:`sliced_granules`, which returns a :class:`SlicedBloomFilterGranules` or a
    :class:`SlicedTextGranules` (subclasses of the plain granule kinds, so
    ``IndexCondition.may_match`` accepts them unchanged). Only the probes (``len``,
    ``hashes_present`` / ``token_sets_present``) are answered; :func:`decode_part` rebuilds the
    filters for anything else.
    """

    header: PartHeader
    source: str

    def _setup(self, header: PartHeader, source: str | None) -> None:
        self.header = header
        self.source = source or "sliced part"
        # While planning: (column, bucket) -> the arrays of block numbers the probes test.
        self._recording: dict[tuple[int, int], list[np.ndarray]] | None = None
        # (column, bucket) -> (sorted fetched block numbers, their slices (n, S, slice_bytes))
        self._fetched: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        starts, keys = [], []
        for c, row in enumerate(header.offsets):
            for b, offset in enumerate(row):
                if header.buckets[b].byte_length:
                    starts.append(offset)
                    keys.append((c, b))
        self._region_starts = np.array(starts, np.int64)
        self._region_keys = np.array(keys, np.int64).reshape(-1, 2)
        self._block_strides = np.array([bucket.block_stride for bucket in header.buckets], np.int64)
        self._block_counts = np.array([bucket.block_count for bucket in header.buckets], np.int64)

    def __len__(self) -> int:
        return self.header.granule_count

    def plan(self, condition: IndexCondition) -> list[tuple[int, int]]:
        """The byte ranges ``condition.may_match(self)`` will read: the recording pass.

        The condition runs with every probe answering "may match" while noting the blocks
        (slices and their CRC32) it tests; its atoms do not depend on each other's answers,
        so the real pass tests exactly these.

        Args:
            condition: A condition compiled for this part's index definition.

        Returns:
            Sorted, distinct ``(offset, length)`` ranges, offsets relative to the part.

        Raises:
            ValueError: A condition compiled for another index definition.
        """
        if not _same_index(condition.definition, self.header.definition):
            raise ValueError(
                f"the condition is for {condition.definition.to_sql()!r}, the part for "
                f"{self.header.definition.to_sql()!r}"
            )
        return self.plan_probes(lambda: condition.may_match(self))

    def plan_probes(self, probes: Callable[[], object]) -> list[tuple[int, int]]:
        """The byte ranges the probes ``probes()`` makes of this part will read (see
        :meth:`plan`; every probe answers "may match" meanwhile).

        Returns:
            Sorted, distinct ``(offset, length)`` ranges, offsets relative to the part.
        """
        self._recording = {}
        try:
            probes()
            recorded = self._recording
        finally:
            self._recording = None
        ranges: list[tuple[int, int]] = []
        for c, b in sorted(recorded):
            blocks, _ = _distinct(np.concatenate(recorded[(c, b)]))
            stride = self.header.buckets[b].block_stride
            starts = self.header.offsets[c][b] + blocks * stride
            ranges.extend(zip(starts.tolist(), itertools.repeat(stride, len(starts)), strict=True))
        return ranges

    def fetch(self, ranges: list[tuple[int, int]], read_ranges: ReadRanges) -> int:
        """Read ``ranges`` (from :meth:`plan`) with one call of ``read_ranges``; check CRCs.

        Args:
            ranges: Block ranges, as :meth:`plan` returns them (several plans may be joined).
            read_ranges: Reads ``(offset, length)`` ranges of the part; called once (not at all
                when ``ranges`` is empty).

        Returns:
            Bytes read.

        Raises:
            FormatError: A short or missing chunk, or a CRC32 mismatch (naming the slices).
            ValueError: A range that is not one block of this part.
        """
        if not ranges:
            return 0
        columns, buckets, numbers = self._blocks_of(ranges)
        chunks = read_ranges(list(ranges))
        if len(chunks) != len(ranges):
            raise FormatError(
                f"sliced part: {len(chunks)} chunks read for {len(ranges)} ranges",
                field="slices", source=self.source,
            )  # fmt: skip
        sizes = np.fromiter(map(len, chunks), np.int64, len(chunks))
        strides = self._block_strides[buckets]
        if (sizes != strides).any():
            i = int(np.flatnonzero(sizes != strides)[0])
            c, b, block = int(columns[i]), int(buckets[i]), int(numbers[i])
            first = block * self.header.buckets[b].slices_per_block
            raise TruncatedError(
                f"sliced part: column {c} bucket {b} slice {first} (block {block}): "
                f"{sizes[i]} bytes read, {strides[i]} expected",
                field=f"column[{c}].bucket[{b}].slice[{first}]", offset=int(ranges[i][0]),
                source=self.source,
            )  # fmt: skip
        for c, b in set(zip(columns.tolist(), buckets.tolist(), strict=True)):
            mine = np.flatnonzero((columns == c) & (buckets == b))
            self._take_blocks(c, b, numbers[mine], [chunks[i] for i in mine.tolist()], mine, ranges)
        return int(sizes.sum())

    def _take_blocks(self, c, b, blocks, chunks, where, ranges) -> None:
        """Check the CRC32 of bucket ``b``'s blocks ``blocks`` of column ``c`` (their bytes
        ``chunks``, read for ``ranges[where]``) and keep their slices.

        Raises:
            FormatError: A CRC32 mismatch (naming the slices).
        """
        bucket = self.header.buckets[b]
        payload_bytes, stride = bucket.payload_bytes, bucket.block_stride
        data = np.frombuffer(b"".join(chunks), np.uint8).reshape(len(chunks), stride)
        stored = data[:, payload_bytes:].copy().view("<u4").ravel()
        view = memoryview(data).cast("B")
        computed = np.fromiter(
            (zlib.crc32(view[i * stride : i * stride + payload_bytes]) for i in range(len(chunks))),
            np.uint32,
            len(chunks),
        )
        if (computed != stored).any():
            i = int(np.flatnonzero(computed != stored)[0])
            offset = int(ranges[int(where[i])][0])
            raise _slice_error(bucket, c, b, int(blocks[i]), offset, self.source)
        slices = _unpack_blocks(data[:, :payload_bytes], bucket)
        old = self._fetched.get((c, b))
        if old is not None and old[0].size:
            blocks = np.concatenate((old[0], blocks))
            slices = np.concatenate((old[1], slices))
        blocks, first = _distinct(blocks)
        self._fetched[(c, b)] = (blocks, slices[first])

    def unfetched(self, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Those of ``ranges`` (from :meth:`plan`) not fetched yet: a part probed by several
        conditions reads each block once.

        Raises:
            ValueError: A range that is not one block of this part.
        """
        if not ranges:
            return []
        columns, buckets, numbers = self._blocks_of(ranges)
        missing = np.ones(len(ranges), bool)
        for c, b in set(zip(columns.tolist(), buckets.tolist(), strict=True)):
            held = self._fetched.get((c, b))
            if held is not None:
                here = (columns == c) & (buckets == b)
                missing[here] = ~np.isin(numbers[here], held[0])
        return [ranges[i] for i in np.flatnonzero(missing).tolist()]

    def _blocks_of(self, ranges: list[tuple[int, int]]) -> tuple[np.ndarray, ...]:
        """``(columns, buckets, blocks)``: which block of the part each of ``ranges`` is.

        Raises:
            ValueError: A range that is not one block of this part.
        """
        pairs = np.asarray(ranges, np.int64).reshape(-1, 2)
        offsets, lengths = pairs[:, 0], pairs[:, 1]
        region = np.searchsorted(self._region_starts, offsets, side="right") - 1
        good = region >= 0
        if good.all():
            buckets = self._region_keys[region, 1]
            strides = self._block_strides[buckets]
            blocks, rest = np.divmod(offsets - self._region_starts[region], strides)
            good = (rest == 0) & (blocks < self._block_counts[buckets]) & (lengths == strides)
        if not good.all():
            offset, length = pairs[int(np.flatnonzero(~good)[0])].tolist()
            raise ValueError(f"range ({offset}, {length}) is not one block of the part")
        return self._region_keys[region, 0], buckets, blocks

    def _chosen_buckets(self, granules: np.ndarray | None) -> tuple[np.ndarray, list[int]]:
        count = len(self)
        chosen = np.arange(count) if granules is None else np.asarray(granules, np.int64)
        if granules is None:
            wanted = range(len(self.header.buckets))
        else:
            wanted = sorted(set(self.header.bucket_of[chosen].tolist()))
        return chosen, [b for b in wanted if self.header.buckets[b].width]

    def _slices(self, column: int, bucket: int, positions: np.ndarray) -> np.ndarray:
        """``(len(positions), slice_bytes)``: the fetched slices at ``positions``."""
        entry = self.header.buckets[bucket]
        blocks_wanted = (positions // entry.slices_per_block).astype(np.int64)
        if self._recording is not None:
            self._recording.setdefault((column, bucket), []).append(blocks_wanted)
            return np.zeros((0, entry.slice_bytes), np.uint8)
        blocks, data = self._fetched.get(
            (column, bucket), (np.zeros(0, np.int64), np.zeros((0, 1, 1), np.uint8))
        )
        rows = np.searchsorted(blocks, blocks_wanted)
        rows_clipped = np.minimum(rows, max(0, blocks.size - 1))
        if not blocks.size or (blocks[rows_clipped] != blocks_wanted).any():
            raise LookupError(
                f"{self.source}: column {column} bucket {bucket} needs slices that were not "
                "fetched; plan() the condition and fetch() its ranges first"
            )
        return data[rows_clipped, (positions % entry.slices_per_block).astype(np.int64)]

    def _bits_of(self, bucket: int, packed: np.ndarray) -> np.ndarray:
        """``(rows, members)`` bool from ``(rows, slice_bytes)`` packed member bits."""
        members = self.header.buckets[bucket].member_count
        return np.unpackbits(packed, axis=1, count=members, bitorder="little").view(bool)

    # What needs the filters themselves: decode_part.
    def _unsupported(self, *_args: object, **_kwargs: object) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} answers probes only; decode_part() rebuilds the filters"
        )

    to_bytes = _unsupported
    column_filter_spans = _unsupported
    _gather_column_filters = _unsupported
    _granule_payload = _unsupported
    bits_set = _unsupported


class SlicedBloomFilterGranules(SlicedGranules, BloomFilterGranules):
    """A sliced ``bloom_filter`` part; see :class:`SlicedGranules`."""

    def __init__(
        self,
        header: PartHeader,
        source: str | None = None,
        index_column_types: Sequence[str] | None = None,
    ) -> None:
        Granules.__init__(self, header.definition, index_column_types)
        self._setup(header, source)
        self.distinct_counts = header.distinct_counts

    def hashes_present(
        self, column: int, value_hashes: np.ndarray, granules: np.ndarray | None = None
    ) -> np.ndarray:
        """``out[g, i]``: all k bits of value hash i are set in granule g's filter of ``column``,
        read from the slices (see :meth:`BloomFilterGranules.hashes_present`).

        Raises:
            LookupError: A slice the condition's plan did not fetch.
        """
        from bloomskip import bits, hashing

        self._check_column(column)
        chosen, buckets = self._chosen_buckets(granules)
        values = np.asarray(value_hashes, dtype=np.uint64)
        full = np.ones((len(self), values.size), dtype=bool)
        if not values.size or not len(chosen):
            return full[chosen]
        k = self.definition.hash_functions
        seeds = np.array(bits.BF_HASH_SEEDS[:k], dtype=np.uint64)
        mixed = hashing.hash128_to_64(np.repeat(values, k), np.tile(seeds, values.size))
        mixed = mixed.reshape(values.size, k)
        for b in buckets:
            bucket = self.header.buckets[b]
            positions = mixed % np.uint64(8 * bucket.width)  # (values, k)
            if self._recording is not None:  # planning: which blocks, nothing to answer
                self._slices(column, b, positions.ravel())
                continue
            unique, inverse = _distinct_inverse(positions.ravel())
            slices = self._slices(column, b, unique)
            inverse = inverse.reshape(positions.shape)
            step = max(1, _PROBE_CELLS // max(1, k * bucket.slice_bytes))
            for first in range(0, values.size, step):
                part = inverse[first : first + step]
                anded = np.bitwise_and.reduce(slices[part], axis=1)  # (values, slice_bytes)
                full[bucket.members, first : first + len(part)] = self._bits_of(b, anded).T
        return full[chosen]


class SlicedTextGranules(SlicedGranules, TextGranules):
    """A sliced ``tokenbf_v1`` / ``ngrambf_v1`` / ``sparse_grams`` part; see
    :class:`SlicedGranules`."""

    def __init__(
        self,
        header: PartHeader,
        source: str | None = None,
        index_column_types: Sequence[str] | None = None,
    ) -> None:
        Granules.__init__(self, header.definition, index_column_types)
        self._setup(header, source)

    def filter_sizes(self) -> np.ndarray:
        return np.full(len(self), self.definition.size_bytes, np.int64)

    def token_sets_present(
        self, column: int, token_lists: list[list[bytes]], granules: np.ndarray | None = None
    ) -> np.ndarray:
        """``out[g, a]``: granule g's filter of ``column`` holds every token of alternative a,
        read from the slices (see :meth:`TextGranules.token_sets_present`).

        Raises:
            LookupError: A slice the condition's plan did not fetch.
        """
        from bloomskip import bits

        self._check_column(column)
        chosen, buckets = self._chosen_buckets(granules)
        full = np.ones((len(self), len(token_lists)), dtype=bool)
        unique = sorted({token for tokens in token_lists for token in tokens})
        if not unique or not len(chosen):
            return full[chosen]
        d = self.definition
        positions = bits.pair_positions(unique, d.seed, 8 * d.size_bytes, d.hash_functions)
        for b in buckets:  # one bucket: every text granule has size_bytes
            bucket = self.header.buckets[b]
            distinct, inverse = _distinct_inverse(positions.ravel())
            slices = self._slices(column, b, distinct)
            if self._recording is not None:
                continue
            inverse = inverse.reshape(positions.shape)
            tokens = np.bitwise_and.reduce(slices[inverse], axis=1)  # (tokens, slice_bytes)
            number = {token: i for i, token in enumerate(unique)}
            for a, token_list in enumerate(token_lists):
                if not token_list:
                    continue
                rows = [number[token] for token in token_list]
                anded = np.bitwise_and.reduce(tokens[rows], axis=0)[None, :]
                full[bucket.members, a] = self._bits_of(b, anded)[0]
        return full[chosen]


def _distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``numpy.unique(values, return_index=True)`` of a 1-d array, written out: numpy.unique's
    first call imports numpy.ma, 12-30 ms of a cold query's probe.

    Returns:
        ``(distinct sorted values, index of each one's first occurrence)``.
    """
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    new = np.empty(len(ordered), bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    return ordered[new], order[new]


def _distinct_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``numpy.unique(values, return_inverse=True)`` of a 1-d array (see :func:`_distinct`):
    the distinct sorted values and the index into them of every value."""
    order = np.argsort(values)
    ordered = values[order]
    new = np.empty(len(ordered), bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    where = np.empty(len(values), np.intp)
    where[order] = np.cumsum(new) - 1
    return ordered[new], where


def sliced_granules(
    header: PartHeader,
    source: str | None = None,
    index_column_types: Sequence[str] | None = None,
) -> SlicedBloomFilterGranules | SlicedTextGranules:
    """Granules of a sliced part, with nothing fetched yet.

    Args:
        header: The part's header (:func:`read_part_header`).
        source: Name of the part, for error messages.
        index_column_types: ClickHouse type of each index column, if known.

    Returns:
        A :class:`SlicedBloomFilterGranules` or :class:`SlicedTextGranules`.
    """
    kind = (
        SlicedBloomFilterGranules
        if header.definition.type == "bloom_filter"
        else SlicedTextGranules
    )
    return kind(header, source, index_column_types)


def may_match(
    condition: IndexCondition,
    header: PartHeader,
    read_ranges: ReadRanges,
    source: str | None = None,
) -> np.ndarray:
    """``condition.may_match`` on a sliced part: plan, one ``read_ranges`` call, evaluate.

    Args:
        condition: A condition compiled for the part's index definition.
        header: The part's header.
        read_ranges: Reads ``(offset, length)`` ranges of the part (called at most once).
        source: Name of the part, for error messages.

    Returns:
        One bool per granule; False means the granule can be skipped.

    Raises:
        FormatError: Short reads or a CRC32 mismatch.
        ValueError: A condition for another index definition.
    """
    granules = sliced_granules(header, source)
    granules.fetch(granules.plan(condition), read_ranges)
    return condition.may_match(granules)


def _same_index(condition_for, part_for) -> bool:
    """Whether a condition's index definition is the part's: equal but perhaps for the names
    of its columns, which an Iceberg table may have renamed since the part was written (the
    index follows the column's field id, docs/tables.md)."""
    functions = [item.function for item in condition_for.index_columns]
    return functions == [item.function for item in part_for.index_columns] and (
        replace(condition_for, expressions=part_for.expressions) == part_for
    )
